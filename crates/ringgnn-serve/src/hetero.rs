//! [`HeteroEngine`]: the request engine over a heterogeneous dataset (node types, relations
//! `SRC:REL:DST`): typed sampling and feature requests from many client threads, served
//! together in waves by the one queue ([`crate::queue`]) that serves [`crate::Engine`]'s:
//! the same admission, deadlines, cancellation, wait for company (`max_wait`) and room for a
//! request larger than a wave.
//!
//! A request names its seeds' node type; a sampling request has one fanout list per relation
//! (in the dataset's relation order). A wave holds sampling requests of one configuration
//! (fanouts, replacement, seed, edge ids), sampled together with one
//! [`HeteroSampler::sample_many`] (each relation's file read once per hop for all of them: a
//! page two requests need is read once), then the feature rows they asked for, gathered per
//! type in one go; and the feature requests queued with them, gathered per type in one go
//! (`hetero/wave.rs`). Each answer is exactly what `HeteroSampler::sample(type, seeds, seed, 0,
//! 0, edge_ids)` gives alone. A request with times ([`crate::RequestTimes`]) is its own batch
//! of the wave's `sample_many`, sampled at its seeds' times (disjoint per distinct time): what
//! `HeteroSampler::sample_many` gives it alone with those times; requests at different times
//! never share a subgraph, and the cut to a time is made on the lists' times before a neighbor
//! entry is read, so a hot page cannot give a request an edge newer than its time.
//!
//! Memory: which neighbor files are held in memory is the caller's placement (the budget's
//! owner, `ringgnn.sampling.plan`); the relations read from disk share `neighbor_cache` bytes of
//! hot pages (each relation's share a [`PageCache`] its pages enter as they are read, so the
//! hub lists single-node requests keep fetching stay in memory). A wave holds, by the upper
//! bound ([`hetero_bound`]), what `batch_size` seeds of any type reach at the default fanouts;
//! a larger request, up to `max_nodes` seeds of any type at the default fanouts, is answered
//! alone, one at a time, in a room the hot pages lend while it is answered (when they are large
//! enough; otherwise it only takes its turn). A request beyond that bound is refused.

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringgnn_features::{FeatureGatherer, RowSource};
use ringgnn_io::{BackendKind, CoalesceOptions, PageCache};
use ringgnn_sampler::{
    hetero_bound, Fanout, HeteroSample, HeteroSampler, TemporalStrategy, TypedGraph,
};
use ringgnn_store::hetero::Part;
use ringgnn_store::manifest::FeatureDtype;
use ringgnn_store::Dataset;

use crate::engine::FeatureRows;
use crate::queue::CancelToken;
use crate::queue::{Queue, QueueOptions, Room};
use crate::{Limits, RequestTimes, Result, ServeError};
use wave::{Answer, Key, Work, Worker};

mod wave;

/// Samplers of other configurations than the default one a worker keeps (each holds its disk
/// relations' read backends; a request with its own fanouts makes one on a miss).
const KEPT_SAMPLERS: usize = 8;

/// Answers the room of a large request holds besides the request itself (as [`crate::Engine`]
/// plans: the sample its caller still holds, and its encoding).
const ANSWERS: u64 = 2;

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
    /// Seeds (of any type, at the default fanouts) of the wave each worker serves
    /// ([`crate::EngineOptions::DEFAULT_WAVE_SEEDS`] by default); a larger request is answered alone.
    pub batch_size: NonZeroUsize,
    /// How long the caller leading a wave waits for others to join it.
    pub max_wait: Duration,
    pub max_wave: NonZeroUsize,
    pub queue: NonZeroUsize,
    pub limits: Limits,
    /// How requests at times draw among the edges not newer than their time.
    pub temporal_strategy: TemporalStrategy,
    /// Open the dataset's edge and node times (if it has them). `false`: a server that samples
    /// without times opens none of their files ([`TypedGraph::open_with_times`]) and refuses
    /// requests at times.
    pub times: bool,
}

/// A typed sampling request: around `seeds` of type `seed_type`, with one fanout list per
/// relation; at `times`, if given.
#[derive(Clone, Debug)]
pub struct HeteroSampleRequest {
    pub seed_type: usize,
    pub seeds: Vec<u64>,
    pub fanouts: Vec<Vec<Fanout>>,
    pub replace: bool,
    pub seed: u64,
    pub with_edge_ids: bool,
    pub times: Option<RequestTimes>,
}

/// Counters since the engine opened (what [`crate::EngineStats`] holds).
pub type HeteroStats = crate::EngineStats;

/// A node type's feature file.
struct Features {
    part: Dataset,
    dtype: FeatureDtype,
    dim: usize,
    memory: Option<Arc<Vec<u8>>>,
}

/// Serves typed sampling and feature requests from any number of threads; see the module docs.
pub struct HeteroEngine {
    graph: TypedGraph,
    features: Vec<Option<Features>>,
    opts: HeteroOptions,
    /// The bound of the largest request: `max_nodes` seeds of any type at the default fanouts.
    max_edges: u64,
    backend: String,
    feature_backend: String,
    queue: Queue<HeteroEngine>,
    /// Reads issued and bytes read by the workers' backends.
    reads: AtomicU64,
    bytes_read: AtomicU64,
}

impl HeteroEngine {
    /// Open the heterogeneous dataset in `dir` and make `opts.threads` workers.
    pub fn open(dir: &Path, opts: HeteroOptions) -> Result<Self> {
        let store = ServeError::from;
        // A homogeneous dataset opens as its one-type case (type `node`, relation `node:to:node`).
        let mut graph = TypedGraph::open_with_times(
            dir,
            opts.backend,
            opts.direct,
            &opts.memory_relations,
            opts.times,
        )
        .map_err(sampler_error)?;
        if opts.fanouts.len() != graph.relations.len() {
            return Err(ServeError::Input(format!(
                "{} fanout lists for {} relations: give one per relation",
                opts.fanouts.len(),
                graph.relations.len()
            )));
        }
        if opts.backend.is_some() {
            graph.share_page_cache(opts.neighbor_cache);
        }
        let mut features = Vec::with_capacity(graph.types.len());
        for t in &graph.types {
            let part = Dataset::open_part(dir, &Part::Node(t.clone())).map_err(store)?;
            let f = match part.manifest().features.clone() {
                None => None,
                Some(info) => {
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
        let types = graph.types.len();
        // The wave a worker serves, and the largest request: their bounds over every seed type.
        let most = |seeds: u64| {
            (0..types)
                .map(|t| bound(&graph, t, seeds, &opts.fanouts, false))
                .fold((0u64, 0u64, Vec::new()), |(e, n, w), (be, bn)| {
                    let nodes = n.max(bn.iter().sum());
                    (e.max(be), nodes, if be > e { bn } else { w })
                })
        };
        let batch = opts.batch_size.get() as u64;
        let max_nodes = opts.limits.max_nodes.max(1) as u64;
        let (wave_edges, wave_rows, _) = most(batch);
        let (max_edges, _, largest) = most(batch.max(max_nodes));
        let room = if max_edges > wave_edges {
            // The largest request's sample (a source and a destination local id and an edge id
            // per edge, a global id per node) with its feature rows, and its answers.
            let rows: u64 = largest
                .iter()
                .zip(&features)
                .map(|(&n, f)| n * (8 + f.as_ref().map_or(0, |f| 4 * f.dim as u64)))
                .sum();
            let bytes = (max_edges * 16 + rows).saturating_mul(1 + ANSWERS);
            lend_room(&graph, bytes)
        } else {
            Room::new(0, Vec::new())
        };
        let mut engine = HeteroEngine {
            features,
            max_edges: max_edges.max(1),
            backend: String::new(),
            feature_backend: String::new(),
            queue: Queue::new(
                QueueOptions {
                    max_wait: opts.max_wait,
                    max_wave: opts.max_wave,
                    queue: opts.queue,
                    wave_edges: wave_edges.max(1),
                    wave_rows: wave_rows.max(1),
                },
                Vec::new(),
                room,
            ),
            opts,
            graph,
            reads: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
        };
        let mut free = Vec::with_capacity(engine.opts.threads.get());
        for _ in 0..engine.opts.threads.get() {
            let key: Key = (engine.opts.fanouts.clone(), false);
            let (s, name) = engine.sampler(&key)?;
            engine.backend = name;
            let mut gatherers = Vec::with_capacity(types);
            for t in 0..types {
                let g = engine.gatherer(t)?;
                if let Some(g) = &g {
                    engine.feature_backend = g.source_name().to_string();
                }
                gatherers.push(g);
            }
            free.push(Worker {
                samplers: vec![(key, s)],
                gatherers,
            });
        }
        engine.queue.give(free);
        Ok(engine)
    }

    /// A sampler of `key` (fanouts, replace) over the shared relations, with its own disk
    /// backends, and the name of how it reads.
    fn sampler(&self, key: &Key) -> Result<(HeteroSampler, String)> {
        let (mut s, name, _) = self
            .graph
            .sampler(key.0.clone(), key.1, None)
            .map_err(sampler_error)?;
        s.set_temporal_strategy(self.opts.temporal_strategy);
        Ok((s, name))
    }

    fn gatherer(&self, t: usize) -> Result<Option<FeatureGatherer>> {
        let Some(f) = &self.features[t] else {
            return Ok(None);
        };
        let internal = |e: ringgnn_features::Error| ServeError::Internal(e.to_string());
        let file = ringgnn_features::FeatureFile::of(&f.part).map_err(internal)?;
        let g = match (&f.memory, self.opts.backend) {
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

    pub fn node_types(&self) -> &[String] {
        &self.graph.types
    }

    pub fn num_nodes(&self) -> &[u64] {
        &self.graph.counts
    }

    pub fn relations(&self) -> Vec<String> {
        self.graph
            .relations
            .iter()
            .map(|r| r.name.clone())
            .collect()
    }

    pub fn num_edges(&self) -> Vec<u64> {
        self.graph.relations.iter().map(|r| r.num_edges()).collect()
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

    /// Whether the dataset has edge times (of a relation) or node times (of a type) and the
    /// engine opened them: requests may give times.
    pub fn has_times(&self) -> bool {
        self.graph.relations.iter().any(|r| r.times.is_some())
            || self.graph.node_times.iter().any(Option::is_some)
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

    /// Bytes held for one request larger than a wave, taken in turn (0: every request within
    /// the limits fits a wave), and whether the hot neighbor pages lend them (as
    /// [`crate::Engine::large_room`]).
    pub fn large_room(&self) -> (u64, bool) {
        let room = self.queue.room();
        (room.bytes, !room.pages.is_empty())
    }

    /// Refuse a request of `n` ids before they are converted.
    pub fn check_count(&self, n: usize) -> Result<()> {
        self.opts.limits.check_count(n)
    }

    /// Refuse ids outside type `t`'s range, naming the first.
    pub fn check_ids(&self, t: usize, ids: &[i64]) -> Result<Vec<u64>> {
        self.check_count(ids.len())?;
        let n = self.graph.counts[t];
        if let Some(&bad) = ids.iter().find(|&&v| v < 0 || v as u64 >= n) {
            let name = &self.graph.types[t];
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
        let c = self.queue.counters();
        c.sample_requests.fetch_add(1, Ordering::Relaxed);
        let hops = req.fanouts.first().map_or(0, Vec::len);
        if hops == 0 || hops > self.opts.limits.max_hops {
            return Err(ServeError::Input(format!(
                "{hops} fanouts: give 1 to {} (one per hop)",
                self.opts.limits.max_hops
            )));
        }
        let relations = self.graph.relations.len();
        if req.fanouts.len() != relations || req.fanouts.iter().any(|f| f.len() != hops) {
            return Err(ServeError::Input(format!(
                "give {relations} fanout lists (one per relation), every one with the same \
                 number of hops"
            )));
        }
        let n = req.seeds.len();
        let groups = match &req.times {
            Some(t) => {
                t.check(n, self.has_times(), !self.opts.times)?;
                t.group_sizes(n)
            }
            None => vec![n as u64],
        };
        // At seed times, the sum of the disjoint subgraphs' bounds, each a sample of the graph.
        let cost = groups
            .iter()
            .map(|&g| bound(&self.graph, req.seed_type, g, &req.fanouts, req.replace).0)
            .fold(0u64, u64::saturating_add);
        if cost > self.max_edges {
            return Err(ServeError::Input(format!(
                "this request may sample up to {} edges (its upper bound: {} nodes of type \
                 '{}', fanouts {:?}); the server takes at most {} per request (the bound of \
                 --max-nodes {} seeds of any type at its default fanouts): ask for fewer nodes \
                 or smaller fanouts, or start the server with a larger --max-nodes or --fanouts",
                thousands(cost),
                req.seeds.len(),
                self.graph.types[req.seed_type],
                req.fanouts
                    .iter()
                    .map(|f| f.iter().map(|x| x.value()).collect::<Vec<_>>())
                    .collect::<Vec<_>>(),
                thousands(self.max_edges),
                self.opts.limits.max_nodes,
            )));
        }
        let work = Work::Sample(req, rows);
        let (answer, _room) = self.queue.call(self, work, cost.max(1), deadline, cancel)?;
        match answer {
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
        let c = self.queue.counters();
        c.feature_requests.fetch_add(1, Ordering::Relaxed);
        if self.features[t].is_none() {
            return Err(ServeError::Input(format!(
                "node type '{}' has no features",
                self.graph.types[t]
            )));
        }
        let cost = ids.len() as u64;
        match self
            .queue
            .call(self, Work::Features(t, ids), cost, deadline, cancel)?
            .0
        {
            Answer::Features(f) => Ok(f),
            Answer::Sample(..) => unreachable!("a feature request gets rows"),
        }
    }

    pub fn stats(&self) -> HeteroStats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (mut hits, mut misses, mut pages) = (0, 0, 0);
        for p in self.graph.relations.iter().filter_map(|r| r.pages.as_ref()) {
            let s = p.stats();
            (hits, misses, pages) = (hits + s.hits, misses + s.misses, pages + s.pages);
        }
        self.queue
            .stats((r(&self.reads), r(&self.bytes_read)), (hits, misses, pages))
    }

    /// Refuse new requests and wait until those queued are answered and every worker is back.
    /// Idempotent.
    pub fn close(&self) {
        self.queue.close();
    }
}

impl Drop for HeteroEngine {
    fn drop(&mut self) {
        self.close();
    }
}

/// The upper bound of the edges sampled around `seeds` nodes of type `t`, and of the nodes of
/// each type.
fn bound(
    g: &TypedGraph,
    t: usize,
    seeds: u64,
    fanouts: &[Vec<Fanout>],
    replace: bool,
) -> (u64, Vec<u64>) {
    let mut per = vec![0u64; g.types.len()];
    per[t] = seeds;
    let rels: Vec<(usize, usize, &[Fanout], u64, u64)> = g
        .relations
        .iter()
        .zip(fanouts)
        .map(|(r, f)| (r.src, r.dst, f.as_slice(), r.max_degree, r.num_edges()))
        .collect();
    let b = hetero_bound(&per, &g.counts, &rels, replace);
    (b.edges.iter().sum(), b.nodes)
}

/// The room of a request larger than a wave, `bytes`, lent by the relations' hot pages (each in
/// proportion to its size) when they hold it and keep a tenth; else no memory is lent (the
/// request only takes its turn).
fn lend_room(g: &TypedGraph, bytes: u64) -> Room {
    let caches: Vec<&Arc<PageCache>> = g
        .relations
        .iter()
        .filter_map(|r| r.pages.as_ref())
        .collect();
    let capacity: u64 = caches.iter().map(|c| c.stats().capacity).sum();
    let pages = PageCache::slots_for(bytes);
    // A cache lends all but a slot per shard at most: keep a tenth at least.
    if caches.is_empty() || capacity < pages + pages / 9 + 16 * caches.len() as u64 {
        return Room::new(bytes, Vec::new());
    }
    let lent = caches
        .into_iter()
        .map(|c| {
            let share = (pages as u128 * c.stats().capacity as u128).div_ceil(capacity as u128);
            (c.clone(), share as u64)
        })
        .collect();
    Room::new(bytes, lent)
}

fn sampler_error(e: ringgnn_sampler::Error) -> ServeError {
    ServeError::from(e)
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
