//! [`BatchLoader`]: one dataset opened as its memory plan says, and its epochs run on the worker
//! pipeline. See the crate docs.

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringgnn_features::{FeatureFile, FeatureGatherer, HotRowCache, RowSource};
use ringgnn_io::{CoalesceOptions, IoStats};
use ringgnn_pipeline::{Next, Run, RunOptions, Stage};
use ringgnn_sampler::{
    BatchBytes, Graph, GraphSampler, HyperPeaks, NeighborAccess, OffsetIndex, SampleOptions,
    SampledSubgraph, Seeds,
};
use ringgnn_store::{rng, Dataset};

use crate::budget::{
    default_budget, Asked, FeatureNeeds, HitCurve, MemoryPlan, Needs, Workload, STAGING_BUFFERS,
    STAGING_PER_BATCH,
};
use crate::buffers::BufferPool;
use crate::epoch::{EpochBatches, EpochJobs, EpochOptions};
use crate::labels::Labels;
use crate::options::{BackendChoice, CachePolicy, Hyperbatch, LoaderOptions, Spill};
use crate::stages::{
    Batch, GatherParts, HyperFit, HyperLoadStage, HyperParts, HyperSampleStage, HyperSizing,
    LoadStage, LoadedBatch, LoaderStats, RowsFrom, SampleStage, SizedFrom,
};
use crate::staging::StagingOptions;
use crate::{Error, Result};

/// The epoch number the look-ahead count samples with: far from any real epoch, so the counted
/// batches are a fair sample of every epoch rather than a copy of one.
pub const PRESAMPLE_EPOCH: u64 = u64::MAX - 1;

/// Workers of a hyperbatch epoch with features (homogeneous and typed loaders alike): one
/// gathers its hyperbatch's batches for the consumer while the other samples (and stages) the
/// next.
pub(crate) const LOAD_DRIVERS: usize = 2;

/// The `purpose` of the random stream of probe batches ("probe" in ASCII).
const PROBE_PURPOSE: u64 = 0x70_72_6f_62_65;

/// Batches sampled to measure what a batch really holds. Hyperbatches sized from them take the
/// probe's margin ([`HyperFit::margin`]); the memory plan puts its own margins on the per-batch
/// parts ([`crate::budget::MEASURED_MARGIN`]).
const PROBE_BATCHES: u64 = 3;

/// The shapes the plan is computed from, kept to redo it for larger batches.
struct Shape {
    index: OffsetIndex,
    sample: SampleOptions,
    threads: u64,
    /// The spill policy of hyperbatches (for their sizing).
    spill: Spill,
    features: Option<(FeatureFile, u64)>,
    /// What batches held on probe batches of `.0` seeds (the largest, no margin: the plan puts
    /// it on), when the upper bounds did not fit the budget or left a cheaper plan out.
    measured: Option<(u64, Probed)>,
    /// Seeds of an epoch, for the plan's cost: the look-ahead seeds when given, else every node.
    epoch_seeds: u64,
    /// The hot-row cache's hit rate by size, from the degrees (for the plan's cost).
    hits: HitCurve,
}

impl Shape {
    fn needs(&self, batch: u64) -> Needs {
        let bound = self.index.bound(batch, &self.sample);
        let probed = self.probed(batch);
        let (workspace, sample) = match &probed {
            Some(m) => (m.workspace, m.output),
            None => (
                bound.workspace_bytes(),
                bound.output_bytes(self.sample.with_edge_ids),
            ),
        };
        // For the cost: what a batch reads (measured means, else bounds) and how hyperbatches
        // are sized (as the drivers will size them: [`Self::hyper_fit`]).
        let (edges, rows) = match &probed {
            Some(m) => (m.edges, m.rows),
            None => (bound.edges.min(self.index.num_edges()), bound.nodes),
        };
        let model = ringgnn_io::ReadModel::from_env();
        let work = Workload {
            batches: self.epoch_seeds.div_ceil(batch.max(1)),
            hops: self.sample.fanouts.len() as u64,
            batch_edges: edges,
            batch_rows: rows,
            row_bytes: self.features.as_ref().map_or(0, |(f, _)| f.info.row_bytes),
            hyper: self.hyper_fit(batch, workspace.saturating_add(sample), bound.nodes),
            hits: self.hits.clone(),
            random_iops: model.random_iops as u64,
            seq_bytes_per_s: model.seq_bytes_per_s as u64,
        };
        Needs {
            work,
            measured: self.measured.is_some(),
            threads: self.threads,
            offset_index: self.index.bytes(),
            neighbor_file: self.index.neighbor_file_bytes(),
            read_buffer: CoalesceOptions::default().buffer as u64,
            batch_seeds: batch,
            sampler_workspace: workspace,
            sample_bytes: sample,
            features: self.features.as_ref().map(|(file, labels)| FeatureNeeds {
                labels: *labels,
                batch_nodes: bound.nodes,
                dim: file.dim() as u64,
                file: file.info.payload_bytes(file.num_nodes),
                full_cache: HotRowCache::rows_for_budget(file, u64::MAX)
                    * (file.info.row_bytes + ringgnn_features::cache::INDEX_BYTES_PER_ROW),
            }),
        }
    }
}

impl Shape {
    /// Measure batches of `batch` seeds on [`PROBE_BATCHES`] probe batches read from disk, and
    /// plan with the largest from now on (the plan puts its margin on them).
    fn measure(&mut self, batch: u64, backend: BackendChoice, direct: bool) -> Result<()> {
        let (b, edges, rows) = probe(self, batch, backend, direct)?;
        self.measured = Some((
            batch,
            Probed {
                workspace: b.total - b.output,
                output: b.output,
                // As measured: the hyperbatch sizing applies the margin.
                hyper: HyperPeaks {
                    batch: b.hyper_state,
                    resident: b.hyper_resident,
                    sample: b.compact,
                },
                edges,
                rows,
            },
        ));
        Ok(())
    }

    /// What was measured, for batches of `batch` seeds: a larger batch than the probe's grows
    /// its state in proportion.
    fn probed(&self, batch: u64) -> Option<Probed> {
        let (b, m) = self.measured?;
        let k = batch.div_ceil(b.max(1));
        Some(Probed {
            workspace: m.workspace.saturating_mul(k),
            output: m.output.saturating_mul(k),
            hyper: scaled(m.hyper, k),
            edges: m.edges.saturating_mul(k),
            rows: m.rows.saturating_mul(k),
        })
    }

    /// How hyperbatches of batches of `batch` seeds are sized, for the plan's cost and the
    /// loader's drivers alike: a batch's bytes in a hyperbatch, kept and spilled, measured on
    /// the probe (with the probe's margin), or its upper bound
    /// `bound` (all three: spilling gains nothing by the bound; no margin); with features, what
    /// staging adds per batch (a write buffer and the cold row ids of its `nodes` at most) and
    /// its read buffers, and two drivers.
    fn hyper_fit(&self, batch: u64, bound: u64, nodes: u64) -> HyperFit {
        let (first, from) = match self.probed(batch) {
            Some(m) => (m.hyper, SizedFrom::Probe),
            None => (
                HyperPeaks {
                    batch: bound,
                    resident: bound,
                    sample: bound,
                },
                SizedFrom::Bounds,
            ),
        };
        let staged = self.features.is_some();
        HyperFit {
            first,
            from,
            extra: if staged {
                STAGING_PER_BATCH + 8 * nodes
            } else {
                0
            },
            reserved: if staged { STAGING_BUFFERS } else { 0 },
            drivers: if staged { LOAD_DRIVERS as u64 } else { 1 },
            spill: self.spill,
            threads: self.threads,
        }
    }
}

/// Each size of `p` times `k`.
fn scaled(p: HyperPeaks, k: u64) -> HyperPeaks {
    HyperPeaks {
        batch: p.batch.saturating_mul(k),
        resident: p.resident.saturating_mul(k),
        sample: p.sample.saturating_mul(k),
    }
}

/// What one batch held on the probe batches (the largest of each).
#[derive(Clone, Copy, Debug)]
struct Probed {
    /// Dedup map and workspaces.
    workspace: u64,
    output: u64,
    /// As part of a hyperbatch.
    hyper: HyperPeaks,
    /// Sampled edges and nodes of a probe batch, on average (no margin: for the cost only).
    edges: u64,
    rows: u64,
}

/// The most bytes a batch of `batch` random seeds holds when sampled (see [`BatchBytes`]),
/// over [`PROBE_BATCHES`] batches read from disk.
fn probe(
    shape: &Shape,
    batch: u64,
    backend: BackendChoice,
    direct: bool,
) -> Result<(BatchBytes, u64, u64)> {
    let (kind, _) = backend.disk_kind()?;
    let graph = Graph::open(shape.index.clone(), NeighborAccess::Disk { kind, direct })?;
    let mut s = graph.sampler(&shape.sample)?;
    let n = shape.index.num_nodes();
    let mut r = rng::stream(shape.sample.seed, PROBE_PURPOSE, 0);
    let mut most = BatchBytes::default();
    let (mut edges, mut nodes) = (0u64, 0u64);
    for b in 0..PROBE_BATCHES {
        let ids: Vec<u64> = (0..batch.min(n)).map(|_| rng::below(&mut r, n)).collect();
        let seeds = Seeds::new(ids, n)?;
        let out = s.sample(&graph, seeds.as_slice(), PRESAMPLE_EPOCH - 1, b)?;
        edges += out.row.len() as u64;
        nodes += out.node.len() as u64;
        let b = s.last_batch_bytes();
        most = BatchBytes {
            total: most.total.max(b.total),
            output: most.output.max(b.output),
            hyper_state: most.hyper_state.max(b.hyper_state),
            hyper_resident: most.hyper_resident.max(b.hyper_resident),
            compact: most.compact.max(b.compact),
        };
    }
    Ok((most, edges / PROBE_BATCHES, nodes / PROBE_BATCHES))
}

/// The batches of one epoch, in the order asked for (see [`Run`]): the items of
/// [`BatchLoader::epoch`] ([`LoadedBatch`]) or [`BatchLoader::sample_epoch`] ([`Batch`]).
pub struct Epoch<T> {
    run: Run<T, Error>,
    len: usize,
}

impl<T> Epoch<T> {
    /// Batches this epoch yields in all (not the number left).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most batches seen finished and not yet consumed at once.
    pub fn peak_queued(&self) -> usize {
        self.run.peak_queued()
    }

    /// [`Iterator::next`] giving up after `timeout` (see [`Run::next_within`]).
    pub fn next_within(&mut self, timeout: Duration) -> Next<Result<T>> {
        self.run.next_within(timeout)
    }
}

impl<T> Iterator for Epoch<T> {
    type Item = Result<T>;
    fn next(&mut self) -> Option<Result<T>> {
        self.run.next()
    }
}

/// Sampling, and feature gathering when asked for, over one dataset on worker threads within
/// one memory budget (see [`crate::budget`]). Share it between the train, val and test loops:
/// the offset index, the neighbor file, the cache and the labels are held once.
pub struct BatchLoader {
    graph: Arc<Graph>,
    shape: Shape,
    threads: NonZeroUsize,
    /// The plan and the largest batch it is sized for.
    plan: Mutex<(MemoryPlan, u64)>,
    gather: Option<Arc<GatherParts>>,
    feature_backend: String,
    fallback: Option<String>,
    /// What hyperbatch epochs share (`None` in per-batch mode).
    hyper: Option<Arc<HyperParts>>,
    /// Samplers of [`Self::sample`], one per concurrent caller, kept for reuse.
    samplers: Mutex<Vec<GraphSampler>>,
    live: Arc<AtomicUsize>,
}

impl BatchLoader {
    /// Open the dataset in `dir`: make the memory plan, open the neighbor file and the feature
    /// file as it says, and build the hot-row cache (sampling `presample_seeds` ahead for
    /// [`CachePolicy::Presample`]).
    pub fn open(dir: &Path, opts: LoaderOptions, presample_seeds: Option<&Seeds>) -> Result<Self> {
        let ds = Dataset::open(dir)?;
        let index = OffsetIndex::load(&ds)?;
        let v = index.num_nodes();
        let features = match &opts.features {
            None => None,
            Some(_) => {
                let file = FeatureFile::of(&ds)?;
                let labels = ds
                    .manifest()
                    .labels
                    .as_ref()
                    .map_or(0, |l| v * Labels::bytes_per_node(l.num_classes));
                Some((file, labels))
            }
        };
        let mut shape = Shape {
            sample: opts.sample.clone(),
            threads: opts.threads.get() as u64,
            spill: opts.spill,
            epoch_seeds: presample_seeds.map_or(v, |s| s.len() as u64).max(1),
            hits: HitCurve::from_degrees(index.indptr().degrees()),
            index,
            features,
            measured: None,
        };
        let batch = opts.batch_size.get() as u64;
        let fopts = opts.features.clone();
        // By default the loader may grow the process by the default budget
        // ([`default_budget`]), shared with the other processes (local ranks) started beside it.
        let processes = opts.processes.get() as u64;
        let default = opts.memory.is_none().then(default_budget).flatten();
        let asked = Asked {
            budget: opts.memory.unwrap_or_else(|| {
                let share = default.map_or(u64::MAX / 4, |d| d.growth) / processes;
                opts.reserve.saturating_add(share)
            }),
            reserve: opts.reserve,
            neighbors: opts.backend,
            features: fopts.as_ref().map_or(opts.backend, |f| f.backend),
            cache: fopts.as_ref().and_then(|f| f.cache),
            prefetch: opts.prefetch,
            hold: opts.hold,
            hyperbatch: opts.hyperbatch,
            neighbor_cache: opts.neighbor_cache,
        };
        // A default budget that a memory cgroup leaves too small is refused naming the cgroup's
        // limit and the least that works, not the `memory=` the caller never gave.
        let refused = |asked: &Asked, needs: &Needs| {
            let least = MemoryPlan::least(asked, needs);
            default?
                .refusal(asked.budget, least, opts.reserve, processes)
                .map(Error::Input)
        };
        let plan = match MemoryPlan::compute(&asked, &shape.needs(batch)) {
            // A cheaper placement (the neighbor file in memory) did not fit by the upper bounds
            // of a sample, which are far above what skewed graphs give: measure a few batches
            // and plan again; keep whichever plan costs less.
            Ok(bounded) if bounded.bounded_out => {
                shape.measure(batch, opts.backend, opts.direct)?;
                match MemoryPlan::compute(&asked, &shape.needs(batch)) {
                    Ok(m) if m.cost_ms < bounded.cost_ms => m,
                    _ => {
                        shape.measured = None;
                        bounded
                    }
                }
            }
            Ok(p) => p,
            // The upper bounds of a sample (every draw a new node of the largest degree) are
            // far above what skewed graphs give: measure a few batches instead, and plan with
            // the largest and its margin.
            Err(bounded) if asked.neighbors != BackendChoice::Memory => {
                shape.measure(batch, opts.backend, opts.direct)?;
                let needs = shape.needs(batch);
                MemoryPlan::compute(&asked, &needs).map_err(|measured| {
                    refused(&asked, &needs).unwrap_or_else(|| {
                        Error::Input(format!(
                            "{measured} (with batch sizes measured on {PROBE_BATCHES} probe \
                             batches; with their upper bounds: {bounded})"
                        ))
                    })
                })?
            }
            Err(e) => {
                return Err(refused(&asked, &shape.needs(batch)).unwrap_or(Error::Input(e)));
            }
        };

        let mut fallback = None;
        let access = if plan.neighbors_in_memory {
            NeighborAccess::Memory
        } else {
            let (kind, why) = opts.backend.disk_kind()?;
            fallback = why;
            NeighborAccess::Disk {
                kind,
                direct: opts.direct,
            }
        };
        let graph = Arc::new(
            Graph::open(shape.index.clone(), access)?
                .with_page_cache(plan.neighbor_cache, &opts.sample.fanouts)?,
        );

        let hyper = (plan.hyperbatch_size != 1).then(|| {
            let fixed = match opts.hyperbatch {
                Hyperbatch::Size(n) => Some(n.get()),
                Hyperbatch::Auto => None,
            };
            // Sized as the plan's cost predicted (the same fit, from the same needs).
            let fit = shape.needs(batch).work.hyper;
            Arc::new(HyperParts {
                graph: graph.clone(),
                opts: opts.sample.clone(),
                threads: opts.threads.get(),
                sizing: HyperSizing::new(plan.hyperbatch, fixed, fit),
                states: Default::default(),
                spill_dir: opts.spill_dir.clone().unwrap_or_else(|| beside(dir)),
            })
        });
        let mut loader = BatchLoader {
            hyper,
            graph,
            threads: opts.threads,
            plan: Mutex::new((plan.clone(), batch)),
            gather: None,
            feature_backend: String::new(),
            fallback,
            samplers: Mutex::new(Vec::new()),
            live: Arc::new(AtomicUsize::new(0)),
            shape,
        };
        let (Some(f), Some((file, _))) = (fopts, &loader.shape.features) else {
            return Ok(loader);
        };
        let file = file.clone();
        let rows = if plan.features_in_memory {
            loader.feature_backend = "memory".into();
            RowsFrom::Memory(file.load()?)
        } else {
            let (kind, why) = f.backend.disk_kind()?;
            // Open once here, so a failure is reported at open and the name is known.
            let (probe, _) = RowSource::open(&file, kind, opts.direct, CoalesceOptions::default())?;
            loader.feature_backend = probe.name().to_string();
            loader.fallback = loader.fallback.take().or(why);
            RowsFrom::Disk {
                kind,
                direct: opts.direct,
            }
        };
        let labels = Labels::load(&ds)?;
        let t0 = Instant::now();
        let mut presampled = 0;
        let cache = if plan.cache == 0 || plan.features_in_memory {
            None
        } else {
            let counts_fit = plan.cache >= 2 * v;
            let c = match (f.cache_policy, presample_seeds) {
                (CachePolicy::Presample { batches }, Some(seeds))
                    if batches > 0 && counts_fit && !seeds.is_empty() =>
                {
                    let (counts, n) = loader.count_ahead(seeds, opts.batch_size, batches)?;
                    presampled = n;
                    HotRowCache::build_from_dense_counts(
                        &ds,
                        plan.cache,
                        &counts,
                        loader.graph.indptr().degrees(),
                    )?
                }
                _ => HotRowCache::build_by_degree_with(
                    &ds,
                    loader.graph.indptr().degrees(),
                    plan.cache,
                )?,
            };
            Some(Arc::new(c))
        };
        let totals = LoaderStats {
            cached_rows: cache.as_ref().map_or(0, |c| c.len() as u64),
            cache_bytes: cache.as_ref().map_or(0, |c| c.bytes()),
            presample_seconds: if presampled > 0 {
                t0.elapsed().as_secs_f64()
            } else {
                0.0
            },
            presample_batches: presampled,
            ..Default::default()
        };
        let nodes = loader.shape.index.bound(batch, &opts.sample).nodes as usize;
        let staging = match (&loader.hyper, &rows) {
            (Some(_), RowsFrom::Disk { .. }) => {
                let cap = f
                    .staging_cap
                    .unwrap_or_else(|| file.info.payload_bytes(file.num_nodes));
                let dir = f.staging_dir.clone().unwrap_or_else(|| beside(dir));
                (cap > 0).then_some(StagingOptions { dir, cap })
            }
            _ => None,
        };
        loader.gather = Some(Arc::new(GatherParts {
            staging,
            device_rows: std::sync::OnceLock::new(),
            buffers: Arc::new(BufferPool::new(
                (plan.prefetch + plan.hold) as usize,
                nodes.saturating_mul(file.dim()),
            )),
            file,
            rows,
            cache,
            labels,
            ahead: plan.prefetch as usize,
            totals: Mutex::new(totals),
        }));
        Ok(loader)
    }

    /// Check that batches of `batch_size` fit the plan, redoing it for them (with everything
    /// already placed kept) when they are larger than it was made for.
    fn fit(&self, batch_size: NonZeroUsize) -> Result<MemoryPlan> {
        let mut p = self.plan.lock().unwrap_or_else(|e| e.into_inner());
        let b = batch_size.get() as u64;
        if b > p.1 {
            let refit = p.0.refit(&self.shape.needs(b)).map_err(Error::Input)?;
            if let Some(h) = &self.hyper {
                h.sizing.arena.store(refit.hyperbatch, Ordering::Relaxed);
            }
            *p = (refit, b);
        }
        Ok(p.0.clone())
    }

    fn start<S>(
        &self,
        stage: S,
        seeds: &Seeds,
        e: &EpochOptions,
        drivers: Option<usize>,
        short_first: bool,
    ) -> Result<Epoch<S::Output>>
    where
        S: Stage<Job = crate::epoch::BatchJob, Error = Error>,
    {
        let plan = self.fit(e.batch_size)?;
        let batches = Arc::new(EpochBatches::new(seeds, self.shape.sample.seed, e)?);
        let indices = batches.select(e.batches.as_deref())?;
        let len = indices.len();
        let (per_job, balance, threads, window) = match (&self.hyper, drivers) {
            // Hyperbatch drivers use every thread inside; they bound their own memory (turns,
            // and at most `drivers` hyperbatches at once). Sized from the budget, the
            // hyperbatches of an epoch are balanced; a size the caller chose is kept.
            (Some(h), Some(d)) => {
                let d = NonZeroUsize::new(d).unwrap_or(NonZeroUsize::MIN);
                let balance = h.sizing.fixed.is_none();
                (h.sizing.next.clone(), balance, d, NonZeroUsize::MAX)
            }
            _ => (
                Arc::new(AtomicUsize::new(1)),
                false,
                NonZeroUsize::new(plan.workers as usize).unwrap_or(self.threads),
                NonZeroUsize::new(plan.window as usize).unwrap_or(NonZeroUsize::MIN),
            ),
        };
        let jobs = EpochJobs::new(batches, indices, per_job, balance).with_short_first(short_first);
        let mut o = RunOptions::new(threads, window, "ringgnn-loader");
        o.live = self.live.clone();
        Ok(Epoch {
            run: Run::start(Arc::new(stage), jobs, o)?,
            len,
        })
    }

    /// One epoch of sampled and gathered batches (see [`EpochOptions`] for the shuffle, the
    /// cut and the selection of batches). Dropping the iterator stops the workers, abandoning
    /// reads in progress. An error for a loader opened without features.
    pub fn epoch(&self, seeds: &Seeds, e: &EpochOptions) -> Result<Epoch<LoadedBatch>> {
        let Some(parts) = &self.gather else {
            return Err(Error::Input(
                "this loader was opened without features: use sample_epoch".into(),
            ));
        };
        if let Some(h) = &self.hyper {
            let stage = HyperLoadStage {
                parts: h.clone(),
                gather: parts.clone(),
            };
            // With rows to stage, a short first hyperbatch is trained while the second is
            // staged.
            let short_first = parts.staging.is_some();
            return self.start(stage, seeds, e, Some(h.sizing.drivers()), short_first);
        }
        let stage = LoadStage {
            graph: self.graph.clone(),
            opts: self.shape.sample.clone(),
            parts: parts.clone(),
        };
        self.start(stage, seeds, e, None, false)
    }

    /// One epoch of samples only.
    pub fn sample_epoch(&self, seeds: &Seeds, e: &EpochOptions) -> Result<Epoch<Batch>> {
        if let Some(h) = &self.hyper {
            let stage = HyperSampleStage { parts: h.clone() };
            return self.start(stage, seeds, e, Some(1), false);
        }
        let stage = SampleStage {
            graph: self.graph.clone(),
            opts: self.shape.sample.clone(),
        };
        self.start(stage, seeds, e, None, false)
    }

    /// Sample mini-batch `batch` of epoch `epoch` around `seeds` on the calling thread: exactly
    /// what batch `batch` of an epoch gives for the same seeds. Concurrent callers sample in
    /// parallel, each with a sampler of its own (kept for reuse).
    pub fn sample(&self, seeds: &Seeds, epoch: u64, batch: u64) -> Result<SampledSubgraph> {
        let b = NonZeroUsize::new(seeds.len()).unwrap_or(NonZeroUsize::MIN);
        self.fit(b)?;
        let reused = {
            let mut free = self.samplers.lock().unwrap_or_else(|e| e.into_inner());
            // A sampler made before a fork holds the parent's ring: never use it here.
            free.retain(|s| s.made_here());
            free.pop()
        };
        let mut s = match reused {
            Some(s) => s,
            None => self.graph.sampler(&self.shape.sample)?,
        };
        let out = s.sample(&self.graph, seeds.as_slice(), epoch, batch);
        if out.is_ok() {
            self.samplers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(s);
        }
        Ok(out?)
    }

    /// What one batch of `seeds` seeds at the plan's fanouts holds while it is sampled (its
    /// state: workspaces and sample) and after (its sample), in bytes, with the margin the plan
    /// puts on them: measured on probe batches when the neighbor file is on disk (the largest
    /// of [`PROBE_BATCHES`], with [`crate::budget::MEASURED_MARGIN`]), else the upper bounds.
    /// For a caller that holds one such batch besides the plan (a server's largest request).
    pub fn batch_bytes(
        &self,
        seeds: u64,
        backend: BackendChoice,
        direct: bool,
    ) -> Result<(u64, u64)> {
        if self.plan().neighbors_in_memory {
            let b = self.shape.index.bound(seeds, &self.shape.sample);
            let out = b.output_bytes(self.shape.sample.with_edge_ids);
            return Ok((b.workspace_bytes().saturating_add(out), out));
        }
        let (b, _, _) = probe(&self.shape, seeds, backend, direct)?;
        let (m0, m1) = crate::budget::MEASURED_MARGIN;
        let margin = |x: u64| x.saturating_mul(m0) / m1;
        Ok((margin(b.total), margin(b.output)))
    }

    /// A sampler with this loader's options for a thread of the caller's own (a server's
    /// worker): its own read backend; its reads count in [`Self::io_stats`].
    pub fn thread_sampler(&self) -> Result<GraphSampler> {
        Ok(self.graph.sampler(&self.shape.sample)?)
    }

    /// A feature gatherer for a thread of the caller's own, sharing the hot-row cache and the
    /// feature file's placement; `None` without features. Reads stop once `stop` is set.
    pub fn thread_gatherer(&self, stop: &Arc<AtomicBool>) -> Result<Option<FeatureGatherer>> {
        self.gather.as_ref().map(|g| g.gatherer(stop)).transpose()
    }

    /// The sampling options the plan was made with.
    pub fn sample_options(&self) -> &SampleOptions {
        &self.shape.sample
    }

    /// The seeds per batch the plan was made for (it grows with larger batches sampled).
    pub fn plan_batch_size(&self) -> u64 {
        self.plan.lock().unwrap_or_else(|e| e.into_inner()).1
    }

    /// Hand a batch's feature buffer back for reuse.
    pub fn recycle(&self, x: Vec<f32>) {
        if let Some(g) = &self.gather {
            g.buffers.give(x);
        }
    }

    /// Tell the loader that a device holds the feature rows of `ids` (the GPU tier of the hot-row
    /// cache): from now on each batch's `x` holds only the rows of the other nodes of
    /// `sample.node`, in order. Once per loader (and the loaders sharing it).
    pub fn set_device_rows(&self, ids: &[u64]) -> Result<usize> {
        let g = self
            .gather
            .as_ref()
            .ok_or_else(|| Error::Input("this loader gathers no feature rows".into()))?;
        let set = crate::stages::RowSet::new(self.num_nodes(), ids)?;
        let n = set.len();
        g.device_rows
            .set(set)
            .map_err(|_| Error::Input("device rows are already set for this loader".into()))?;
        Ok(n)
    }

    /// Rows a device holds (see [`Self::set_device_rows`]).
    pub fn device_rows(&self) -> usize {
        self.gather
            .as_ref()
            .and_then(|g| g.device_rows.get())
            .map_or(0, |s| s.len())
    }

    /// The buffer pool (the bindings return buffers to it when Python releases them).
    pub fn buffers(&self) -> Option<Arc<BufferPool>> {
        self.gather.as_ref().map(|g| g.buffers.clone())
    }

    /// The memory plan (redone for the largest batch seen so far).
    pub fn plan(&self) -> MemoryPlan {
        self.plan
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    pub fn num_nodes(&self) -> u64 {
        self.graph.num_nodes()
    }

    /// Values per feature row (0 without features).
    pub fn dim(&self) -> usize {
        self.gather.as_ref().map_or(0, |g| g.file.dim())
    }

    /// "memory", "uring", "uring-direct" or "pread" for neighbor lists.
    pub fn backend_name(&self) -> &str {
        self.graph.backend_name()
    }

    /// "memory", "uring", "pread", ... for feature rows ("" without features).
    pub fn feature_backend(&self) -> &str {
        &self.feature_backend
    }

    /// Why `auto` fell back to pread (neighbors or features), if it did.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    pub fn stats(&self) -> LoaderStats {
        self.gather.as_ref().map_or_else(LoaderStats::default, |g| {
            *g.totals.lock().unwrap_or_else(|e| e.into_inner())
        })
    }

    /// The sampler's I/O counters over every epoch and call.
    pub fn io_stats(&self) -> IoStats {
        self.graph.io_stats()
    }

    /// Epoch worker threads alive now (0 once every [`Epoch`] is finished or dropped).
    pub fn live_workers(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// Whether batches carry labels.
    pub fn has_labels(&self) -> bool {
        self.gather.as_ref().is_some_and(|g| g.labels.is_some())
    }

    /// Access counts of every node (saturating at 65535) over `batches` batches of look-ahead
    /// epochs of `seeds` (`PRESAMPLE_EPOCH`, then the epochs below it, as many as it takes), and
    /// the number of batches counted.
    fn count_ahead(
        &self,
        seeds: &Seeds,
        batch_size: NonZeroUsize,
        batches: usize,
    ) -> Result<(Vec<u16>, u64)> {
        let mut counts = vec![0u16; self.num_nodes() as usize];
        let mut n = 0;
        let mut epoch = PRESAMPLE_EPOCH;
        while (n as usize) < batches {
            let it = self.sample_epoch(seeds, &EpochOptions::new(batch_size, epoch))?;
            for b in it.take(batches - n as usize) {
                for &v in &b?.sample.node {
                    let c = &mut counts[v as usize];
                    *c = c.saturating_add(1);
                }
                n += 1;
            }
            epoch -= 1;
        }
        Ok((counts, n))
    }
}

/// The default directory of scratch files (staging, spill): the dataset's parent, on the same
/// SSD as the dataset.
pub(crate) fn beside(dataset: &std::path::Path) -> std::path::PathBuf {
    let d = dataset
        .canonicalize()
        .unwrap_or_else(|_| dataset.to_path_buf());
    d.parent().map_or(d.clone(), |p| p.to_path_buf())
}
