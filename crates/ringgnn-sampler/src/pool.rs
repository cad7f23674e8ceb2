//! [`SamplerPool`]: one dataset, one configuration, any number of samplers. It owns what all
//! samplers share (the offset index, the neighbor file when it is held in memory, the I/O
//! counters) and decides the backend; each thread makes its own [`NeighborSampler`] from it,
//! with its own read backend (an io_uring ring never crosses a thread or a fork).
//!
//! Opening a pool reads the offset index and may probe io_uring once (a throwaway ring); it
//! starts no thread and keeps no ring. Rings are made on first use: by [`SamplerPool::sample`]
//! on the calling thread, by each worker of [`SamplerPool::epoch`] inside that worker.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ringgnn_io::{open_backend, probe_uring, BackendKind, DirectFile, IoStats};
use ringgnn_store::manifest::IndexDtype;
use ringgnn_store::rng;
use ringgnn_store::Dataset;

use crate::budget::{self, SampleBound};
use crate::epoch::{BatchWork, EpochIter, SampleOnly};
use crate::fetch::{Backend, Indices};
use crate::{CoalesceOptions, Error, Fanout, NeighborSampler, Result, SampledSubgraph};

/// The `purpose` of [`rng::stream`] for the epoch shuffle ("shuffle" in ASCII): the order of
/// the seeds never shares a stream with the sampling of a batch.
pub const SHUFFLE_PURPOSE: u64 = 0x73_68_75_66_66_6c_65;

/// The backend a pool is asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// `memory` when it fits the budget, else `uring` where io_uring works, else `pread`.
    #[default]
    Auto,
    Memory,
    Uring,
    Pread,
}

impl FromStr for BackendChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "memory" => Ok(BackendChoice::Memory),
            "uring" => Ok(BackendChoice::Uring),
            "pread" => Ok(BackendChoice::Pread),
            _ => Err(Error::Input(format!(
                "unknown backend {s:?}: use \"auto\", \"memory\", \"uring\" or \"pread\""
            ))),
        }
    }
}

/// Everything that shapes a pool's samples and resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SamplerConfig {
    /// Neighbors per node at each hop (`-1`: all), PyG style.
    pub fanouts: Vec<i64>,
    /// Draw with replacement.
    pub replace: bool,
    pub backend: BackendChoice,
    /// Open the neighbor file with `O_DIRECT` for the disk backends (ignored by `memory`).
    pub direct: bool,
    /// Worker threads of an epoch (at least 1).
    pub threads: usize,
    /// The user seed: with `(epoch, batch)` it fixes every sample and every shuffle.
    pub seed: u64,
    /// Memory budget in bytes; `None`: [`budget::default_budget`] (half the available memory).
    pub memory: Option<u64>,
    /// Return the global edge ids of the sampled edges.
    pub with_edge_ids: bool,
    /// Completed batches an epoch may hold ahead of the consumer (at least 1).
    pub prefetch: usize,
}

impl Default for SamplerConfig {
    /// No hops, `auto`, one thread per available core and a prefetch of twice that.
    fn default() -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        SamplerConfig {
            fanouts: Vec::new(),
            replace: false,
            backend: BackendChoice::Auto,
            direct: false,
            threads,
            seed: 0,
            memory: None,
            with_edge_ids: false,
            prefetch: 2 * threads,
        }
    }
}

/// The backend a pool resolved to: what every sampler it makes will use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resolved {
    Memory,
    Disk(BackendKind),
}

/// What the samplers of a pool share; the epoch workers hold it through an `Arc`.
pub(crate) struct Shared {
    pub(crate) cfg: SamplerConfig,
    indptr: Arc<[u64]>,
    indices_path: PathBuf,
    dtype: IndexDtype,
    num_edges: u64,
    resolved: Resolved,
    /// The neighbor file, loaded once on first use by the `memory` backend.
    memory: Mutex<Option<Arc<Indices>>>,
    stats: [AtomicU64; 3],
    /// Epoch worker threads alive now.
    pub(crate) live: AtomicUsize,
}

impl Shared {
    pub(crate) fn num_nodes(&self) -> u64 {
        self.indptr.len() as u64 - 1
    }

    /// Load the neighbor file for the `memory` backend if it is not loaded yet.
    pub(crate) fn prepare(&self) -> Result<()> {
        if self.resolved != Resolved::Memory {
            return Ok(());
        }
        let mut m = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        if m.is_none() {
            let ix = Indices::load(&self.indices_path, self.dtype, self.num_edges)?;
            *m = Some(Arc::new(ix));
        }
        Ok(())
    }

    /// A sampler for the calling thread, with its own read backend (ring, file handle).
    pub(crate) fn new_sampler(&self) -> Result<Tracked> {
        self.prepare()?;
        let backend =
            match self.resolved {
                Resolved::Memory => {
                    let m = self.memory.lock().unwrap_or_else(|e| e.into_inner());
                    Backend::Memory(m.clone().expect("prepare loaded it"))
                }
                Resolved::Disk(kind) => {
                    let (reader, _) = open_backend(kind, &self.indices_path, self.cfg.direct)
                        .map_err(|source| Error::Io {
                            path: self.indices_path.clone(),
                            source,
                        })?;
                    let opts = CoalesceOptions::default();
                    Backend::disk(reader, &self.indices_path, self.dtype, opts)
                }
            };
        let s = NeighborSampler::new(
            self.indptr.clone(),
            &self.cfg.fanouts,
            self.cfg.replace,
            backend,
        )?;
        Ok(Tracked {
            last: s.io_stats(),
            sampler: s,
            pid: std::process::id(),
        })
    }

    fn add_stats(&self, d: IoStats) {
        for (c, x) in self.stats.iter().zip([d.reads, d.bytes, d.batches]) {
            c.fetch_add(x, Ordering::Relaxed);
        }
    }
}

/// A sampler whose I/O counters flow into the pool's after every batch.
pub(crate) struct Tracked {
    sampler: NeighborSampler,
    last: IoStats,
    pid: u32,
}

impl Tracked {
    pub(crate) fn sample(
        &mut self,
        shared: &Shared,
        seeds: &[u64],
        epoch: u64,
        batch: u64,
    ) -> Result<SampledSubgraph> {
        let c = &shared.cfg;
        let out = self
            .sampler
            .sample(seeds, c.seed, epoch, batch, c.with_edge_ids);
        let now = self.sampler.io_stats();
        shared.add_stats(IoStats {
            reads: now.reads - self.last.reads,
            bytes: now.bytes - self.last.bytes,
            batches: now.batches - self.last.batches,
        });
        self.last = now;
        out
    }
}

/// Neighbor sampling over one dataset with one configuration, on the calling thread
/// ([`sample`](Self::sample)) or on worker threads, an epoch at a time ([`epoch`](Self::epoch)).
/// Every sample depends only on `(seed, epoch, batch)` and the seeds: never on the backend, the
/// thread count or the scheduling.
pub struct SamplerPool {
    shared: Arc<Shared>,
    backend_name: String,
    fallback: Option<String>,
    fanouts: Vec<Fanout>,
    max_degree: u64,
    /// The sampler of [`Self::sample`], made on first use (and again after a fork).
    local: Mutex<Option<Tracked>>,
}

impl SamplerPool {
    /// Open the dataset in `dir` and choose the backend (see [`BackendChoice`]): `Auto` takes
    /// `memory` when [`Self::memory_estimate`] with the neighbor file loaded fits the budget,
    /// else `uring` when [`probe_uring`] passes, else `pread` with the reason in
    /// [`Self::fallback_reason`]. `Memory` with an explicit budget it does not fit is an error;
    /// without one it is always allowed. `Uring` where io_uring does not work is an error.
    pub fn open(dir: &Path, cfg: SamplerConfig) -> Result<Self> {
        if cfg.threads == 0 {
            return Err(Error::Input("threads must be at least 1".into()));
        }
        if cfg.prefetch == 0 {
            return Err(Error::Input(
                "prefetch must be at least 1 (batches held ahead of the consumer)".into(),
            ));
        }
        let fanouts = cfg
            .fanouts
            .iter()
            .enumerate()
            .map(|(hop, &f)| Fanout::parse(hop, f))
            .collect::<Result<Vec<_>>>()?;
        let ds = Dataset::open(dir)?;
        let indptr: Arc<[u64]> = ds.load_indptr()?.into();
        let max_degree = indptr
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .max()
            .unwrap_or(0);
        let m = ds.manifest();
        let mut pool = SamplerPool {
            shared: Arc::new(Shared {
                indptr,
                indices_path: ds.path_of("indices")?,
                dtype: m.graph.indices_dtype,
                num_edges: m.num_edges,
                resolved: Resolved::Memory,
                memory: Mutex::new(None),
                stats: Default::default(),
                live: AtomicUsize::new(0),
                cfg,
            }),
            backend_name: String::new(),
            fallback: None,
            fanouts,
            max_degree,
            local: Mutex::new(None),
        };
        let resolved = pool.resolve()?;
        let shared = Arc::get_mut(&mut pool.shared).expect("not shared yet");
        shared.resolved = resolved;
        pool.backend_name = match resolved {
            Resolved::Memory => "memory".into(),
            Resolved::Disk(BackendKind::Pread) => "pread".into(),
            Resolved::Disk(_) => {
                // O_DIRECT is dropped silently where the filesystem refuses it (tmpfs): say so.
                let path = &pool.shared.indices_path;
                let direct = pool.shared.cfg.direct
                    && DirectFile::open(path)
                        .map_err(|source| Error::Io {
                            path: path.clone(),
                            source,
                        })?
                        .is_direct();
                if direct { "uring-direct" } else { "uring" }.into()
            }
        };
        Ok(pool)
    }

    fn resolve(&mut self) -> Result<Resolved> {
        let c = &self.shared.cfg;
        match c.backend {
            BackendChoice::Pread => Ok(Resolved::Disk(BackendKind::Pread)),
            BackendChoice::Uring => match probe_uring() {
                Ok(()) => Ok(Resolved::Disk(BackendKind::Uring)),
                Err(why) => Err(Error::Input(format!(
                    "io_uring is not available: {why}; use backend=\"pread\""
                ))),
            },
            BackendChoice::Memory => {
                let need = self.estimate(Resolved::Memory, budget::ESTIMATE_BATCH);
                match c.memory {
                    Some(b) if need > b => Err(Error::Input(format!(
                        "backend=\"memory\" needs about {need} bytes (offset index {}, neighbor \
                         file {}, workspaces and prefetch queue the rest) but memory={b}; raise \
                         memory, or use backend=\"auto\" to read from disk",
                        self.indptr_bytes(),
                        self.indices_bytes()
                    ))),
                    _ => Ok(Resolved::Memory),
                }
            }
            BackendChoice::Auto => {
                let need = self.estimate(Resolved::Memory, budget::ESTIMATE_BATCH);
                if c.memory
                    .or_else(budget::default_budget)
                    .is_some_and(|b| need <= b)
                {
                    return Ok(Resolved::Memory);
                }
                match probe_uring() {
                    Ok(()) => Ok(Resolved::Disk(BackendKind::Uring)),
                    Err(why) => {
                        self.fallback = Some(why);
                        Ok(Resolved::Disk(BackendKind::Pread))
                    }
                }
            }
        }
    }

    /// "memory", "uring", "uring-direct" or "pread".
    pub fn backend_name(&self) -> &str {
        &self.backend_name
    }

    /// Why `auto` did not pick io_uring (the probe's answer), for one log line; `None` when it
    /// picked it, picked `memory`, or the backend was chosen explicitly.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.shared.cfg
    }

    pub fn num_nodes(&self) -> u64 {
        self.shared.num_nodes()
    }

    /// Sample mini-batch `batch` of epoch `epoch` around `seeds` on the calling thread, with a
    /// sampler made on first use; exactly what batch `batch` of [`Self::epoch`] gives for the
    /// same seeds.
    pub fn sample(&self, seeds: &[u64], epoch: u64, batch: u64) -> Result<SampledSubgraph> {
        let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
        // A sampler made before a fork holds the parent's ring: make a new one.
        if local.as_ref().is_none_or(|t| t.pid != std::process::id()) {
            *local = Some(self.shared.new_sampler()?);
        }
        let t = local.as_mut().expect("made above");
        t.sample(&self.shared, seeds, epoch, batch)
    }

    /// Iterate over one epoch: `seeds` shuffled with the stream `(seed, SHUFFLE_PURPOSE,
    /// epoch)` when `shuffle` (a Fisher-Yates permutation), cut into batches of `batch_size`
    /// (the short last one dropped with `drop_last`), sampled by `threads` worker threads and
    /// returned in order; see [`EpochIter`].
    pub fn epoch(
        &self,
        seeds: Vec<u64>,
        batch_size: usize,
        shuffle: bool,
        epoch: u64,
        drop_last: bool,
    ) -> Result<EpochIter> {
        self.epoch_with(
            Arc::new(SampleOnly),
            seeds,
            batch_size,
            shuffle,
            epoch,
            drop_last,
        )
    }

    /// [`Self::epoch`] with a second stage: each worker hands every batch it samples to
    /// `work` (see [`BatchWork`]), and the epoch yields what `work` returns, in batch order,
    /// with the same prefetch bound.
    pub fn epoch_with<W: BatchWork>(
        &self,
        work: Arc<W>,
        mut seeds: Vec<u64>,
        batch_size: usize,
        shuffle: bool,
        epoch: u64,
        drop_last: bool,
    ) -> Result<EpochIter<W>> {
        if batch_size == 0 {
            return Err(Error::Input("batch_size must be at least 1".into()));
        }
        let num_nodes = self.num_nodes();
        if let Some(&id) = seeds.iter().find(|&&s| s >= num_nodes) {
            return Err(Error::Seed { id, num_nodes });
        }
        if shuffle {
            let mut r = rng::stream(self.shared.cfg.seed, SHUFFLE_PURPOSE, epoch);
            for i in (1..seeds.len()).rev() {
                let j = rng::below(&mut r, i as u64 + 1) as usize;
                seeds.swap(i, j);
            }
        }
        self.shared.prepare()?;
        EpochIter::start(
            self.shared.clone(),
            work,
            seeds,
            batch_size,
            epoch,
            drop_last,
        )
    }

    /// I/O counters summed over every sampler of this pool, all epochs (zero for `memory`).
    pub fn io_stats(&self) -> IoStats {
        let [r, b, n] = &self.shared.stats;
        IoStats {
            reads: r.load(Ordering::Relaxed),
            bytes: b.load(Ordering::Relaxed),
            batches: n.load(Ordering::Relaxed),
        }
    }

    /// Epoch worker threads alive now (0 once every [`EpochIter`] is finished or dropped).
    pub fn live_workers(&self) -> usize {
        self.shared.live.load(Ordering::SeqCst)
    }

    /// Bytes this pool needs at most, for batches of [`budget::ESTIMATE_BATCH`] (1024) seeds;
    /// see [`Self::memory_estimate_for`].
    pub fn memory_estimate(&self) -> u64 {
        self.memory_estimate_for(budget::ESTIMATE_BATCH)
    }

    /// Bytes this pool needs at most with batches of `batch` seeds, `T` threads and a prefetch
    /// of `P` batches, on a graph of `V` nodes:
    ///
    /// ```text
    ///   (V + 1) * 8                                  offset index, shared by all threads
    /// + E * w                                        neighbor file (memory backend only; w = 4 or 8)
    /// + T * (C + W + S)                              per worker thread
    /// + P * (S + 8 * batch)                          prefetch queue (samples and their seeds)
    /// ```
    ///
    /// `C` is the coalescing read buffer (8 MiB, disk backends only); `S` the largest sample
    /// (8 B per node, 16 B per edge, +8 B per edge with edge ids) and `W` the per-hop
    /// workspaces (56 B per edge of the largest hop, 32 B per node), where a batch reaches at
    /// most `batch * prod(min(fanout_k, max degree))` edges, never more than `V` nodes (nor,
    /// without replacement, `E` edges). It is an upper bound: deduplication usually makes
    /// samples much smaller. Only the memory backend depends on `E`. [`Self::sample`] adds one
    /// more `C + W + S` on the calling thread.
    pub fn memory_estimate_for(&self, batch: usize) -> u64 {
        self.estimate(self.shared.resolved, batch)
    }

    fn estimate(&self, backend: Resolved, batch: usize) -> u64 {
        let c = &self.shared.cfg;
        let bound = self.sample_bound(batch);
        let sample = bound.output_bytes(c.with_edge_ids);
        let (file, buffer) = match backend {
            Resolved::Memory => (self.indices_bytes(), 0),
            Resolved::Disk(_) => (0, CoalesceOptions::default().buffer as u64),
        };
        let per_thread = buffer + bound.workspace_bytes() + sample;
        let queued = sample.saturating_add(8 * batch as u64);
        self.indptr_bytes()
            .saturating_add(file)
            .saturating_add(per_thread.saturating_mul(c.threads as u64))
            .saturating_add(queued.saturating_mul(c.prefetch as u64))
    }

    /// The offset index (`V + 1` offsets) every sampler of this pool shares.
    pub fn indptr(&self) -> &[u64] {
        &self.shared.indptr
    }

    /// Upper bounds on one sample of `batch` seeds with this pool's fanouts (see
    /// [`budget::sample_bound`]).
    pub fn sample_bound(&self, batch: usize) -> SampleBound {
        let c = &self.shared.cfg;
        budget::sample_bound(
            batch as u64,
            &self.fanouts,
            c.replace,
            self.max_degree,
            self.num_nodes(),
            self.shared.num_edges,
        )
    }

    fn indptr_bytes(&self) -> u64 {
        self.shared.indptr.len() as u64 * 8
    }

    fn indices_bytes(&self) -> u64 {
        self.shared
            .num_edges
            .saturating_mul(self.shared.dtype.size())
    }
}
