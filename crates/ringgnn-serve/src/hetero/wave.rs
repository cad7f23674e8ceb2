//! The waves of a [`HeteroEngine`]: its workers, its work, and how a wave is served (see the
//! parent module's docs); the queue that makes the waves is [`crate::queue`].

use std::sync::atomic::Ordering;

use ringgnn_features::FeatureGatherer;
use ringgnn_io::IoStats;
use ringgnn_sampler::{Fanout, HeteroSample, HeteroSampler};

use super::{HeteroEngine, HeteroSampleRequest, KEPT_SAMPLERS};
use crate::engine::FeatureRows;
use crate::queue::{Job, Waves};
use crate::times::each_request;
use crate::ServeError;

pub(super) type Key = (Vec<Vec<Fanout>>, bool);

/// One wave's read backends.
pub(crate) struct Worker {
    pub(super) samplers: Vec<(Key, HeteroSampler)>,
    pub(super) gatherers: Vec<Option<FeatureGatherer>>,
}

pub(crate) enum Work {
    Sample(HeteroSampleRequest, bool),
    Features(usize, Vec<u64>),
}

pub(crate) enum Answer {
    Sample(HeteroSample, Option<Vec<Option<FeatureRows>>>),
    Features(FeatureRows),
}

/// What makes sampling requests share one `sample_many`: one sampler (fanouts, replacement),
/// one seed, and edge ids or not.
fn config(r: &HeteroSampleRequest) -> (&Vec<Vec<Fanout>>, bool, u64, bool) {
    (&r.fanouts, r.replace, r.seed, r.with_edge_ids)
}

impl Waves for HeteroEngine {
    type Work = Work;
    type Answer = Answer;
    type Worker = Worker;

    fn is_sample(work: &Work) -> bool {
        matches!(work, Work::Sample(..))
    }

    /// Sampling requests join a wave whose sampling requests have their configuration; feature
    /// requests join any.
    fn joins(&self, taken: &[Job<Self>], next: &Work) -> bool {
        let Work::Sample(b, _) = next else {
            return true;
        };
        taken.iter().all(|j| match &j.work {
            Work::Sample(a, _) => config(a) == config(b),
            Work::Features(..) => true,
        })
    }

    /// Sample the wave's sampling requests together, then gather its feature requests' rows.
    fn serve(&self, w: &mut Worker, wave: Vec<Job<Self>>, _large: bool) {
        #[cfg(feature = "fault-injection")]
        if wave
            .iter()
            .any(|j| matches!(&j.work, Work::Sample(r, _) if r.seed == crate::FAULT_SEED))
        {
            panic!("fault injected for a test (seed {})", crate::FAULT_SEED);
        }
        let before = self.io(w);
        let (samples, rows): (Vec<_>, Vec<_>) =
            wave.into_iter().partition(|j| Self::is_sample(&j.work));
        if !samples.is_empty() {
            self.sample_wave(w, &samples);
        }
        self.gather_wave(w, &rows);
        let after = self.io(w);
        self.reads
            .fetch_add(after.reads.saturating_sub(before.reads), Ordering::Relaxed);
        self.bytes_read
            .fetch_add(after.bytes.saturating_sub(before.bytes), Ordering::Relaxed);
    }
}

impl HeteroEngine {
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

    fn sample_wave(&self, w: &mut Worker, jobs: &[Job<Self>]) {
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
                Err(e) => return self.queue.fail_with(jobs, &e),
            },
        };
        let requests = jobs.iter().map(|j| {
            let r = request(j);
            (r.seed_type, r.seeds.as_slice(), r.times.as_ref())
        });
        let sampler = &mut w.samplers[at].1;
        let outs = match each_request(requests, |reqs| {
            sampler.sample_many(reqs, seed, 0, edge_ids)
        }) {
            Ok(o) => o,
            Err(e) => return self.queue.fail_with(jobs, &ServeError::from(e)),
        };
        let wants = |j: &Job<Self>| matches!(j.work, Work::Sample(_, true));
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
                    return self.queue.fail(jobs, &e.to_string());
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
            j.answer(Ok(Answer::Sample(s, wants(j).then_some(r))));
        }
    }

    fn gather_wave(&self, w: &mut Worker, jobs: &[Job<Self>]) {
        for t in 0..self.graph.types.len() {
            let mine: Vec<&Job<Self>> = jobs
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
                self.queue.fail(mine, &e.to_string());
                continue;
            }
            let mut at = 0;
            for j in mine {
                let n = j.cost as usize;
                j.answer(Ok(Answer::Features(FeatureRows {
                    rows: n,
                    dim,
                    data: all[at * dim..(at + n) * dim].to_vec(),
                })));
                at += n;
            }
        }
    }
}

/// The sampling request of a sampling job.
fn request(j: &Job<HeteroEngine>) -> &HeteroSampleRequest {
    match &j.work {
        Work::Sample(r, _) => r,
        Work::Features(..) => unreachable!("sampling jobs only"),
    }
}
