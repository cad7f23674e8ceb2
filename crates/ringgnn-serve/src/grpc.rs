//! [`GrpcServer`]: the `ringgnn.v1.RingGnn` service (`python/ringgnn/serve.proto`) and the
//! standard health service on tonic, in Rust, over one engine ([`Served`]: an [`Engine`] or a
//! [`HeteroEngine`]).
//!
//! Over an [`Engine`], `Sample`, `Features` and `Info` are served here end to end: the request
//! is decoded with prost, checked, handed to the engine on a blocking thread (where it leads or
//! joins a wave, as any caller does) and the reply encoded without leaving Rust, so a request
//! costs no Python and no GIL. `Predict`, `Embed` and `Score` need the model, which is Python's:
//! they go to a [`Delegate`] (the Python servicer, in the binding) with the raw request, its
//! deadline and its cancel token; without one they get FAILED_PRECONDITION. Over a
//! [`HeteroEngine`] every method goes to the delegate (the servicer checks the typed request,
//! calls the engine with the GIL released and encodes the per-type reply); the transport, the
//! limits, deadlines, cancellation and the drain are this module's for both.
//!
//! Every method takes and returns raw bytes ([`RawCodec`]) and decodes the request itself, so
//! that a malformed message gets INVALID_ARGUMENT with the parser's message (tonic's own codec
//! would answer INTERNAL). A request's deadline is its `grpc-timeout` header; a client that goes
//! away drops the request's future, which cancels its token, and the engine drops its work.
//! At most `max_concurrent` requests are in progress; one more gets RESOURCE_EXHAUSTED at once.
//! [`GrpcServer::stop`] refuses new requests, lets those in flight finish within a grace period,
//! then closes the engine.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes};
use prost::Message;
use ringgnn_sampler::{Fanout, Seeds};
use ringgnn_store::manifest::FeatureDtype;
use tokio::sync::{oneshot, Semaphore};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{http, BoxFuture, Service, StdError};
use tonic::server::NamedService;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Status};
use tonic_health::ServingStatus;

use crate::{
    CancelToken, Engine, EngineStats, HeteroEngine, Limits, RequestTimes, SampleRequest, ServeError,
};

/// The service's full name, as in `serve.proto`.
pub const SERVICE: &str = "ringgnn.v1.RingGnn";

/// The methods of the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Sample,
    Features,
    Predict,
    Embed,
    Score,
    Info,
}

impl Method {
    fn from_path(path: &str) -> Option<Self> {
        let name = path.strip_prefix("/ringgnn.v1.RingGnn/")?;
        Some(match name {
            "Sample" => Method::Sample,
            "Features" => Method::Features,
            "Predict" => Method::Predict,
            "Embed" => Method::Embed,
            "Score" => Method::Score,
            "Info" => Method::Info,
            _ => return None,
        })
    }

    /// The method's name in `serve.proto`.
    pub fn name(self) -> &'static str {
        match self {
            Method::Sample => "Sample",
            Method::Features => "Features",
            Method::Predict => "Predict",
            Method::Embed => "Embed",
            Method::Score => "Score",
            Method::Info => "Info",
        }
    }
}

/// A refusal: a gRPC status code (its number) and the message.
pub type Refusal = (i32, String);

/// What serves the methods that are not served in Rust (`Predict`, `Embed`, `Score`): called on
/// a blocking thread with the request's bytes, its deadline and its cancel token; returns the
/// reply's bytes or a refusal.
pub trait Delegate: Send + Sync + 'static {
    fn call(
        &self,
        method: Method,
        request: &[u8],
        deadline: Option<Instant>,
        token: &CancelToken,
    ) -> Result<Vec<u8>, Refusal>;
}

/// What `Info` reports that the engine does not know: the dataset's and the model's side.
#[derive(Clone, Debug, Default)]
pub struct InfoFields {
    pub num_classes: i64,
    /// The model's kind ("sage", ...), its run directory, fanouts and hidden size; empty
    /// without a model.
    pub model: String,
    pub model_run: String,
    pub model_fanouts: Vec<i32>,
    pub model_hidden: i64,
    /// The model's task ("node" or "link") and a link model's decoder ("dot", "mlp"); empty
    /// without a model (and the decoder for a node model).
    pub model_task: String,
    pub model_decoder: String,
    pub version: String,
}

/// How the gRPC server runs; decided by the caller (`ringgnn serve`'s options).
#[derive(Clone, Debug)]
pub struct GrpcOptions {
    /// Threads that run requests (each request holds one until answered).
    pub handlers: usize,
    /// Requests in progress at most; one more gets RESOURCE_EXHAUSTED.
    pub max_concurrent: usize,
    /// The largest message accepted or sent, in bytes.
    pub max_message: usize,
    /// The dataset's path, for messages.
    pub dataset: String,
    /// The dtype the dataset stores its features in (None without features).
    pub dtype: Option<FeatureDtype>,
    pub info: InfoFields,
}

#[derive(Clone, PartialEq, prost::Message)]
struct SampleRequestMsg {
    #[prost(int64, repeated, tag = "1")]
    nodes: Vec<i64>,
    #[prost(int32, repeated, tag = "2")]
    fanouts: Vec<i32>,
    #[prost(bool, tag = "3")]
    replace: bool,
    #[prost(uint64, optional, tag = "4")]
    seed: Option<u64>,
    #[prost(bool, tag = "5")]
    edge_ids: bool,
    #[prost(int64, optional, tag = "8")]
    time: Option<i64>,
    #[prost(int64, repeated, tag = "9")]
    seed_times: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct InfoRequestMsg {}

#[derive(Clone, PartialEq, prost::Message)]
struct FeaturesRequestMsg {
    #[prost(int64, repeated, tag = "1")]
    nodes: Vec<i64>,
    #[prost(bool, tag = "2")]
    stored_dtype: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct FeaturesReplyMsg {
    #[prost(int64, tag = "1")]
    rows: i64,
    #[prost(int64, tag = "2")]
    dim: i64,
    #[prost(string, tag = "3")]
    dtype: String,
    #[prost(bytes = "vec", tag = "4")]
    data: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct InfoReplyMsg {
    #[prost(int64, tag = "1")]
    num_nodes: i64,
    #[prost(int64, tag = "2")]
    num_edges: i64,
    #[prost(int64, tag = "3")]
    feature_dim: i64,
    #[prost(string, tag = "4")]
    feature_dtype: String,
    #[prost(int64, tag = "5")]
    num_classes: i64,
    #[prost(int32, repeated, tag = "6")]
    fanouts: Vec<i32>,
    #[prost(uint64, tag = "7")]
    seed: u64,
    #[prost(string, tag = "8")]
    model: String,
    #[prost(string, tag = "9")]
    model_run: String,
    #[prost(int32, repeated, tag = "10")]
    model_fanouts: Vec<i32>,
    #[prost(int64, tag = "11")]
    model_hidden: i64,
    #[prost(int64, tag = "12")]
    max_nodes: i64,
    #[prost(int64, tag = "13")]
    max_hops: i64,
    #[prost(string, tag = "14")]
    version: String,
    #[prost(string, tag = "15")]
    backend: String,
    #[prost(string, tag = "16")]
    feature_backend: String,
    #[prost(string, tag = "17")]
    dataset: String,
    #[prost(message, optional, tag = "18")]
    stats: Option<StatsMsg>,
    #[prost(string, tag = "19")]
    model_task: String,
    #[prost(string, tag = "20")]
    model_decoder: String,
    #[prost(bool, tag = "26")]
    has_times: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct StatsMsg {
    #[prost(uint64, tag = "1")]
    sample_requests: u64,
    #[prost(uint64, tag = "2")]
    feature_requests: u64,
    #[prost(uint64, tag = "3")]
    waves: u64,
    #[prost(uint64, tag = "4")]
    wave_requests: u64,
    #[prost(uint64, tag = "5")]
    busy: u64,
    #[prost(uint64, tag = "6")]
    deadline_exceeded: u64,
    #[prost(uint64, tag = "7")]
    cancelled: u64,
    #[prost(uint64, tag = "8")]
    failed: u64,
    #[prost(uint64, tag = "9")]
    queued: u64,
    #[prost(uint64, tag = "10")]
    reads: u64,
    #[prost(uint64, tag = "11")]
    bytes_read: u64,
    #[prost(uint64, tag = "12")]
    page_hits: u64,
    #[prost(uint64, tag = "13")]
    page_misses: u64,
    #[prost(uint64, tag = "14")]
    pages_cached: u64,
    #[prost(uint64, repeated, tag = "15")]
    latency_buckets: Vec<u64>,
}

/// The status of an engine error (the mapping `docs/SERVING.md` lists).
fn status(e: ServeError) -> Status {
    let code = match &e {
        ServeError::Input(_) => Code::InvalidArgument,
        ServeError::Busy(_) => Code::ResourceExhausted,
        ServeError::DeadlineExceeded => Code::DeadlineExceeded,
        ServeError::Cancelled => Code::Cancelled,
        ServeError::ShuttingDown => Code::Unavailable,
        ServeError::Corrupt(_) | ServeError::Internal(_) => Code::Internal,
    };
    Status::new(code, e.to_string())
}

/// The deadline a `grpc-timeout` header value gives (`<digits><unit>`, the gRPC spec's format);
/// None when it is absent or malformed.
fn deadline(header: Option<&http::HeaderValue>, now: Instant) -> Option<Instant> {
    let s = header?.to_str().ok()?;
    let (digits, unit) = s.split_at(s.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let d = match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    };
    now.checked_add(d)
}

/// The engine a server serves.
#[derive(Clone)]
pub enum Served {
    Graph(Arc<Engine>),
    /// A heterogeneous dataset's: its calls go to the delegate.
    Typed(Arc<HeteroEngine>),
}

/// `body` with `e` bound to whichever engine `served` holds: for what both answer alike.
macro_rules! either {
    ($served:expr, $e:ident => $body:expr) => {
        match $served {
            Served::Graph($e) => $body,
            Served::Typed($e) => $body,
        }
    };
}

/// What both engines answer alike.
impl Served {
    /// Take no new requests, answer those queued.
    pub fn close(&self) {
        either!(self, e => e.close())
    }

    /// The limits of one request.
    pub fn limits(&self) -> &Limits {
        either!(self, e => &e.options().limits)
    }

    /// The seed of requests that give none.
    pub fn seed(&self) -> u64 {
        match self {
            Served::Graph(e) => e.sample_options().seed,
            Served::Typed(e) => e.options().seed,
        }
    }

    /// How the neighbor files are read ("memory", "pread", "uring", ...).
    pub fn backend(&self) -> &str {
        match self {
            Served::Graph(e) => e.loader().backend_name(),
            Served::Typed(e) => e.backend(),
        }
    }

    /// How the feature rows are read.
    pub fn feature_backend(&self) -> &str {
        match self {
            Served::Graph(e) => e.loader().feature_backend(),
            Served::Typed(e) => e.feature_backend(),
        }
    }

    /// Bytes held for one request larger than a wave and whether the hot pages lend them.
    pub fn large_room(&self) -> (u64, bool) {
        either!(self, e => e.large_room())
    }

    /// Refuse a request of `n` node ids before they are converted.
    pub fn check_count(&self, n: usize) -> crate::Result<()> {
        either!(self, e => e.check_count(n))
    }

    /// Counters since the engine opened.
    pub fn stats(&self) -> EngineStats {
        either!(self, e => e.stats())
    }
}

/// The service's state, shared by the request futures.
struct Inner {
    engine: Served,
    delegate: Option<Arc<dyn Delegate>>,
    permits: Arc<Semaphore>,
    opts: GrpcOptions,
}

impl Inner {
    fn nodes(e: &Engine, nodes: Vec<i64>) -> Result<Seeds, Status> {
        // The count first, so that an oversized request hears of the limit.
        e.check_count(nodes.len()).map_err(status)?;
        Seeds::from_signed(&nodes, e.num_nodes())
            .map_err(|e| Status::invalid_argument(e.to_string()))
    }

    fn info(&self, e: &Engine) -> InfoReplyMsg {
        let f = &self.opts.info;
        let s = e.stats();
        let o = e.sample_options();
        InfoReplyMsg {
            num_nodes: e.num_nodes() as i64,
            num_edges: e.num_edges() as i64,
            feature_dim: e.dim() as i64,
            feature_dtype: self.opts.dtype.map_or("", FeatureDtype::name).into(),
            num_classes: f.num_classes,
            fanouts: o.fanouts.iter().map(|x| x.value() as i32).collect(),
            seed: o.seed,
            model: f.model.clone(),
            model_run: f.model_run.clone(),
            model_fanouts: f.model_fanouts.clone(),
            model_hidden: f.model_hidden,
            max_nodes: e.options().limits.max_nodes as i64,
            max_hops: e.options().limits.max_hops as i64,
            version: f.version.clone(),
            backend: e.loader().backend_name().into(),
            feature_backend: e.loader().feature_backend().into(),
            dataset: self.opts.dataset.clone(),
            stats: Some(StatsMsg {
                sample_requests: s.sample_requests,
                feature_requests: s.feature_requests,
                waves: s.waves,
                wave_requests: s.wave_requests,
                busy: s.busy,
                deadline_exceeded: s.deadline_exceeded,
                cancelled: s.cancelled,
                failed: s.failed,
                queued: s.queued,
                reads: s.reads,
                bytes_read: s.bytes_read,
                page_hits: s.page_hits,
                page_misses: s.page_misses,
                pages_cached: s.pages_cached,
                latency_buckets: s.latency.0,
            }),
            model_task: f.model_task.clone(),
            model_decoder: f.model_decoder.clone(),
            has_times: e.has_times(),
        }
    }

    /// Serve one request on this (blocking) thread.
    fn serve(
        &self,
        method: Method,
        data: &[u8],
        deadline: Option<Instant>,
        token: &CancelToken,
    ) -> Result<Vec<u8>, Status> {
        let malformed = |what: &str, e: prost::DecodeError| {
            Status::invalid_argument(format!("malformed ringgnn.v1.{what}: {e}"))
        };
        let engine = match &self.engine {
            Served::Graph(e) => e,
            Served::Typed(_) => return self.delegated(method, data, deadline, token),
        };
        match method {
            Method::Sample => {
                let r =
                    SampleRequestMsg::decode(data).map_err(|e| malformed("SampleRequest", e))?;
                let defaults = engine.sample_options();
                let fanouts = if r.fanouts.is_empty() {
                    defaults.fanouts.clone()
                } else {
                    let f: Vec<i64> = r.fanouts.iter().map(|&x| x as i64).collect();
                    Fanout::parse_all(&f).map_err(|e| Status::invalid_argument(e.to_string()))?
                };
                let seed = r.seed.unwrap_or(defaults.seed);
                let req = SampleRequest {
                    seeds: Self::nodes(engine, r.nodes)?,
                    fanouts,
                    replace: r.replace,
                    seed,
                    with_edge_ids: r.edge_ids,
                    times: RequestTimes::from_fields(r.time, r.seed_times).map_err(status)?,
                };
                // Encoded while a request larger than a wave still holds its room.
                engine
                    .sample_then(req, deadline, Some(token.clone()), |(s, time)| {
                        crate::wire::sample_reply(&s, seed, time.as_deref())
                    })
                    .map_err(status)
            }
            Method::Features => {
                let r = FeaturesRequestMsg::decode(data)
                    .map_err(|e| malformed("FeaturesRequest", e))?;
                let Some(stored) = self.opts.dtype.filter(|_| engine.dim() > 0) else {
                    return Err(Status::failed_precondition(format!(
                        "the dataset {} has no node features",
                        self.opts.dataset
                    )));
                };
                let ids = Self::nodes(engine, r.nodes)?;
                let rows = engine
                    .features(&ids, deadline, Some(token.clone()))
                    .map_err(status)?;
                let (dtype, data) = if r.stored_dtype {
                    (stored, rows.to_stored(stored))
                } else {
                    (FeatureDtype::F32, rows.to_stored(FeatureDtype::F32))
                };
                let reply = FeaturesReplyMsg {
                    rows: rows.rows as i64,
                    dim: rows.dim as i64,
                    dtype: dtype.name().into(),
                    data,
                };
                Ok(reply.encode_to_vec())
            }
            Method::Info => {
                // InfoRequest has no fields, but a malformed one is still refused.
                InfoRequestMsg::decode(data).map_err(|e| malformed("InfoRequest", e))?;
                Ok(self.info(engine).encode_to_vec())
            }
            Method::Predict | Method::Embed | Method::Score => {
                self.delegated(method, data, deadline, token)
            }
        }
    }

    /// A call the delegate serves (the model's, or any over a [`HeteroEngine`]).
    fn delegated(
        &self,
        method: Method,
        data: &[u8],
        deadline: Option<Instant>,
        token: &CancelToken,
    ) -> Result<Vec<u8>, Status> {
        match &self.delegate {
            Some(d) => d
                .call(method, data, deadline, token)
                .map_err(|(code, m)| Status::new(Code::from_i32(code), m)),
            None => Err(Status::failed_precondition(
                "this server has no model: start it with --model RUN_DIR (a `ringgnn train` run)",
            )),
        }
    }
}

/// Cancels a request's token when its future is dropped: the client went away (or the server
/// stopped waiting), so the engine may skip its work.
struct CancelOnDrop(CancelToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// A codec that hands messages over as they are: each method decodes its request itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawCodec;

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        let n = src.remaining();
        Ok(Some(src.copy_to_bytes(n)))
    }
}

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }

    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

/// One method of the service, as tonic's unary machinery calls it.
struct Unary {
    inner: Arc<Inner>,
    method: Method,
}

impl tonic::server::UnaryService<Bytes> for Unary {
    type Response = Vec<u8>;
    type Future = BoxFuture<tonic::Response<Vec<u8>>, Status>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        let (inner, method) = (self.inner.clone(), self.method);
        Box::pin(async move {
            let Ok(_permit) = inner.permits.clone().try_acquire_owned() else {
                return Err(Status::resource_exhausted(format!(
                    "the server is busy: {} requests in progress, its --max-concurrent limit; retry later",
                    inner.opts.max_concurrent
                )));
            };
            let deadline = deadline(
                request.metadata().as_ref().get("grpc-timeout"),
                Instant::now(),
            );
            let token = CancelToken::default();
            let _guard = CancelOnDrop(token.clone());
            let data = request.into_inner();
            let serving = inner.clone();
            let reply =
                tokio::task::spawn_blocking(move || serving.serve(method, &data, deadline, &token))
                    .await
                    .map_err(|e| Status::internal(format!("the request failed: {e}")))??;
            Ok(tonic::Response::new(reply))
        })
    }
}

/// The `RingGnn` service plus the health service, as one tower service (no router needed).
#[derive(Clone)]
struct Routes {
    inner: Arc<Inner>,
    health: tonic_health::pb::health_server::HealthServer<tonic_health::server::HealthService>,
}

impl NamedService for Routes {
    const NAME: &'static str = SERVICE;
}

impl<B> Service<http::Request<B>> for Routes
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let path = req.uri().path();
        if path.starts_with("/grpc.health.v1.Health/") {
            return self.health.call(req);
        }
        let Some(method) = Method::from_path(path) else {
            return Box::pin(async {
                Ok(Status::unimplemented(
                    "no such method: ringgnn serve has the methods of ringgnn/serve.proto",
                )
                .into_http())
            });
        };
        let (inner, max) = (self.inner.clone(), self.inner.opts.max_message);
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(RawCodec)
                .apply_max_message_size_config(Some(max), Some(max));
            Ok(grpc.unary(Unary { inner, method }, req).await)
        })
    }
}

/// A running server: see the module docs.
pub struct GrpcServer {
    port: u16,
    runtime: Option<tokio::runtime::Runtime>,
    health: tonic_health::server::HealthReporter,
    shutdown: Option<oneshot::Sender<()>>,
    done: Option<oneshot::Receiver<()>>,
    engine: Served,
}

impl GrpcServer {
    /// Bind `listen` (`HOST:PORT`, port 0 for a free one) and start serving `engine` (with
    /// `delegate` for Predict, Embed and Score with a model, and every call over a
    /// [`HeteroEngine`]).
    pub fn start(
        listen: &str,
        engine: Served,
        delegate: Option<Arc<dyn Delegate>>,
        opts: GrpcOptions,
    ) -> crate::Result<Self> {
        let cannot = |e: &dyn std::fmt::Display| {
            ServeError::Input(format!(
                "--listen {listen}: cannot listen there ({e}); is the port in use?"
            ))
        };
        let listener = std::net::TcpListener::bind(listen).map_err(|e| cannot(&e))?;
        listener.set_nonblocking(true).map_err(|e| cannot(&e))?;
        let port = listener.local_addr().map_err(|e| cannot(&e))?.port();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(opts.handlers.max(1))
            .thread_name("ringgnn-grpc")
            .enable_all()
            .build()
            .map_err(|e| ServeError::Internal(format!("cannot start the gRPC runtime: {e}")))?;
        let health = tonic_health::server::HealthReporter::new();
        let health_service = tonic_health::pb::health_server::HealthServer::new(
            tonic_health::server::HealthService::from_health_reporter(health.clone()),
        );
        let inner = Arc::new(Inner {
            engine: engine.clone(),
            delegate,
            permits: Arc::new(Semaphore::new(opts.max_concurrent.max(1))),
            opts,
        });
        let routes = Routes {
            inner,
            health: health_service,
        };
        let (tx, rx) = oneshot::channel::<()>();
        let (done_tx, done_rx) = oneshot::channel::<()>();
        let listener = {
            let _enter = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(|e| cannot(&e))?
        };
        runtime.block_on(async {
            for name in ["", SERVICE] {
                health
                    .set_service_status(name, ServingStatus::Serving)
                    .await;
            }
        });
        runtime.spawn(async move {
            let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
            let served = tonic::transport::Server::builder()
                .serve_with_incoming_shutdown(routes, incoming, async {
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = served {
                eprintln!("ringgnn serve: the gRPC server failed: {e}");
            }
            let _ = done_tx.send(());
        });
        Ok(GrpcServer {
            port,
            runtime: Some(runtime),
            health,
            shutdown: Some(tx),
            done: Some(done_rx),
            engine,
        })
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Refuse new requests (health NOT_SERVING), let those in flight finish within `grace`,
    /// then close the engine. Idempotent.
    pub fn stop(&mut self, grace: Duration) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        let health = self.health.clone();
        let (shutdown, done) = (self.shutdown.take(), self.done.take());
        runtime.block_on(async move {
            for name in ["", SERVICE] {
                health
                    .set_service_status(name, ServingStatus::NotServing)
                    .await;
            }
            if let Some(tx) = shutdown {
                let _ = tx.send(());
            }
            if let Some(done) = done {
                let _ = tokio::time::timeout(grace, done).await;
            }
        });
        // Requests still running past the grace period are given up.
        runtime.shutdown_timeout(Duration::from_millis(100));
        self.engine.close();
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        self.stop(Duration::ZERO);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_headers_give_deadlines() {
        let now = Instant::now();
        let h = |s: &str| deadline(Some(&http::HeaderValue::from_str(s).unwrap()), now);
        assert_eq!(h("5S"), Some(now + Duration::from_secs(5)));
        assert_eq!(h("250m"), Some(now + Duration::from_millis(250)));
        assert_eq!(h("7u"), Some(now + Duration::from_micros(7)));
        assert_eq!(h("9n"), Some(now + Duration::from_nanos(9)));
        assert_eq!(h("2M"), Some(now + Duration::from_secs(120)));
        assert_eq!(h("1H"), Some(now + Duration::from_secs(3600)));
        for bad in ["", "S", "5", "5x", "-5S", "123456789S", "1.5S"] {
            assert_eq!(h(bad), None, "{bad:?}");
        }
        assert_eq!(deadline(None, now), None);
    }

    #[test]
    fn paths_name_the_methods() {
        assert_eq!(
            Method::from_path("/ringgnn.v1.RingGnn/Sample"),
            Some(Method::Sample)
        );
        assert_eq!(
            Method::from_path("/ringgnn.v1.RingGnn/Info"),
            Some(Method::Info)
        );
        assert_eq!(Method::from_path("/ringgnn.v1.RingGnn/Nope"), None);
        assert_eq!(Method::from_path("/other.Svc/Sample"), None);
        for m in [
            Method::Sample,
            Method::Features,
            Method::Predict,
            Method::Embed,
            Method::Score,
            Method::Info,
        ] {
            assert_eq!(
                Method::from_path(&format!("/{SERVICE}/{}", m.name())),
                Some(m)
            );
        }
    }
}
