//! [`TypedStage`]: the work of a typed epoch's workers. A job is one hyperbatch (`H`
//! consecutive batches of the epoch): its samples drawn together
//! ([`HeteroSampler::sample_many`], each relation's file read once per hop for all of them,
//! with every thread of the loader where the workers are hyperbatch drivers:
//! [`HeteroSampler::set_threads`]), then, batch by batch, each type's feature rows gathered and
//! the target's labels, and each batch handed to the pipeline as soon as it is whole.
//!
//! As in the homogeneous [`crate::LoadStage`], a worker starts *gathering* a batch only once it
//! is among the next `prefetch` the consumer will take ([`Emit::wait_turn`]): samples are small
//! and feature rows are not, so a hyperbatch of `H` holds `H` samples, never `H` batches of
//! rows, and the rows held are those of `prefetch` batches whatever `H`.
//!
//! Each type whose rows are read from disk may *stage* a hyperbatch's rows as the homogeneous
//! loader does ([`crate::staging`]): when the cost model finds one pass over the type's feature
//! file (its cold rows written to a staging file, batch by batch) cheaper than each batch's
//! random reads, the pass runs right after the sampling and each batch's gather reads its
//! region back ([`FeatureGatherer::gather_staged`]); the batches are the same either way. The
//! epoch's first job is always gathered batch by batch (nothing trains before it to hide a pass).
//!
//! A hyperbatch of more than one batch read from disk is *spilled* as the homogeneous loader's
//! are: each batch's sample is written to the worker's spill file as soon as its last hop is
//! relabelled ([`HeteroSampler::sample_each`], [`HeteroSample::spill`]), keeping only the cold
//! row ids its staging pass needs, and read back when its turn to be gathered comes. A
//! hyperbatch then holds at once only the state of its batches still being sampled, never its
//! finished samples; the batches are the same either way.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use ringgnn_features::{FeatureFile, FeatureGatherer, GatherStats, HotRowCache, RowSource};
use ringgnn_io::{AlignedBuf, BackendKind, CoalesceOptions};
use ringgnn_pipeline::{Emit, Stage};
use ringgnn_sampler::{
    Fanout, HeteroRequest, HeteroSample, HeteroSampler, SpillFile, Spilled, TemporalStrategy,
    SPILL_BUFFER,
};

use crate::labels::Labels;
use crate::staging::{estimate, stage_rows, Staging, StagingOptions};
use crate::typed::graph::TypedGraph;
use crate::typed::{SeedTimes, TypedJob, TypedSeeds};
use crate::{Error, Result};

/// Where one node type's feature rows are read: its file, loaded (shared by every worker) or
/// read from disk with `kind`, and the hot-row cache of its rows (shared).
#[derive(Clone)]
pub struct TypeRows {
    pub file: FeatureFile,
    pub memory: Option<Arc<Vec<u8>>>,
    pub kind: BackendKind,
    pub direct: bool,
    pub cache: Option<Arc<HotRowCache>>,
}

impl TypeRows {
    /// A gatherer of its own for one worker.
    pub fn gatherer(&self) -> Result<FeatureGatherer> {
        let source = match &self.memory {
            Some(m) => RowSource::Memory(m.clone()),
            None => {
                RowSource::open(
                    &self.file,
                    self.kind,
                    self.direct,
                    CoalesceOptions::default(),
                )?
                .0
            }
        };
        let g = FeatureGatherer::new(self.file.clone(), source);
        Ok(match &self.cache {
            Some(c) => g.with_cache(c.clone())?,
            None => g,
        })
    }
}

/// One batch of a typed epoch: its index in the epoch, its sample, per node type its feature
/// rows (float32, a row per `sample.node[t]`, `None` for a type without features) and the
/// labels of the target type's nodes.
pub struct TypedBatch {
    pub index: u64,
    pub sample: HeteroSample,
    pub x: Vec<Option<Vec<f32>>>,
    pub y: Option<Vec<i64>>,
}

impl TypedBatch {
    /// Bytes it holds (sample, rows, labels).
    pub fn bytes(&self) -> u64 {
        let rows: usize = self.x.iter().flatten().map(Vec::len).sum();
        self.sample.bytes() + 4 * rows as u64 + 8 * self.y.as_ref().map_or(0, Vec::len) as u64
    }
}

/// What a typed loader samples and gathers, shared by its workers.
pub struct TypedStage {
    pub(crate) graph: Arc<TypedGraph>,
    pub(crate) fanouts: Vec<(String, Vec<Fanout>)>,
    pub(crate) replace: bool,
    pub(crate) seed: u64,
    pub(crate) with_edge_ids: bool,
    pub(crate) temporal_strategy: TemporalStrategy,
    pub(crate) target: usize,
    /// Per node type (the graph's order), its rows, or `None` when it has no features.
    pub(crate) rows: Vec<Option<TypeRows>>,
    pub(crate) labels: Option<Arc<Labels>>,
    /// The epoch every job of this stage belongs to.
    pub(crate) epoch: u64,
    /// Batches ahead of the consumer whose rows may be gathered (see the module docs).
    pub(crate) prefetch: usize,
    /// Gather counters per type, summed over the workers as their jobs end.
    pub(crate) stats: Arc<Mutex<Vec<GatherStats>>>,
    /// Per node type, where its hyperbatches' rows may be staged (`None`: gathered batch by
    /// batch).
    pub(crate) staging: Vec<Option<StagingOptions>>,
    /// The index of the epoch's first batch: the job that starts with it is not staged.
    pub(crate) first: Option<u64>,
    /// Hyperbatches staged, per type (summed over the workers).
    pub(crate) staged: Arc<Mutex<Vec<u64>>>,
    /// Where hyperbatches of more than one batch spill their samples (`None`: never, the
    /// graph is in memory).
    pub(crate) spill_dir: Option<std::path::PathBuf>,
    /// Threads each worker's sampler draws and relabels its hyperbatch with: every thread of
    /// the loader for hyperbatch drivers, else 1.
    pub(crate) threads: usize,
}

/// Seconds to read a hyperbatch's rows, estimated ([`TypedStage::read_times`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadTimes {
    /// Per batch, its rows read batch by batch.
    pub per_batch: Vec<f64>,
    /// One pass over the feature files for the rows of all the batches together.
    pub pass: f64,
    /// Per batch, its staged rows written to the staging file and read back.
    pub back: Vec<f64>,
}

/// A worker's own sampler, gatherers, staging files and spill file (made on first use, with
/// its read buffer).
pub struct Worker {
    pub(crate) sampler: HeteroSampler,
    gatherers: Vec<Option<FeatureGatherer>>,
    staging: Vec<Option<Staging>>,
    spill: Option<(SpillFile, AlignedBuf)>,
}

impl TypedStage {
    /// This stage with no staging unless `stage`.
    pub(crate) fn staging_off_unless(mut self, stage: bool) -> Self {
        if !stage {
            self.staging.iter_mut().for_each(|s| *s = None);
        }
        self
    }

    /// A worker's state; `stop` interrupts its reads.
    pub(crate) fn worker(&self, stop: Option<&Arc<AtomicBool>>) -> Result<Worker> {
        let mut sampler = self
            .graph
            .sampler(&self.fanouts, self.replace, None)?
            .sampler;
        sampler.set_temporal_strategy(self.temporal_strategy);
        sampler.set_threads(self.threads);
        let mut gatherers = Vec::with_capacity(self.rows.len());
        for r in &self.rows {
            let mut g = r.as_ref().map(TypeRows::gatherer).transpose()?;
            if let (Some(g), Some(stop)) = (&mut g, stop) {
                g.set_cancel(stop.clone());
            }
            gatherers.push(g);
        }
        if let Some(stop) = stop {
            sampler.set_cancel(stop.clone());
        }
        let never = Arc::new(AtomicBool::new(false));
        let staging = self
            .staging
            .iter()
            .zip(&self.rows)
            .map(|(opts, rows)| match (opts, rows) {
                (Some(o), Some(r)) if r.memory.is_none() => Some(Staging::new(
                    o.clone(),
                    r.file.clone(),
                    r.kind,
                    r.direct,
                    stop.unwrap_or(&never),
                )),
                _ => None,
            })
            .collect();
        Ok(Worker {
            sampler,
            gatherers,
            staging,
            spill: None,
        })
    }

    /// Stage the rows of each type of `samples` (one hyperbatch) where the cost model finds a
    /// pass cheaper than the batches' own reads; per type, whether it was staged.
    pub(crate) fn stage(&self, w: &mut Worker, samples: &[HeteroSample]) -> Result<Vec<bool>> {
        for (t, st) in w.staging.iter_mut().enumerate() {
            let (Some(st), Some(rows)) = (st.as_mut(), &self.rows[t]) else {
                continue;
            };
            if st.disabled.is_some() {
                continue;
            }
            let cache = rows.cache.as_deref();
            st.cold.resize_with(samples.len(), Vec::new);
            st.cold.truncate(samples.len());
            for (cold, s) in st.cold.iter_mut().zip(samples) {
                FeatureGatherer::cold_rows(&rows.file, cache, &s.node[t], cold)?;
            }
        }
        self.stage_cold(w)
    }

    /// [`Self::stage`] with each staging type's cold rows of the hyperbatch already taken
    /// (`Staging::cold`, a list per batch).
    fn stage_cold(&self, w: &mut Worker) -> Result<Vec<bool>> {
        let mut staged = vec![false; w.staging.len()];
        for (t, st) in w.staging.iter_mut().enumerate() {
            let (Some(st), Some(rows)) = (st.as_mut(), &self.rows[t]) else {
                continue;
            };
            if st.disabled.is_some() {
                continue;
            }
            let est = estimate(&st.cold, &rows.file, st.model());
            staged[t] = stage_rows(false, est.per_batch, est.staged) && st.stage()?;
        }
        if staged.iter().any(|&s| s) {
            let mut sum = self.staged.lock().unwrap_or_else(|e| e.into_inner());
            sum.iter_mut()
                .zip(&staged)
                .for_each(|(a, &s)| *a += s as u64);
        }
        Ok(staged)
    }

    /// What reading the rows of `samples` (one hyperbatch) costs, estimated ([`estimate`]) over
    /// the types whose rows may be staged: the model `crate::budget::typed::choose` weighs
    /// hyperbatch sizes, workers and staging with. Other types read their rows the same way
    /// whatever is chosen.
    pub(crate) fn read_times(&self, w: &Worker, samples: &[HeteroSample]) -> Result<ReadTimes> {
        let mut out = ReadTimes {
            per_batch: vec![0.0; samples.len()],
            pass: 0.0,
            back: vec![0.0; samples.len()],
        };
        for (t, st) in w.staging.iter().enumerate() {
            let (Some(st), Some(rows)) = (st, &self.rows[t]) else {
                continue;
            };
            if st.disabled.is_some() {
                continue;
            }
            let mut cold = vec![Vec::new(); samples.len()];
            for (c, s) in cold.iter_mut().zip(samples) {
                FeatureGatherer::cold_rows(&rows.file, rows.cache.as_deref(), &s.node[t], c)?;
            }
            let model = st.model();
            for (i, c) in cold.iter().enumerate() {
                let one = estimate(std::slice::from_ref(c), &rows.file, model);
                out.per_batch[i] += one.per_batch;
                out.back[i] += one.staged - one.pass;
            }
            out.pass += estimate(&cold, &rows.file, model).pass;
        }
        Ok(out)
    }

    /// The samples of `job` (batch index, seeds by type), drawn together.
    pub(crate) fn sample(
        &self,
        w: &mut Worker,
        job: &[(u64, TypedSeeds, SeedTimes)],
    ) -> Result<Vec<HeteroSample>> {
        let mut outs = Vec::with_capacity(job.len());
        self.sample_each(w, job, &mut |_, s| {
            outs.push(s);
            Ok(())
        })?;
        Ok(outs)
    }

    /// The samples of `job`, drawn together, each handed to `each` as soon as it is finished
    /// ([`HeteroSampler::sample_each`]).
    fn sample_each(
        &self,
        w: &mut Worker,
        job: &[(u64, TypedSeeds, SeedTimes)],
        each: &mut dyn FnMut(usize, HeteroSample) -> ringgnn_sampler::Result<()>,
    ) -> Result<()> {
        let seeds: Vec<Vec<(usize, &[u64])>> = job
            .iter()
            .map(|(_, s, _)| s.iter().map(|(t, ids)| (*t, ids.as_slice())).collect())
            .collect();
        let times: Vec<Option<Vec<&[i64]>>> = job
            .iter()
            .map(|(_, _, t)| t.as_ref().map(|t| t.iter().map(Vec::as_slice).collect()))
            .collect();
        let requests: Vec<HeteroRequest<'_>> = seeds
            .iter()
            .zip(job)
            .zip(&times)
            .map(|((s, (b, _, _)), t)| HeteroRequest {
                seeds: s,
                batch: *b,
                times: t.as_deref(),
            })
            .collect();
        Ok(w.sampler
            .sample_each(&requests, self.seed, self.epoch, self.with_edge_ids, each)?)
    }

    /// Whether `job`'s samples are spilled (see the module docs).
    fn spills(&self, job: &TypedJob) -> bool {
        self.spill_dir.is_some() && job.len() > 1
    }

    /// The samples of `job` written to the worker's spill file as each is finished (rewound
    /// first: the previous job's were all read), where each went; with them, each staging
    /// type's cold rows of every batch, in `Staging::cold`, unless `first`.
    fn sample_spilled(&self, w: &mut Worker, job: &TypedJob, first: bool) -> Result<Vec<Spilled>> {
        if w.spill.is_none() {
            let dir = self.spill_dir.as_deref().expect("spilling");
            w.spill = Some((SpillFile::create(dir)?, AlignedBuf::new(SPILL_BUFFER)));
        }
        let (mut file, buf) = w.spill.take().expect("made above");
        file.rewind();
        let keep: Vec<usize> = (w.staging.iter().enumerate())
            .filter(|(t, s)| {
                !first
                    && s.as_ref().is_some_and(|s| s.disabled.is_none())
                    && self.rows[*t].is_some()
            })
            .map(|(t, _)| t)
            .collect();
        let mut cold: Vec<Vec<Vec<u64>>> = vec![Vec::new(); w.staging.len()];
        let mut failed = None;
        let mut at = Vec::with_capacity(job.len());
        let r = self.sample_each(w, job, &mut |_, s| {
            for &t in &keep {
                let rows = self.rows[t].as_ref().expect("kept types have rows");
                let mut c = Vec::new();
                let cache = rows.cache.as_deref();
                if let Err(e) = FeatureGatherer::cold_rows(&rows.file, cache, &s.node[t], &mut c) {
                    failed = Some(e);
                    return Err(ringgnn_sampler::Error::Input(
                        "a sample's rows failed".into(),
                    ));
                }
                cold[t].push(c);
            }
            at.push(s.spill(&file)?);
            Ok(())
        });
        let synced = file.sync();
        w.spill = Some((file, buf));
        if let Some(e) = failed {
            return Err(e.into());
        }
        r?;
        synced?;
        for (st, c) in w.staging.iter_mut().zip(cold) {
            if let Some(st) = st.as_mut().filter(|_| !c.is_empty()) {
                st.cold = c;
            }
        }
        Ok(at)
    }

    /// Batch `index` of `sample`: each type's rows and the target's labels gathered; `staged`:
    /// per type, whether its rows wait in the staging file, at the `k`-th region (the batch's
    /// place in its hyperbatch).
    pub(crate) fn gather(
        &self,
        w: &mut Worker,
        index: u64,
        sample: HeteroSample,
        k: usize,
        staged: &[bool],
    ) -> Result<TypedBatch> {
        let mut x = Vec::with_capacity(w.gatherers.len());
        let mut stats = vec![GatherStats::default(); w.gatherers.len()];
        for (t, (g, st)) in w.gatherers.iter_mut().zip(&mut w.staging).enumerate() {
            x.push(match g {
                Some(g) => {
                    let ids = &sample.node[t];
                    let mut out = vec![0f32; ids.len() * g.dim()];
                    stats[t] = match st {
                        Some(st) if staged.get(t).copied().unwrap_or(false) => {
                            g.gather_staged(ids, &mut out, |_, visit| st.rows(k, visit))?
                        }
                        _ => g.gather(ids, &mut out)?,
                    };
                    Some(out)
                }
                None => None,
            });
        }
        {
            let mut sum = self.stats.lock().unwrap_or_else(|e| e.into_inner());
            sum.iter_mut().zip(&stats).for_each(|(a, s)| a.add(s));
        }
        let y = self.labels.as_ref().map(|l| {
            let mut y = Vec::new();
            l.gather_into(&sample.node[self.target], &mut y);
            y
        });
        Ok(TypedBatch {
            index,
            sample,
            x,
            y,
        })
    }
}

impl Stage for TypedStage {
    type Job = TypedJob;
    type State = Worker;
    type Output = TypedBatch;
    type Error = Error;

    fn start(&self, stop: &Arc<AtomicBool>) -> Result<Worker> {
        self.worker(Some(stop))
    }

    fn run(
        &self,
        w: &mut Worker,
        job: Self::Job,
        out: &mut Emit<'_, TypedBatch, Error>,
    ) -> Result<()> {
        let first = job.first().map(|(b, _, _)| *b) == self.first;
        if self.spills(&job) {
            let at = self.sample_spilled(w, &job, first)?;
            let staged = if first {
                Vec::new()
            } else {
                self.stage_cold(w)?
            };
            for (k, ((index, _, _), r)) in job.iter().zip(at).enumerate() {
                if !out.wait_turn(self.prefetch) {
                    return Err(Error::Input("the epoch was stopped".into()));
                }
                let (file, buf) = w.spill.as_mut().expect("spilled");
                let sample = HeteroSample::unspill(file, r, buf)?;
                let batch = self.gather(w, *index, sample, k, &staged)?;
                out.emit(Ok(batch));
            }
            return Ok(());
        }
        let samples = self.sample(w, &job)?;
        let staged = if first {
            Vec::new()
        } else {
            self.stage(w, &samples)?
        };
        for (k, ((index, _, _), sample)) in job.iter().zip(samples).enumerate() {
            if !out.wait_turn(self.prefetch) {
                return Err(Error::Input("the epoch was stopped".into()));
            }
            let batch = self.gather(w, *index, sample, k, &staged)?;
            out.emit(Ok(batch));
        }
        Ok(())
    }
}
