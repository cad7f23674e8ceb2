//! The work of the loader's pipeline workers, per job of an epoch: [`SampleStage`] samples each
//! batch; [`LoadStage`] samples each batch and then gathers its feature rows and labels on the
//! same thread, with the same io_uring ring budget, into a reused buffer.
//!
//! A worker only starts *gathering* a batch once it is among the next `prefetch` the consumer
//! will take ([`ringgnn_pipeline::Emit::wait_turn`]): sampled batches are small, gathered ones
//! are not, so the pipeline's window (`prefetch + threads` batches) bounds the samples and the
//! turn bounds the feature matrices.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ringgnn_features::{FeatureFile, FeatureGatherer, GatherStats, HotRowCache, RowSource};
use ringgnn_io::AlignedBuf;
use ringgnn_io::{BackendKind, CoalesceOptions, ReadModel};
use ringgnn_pipeline::{Emit, Stage};
use ringgnn_sampler::{
    CompactSample, Graph, GraphSampler, HyperBatch, HyperPeaks, HyperSampler, HyperStates, Keep,
    SampleOptions, SampledSubgraph, SpillFile, SPILL_BUFFER,
};
use ringgnn_store::Bitmap;

use crate::buffers::BufferPool;
use crate::epoch::BatchJob;
use crate::labels::Labels;
use crate::options::Spill;
use crate::staging::{estimate, stage_rows, Staging, StagingOptions};
use crate::{Error, Result};

/// One sampled mini-batch of an epoch: its global index, its seeds and its sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub index: u64,
    pub seeds: Vec<u64>,
    pub sample: SampledSubgraph,
}

/// A batch of a hyperbatch waiting for its turn, its sample still compact (4 bytes per edge).
pub(crate) struct CompactBatch {
    index: u64,
    seeds: Vec<u64>,
    sample: CompactSample,
}

impl CompactBatch {
    fn expand(self) -> Batch {
        Batch {
            index: self.index,
            seeds: self.seeds,
            sample: self.sample.expand(),
        }
    }
}

/// One mini-batch, sampled and gathered.
#[derive(Debug)]
pub struct LoadedBatch {
    pub index: u64,
    pub seeds: Vec<u64>,
    pub sample: SampledSubgraph,
    /// Feature rows of `sample.node`, row-major `[nodes, dim]`, f32. Give it back with
    /// [`crate::BatchLoader::recycle`] (or drop it).
    pub x: Vec<f32>,
    /// Labels of `sample.node` (`-1` = unlabeled), when the dataset has labels.
    pub y: Option<Vec<i64>>,
    /// Time the worker spent sampling, waiting for its turn to gather (the prefetch bound),
    /// and gathering.
    pub sample_time: Duration,
    pub wait_time: Duration,
    pub gather_time: Duration,
    pub stats: GatherStats,
}

/// A worker's sampler, made on its thread, cancelled with the run.
fn worker_sampler(
    graph: &Graph,
    opts: &SampleOptions,
    stop: &Arc<AtomicBool>,
) -> Result<GraphSampler> {
    let mut s = graph.sampler(opts)?;
    s.set_cancel(stop.clone());
    Ok(s)
}

/// Sample batch `b` of `job`'s epoch.
fn sample(graph: &Graph, s: &mut GraphSampler, job: &BatchJob, b: u64) -> Result<Batch> {
    let seeds = job.batches.seeds_of(b);
    let sample = s.sample(graph, seeds, job.batches.epoch(), b)?;
    Ok(Batch {
        index: b,
        seeds: seeds.ids().to_vec(),
        sample,
    })
}

/// Sampling only: each output is the sampled [`Batch`].
pub struct SampleStage {
    pub(crate) graph: Arc<Graph>,
    pub(crate) opts: SampleOptions,
}

impl Stage for SampleStage {
    type Job = BatchJob;
    type State = GraphSampler;
    type Output = Batch;
    type Error = Error;

    fn start(&self, stop: &Arc<AtomicBool>) -> Result<GraphSampler> {
        worker_sampler(&self.graph, &self.opts, stop)
    }

    fn run(
        &self,
        s: &mut GraphSampler,
        job: BatchJob,
        out: &mut Emit<'_, Batch, Error>,
    ) -> Result<()> {
        for &b in &job.indices {
            out.emit(Ok(sample(&self.graph, s, &job, b)?));
        }
        Ok(())
    }
}

/// Wait until the job's next output is among the next `depth` the consumer will take
/// ([`Emit::wait_turn`]); an error once the epoch is stopped.
fn turn<T>(out: &Emit<'_, T, Error>, depth: usize) -> Result<()> {
    if out.wait_turn(depth) {
        Ok(())
    } else {
        Err(Error::Input("the epoch was stopped".into()))
    }
}

/// Spilled samples read back ahead of the one being handed out, besides the one being read.
const READ_AHEAD: usize = 1;

/// Where the sizes a hyperbatch is sized from come from, which decides their margin
/// ([`HyperFit::margin`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SizedFrom {
    /// The upper bound of one batch: no margin.
    #[default]
    Bounds,
    /// The largest of the loader's probe batches ([`crate::BatchLoader::open`]), measured by
    /// the per-batch sampler's estimate of what a batch holds in a hyperbatch.
    Probe,
    /// The largest of this many batches the drivers sampled in hyperbatches, as they held them.
    Epoch(u64),
}

/// How a hyperbatch's size follows from a share of memory: the one rule that the loader's
/// drivers apply ([`HyperSizing`], before any batch is measured and after each hyperbatch) and
/// by which the memory plan's cost predicts an epoch's hyperbatches
/// ([`HyperFit::epoch_jobs`], through [`crate::budget::Workload::hyper`]), so that the plan
/// prints what the run uses. Everything but the share (the plan weighs several) is here: a
/// batch's sizes before any is measured and where they come from, what each batch holds
/// besides, what the share keeps apart, the drivers splitting it, the spill policy and the
/// sampling threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HyperFit {
    /// A batch's sizes before any of the epoch's is measured: the largest of the probe's
    /// batches, or the upper bound of one batch (`from`).
    pub first: HyperPeaks,
    pub from: SizedFrom,
    /// Bytes each batch needs besides its sampling state (staging its rows), and the bytes the
    /// share keeps for staging's buffers (0 without features).
    pub extra: u64,
    pub reserved: u64,
    /// Workers that hold a hyperbatch each at once (2 with features: one gathers its batches
    /// for the consumer while the other samples and stages the next).
    pub drivers: u64,
    pub spill: Spill,
    /// Threads that each write one finished sample at a time when spilling.
    pub threads: u64,
}

impl HyperFit {
    /// Safety margin over the largest batch state the drivers measured: batches of one epoch
    /// vary. Once [`Self::SETTLED`] batches have been measured, their largest is a high quantile
    /// of the epoch's batches (reused states keep the largest each held anyway), and the margin
    /// only covers one larger than any seen: [`Self::SETTLED_MARGIN`].
    const MARGIN: f64 = 1.5;
    const SETTLED: u64 = 16;
    const SETTLED_MARGIN: f64 = 1.15;
    /// The margin on the probe's sizes: besides batches varying, they are the per-batch
    /// sampler's estimate of what a batch holds in a hyperbatch, below what the drivers then
    /// measure (buffers' capacity, reused states: 1.35x on the hub graph of
    /// `tests/hyperbatch.rs`).
    const PROBE_MARGIN: f64 = 2.0;

    /// The margin on sizes that come `from` there: none on upper bounds, [`Self::PROBE_MARGIN`]
    /// on the probe's, [`Self::MARGIN`] on the drivers' own, [`Self::SETTLED_MARGIN`] once
    /// settled. The only margins hyperbatch sizes are given, by the drivers and the plan alike.
    pub const fn margin(from: SizedFrom) -> f64 {
        match from {
            SizedFrom::Bounds => 1.0,
            SizedFrom::Probe => Self::PROBE_MARGIN,
            SizedFrom::Epoch(n) if n >= Self::SETTLED => Self::SETTLED_MARGIN,
            SizedFrom::Epoch(_) => Self::MARGIN,
        }
    }

    /// Batches per hyperbatch before any of the epoch's is measured, for a share of `arena`
    /// bytes: what the drivers start with.
    pub fn first_size(&self, arena: u64) -> usize {
        self.first_sizing(arena).1
    }

    /// [`Self::size`] before any of the epoch's batches is measured: the first sizes with
    /// their margin.
    fn first_sizing(&self, arena: u64) -> (usize, usize, u64) {
        self.size(arena, self.first, 0, Self::margin(self.from), false)
    }

    /// The batches of each hyperbatch of an epoch of `batches` batches sized from a share of
    /// `arena` bytes (`short_first`: loading drivers that may stage, `EpochJobs::with_short_first`),
    /// as the drivers cut it when its batches hold what the first sizes say: each driver's
    /// first job is claimed before any batch is measured ([`Self::first_size`]); job `j` of
    /// `d` drivers once job `j - d` has ended, sized from the batches measured by then with
    /// their margin ([`SizedFrom::Epoch`]; sizes that are upper bounds stay upper bounds, with
    /// no margin). What the plan prints and costs (`budget::cost::estimate`). The drivers'
    /// sampling threads' scratch, measured as they run, is not known before (0 here).
    pub fn epoch_jobs(&self, arena: u64, batches: usize, short_first: bool) -> Vec<usize> {
        let d = self.drivers.max(1) as usize;
        let first = self.first_size(arena);
        // Sized from the same sizes, only the margin changes with the batches measured: the
        // size for each (one per margin) is worked out once.
        let later = |measured: usize| {
            let margin = match self.from {
                SizedFrom::Bounds => 1.0,
                _ => Self::margin(SizedFrom::Epoch(measured as u64)),
            };
            self.size(arena, self.first, 0, margin, false).1
        };
        let (unsettled, settled) = (later(1), later(Self::SETTLED as usize));
        let mut jobs: Vec<usize> = Vec::new();
        // Batches of the jobs that have ended before job `j` is claimed (jobs `..=j - d`).
        let mut measured = 0;
        let mut left = batches;
        while left > 0 {
            let j = jobs.len();
            let most = if j < d {
                first
            } else {
                measured += jobs[j - d];
                if measured >= Self::SETTLED as usize {
                    settled
                } else {
                    unsettled
                }
            };
            let n = crate::epoch::take(left, most, true, short_first && j == 0);
            jobs.push(n);
            left -= n;
        }
        jobs
    }

    /// Bytes one driver's batch states may take: its part of the share `arena`, less its
    /// staging buffers and `scratch` (what its sampler holds whatever the hyperbatch size).
    fn states(&self, arena: u64, scratch: u64) -> u64 {
        (arena / self.drivers.max(1)).saturating_sub(self.reserved + scratch)
    }

    /// The largest hyperbatch that fits `arena` with `peaks` per batch, `scratch` apart and
    /// `margin`: with its samples kept, and by the policy (the larger of kept and spilled for
    /// [`Spill::Auto`]); and the limit a spilling hyperbatch admits its last hops within. The
    /// spill file's buffers, once it is open (`spill_open`), are held either way.
    fn size(
        &self,
        arena: u64,
        peaks: HyperPeaks,
        scratch: u64,
        margin: f64,
        spill_open: bool,
    ) -> (usize, usize, u64) {
        let states = self.states(arena, scratch);
        let file = SpillFile::BUFFER_BYTES + SPILL_BUFFER as u64;
        let kept = Self::fit(
            states.saturating_sub(if spill_open { file } else { 0 }),
            (peaks.batch + self.extra) as f64 * margin,
        );
        let in_flight = self.spill_samples(peaks.sample, margin) + file;
        // A spilling sampling driver admits its batches' last hops within `limit`, by bounds
        // taken from their frontiers, so its size needs no margin over the largest state: a
        // batch larger than measured is left for the next hyperbatch, not over the share.
        let admits = self.drivers <= 1;
        let spilled = Self::fit(
            states.saturating_sub(in_flight),
            (peaks.resident + self.extra) as f64 * if admits { 1.0 } else { margin },
        );
        let limit = self.states(arena, 0).saturating_sub(in_flight);
        let h = match self.spill {
            Spill::Off => kept,
            Spill::On => spilled,
            Spill::Auto => kept.max(spilled),
        };
        (kept, h, limit)
    }

    /// Bytes of the samples a spilling hyperbatch holds whatever its size: the one each thread
    /// is writing and the two the driver has read back ahead of the one it hands out (`sample`
    /// bytes each, with the margin). Besides them: the spill file's write buffers and the
    /// driver's read buffer.
    fn spill_samples(&self, sample: u64, margin: f64) -> u64 {
        ((self.threads.max(1) as usize + READ_AHEAD + 1) as f64 * sample as f64 * margin) as u64
    }

    /// A hyperbatch of `h` batches holds `h` batch states: the worker starts one only once the
    /// consumer has taken every sample of the previous one (what it still holds is planned
    /// apart, as `hold`).
    fn fit(arena: u64, per_batch: f64) -> usize {
        crate::budget::batches_fitting(arena, 0, per_batch).max(1)
    }
}

/// How many batches the next hyperbatch takes: fixed, or the largest whose state fits the
/// plan's share by [`HyperFit`] (from the largest batch state measured so far and, before any,
/// from the probe's or the upper bound of one batch); and whether a hyperbatch spills its
/// finished samples.
pub(crate) struct HyperSizing {
    /// Bytes for the states of the batches of one hyperbatch (the plan's share; it shrinks when
    /// the plan is redone for larger batches).
    pub(crate) arena: AtomicU64,
    pub(crate) fixed: Option<usize>,
    pub(crate) fit: HyperFit,
    /// Batches the next job takes (read by the epoch's job source at each claim).
    pub(crate) next: Arc<AtomicUsize>,
    /// The most batches a hyperbatch holds with its samples kept (a larger one spills).
    /// Loading drivers spill too, keeping of each batch only the cold row ids its staging pass
    /// reads (part of `extra`).
    kept: AtomicUsize,
    /// Bytes a spilling hyperbatch's states and its sampler's threads may take (the share less
    /// the samples in flight and the spill buffers): the sampler leaves out the batches whose
    /// last hop would not fit ([`HyperSampler::sample_spilled`]).
    limit: AtomicU64,
    /// Batches measured so far.
    seen: AtomicU64,
}

impl HyperSizing {
    /// Sized by `fit` for a share of `arena` bytes (or `fixed` batches a hyperbatch).
    pub(crate) fn new(arena: u64, fixed: Option<usize>, fit: HyperFit) -> Self {
        let s = HyperSizing {
            arena: AtomicU64::new(arena),
            fixed,
            fit,
            next: Arc::new(AtomicUsize::new(1)),
            kept: AtomicUsize::new(usize::MAX),
            limit: AtomicU64::new(0),
            seen: AtomicU64::new(0),
        };
        // Before any batch is measured: by the probe's sizes or the upper bound of a batch,
        // with their margin (as the plan predicted: [`HyperFit::epoch_jobs`]).
        let (kept, h, limit) = fit.first_sizing(arena);
        s.next.store(fixed.unwrap_or(h), Ordering::Relaxed);
        s.kept.store(kept, Ordering::Relaxed);
        s.limit.store(limit, Ordering::Relaxed);
        s
    }

    /// Workers that hold a hyperbatch each at once.
    pub(crate) fn drivers(&self) -> usize {
        self.fit.drivers.max(1) as usize
    }

    /// Whether a hyperbatch of `h` batches spills its samples: always with [`Spill::On`]; with
    /// [`Spill::Auto`], when it holds more batches than fit with their samples kept.
    pub(crate) fn spills(&self, h: usize) -> bool {
        match self.fit.spill {
            Spill::On => true,
            Spill::Off => false,
            Spill::Auto => h > self.kept.load(Ordering::Relaxed),
        }
    }

    /// What a spilling hyperbatch's states and its sampler's threads may take (see
    /// [`HyperSampler::sample_spilled`]).
    pub(crate) fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// After a hyperbatch: size the next from the largest batch state measured so far and what
    /// the sampler holds apart (`scratch`), by [`HyperFit`] with the margin of the batches
    /// measured so far: kept, each batch holds `peaks.batch`; spilled, `peaks.resident`,
    /// besides the samples in flight and the spill file's buffers. With [`Spill::Auto`] the
    /// next takes whichever holds more batches.
    fn measured(&self, peaks: HyperPeaks, scratch: u64, batches: usize, spill_open: bool) {
        if peaks.batch == 0 {
            return;
        }
        let seen = self.seen.fetch_add(batches as u64, Ordering::Relaxed) + batches as u64;
        let arena = self.arena.load(Ordering::Relaxed);
        let (kept, h, limit) = self.fit.size(
            arena,
            peaks,
            scratch,
            HyperFit::margin(SizedFrom::Epoch(seen)),
            spill_open,
        );
        self.kept.store(kept, Ordering::Relaxed);
        self.limit.store(limit, Ordering::Relaxed);
        if self.fixed.is_none() {
            self.next.store(h, Ordering::Relaxed);
        }
    }
}

/// What hyperbatch workers share: the sampling side of [`HyperSampleStage`] and
/// [`HyperLoadStage`].
pub(crate) struct HyperParts {
    pub(crate) graph: Arc<Graph>,
    pub(crate) opts: SampleOptions,
    pub(crate) threads: usize,
    pub(crate) sizing: HyperSizing,
    /// The batch states of the last hyperbatch worker, for the next one (the plan's share
    /// holds them; new memory would cost a page fault per 4 KiB on every epoch).
    pub(crate) states: Mutex<Vec<HyperStates>>,
    /// Where spill files go.
    pub(crate) spill_dir: std::path::PathBuf,
}

/// A hyperbatch worker's sampler, whose batch states go back to the loader when it ends, and
/// its spill file with the buffer it reads samples back through (made at its first spill).
pub struct HyperWorker {
    hs: HyperSampler,
    parts: Arc<HyperParts>,
    spill: Option<(SpillFile, AlignedBuf)>,
}

impl Drop for HyperWorker {
    fn drop(&mut self) {
        let states = self.hs.take_states();
        let mut pool = self.parts.states.lock().unwrap_or_else(|e| e.into_inner());
        // One set per driver of an epoch at most.
        if pool.len() < self.parts.sizing.drivers() {
            pool.push(states);
        }
    }
}

impl HyperParts {
    fn sampler(self: &Arc<Self>, stop: &Arc<AtomicBool>) -> Result<HyperWorker> {
        let mut hs = self
            .graph
            .hyper_sampler(&self.opts, ReadModel::from_env(), self.threads)?
            .ok_or_else(|| Error::Input("hyperbatches read the neighbor file from disk".into()))?;
        hs.set_cancel(stop.clone());
        let states = self
            .states
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        Ok(HyperWorker {
            hs: hs.with_states(states),
            parts: self.clone(),
            spill: None,
        })
    }

    /// Sample the job's batches together.
    fn sample(&self, w: &mut HyperWorker, job: &BatchJob) -> Result<Vec<CompactBatch>> {
        let open = w.spill.is_some();
        let samples = self.sample_with(&mut w.hs, open, job, |hs, batches| hs.sample(batches))?;
        Ok(job
            .indices
            .iter()
            .zip(samples)
            .map(|(&index, sample)| CompactBatch {
                index,
                seeds: job.batches.seeds_of(index).ids().to_vec(),
                sample,
            })
            .collect())
    }

    /// Sample the job's batches together into the worker's spill file (started over: the
    /// consumer has read every sample of the previous hyperbatch), each written as soon as it
    /// is finished; they come back in the job's order, each with what `keep` kept of it (empty
    /// without). A sampling driver admits the batches' last hops within its share: only the
    /// first ones come back when the others' would not fit (see [`HyperSizing::limit`]).
    /// Loading drivers are sized with the margin instead, and every batch comes back.
    fn sample_spilled(
        &self,
        w: &mut HyperWorker,
        job: &BatchJob,
        keep: Option<&Keep<'_>>,
    ) -> Result<Vec<(ringgnn_sampler::Spilled, Vec<u64>)>> {
        if w.spill.is_none() {
            let f = SpillFile::create(&self.spill_dir).map_err(|e| {
                Error::Input(format!(
                    "cannot create the hyperbatch spill file in {}: {e} (choose another \
                     directory with --spill-dir, spill_dir= in Python, --staging-dir or \
                     staging_dir= for a Loader, or turn spilling off)",
                    self.spill_dir.display()
                ))
            })?;
            w.spill = Some((f, AlignedBuf::new(SPILL_BUFFER)));
        }
        let (hs, (spill, _)) = (&mut w.hs, w.spill.as_mut().expect("made above"));
        spill.rewind();
        let before = spill.traffic().0;
        let limit = (self.sizing.drivers() == 1).then(|| self.sizing.limit());
        let r = self.sample_with(hs, true, job, |hs, batches| match keep {
            Some(k) => hs.sample_spilled_keeping(batches, spill, limit, k),
            None => Ok(hs
                .sample_spilled(batches, spill, limit)?
                .into_iter()
                .map(|r| (r, Vec::new()))
                .collect()),
        });
        self.graph.record_spill(spill.traffic().0 - before);
        r
    }

    /// Run `f` on the job's batches, counting its reads and sizing the next hyperbatch from
    /// what it measured (and whether the worker's spill file is open).
    fn sample_with<T>(
        &self,
        hs: &mut HyperSampler,
        spill_open: bool,
        job: &BatchJob,
        f: impl FnOnce(&mut HyperSampler, &[HyperBatch<'_>]) -> ringgnn_sampler::Result<Vec<T>>,
    ) -> Result<Vec<T>> {
        let batches: Vec<HyperBatch> = job
            .indices
            .iter()
            .map(|&b| HyperBatch {
                seeds: job.batches.seeds_of(b),
                epoch: job.batches.epoch(),
                batch: b,
            })
            .collect();
        let (c0, io0) = (hs.counts(), hs.io_stats());
        let samples = f(hs, &batches)?;
        let (c1, io1) = (hs.counts(), hs.io_stats());
        self.graph.record_hyperbatch(
            ringgnn_io::IoStats {
                reads: io1.reads - io0.reads,
                bytes: io1.bytes - io0.bytes,
                batches: io1.batches - io0.batches,
            },
            c1.sequential_bytes - c0.sequential_bytes,
            c1.random_bytes - c0.random_bytes,
            samples.len() as u64,
        );
        self.sizing
            .measured(hs.peaks(), hs.scratch_bytes(), samples.len(), spill_open);
        Ok(samples)
    }
}

/// Hyperbatch sampling: each job is several batches sampled together by one driver worker
/// (which uses the loader's threads inside), each output one of its [`Batch`]es.
pub struct HyperSampleStage {
    pub(crate) parts: Arc<HyperParts>,
}

impl Stage for HyperSampleStage {
    type Job = BatchJob;
    type State = HyperWorker;
    type Output = Batch;
    type Error = Error;

    fn start(&self, stop: &Arc<AtomicBool>) -> Result<HyperWorker> {
        self.parts.sampler(stop)
    }

    fn run(
        &self,
        w: &mut HyperWorker,
        job: BatchJob,
        out: &mut Emit<'_, Batch, Error>,
    ) -> Result<()> {
        // Once the consumer has taken every sample of the previous hyperbatch, so that the
        // batch states, reused, are the only ones alive.
        turn(out, 1)?;
        if self.parts.sizing.spills(job.indices.len()) {
            // Batches left out for want of room are sampled next, as a hyperbatch of their own.
            let mut rest = job;
            loop {
                let recs = self.parts.sample_spilled(w, &rest, None)?;
                let (f, buf) = w.spill.as_mut().expect("the spill file of this hyperbatch");
                let left = rest.indices.split_off(recs.len());
                let recs = recs.into_iter().map(|(r, _)| r).collect();
                read_back(f, buf, recs, &rest, |_, b| {
                    turn(out, 1)?;
                    out.emit(Ok(b.expand()));
                    Ok(())
                })?;
                if left.is_empty() {
                    return Ok(());
                }
                turn(out, 1)?;
                rest.indices = left;
            }
        }
        // Each batch expanded only when its turn comes: until then it stays compact.
        for b in self.parts.sample(w, &job)? {
            turn(out, 1)?;
            out.emit(Ok(b.expand()));
        }
        Ok(())
    }
}

/// Read a spilled hyperbatch's samples back in order and pass each batch (its place in the job
/// and the batch) to `each`, which hands it out when its turn comes; a thread reads the samples
/// back from the spill file meanwhile, [`READ_AHEAD`] ahead.
fn read_back(
    f: &SpillFile,
    buf: &mut AlignedBuf,
    recs: Vec<ringgnn_sampler::Spilled>,
    job: &BatchJob,
    mut each: impl FnMut(usize, CompactBatch) -> Result<()>,
) -> Result<()> {
    std::thread::scope(|sc| {
        let (tx, rx) = std::sync::mpsc::sync_channel(READ_AHEAD);
        let reader = sc.spawn(move || {
            for r in recs {
                let s = f.read(r, buf);
                let failed = s.is_err();
                // Closed: the driver stopped taking them.
                if tx.send(s).is_err() || failed {
                    break;
                }
            }
        });
        let handed = (|| {
            for (i, &index) in job.indices.iter().enumerate() {
                let sample = rx
                    .recv()
                    .map_err(|_| Error::Input("the spill reader stopped".into()))??;
                each(
                    i,
                    CompactBatch {
                        index,
                        seeds: job.batches.seeds_of(index).ids().to_vec(),
                        sample,
                    },
                )?;
            }
            Ok(())
        })();
        // The reader ends at its next send, if it is still reading.
        drop(rx);
        if let Err(p) = reader.join() {
            std::panic::resume_unwind(p);
        }
        handed
    })
}

/// Hyperbatch sampling, then each batch's rows gathered in turn (as [`LoadStage`] does).
pub struct HyperLoadStage {
    pub(crate) parts: Arc<HyperParts>,
    pub(crate) gather: Arc<GatherParts>,
}

impl Stage for HyperLoadStage {
    type Job = BatchJob;
    type State = (HyperWorker, FeatureGatherer, Option<Staging>);
    type Output = LoadedBatch;
    type Error = Error;

    fn start(&self, stop: &Arc<AtomicBool>) -> Result<Self::State> {
        // Staging's buffers come from the hyperbatch share: none when it is smaller.
        let room =
            self.parts.sizing.arena.load(Ordering::Relaxed) >= self.parts.sizing.fit.reserved;
        let staging = match (&self.gather.staging, &self.gather.rows) {
            (Some(o), RowsFrom::Disk { kind, direct }) if room => Some(Staging::new(
                o.clone(),
                self.gather.file.clone(),
                *kind,
                *direct,
                stop,
            )),
            _ => None,
        };
        Ok((
            self.parts.sampler(stop)?,
            self.gather.gatherer(stop)?,
            staging,
        ))
    }

    fn run(
        &self,
        (w, g, staging): &mut Self::State,
        job: BatchJob,
        out: &mut Emit<'_, LoadedBatch, Error>,
    ) -> Result<()> {
        let t0 = Instant::now();
        let h = job.indices.len().max(1) as u32;
        // The first hyperbatch of an epoch is gathered batch by batch, while the second is
        // staged (`staging::stage_rows`): its cold rows are not even listed.
        let can_stage = staging.as_ref().is_some_and(|s| s.disabled.is_none());
        let may_stage = can_stage && !job.first;
        if can_stage && job.first {
            let mut t = self.gather.totals.lock().unwrap_or_else(|e| e.into_inner());
            t.unstaged_hyperbatches += 1;
        }
        // No wait: the batches come out one at a time, each when its turn comes, so what lives
        // is the hyperbatch states of the drivers (the plan's share) and the batches ahead.
        if self.parts.sizing.spills(job.indices.len()) {
            // Each sample is written to the spill file as soon as it is finished, and of it
            // only the cold row ids a staging pass reads stay in memory.
            let (file, cache) = (&self.gather.file, self.gather.cache.as_deref());
            let keep = |nodes: &[u64]| -> ringgnn_sampler::Result<Vec<u64>> {
                let mut cold = Vec::new();
                FeatureGatherer::cold_rows(file, cache, nodes, &mut cold)
                    .map_err(|e| ringgnn_sampler::Error::Input(e.to_string()))?;
                Ok(cold)
            };
            let keep: &Keep<'_> = &keep;
            let recs = self
                .parts
                .sample_spilled(w, &job, may_stage.then_some(keep))?;
            let sample_time = t0.elapsed() / h;
            let (recs, cold): (Vec<_>, Vec<_>) = recs.into_iter().unzip();
            let pass = match staging.as_mut() {
                Some(st) if may_stage => {
                    st.cold = cold;
                    self.stage(st, h)?
                }
                _ => None,
            };
            let (f, buf) = w.spill.as_mut().expect("the spill file of this hyperbatch");
            return read_back(f, buf, recs, &job, |b, batch| {
                self.hand_out(g, staging, pass, b, batch, sample_time, out)
            });
        }
        let batches = self.parts.sample(w, &job)?;
        // The hyperbatch's sampling time, shared out over its batches.
        let sample_time = t0.elapsed() / h;
        let pass = match staging.as_mut() {
            Some(st) if may_stage => {
                st.cold.resize_with(batches.len(), Vec::new);
                st.cold.truncate(batches.len());
                for (b, batch) in batches.iter().enumerate() {
                    g.cold_ids(batch.sample.node(), &mut st.cold[b])?;
                }
                self.stage(st, h)?
            }
            _ => None,
        };
        for (b, batch) in batches.into_iter().enumerate() {
            self.hand_out(g, staging, pass, b, batch, sample_time, out)?;
        }
        Ok(())
    }
}

impl HyperLoadStage {
    /// Batch `b` of the hyperbatch, when its turn comes: its rows gathered (from the staging
    /// file when `pass`, the batch's share of the pass's time and bytes, says they were
    /// staged) and handed out.
    #[allow(clippy::too_many_arguments)]
    fn hand_out(
        &self,
        g: &mut FeatureGatherer,
        staging: &mut Option<Staging>,
        pass: Option<(Duration, u64)>,
        b: usize,
        batch: CompactBatch,
        sample_time: Duration,
        out: &mut Emit<'_, LoadedBatch, Error>,
    ) -> Result<()> {
        let t = Instant::now();
        turn(out, self.gather.ahead)?;
        let wait_time = t.elapsed();
        let from = match (staging.as_mut(), pass) {
            (Some(st), Some((time, bytes))) => Some(Staged {
                staging: st,
                batch: b,
                time,
                bytes,
            }),
            _ => None,
        };
        out.emit(Ok(gather(
            &self.gather,
            g,
            batch.expand(),
            sample_time,
            wait_time,
            from,
        )?));
        Ok(())
    }

    /// Stage the hyperbatch's cold rows (`st.cold`, one list per batch) if the cost model finds
    /// it cheaper than reading them batch by batch ([`stage_rows`]: this is not an epoch's
    /// first hyperbatch), and it fits the staging file's cap; when staged, each of the `h`
    /// batches' share of the pass's time and of the bytes it read.
    fn stage(&self, st: &mut Staging, h: u32) -> Result<Option<(Duration, u64)>> {
        let t0 = Instant::now();
        let est = estimate(&st.cold, &self.gather.file, st.model());
        let (pass0, written0, _) = st.traffic();
        let (load0, write0, _) = st.io_seconds();
        let staged = stage_rows(false, est.per_batch, est.staged) && st.stage()?;
        let (load, write, _) = st.io_seconds();
        let mut t = self.gather.totals.lock().unwrap_or_else(|e| e.into_inner());
        t.staging_needed_bytes += est.needed_pages * ringgnn_io::ALIGN as u64;
        if staged {
            t.staging_seconds += t0.elapsed().as_secs_f64();
            t.staging_load_seconds += load - load0;
            t.staging_write_seconds += write - write0;
        }
        t.est_per_batch_seconds += est.per_batch;
        t.est_staged_seconds += est.staged;
        if staged {
            t.staged_hyperbatches += 1;
        } else {
            t.unstaged_hyperbatches += 1;
        }
        let (pass, written, _) = st.traffic();
        t.staging_pass_bytes += pass - pass0;
        t.staging_written_bytes += written - written0;
        Ok(staged.then(|| (t0.elapsed() / h, (pass - pass0) / h as u64)))
    }
}

/// A batch whose cold rows wait in a staging file, with its share of the pass that put them
/// there.
pub(crate) struct Staged<'a> {
    staging: &'a mut Staging,
    batch: usize,
    time: Duration,
    bytes: u64,
}

/// Where a gather worker reads rows from, as the plan decided.
pub(crate) enum RowsFrom {
    Memory(Arc<Vec<u8>>),
    Disk { kind: BackendKind, direct: bool },
}

/// Counters over every batch a loader has produced.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoaderStats {
    pub batches: u64,
    /// Worker seconds (summed over threads) spent sampling and gathering.
    pub sample_seconds: f64,
    pub gather_seconds: f64,
    pub gather: GatherStats,
    /// Rows of the hot-row cache, its bytes, and the seconds and batches of look-ahead
    /// sampling that chose them (0 for the in-degree policy).
    pub cached_rows: u64,
    pub cache_bytes: u64,
    pub presample_seconds: f64,
    pub presample_batches: u64,
    /// Hyperbatches whose cold rows were staged, and those gathered batch by batch; the
    /// estimates (seconds) the cost model compared, summed; the bytes the staging passes read
    /// from the feature file and wrote to the staging file.
    pub staged_hyperbatches: u64,
    pub unstaged_hyperbatches: u64,
    pub est_per_batch_seconds: f64,
    pub est_staged_seconds: f64,
    pub staging_pass_bytes: u64,
    pub staging_written_bytes: u64,
    /// Where the gather seconds go: wall seconds of the staging passes (of which waiting for
    /// the feature file's reads, and for the staging file's writes), of gathering staged
    /// batches (their share of a pass left out; of which reading their rows back), and of
    /// gathering batches by random reads; the pages holding a cold row of a hyperbatch whose
    /// staging was weighed, in bytes (what a pass could read at least).
    pub staging_seconds: f64,
    pub staging_load_seconds: f64,
    pub staging_write_seconds: f64,
    pub staged_gather_seconds: f64,
    pub staged_read_seconds: f64,
    pub random_gather_seconds: f64,
    pub staging_needed_bytes: u64,
}

/// What gathering needs, shared by every worker of a loader's epochs.
pub(crate) struct GatherParts {
    pub(crate) file: FeatureFile,
    pub(crate) rows: RowsFrom,
    pub(crate) cache: Option<Arc<HotRowCache>>,
    pub(crate) labels: Option<Labels>,
    pub(crate) buffers: Arc<BufferPool>,
    /// Gathered batches ahead of the consumer (the plan's prefetch).
    pub(crate) ahead: usize,
    pub(crate) totals: Mutex<LoaderStats>,
    /// Where hyperbatches may stage their cold rows (`None`: never).
    pub(crate) staging: Option<StagingOptions>,
    /// Rows a device holds (the GPU tier of the cache): left out of each batch's `x`.
    pub(crate) device_rows: OnceLock<RowSet>,
}

/// The node ids a device holds, checked against the dataset, and how many there are.
#[derive(Debug)]
pub(crate) struct RowSet {
    bits: Bitmap,
    len: usize,
}

impl RowSet {
    pub(crate) fn new(num_nodes: u64, ids: &[u64]) -> Result<Self> {
        let mut bits = Bitmap::new(num_nodes);
        let mut len = 0;
        for &id in ids {
            if id >= num_nodes {
                return Err(Error::Input(format!(
                    "device row {id} is not a node: the dataset has {num_nodes} nodes ({})",
                    ringgnn_store::IdRange(num_nodes)
                )));
            }
            len += usize::from(bits.insert(id));
        }
        Ok(RowSet { bits, len })
    }

    pub(crate) fn contains(&self, id: u64) -> bool {
        self.bits.contains(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Drop the rows of `nodes` that `set` holds from `x` (`[nodes, dim]`, row-major), keeping the
/// others in order; returns how many are left.
fn compact(x: &mut Vec<f32>, nodes: &[u64], dim: usize, set: &RowSet) -> usize {
    let mut kept = 0;
    for (i, &n) in nodes.iter().enumerate() {
        if set.contains(n) {
            continue;
        }
        if kept != i {
            x.copy_within(i * dim..(i + 1) * dim, kept * dim);
        }
        kept += 1;
    }
    x.truncate(kept * dim);
    kept
}

impl GatherParts {
    /// A gatherer for the calling thread (its own read backend).
    pub(crate) fn gatherer(&self, stop: &Arc<AtomicBool>) -> Result<FeatureGatherer> {
        let source = match &self.rows {
            RowsFrom::Memory(bytes) => RowSource::Memory(bytes.clone()),
            RowsFrom::Disk { kind, direct } => {
                RowSource::open(&self.file, *kind, *direct, CoalesceOptions::default())?.0
            }
        };
        let mut g = FeatureGatherer::new(self.file.clone(), source);
        if let Some(c) = &self.cache {
            g = g.with_cache(c.clone())?;
        }
        g.set_cancel(stop.clone());
        Ok(g)
    }
}

/// Sampling and gathering: each output is a [`LoadedBatch`].
pub struct LoadStage {
    pub(crate) graph: Arc<Graph>,
    pub(crate) opts: SampleOptions,
    pub(crate) parts: Arc<GatherParts>,
}

impl Stage for LoadStage {
    type Job = BatchJob;
    type State = (GraphSampler, FeatureGatherer);
    type Output = LoadedBatch;
    type Error = Error;

    fn start(&self, stop: &Arc<AtomicBool>) -> Result<Self::State> {
        Ok((
            worker_sampler(&self.graph, &self.opts, stop)?,
            self.parts.gatherer(stop)?,
        ))
    }

    fn run(
        &self,
        (s, g): &mut Self::State,
        job: BatchJob,
        out: &mut Emit<'_, LoadedBatch, Error>,
    ) -> Result<()> {
        for &b in &job.indices {
            let t0 = Instant::now();
            let batch = sample(&self.graph, s, &job, b)?;
            let sample_time = t0.elapsed();
            let t1 = Instant::now();
            turn(out, self.parts.ahead)?;
            let wait_time = t1.elapsed();
            out.emit(Ok(gather(
                &self.parts,
                g,
                batch,
                sample_time,
                wait_time,
                None,
            )?));
        }
        Ok(())
    }
}

/// Gather `batch`'s rows and labels into a reused buffer.
fn gather(
    p: &GatherParts,
    g: &mut FeatureGatherer,
    batch: Batch,
    sample_time: Duration,
    wait_time: Duration,
    staged: Option<Staged<'_>>,
) -> Result<LoadedBatch> {
    let t0 = Instant::now();
    let nodes = &batch.sample.node;
    let mut x = p.buffers.take(nodes.len() * p.file.dim());
    let (extra_time, extra_bytes) = staged
        .as_ref()
        .map_or((Duration::ZERO, 0), |s| (s.time, s.bytes));
    let was_staged = staged.is_some();
    let mut read_back = 0.0;
    let got = match staged {
        None => g.gather(nodes, &mut x),
        Some(s) => {
            let r0 = s.staging.io_seconds().2;
            let got = g.gather_staged(nodes, &mut x, |_, visit| s.staging.rows(s.batch, visit));
            read_back = s.staging.io_seconds().2 - r0;
            got
        }
    };
    let mut stats = match got {
        Ok(s) => s,
        Err(e) => {
            p.buffers.give(x);
            return Err(e.into());
        }
    };
    if let Some(set) = p.device_rows.get() {
        compact(&mut x, nodes, p.file.dim(), set);
    }
    // A staged batch's share of the pass over the feature file.
    stats.bytes_read += extra_bytes;
    stats.pages_read += extra_bytes / 4096;
    let y = p.labels.as_ref().map(|l| {
        let mut y = Vec::with_capacity(nodes.len());
        l.gather_into(nodes, &mut y);
        y
    });
    let own_time = t0.elapsed();
    let gather_time = own_time + extra_time;
    {
        let mut t = p.totals.lock().unwrap_or_else(|e| e.into_inner());
        if was_staged {
            t.staged_gather_seconds += own_time.as_secs_f64();
            t.staged_read_seconds += read_back;
        } else {
            t.random_gather_seconds += own_time.as_secs_f64();
        }
        t.batches += 1;
        t.sample_seconds += sample_time.as_secs_f64();
        t.gather_seconds += gather_time.as_secs_f64();
        t.gather.add(&stats);
    }
    Ok(LoadedBatch {
        index: batch.index,
        seeds: batch.seeds,
        sample: batch.sample,
        x,
        y,
        sample_time,
        wait_time,
        gather_time,
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    #[test]
    fn compact_keeps_the_rows_a_device_lacks_in_order() {
        let set = RowSet::new(200, &[3, 7, 130]).unwrap();
        assert_eq!(set.len(), 3);
        assert!(set.contains(130) && !set.contains(131) && !set.contains(10_000));
        let nodes = [7u64, 1, 3, 130, 5, 199];
        let mut x: Vec<f32> = (0..12).map(|v| v as f32).collect(); // dim 2: row i = [2i, 2i+1]
        assert_eq!(compact(&mut x, &nodes, 2, &set), 3);
        assert_eq!(x, vec![2.0, 3.0, 8.0, 9.0, 10.0, 11.0]);
        let e = RowSet::new(10, &[10]).unwrap_err().to_string();
        assert!(e.contains("device row 10 is not a node"), "{e}");
    }

    /// A sizing as the loader makes it, from `first` sizes: upper bounds.
    #[allow(clippy::too_many_arguments)]
    fn sizing(
        arena: u64,
        fixed: Option<usize>,
        first: HyperPeaks,
        extra: u64,
        reserved: u64,
        drivers: u64,
        spill: Spill,
        threads: u64,
    ) -> HyperSizing {
        let fit = HyperFit {
            first,
            from: SizedFrom::Bounds,
            extra,
            reserved,
            drivers,
            spill,
            threads,
        };
        HyperSizing::new(arena, fixed, fit)
    }

    /// First sizes from the upper bound of a batch: the same for kept and spilled samples.
    fn bound(b: u64) -> HyperPeaks {
        HyperPeaks {
            batch: b,
            resident: b,
            sample: b,
        }
    }

    #[test]
    fn hyperbatch_sizes_split_the_share_between_drivers() {
        let peaks = |batch, resident, sample| HyperPeaks {
            batch,
            resident,
            sample,
        };
        // One driver: 100 MiB less 1 MiB of staging buffers, batches bounded at 9 MiB (+1 of
        // staging each): 9 batches.
        let s = sizing(100 * MB, None, bound(9 * MB), MB, MB, 1, Spill::Off, 2);
        assert_eq!(s.next.load(Ordering::Relaxed), 9);
        // Measured at 5 MiB, with the 1.5 margin and 3 MiB the sampler holds apart:
        // (99 - 3) / (6 * 1.5) = 10.
        s.measured(peaks(5 * MB, 3 * MB, 2 * MB), 3 * MB, 4, false);
        assert_eq!(s.next.load(Ordering::Relaxed), 10);
        assert!(!s.spills(10) && !s.spills(1000));
        // Once 16 batches are measured, the margin over their largest is 1.15:
        // 96 / (6 * 1.15) = 13.
        s.measured(peaks(5 * MB, 3 * MB, 2 * MB), 3 * MB, 12, false);
        assert_eq!(s.next.load(Ordering::Relaxed), 13);
        // Two drivers each hold a hyperbatch: each gets half the share.
        let s = sizing(100 * MB, None, bound(9 * MB), MB, MB, 2, Spill::Off, 2);
        assert_eq!(s.next.load(Ordering::Relaxed), 4);
        s.measured(peaks(5 * MB, 3 * MB, 2 * MB), 3 * MB, 4, false);
        assert_eq!(s.next.load(Ordering::Relaxed), 5);
        // A fixed size stays; too small a share still makes progress, one batch at a time.
        let s = sizing(100 * MB, Some(7), bound(9 * MB), MB, MB, 2, Spill::Off, 2);
        s.measured(peaks(5 * MB, 3 * MB, 2 * MB), 3 * MB, 4, false);
        assert_eq!(s.next.load(Ordering::Relaxed), 7);
        let s = sizing(MB, None, bound(9 * MB), 0, 0, 1, Spill::Off, 2);
        assert_eq!(s.next.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn spilling_sizes_by_the_state_before_the_last_hop() {
        let peaks = HyperPeaks {
            batch: 8 * MB,
            resident: 4 * MB,
            sample: 4 * MB,
        };
        // Kept: 120 MiB / (8 * 1.5) = 10 batches. Spilled: 120 MiB less four samples (two being
        // written, two read back ahead: 6 MiB each with the margin) and 5 spill buffers,
        // 91 MiB / 4 = 22 batches: a sampling driver admits its batches' last hops by their
        // bounds, within those 91 MiB, so the states need no margin.
        let s = sizing(120 * MB, None, bound(9 * MB), 0, 0, 1, Spill::Auto, 2);
        assert_eq!(s.next.load(Ordering::Relaxed), 13);
        // Before anything is measured, a hyperbatch as large as the bound allows keeps its
        // samples.
        assert!(!s.spills(13) && s.spills(14));
        s.measured(peaks, 0, 4, false);
        assert_eq!(s.next.load(Ordering::Relaxed), 22);
        assert_eq!(s.limit(), 91 * MB);
        assert!(!s.spills(10) && s.spills(11) && s.spills(22));
        // Off: sized for kept samples; on: every hyperbatch spills.
        let off = sizing(120 * MB, None, bound(9 * MB), 0, 0, 1, Spill::Off, 2);
        off.measured(peaks, 0, 4, false);
        assert_eq!(off.next.load(Ordering::Relaxed), 10);
        assert!(!off.spills(17));
        let on = sizing(120 * MB, Some(3), bound(9 * MB), 0, 0, 1, Spill::On, 2);
        on.measured(peaks, 0, 4, false);
        assert!(on.spills(1) && on.spills(3));
        assert_eq!(on.next.load(Ordering::Relaxed), 3);
        // Where spilling holds fewer (the samples in flight take most of the share), auto
        // keeps them: kept 30 / (4 * 1.5) = 5, spilled (30 - 24 - 5) / 4 = 0, so 1.
        let even = HyperPeaks {
            batch: 4 * MB,
            resident: 4 * MB,
            sample: 4 * MB,
        };
        let s = sizing(30 * MB, None, bound(9 * MB), 0, 0, 1, Spill::Auto, 2);
        s.measured(even, 0, 4, false);
        assert_eq!(s.next.load(Ordering::Relaxed), 5);
        assert!(!s.spills(5));
        // First sized from probe batches, with the probe's margin of 2: kept 120 / 16 = 7;
        // spilled (120 - 4 * 8 - 5) / 4 = 20 (the states admitted, without the margin).
        let fit = HyperFit {
            first: peaks,
            from: SizedFrom::Probe,
            spill: Spill::Auto,
            drivers: 1,
            threads: 2,
            ..Default::default()
        };
        let s = HyperSizing::new(120 * MB, None, fit);
        assert_eq!(s.next.load(Ordering::Relaxed), 20);
        assert!(!s.spills(7) && s.spills(8));
        // The plan's prediction for an epoch of 50 such batches: 20 at most by the probe's
        // margin, so three even jobs, the first of 17; the next once those 17 are measured
        // (settled: 1.15 over them, as `measured` gives below), (120 - 4 * 4 * 1.15 - 5) / 4 =
        // 24 at most: the 33 left in two even jobs.
        assert_eq!(fit.epoch_jobs(120 * MB, 50, false), vec![17, 17, 16]);
        s.measured(peaks, 0, 17, false);
        assert_eq!(s.next.load(Ordering::Relaxed), 24);
        // Two loading drivers (60 MiB each, 1 MiB of staging a batch) claim a job each before
        // any batch is measured: the short first (one batch) and, by the probe's margin, 3 at
        // most (kept 60 / 18 = 3; spilled (60 - 32 - 5) / 10 = 2). Job j is claimed once job
        // j - 2 has ended: with up to 15 batches measured (margin 1.5), 4 at most (kept
        // 60 / 13.5 = 4, spilled 31 / 7.5 = 4); once 16 are (1.15), 6 (spilled 36.6 / 5.75):
        // the 20 left in four even jobs.
        let two = HyperFit {
            drivers: 2,
            extra: MB,
            ..fit
        };
        assert_eq!(two.first_size(120 * MB), 3);
        assert_eq!(
            two.epoch_jobs(120 * MB, 40, true),
            vec![1, 3, 4, 4, 4, 4, 5, 5, 5, 5]
        );
        // Loading drivers (two) spill too, each with half the share and the margin on the
        // spilled states (they do not admit last hops by bounds). Each batch also holds what
        // staging keeps (1 MiB here: its cold row ids). Kept: 120 / 2 / ((8 + 1) * 1.5) = 4;
        // spilled: (60 - 24 - 5) / ((4 + 1) * 1.5) = 4.1, so 4 as well; once settled (margin
        // 1.15 on 20 batches), kept 60 / 10.35 = 5, spilled (60 - 18.4 - 5) / 5.75 = 6.
        let s = sizing(120 * MB, None, bound(9 * MB), MB, 0, 2, Spill::Auto, 2);
        s.measured(peaks, 0, 4, false);
        assert_eq!(s.next.load(Ordering::Relaxed), 4);
        s.measured(peaks, 0, 16, false);
        assert_eq!(s.next.load(Ordering::Relaxed), 6);
        assert!(!s.spills(5) && s.spills(6));
        // Under `on` every loading hyperbatch spills; under `off` none.
        let on = sizing(120 * MB, None, bound(9 * MB), MB, 0, 2, Spill::On, 2);
        assert!(on.spills(1));
        let off = sizing(120 * MB, None, bound(9 * MB), MB, 0, 2, Spill::Off, 2);
        assert!(!off.spills(100));
    }
}
