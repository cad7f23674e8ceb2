//! The typed loader: epochs of heterogeneous mini-batches (PyG's `HeteroData` semantics, see
//! [`ringgnn_sampler::HeteroSampler`]) run on the worker pipeline, as [`crate::BatchLoader`]
//! runs homogeneous ones.
//!
//! - [`graph`]: the relations opened once per process ([`TypedGraph`]) and each worker's
//!   sampler made from them.
//! - [`stage`]: a worker's job, one hyperbatch of `H` consecutive batches sampled together then
//!   gathered batch by batch (each type's feature rows, the target's labels).
//! - [`TypedLoader::epoch`]: an epoch as jobs, handed out in order by a [`Run`]: read from disk,
//!   to hyperbatch drivers that each sample one hyperbatch at a time with every thread (one
//!   driver, or [`crate::loader::LOAD_DRIVERS`] where batches gather rows, as the homogeneous
//!   loader's; [`TypedLoader::drivers`]), so that each relation's file is read once per hop for
//!   all of a hyperbatch's batches; in memory, to a worker per thread, each sampling its own.
//!   Batch `i` of epoch `e` is the same whatever `H`, the drivers and the threads (its random
//!   streams are picked by `(seed, e, i)` alone).
//! - [`TypedLoader::probe`]: what one batch holds while its hyperbatch is sampled, measured on
//!   probe batches, so that `H` is sized from what batches take rather than from their upper
//!   bounds (about three times larger on real graphs).

pub mod graph;
pub mod stage;

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use ringgnn_features::GatherStats;
use ringgnn_io::CoalesceOptions;
use ringgnn_pipeline::{Jobs, Run, RunOptions};
use ringgnn_sampler::{Fanout, HeteroSample, SpillFile, TemporalStrategy, SPILL_BUFFER};

pub use graph::{OpenedSampler, TypedGraph};
pub use stage::{ReadTimes, TypeRows, TypedBatch, TypedStage};

use crate::budget::typed::{TypedNeeds, TypedSizes};
use crate::budget::{GATHER_SCRATCH_PER_NODE, STAGING_BUFFERS, STAGING_PER_BATCH};
use crate::labels::Labels;
use crate::staging::StagingOptions;
use crate::{Error, Result};

/// The epoch probe batches are sampled as: far from any real epoch.
pub const PROBE_EPOCH: u64 = u64::MAX - 2;

/// The batches of one epoch, in order ([`TypedLoader::epoch`]).
pub type TypedRun = Run<TypedBatch, Error>;

/// Seeds of one batch, by node type: (type index in the graph's order, ids of that type). A
/// node batch has its target type's; a link batch each end's type's (one entry when both ends
/// are of one type).
pub type TypedSeeds = Vec<(usize, Vec<u64>)>;

/// A batch's seed times when it is sampled at times: per entry of its [`TypedSeeds`], one time
/// per seed (see [`ringgnn_sampler::HeteroSampler`]); `None`: not temporal.
pub type SeedTimes = Option<Vec<Vec<i64>>>;

/// One job (a hyperbatch): its batches, each (its index in the epoch, its seeds, their times).
pub type TypedJob = Vec<(u64, TypedSeeds, SeedTimes)>;

/// A typed loader's configuration: what every epoch's workers sample and gather.
pub struct TypedLoader {
    graph: Arc<TypedGraph>,
    fanouts: Vec<(String, Vec<Fanout>)>,
    replace: bool,
    seed: u64,
    with_edge_ids: bool,
    /// How a batch at seed times draws among the eligible edges ([`Self::with_temporal_strategy`]).
    temporal_strategy: TemporalStrategy,
    target: usize,
    rows: Vec<Option<TypeRows>>,
    labels: Option<Arc<Labels>>,
    stats: Arc<Mutex<Vec<GatherStats>>>,
    /// Per node type, where its hyperbatches' rows may be staged ([`Self::with_staging`]).
    staging: Vec<Option<StagingOptions>>,
    /// Hyperbatches staged per type, over every epoch.
    staged: Arc<Mutex<Vec<u64>>>,
}

/// What one probe batch held while sampled, measured, and what its rows cost to read,
/// estimated.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProbeBytes {
    /// Its share of the sampler's hop buffers.
    pub state: u64,
    /// What a worker's sampler holds whatever the hyperbatch size
    /// ([`ringgnn_sampler::HeteroSampler::scratch_bytes`]) but `readers`: its dedup maps (one
    /// per node type, sized for the largest batch) and its fetch's copies of one group of
    /// positions.
    pub scratch: u64,
    /// The read buffers of the readers its sampler's threads after the first opened
    /// ([`ringgnn_sampler::HeteroSampler::thread_buffer_bytes`]): fixed by their options.
    pub readers: u64,
    /// What its sample holds while its hyperbatch is sampled: where hyperbatches spill (the
    /// graph is read from disk), its sample before its last hop was relabelled
    /// ([`ringgnn_sampler::HeteroSampler::resident_bytes`]), else all of it.
    pub batch: u64,
    /// Its finished sample: what a worker holds of the batch it spills or gathers, and a
    /// gathered batch besides its rows.
    pub sample: u64,
    /// Its sampled edges.
    pub edges: u64,
    /// What its gather holds: each type's feature rows (float32), the gather's scratch for its
    /// nodes ([`GATHER_SCRATCH_PER_NODE`]) and the target's labels (int64).
    pub rows: u64,
    /// What staging its rows holds while its hyperbatch waits: per type staged, its cold row
    /// ids (8 bytes a node) and a write buffer ([`STAGING_PER_BATCH`]).
    pub staging: u64,
    /// Seconds its share of the probe's sampling took, measured (wall clock).
    pub sample_s: f64,
    /// Seconds to read its rows batch by batch, estimated, over the types whose rows may be
    /// staged ([`stage::ReadTimes`]).
    pub read_s: f64,
    /// Seconds of one pass over those types' feature files for the rows of all the probe's
    /// batches (the same for each of them).
    pub pass_s: f64,
    /// Seconds to write its staged rows and read them back.
    pub back_s: f64,
}

impl TypedLoader {
    /// A loader of batches over `graph` (seeded by any types, [`TypedSeeds`]) with `fanouts`
    /// for every relation; `rows[t]` where type `t` has features, `labels` of type `target`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        graph: Arc<TypedGraph>,
        fanouts: Vec<(String, Vec<Fanout>)>,
        replace: bool,
        seed: u64,
        with_edge_ids: bool,
        target: &str,
        rows: Vec<Option<TypeRows>>,
        labels: Option<Labels>,
    ) -> Result<Self> {
        let Some(target) = graph.types().iter().position(|t| t == target) else {
            return Err(Error::Input(format!(
                "target '{target}' is not a node type (the dataset has: {})",
                graph.types().join(", ")
            )));
        };
        if rows.len() != graph.types().len() {
            return Err(Error::Input(format!(
                "rows: {} entries for {} node types; give one per type (None without features)",
                rows.len(),
                graph.types().len()
            )));
        }
        if let Some(l) = &labels {
            let n = graph.counts()[target];
            if l.len() as u64 != n {
                return Err(Error::Input(format!(
                    "labels: {} for {n} nodes of type '{}'; give one label per node",
                    l.len(),
                    graph.types()[target]
                )));
            }
        }
        // Every relation checked now, not in the first worker.
        graph.sampler(&fanouts, replace, Some(ringgnn_io::BackendKind::Pread))?;
        let stats = Arc::new(Mutex::new(vec![GatherStats::default(); rows.len()]));
        let (staging, staged) = (
            vec![None; rows.len()],
            Arc::new(Mutex::new(vec![0; rows.len()])),
        );
        Ok(TypedLoader {
            graph,
            fanouts,
            replace,
            seed,
            with_edge_ids,
            temporal_strategy: TemporalStrategy::default(),
            target,
            rows,
            labels: labels.map(Arc::new),
            stats,
            staging,
            staged,
        })
    }

    /// Stage the rows of each type read from disk (see [`stage`]) in `dir` (default: beside the
    /// dataset), each type's staging file holding at most `cap` bytes (default: its feature
    /// file's size; 0: never stage).
    pub fn with_staging(mut self, dir: Option<std::path::PathBuf>, cap: Option<u64>) -> Self {
        let dir = dir.unwrap_or_else(|| crate::loader::beside(self.graph.path()));
        self.staging = self
            .rows
            .iter()
            .map(|r| match r {
                Some(r) if r.memory.is_none() => {
                    let cap = cap.unwrap_or_else(|| r.file.info.payload_bytes(r.file.num_nodes));
                    (cap > 0).then(|| StagingOptions {
                        dir: dir.clone(),
                        cap,
                    })
                }
                _ => None,
            })
            .collect();
        self
    }

    /// Batches at seed times draw with `strategy` (default: uniformly).
    pub fn with_temporal_strategy(mut self, strategy: TemporalStrategy) -> Self {
        self.temporal_strategy = strategy;
        self
    }

    /// Hyperbatches whose rows were staged, per node type (the graph's order), over every epoch.
    pub fn staged(&self) -> Vec<u64> {
        self.staged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn graph(&self) -> &Arc<TypedGraph> {
        &self.graph
    }

    /// The stage of epoch `epoch`, each worker's sampler drawing with `threads` threads; its
    /// gathers count in `stats`.
    fn stage(
        &self,
        epoch: u64,
        prefetch: usize,
        stats: Arc<Mutex<Vec<GatherStats>>>,
        first: Option<u64>,
        threads: usize,
    ) -> TypedStage {
        TypedStage {
            graph: self.graph.clone(),
            fanouts: self.fanouts.clone(),
            replace: self.replace,
            seed: self.seed,
            with_edge_ids: self.with_edge_ids,
            temporal_strategy: self.temporal_strategy,
            target: self.target,
            rows: self.rows.clone(),
            labels: self.labels.clone(),
            epoch,
            prefetch,
            stats,
            staging: self.staging.clone(),
            first,
            staged: self.staged.clone(),
            spill_dir: (!self.graph.in_memory()).then(|| crate::loader::beside(self.graph.path())),
            threads: threads.max(1),
        }
    }

    /// Hyperbatch drivers of an epoch read from disk: [`crate::loader::LOAD_DRIVERS`] where
    /// batches gather feature rows (one gathers its batches for the consumer while the other
    /// samples the next, as the homogeneous loading drivers do), else one (nothing to overlap
    /// but the consumer's own work, and one driver holds twice the batches).
    pub fn drivers(&self) -> usize {
        match self.rows.iter().any(Option::is_some) {
            true => crate::loader::LOAD_DRIVERS,
            false => 1,
        }
    }

    /// Check every seed of `jobs` against its type's count.
    fn check(&self, jobs: &[TypedJob]) -> Result<()> {
        let (types, counts) = (self.graph.types(), self.graph.counts());
        for (t, seeds) in jobs.iter().flatten().flat_map(|(_, s, _)| s) {
            let Some(&n) = counts.get(*t) else {
                return Err(Error::Input(format!(
                    "seeds of node type {t}: the dataset has {} node types ({})",
                    types.len(),
                    types.join(", ")
                )));
            };
            if let Some(&id) = seeds.iter().find(|&&s| s >= n) {
                return Err(Error::Input(format!(
                    "seed node {id} of node type {} is out of range: that type has {n} nodes ({})",
                    types[*t],
                    ringgnn_store::IdRange(n)
                )));
            }
        }
        Ok(())
    }

    /// Run `jobs` (each a hyperbatch: its batches' indices and seeds) of epoch `epoch` on
    /// `workers` workers, each sampling its job with `threads` threads (the drivers of
    /// [`crate::budget::typed::TypedSizes`]: every thread; else 1); a worker starts a job only
    /// when its first batch is among the next `window` the consumer will take (see
    /// [`ringgnn_pipeline`]), and gathers a batch's rows only when it is among the next
    /// `prefetch`; `stage`: whether hyperbatches may be staged ([`Self::with_staging`]). The run
    /// hands the batches out in job order.
    #[allow(clippy::too_many_arguments)]
    pub fn epoch(
        &self,
        epoch: u64,
        jobs: Vec<TypedJob>,
        workers: NonZeroUsize,
        window: NonZeroUsize,
        prefetch: NonZeroUsize,
        stage: bool,
        threads: NonZeroUsize,
    ) -> Result<Run<TypedBatch, Error>> {
        self.check(&jobs)?;
        let first = jobs.first().and_then(|j| j.first()).map(|(b, _, _)| *b);
        let jobs: Vec<(TypedJob, usize)> = jobs
            .into_iter()
            .map(|j| {
                let n = j.len();
                (j, n)
            })
            .collect();
        let opts = RunOptions::new(workers, window, "ringgnn-typed");
        let stats = self.stats.clone();
        Run::start(
            Arc::new(
                self.stage(epoch, prefetch.get(), stats, first, threads.get())
                    .staging_off_unless(stage),
            ),
            Jobs::new(jobs),
            opts,
        )
    }

    /// The batches of `job` of epoch `epoch` made on the calling thread (one hyperbatch,
    /// gathered batch by batch).
    pub fn make(&self, epoch: u64, job: TypedJob) -> Result<Vec<TypedBatch>> {
        self.check(std::slice::from_ref(&job))?;
        let first = job.first().map(|(b, _, _)| *b);
        let stage = self.stage(epoch, 1, self.stats.clone(), first, 1);
        let mut w = stage.worker(None)?;
        let samples = stage.sample(&mut w, &job)?;
        job.iter()
            .zip(samples)
            .map(|((b, _, _), s)| stage.gather(&mut w, *b, s, 0, &[]))
            .collect()
    }

    /// What each batch of `seeds` holds while its hyperbatch is sampled (see [`ProbeBytes`]):
    /// the batches sampled together as one hyperbatch, batch `i` of [`PROBE_EPOCH`], by a
    /// fresh worker drawing with `threads` threads, as the epoch's drivers will (so the
    /// workspaces measured are theirs alone, shared evenly). Nothing is gathered.
    pub fn probe(
        &self,
        seeds: &[(TypedSeeds, SeedTimes)],
        threads: usize,
    ) -> Result<Vec<ProbeBytes>> {
        if seeds.is_empty() {
            return Ok(Vec::new());
        }
        let job: TypedJob = seeds
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, (s, t))| (i as u64, s, t))
            .collect();
        self.check(std::slice::from_ref(&job))?;
        let stats = Arc::new(Mutex::new(vec![GatherStats::default(); self.rows.len()]));
        let stage = self.stage(PROBE_EPOCH, 1, stats, None, threads);
        let mut w = stage.worker(None)?;
        let clock = std::time::Instant::now();
        let samples = stage.sample(&mut w, &job)?;
        let sample_s = clock.elapsed().as_secs_f64() / seeds.len() as f64;
        let (scratch, readers) = (w.sampler.scratch_bytes(), w.sampler.thread_buffer_bytes());
        let state = (w.sampler.held_bytes() - scratch) / seeds.len() as u64;
        let times = stage.read_times(&w, &samples)?;
        let out = samples
            .iter()
            .enumerate()
            .map(|(i, s)| ProbeBytes {
                state,
                scratch: scratch - readers,
                readers,
                batch: match self.graph.in_memory() {
                    true => s.bytes(),
                    false => w.sampler.resident_bytes(s),
                },
                sample: s.bytes(),
                edges: s.row.iter().map(|r| r.len() as u64).sum(),
                rows: self.rows_bytes(s),
                staging: self.batch_staging_bytes(s),
                sample_s,
                read_s: times.per_batch[i],
                pass_s: times.pass,
                back_s: times.back[i],
            })
            .collect();
        drop((samples, w));
        // The probe's workspaces are freed on this thread's heap, which the epoch's workers do
        // not allocate from: give them back rather than hold them beside the epoch.
        ringgnn_io::release_free_memory();
        Ok(out)
    }

    /// The hyperbatch size, batches ahead, workers and staging of an epoch of `batches` batches
    /// within `share` bytes (the batches' part of the memory plan), by
    /// [`crate::budget::typed::choose`] for this loader's [`Self::drivers`]: `asked` fixes H;
    /// `None` (`auto`) measures the batches of `probe` (the epoch's first
    /// [`crate::budget::typed::PROBE_BATCHES`], see [`Self::probe`], sampled with `threads`
    /// threads) unless every neighbor file is in memory. Also what was measured.
    pub fn sizes(
        &self,
        asked: Option<usize>,
        share: u64,
        threads: usize,
        prefetch: Option<usize>,
        batches: usize,
        probe: &[(TypedSeeds, SeedTimes)],
    ) -> Result<(TypedSizes, TypedNeeds)> {
        let in_memory = self.graph.in_memory();
        let needs = match asked.is_none() && !in_memory && !probe.is_empty() {
            true => TypedNeeds::measured(
                &self.probe(probe, threads)?,
                self.worker_bytes(),
                self.held_bytes(),
                self.staging_bytes(),
            ),
            false => TypedNeeds::default(),
        }
        .with_drivers(self.drivers());
        let sizes = crate::budget::typed::choose(
            asked,
            in_memory,
            share,
            &needs,
            threads,
            prefetch,
            batches.max(1),
        );
        Ok((sizes, needs))
    }

    /// What gathering the batch of `s` holds (see [`ProbeBytes::rows`]).
    fn rows_bytes(&self, s: &HeteroSample) -> u64 {
        let rows: u64 = self
            .rows
            .iter()
            .zip(&s.node)
            .filter_map(|(r, n)| {
                let n = n.len() as u64;
                r.as_ref()
                    .map(|r| n * (4 * r.file.dim() as u64 + GATHER_SCRATCH_PER_NODE))
            })
            .sum();
        let labels = self
            .labels
            .as_ref()
            .map_or(0, |_| 8 * s.node[self.target].len() as u64);
        rows + labels
    }

    /// What staging the rows of the batch of `s` holds (see [`ProbeBytes::staging`]).
    fn batch_staging_bytes(&self, s: &HeteroSample) -> u64 {
        self.staging
            .iter()
            .zip(&s.node)
            .filter(|(o, _)| o.is_some())
            .map(|(_, n)| 8 * n.len() as u64 + STAGING_PER_BATCH)
            .sum()
    }

    /// What the loader holds whatever its epochs: the target's labels.
    pub fn held_bytes(&self) -> u64 {
        self.labels.as_ref().map_or(0, |l| l.bytes())
    }

    /// What one worker's staging holds whatever its batches: the staging buffers of each type
    /// whose rows may be staged ([`STAGING_BUFFERS`]).
    pub fn staging_bytes(&self) -> u64 {
        self.staging.iter().flatten().count() as u64 * STAGING_BUFFERS
    }

    /// What one worker holds whatever its batches: its sampler's read buffer (shared by the
    /// relations read from disk, [`TypedGraph::sampler`]) and its spill file's buffers, and a
    /// read buffer per type whose rows are read from disk (staging's: [`Self::staging_bytes`]).
    pub fn worker_bytes(&self) -> u64 {
        let buffer = CoalesceOptions::default().buffer as u64;
        let spill = SpillFile::BUFFER_BYTES + SPILL_BUFFER as u64;
        let sampler = if self.graph.in_memory() {
            0
        } else {
            buffer + spill
        };
        let rows = self
            .rows
            .iter()
            .flatten()
            .filter(|r| r.memory.is_none())
            .count() as u64;
        sampler + rows * buffer
    }

    /// Gather counters per node type (the graph's order), summed over every epoch's workers.
    pub fn stats(&self) -> Vec<GatherStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
