//! [`Engine`]: the engine over a homogeneous dataset: its memory plan, its workers (a set of
//! read backends each: a sampler and a feature gatherer with their rings) and how a wave of its
//! requests is served (see the crate docs; `engine/wave.rs`, and for requests at times
//! `engine/at_times.rs`). The queue, the waves' admission, deadlines and the
//! room for a large request are [`crate::queue`]'s.
//!
//! A request with times ([`RequestTimes`]) is sampled by the typed sampler over the graph's
//! one-type case ([`ringgnn_sampler::Graph::one_type`]: the same offset index, neighbor file and hot pages, with
//! the dataset's times), at its seeds' times: disjoint per distinct time, as PyG's temporal
//! sampling, each request of a wave its own batch (its own subgraphs: requests at different
//! times never share a node). The time cut is made on the lists' times before any neighbor
//! entry is read, so a hot page never gives a request an edge newer than its time. Requests
//! without times are sampled exactly as before, by the homogeneous sampler.

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ringgnn_features::FeatureGatherer;
use ringgnn_loader::{BatchLoader, MemoryPlan};
use ringgnn_sampler::{
    Fanout, GraphSampler, HeteroSampler, SampleOptions, SampledSubgraph, Seeds, TypedGraph,
};
use ringgnn_store::manifest::FeatureDtype;

use crate::queue::{Queue, QueueOptions, Room};
use crate::{CancelToken, EngineOptions, EngineStats, RequestTimes, Result, ServeError};
use at_times::one_type;

mod at_times;
mod wave;

/// Waves of answers the plan keeps per worker besides the wave it serves: the samples or rows
/// its callers still hold, and their encoded replies.
const ANSWERS_PER_WORKER: NonZeroUsize = NonZeroUsize::new(2).unwrap();

/// A sampling request: the sample of `seeds` with `fanouts`, `replace` and `seed`, exactly what
/// `NeighborSampler::sample` gives for them as batch 0 of epoch 0; with `times`, what the typed
/// sampler over the graph's one-type case gives at those seed times (batch 0 of epoch 0).
#[derive(Clone, Debug)]
pub struct SampleRequest {
    pub seeds: Seeds,
    pub fanouts: Vec<Fanout>,
    pub replace: bool,
    pub seed: u64,
    pub with_edge_ids: bool,
    pub times: Option<RequestTimes>,
}

/// Feature rows of a request, row-major `[rows, dim]`, f32.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureRows {
    pub rows: usize,
    pub dim: usize,
    pub data: Vec<f32>,
}

impl FeatureRows {
    /// The rows in the dtype the dataset stores them in, little-endian (exact: the f32 values
    /// were widened from it).
    pub fn to_stored(&self, dtype: FeatureDtype) -> Vec<u8> {
        match dtype {
            FeatureDtype::F32 => self.data.iter().flat_map(|x| x.to_le_bytes()).collect(),
            FeatureDtype::F16 => self
                .data
                .iter()
                .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
                .collect(),
            FeatureDtype::Bf16 => self
                .data
                .iter()
                .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
                .collect(),
        }
    }
}

pub(crate) enum Work {
    /// A sample, and with `true` the feature rows of its nodes.
    Sample(SampleRequest, bool),
    Features(Vec<u64>),
}

/// A sample, and for a request with times the seed time of each node (parallel to `node`).
pub type Timed = (SampledSubgraph, Option<Vec<i64>>);

pub(crate) enum Answer {
    Sample(Timed, Option<FeatureRows>),
    Features(FeatureRows),
}

/// One wave's read backends: whoever holds it serves a wave.
pub(crate) struct Worker {
    sampler: GraphSampler,
    gatherer: Option<FeatureGatherer>,
    /// Samplers at seed times by (fanouts, replace), made at a worker's first such request.
    typed: Vec<((Vec<Fanout>, bool), HeteroSampler)>,
}

struct Shared {
    loader: BatchLoader,
    opts: EngineOptions,
    /// The queue; what a wave may hold is by the upper bounds of its samples: the edges of one
    /// batch of the plan, and its nodes (feature rows).
    queue: Queue<Shared>,
    /// What a request may sample: the upper bound of `max_nodes` seeds at the default fanouts
    /// (a wave's when larger); one beyond a wave is answered in the queue's room.
    max_edges: u64,
    /// What the server's plan chose and why ([`Engine::plan`]).
    why: String,
    /// The workers' gatherers' stop flag (a worker's backends are made again after a large
    /// wave).
    stop: Arc<AtomicBool>,
    /// The graph's one-type case with the dataset's times, for requests at times; `None` on a
    /// dataset without edge or node times.
    typed: Option<TypedGraph>,
    /// Reads and bytes of the samplers at seed times (the loader counts the others).
    typed_io: [AtomicU64; 2],
}

/// Serves sampling and feature requests from any number of threads; see the crate docs.
pub struct Engine {
    shared: Arc<Shared>,
}

impl Engine {
    /// Open the dataset in `dir` with `opts.loader` and make the workers, each with its own
    /// read backends.
    ///
    /// The one owner of the server's memory sizing. Each worker is sized for an ordinary wave:
    /// `opts.loader.batch_size` seeds at the default fanouts, with its answers (the loader's
    /// plan; the queue's requests are added to the caller's reserve). A request larger than
    /// that, up to `limits.max_nodes` ids at the default fanouts, is sampled alone, one at a
    /// time, in one room held for it ([`Room`]): what a batch of `max_nodes` seeds holds (as
    /// [`BatchLoader::batch_bytes`] measures it) and [`ANSWERS_PER_WORKER`] answers of it. The
    /// hot neighbor pages lend that room while such a request is answered when they are large
    /// enough, so the common case keeps them whole; otherwise the room is taken off the budget
    /// once (not per worker). When even that does not fit `opts.loader.memory`, the engine
    /// does not open: the error says what it needs and which limit to lower.
    pub fn open(dir: &Path, mut opts: EngineOptions) -> Result<Self> {
        let threads = opts.loader.threads;
        // The queue's requests: at most `queue` of `max_nodes` ids each, held as checked ids
        // here and as the caller's array (8 B each).
        let queued = (opts.queue.get() as u64)
            .saturating_mul(opts.limits.max_nodes as u64)
            .saturating_mul(16);
        opts.loader.reserve = opts.loader.reserve.saturating_add(queued);
        // What lives besides the workers' waves: the answers their callers still hold, two per
        // worker (a wave's samples or rows, and their encoded replies, never larger: a varint
        // of a local index or node id below 2^35 takes at most 5 of its 8 bytes).
        opts.loader.prefetch = Some(threads.saturating_mul(ANSWERS_PER_WORKER));
        opts.loader.hold = NonZeroUsize::MIN;
        opts.loader.hyperbatch = ringgnn_loader::Hyperbatch::PER_BATCH;
        let max_nodes = opts.limits.max_nodes.max(1) as u64;
        let batch = opts.loader.batch_size.get() as u64;
        let fanouts: Vec<i64> = opts
            .loader
            .sample
            .fanouts
            .iter()
            .map(|f| f.value())
            .collect();
        let too_small = |m: String, room: u64| {
            ServeError::Input(format!(
                "{m}. The server holds a wave of {batch} seeds (--batch-size) at its default \
                 fanouts {fanouts:?} per worker ({threads} workers, --threads) and their answers{}; \
                 raise --memory, or lower --max-nodes, --batch-size, --threads or --fanouts",
                if room > 0 {
                    format!(
                        ", and one request of its largest size, {max_nodes} node ids \
                         (--max-nodes), in {}",
                        ringgnn_loader::budget::bytes(room)
                    )
                } else {
                    String::new()
                }
            ))
        };
        let open = |opts: &EngineOptions, room: u64| {
            BatchLoader::open(dir, opts.loader.clone(), None).map_err(|e| match e {
                // The budget cannot hold the plan (the loader's messages start with the budget).
                ringgnn_loader::Error::Input(m) if m.starts_with("memory=") => too_small(m, room),
                e => e.into(),
            })
        };
        let mut loader = open(&opts, 0)?;
        let ix = loader.graph().index();
        let plan = loader.sample_options().clone();
        let wave = ix.bound(batch, &plan);
        let largest = ix.bound(batch.max(max_nodes), &plan);
        let large = largest.edges > wave.edges || largest.nodes > wave.nodes;
        let mut room = Room::new(0, Vec::new());
        if large {
            let (state, sample) =
                loader.batch_bytes(max_nodes, opts.loader.backend, opts.loader.direct)?;
            // With features, the rows of its nodes (their bound, and 8 B of the sample each at
            // least) and the gather's scratch.
            let dim = loader.dim() as u64;
            let rows = if dim > 0 {
                (sample / 8)
                    .min(largest.nodes)
                    .saturating_mul(dim * 4 + ringgnn_loader::budget::GATHER_SCRATCH_PER_NODE)
            } else {
                0
            };
            let answers = (ANSWERS_PER_WORKER.get() as u64).saturating_mul(sample + rows);
            let bytes = state.saturating_add(rows).saturating_add(answers);
            let lender = loader.graph().page_cache().and_then(|c| {
                let pages = ringgnn_io::PageCache::slots_for(bytes);
                // It lends all but a slot per shard at most; keep a tenth at least.
                (c.stats().capacity >= pages + pages / 9 + 16).then(|| (c.clone(), pages))
            });
            match lender {
                Some(l) => room = Room::new(bytes, vec![l]),
                None => {
                    drop(loader);
                    let mut o = opts.clone();
                    o.loader.reserve = o.loader.reserve.saturating_add(bytes);
                    loader = open(&o, bytes)?;
                    room = Room::new(bytes, Vec::new());
                }
            }
        }
        let why = format!(
            "the server: each of its workers holds a wave of up to {batch} seeds (--batch-size) \
             at fanouts {fanouts:?}{}",
            match (room.pages.is_empty(), large) {
                (_, false) =>
                    format!(", which holds any request of up to {max_nodes} ids (--max-nodes)"),
                (false, true) => format!(
                    "; a larger request, up to {max_nodes} ids (--max-nodes), is sampled alone, \
                     one at a time, in {} that the hot neighbor pages lend it until it is \
                     answered",
                    ringgnn_loader::budget::bytes(room.bytes)
                ),
                (true, true) => format!(
                    "; a larger request, up to {max_nodes} ids (--max-nodes), is sampled alone, \
                     one at a time, in {} of the caller's reserve (the hot neighbor pages are \
                     too few to lend it)",
                    ringgnn_loader::budget::bytes(room.bytes)
                ),
            }
        );
        let b = loader.graph().index().bound(batch, loader.sample_options());
        let most = loader
            .graph()
            .index()
            .bound(batch.max(max_nodes), loader.sample_options());
        let stop = Arc::new(AtomicBool::new(false));
        // The plan may hold fewer workers' states than threads asked (it says so in its note).
        let workers = (loader.plan().workers as usize).clamp(1, threads.get());
        let mut free = Vec::with_capacity(workers);
        for _ in 0..workers {
            free.push(Box::new(Worker {
                sampler: loader.thread_sampler()?,
                gatherer: loader.thread_gatherer(&stop)?,
                typed: Vec::new(),
            }));
        }
        let queue = QueueOptions {
            max_wait: opts.max_wait,
            max_wave: opts.max_wave,
            queue: opts.queue,
            wave_edges: b.edges.max(1),
            wave_rows: b.nodes.max(1),
        };
        let typed = if opts.times {
            one_type(dir, &loader)?
        } else {
            None
        };
        let shared = Arc::new(Shared {
            typed,
            typed_io: Default::default(),
            max_edges: most.edges.max(1),
            queue: Queue::new(queue, free, room),
            why,
            stop,
            loader,
            opts,
        });
        Ok(Engine { shared })
    }

    pub fn num_nodes(&self) -> u64 {
        self.shared.loader.num_nodes()
    }

    pub fn num_edges(&self) -> u64 {
        self.shared.loader.graph().index().num_edges()
    }

    /// Values per feature row (0 without features).
    pub fn dim(&self) -> usize {
        self.shared.loader.dim()
    }

    /// The plan's sampling options: the fanouts and seed requests default to.
    pub fn sample_options(&self) -> &SampleOptions {
        self.shared.loader.sample_options()
    }

    pub fn options(&self) -> &EngineOptions {
        &self.shared.opts
    }

    pub fn loader(&self) -> &BatchLoader {
        &self.shared.loader
    }

    /// The loader's plan, with what the server chose and why (its cost per epoch, the loader's
    /// reason, means nothing here).
    pub fn plan(&self) -> MemoryPlan {
        let mut p = self.shared.loader.plan();
        p.why = self.shared.why.clone();
        p
    }

    /// Bytes held for one request larger than a wave, taken in turn (0: every request within
    /// the limits fits a wave), and whether the hot neighbor pages lend them.
    pub fn large_room(&self) -> (u64, bool) {
        let room = self.shared.queue.room();
        (room.bytes, !room.pages.is_empty())
    }

    /// The sample of `req`, by `deadline`, unless `cancel` is set first.
    pub fn sample(
        &self,
        req: SampleRequest,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> Result<SampledSubgraph> {
        self.sample_then(req, deadline, cancel, |(s, _)| s)
    }

    /// [`Self::sample`] with the seed time of each node (for a request with times), then `f`
    /// of them (their encoding, say) before a request larger than a wave gives back the room
    /// it was answered in: the memory its answer and what `f` makes of it take is still held
    /// for it.
    pub fn sample_then<R>(
        &self,
        req: SampleRequest,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
        f: impl FnOnce(Timed) -> R,
    ) -> Result<R> {
        let sh = &self.shared;
        let c = sh.queue.counters();
        c.sample_requests.fetch_add(1, Ordering::Relaxed);
        let cost = sh.check_sample(&req)?;
        // The room (for a request larger than a wave) is held until `f` is done.
        let (answer, _room) =
            sh.queue
                .call(sh, Work::Sample(req, false), cost, deadline, cancel)?;
        match answer {
            Answer::Sample(s, _) => Ok(f(s)),
            Answer::Features(_) => unreachable!("a sample request gets a sample"),
        }
    }

    /// The sample of `req` (with its nodes' seed times, for a request with times) and the
    /// feature rows of its nodes (`node` order), gathered by the same worker in the same wave:
    /// what a model needs to run on the seeds.
    pub fn sample_with_rows(
        &self,
        req: SampleRequest,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> Result<(Timed, FeatureRows)> {
        let sh = &self.shared;
        let c = sh.queue.counters();
        c.sample_requests.fetch_add(1, Ordering::Relaxed);
        if sh.loader.dim() == 0 {
            return Err(ServeError::Input("the dataset has no node features".into()));
        }
        let cost = sh.check_sample(&req)?;
        match sh
            .queue
            .call(sh, Work::Sample(req, true), cost, deadline, cancel)?
            .0
        {
            Answer::Sample(s, Some(rows)) => Ok((s, rows)),
            _ => unreachable!("a sample-with-rows request gets both"),
        }
    }

    /// The feature rows of `ids` (checked node ids), by `deadline`, unless `cancel` is set.
    pub fn features(
        &self,
        ids: &Seeds,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> Result<FeatureRows> {
        let sh = &self.shared;
        let c = sh.queue.counters();
        c.feature_requests.fetch_add(1, Ordering::Relaxed);
        if sh.loader.dim() == 0 {
            return Err(ServeError::Input("the dataset has no node features".into()));
        }
        sh.check_ids(ids)?;
        let cost = ids.len() as u64;
        let work = Work::Features(ids.ids().to_vec());
        match sh.queue.call(sh, work, cost, deadline, cancel)?.0 {
            Answer::Features(f) => Ok(f),
            Answer::Sample(..) => unreachable!("a feature request gets rows"),
        }
    }

    /// Refuse a request of `n` node ids before its ids are converted: none, or more than the
    /// limit (the check every request gets again when it is queued).
    pub fn check_count(&self, n: usize) -> Result<()> {
        self.shared.check_count(n)
    }

    /// Whether the dataset has edge or node times and the engine opened them (requests may
    /// give times).
    pub fn has_times(&self) -> bool {
        self.shared.typed.is_some()
    }

    pub fn stats(&self) -> EngineStats {
        let io = self.shared.loader.io_stats();
        let typed = |i: usize| self.shared.typed_io[i].load(Ordering::Relaxed);
        let io = ringgnn_io::IoStats {
            reads: io.reads + typed(0),
            bytes: io.bytes + typed(1),
            ..io
        };
        let p = self.shared.loader.graph().page_cache_stats();
        self.shared.queue.stats(
            (io.reads, io.bytes),
            p.map_or((0, 0, 0), |p| (p.hits, p.misses, p.pages)),
        )
    }

    /// Refuse new requests ([`ServeError::ShuttingDown`]) and wait until those queued are
    /// answered (by the callers leading their waves) and every worker is back. Idempotent.
    pub fn close(&self) {
        self.shared.queue.close();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.close();
    }
}

impl Shared {
    fn check_count(&self, n: usize) -> Result<()> {
        self.opts.limits.check_count(n)
    }

    fn check_ids(&self, ids: &Seeds) -> Result<()> {
        self.check_count(ids.len())?;
        if ids.num_nodes() != self.loader.num_nodes() {
            return Err(ServeError::Input(format!(
                "the node ids were checked against a graph of {} nodes, but this one has {}",
                ids.num_nodes(),
                self.loader.num_nodes()
            )));
        }
        Ok(())
    }

    /// Check `req` against the limits; its cost (the upper bound of its sampled edges: at
    /// seed times, the sum of its disjoint subgraphs', each a sample of the graph).
    fn check_sample(&self, req: &SampleRequest) -> Result<u64> {
        self.check_ids(&req.seeds)?;
        let n = req.seeds.len();
        let groups = match &req.times {
            Some(t) => {
                t.check(n, self.typed.is_some(), !self.opts.times)?;
                t.group_sizes(n)
            }
            None => vec![n as u64],
        };
        let hops = req.fanouts.len();
        if hops == 0 || hops > self.opts.limits.max_hops {
            return Err(ServeError::Input(format!(
                "{hops} fanouts: give 1 to {} (one per hop)",
                self.opts.limits.max_hops
            )));
        }
        let ix = self.loader.graph().index();
        let opts = SampleOptions {
            fanouts: req.fanouts.clone(),
            replace: req.replace,
            ..Default::default()
        };
        let edges = groups
            .iter()
            .map(|&g| ix.bound(g, &opts).edges)
            .fold(0u64, u64::saturating_add);
        if edges > self.max_edges {
            return Err(ServeError::Input(format!(
                "this request may sample up to {} edges (its upper bound: {} nodes{}, fanouts \
                 {:?}); the server takes at most {} per request (what its memory plan holds for \
                 its largest request: {} seeds, --max-nodes or --batch-size if larger, at its \
                 default fanouts {:?}): ask for fewer nodes or smaller fanouts, or start the \
                 server with a larger --max-nodes or --fanouts",
                edges,
                req.seeds.len(),
                match groups.len() {
                    1 => String::new(),
                    g => format!(" at {g} distinct times, a subgraph each"),
                },
                req.fanouts.iter().map(|f| f.value()).collect::<Vec<_>>(),
                self.max_edges,
                (self.opts.limits.max_nodes as u64).max(self.loader.plan_batch_size()),
                self.loader
                    .sample_options()
                    .fanouts
                    .iter()
                    .map(|f| f.value())
                    .collect::<Vec<_>>(),
            )));
        }
        Ok(edges.max(1))
    }
}
