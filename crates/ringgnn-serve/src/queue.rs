//! [`Queue`]: the one queue of both engines ([`crate::Engine`], [`crate::HeteroEngine`]):
//! admission (a bounded queue, [`ServeError::Busy`] beyond it), waves, deadlines, cancellation,
//! the wait for company (`max_wait`), the room held in turn for a request larger than a wave,
//! the counters, and the drain on close. What a wave *is* (which backends, how its requests are
//! sampled and gathered together) is the engine's, through [`Waves`].
//!
//! There are no engine threads. A worker is a set of read backends; the queue holds the free
//! ones. A caller queues its request and, if a worker is free, leads a wave with it on its own
//! thread: it waits up to `max_wait` for company, serves what it took from the queue, and hands
//! the worker to the first caller still waiting (or puts it back). An idle server thus answers a
//! request on the thread that received it, with no hand-over to another thread and back; a busy
//! one batches whatever queued while its workers were out.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ringgnn_io::PageCache;

use crate::latency::Histogram;
use crate::{EngineStats, Result, ServeError};

/// A flag a caller sets to give a request up (a gRPC client that went away): a request not yet
/// in a wave is dropped, and its caller returns [`ServeError::Cancelled`] within 10 ms.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;

/// How often a caller waiting for its answer looks at its cancel token.
pub(crate) const POLL: Duration = Duration::from_millis(10);

/// How close to its deadline a cancelled call counts as past it (see `Queue::gave_up`).
pub(crate) const DEADLINE_SLACK: Duration = Duration::from_millis(20);

/// What an engine's waves are: its work, its answers, its workers, and how it serves a wave.
pub(crate) trait Waves: Sized {
    type Work;
    type Answer;
    type Worker;

    /// Whether `work` is a sampling request (its cost counts sampled edges) rather than a
    /// feature request (its cost counts rows).
    fn is_sample(work: &Self::Work) -> bool;

    /// Whether `next` may join the wave of `taken` (the engine's rule of what shares one
    /// sampling pass); a job that may not stays queued, in its place, for a later wave.
    fn joins(&self, _taken: &[Job<Self>], _next: &Self::Work) -> bool {
        true
    }

    /// Answer every job of `wave` (each through [`Job::answer`], or [`Queue::fail`]); `large`
    /// when the wave is larger than the plan's (a request answered in the room).
    fn serve(&self, w: &mut Self::Worker, wave: Vec<Job<Self>>, large: bool);
}

/// How the queue takes and batches requests.
#[derive(Clone, Debug)]
pub(crate) struct QueueOptions {
    /// How long the caller leading a wave waits for others to join it.
    pub max_wait: Duration,
    /// Requests in one wave.
    pub max_wave: NonZeroUsize,
    /// Requests waiting for a worker; one more is refused with [`ServeError::Busy`].
    pub queue: NonZeroUsize,
    /// What one wave may hold, by the upper bounds of its requests: sampled edges, and feature
    /// rows. A request beyond it is answered alone, in the room.
    pub wave_edges: u64,
    pub wave_rows: u64,
}

/// Where a leader puts a request's answer, or hands its caller a worker, and the caller waits.
struct Slot<S: Waves> {
    state: Mutex<SlotState<S>>,
    ready: Condvar,
}

struct SlotState<S: Waves> {
    answer: Option<Result<S::Answer>>,
    /// A worker handed to this caller, to lead the next wave with.
    lead: Option<S::Worker>,
    /// The caller gave up: hand it nothing.
    gone: bool,
}

impl<S: Waves> Slot<S> {
    fn new() -> Self {
        Slot {
            state: Mutex::new(SlotState {
                answer: None,
                lead: None,
                gone: false,
            }),
            ready: Condvar::new(),
        }
    }

    fn put(&self, a: Result<S::Answer>) {
        lock(&self.state).answer = Some(a);
        self.ready.notify_one();
    }

    /// Answer `DeadlineExceeded` unless the caller gave up first; whether it did not (the
    /// one that answers counts it, so each request is counted once).
    fn expire(&self) -> bool {
        let mut st = lock(&self.state);
        if st.gone || st.answer.is_some() {
            return false;
        }
        st.answer = Some(Err(ServeError::DeadlineExceeded));
        drop(st);
        self.ready.notify_one();
        true
    }
}

/// What a waiting caller got.
enum Waited<S: Waves> {
    Answer(Result<S::Answer>),
    Lead(S::Worker),
}

/// A queued request.
pub(crate) struct Job<S: Waves> {
    pub work: S::Work,
    /// Upper bound of what it costs a wave: sampled edges, or feature rows.
    pub cost: u64,
    arrived: Instant,
    deadline: Option<Instant>,
    cancel: CancelToken,
    slot: Arc<Slot<S>>,
}

impl<S: Waves> Job<S> {
    pub fn answer(&self, a: Result<S::Answer>) {
        self.slot.put(a);
    }
}

impl<S: Waves> Drop for Job<S> {
    /// No request is left unanswered: one dropped without an answer (its wave's worker
    /// panicked) gets an internal error, unless its caller gave it up.
    fn drop(&mut self) {
        let mut st = lock(&self.slot.state);
        if st.answer.is_none() && !st.gone && !self.cancel.is_cancelled() {
            st.answer = Some(Err(ServeError::Internal(
                "the request's wave failed (a bug: the server's log has the panic); other \
                 requests are still served"
                    .into(),
            )));
            drop(st);
            self.slot.ready.notify_one();
        }
    }
}

struct State<S: Waves> {
    jobs: VecDeque<Job<S>>,
    /// Workers no caller holds: a caller that finds one leads a wave with it.
    free: Vec<S::Worker>,
    /// Workers dropped because their wave panicked (their state is not trusted again).
    lost: usize,
    /// Workers it was given (free, out, or lost).
    workers: usize,
    closed: bool,
}

/// The counters every engine keeps (the rest of [`EngineStats`] is its reads).
#[derive(Default)]
pub(crate) struct Counters {
    pub sample_requests: AtomicU64,
    pub feature_requests: AtomicU64,
    waves: AtomicU64,
    wave_requests: AtomicU64,
    busy: AtomicU64,
    deadline_exceeded: AtomicU64,
    cancelled: AtomicU64,
    failed: AtomicU64,
    latency: Histogram,
}

/// The memory one request larger than a wave is answered in, taken in turn: `bytes`, lent by
/// hot neighbor pages (`pages`: each cache and its slots to lend) or held in the caller's
/// reserve.
pub(crate) struct Room {
    pub bytes: u64,
    pub pages: Vec<(Arc<PageCache>, u64)>,
    busy: Mutex<bool>,
    freed: Condvar,
}

impl Room {
    pub fn new(bytes: u64, pages: Vec<(Arc<PageCache>, u64)>) -> Self {
        Room {
            bytes,
            pages,
            busy: Mutex::new(false),
            freed: Condvar::new(),
        }
    }
}

/// The room held by one large request; dropped once its caller is done with the answer:
/// the memory it freed goes back to the system first, then the slots to the page caches.
pub(crate) struct Lease(Arc<Room>);

impl Drop for Lease {
    fn drop(&mut self) {
        ringgnn_io::release_free_memory();
        for (c, _) in &self.0.pages {
            c.give_back();
        }
        *lock(&self.0.busy) = false;
        self.0.freed.notify_one();
    }
}

/// The queue, its free workers and its counters; see the module docs.
pub(crate) struct Queue<S: Waves> {
    state: Mutex<State<S>>,
    changed: Condvar,
    opts: QueueOptions,
    room: Arc<Room>,
    counters: Counters,
}

impl<S: Waves> Queue<S> {
    pub fn new(opts: QueueOptions, workers: Vec<S::Worker>, room: Room) -> Self {
        Queue {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                workers: workers.len(),
                free: workers,
                lost: 0,
                closed: false,
            }),
            changed: Condvar::new(),
            opts,
            room: Arc::new(room),
            counters: Counters::default(),
        }
    }

    /// Add `workers` to those the queue was made with (an engine that makes its workers after
    /// the queue).
    pub fn give(&self, workers: Vec<S::Worker>) {
        let mut q = lock(&self.state);
        q.workers += workers.len();
        q.free.extend(workers);
        drop(q);
        self.changed.notify_all();
    }

    pub fn room(&self) -> &Room {
        &self.room
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Whether a request of `cost` is larger than a wave (it is answered alone, in the room).
    pub fn is_large(&self, sample: bool, cost: u64) -> bool {
        cost > if sample {
            self.opts.wave_edges
        } else {
            self.opts.wave_rows
        }
    }

    /// Queue `work` of `cost` and wait for its answer (see [`Self::submit`]); a request larger
    /// than a wave first takes the room in turn, and the lease returned holds it until dropped
    /// (after the caller has encoded the answer).
    pub fn call(
        &self,
        s: &S,
        work: S::Work,
        cost: u64,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> Result<(S::Answer, Option<Lease>)> {
        let large = self.is_large(S::is_sample(&work), cost);
        let lease = self.room_for(large, deadline, cancel.as_ref())?;
        Ok((self.submit(s, work, cost, deadline, cancel)?, lease))
    }

    /// For a request larger than a wave (`large`), the room, once no other such request holds
    /// it (by `deadline`, unless `cancel` is set first); nothing otherwise.
    fn room_for(
        &self,
        large: bool,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<Lease>> {
        if !large {
            return Ok(None);
        }
        let room = &self.room;
        let mut busy = lock(&room.busy);
        while *busy {
            let now = Instant::now();
            if let Some(e) = self.gave_up(now, deadline, cancel.is_some_and(|c| c.is_cancelled())) {
                return Err(e);
            }
            let step = deadline.map_or(POLL, |d| (d - now).min(POLL));
            busy = room
                .freed
                .wait_timeout(busy, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *busy = true;
        drop(busy);
        for (c, pages) in &room.pages {
            c.lend(*pages);
        }
        Ok(Some(Lease(room.clone())))
    }

    /// Queue `work`, then either serve a wave with a free worker (on the caller's own thread:
    /// no hand-over while the server is idle) or wait for a leader to answer it or to hand this
    /// caller a worker; give up at `deadline` or once `cancel` is set.
    fn submit(
        &self,
        s: &S,
        work: S::Work,
        cost: u64,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> Result<S::Answer> {
        let now = Instant::now();
        if let Some(e) = self.gave_up(now, deadline, false) {
            return Err(e);
        }
        let cancel = cancel.unwrap_or_default();
        let slot = Arc::new(Slot::new());
        let mut worker = {
            let mut q = lock(&self.state);
            if q.closed {
                return Err(ServeError::ShuttingDown);
            }
            if q.lost == q.workers {
                return Err(ServeError::Internal(
                    "every worker of this server failed (a bug: the server's log has the \
                     panics); restart it"
                        .into(),
                ));
            }
            if q.jobs.len() >= self.opts.queue.get() {
                self.counters.busy.fetch_add(1, Ordering::Relaxed);
                return Err(ServeError::Busy(q.jobs.len()));
            }
            q.jobs.push_back(Job {
                work,
                cost,
                arrived: now,
                deadline,
                cancel: cancel.clone(),
                slot: slot.clone(),
            });
            q.free.pop()
        };
        self.changed.notify_all();
        loop {
            if let Some(w) = worker.take() {
                self.lead(s, w, deadline, &cancel);
            }
            match self.wait(&slot, deadline, &cancel) {
                Waited::Answer(a) => {
                    if a.is_ok() {
                        self.counters.latency.record(now.elapsed());
                    }
                    return a;
                }
                Waited::Lead(w) => worker = Some(w),
            }
        }
    }

    /// Whether a waiting caller gives up at `now`, and why, counted: its deadline has passed, or
    /// it was cancelled. A gRPC client cancels the call at its own deadline, which reaches the
    /// server within moments of the server's copy of that deadline: a cancel that comes within
    /// [`DEADLINE_SLACK`] of the deadline is the deadline, not the caller leaving.
    fn gave_up(
        &self,
        now: Instant,
        deadline: Option<Instant>,
        cancelled: bool,
    ) -> Option<ServeError> {
        let slack = if cancelled {
            DEADLINE_SLACK
        } else {
            Duration::ZERO
        };
        if deadline.is_some_and(|d| now + slack >= d) {
            self.counters
                .deadline_exceeded
                .fetch_add(1, Ordering::Relaxed);
            return Some(ServeError::DeadlineExceeded);
        }
        if cancelled {
            self.counters.cancelled.fetch_add(1, Ordering::Relaxed);
            return Some(ServeError::Cancelled);
        }
        None
    }

    /// Wait for the answer in `slot`, or a worker handed to this caller. On the deadline or a
    /// cancel, mark the job given up, take it out of the queue if it is still there (its place
    /// is free at once), and return the error.
    fn wait(
        &self,
        slot: &Arc<Slot<S>>,
        deadline: Option<Instant>,
        cancel: &CancelToken,
    ) -> Waited<S> {
        let mut st = lock(&slot.state);
        let gave_up = loop {
            if let Some(w) = st.lead.take() {
                // Handed a worker: lead a wave first (even when about to give up), so that the
                // queue never waits while a worker sits idle.
                return Waited::Lead(w);
            }
            if let Some(r) = st.answer.take() {
                return Waited::Answer(r);
            }
            let now = Instant::now();
            if let Some(e) = self.gave_up(now, deadline, cancel.is_cancelled()) {
                cancel.cancel();
                break e;
            }
            let step = deadline.map_or(POLL, |d| (d - now).min(POLL));
            st = slot
                .ready
                .wait_timeout(st, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        st.gone = true;
        drop(st);
        let mut q = lock(&self.state);
        q.jobs.retain(|j| !Arc::ptr_eq(&j.slot, slot));
        drop(q);
        self.changed.notify_all();
        Waited::Answer(Err(gave_up))
    }

    /// Serve one wave with `w`: wait up to `max_wait` from the first queued job's arrival for
    /// others (while the wave is not full, and no longer than the leading caller's own deadline
    /// or cancel), take jobs in arrival order while they fit, answer them, then hand `w` to the
    /// first caller still waiting for one (or put it back).
    fn lead(&self, s: &S, mut w: S::Worker, deadline: Option<Instant>, cancel: &CancelToken) {
        let wave = {
            let mut q = lock(&self.state);
            while let Some(front) = q.jobs.front() {
                let until = front.arrived + self.opts.max_wait;
                let until = deadline.map_or(until, |d| d.min(until));
                let now = Instant::now();
                if q.closed || now >= until || self.full(&q) || cancel.is_cancelled() {
                    break;
                }
                q = self
                    .changed
                    .wait_timeout(q, (until - now).min(POLL))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            self.take(s, &mut q)
        };
        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.serve(s, &mut w, wave);
        }));
        let mut q = lock(&self.state);
        if served.is_err() {
            // The wave's requests were answered with an error as they dropped; the worker
            // goes too. With none left, so do the requests still queued.
            drop(w);
            q.lost += 1;
            if q.lost == q.workers {
                q.jobs.clear();
            }
            match q.free.pop() {
                Some(other) => self.pass_on(q, other),
                None => {
                    drop(q);
                    self.changed.notify_all();
                }
            }
            return;
        }
        self.pass_on(q, w);
    }

    /// Hand `w` to the first caller still waiting for a worker, or put it back.
    fn pass_on(&self, mut q: MutexGuard<'_, State<S>>, w: S::Worker) {
        let mut w = Some(w);
        for j in q.jobs.iter() {
            let mut st = lock(&j.slot.state);
            if !st.gone && st.lead.is_none() {
                st.lead = w.take();
                drop(st);
                j.slot.ready.notify_one();
                return;
            }
        }
        q.free.extend(w);
        drop(q);
        self.changed.notify_all();
    }

    /// The queued cost by kind: (sampled edges, feature rows).
    fn costs<'a>(jobs: impl Iterator<Item = &'a Job<S>>) -> (u64, u64)
    where
        S: 'a,
    {
        jobs.fold((0, 0), |(e, r), j| {
            if S::is_sample(&j.work) {
                (e + j.cost, r)
            } else {
                (e, r + j.cost)
            }
        })
    }

    fn full(&self, q: &State<S>) -> bool {
        let (edges, rows) = Self::costs(q.jobs.iter());
        q.jobs.len() >= self.opts.max_wave.get()
            || edges >= self.opts.wave_edges
            || rows >= self.opts.wave_rows
    }

    /// The wave of a worker: the queued jobs in arrival order while they fit one wave of the
    /// plan, at most [`wave_cap`] of them; a job the engine does not let join
    /// ([`Waves::joins`]) keeps its place for a later wave.
    fn take(&self, s: &S, q: &mut State<S>) -> Vec<Job<S>> {
        let (mut edges, mut rows) = (0u64, 0u64);
        let most = wave_cap(
            q.jobs.len(),
            q.workers,
            self.opts.max_wave.get(),
            !self.opts.max_wait.is_zero(),
        );
        let mut wave = Vec::new();
        let mut i = 0;
        while i < q.jobs.len() && wave.len() < most {
            let j = &q.jobs[i];
            if !wave.is_empty() && !s.joins(&wave, &j.work) {
                i += 1;
                continue;
            }
            let (e, r) = if S::is_sample(&j.work) {
                (edges + j.cost, rows)
            } else {
                (edges, rows + j.cost)
            };
            if !wave.is_empty() && (e > self.opts.wave_edges || r > self.opts.wave_rows) {
                break;
            }
            (edges, rows) = (e, r);
            wave.push(q.jobs.remove(i).expect("in range"));
        }
        wave
    }

    /// Answer the jobs of `wave` still wanted: those given up are skipped, those past their
    /// deadline answered so; the engine serves the rest.
    fn serve(&self, s: &S, w: &mut S::Worker, wave: Vec<Job<S>>) {
        let now = Instant::now();
        let mut wanted = Vec::with_capacity(wave.len());
        for j in wave {
            if j.cancel.is_cancelled() {
                // Its caller counted it.
                continue;
            }
            if j.deadline.is_some_and(|d| d <= now) {
                if j.slot.expire() {
                    self.counters
                        .deadline_exceeded
                        .fetch_add(1, Ordering::Relaxed);
                }
                continue;
            }
            wanted.push(j);
        }
        if wanted.is_empty() {
            return;
        }
        self.counters.waves.fetch_add(1, Ordering::Relaxed);
        self.counters
            .wave_requests
            .fetch_add(wanted.len() as u64, Ordering::Relaxed);
        // A request larger than a wave comes alone, and holds the room.
        let (edges, rows) = Self::costs(wanted.iter());
        let large = edges > self.opts.wave_edges || rows > self.opts.wave_rows;
        s.serve(w, wanted, large);
    }

    /// Answer `jobs` with an internal error saying `msg`.
    pub fn fail<'a>(&self, jobs: impl IntoIterator<Item = &'a Job<S>>, msg: &str)
    where
        S: 'a,
    {
        self.fail_with(jobs, &ServeError::Internal(msg.to_string()));
    }

    /// Answer `jobs` with `err` each (a damaged dataset stays [`ServeError::Corrupt`]).
    pub fn fail_with<'a>(&self, jobs: impl IntoIterator<Item = &'a Job<S>>, err: &ServeError)
    where
        S: 'a,
    {
        for j in jobs {
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
            j.answer(Err(err.clone()));
        }
    }

    /// The counters, with the engine's reads (`reads`, `bytes_read`) and hot pages
    /// (`page_hits`, `page_misses`, `pages_cached`).
    pub fn stats(&self, reads: (u64, u64), pages: (u64, u64, u64)) -> EngineStats {
        let c = &self.counters;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EngineStats {
            sample_requests: r(&c.sample_requests),
            feature_requests: r(&c.feature_requests),
            waves: r(&c.waves),
            wave_requests: r(&c.wave_requests),
            busy: r(&c.busy),
            deadline_exceeded: r(&c.deadline_exceeded),
            cancelled: r(&c.cancelled),
            failed: r(&c.failed),
            queued: lock(&self.state).jobs.len() as u64,
            latency: c.latency.snapshot(),
            reads: reads.0,
            bytes_read: reads.1,
            page_hits: pages.0,
            page_misses: pages.1,
            pages_cached: pages.2,
        }
    }

    /// Refuse new requests ([`ServeError::ShuttingDown`]) and wait until those queued are
    /// answered (by the callers leading their waves) and every worker is back. Idempotent.
    pub fn close(&self) {
        let mut q = lock(&self.state);
        q.closed = true;
        self.changed.notify_all();
        while !(q.jobs.is_empty() && q.free.len() + q.lost == q.workers) {
            q = self
                .changed
                .wait_timeout(q, POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many of `queued` jobs one of `workers` takes for a wave: at most `max_wave`, and without
/// a wait for company (`waits` false, the default) at most its share of the queue,
/// `ceil(queued / workers)`. A wave's requests all wait for its slowest, so under light load
/// requests go one per worker (none waits behind another's hub) and only a long queue makes
/// long waves (measured in docs/benchmarks.md). A wait for company asks for waves: then a
/// wave takes all that fits.
fn wave_cap(queued: usize, workers: usize, max_wave: usize, waits: bool) -> usize {
    if waits {
        return max_wave;
    }
    max_wave.min(queued.div_ceil(workers.max(1)).max(1))
}
