//! The waves of a [`HeteroEngine`]: the queue, the workers and how a wave is served (see the
//! parent module's docs). There are no engine threads: a caller that queues a request and finds
//! a worker free serves waves with it, on its own thread, until the queue is empty, then puts
//! it back (under the queue's lock, so a request never waits while a worker is idle).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use ringgnn_features::FeatureGatherer;
use ringgnn_io::IoStats;
use ringgnn_sampler::{Fanout, HeteroRequest, HeteroSample, HeteroSampler};

use super::{lock, HeteroEngine, HeteroSampleRequest, KEPT_SAMPLERS, POLL};
use crate::engine::{CancelToken, FeatureRows};
use crate::{Result, ServeError};

pub(super) type Key = (Vec<Vec<Fanout>>, bool);

/// One wave's read backends.
pub(super) struct Worker {
    pub(super) samplers: Vec<(Key, HeteroSampler)>,
    pub(super) gatherers: Vec<Option<FeatureGatherer>>,
}

pub(super) enum Work {
    Sample(HeteroSampleRequest, bool),
    Features(usize, Vec<u64>),
}

pub(super) enum Answer {
    Sample(HeteroSample, Option<Vec<Option<FeatureRows>>>),
    Features(FeatureRows),
}

#[derive(Default)]
struct Slot {
    answer: Mutex<Option<Result<Answer>>>,
    ready: Condvar,
}

impl Slot {
    fn put(&self, a: Result<Answer>) {
        *lock(&self.answer) = Some(a);
        self.ready.notify_one();
    }
}

pub(super) struct Job {
    work: Work,
    cost: u64,
    deadline: Option<Instant>,
    cancel: CancelToken,
    slot: Arc<Slot>,
}

impl Drop for Job {
    /// A job dropped unanswered (its wave panicked) gets an internal error.
    fn drop(&mut self) {
        let mut a = lock(&self.slot.answer);
        if a.is_none() {
            *a = Some(Err(ServeError::Internal(
                "the request's wave failed (a bug: the server's log has the panic); other \
                 requests are still served"
                    .into(),
            )));
            drop(a);
            self.slot.ready.notify_one();
        }
    }
}

#[derive(Default)]
pub(super) struct Queue {
    pub(super) jobs: VecDeque<Job>,
    pub(super) free: Vec<Worker>,
    pub(super) closed: bool,
}

impl HeteroEngine {
    /// Queue `work`; with a free worker, serve waves until the queue is empty (a worker goes
    /// back only with the queue empty, under its lock, so no job waits while one is idle);
    /// then wait for the answer, giving up at `deadline` or on `cancel`.
    pub(super) fn submit(
        &self,
        work: Work,
        cost: u64,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> Result<Answer> {
        let now = Instant::now();
        if deadline.is_some_and(|d| d <= now) {
            self.counters
                .deadline_exceeded
                .fetch_add(1, Ordering::Relaxed);
            return Err(ServeError::DeadlineExceeded);
        }
        let cancel = cancel.unwrap_or_default();
        let slot = Arc::new(Slot::default());
        let worker = {
            let mut q = lock(&self.queue);
            if q.closed {
                return Err(ServeError::ShuttingDown);
            }
            if q.jobs.len() >= self.opts.queue.get() {
                self.counters.busy.fetch_add(1, Ordering::Relaxed);
                return Err(ServeError::Busy(q.jobs.len()));
            }
            q.jobs.push_back(Job {
                work,
                cost,
                deadline,
                cancel: cancel.clone(),
                slot: slot.clone(),
            });
            q.free.pop()
        };
        if let Some(w) = worker {
            self.lead(w);
        }
        let mut a = lock(&slot.answer);
        loop {
            if let Some(r) = a.take() {
                if r.is_ok() {
                    self.counters.latency.record(now.elapsed());
                }
                return r;
            }
            let t = Instant::now();
            let gave_up = if cancel.is_cancelled() {
                self.counters.cancelled.fetch_add(1, Ordering::Relaxed);
                Some(ServeError::Cancelled)
            } else if deadline.is_some_and(|d| t >= d) {
                cancel.cancel();
                self.counters
                    .deadline_exceeded
                    .fetch_add(1, Ordering::Relaxed);
                Some(ServeError::DeadlineExceeded)
            } else {
                None
            };
            if let Some(e) = gave_up {
                drop(a);
                let mut q = lock(&self.queue);
                // Answered (by the error) before it drops, so its drop adds nothing.
                *lock(&slot.answer) = Some(Err(ServeError::Cancelled));
                q.jobs.retain(|j| !Arc::ptr_eq(&j.slot, &slot));
                drop(q);
                return Err(e);
            }
            let step = deadline.map_or(POLL, |d| (d - t).min(POLL));
            a = slot
                .ready
                .wait_timeout(a, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Serve waves with `w` until the queue is empty, then put `w` back.
    fn lead(&self, mut w: Worker) {
        loop {
            let wave = {
                let mut q = lock(&self.queue);
                if q.jobs.is_empty() {
                    q.free.push(w);
                    drop(q);
                    self.changed.notify_all();
                    return;
                }
                self.take(&mut q)
            };
            let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.serve(&mut w, wave);
            }));
            if served.is_err() {
                // Its jobs were answered with an error as they dropped; the worker's state is
                // made again.
                w = Worker {
                    samplers: Vec::new(),
                    gatherers: (0..self.types.len())
                        .map(|t| self.gatherer(t).ok().flatten())
                        .collect(),
                };
            }
        }
    }

    /// The next wave: the front job and the queued jobs of its kind (sampling requests of the
    /// same configuration, or feature requests) while they fit, at most `max_wave`.
    fn take(&self, q: &mut Queue) -> Vec<Job> {
        let first = q.jobs.pop_front().expect("a queued job");
        let mut cost = first.cost;
        let mut wave = vec![first];
        let mut i = 0;
        while i < q.jobs.len() && wave.len() < self.opts.max_wave.get() {
            let j = &q.jobs[i];
            let same = match (&wave[0].work, &j.work) {
                (Work::Sample(a, _), Work::Sample(b, _)) => {
                    (&a.fanouts, a.replace, a.seed, a.with_edge_ids)
                        == (&b.fanouts, b.replace, b.seed, b.with_edge_ids)
                        && cost + j.cost <= self.max_edges
                }
                (Work::Features(..), Work::Features(..)) => {
                    cost + j.cost <= self.opts.limits.max_nodes as u64 * 4
                }
                _ => false,
            };
            if same {
                cost += j.cost;
                wave.push(q.jobs.remove(i).expect("in range"));
            } else {
                i += 1;
            }
        }
        wave
    }

    fn serve(&self, w: &mut Worker, wave: Vec<Job>) {
        let now = Instant::now();
        let wave: Vec<Job> = wave
            .into_iter()
            .filter(|j| {
                if j.cancel.is_cancelled() {
                    *lock(&j.slot.answer) = Some(Err(ServeError::Cancelled));
                    return false;
                }
                if j.deadline.is_some_and(|d| d <= now) {
                    self.counters
                        .deadline_exceeded
                        .fetch_add(1, Ordering::Relaxed);
                    j.slot.put(Err(ServeError::DeadlineExceeded));
                    return false;
                }
                true
            })
            .collect();
        if wave.is_empty() {
            return;
        }
        self.counters.waves.fetch_add(1, Ordering::Relaxed);
        self.counters
            .wave_requests
            .fetch_add(wave.len() as u64, Ordering::Relaxed);
        let before = self.io(w);
        if matches!(wave[0].work, Work::Sample(..)) {
            self.sample_wave(w, &wave);
        } else {
            self.gather_wave(w, &wave);
        }
        let after = self.io(w);
        self.counters
            .reads
            .fetch_add(after.reads.saturating_sub(before.reads), Ordering::Relaxed);
        self.counters
            .bytes_read
            .fetch_add(after.bytes.saturating_sub(before.bytes), Ordering::Relaxed);
    }

    fn io(&self, w: &Worker) -> IoStats {
        let mut s = w.samplers.iter().fold(IoStats::default(), |a, (_, x)| {
            let b = x.io_stats();
            IoStats {
                reads: a.reads + b.reads,
                bytes: a.bytes + b.bytes,
                batches: a.batches + b.batches,
            }
        });
        for g in w.gatherers.iter().flatten() {
            let b = g.stats();
            s.reads += b.read_requests;
            s.bytes += b.bytes_read;
        }
        s
    }

    fn sample_wave(&self, w: &mut Worker, jobs: &[Job]) {
        let Work::Sample(first, _) = &jobs[0].work else {
            unreachable!("a sampling wave")
        };
        let key: Key = (first.fanouts.clone(), first.replace);
        let (seed, edge_ids) = (first.seed, first.with_edge_ids);
        let at = match w.samplers.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => match self.sampler(&key) {
                Ok((s, _)) => {
                    if w.samplers.len() > KEPT_SAMPLERS {
                        w.samplers.remove(1);
                    }
                    w.samplers.push((key, s));
                    w.samplers.len() - 1
                }
                Err(e) => return self.fail(jobs, &e.to_string()),
            },
        };
        let seeds: Vec<[(usize, &[u64]); 1]> = jobs
            .iter()
            .map(|j| match &j.work {
                Work::Sample(r, _) => [(r.seed_type, r.seeds.as_slice())],
                Work::Features(..) => unreachable!("sampling jobs only"),
            })
            .collect();
        let reqs: Vec<HeteroRequest<'_>> = seeds
            .iter()
            .map(|s| HeteroRequest { seeds: s, batch: 0 })
            .collect();
        let outs = match w.samplers[at].1.sample_many(&reqs, seed, 0, edge_ids) {
            Ok(o) => o,
            Err(e) => return self.fail(jobs, &e.to_string()),
        };
        let wants = |j: &Job| matches!(j.work, Work::Sample(_, true));
        let mut rows: Vec<Vec<Option<FeatureRows>>> = jobs.iter().map(|_| Vec::new()).collect();
        if jobs.iter().any(wants) {
            for (t, g) in w.gatherers.iter_mut().enumerate() {
                let Some(g) = g else {
                    for (j, r) in jobs.iter().zip(rows.iter_mut()) {
                        if wants(j) {
                            r.push(None);
                        }
                    }
                    continue;
                };
                let ids: Vec<u64> = jobs
                    .iter()
                    .zip(&outs)
                    .filter(|(j, _)| wants(j))
                    .flat_map(|(_, s)| s.node[t].iter().copied())
                    .collect();
                let dim = g.dim();
                let mut all = vec![0f32; ids.len() * dim];
                if let Err(e) = g.gather(&ids, &mut all) {
                    return self.fail(jobs, &e.to_string());
                }
                let mut at = 0;
                for ((j, s), r) in jobs.iter().zip(&outs).zip(rows.iter_mut()) {
                    if wants(j) {
                        let n = s.node[t].len();
                        r.push(Some(FeatureRows {
                            rows: n,
                            dim,
                            data: all[at * dim..(at + n) * dim].to_vec(),
                        }));
                        at += n;
                    }
                }
            }
        }
        for ((j, s), r) in jobs.iter().zip(outs).zip(rows) {
            j.slot.put(Ok(Answer::Sample(s, wants(j).then_some(r))));
        }
    }

    fn gather_wave(&self, w: &mut Worker, jobs: &[Job]) {
        for t in 0..self.types.len() {
            let mine: Vec<&Job> = jobs
                .iter()
                .filter(|j| matches!(j.work, Work::Features(u, _) if u == t))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let Some(g) = w.gatherers[t].as_mut() else {
                continue;
            };
            let ids: Vec<u64> = mine
                .iter()
                .flat_map(|j| match &j.work {
                    Work::Features(_, ids) => ids.iter().copied(),
                    Work::Sample(..) => unreachable!("feature jobs only"),
                })
                .collect();
            let dim = g.dim();
            let mut all = vec![0f32; ids.len() * dim];
            if let Err(e) = g.gather(&ids, &mut all) {
                let owned: Vec<&Job> = mine;
                self.counters
                    .failed
                    .fetch_add(owned.len() as u64, Ordering::Relaxed);
                for j in owned {
                    j.slot.put(Err(ServeError::Internal(e.to_string())));
                }
                continue;
            }
            let mut at = 0;
            for j in mine {
                let n = j.cost as usize;
                j.slot.put(Ok(Answer::Features(FeatureRows {
                    rows: n,
                    dim,
                    data: all[at * dim..(at + n) * dim].to_vec(),
                })));
                at += n;
            }
        }
    }

    fn fail(&self, jobs: &[Job], msg: &str) {
        self.counters
            .failed
            .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        for j in jobs {
            j.slot.put(Err(ServeError::Internal(msg.to_string())));
        }
    }
}
