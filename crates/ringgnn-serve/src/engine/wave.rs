//! How an [`Engine`]'s wave is served (see the crate docs): its sampling requests together
//! (those without times by the homogeneous sampler in one `sample_many`, those with times by
//! `at_times`), the feature rows they asked for in one gather, then its feature requests'.
//!
//! [`Engine`]: super::Engine

use ringgnn_sampler::ManyRequest;

use super::at_times::request;
use super::{Answer, FeatureRows, Shared, Timed, Work, Worker};
use crate::queue::{Job, Waves};
use crate::ServeError;

impl Waves for Shared {
    type Work = Work;
    type Answer = Answer;
    type Worker = Box<Worker>;

    fn is_sample(work: &Work) -> bool {
        matches!(work, Work::Sample(..))
    }

    /// Answer the wave's samples together, then its feature rows together.
    fn serve(&self, w: &mut Box<Worker>, wave: Vec<Job<Shared>>, large: bool) {
        #[cfg(feature = "fault-injection")]
        if wave
            .iter()
            .any(|j| matches!(&j.work, Work::Sample(r, _) if r.seed == crate::FAULT_SEED))
        {
            panic!("fault injected for a test (seed {})", crate::FAULT_SEED);
        }
        let (samples, rows): (Vec<_>, Vec<_>) =
            wave.into_iter().partition(|j| Self::is_sample(&j.work));
        self.sample_wave(w, samples, large);
        self.gather_wave(w, rows, large);
    }
}

impl Shared {
    /// After a wave larger than the plan's (`large`), make the worker's backends again, so that
    /// the workspaces it grew go back before its answer is handed over (and the room with it).
    fn renew(&self, w: &mut Worker, large: bool) {
        if !large {
            return;
        }
        w.typed.clear();
        if let Ok(s) = self.loader.thread_sampler() {
            w.sampler = s;
        }
        if w.gatherer.is_some() {
            if let Ok(Some(g)) = self.loader.thread_gatherer(&self.stop) {
                w.gatherer = Some(g);
            }
        }
    }

    /// Sample the wave's sampling jobs together, then gather the rows of those that asked for
    /// them in one go.
    fn sample_wave(&self, w: &mut Worker, jobs: Vec<Job<Shared>>, large: bool) {
        if jobs.is_empty() {
            return;
        }
        // The requests without times together, as always; those with times by the typed
        // sampler.
        let plain: Vec<usize> = (0..jobs.len())
            .filter(|&i| request(&jobs[i]).times.is_none())
            .collect();
        let mut outs: Vec<Option<Timed>> = jobs.iter().map(|_| None).collect();
        if !plain.is_empty() {
            let reqs: Vec<ManyRequest<'_>> = plain
                .iter()
                .map(|&i| {
                    let r = request(&jobs[i]);
                    ManyRequest {
                        seeds: r.seeds.as_slice(),
                        fanouts: &r.fanouts,
                        replace: r.replace,
                        seed: r.seed,
                        epoch: 0,
                        batch: 0,
                        with_edge_ids: r.with_edge_ids,
                    }
                })
                .collect();
            match w.sampler.sample_many(self.loader.graph(), &reqs) {
                Ok(got) => plain
                    .iter()
                    .zip(got)
                    .for_each(|(&i, s)| outs[i] = Some((s, None))),
                Err(e) => return self.queue.fail_with(&jobs, &ServeError::from(e)),
            }
        }
        if let Err(e) = self.sample_at_times(w, &jobs, &mut outs) {
            return self.queue.fail_with(&jobs, &e);
        }
        let outs: Vec<Timed> = outs
            .into_iter()
            .map(|o| o.expect("every request sampled"))
            .collect();
        let wants_rows = |j: &Job<Shared>| matches!(j.work, Work::Sample(_, true));
        let mut rows = match w.gatherer.as_mut() {
            Some(g) if jobs.iter().any(wants_rows) => {
                let ids: Vec<u64> = jobs
                    .iter()
                    .zip(&outs)
                    .filter(|(j, _)| wants_rows(j))
                    .flat_map(|(_, (s, _))| s.node.iter().copied())
                    .collect();
                let mut all = vec![0f32; ids.len() * g.dim()];
                if let Err(e) = g.gather(&ids, &mut all) {
                    return self.fail(&jobs, &e.to_string());
                }
                Some((all, g.dim(), 0usize))
            }
            _ => None,
        };
        self.renew(w, large);
        for (j, s) in jobs.iter().zip(outs) {
            let mine = match (&mut rows, wants_rows(j)) {
                (Some((all, dim, at)), true) => {
                    let n = s.0.node.len();
                    let data = if *at == 0 && n * *dim == all.len() {
                        std::mem::take(all)
                    } else {
                        all[*at * *dim..(*at + n) * *dim].to_vec()
                    };
                    *at += n;
                    Some(FeatureRows {
                        rows: n,
                        dim: *dim,
                        data,
                    })
                }
                _ => None,
            };
            j.answer(Ok(Answer::Sample(s, mine)));
        }
    }

    fn gather_wave(&self, w: &mut Worker, jobs: Vec<Job<Shared>>, large: bool) {
        let Some(g) = w.gatherer.as_mut() else {
            return;
        };
        if jobs.is_empty() {
            return;
        }
        let dim = g.dim();
        let ids: Vec<u64> = jobs
            .iter()
            .flat_map(|j| match &j.work {
                Work::Features(ids) => ids.iter().copied(),
                Work::Sample(..) => unreachable!("feature jobs only"),
            })
            .collect();
        let mut all = vec![0f32; ids.len() * dim];
        let got = g.gather(&ids, &mut all);
        self.renew(w, large);
        match got {
            Ok(_) => {
                let mut at = 0;
                for j in &jobs {
                    let n = j.cost as usize;
                    let data = all[at * dim..(at + n) * dim].to_vec();
                    at += n;
                    j.answer(Ok(Answer::Features(FeatureRows { rows: n, dim, data })));
                }
            }
            Err(e) => self.fail(&jobs, &e.to_string()),
        }
    }

    fn fail(&self, jobs: &[Job<Shared>], msg: &str) {
        self.queue.fail(jobs, msg);
    }
}
