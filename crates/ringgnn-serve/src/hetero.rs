//! [`HeteroEngine`]: the request engine over a heterogeneous dataset (node types, relations
//! `SRC:REL:DST`): typed sampling and feature requests from many client threads, served
//! together in waves, as [`crate::Engine`] serves a homogeneous one.
//!
//! A request names its seeds' node type; a sampling request has one fanout list per relation
//! (in the dataset's relation order). Requests that queue while the workers are out are
//! answered in *waves*: the caller that finds a worker free serves what is queued, a wave at a
//! time, until the queue is empty. A wave is the queued sampling requests of one configuration
//! (fanouts, replacement, seed, edge ids), sampled together with one
//! [`HeteroSampler::sample_many`] (each relation's file read once per hop for all of them: a
//! page two requests need is read once), then the feature rows they asked for, gathered per
//! type in one go; or the queued feature requests, gathered per type in one go. Each answer is
//! exactly what `HeteroSampler::sample(type, seeds, seed, 0, 0, edge_ids)` gives alone.
//!
//! Memory: which neighbor files are held in memory is the caller's placement (the budget's
//! owner, `ringgnn.sampling.plan`); the relations read from disk share `neighbor_cache` bytes of
//! hot pages (each relation's share a [`PageCache`] its pages enter as they are read, so the
//! hub lists single-node requests keep fetching stay in memory). A request may sample at most
//! what `max_nodes` seeds of any type reach at the default fanouts (by the upper bound,
//! [`hetero_bound`]), and a wave holds requests up to that bound together: each worker holds
//! at most one such sample at a time.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ringgnn_features::{FeatureGatherer, RowSource};
use ringgnn_io::{open_backend, BackendKind, CoalesceOptions, PageCache};
use ringgnn_sampler::{
    hetero_bound, DiskNeighbors, Fanout, HeteroRelation, HeteroSample, HeteroSampler, Indices,
    NeighborSource,
};
use ringgnn_store::hetero::{split_relation, HeteroManifest, Part};
use ringgnn_store::manifest::{FeatureDtype, IndexDtype};
use ringgnn_store::Dataset;

use crate::engine::{CancelToken, FeatureRows};
use crate::latency::Histogram;
use crate::{Limits, Result, ServeError};
use wave::{Answer, Key, Queue, Work, Worker};

mod wave;

const POLL: Duration = Duration::from_millis(10);

/// Samplers of other configurations than the default one a worker keeps (each holds its disk
/// relations' read backends; a request with its own fanouts makes one on a miss).
const KEPT_SAMPLERS: usize = 8;

/// How a [`HeteroEngine`] opens its dataset and what it accepts.
#[derive(Clone, Debug)]
pub struct HeteroOptions {
    /// The default fanouts, one list per relation in the dataset's relation order.
    pub fanouts: Vec<Vec<Fanout>>,
    /// The seed of requests that give none.
    pub seed: u64,
    /// Workers: waves served at once, each with its own read backends.
    pub threads: NonZeroUsize,
    /// How neighbor files not in `memory_relations` and feature files are read; `None` holds
    /// every file in memory.
    pub backend: Option<BackendKind>,
    pub direct: bool,
    /// Relations whose neighbor file is held in memory (the caller's placement).
    pub memory_relations: Vec<String>,
    /// Hold every feature file in memory.
    pub features_in_memory: bool,
    /// Bytes of hot neighbor pages, shared by the relations read from disk.
    pub neighbor_cache: u64,
    pub max_wave: NonZeroUsize,
    pub queue: NonZeroUsize,
    pub limits: Limits,
}

/// A typed sampling request: around `seeds` of type `seed_type`, with one fanout list per
/// relation.
#[derive(Clone, Debug)]
pub struct HeteroSampleRequest {
    pub seed_type: usize,
    pub seeds: Vec<u64>,
    pub fanouts: Vec<Vec<Fanout>>,
    pub replace: bool,
    pub seed: u64,
    pub with_edge_ids: bool,
}

/// Counters since the engine opened (what [`crate::EngineStats`] holds).
pub type HeteroStats = crate::EngineStats;

/// One relation as every worker's samplers share it.
struct Relation {
    name: String,
    src: usize,
    dst: usize,
    indptr: Arc<[u64]>,
    max_degree: u64,
    memory: Option<Arc<Indices>>,
    file: PathBuf,
    dtype: IndexDtype,
    pages: Option<Arc<PageCache>>,
}

/// A node type's feature file.
struct Features {
    part: Dataset,
    dtype: FeatureDtype,
    dim: usize,
    memory: Option<Arc<Vec<u8>>>,
}

#[derive(Default)]
struct Counters {
    sample_requests: AtomicU64,
    feature_requests: AtomicU64,
    waves: AtomicU64,
    wave_requests: AtomicU64,
    busy: AtomicU64,
    deadline_exceeded: AtomicU64,
    cancelled: AtomicU64,
    failed: AtomicU64,
    reads: AtomicU64,
    bytes_read: AtomicU64,
    latency: Histogram,
}

/// Serves typed sampling and feature requests from any number of threads; see the module docs.
pub struct HeteroEngine {
    types: Vec<String>,
    counts: Vec<u64>,
    relations: Vec<Relation>,
    features: Vec<Option<Features>>,
    opts: HeteroOptions,
    kind: Option<BackendKind>,
    /// The bound of the largest request: `max_nodes` seeds of any type at the default fanouts.
    max_edges: u64,
    backend: String,
    feature_backend: String,
    threads: usize,
    queue: Mutex<Queue>,
    changed: Condvar,
    counters: Counters,
}

impl HeteroEngine {
    /// Open the heterogeneous dataset in `dir` and make `opts.threads` workers.
    pub fn open(dir: &Path, opts: HeteroOptions) -> Result<Self> {
        let store = |e: ringgnn_store::Error| ServeError::Input(e.to_string());
        let m = HeteroManifest::read(dir).map_err(store)?;
        let types: Vec<String> = m.node_types.keys().cloned().collect();
        let counts: Vec<u64> = types.iter().map(|t| m.node_types[t].num_nodes).collect();
        let names: Vec<&String> = m.relations.keys().collect();
        if opts.fanouts.len() != names.len() {
            return Err(ServeError::Input(format!(
                "{} fanout lists for {} relations: give one per relation",
                opts.fanouts.len(),
                names.len()
            )));
        }
        let on_disk = names
            .iter()
            .filter(|r| opts.backend.is_some() && !opts.memory_relations.contains(r))
            .count() as u64;
        let mut relations = Vec::with_capacity(names.len());
        for r in names {
            let (s, _, d) = split_relation(r).map_err(store)?;
            let ds = Dataset::open_part(dir, &Part::Relation(r.clone())).map_err(store)?;
            let indptr: Arc<[u64]> = ds.load_indptr().map_err(store)?.into();
            let file = ds.path_of("indices").map_err(store)?;
            let dtype = ds.manifest().graph.indices_dtype;
            let memory = if opts.backend.is_none() || opts.memory_relations.contains(r) {
                let ix = Indices::load(&file, dtype, ds.manifest().num_edges)
                    .map_err(|e| ServeError::Internal(e.to_string()))?;
                Some(Arc::new(ix))
            } else {
                None
            };
            let pages = match memory {
                None if on_disk > 0 => PageCache::new(opts.neighbor_cache / on_disk).map(Arc::new),
                _ => None,
            };
            let index = |t: &str| types.iter().position(|x| x == t).expect("by the manifest");
            relations.push(Relation {
                name: r.clone(),
                src: index(s),
                dst: index(d),
                max_degree: indptr.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0),
                indptr,
                memory,
                file,
                dtype,
                pages,
            });
        }
        let mut features = Vec::with_capacity(types.len());
        for t in &types {
            let f = match &m.node_types[t].features {
                None => None,
                Some(info) => {
                    let part = Dataset::open_part(dir, &Part::Node(t.clone())).map_err(store)?;
                    let memory = if opts.features_in_memory || opts.backend.is_none() {
                        let file = ringgnn_features::FeatureFile::of(&part)
                            .map_err(|e| ServeError::Internal(e.to_string()))?;
                        match RowSource::memory(&file)
                            .map_err(|e| ServeError::Internal(e.to_string()))?
                        {
                            RowSource::Memory(bytes) => Some(bytes),
                            _ => None,
                        }
                    } else {
                        None
                    };
                    Some(Features {
                        part,
                        dtype: info.dtype,
                        dim: info.dim as usize,
                        memory,
                    })
                }
            };
            features.push(f);
        }
        let mut engine = HeteroEngine {
            types,
            counts,
            relations,
            features,
            kind: opts.backend,
            max_edges: 0,
            backend: String::new(),
            feature_backend: String::new(),
            threads: opts.threads.get(),
            opts,
            queue: Mutex::new(Queue::default()),
            changed: Condvar::new(),
            counters: Counters::default(),
        };
        engine.max_edges = (0..engine.types.len())
            .map(|t| {
                engine.bound(
                    t,
                    engine.opts.limits.max_nodes as u64,
                    &engine.opts.fanouts,
                    false,
                )
            })
            .max()
            .unwrap_or(0)
            .max(1);
        let mut free = Vec::with_capacity(engine.threads);
        for _ in 0..engine.threads {
            let mut w = Worker {
                samplers: Vec::new(),
                gatherers: Vec::new(),
            };
            let key = (engine.opts.fanouts.clone(), false);
            let s = engine.sampler(&key)?;
            engine.backend = s.1;
            w.samplers.push((key, s.0));
            for t in 0..engine.types.len() {
                let g = engine.gatherer(t)?;
                if let Some(g) = &g {
                    engine.feature_backend = g.source_name().to_string();
                }
                w.gatherers.push(g);
            }
            free.push(w);
        }
        lock(&engine.queue).free = free;
        Ok(engine)
    }

    /// A sampler of `key` (fanouts, replace) over the shared relations, with its own disk
    /// backends, and the name of how it reads.
    fn sampler(&self, key: &Key) -> Result<(HeteroSampler, String)> {
        let on_disk = self.relations.iter().filter(|r| r.memory.is_none()).count();
        // One read buffer of the homogeneous sampler's size, split between the disk relations
        // (a sampler reads one relation at a time).
        let coalesce = {
            let d = CoalesceOptions::default();
            let share = (d.buffer / on_disk.max(1)) / ringgnn_io::ALIGN * ringgnn_io::ALIGN;
            CoalesceOptions {
                buffer: share.max(d.run_bytes()),
                ..d
            }
        };
        let mut name = String::from("memory");
        let mut rels = Vec::with_capacity(self.relations.len());
        for (r, fanouts) in self.relations.iter().zip(&key.0) {
            let source = match (&r.memory, self.kind) {
                (Some(ix), _) => NeighborSource::Memory(ix.clone()),
                (None, kind) => {
                    let kind = kind.expect("a relation not in memory has a disk backend");
                    let (reader, _) = open_backend(kind, &r.file, self.opts.direct)
                        .map_err(|e| ServeError::Internal(format!("{}: {e}", r.file.display())))?;
                    let d = DiskNeighbors::new(reader, &r.file, r.dtype, coalesce)
                        .with_cache(r.pages.clone());
                    NeighborSource::Disk(d)
                }
            };
            if name == "memory" || source.name() != "memory" {
                name = source.name().to_string();
            }
            rels.push(HeteroRelation {
                src: r.src,
                dst: r.dst,
                indptr: r.indptr.clone(),
                source,
                fanouts: fanouts.clone(),
            });
        }
        if self.opts.direct && name == "uring" {
            name = "uring-direct".into();
        }
        let s = HeteroSampler::new(self.counts.clone(), rels, key.1)
            .map_err(|e| ServeError::Input(e.to_string()))?;
        Ok((s, name))
    }

    fn gatherer(&self, t: usize) -> Result<Option<FeatureGatherer>> {
        let Some(f) = &self.features[t] else {
            return Ok(None);
        };
        let internal = |e: ringgnn_features::Error| ServeError::Internal(e.to_string());
        let file = ringgnn_features::FeatureFile::of(&f.part).map_err(internal)?;
        let g = match (&f.memory, self.kind) {
            (Some(bytes), _) => FeatureGatherer::new(file, RowSource::Memory(bytes.clone())),
            (None, kind) => {
                let kind = kind.expect("features not in memory have a disk backend");
                let (source, _) =
                    RowSource::open(&file, kind, self.opts.direct, CoalesceOptions::default())
                        .map_err(internal)?;
                FeatureGatherer::new(file, source)
            }
        };
        Ok(Some(g))
    }

    /// The upper bound of the edges sampled around `seeds` nodes of type `t`.
    fn bound(&self, t: usize, seeds: u64, fanouts: &[Vec<Fanout>], replace: bool) -> u64 {
        let mut per = vec![0u64; self.types.len()];
        per[t] = seeds;
        let rels: Vec<(usize, usize, &[Fanout], u64, u64)> = self
            .relations
            .iter()
            .zip(fanouts)
            .map(|(r, f)| {
                let edges = r.indptr.last().copied().unwrap_or(0);
                (r.src, r.dst, f.as_slice(), r.max_degree, edges)
            })
            .collect();
        hetero_bound(&per, &self.counts, &rels, replace)
            .edges
            .iter()
            .sum()
    }

    pub fn node_types(&self) -> &[String] {
        &self.types
    }

    pub fn num_nodes(&self) -> &[u64] {
        &self.counts
    }

    pub fn relations(&self) -> Vec<String> {
        self.relations.iter().map(|r| r.name.clone()).collect()
    }

    pub fn num_edges(&self) -> Vec<u64> {
        self.relations
            .iter()
            .map(|r| r.indptr.last().copied().unwrap_or(0))
            .collect()
    }

    /// Each type's feature width and stored dtype (`None` without features).
    pub fn feature_info(&self) -> Vec<Option<(usize, FeatureDtype)>> {
        self.features
            .iter()
            .map(|f| f.as_ref().map(|f| (f.dim, f.dtype)))
            .collect()
    }

    pub fn options(&self) -> &HeteroOptions {
        &self.opts
    }

    /// How the neighbor files and the feature rows are read ("memory", "pread", "uring", ...).
    pub fn backend(&self) -> &str {
        &self.backend
    }

    pub fn feature_backend(&self) -> &str {
        &self.feature_backend
    }

    /// What a request may sample at most (edges, by its upper bound).
    pub fn max_edges(&self) -> u64 {
        self.max_edges
    }

    /// Refuse a request of `n` ids before they are converted.
    pub fn check_count(&self, n: usize) -> Result<()> {
        let max = self.opts.limits.max_nodes;
        if n == 0 {
            return Err(ServeError::Input("no node ids: give at least one".into()));
        }
        if n > max {
            return Err(ServeError::Input(format!(
                "{n} node ids in one request: at most {max} (the server's --max-nodes)"
            )));
        }
        Ok(())
    }

    /// Refuse ids outside type `t`'s range, naming the first.
    pub fn check_ids(&self, t: usize, ids: &[i64]) -> Result<Vec<u64>> {
        self.check_count(ids.len())?;
        let n = self.counts[t];
        if let Some(&bad) = ids.iter().find(|&&v| v < 0 || v as u64 >= n) {
            let name = &self.types[t];
            return Err(ServeError::Input(format!(
                "node {bad} of type '{name}' is out of range: '{name}' has {} nodes (ids 0..{})",
                thousands(n),
                n as i64 - 1
            )));
        }
        Ok(ids.iter().map(|&v| v as u64).collect())
    }

    /// The sample of `req`, and with `rows` the feature rows of its nodes of every type with
    /// features (in `node` order), by `deadline` unless `cancel` is set first.
    pub fn sample(
        &self,
        req: HeteroSampleRequest,
        rows: bool,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> Result<(HeteroSample, Option<Vec<Option<FeatureRows>>>)> {
        self.counters
            .sample_requests
            .fetch_add(1, Ordering::Relaxed);
        let hops = req.fanouts.first().map_or(0, Vec::len);
        if hops == 0 || hops > self.opts.limits.max_hops {
            return Err(ServeError::Input(format!(
                "{hops} fanouts: give 1 to {} (one per hop)",
                self.opts.limits.max_hops
            )));
        }
        if req.fanouts.len() != self.relations.len() || req.fanouts.iter().any(|f| f.len() != hops)
        {
            return Err(ServeError::Input(format!(
                "give {} fanout lists (one per relation), every one with the same number of hops",
                self.relations.len()
            )));
        }
        let cost = self.bound(
            req.seed_type,
            req.seeds.len() as u64,
            &req.fanouts,
            req.replace,
        );
        if cost > self.max_edges {
            return Err(ServeError::Input(format!(
                "this request may sample up to {} edges (its upper bound: {} nodes of type \
                 '{}', fanouts {:?}); the server takes at most {} per request (the bound of \
                 --max-nodes {} seeds of any type at its default fanouts): ask for fewer nodes \
                 or smaller fanouts, or start the server with a larger --max-nodes or --fanouts",
                thousands(cost),
                req.seeds.len(),
                self.types[req.seed_type],
                req.fanouts
                    .iter()
                    .map(|f| f.iter().map(|x| x.value()).collect::<Vec<_>>())
                    .collect::<Vec<_>>(),
                thousands(self.max_edges),
                self.opts.limits.max_nodes,
            )));
        }
        match self.submit(Work::Sample(req, rows), cost.max(1), deadline, cancel)? {
            Answer::Sample(s, x) => Ok((s, x)),
            Answer::Features(_) => unreachable!("a sample request gets a sample"),
        }
    }

    /// The feature rows of `ids` (checked) of type `t`.
    pub fn features(
        &self,
        t: usize,
        ids: Vec<u64>,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> Result<FeatureRows> {
        self.counters
            .feature_requests
            .fetch_add(1, Ordering::Relaxed);
        if self.features[t].is_none() {
            return Err(ServeError::Input(format!(
                "node type '{}' has no features",
                self.types[t]
            )));
        }
        let cost = ids.len() as u64;
        match self.submit(Work::Features(t, ids), cost, deadline, cancel)? {
            Answer::Features(f) => Ok(f),
            Answer::Sample(..) => unreachable!("a feature request gets rows"),
        }
    }

    pub fn stats(&self) -> HeteroStats {
        let c = &self.counters;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (mut hits, mut misses, mut pages) = (0, 0, 0);
        for p in self.relations.iter().filter_map(|r| r.pages.as_ref()) {
            let s = p.stats();
            (hits, misses, pages) = (hits + s.hits, misses + s.misses, pages + s.pages);
        }
        HeteroStats {
            sample_requests: r(&c.sample_requests),
            feature_requests: r(&c.feature_requests),
            waves: r(&c.waves),
            wave_requests: r(&c.wave_requests),
            busy: r(&c.busy),
            deadline_exceeded: r(&c.deadline_exceeded),
            cancelled: r(&c.cancelled),
            failed: r(&c.failed),
            queued: lock(&self.queue).jobs.len() as u64,
            latency: c.latency.snapshot(),
            reads: r(&c.reads),
            bytes_read: r(&c.bytes_read),
            page_hits: hits,
            page_misses: misses,
            pages_cached: pages,
        }
    }

    /// Refuse new requests and wait until every worker is back. Idempotent.
    pub fn close(&self) {
        let mut q = lock(&self.queue);
        q.closed = true;
        while !(q.jobs.is_empty() && q.free.len() == self.threads) {
            q = self
                .changed
                .wait_timeout(q, POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for HeteroEngine {
    fn drop(&mut self) {
        self.close();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `n` with a comma every three digits, as Python's `{:,}`.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn thousands_groups_digits_as_python_does() {
        for (n, want) in [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (1234567, "1,234,567"),
        ] {
            assert_eq!(thousands(n), want);
        }
    }
}
