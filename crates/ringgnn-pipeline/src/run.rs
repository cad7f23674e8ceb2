//! [`Run`]: the workers of one pipeline run and the consumer's end of its reorder window.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{JobSource, Stage, WorkerFailed};

/// How a run is carried out.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Worker threads (fewer when the source knows it has fewer jobs).
    pub threads: NonZeroUsize,
    /// Finished outputs the workers may hold ahead of the consumer (see the crate docs).
    pub window: NonZeroUsize,
    /// Thread names are `{name}-{i}`.
    pub name: String,
    /// Incremented by every worker while it lives (shared across runs by the caller, e.g. to
    /// show that dropped runs leave no thread behind).
    pub live: Arc<AtomicUsize>,
}

impl RunOptions {
    pub fn new(threads: NonZeroUsize, window: NonZeroUsize, name: &str) -> Self {
        RunOptions {
            threads,
            window,
            name: name.to_string(),
            live: Arc::new(AtomicUsize::new(0)),
        }
    }
}

struct Window<O, E> {
    next_to_yield: usize,
    done: BTreeMap<usize, Result<O, E>>,
    peak: usize,
    /// The number of slots, once the source is exhausted.
    end: Option<usize>,
}

/// What the consumer and the workers of one run share.
struct Shared<O, E> {
    window: Mutex<Window<O, E>>,
    /// Signalled when an output is deposited or the end is known (the consumer waits on it).
    ready: Condvar,
    /// Signalled when the consumer takes an output or the run stops (workers wait on it).
    space: Condvar,
    stop: Arc<AtomicBool>,
    depth: usize,
    live: Arc<AtomicUsize>,
}

impl<O, E> Shared<O, E> {
    fn lock(&self) -> MutexGuard<'_, Window<O, E>> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Wait until `slot` is within `depth` of the consumer; false if the run stopped.
    fn wait_within(&self, slot: usize, depth: usize) -> bool {
        let mut w = self.lock();
        while slot >= w.next_to_yield.saturating_add(depth) && !self.stopped() {
            w = self.space.wait(w).unwrap_or_else(|e| e.into_inner());
        }
        !self.stopped()
    }

    fn deposit(&self, slot: usize, r: Result<O, E>) {
        let mut w = self.lock();
        w.done.insert(slot, r);
        w.peak = w.peak.max(w.done.len());
        self.ready.notify_all();
    }

    fn set_end(&self, end: usize) {
        let mut w = self.lock();
        w.end = Some(w.end.map_or(end, |e| e.min(end)));
        self.ready.notify_all();
    }
}

/// A stage's handle on the slots of the job it is doing.
pub struct Emit<'a, O, E> {
    shared: &'a Shared<O, E>,
    start: usize,
    next: usize,
    end: usize,
}

impl<O, E> Emit<'_, O, E> {
    /// The slots of this job.
    pub fn slots(&self) -> Range<usize> {
        self.start..self.end
    }

    /// The slot the next [`Self::emit`] fills.
    pub fn next_slot(&self) -> usize {
        self.next
    }

    /// Hand the consumer the output of the next slot of this job.
    pub fn emit(&mut self, item: Result<O, E>) {
        debug_assert!(
            self.next < self.end,
            "emit: every slot of the job is filled"
        );
        if self.next < self.end {
            self.shared.deposit(self.next, item);
            self.next += 1;
        }
    }

    /// Block until the next slot is among the next `depth` (at least 1) outputs the consumer
    /// will take; `false` if the run was stopped meanwhile. The slot the consumer waits for
    /// never waits here, so this cannot deadlock, whatever the consumer holds.
    pub fn wait_turn(&self, depth: usize) -> bool {
        self.shared.wait_within(self.next, depth.max(1))
    }

    /// Whether the run is being stopped (its outputs will not be used).
    pub fn stopped(&self) -> bool {
        self.shared.stopped()
    }

    /// End this job with `e` as the output of its next slot (nothing if all are filled).
    fn fail(&mut self, e: E) {
        if self.next < self.end {
            self.emit(Err(e));
        }
    }
}

/// What [`Run::next_within`] found.
pub enum Next<T> {
    /// The next output (or the error that ends the run).
    Item(T),
    /// The run is over.
    End,
    /// The next output was not ready in time; ask again.
    NotYet,
}

/// The outputs of one run, in slot order (see the crate docs). Dropping it stops the workers
/// and joins them. After an error it ends.
pub struct Run<O, E> {
    shared: Arc<Shared<O, E>>,
    workers: Vec<JoinHandle<()>>,
    next: usize,
    finished: bool,
}

impl<O: Send + 'static, E: From<WorkerFailed> + Send + 'static> Run<O, E> {
    /// Start the workers of `stage` on the jobs of `source`.
    pub fn start<S, Src>(stage: Arc<S>, source: Src, opts: RunOptions) -> Result<Self, E>
    where
        S: Stage<Output = O, Error = E>,
        Src: JobSource<Job = S::Job>,
    {
        let threads = match source.jobs_left() {
            Some(n) => opts.threads.get().min(n),
            None => opts.threads.get(),
        };
        let shared = Arc::new(Shared {
            window: Mutex::new(Window {
                next_to_yield: 0,
                done: BTreeMap::new(),
                peak: 0,
                end: (threads == 0).then_some(0),
            }),
            ready: Condvar::new(),
            space: Condvar::new(),
            stop: Arc::new(AtomicBool::new(false)),
            depth: opts.window.get(),
            live: opts.live.clone(),
        });
        let source = Arc::new(Mutex::new((source, 0usize)));
        let mut run = Run {
            shared,
            workers: Vec::with_capacity(threads),
            next: 0,
            finished: false,
        };
        for i in 0..threads {
            let (stage, source, shared) = (stage.clone(), source.clone(), run.shared.clone());
            shared.live.fetch_add(1, Ordering::SeqCst);
            let spawned = std::thread::Builder::new()
                .name(format!("{}-{i}", opts.name))
                .spawn(move || worker(&*stage, &source, &shared));
            match spawned {
                Ok(h) => run.workers.push(h),
                Err(e) => {
                    run.shared.live.fetch_sub(1, Ordering::SeqCst);
                    // Dropping `run` stops and joins the workers already started.
                    return Err(WorkerFailed {
                        slot: 0,
                        msg: format!("cannot start a worker thread: {e}"),
                    }
                    .into());
                }
            }
        }
        Ok(run)
    }
}

impl<O, E> Run<O, E> {
    /// The most outputs seen finished and not yet consumed at once: for tests and tuning.
    pub fn peak_queued(&self) -> usize {
        self.shared.lock().peak
    }

    /// Outputs taken so far.
    pub fn taken(&self) -> usize {
        self.next
    }

    /// [`Iterator::next`] that gives up after `timeout`, so a caller can do something else
    /// while it waits (the Python binding checks for Ctrl-C) and then ask again.
    pub fn next_within(&mut self, timeout: Duration) -> Next<Result<O, E>> {
        self.next_until(Some(Instant::now() + timeout))
    }

    fn next_until(&mut self, deadline: Option<Instant>) -> Next<Result<O, E>> {
        if self.finished {
            return Next::End;
        }
        let slot = self.next;
        let r = {
            let mut w = self.shared.lock();
            let r = loop {
                if let Some(r) = w.done.remove(&slot) {
                    break r;
                }
                if w.end.is_some_and(|e| slot >= e) {
                    drop(w);
                    self.finish();
                    return Next::End;
                }
                w = match deadline {
                    None => self.shared.ready.wait(w).unwrap_or_else(|e| e.into_inner()),
                    Some(d) => {
                        let left = d.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            return Next::NotYet;
                        }
                        self.shared
                            .ready
                            .wait_timeout(w, left)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                };
            };
            w.next_to_yield = slot + 1;
            r
        };
        self.shared.space.notify_all();
        self.next += 1;
        if r.is_err() {
            self.finish();
        }
        Next::Item(r)
    }

    fn finish(&mut self) {
        self.finished = true;
        self.shared.stop.store(true, Ordering::SeqCst);
        // Under the lock, so that no worker checks `stop` and then misses the wake-up.
        drop(self.shared.lock());
        self.shared.space.notify_all();
        for h in self.workers.drain(..) {
            // A worker's panic has already been reported as the output of its slot.
            let _ = h.join();
        }
    }
}

impl<O, E> Iterator for Run<O, E> {
    type Item = Result<O, E>;

    fn next(&mut self) -> Option<Result<O, E>> {
        match self.next_until(None) {
            Next::Item(i) => Some(i),
            Next::End | Next::NotYet => None,
        }
    }
}

impl<O, E> Drop for Run<O, E> {
    fn drop(&mut self) {
        if !self.finished {
            self.finish();
        }
    }
}

/// Counts a worker out when it ends, however it ends.
struct Live<'a>(&'a AtomicUsize);

impl Drop for Live<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    format!("the thread panicked ({what}); this is a bug in ringgnn, please report it")
}

type Claim<Src> = Mutex<(Src, usize)>;

fn worker<S, Src>(stage: &S, source: &Claim<Src>, shared: &Shared<S::Output, S::Error>)
where
    S: Stage,
    Src: JobSource<Job = S::Job>,
{
    let _live = Live(&shared.live);
    let mut state: Option<S::State> = None;
    loop {
        if shared.stopped() {
            return;
        }
        let claim = {
            let mut g = source.lock().unwrap_or_else(|e| e.into_inner());
            let (src, claimed) = &mut *g;
            let first = *claimed;
            match catch_unwind(AssertUnwindSafe(|| src.next_job())) {
                Ok(Some((job, n))) => {
                    *claimed += n.max(1);
                    Ok(Some((job, first, n.max(1))))
                }
                Ok(None) => Ok(None),
                Err(p) => {
                    *claimed += 1;
                    Err((first, panic_message(p)))
                }
            }
        };
        let (job, first, n) = match claim {
            Ok(Some(c)) => c,
            Ok(None) => {
                let claimed = source.lock().unwrap_or_else(|e| e.into_inner()).1;
                shared.set_end(claimed);
                return;
            }
            Err((slot, msg)) => {
                shared.deposit(slot, Err(WorkerFailed { slot, msg }.into()));
                shared.set_end(slot + 1);
                return;
            }
        };
        if !shared.wait_within(first, shared.depth) {
            return;
        }
        let mut emit = Emit {
            shared,
            start: first,
            next: first,
            end: first + n,
        };
        if state.is_none() {
            match catch_unwind(AssertUnwindSafe(|| stage.start(&shared.stop))) {
                Ok(Ok(s)) => state = Some(s),
                Ok(Err(e)) => return emit.fail(e),
                Err(p) => {
                    let msg = panic_message(p);
                    return emit.fail(WorkerFailed { slot: first, msg }.into());
                }
            }
        }
        let st = state.as_mut().expect("made above");
        match catch_unwind(AssertUnwindSafe(|| stage.run(st, job, &mut emit))) {
            Ok(Ok(())) if emit.next == emit.end => {}
            Ok(Ok(())) => {
                let msg = format!(
                    "the stage emitted {} of its job's {n} outputs; this is a bug in ringgnn, \
                     please report it",
                    emit.next - emit.start
                );
                let slot = emit.next;
                return emit.fail(WorkerFailed { slot, msg }.into());
            }
            // Its state (a read backend) may be broken; the consumer stops at this slot anyway.
            Ok(Err(e)) => return emit.fail(e),
            Err(p) => {
                let (slot, msg) = (emit.next, panic_message(p));
                return emit.fail(WorkerFailed { slot, msg }.into());
            }
        }
    }
}
