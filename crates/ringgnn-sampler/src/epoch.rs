//! One epoch on worker threads: [`EpochIter`]. Each worker makes its own sampler (and read
//! backend, so its own ring) inside its thread, takes the next batch index from a shared
//! counter and samples whole mini-batches; the only shared state is that counter and the
//! reorder window where finished batches wait for their turn.
//!
//! The window is the backpressure: a worker holding batch `b >= next_to_yield + prefetch` waits
//! before sampling it, so at most `prefetch` batches are ever finished and not yet consumed,
//! whatever the speed of the consumer. The batch the consumer waits for is always held by a
//! running worker (indices are handed out in order and lie inside the window), so the wait
//! always ends.
//!
//! What a worker does with a batch after sampling it is a [`BatchWork`]: [`SampleOnly`] hands
//! the sample on; the loader (`ringgnn-loader`) gathers the batch's feature rows in the same
//! worker, so sampling and gathering of later batches overlap with the consumer's training and
//! the window bounds the gathered batches too.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::pool::{Shared, Tracked};
use crate::{Error, Result, SampledSubgraph};

/// One mini-batch of an epoch: its index, its seeds (after the shuffle) and its sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub index: u64,
    pub seeds: Vec<u64>,
    pub sample: SampledSubgraph,
}

/// The second stage of an epoch's workers: what happens to a batch after it is sampled, on the
/// same thread. [`start`](Self::start) makes the per-worker state (read backend, buffers) on the
/// worker's own thread, on its first batch; [`finish`](Self::finish) turns each sampled batch
/// into the epoch's item. `finish` should return early (with any error) once `stop` is set:
/// the epoch is being dropped and its result will not be used. [`Turn::wait`] bounds how far
/// ahead of the consumer a costly part of `finish` (a large output buffer) may run, tighter
/// than the epoch's prefetch.
pub trait BatchWork: Send + Sync + 'static {
    type State;
    type Output: Send + 'static;
    type Error: From<Error> + Send + 'static;
    fn start(&self, stop: &Arc<AtomicBool>) -> Result<Self::State, Self::Error>;
    fn finish(
        &self,
        state: &mut Self::State,
        batch: Batch,
        sampled_in: Duration,
        turn: &Turn<'_>,
    ) -> Result<Self::Output, Self::Error>;
}

/// Lets [`BatchWork::finish`] wait until its batch is close enough to the consumer.
pub struct Turn<'a> {
    wait: &'a dyn Fn(usize) -> bool,
}

impl Turn<'_> {
    /// Block until this batch is among the next `depth` (at least 1) the consumer will take;
    /// `false` if the epoch was stopped meanwhile. The batch the consumer waits for never waits
    /// here, so this cannot deadlock, whatever the consumer keeps.
    pub fn wait(&self, depth: usize) -> bool {
        (self.wait)(depth.max(1))
    }
}

/// The plain sampling epoch: each item is the sampled [`Batch`].
pub struct SampleOnly;

impl BatchWork for SampleOnly {
    type State = ();
    type Output = Batch;
    type Error = Error;
    fn start(&self, _: &Arc<AtomicBool>) -> Result<()> {
        Ok(())
    }
    fn finish(&self, _: &mut (), batch: Batch, _: Duration, _: &Turn<'_>) -> Result<Batch> {
        Ok(batch)
    }
}

type Item<W> = Result<<W as BatchWork>::Output, <W as BatchWork>::Error>;

struct Window<W: BatchWork> {
    next_to_yield: usize,
    done: BTreeMap<usize, Item<W>>,
    peak: usize,
}

/// What the consumer and the workers of one epoch share.
struct Queue<W: BatchWork> {
    work: Arc<W>,
    pool: Arc<Shared>,
    seeds: Vec<u64>,
    batch_size: usize,
    len: usize,
    epoch: u64,
    prefetch: usize,
    next_batch: AtomicUsize,
    stop: Arc<AtomicBool>,
    window: Mutex<Window<W>>,
    /// Signalled when a batch is finished (the consumer waits on it).
    ready: Condvar,
    /// Signalled when the consumer takes a batch or the epoch stops (workers wait on it).
    space: Condvar,
}

impl<W: BatchWork> Queue<W> {
    fn lock(&self) -> MutexGuard<'_, Window<W>> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn seeds_of(&self, b: usize) -> &[u64] {
        let start = b * self.batch_size;
        &self.seeds[start..(start + self.batch_size).min(self.seeds.len())]
    }

    /// Wait until batch `b` is within `depth` of the consumer; false if stopped.
    fn wait_within(&self, b: usize, depth: usize) -> bool {
        let mut w = self.lock();
        while b >= w.next_to_yield + depth && !self.stop.load(Ordering::SeqCst) {
            w = self.space.wait(w).unwrap_or_else(|e| e.into_inner());
        }
        !self.stop.load(Ordering::SeqCst)
    }

    fn deposit(&self, b: usize, r: Item<W>) {
        let mut w = self.lock();
        w.done.insert(b, r);
        w.peak = w.peak.max(w.done.len());
        self.ready.notify_all();
    }
}

/// The batches of one epoch, in order, sampled (and finished by `W`) on worker threads (see
/// the module docs). Dropping it stops the workers (each finishes or abandons its current
/// batch) and joins them. After an error the iterator ends.
pub struct EpochIter<W: BatchWork = SampleOnly> {
    queue: Arc<Queue<W>>,
    workers: Vec<JoinHandle<()>>,
    next: usize,
    finished: bool,
}

impl<W: BatchWork> EpochIter<W> {
    pub(crate) fn start(
        pool: Arc<Shared>,
        work: Arc<W>,
        seeds: Vec<u64>,
        batch_size: usize,
        epoch: u64,
        drop_last: bool,
    ) -> Result<Self> {
        let len = if drop_last {
            seeds.len() / batch_size
        } else {
            seeds.len().div_ceil(batch_size)
        };
        let threads = pool.cfg.threads.min(len);
        let queue = Arc::new(Queue {
            work,
            prefetch: pool.cfg.prefetch,
            pool,
            seeds,
            batch_size,
            len,
            epoch,
            next_batch: AtomicUsize::new(0),
            stop: Arc::new(AtomicBool::new(false)),
            window: Mutex::new(Window {
                next_to_yield: 0,
                done: BTreeMap::new(),
                peak: 0,
            }),
            ready: Condvar::new(),
            space: Condvar::new(),
        });
        let mut it = EpochIter {
            queue,
            workers: Vec::with_capacity(threads),
            next: 0,
            finished: false,
        };
        for i in 0..threads {
            let q = it.queue.clone();
            q.pool.live.fetch_add(1, Ordering::SeqCst);
            let spawned = std::thread::Builder::new()
                .name(format!("ringgnn-sampler-{i}"))
                .spawn(move || worker(q));
            match spawned {
                Ok(h) => it.workers.push(h),
                Err(source) => {
                    it.queue.pool.live.fetch_sub(1, Ordering::SeqCst);
                    // Dropping `it` stops and joins the workers already started.
                    return Err(Error::Worker {
                        batch: 0,
                        msg: format!("cannot start a worker thread: {source}"),
                    });
                }
            }
        }
        Ok(it)
    }

    /// Number of batches in the epoch (not the number left).
    pub fn len(&self) -> usize {
        self.queue.len
    }

    pub fn is_empty(&self) -> bool {
        self.queue.len == 0
    }

    /// The most batches seen finished and not yet consumed at once (never more than the
    /// prefetch): for tests and tuning.
    pub fn peak_queued(&self) -> usize {
        self.queue.lock().peak
    }

    fn finish(&mut self) {
        self.finished = true;
        self.queue.stop.store(true, Ordering::SeqCst);
        // Under the lock, so that no worker checks `stop` and then misses the wake-up.
        drop(self.queue.lock());
        self.queue.space.notify_all();
        for h in self.workers.drain(..) {
            // A worker's panic has already been reported as an error of its batch.
            let _ = h.join();
        }
    }
}

impl<W: BatchWork> Iterator for EpochIter<W> {
    type Item = Item<W>;

    fn next(&mut self) -> Option<Item<W>> {
        match self.next_until(None) {
            Next::Item(i) => Some(i),
            Next::End | Next::NotYet => None,
        }
    }
}

/// What [`EpochIter::next_within`] found.
pub enum Next<T> {
    /// The next batch (or the error that ends the epoch).
    Item(T),
    /// The epoch is over.
    End,
    /// The next batch was not ready in time; ask again.
    NotYet,
}

impl<W: BatchWork> EpochIter<W> {
    /// [`Iterator::next`] that gives up after `timeout`, so a caller can do something else
    /// while it waits (the Python binding checks for Ctrl-C) and then ask again.
    pub fn next_within(&mut self, timeout: std::time::Duration) -> Next<Item<W>> {
        self.next_until(Some(Instant::now() + timeout))
    }

    fn next_until(&mut self, deadline: Option<Instant>) -> Next<Item<W>> {
        if self.finished {
            return Next::End;
        }
        if self.next >= self.queue.len {
            self.finish();
            return Next::End;
        }
        let b = self.next;
        let r = {
            let mut w = self.queue.lock();
            let r = loop {
                if let Some(r) = w.done.remove(&b) {
                    break r;
                }
                w = match deadline {
                    None => self.queue.ready.wait(w).unwrap_or_else(|e| e.into_inner()),
                    Some(d) => {
                        let left = d.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            return Next::NotYet;
                        }
                        self.queue
                            .ready
                            .wait_timeout(w, left)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                };
            };
            w.next_to_yield = b + 1;
            r
        };
        self.queue.space.notify_all();
        self.next += 1;
        match r {
            Ok(out) => Next::Item(Ok(out)),
            Err(e) => {
                self.finish();
                Next::Item(Err(e))
            }
        }
    }
}

impl<W: BatchWork> Drop for EpochIter<W> {
    fn drop(&mut self) {
        if !self.finished {
            self.finish();
        }
    }
}

/// Reports the batch a worker holds as failed if the worker unwinds before finishing it, so the
/// consumer never waits for a batch that will not come; and counts the worker out when it ends.
struct Holding<'a, W: BatchWork> {
    q: &'a Queue<W>,
    batch: Option<usize>,
}

impl<W: BatchWork> Drop for Holding<'_, W> {
    fn drop(&mut self) {
        if let Some(b) = self.batch.take() {
            let msg = "the thread panicked (a bug in ringgnn, please report it)".to_string();
            self.q.deposit(
                b,
                Err(Error::Worker {
                    batch: b as u64,
                    msg,
                }
                .into()),
            );
        }
        self.q.pool.live.fetch_sub(1, Ordering::SeqCst);
    }
}

fn worker<W: BatchWork>(q: Arc<Queue<W>>) {
    let mut hold = Holding { q: &q, batch: None };
    let mut sampler: Option<Tracked> = None;
    let mut state: Option<W::State> = None;
    loop {
        if q.stop.load(Ordering::SeqCst) {
            return;
        }
        let b = q.next_batch.fetch_add(1, Ordering::SeqCst);
        if b >= q.len {
            return;
        }
        if !q.wait_within(b, q.prefetch) {
            return;
        }
        hold.batch = Some(b);
        let r = run_batch(&q, b, &mut sampler, &mut state);
        hold.batch = None;
        let failed = r.is_err();
        q.deposit(b, r);
        if failed {
            // Its backend may be broken; the consumer stops at this batch anyway.
            return;
        }
    }
}

/// Sample batch `b` and finish it, making the sampler and the work's state on first use.
fn run_batch<W: BatchWork>(
    q: &Queue<W>,
    b: usize,
    sampler: &mut Option<Tracked>,
    state: &mut Option<W::State>,
) -> Item<W> {
    let t0 = Instant::now();
    let seeds = q.seeds_of(b);
    let sample = match sampler {
        Some(s) => s.sample(&q.pool, seeds, q.epoch, b as u64),
        None => q
            .pool
            .new_sampler()
            .and_then(|s| sampler.insert(s).sample(&q.pool, seeds, q.epoch, b as u64)),
    }?;
    let sampled_in = t0.elapsed();
    let state = match state {
        Some(s) => s,
        None => state.insert(q.work.start(&q.stop)?),
    };
    let batch = Batch {
        index: b as u64,
        seeds: seeds.to_vec(),
        sample,
    };
    let wait = |depth: usize| q.wait_within(b, depth);
    q.work
        .finish(state, batch, sampled_in, &Turn { wait: &wait })
}
