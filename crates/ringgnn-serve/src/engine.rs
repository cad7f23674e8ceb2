//! [`Engine`]: the queue, the workers and the waves (see the crate docs).
//!
//! There are no engine threads. A worker is a set of read backends (a sampler and a feature
//! gatherer with their rings); the engine holds `threads` of them. A caller queues its request
//! and, if a worker is free, leads a wave with it on its own thread: it waits up to
//! `max_wait` for company, serves what it took from the queue, and hands the worker to the
//! first caller still waiting (or puts it back). An idle server thus answers a request on the
//! thread that received it, with no hand-over to another thread and back; a busy one batches
//! whatever queued while its workers were out.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ringgnn_features::FeatureGatherer;
use ringgnn_loader::{BatchLoader, MemoryPlan};
use ringgnn_sampler::{Fanout, GraphSampler, ManyRequest, SampleOptions, SampledSubgraph, Seeds};
use ringgnn_store::manifest::FeatureDtype;

use crate::latency::{Histogram, LatencyCounts};
use crate::{EngineOptions, Result, ServeError};

/// How often a caller waiting for its answer looks at its cancel token.
const POLL: Duration = Duration::from_millis(10);

/// Waves of answers the plan keeps per worker besides the wave it serves: the samples or rows
/// its callers still hold, and their encoded replies.
const ANSWERS_PER_WORKER: NonZeroUsize = NonZeroUsize::new(2).unwrap();

/// A flag a caller sets to give a request up (a gRPC client that went away): a request not yet
/// in a wave is dropped, and its caller returns [`ServeError::Cancelled`] within 10 ms.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A sampling request: the sample of `seeds` with `fanouts`, `replace` and `seed`, exactly what
/// `NeighborSampler::sample` gives for them as batch 0 of epoch 0.
#[derive(Clone, Debug)]
pub struct SampleRequest {
    pub seeds: Seeds,
    pub fanouts: Vec<Fanout>,
    pub replace: bool,
    pub seed: u64,
    pub with_edge_ids: bool,
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

/// Counters since the engine opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub sample_requests: u64,
    pub feature_requests: u64,
    /// Waves served, and the requests in them (their ratio is the batching achieved).
    pub waves: u64,
    pub wave_requests: u64,
    pub busy: u64,
    pub deadline_exceeded: u64,
    pub cancelled: u64,
    pub failed: u64,
    /// Requests waiting for a worker now.
    pub queued: u64,
    /// Latency of every answered request, from its arrival at the engine to its answer
    /// (queueing, the wave, the reads).
    pub latency: LatencyCounts,
    /// Reads issued and bytes read by the workers' backends.
    pub reads: u64,
    pub bytes_read: u64,
    /// The hot neighbor pages: hits, misses and pages held (0 without a page cache).
    pub page_hits: u64,
    pub page_misses: u64,
    pub pages_cached: u64,
}

enum Work {
    /// A sample, and with `true` the feature rows of its nodes.
    Sample(SampleRequest, bool),
    Features(Vec<u64>),
}

enum Answer {
    Sample(SampledSubgraph, Option<FeatureRows>),
    Features(FeatureRows),
}

/// Where a leader puts a request's answer, or hands its caller a worker, and the caller waits.
#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
    ready: Condvar,
}

#[derive(Default)]
struct SlotState {
    answer: Option<Result<Answer>>,
    /// A worker handed to this caller, to lead the next wave with.
    lead: Option<Box<Worker>>,
    /// The caller gave up: hand it nothing.
    gone: bool,
}

impl Slot {
    fn put(&self, a: Result<Answer>) {
        lock(&self.state).answer = Some(a);
        self.ready.notify_one();
    }

    /// Answer `DeadlineExceeded` unless the caller gave up first; whether it did not (the
    /// one that answers counts it, so each request is counted once).
    fn expire(&self) -> bool {
        let mut st = lock(&self.state);
        if st.gone || st.answer.is_some() {
            return false;
        }
        st.answer = Some(Err(ServeError::DeadlineExceeded));
        drop(st);
        self.ready.notify_one();
        true
    }
}

/// What a waiting caller got.
enum Waited {
    Answer(Result<Answer>),
    Lead(Box<Worker>),
}

/// One wave's read backends: whoever holds it serves a wave.
struct Worker {
    sampler: GraphSampler,
    gatherer: Option<FeatureGatherer>,
}

struct Job {
    work: Work,
    /// Upper bound of what it costs a wave: sampled edges, or feature rows.
    cost: u64,
    arrived: Instant,
    deadline: Option<Instant>,
    cancel: CancelToken,
    slot: Arc<Slot>,
}

impl Drop for Job {
    /// No request is left unanswered: one dropped without an answer (its wave's worker
    /// panicked) gets an internal error, unless its caller gave it up.
    fn drop(&mut self) {
        let mut st = lock(&self.slot.state);
        if st.answer.is_none() && !st.gone && !self.cancel.is_cancelled() {
            st.answer = Some(Err(ServeError::Internal(
                "the request's wave failed (a bug: the server's log has the panic); other \
                 requests are still served"
                    .into(),
            )));
            drop(st);
            self.slot.ready.notify_one();
        }
    }
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// Workers no caller holds: a caller that finds one leads a wave with it. Boxed: they move
    /// between this pool and callers' slots as a pointer.
    #[allow(clippy::vec_box)]
    free: Vec<Box<Worker>>,
    /// Workers dropped because their wave panicked (their state is not trusted again).
    lost: usize,
    closed: bool,
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
    latency: Histogram,
}

struct Shared {
    loader: BatchLoader,
    opts: EngineOptions,
    queue: Mutex<Queue>,
    changed: Condvar,
    /// What a wave may hold, by the upper bounds of its samples: the edges of one batch of the
    /// plan, and its nodes (feature rows).
    wave_edges: u64,
    wave_rows: u64,
    /// What a request may sample: the upper bound of `max_nodes` seeds at the default fanouts
    /// (a wave's when larger); one beyond a wave is answered in [`Shared::room`].
    max_edges: u64,
    room: Arc<Room>,
    /// What the server's plan chose and why ([`Engine::plan`]).
    why: String,
    /// The workers' gatherers' stop flag (a worker's backends are made again after a large
    /// wave).
    stop: Arc<AtomicBool>,
    counters: Counters,
}

/// The memory one request larger than a wave is answered in, taken in turn: `bytes`, lent by
/// the hot neighbor pages (`pages`: the cache and its slots to lend) or held in the caller's
/// reserve.
struct Room {
    bytes: u64,
    pages: Option<(Arc<ringgnn_io::PageCache>, u64)>,
    busy: Mutex<bool>,
    freed: Condvar,
}

impl Room {
    fn new(bytes: u64, pages: Option<(Arc<ringgnn_io::PageCache>, u64)>) -> Self {
        Room {
            bytes,
            pages,
            busy: Mutex::new(false),
            freed: Condvar::new(),
        }
    }
}

/// The room held by one large request; dropped once its caller is done with the answer:
/// the memory it freed goes back to the system first, then the slots to the page cache.
struct Lease(Arc<Room>);

impl Drop for Lease {
    fn drop(&mut self) {
        ringgnn_io::release_free_memory();
        if let Some((c, _)) = &self.0.pages {
            c.give_back();
        }
        *lock(&self.0.busy) = false;
        self.0.freed.notify_one();
    }
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
        let mut room = Room::new(0, None);
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
                Some(l) => room = Room::new(bytes, Some(l)),
                None => {
                    drop(loader);
                    let mut o = opts.clone();
                    o.loader.reserve = o.loader.reserve.saturating_add(bytes);
                    loader = open(&o, bytes)?;
                    room = Room::new(bytes, None);
                }
            }
        }
        let why = format!(
            "the server: each of its workers holds a wave of up to {batch} seeds (--batch-size) \
             at fanouts {fanouts:?}{}",
            match (&room.pages, large) {
                (_, false) =>
                    format!(", which holds any request of up to {max_nodes} ids (--max-nodes)"),
                (Some(_), true) => format!(
                    "; a larger request, up to {max_nodes} ids (--max-nodes), is sampled alone, \
                     one at a time, in {} that the hot neighbor pages lend it until it is \
                     answered",
                    ringgnn_loader::budget::bytes(room.bytes)
                ),
                (None, true) => format!(
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
            }));
        }
        let shared = Arc::new(Shared {
            wave_edges: b.edges.max(1),
            wave_rows: b.nodes.max(1),
            max_edges: most.edges.max(1),
            room: Arc::new(room),
            why,
            stop,
            loader,
            opts,
            queue: Mutex::new(Queue {
                free,
                ..Default::default()
            }),
            changed: Condvar::new(),
            counters: Counters::default(),
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
        (self.shared.room.bytes, self.shared.room.pages.is_some())
    }

    /// The sample of `req`, by `deadline`, unless `cancel` is set first.
    pub fn sample(
        &self,
        req: SampleRequest,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> Result<SampledSubgraph> {
        self.sample_then(req, deadline, cancel, |s| s)
    }

    /// [`Self::sample`], then `f` of the sample (its encoding, say) before a request larger
    /// than a wave gives back the room it was answered in: the memory its answer and what `f`
    /// makes of it take is still held for it.
    pub fn sample_then<R>(
        &self,
        req: SampleRequest,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
        f: impl FnOnce(SampledSubgraph) -> R,
    ) -> Result<R> {
        let sh = &self.shared;
        sh.counters.sample_requests.fetch_add(1, Ordering::Relaxed);
        let cost = sh.check_sample(&req)?;
        let _room = sh.room_for(cost > sh.wave_edges, deadline, cancel.as_ref())?;
        match sh.submit(Work::Sample(req, false), cost, deadline, cancel)? {
            Answer::Sample(s, _) => Ok(f(s)),
            Answer::Features(_) => unreachable!("a sample request gets a sample"),
        }
    }

    /// The sample of `req` and the feature rows of its nodes (`node` order), gathered by the
    /// same worker in the same wave: what a model needs to run on the seeds.
    pub fn sample_with_rows(
        &self,
        req: SampleRequest,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> Result<(SampledSubgraph, FeatureRows)> {
        let sh = &self.shared;
        sh.counters.sample_requests.fetch_add(1, Ordering::Relaxed);
        if sh.loader.dim() == 0 {
            return Err(ServeError::Input("the dataset has no node features".into()));
        }
        let cost = sh.check_sample(&req)?;
        let _room = sh.room_for(cost > sh.wave_edges, deadline, cancel.as_ref())?;
        match sh.submit(Work::Sample(req, true), cost, deadline, cancel)? {
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
        sh.counters.feature_requests.fetch_add(1, Ordering::Relaxed);
        if sh.loader.dim() == 0 {
            return Err(ServeError::Input("the dataset has no node features".into()));
        }
        sh.check_ids(ids)?;
        let cost = ids.len() as u64;
        let _room = sh.room_for(cost > sh.wave_rows, deadline, cancel.as_ref())?;
        let work = Work::Features(ids.ids().to_vec());
        match sh.submit(work, cost, deadline, cancel)? {
            Answer::Features(f) => Ok(f),
            Answer::Sample(..) => unreachable!("a feature request gets rows"),
        }
    }

    /// Refuse a request of `n` node ids before its ids are converted: none, or more than the
    /// limit (the check every request gets again when it is queued).
    pub fn check_count(&self, n: usize) -> Result<()> {
        self.shared.check_count(n)
    }

    pub fn stats(&self) -> EngineStats {
        let c = &self.shared.counters;
        let io = self.shared.loader.io_stats();
        let pages = self.shared.loader.graph().page_cache_stats();
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EngineStats {
            sample_requests: r(&c.sample_requests),
            feature_requests: r(&c.feature_requests),
            waves: r(&c.waves),
            wave_requests: r(&c.wave_requests),
            busy: r(&c.busy),
            deadline_exceeded: r(&c.deadline_exceeded),
            cancelled: r(&c.cancelled),
            failed: r(&c.failed),
            queued: lock(&self.shared.queue).jobs.len() as u64,
            latency: c.latency.snapshot(),
            reads: io.reads,
            bytes_read: io.bytes,
            page_hits: pages.map_or(0, |p| p.hits),
            page_misses: pages.map_or(0, |p| p.misses),
            pages_cached: pages.map_or(0, |p| p.pages),
        }
    }

    /// Refuse new requests ([`ServeError::ShuttingDown`]) and wait until those queued are
    /// answered (by the callers leading their waves) and every worker is back. Idempotent.
    pub fn close(&self) {
        let sh = &self.shared;
        let mut q = lock(&sh.queue);
        q.closed = true;
        sh.changed.notify_all();
        while !(q.jobs.is_empty() && q.free.len() + q.lost == sh.opts.loader.threads.get()) {
            q = sh
                .changed
                .wait_timeout(q, POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.close();
    }
}

impl Shared {
    /// For a request larger than a wave (`large`), the room, once no other such request holds
    /// it (by `deadline`, unless `cancel` is set first); nothing otherwise.
    fn room_for(
        &self,
        large: bool,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<Lease>> {
        if !large {
            return Ok(None);
        }
        let room = &self.room;
        let mut busy = lock(&room.busy);
        while *busy {
            let now = Instant::now();
            if cancel.is_some_and(|c| c.is_cancelled()) {
                self.counters.cancelled.fetch_add(1, Ordering::Relaxed);
                return Err(ServeError::Cancelled);
            }
            if deadline.is_some_and(|d| now >= d) {
                self.counters
                    .deadline_exceeded
                    .fetch_add(1, Ordering::Relaxed);
                return Err(ServeError::DeadlineExceeded);
            }
            let step = deadline.map_or(POLL, |d| (d - now).min(POLL));
            busy = room
                .freed
                .wait_timeout(busy, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *busy = true;
        drop(busy);
        if let Some((c, pages)) = &room.pages {
            c.lend(*pages);
        }
        Ok(Some(Lease(room.clone())))
    }

    fn check_count(&self, n: usize) -> Result<()> {
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

    /// Check `req` against the limits; its cost (the upper bound of its sampled edges).
    fn check_sample(&self, req: &SampleRequest) -> Result<u64> {
        self.check_ids(&req.seeds)?;
        let hops = req.fanouts.len();
        if hops == 0 || hops > self.opts.limits.max_hops {
            return Err(ServeError::Input(format!(
                "{hops} fanouts: give 1 to {} (one per hop)",
                self.opts.limits.max_hops
            )));
        }
        let opts = SampleOptions {
            fanouts: req.fanouts.clone(),
            replace: req.replace,
            ..Default::default()
        };
        let b = self
            .loader
            .graph()
            .index()
            .bound(req.seeds.len() as u64, &opts);
        if b.edges > self.max_edges {
            return Err(ServeError::Input(format!(
                "this request may sample up to {} edges (its upper bound: {} nodes, fanouts {:?}); \
                 the server takes at most {} per request (what its memory plan holds for its \
                 largest request: {} seeds, --max-nodes or --batch-size if larger, at its \
                 default fanouts {:?}): ask for fewer nodes or smaller fanouts, or start the \
                 server with a larger --max-nodes or --fanouts",
                b.edges,
                req.seeds.len(),
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
        Ok(b.edges.max(1))
    }

    /// Queue `work`, then either serve a wave with a free worker (on the caller's own thread:
    /// no hand-over while the server is idle) or wait for a leader to answer it or to hand this
    /// caller a worker; give up at `deadline` or once `cancel` is set.
    fn submit(
        &self,
        work: Work,
        cost: u64,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> Result<Answer> {
        let now = Instant::now();
        if deadline.is_some_and(|d| d <= now) {
            self.counters
                .deadline_exceeded
                .fetch_add(1, Ordering::Relaxed);
            return Err(ServeError::DeadlineExceeded);
        }
        let cancel = cancel.unwrap_or_default();
        let slot = Arc::new(Slot::default());
        let mut worker = {
            let mut q = lock(&self.queue);
            if q.closed {
                return Err(ServeError::ShuttingDown);
            }
            if q.lost == self.opts.loader.threads.get() {
                return Err(ServeError::Internal(
                    "every worker of this server failed (a bug: the server's log has the \
                     panics); restart it"
                        .into(),
                ));
            }
            if q.jobs.len() >= self.opts.queue.get() {
                self.counters.busy.fetch_add(1, Ordering::Relaxed);
                return Err(ServeError::Busy(q.jobs.len()));
            }
            q.jobs.push_back(Job {
                work,
                cost,
                arrived: now,
                deadline,
                cancel: cancel.clone(),
                slot: slot.clone(),
            });
            q.free.pop()
        };
        self.changed.notify_all();
        loop {
            if let Some(w) = worker.take() {
                self.lead(w, deadline, &cancel);
            }
            match self.wait(&slot, deadline, &cancel) {
                Waited::Answer(a) => {
                    if a.is_ok() {
                        self.counters.latency.record(now.elapsed());
                    }
                    return a;
                }
                Waited::Lead(w) => worker = Some(w),
            }
        }
    }

    /// Wait for the answer in `slot`, or a worker handed to this caller. On the deadline or a
    /// cancel, mark the job given up, take it out of the queue if it is still there (its place
    /// is free at once), and return the error.
    fn wait(&self, slot: &Arc<Slot>, deadline: Option<Instant>, cancel: &CancelToken) -> Waited {
        let mut st = lock(&slot.state);
        let gave_up = loop {
            if let Some(w) = st.lead.take() {
                // Handed a worker: lead a wave first (even when about to give up), so that the
                // queue never waits while a worker sits idle.
                return Waited::Lead(w);
            }
            if let Some(r) = st.answer.take() {
                return Waited::Answer(r);
            }
            let now = Instant::now();
            if cancel.is_cancelled() {
                self.counters.cancelled.fetch_add(1, Ordering::Relaxed);
                break ServeError::Cancelled;
            }
            if let Some(d) = deadline {
                if now >= d {
                    cancel.cancel();
                    self.counters
                        .deadline_exceeded
                        .fetch_add(1, Ordering::Relaxed);
                    break ServeError::DeadlineExceeded;
                }
            }
            let step = deadline.map_or(POLL, |d| (d - now).min(POLL));
            st = slot
                .ready
                .wait_timeout(st, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        st.gone = true;
        drop(st);
        let mut q = lock(&self.queue);
        q.jobs.retain(|j| !Arc::ptr_eq(&j.slot, slot));
        drop(q);
        self.changed.notify_all();
        Waited::Answer(Err(gave_up))
    }

    /// Serve one wave with `w`: wait up to `max_wait` from the first queued job's arrival for
    /// others (while the wave is not full, and no longer than the leading caller's own deadline
    /// or cancel), take jobs in arrival order while they fit, answer them, then hand `w` to the
    /// first caller still waiting for one (or put it back).
    fn lead(&self, mut w: Box<Worker>, deadline: Option<Instant>, cancel: &CancelToken) {
        let wave = {
            let mut q = lock(&self.queue);
            while let Some(front) = q.jobs.front() {
                let until = front.arrived + self.opts.max_wait;
                let until = deadline.map_or(until, |d| d.min(until));
                let now = Instant::now();
                if q.closed || now >= until || self.full(&q) || cancel.is_cancelled() {
                    break;
                }
                q = self
                    .changed
                    .wait_timeout(q, (until - now).min(POLL))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            self.take(&mut q)
        };
        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.serve(&mut w, wave);
        }));
        let mut q = lock(&self.queue);
        if served.is_err() {
            // The wave's requests were answered with an error as they dropped; the worker
            // goes too. With none left, so do the requests still queued.
            drop(w);
            q.lost += 1;
            if q.lost == self.opts.loader.threads.get() {
                q.jobs.clear();
            }
            match q.free.pop() {
                Some(other) => self.pass_on(q, other),
                None => {
                    drop(q);
                    self.changed.notify_all();
                }
            }
            return;
        }
        self.pass_on(q, w);
    }

    /// Hand `w` to the first caller still waiting for a worker, or put it back.
    fn pass_on(&self, mut q: MutexGuard<'_, Queue>, w: Box<Worker>) {
        for j in q.jobs.iter() {
            let mut st = lock(&j.slot.state);
            if !st.gone && st.lead.is_none() {
                st.lead = Some(w);
                drop(st);
                j.slot.ready.notify_one();
                return;
            }
        }
        q.free.push(w);
        drop(q);
        self.changed.notify_all();
    }

    fn full(&self, q: &Queue) -> bool {
        let (edges, rows) = q.jobs.iter().fold((0u64, 0u64), |(e, r), j| match j.work {
            Work::Sample(..) => (e + j.cost, r),
            Work::Features(_) => (e, r + j.cost),
        });
        q.jobs.len() >= self.opts.max_wave.get()
            || edges >= self.wave_edges
            || rows >= self.wave_rows
    }

    /// The wave of a worker: the queued jobs in arrival order while they fit one wave of the
    /// plan, at most [`wave_cap`] of them.
    fn take(&self, q: &mut Queue) -> Vec<Job> {
        let (mut edges, mut rows) = (0u64, 0u64);
        let most = wave_cap(
            q.jobs.len(),
            self.opts.loader.threads.get(),
            self.opts.max_wave.get(),
            !self.opts.max_wait.is_zero(),
        );
        let mut wave = Vec::new();
        while let Some(j) = q.jobs.front() {
            let (e, r) = match j.work {
                Work::Sample(..) => (edges + j.cost, rows),
                Work::Features(_) => (edges, rows + j.cost),
            };
            let fits = e <= self.wave_edges && r <= self.wave_rows;
            if wave.len() >= most || (!wave.is_empty() && !fits) {
                break;
            }
            (edges, rows) = (e, r);
            wave.push(q.jobs.pop_front().expect("a front job"));
        }
        wave
    }

    /// Answer the jobs of `wave` still wanted: samples together, then feature rows together.
    fn serve(&self, w: &mut Worker, wave: Vec<Job>) {
        #[cfg(feature = "fault-injection")]
        if wave
            .iter()
            .any(|j| matches!(&j.work, Work::Sample(r, _) if r.seed == crate::FAULT_SEED))
        {
            panic!("fault injected for a test (seed {})", crate::FAULT_SEED);
        }
        let now = Instant::now();
        let mut samples = Vec::new();
        let mut rows = Vec::new();
        for j in wave {
            if j.cancel.is_cancelled() {
                // Its caller counted it.
                continue;
            }
            if j.deadline.is_some_and(|d| d <= now) {
                if j.slot.expire() {
                    self.counters
                        .deadline_exceeded
                        .fetch_add(1, Ordering::Relaxed);
                }
                continue;
            }
            match j.work {
                Work::Sample(..) => samples.push(j),
                Work::Features(_) => rows.push(j),
            }
        }
        let served = (samples.len() + rows.len()) as u64;
        if served == 0 {
            return;
        }
        self.counters.waves.fetch_add(1, Ordering::Relaxed);
        self.counters
            .wave_requests
            .fetch_add(served, Ordering::Relaxed);
        // A request larger than a wave comes alone, and holds the room.
        let large = samples.iter().map(|j| j.cost).sum::<u64>() > self.wave_edges
            || rows.iter().map(|j| j.cost).sum::<u64>() > self.wave_rows;
        self.sample_wave(w, samples, large);
        self.gather_wave(w, rows, large);
    }

    /// After a wave larger than the plan's (`large`), make the worker's backends again, so that
    /// the workspaces it grew go back before its answer is handed over (and the room with it).
    fn renew(&self, w: &mut Worker, large: bool) {
        if !large {
            return;
        }
        if let Ok(s) = self.loader.thread_sampler() {
            w.sampler = s;
        }
        if w.gatherer.is_some() {
            if let Ok(Some(g)) = self.loader.thread_gatherer(&self.stop) {
                w.gatherer = Some(g);
            }
        }
    }

    /// Sample the wave's sampling jobs together, then gather the rows of those that asked for
    /// them in one go.
    fn sample_wave(&self, w: &mut Worker, jobs: Vec<Job>, large: bool) {
        if jobs.is_empty() {
            return;
        }
        let reqs: Vec<ManyRequest<'_>> = jobs
            .iter()
            .map(|j| match &j.work {
                Work::Sample(r, _) => ManyRequest {
                    seeds: r.seeds.as_slice(),
                    fanouts: &r.fanouts,
                    replace: r.replace,
                    seed: r.seed,
                    epoch: 0,
                    batch: 0,
                    with_edge_ids: r.with_edge_ids,
                },
                Work::Features(_) => unreachable!("sample jobs only"),
            })
            .collect();
        let outs = match w.sampler.sample_many(self.loader.graph(), &reqs) {
            Ok(outs) => outs,
            Err(e) => return self.fail(&jobs, &e.to_string()),
        };
        drop(reqs);
        let wants_rows = |j: &Job| matches!(j.work, Work::Sample(_, true));
        let mut rows = match w.gatherer.as_mut() {
            Some(g) if jobs.iter().any(wants_rows) => {
                let ids: Vec<u64> = jobs
                    .iter()
                    .zip(&outs)
                    .filter(|(j, _)| wants_rows(j))
                    .flat_map(|(_, s)| s.node.iter().copied())
                    .collect();
                let mut all = vec![0f32; ids.len() * g.dim()];
                if let Err(e) = g.gather(&ids, &mut all) {
                    return self.fail(&jobs, &e.to_string());
                }
                Some((all, g.dim(), 0usize))
            }
            _ => None,
        };
        self.renew(w, large);
        for (j, s) in jobs.iter().zip(outs) {
            let mine = match (&mut rows, wants_rows(j)) {
                (Some((all, dim, at)), true) => {
                    let n = s.node.len();
                    let data = if *at == 0 && n * *dim == all.len() {
                        std::mem::take(all)
                    } else {
                        all[*at * *dim..(*at + n) * *dim].to_vec()
                    };
                    *at += n;
                    Some(FeatureRows {
                        rows: n,
                        dim: *dim,
                        data,
                    })
                }
                _ => None,
            };
            j.slot.put(Ok(Answer::Sample(s, mine)));
        }
    }

    fn gather_wave(&self, w: &mut Worker, jobs: Vec<Job>, large: bool) {
        let Some(g) = w.gatherer.as_mut() else {
            return;
        };
        if jobs.is_empty() {
            return;
        }
        let dim = g.dim();
        let ids: Vec<u64> = jobs
            .iter()
            .flat_map(|j| match &j.work {
                Work::Features(ids) => ids.iter().copied(),
                Work::Sample(..) => unreachable!("feature jobs only"),
            })
            .collect();
        let mut all = vec![0f32; ids.len() * dim];
        let got = g.gather(&ids, &mut all);
        self.renew(w, large);
        match got {
            Ok(_) => {
                let mut at = 0;
                for j in &jobs {
                    let n = j.cost as usize;
                    let data = all[at * dim..(at + n) * dim].to_vec();
                    at += n;
                    j.slot
                        .put(Ok(Answer::Features(FeatureRows { rows: n, dim, data })));
                }
            }
            Err(e) => self.fail(&jobs, &e.to_string()),
        }
    }

    fn fail(&self, jobs: &[Job], msg: &str) {
        self.counters
            .failed
            .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        for j in jobs {
            j.slot.put(Err(ServeError::Internal(msg.to_string())));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many of `queued` jobs one of `workers` takes for a wave: at most `max_wave`, and without
/// a wait for company (`waits` false, the default) at most its share of the queue,
/// `ceil(queued / workers)`. A wave's requests all wait for its slowest, so under light load
/// requests go one per worker (none waits behind another's hub) and only a long queue makes
/// long waves (measured in docs/benchmarks.md). A wait for company asks for waves: then a
/// wave takes all that fits.
fn wave_cap(queued: usize, workers: usize, max_wave: usize, waits: bool) -> usize {
    if waits {
        return max_wave;
    }
    max_wave.min(queued.div_ceil(workers.max(1)).max(1))
}

#[cfg(test)]
mod tests {
    use super::wave_cap;

    #[test]
    fn a_wave_takes_its_share_of_the_queue_unless_it_waited_for_company() {
        // (queued, workers, max_wave) -> cap
        for (q, w, m, want) in [
            (0, 2, 64, 1),
            (1, 2, 64, 1),
            (2, 2, 64, 1),
            (3, 2, 64, 2),
            (30, 2, 64, 15),
            (200, 2, 64, 64),
            (5, 1, 64, 5),
            (5, 4, 64, 2),
            (9, 2, 1, 1),
        ] {
            assert_eq!(
                wave_cap(q, w, m, false),
                want,
                "{q} queued, {w} workers, max {m}"
            );
            assert_eq!(wave_cap(q, w, m, true), m, "waiting: {q} queued");
        }
    }
}
