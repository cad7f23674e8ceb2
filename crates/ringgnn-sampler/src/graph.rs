//! [`Graph`]: what every sampler of one dataset shares (the offset index, the neighbor file when
//! it is held in memory, the I/O counters), opened with a neighbor access *already decided* by
//! the caller's memory plan ([`NeighborAccess`]; `ringgnn-loader`'s `budget` decides it). Each
//! thread makes its own [`GraphSampler`] from it, with its own read backend: an io_uring ring
//! never crosses a thread or a fork.
//!
//! Opening a graph reads the offset index ([`OffsetIndex`], needed by the plan first) and, for
//! [`NeighborAccess::Memory`], the neighbor file; it starts no thread and keeps no ring.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ringgnn_io::{
    open_backend, BackendKind, BlockReader, CacheStats, CoalesceOptions, DirectFile, IoStats,
    PageCache, ReadModel,
};
use ringgnn_store::hetero::{ONE_RELATION, ONE_TYPE};

use crate::hetero::{EdgeTimes, SharedRelation, TypedGraph};
use crate::neighbors::{DiskNeighbors, Indices, NeighborSource};
pub use crate::offset_index::{OffsetIndex, Offsets};
use crate::sampler::check_indptr;
use crate::{
    Error, Fanout, HyperSampler, NeighborSampler, Result, SampleOptions, SampledSubgraph, SeedSlice,
};

/// How the neighbor file is read: decided once, by the memory plan, before the graph opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighborAccess {
    /// Loaded into memory once and shared by every sampler.
    Memory,
    /// Coalesced page reads with a read backend of its own per sampler (`Pread` or `Uring`;
    /// `Auto` probes again), with `O_DIRECT` if `direct` and the filesystem allows it.
    Disk { kind: BackendKind, direct: bool },
}

/// One dataset's neighbor lists, shared by any number of [`GraphSampler`]s.
pub struct Graph {
    index: OffsetIndex,
    access: NeighborAccess,
    memory: Option<Arc<Indices>>,
    name: &'static str,
    stats: [AtomicU64; 3],
    hyper: [AtomicU64; 5],
    /// Hot pages of the neighbor file, shared by this graph's disk samplers.
    pages: Option<Arc<PageCache>>,
}

/// What hyperbatch reads did, summed over every hyperbatch sampler of a graph.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HyperTotals {
    /// Bytes read as whole blocks (sequential) and as runs of needed pages (random).
    pub sequential_bytes: u64,
    pub random_bytes: u64,
    /// Hyperbatches sampled, and the batches in them.
    pub hyperbatches: u64,
    pub batches: u64,
    /// Bytes of finished samples written to spill files (and read back as many).
    pub spilled_bytes: u64,
}

impl Graph {
    /// Open the neighbor file of `ds` (whose offset index is `index`) as `access` says:
    /// loaded now for [`NeighborAccess::Memory`], checked for `O_DIRECT` otherwise.
    pub fn open(index: OffsetIndex, access: NeighborAccess) -> Result<Self> {
        let path = &index.indices_path;
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let (memory, name) = match access {
            NeighborAccess::Memory => {
                let ix = Indices::load(path, index.dtype, index.num_edges)?;
                (Some(Arc::new(ix)), "memory")
            }
            NeighborAccess::Disk {
                kind: BackendKind::Pread,
                ..
            } => (None, "pread"),
            NeighborAccess::Disk { direct, .. } => {
                // O_DIRECT is dropped silently where the filesystem refuses it (tmpfs): say so.
                let direct = direct && DirectFile::open(path).map_err(io)?.is_direct();
                (None, if direct { "uring-direct" } else { "uring" })
            }
        };
        Ok(Graph {
            index,
            access,
            memory,
            name,
            stats: Default::default(),
            hyper: Default::default(),
            pages: None,
        })
    }

    /// Keep up to `bytes` of hot neighbor-file pages in memory for the disk samplers made from
    /// now on (nothing with the file in memory, or when `bytes` is too small to be useful).
    /// The pages single-node requests with `fanouts` are expected to touch most are read now
    /// and kept ([`crate::hot_pages`]) when the arrays that choice needs fit in `bytes`;
    /// otherwise the cache starts empty and learns from the reads (CLOCK).
    pub fn with_page_cache(mut self, bytes: u64, fanouts: &[Fanout]) -> Result<Self> {
        let NeighborAccess::Disk { direct, .. } = self.access else {
            return Ok(self);
        };
        let Some(cache) = PageCache::new(bytes) else {
            return Ok(self);
        };
        if !fanouts.is_empty() && crate::hot_pages::work_bytes(&self.index) <= bytes {
            crate::hot_pages::preload(&self.index, fanouts, &cache, direct)?;
        }
        self.pages = Some(Arc::new(cache));
        Ok(self)
    }

    /// The page cache, if there is one (a server lends its memory to large requests:
    /// [`PageCache::lend`]).
    pub fn page_cache(&self) -> Option<&Arc<PageCache>> {
        self.pages.as_ref()
    }

    /// The counters of the page cache, if there is one.
    pub fn page_cache_stats(&self) -> Option<CacheStats> {
        self.pages.as_ref().map(|c| c.stats())
    }

    pub fn index(&self) -> &OffsetIndex {
        &self.index
    }

    pub fn indptr(&self) -> &Offsets {
        &self.index.indptr
    }

    pub fn num_nodes(&self) -> u64 {
        self.index.num_nodes()
    }

    pub fn access(&self) -> NeighborAccess {
        self.access
    }

    /// "memory", "uring", "uring-direct" or "pread".
    pub fn backend_name(&self) -> &'static str {
        self.name
    }

    /// A sampler for the calling thread, with its own read backend (ring, file handle), whose
    /// I/O counters flow into this graph's after every sample.
    pub fn sampler(&self, opts: &SampleOptions) -> Result<GraphSampler> {
        let source = match (&self.memory, self.access) {
            (Some(ix), _) => NeighborSource::Memory(ix.clone()),
            (None, NeighborAccess::Disk { kind, direct }) => {
                let path = &self.index.indices_path;
                let (reader, _) = open_backend(kind, path, direct).map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                })?;
                let opts = CoalesceOptions::default();
                NeighborSource::Disk(
                    DiskNeighbors::new(reader, path, self.index.dtype, opts)
                        .with_cache(self.pages.clone()),
                )
            }
            (None, NeighborAccess::Memory) => unreachable!("loaded when the graph opened"),
        };
        let s = NeighborSampler::new(
            self.index.indptr.clone(),
            &opts.fanouts,
            opts.replace,
            source,
        )?;
        Ok(GraphSampler {
            last: s.io_stats(),
            sampler: s,
            opts: opts.clone(),
            pid: std::process::id(),
        })
    }

    /// This graph as the one-type case of a [`TypedGraph`] (node type `node`, relation
    /// `node:to:node`), sharing its offset index, its neighbor file when in memory and its hot
    /// pages (nothing is loaded twice), with the dataset's edge-time file and its time keys
    /// (`edge_times`: the two paths, the keys `None` in a dataset built before them) and node
    /// times: what a homogeneous graph is sampled at seed times with, by the typed sampler. The
    /// edge times are loaded when the neighbor file is in memory and `times_in_memory` (the
    /// caller's budget holds them), else read by each sampler (with `pread` when the neighbor
    /// file is in memory), whose search then reads the keys, as [`TypedGraph::open`]'s does.
    pub fn one_type(
        &self,
        edge_times: Option<(&Path, Option<&Path>)>,
        node_times: Option<Arc<[i64]>>,
        times_in_memory: bool,
    ) -> Result<TypedGraph> {
        let (kind, direct) = match self.access {
            NeighborAccess::Memory => (None, false),
            NeighborAccess::Disk { kind, direct } => (Some(kind), direct),
        };
        let ix = &self.index;
        let relation = SharedRelation {
            name: ONE_RELATION.into(),
            src: 0,
            dst: 0,
            indptr: ix.indptr.clone(),
            max_degree: ix.max_degree,
            memory: self.memory.clone(),
            file: ix.indices_path.clone(),
            dtype: ix.dtype,
            pages: self.pages.clone(),
            times: None,
            times_of: None,
            time_range: None,
            time_keys: None,
        };
        let mut g = TypedGraph {
            types: vec![ONE_TYPE.into()],
            counts: vec![self.num_nodes()],
            relations: vec![relation],
            kind,
            direct,
            node_times: vec![None],
        };
        if let Some(times) = node_times {
            g.set_node_times(ONE_TYPE, times)?;
        }
        match edge_times {
            Some((p, _)) if self.memory.is_some() && !times_in_memory => {
                // Checked now (opening it checks its length), not first by a sampler.
                EdgeTimes::open(
                    p,
                    ix.num_edges,
                    BackendKind::Pread,
                    false,
                    Default::default(),
                )?;
                g.kind = Some(BackendKind::Pread);
                g.relations[0].times = Some((p.to_path_buf(), None));
            }
            Some((p, _)) => g.set_edge_times(ONE_RELATION, p)?,
            None => {}
        }
        if let Some((_, Some(keys))) = edge_times {
            g.set_edge_time_keys(ONE_RELATION, keys)?;
        }
        Ok(g)
    }

    /// A hyperbatch sampler for the calling thread, using `threads` threads (each with its own
    /// read backend) for reads, draws and relabelling; `None` when the neighbor file is in memory (there is
    /// nothing to share: the per-batch sampler reads no file).
    pub fn hyper_sampler(
        &self,
        opts: &SampleOptions,
        model: ReadModel,
        threads: usize,
    ) -> Result<Option<HyperSampler>> {
        let NeighborAccess::Disk { kind, direct } = self.access else {
            return Ok(None);
        };
        check_indptr(&self.index.indptr, Some(self.index.num_edges))?;
        let path = &self.index.indices_path;
        let chunk = CoalesceOptions::default().buffer;
        let readers = (0..threads.max(1))
            .map(|_| {
                let (reader, _) = open_backend(kind, path, direct).map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                })?;
                Ok(BlockReader::new(
                    reader,
                    model,
                    chunk,
                    self.index.neighbor_file_bytes(),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(HyperSampler::new(
            self.index.indptr.clone(),
            opts.clone(),
            readers,
            path.clone(),
            self.index.dtype.size(),
        )))
    }

    /// I/O counters summed over every sampler of this graph (zero for `memory`).
    pub fn io_stats(&self) -> IoStats {
        let [r, b, n] = &self.stats;
        IoStats {
            reads: r.load(Ordering::Relaxed),
            bytes: b.load(Ordering::Relaxed),
            batches: n.load(Ordering::Relaxed),
        }
    }

    /// Add what one hyperbatch of `batches` batches read: its backend's counters `io` and its
    /// sequential and random bytes.
    pub fn record_hyperbatch(&self, io: IoStats, sequential: u64, random: u64, batches: u64) {
        self.add_stats(io);
        for (c, x) in self.hyper.iter().zip([sequential, random, 1, batches]) {
            c.fetch_add(x, Ordering::Relaxed);
        }
    }

    /// Add the bytes of finished samples one hyperbatch wrote to its spill file.
    pub fn record_spill(&self, bytes: u64) {
        self.hyper[4].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Hyperbatch counters summed over every hyperbatch of this graph.
    pub fn hyper_totals(&self) -> HyperTotals {
        let [s, r, h, b, w] = &self.hyper;
        HyperTotals {
            sequential_bytes: s.load(Ordering::Relaxed),
            random_bytes: r.load(Ordering::Relaxed),
            hyperbatches: h.load(Ordering::Relaxed),
            batches: b.load(Ordering::Relaxed),
            spilled_bytes: w.load(Ordering::Relaxed),
        }
    }

    fn add_stats(&self, d: IoStats) {
        for (c, x) in self.stats.iter().zip([d.reads, d.bytes, d.batches]) {
            c.fetch_add(x, Ordering::Relaxed);
        }
    }
}

/// A [`NeighborSampler`] of a [`Graph`] with fixed [`SampleOptions`], for one thread.
pub struct GraphSampler {
    sampler: NeighborSampler,
    opts: SampleOptions,
    last: IoStats,
    pid: u32,
}

impl GraphSampler {
    /// Sample mini-batch `batch` of epoch `epoch` around `seeds`, adding the reads to `graph`'s
    /// counters (`graph` must be the one that made this sampler).
    pub fn sample(
        &mut self,
        graph: &Graph,
        seeds: SeedSlice<'_>,
        epoch: u64,
        batch: u64,
    ) -> Result<SampledSubgraph> {
        let o = &self.opts;
        let out = self
            .sampler
            .sample(seeds, o.seed, epoch, batch, o.with_edge_ids);
        self.record(graph);
        out
    }

    /// Sample independent requests together, their reads shared (see
    /// [`NeighborSampler::sample_many`]), adding the reads to `graph`'s counters.
    pub fn sample_many(
        &mut self,
        graph: &Graph,
        reqs: &[crate::ManyRequest<'_>],
    ) -> Result<Vec<SampledSubgraph>> {
        let out = self.sampler.sample_many(reqs);
        self.record(graph);
        out
    }

    fn record(&mut self, graph: &Graph) {
        let now = self.sampler.io_stats();
        graph.add_stats(IoStats {
            reads: now.reads - self.last.reads,
            bytes: now.bytes - self.last.bytes,
            batches: now.batches - self.last.batches,
        });
        self.last = now;
    }

    /// Bytes the last sampled batch held when it was done (see
    /// [`NeighborSampler::last_batch_bytes`]).
    pub fn last_batch_bytes(&self) -> crate::BatchBytes {
        self.sampler.last_batch_bytes()
    }

    /// Whether this sampler was made in the current process (a ring made before a fork must
    /// not be used in the child).
    pub fn made_here(&self) -> bool {
        self.pid == std::process::id()
    }

    /// Stop disk reads between waves once `flag` is set.
    pub fn set_cancel(&mut self, flag: Arc<AtomicBool>) {
        self.sampler.set_cancel(flag);
    }
}
