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

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::pool::{Shared, Tracked};
use crate::{Error, Result, SampledSubgraph};

/// One mini-batch of an epoch: its index, its seeds (after the shuffle) and its sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub index: u64,
    pub seeds: Vec<u64>,
    pub sample: SampledSubgraph,
}

struct Window {
    next_to_yield: usize,
    done: BTreeMap<usize, Result<SampledSubgraph>>,
    peak: usize,
}

/// What the consumer and the workers of one epoch share.
struct Queue {
    pool: Arc<Shared>,
    seeds: Vec<u64>,
    batch_size: usize,
    len: usize,
    epoch: u64,
    prefetch: usize,
    next_batch: AtomicUsize,
    stop: AtomicBool,
    window: Mutex<Window>,
    /// Signalled when a batch is finished (the consumer waits on it).
    ready: Condvar,
    /// Signalled when the consumer takes a batch or the epoch stops (workers wait on it).
    space: Condvar,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn seeds_of(&self, b: usize) -> &[u64] {
        let start = b * self.batch_size;
        &self.seeds[start..(start + self.batch_size).min(self.seeds.len())]
    }

    fn deposit(&self, b: usize, r: Result<SampledSubgraph>) {
        let mut w = self.lock();
        w.done.insert(b, r);
        w.peak = w.peak.max(w.done.len());
        self.ready.notify_all();
    }
}

/// The batches of one epoch, in order, sampled by worker threads (see the module docs).
/// Dropping it stops the workers (each finishes its current batch) and joins them. After an
/// error the iterator ends.
pub struct EpochIter {
    queue: Arc<Queue>,
    workers: Vec<JoinHandle<()>>,
    next: usize,
    finished: bool,
}

impl EpochIter {
    pub(crate) fn start(
        pool: Arc<Shared>,
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
            prefetch: pool.cfg.prefetch,
            pool,
            seeds,
            batch_size,
            len,
            epoch,
            next_batch: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
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

impl Iterator for EpochIter {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if self.finished {
            return None;
        }
        if self.next >= self.queue.len {
            self.finish();
            return None;
        }
        let b = self.next;
        let r = {
            let mut w = self.queue.lock();
            let r = loop {
                if let Some(r) = w.done.remove(&b) {
                    break r;
                }
                w = self.queue.ready.wait(w).unwrap_or_else(|e| e.into_inner());
            };
            w.next_to_yield = b + 1;
            r
        };
        self.queue.space.notify_all();
        self.next += 1;
        match r {
            Ok(sample) => Some(Ok(Batch {
                index: b as u64,
                seeds: self.queue.seeds_of(b).to_vec(),
                sample,
            })),
            Err(e) => {
                self.finish();
                Some(Err(e))
            }
        }
    }
}

impl Drop for EpochIter {
    fn drop(&mut self) {
        if !self.finished {
            self.finish();
        }
    }
}

/// Reports the batch a worker holds as failed if the worker unwinds before finishing it, so the
/// consumer never waits for a batch that will not come; and counts the worker out when it ends.
struct Holding<'a> {
    q: &'a Queue,
    batch: Option<usize>,
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.batch.take() {
            let msg = "the thread panicked (a bug in ringgnn, please report it)".to_string();
            self.q.deposit(
                b,
                Err(Error::Worker {
                    batch: b as u64,
                    msg,
                }),
            );
        }
        self.q.pool.live.fetch_sub(1, Ordering::SeqCst);
    }
}

fn worker(q: Arc<Queue>) {
    let mut hold = Holding { q: &q, batch: None };
    let mut sampler: Option<Tracked> = None;
    loop {
        if q.stop.load(Ordering::SeqCst) {
            return;
        }
        let b = q.next_batch.fetch_add(1, Ordering::SeqCst);
        if b >= q.len {
            return;
        }
        {
            let mut w = q.lock();
            while b >= w.next_to_yield + q.prefetch && !q.stop.load(Ordering::SeqCst) {
                w = q.space.wait(w).unwrap_or_else(|e| e.into_inner());
            }
        }
        if q.stop.load(Ordering::SeqCst) {
            return;
        }
        hold.batch = Some(b);
        let r = match &mut sampler {
            Some(s) => s.sample(&q.pool, q.seeds_of(b), q.epoch, b as u64),
            None => q.pool.new_sampler().and_then(|s| {
                sampler
                    .insert(s)
                    .sample(&q.pool, q.seeds_of(b), q.epoch, b as u64)
            }),
        };
        hold.batch = None;
        let failed = r.is_err();
        q.deposit(b, r);
        if failed {
            // Its backend may be broken; the consumer stops at this batch anyway.
            return;
        }
    }
}
