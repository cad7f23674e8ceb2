//! [`BatchLoader`]: the pipelined loader. See the crate docs.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringgnn_features::{FeatureFile, FeatureGatherer, GatherStats, HotRowCache, RowSource};
use ringgnn_io::{BackendKind, CoalesceOptions};
use ringgnn_sampler::budget::{default_budget, sample_bound};
use ringgnn_sampler::{
    BackendChoice, Batch, BatchWork, EpochIter, Fanout, SampledSubgraph, SamplerConfig,
    SamplerPool, Turn,
};
use ringgnn_store::Dataset;

use crate::buffers::BufferPool;
use crate::labels::Labels;
use crate::plan::{MemoryPlan, PlanInput};
use crate::{Error, Result};

/// The epoch number the look-ahead count samples with: far from any real epoch, so the counted
/// batches are a fair sample of every epoch rather than a copy of one.
pub const PRESAMPLE_EPOCH: u64 = u64::MAX - 1;

/// How the hot-row cache chooses its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CachePolicy {
    /// Highest in-degree first.
    Degree,
    /// Sample `batches` batches of the training seeds ahead (without gathering) and cache the
    /// rows they touch most (DiskGNN's offline access counting, GIDS' look-ahead window);
    /// in-degree when no seeds are given or the counts (2 bytes per node) would not fit the
    /// cache's own budget.
    Presample { batches: usize },
}

/// Everything a [`BatchLoader`] is built from.
#[derive(Clone, Debug)]
pub struct LoaderOptions {
    /// Fanouts, backend (of neighbor lists, and of feature rows unless `features` says
    /// otherwise), `direct`, threads, seed. Its `memory` and `prefetch` are set by the plan.
    pub sampler: SamplerConfig,
    /// How feature rows are read, if not as `sampler.backend` says (e.g. features in memory,
    /// graph on disk).
    pub features: Option<BackendChoice>,
    /// The whole loader's budget; `None`: half of the memory available (see
    /// [`ringgnn_sampler::budget::default_budget`]).
    pub memory: Option<u64>,
    /// Bytes the caller needs besides the loader (runtime, model), taken off the budget first.
    pub reserve: u64,
    /// Hot-row cache size; `None`: whatever the budget leaves.
    pub cache: Option<u64>,
    pub cache_policy: CachePolicy,
    /// The largest batch the loader will be asked for (the plan is sized for it).
    pub batch_size: usize,
    /// Gathered batches the workers may hold ahead of the consumer; `None`: one per thread, or
    /// one if that crowds the cache.
    pub prefetch: Option<usize>,
    /// Batches the consumer holds while asking for the next (see [`crate::plan`]); default 2.
    pub hold: usize,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        LoaderOptions {
            sampler: SamplerConfig::default(),
            features: None,
            memory: None,
            reserve: 0,
            cache: None,
            cache_policy: CachePolicy::Presample { batches: 64 },
            batch_size: 1024,
            prefetch: None,
            hold: 2,
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
    /// [`BatchLoader::recycle`] (or drop it).
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
}

enum Source {
    Memory(Arc<Vec<u8>>),
    Disk { kind: BackendKind, direct: bool },
}

/// The second stage of the loader's workers: gather the rows of a sampled batch.
pub struct GatherWork {
    file: FeatureFile,
    source: Source,
    cache: Option<Arc<HotRowCache>>,
    labels: Option<Labels>,
    buffers: Arc<BufferPool>,
    ahead: usize,
    totals: Mutex<LoaderStats>,
}

/// A worker's gatherer (its own read backend and ring).
pub struct GatherState {
    gatherer: FeatureGatherer,
}

impl BatchWork for GatherWork {
    type State = GatherState;
    type Output = LoadedBatch;
    type Error = Error;

    fn start(&self, stop: &Arc<AtomicBool>) -> Result<GatherState> {
        let source = match &self.source {
            Source::Memory(bytes) => RowSource::Memory(bytes.clone()),
            Source::Disk { kind, direct } => {
                RowSource::open(&self.file, *kind, *direct, CoalesceOptions::default())?.0
            }
        };
        let mut gatherer = FeatureGatherer::new(self.file.clone(), source);
        if let Some(c) = &self.cache {
            gatherer = gatherer.with_cache(c.clone())?;
        }
        gatherer.set_cancel(stop.clone());
        Ok(GatherState { gatherer })
    }

    fn finish(
        &self,
        st: &mut GatherState,
        batch: Batch,
        sample_time: Duration,
        turn: &Turn<'_>,
    ) -> Result<LoadedBatch> {
        let t0 = Instant::now();
        if !turn.wait(self.ahead) {
            return Err(Error::Input("the epoch was stopped".into()));
        }
        let wait_time = t0.elapsed();
        let t1 = Instant::now();
        let nodes = &batch.sample.node;
        let mut x = self.buffers.take(nodes.len() * self.file.dim());
        let stats = match st.gatherer.gather(nodes, &mut x) {
            Ok(s) => s,
            Err(e) => {
                self.buffers.give(x);
                return Err(e.into());
            }
        };
        let y = self.labels.as_ref().map(|l| {
            let mut y = Vec::with_capacity(nodes.len());
            l.gather_into(nodes, &mut y);
            y
        });
        let gather_time = t1.elapsed();
        {
            let mut t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
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
}

/// Sampling and feature gathering over one dataset, on worker threads, within one memory
/// budget (see [`crate::plan`]). Share it between the train, val and test loops: the offset
/// index, the neighbor file, the cache and the labels are held once.
pub struct BatchLoader {
    pool: SamplerPool,
    work: Arc<GatherWork>,
    plan: MemoryPlan,
    batch_size: usize,
    feature_backend: String,
    fallback: Option<String>,
}

impl BatchLoader {
    /// Open the dataset in `dir`, split the budget, load what the plan keeps in memory and
    /// build the hot-row cache (sampling `presample_seeds` ahead for
    /// [`CachePolicy::Presample`]).
    pub fn open(
        dir: &std::path::Path,
        opts: LoaderOptions,
        presample_seeds: Option<&[u64]>,
    ) -> Result<Self> {
        if opts.batch_size == 0 {
            return Err(Error::Input("batch_size must be at least 1".into()));
        }
        if opts.sampler.threads == 0 {
            return Err(Error::Input("threads must be at least 1".into()));
        }
        if opts.prefetch == Some(0) {
            return Err(Error::Input(
                "prefetch must be at least 1 (gathered batches ahead of training)".into(),
            ));
        }
        let ds = Dataset::open(dir)?;
        let file = FeatureFile::of(&ds)?;
        let m = ds.manifest();
        let (v, e) = (m.num_nodes, m.num_edges);
        let budget = opts.memory.or_else(default_budget).unwrap_or(u64::MAX / 4);
        let threads = opts.sampler.threads as u64;
        let labels_bytes = m
            .labels
            .as_ref()
            .map_or(0, |l| v * Labels::bytes_per_node(l.num_classes));

        // Bounds of one batch, before the pool exists (so without its max degree: still an
        // upper bound).
        let fanouts = opts
            .sampler
            .fanouts
            .iter()
            .enumerate()
            .map(|(hop, &f)| Fanout::parse(hop, f))
            .collect::<ringgnn_sampler::Result<Vec<_>>>()?;
        let bound = sample_bound(
            opts.batch_size as u64,
            &fanouts,
            opts.sampler.replace,
            u64::MAX,
            v,
            e,
        );
        let ahead_guess = opts.prefetch.unwrap_or(1) as u64;
        let base = PlanInput {
            budget,
            reserve: opts.reserve,
            labels: labels_bytes,
            threads,
            read_buffer: CoalesceOptions::default().buffer as u64,
            batch_nodes: bound.nodes,
            batch_sample_bytes: bound.output_bytes(opts.sampler.with_edge_ids),
            dim: file.dim() as u64,
            features: file.info.payload_bytes(file.num_nodes),
            full_cache: HotRowCache::rows_for_budget(&file, u64::MAX)
                * (file.info.row_bytes + ringgnn_features::cache::INDEX_BYTES_PER_ROW),
            cache: opts.cache,
            prefetch: opts.prefetch.map(|p| p as u64),
            hold: opts.hold as u64,
            ..Default::default()
        };
        // The sampler decides about the neighbor file with what the loader's own fixed parts
        // leave of the budget.
        let mut pre = base.clone();
        pre.prefetch = Some(ahead_guess);
        pre.budget = u64::MAX / 4;
        let loader_fixed =
            MemoryPlan::compute(&pre).map_or(0, |p| p.reserve + p.labels + p.gather + p.buffers);
        let mut scfg = opts.sampler.clone();
        scfg.memory = Some(budget.saturating_sub(loader_fixed));
        scfg.prefetch = opts.prefetch.unwrap_or(opts.sampler.threads) + opts.sampler.threads;
        let pool = SamplerPool::open(dir, scfg)?;
        let neighbors_in_memory = pool.backend_name() == "memory";
        let neighbor_file = if neighbors_in_memory {
            e * m.graph.indices_dtype.size()
        } else {
            0
        };
        let choice = opts.features.unwrap_or(opts.sampler.backend);
        let input = PlanInput {
            sampler: pool
                .memory_estimate_for(opts.batch_size)
                .saturating_sub(neighbor_file),
            neighbor_file,
            neighbors_must_load: neighbors_in_memory,
            features_may_load: choice == BackendChoice::Auto,
            features_must_load: choice == BackendChoice::Memory,
            ..base
        };
        let plan = MemoryPlan::compute(&input).map_err(Error::Input)?;

        let (source, feature_backend, fallback) = if plan.features_in_memory {
            (Source::Memory(file.load()?), "memory".to_string(), None)
        } else {
            let kind = match choice {
                BackendChoice::Pread => BackendKind::Pread,
                BackendChoice::Uring => BackendKind::Uring,
                _ => BackendKind::Auto,
            };
            let direct = opts.sampler.direct;
            // Probe once here, so a failure is reported at open and the name is known.
            let (probe, why) = RowSource::open(&file, kind, direct, CoalesceOptions::default())?;
            let name = probe.name().to_string();
            (Source::Disk { kind, direct }, name, why)
        };
        let labels = Labels::load(&ds)?;
        let t0 = Instant::now();
        let mut presampled = 0;
        let cache = if plan.cache == 0 || plan.features_in_memory {
            None
        } else {
            let counts_fit = plan.cache >= 2 * v;
            let c = match (opts.cache_policy, presample_seeds) {
                (CachePolicy::Presample { batches }, Some(seeds))
                    if batches > 0 && counts_fit && !seeds.is_empty() =>
                {
                    let counts = count_ahead(&pool, seeds, opts.batch_size, batches)?;
                    presampled = counts.1;
                    HotRowCache::build_from_dense_counts(&ds, plan.cache, &counts.0, pool.indptr())?
                }
                _ => HotRowCache::build_by_degree_with(&ds, pool.indptr(), plan.cache)?,
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
        let buffer_values = (bound.nodes as usize).saturating_mul(file.dim());
        let work = GatherWork {
            file,
            source,
            cache,
            labels,
            buffers: Arc::new(BufferPool::new(plan.prefetch as usize + 2, buffer_values)),
            ahead: plan.prefetch as usize,
            totals: Mutex::new(totals),
        };
        Ok(BatchLoader {
            pool,
            work: Arc::new(work),
            plan,
            batch_size: opts.batch_size,
            feature_backend,
            fallback,
        })
    }

    /// One epoch of loaded batches, in order (see [`SamplerPool::epoch`] for the shuffle and
    /// the batching). Dropping the iterator stops the workers, abandoning reads in progress.
    pub fn epoch(
        &self,
        seeds: Vec<u64>,
        batch_size: usize,
        shuffle: bool,
        epoch: u64,
        drop_last: bool,
    ) -> Result<EpochIter<GatherWork>> {
        if batch_size > self.batch_size {
            return Err(Error::Input(format!(
                "batch_size {batch_size} is larger than the {} this loader's memory plan was made \
                 for; open the loader with the largest batch size you will use",
                self.batch_size
            )));
        }
        Ok(self.pool.epoch_with(
            self.work.clone(),
            seeds,
            batch_size,
            shuffle,
            epoch,
            drop_last,
        )?)
    }

    /// Hand a batch's feature buffer back for reuse.
    pub fn recycle(&self, x: Vec<f32>) {
        self.work.buffers.give(x);
    }

    /// The buffer pool (the bindings return buffers to it when Python releases them).
    pub fn buffers(&self) -> Arc<BufferPool> {
        self.work.buffers.clone()
    }

    pub fn plan(&self) -> &MemoryPlan {
        &self.plan
    }

    pub fn pool(&self) -> &SamplerPool {
        &self.pool
    }

    pub fn dim(&self) -> usize {
        self.work.file.dim()
    }

    /// "memory", "uring", "pread", ... for feature rows.
    pub fn feature_backend(&self) -> &str {
        &self.feature_backend
    }

    /// Why `auto` fell back to pread for feature rows, if it did.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    pub fn stats(&self) -> LoaderStats {
        *self.work.totals.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the dataset has labels (batches then carry `y`).
    pub fn has_labels(&self) -> bool {
        self.work.labels.is_some()
    }
}

/// Access counts of every node (saturating at 65535) over `batches` batches of look-ahead
/// epochs of `seeds` (`PRESAMPLE_EPOCH`, then the epochs below it, as many as it takes), and
/// the number of batches counted.
fn count_ahead(
    pool: &SamplerPool,
    seeds: &[u64],
    batch_size: usize,
    batches: usize,
) -> Result<(Vec<u16>, u64)> {
    let mut counts = vec![0u16; pool.num_nodes() as usize];
    let mut n = 0;
    let mut epoch = PRESAMPLE_EPOCH;
    while (n as usize) < batches {
        let it = pool.epoch(seeds.to_vec(), batch_size, true, epoch, false)?;
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
