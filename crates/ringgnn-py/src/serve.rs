//! `_core.Engine` and `_core.CancelToken`: the request engine of `ringgnn serve`
//! (`ringgnn-serve`), called from the gRPC server's handler threads with the GIL released, so
//! that concurrent requests reach the engine together and share its waves. `_core.ServedEngine`
//! is what it and `_core.HeteroEngine` (`serve_hetero`) answer alike, written once.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use numpy::{IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::pyclass_init::PyClassInitializer;
use pyo3::types::{PyBytes, PyDict};

use ringgnn_loader::{BackendChoice, CachePolicy, FeatureOptions, LoaderOptions};
use ringgnn_sampler::SampleOptions;
use ringgnn_serve::grpc::{Delegate, GrpcOptions, InfoFields, Method, Refusal, Served};
use ringgnn_serve::{EngineOptions, FeatureRows, Limits, RequestTimes, SampleRequest, ServeError};
use ringgnn_store::manifest::FeatureDtype;
use ringgnn_store::Dataset;

use crate::errors::{input_error, LoaderError, RingGnnError, StoreError};
use crate::hetero::temporal_strategy_arg;
use crate::sampler::{fanouts, plan_dict, seeds, Converted};

pyo3::create_exception!(
    ringgnn,
    BusyError,
    RingGnnError,
    "The server's queue is full; retry later (gRPC RESOURCE_EXHAUSTED)."
);
pyo3::create_exception!(
    ringgnn,
    DeadlineExceededError,
    RingGnnError,
    "The deadline passed before the answer was ready (gRPC DEADLINE_EXCEEDED)."
);
pyo3::create_exception!(
    ringgnn,
    CancelledError,
    RingGnnError,
    "The request was given up by its caller (gRPC CANCELLED)."
);
pyo3::create_exception!(
    ringgnn,
    ShuttingDownError,
    RingGnnError,
    "The server is shutting down and takes no new requests (gRPC UNAVAILABLE)."
);

/// Add the engine's classes and exceptions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<ServedEngine>()?;
    m.add_class::<Engine>()?;
    m.add_class::<CancelToken>()?;
    m.add_class::<GrpcServer>()?;
    m.add("BusyError", py.get_type::<BusyError>())?;
    m.add(
        "DeadlineExceededError",
        py.get_type::<DeadlineExceededError>(),
    )?;
    m.add("CancelledError", py.get_type::<CancelledError>())?;
    m.add("ShuttingDownError", py.get_type::<ShuttingDownError>())?;
    Ok(())
}

pub(crate) fn serve_error(e: ServeError) -> PyErr {
    match e {
        ServeError::Input(m) => input_error(m),
        e @ ServeError::Busy(_) => BusyError::new_err(e.to_string()),
        e @ ServeError::DeadlineExceeded => DeadlineExceededError::new_err(e.to_string()),
        e @ ServeError::Cancelled => CancelledError::new_err(e.to_string()),
        e @ ServeError::ShuttingDown => ShuttingDownError::new_err(e.to_string()),
        ServeError::Corrupt(m) => StoreError(ringgnn_store::Error::Corrupt(m)).into(),
        ServeError::Internal(m) => RingGnnError::new_err(m),
    }
}

/// A flag the server sets when a client goes away; the request waiting on it ends at once.
#[pyclass(module = "ringgnn._core", frozen)]
#[derive(Default)]
pub struct CancelToken {
    pub(crate) inner: ringgnn_serve::CancelToken,
}

#[pymethods]
impl CancelToken {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    fn cancel(&self) {
        self.inner.cancel();
    }

    #[getter]
    fn cancelled(&self) -> bool {
        self.inner.is_cancelled()
    }
}

/// What both engines answer alike: the base class of `Engine` and `HeteroEngine`, and what
/// `GrpcServer` serves.
#[pyclass(module = "ringgnn._core", subclass, frozen)]
pub struct ServedEngine {
    served: Served,
}

impl ServedEngine {
    /// The base part of an engine class's initializer.
    pub(crate) fn init(served: Served) -> PyClassInitializer<Self> {
        PyClassInitializer::from(ServedEngine { served })
    }
}

#[pymethods]
impl ServedEngine {
    /// The default seed of requests.
    #[getter]
    fn seed(&self) -> u64 {
        self.served.seed()
    }

    #[getter]
    fn backend(&self) -> &str {
        self.served.backend()
    }

    #[getter]
    fn feature_backend(&self) -> &str {
        self.served.feature_backend()
    }

    #[getter]
    fn max_nodes(&self) -> usize {
        self.served.limits().max_nodes
    }

    #[getter]
    fn max_hops(&self) -> usize {
        self.served.limits().max_hops
    }

    /// Bytes held for one request larger than a wave (0: none is) and whether the hot
    /// neighbor pages lend them; the caller's plan counts them otherwise.
    #[getter]
    fn large_room(&self) -> (u64, bool) {
        self.served.large_room()
    }

    /// Refuse a request of `n` node ids (none, or more than `max_nodes`) before converting them.
    fn check_count(&self, n: usize) -> PyResult<()> {
        self.served.check_count(n).map_err(serve_error)
    }

    /// Counters since the engine opened (requests, waves, refusals).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, self.served.stats())
    }

    /// Take no new requests, answer those queued, stop the workers.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.served.close());
    }
}

/// The request engine over one homogeneous dataset (see `ringgnn/serving/server.py`).
#[pyclass(module = "ringgnn._core", extends = ServedEngine, frozen)]
pub struct Engine {
    inner: Arc<ringgnn_serve::Engine>,
    dtype: Option<FeatureDtype>,
}

/// A call's deadline (`timeout` seconds from now) and cancel token, as the engines take them.
pub(crate) fn call_args(
    timeout: Option<f64>,
    token: Option<PyRef<'_, CancelToken>>,
) -> PyResult<(Option<Instant>, Option<ringgnn_serve::CancelToken>)> {
    let deadline = match timeout {
        None => None,
        Some(t) if t.is_finite() && t >= 0.0 => {
            Some(Instant::now() + Duration::from_secs_f64(t.min(1e9)))
        }
        Some(t) => {
            return Err(input_error(format!(
                "timeout must be a number of seconds >= 0, not {t}"
            )))
        }
    };
    Ok((deadline, token.map(|t| t.inner.clone())))
}

/// Refuse a node type given to the homogeneous engine, whose nodes have none.
fn untyped(node_type: Option<&str>) -> PyResult<()> {
    match node_type {
        None => Ok(()),
        Some(t) => Err(input_error(format!(
            "node_type '{t}': the dataset is homogeneous (no node types); leave node_type out"
        ))),
    }
}

/// A request's times from `time` and `seed_times` (one per node), checked by the engine.
pub(crate) fn request_times(
    time: Option<i64>,
    seed_times: Option<Vec<i64>>,
) -> PyResult<Option<RequestTimes>> {
    RequestTimes::from_fields(time, seed_times.unwrap_or_default()).map_err(serve_error)
}

/// The limits of one request (at least one node and one hop).
pub(crate) fn limits(max_nodes: usize, max_hops: usize) -> Limits {
    Limits {
        max_nodes: max_nodes.max(1),
        max_hops: max_hops.max(1),
    }
}

impl Engine {
    /// A sampling request, the engine's defaults filling what is not given.
    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        nodes: &PyReadonlyArray1<'_, i64>,
        fanouts: Option<Vec<i64>>,
        replace: bool,
        seed: Option<u64>,
        edge_ids: bool,
        time: Option<i64>,
        seed_times: Option<Vec<i64>>,
    ) -> PyResult<SampleRequest> {
        let o = self.inner.sample_options();
        Ok(SampleRequest {
            times: request_times(time, seed_times)?,
            seeds: seeds(nodes, self.inner.num_nodes())?,
            fanouts: match fanouts {
                Some(f) => self::fanouts(&f)?,
                None => o.fanouts.clone(),
            },
            replace,
            seed: seed.unwrap_or(o.seed),
            with_edge_ids: edge_ids,
        })
    }
}

#[pymethods]
impl Engine {
    /// `fanouts`, `seed`: the defaults of requests that give none, and with `batch_size` the
    /// wave each worker is sized for (default: a full wave of single-node requests); `memory`: the whole process's budget, of which
    /// `reserve` is the caller's; `cache`: bytes of hot feature rows (by in-degree);
    /// `neighbor_cache`: bytes of hot neighbor-file pages (`None`: a share of what is left);
    /// `max_wait_us`: how long a wave waits for requests to join it; `queue`: requests waiting
    /// at most; `max_nodes`, `max_hops`: the limits of one request; `times`: open the
    /// dataset's times (false: none of their files, and requests at times are refused).
    #[new]
    #[pyo3(signature = (
        path, fanouts, *, backend="auto", direct=false, threads=None, seed=0, memory=None,
        reserve=0, features=true, cache=None, neighbor_cache=None, batch_size=None, max_wait_us=None,
        max_wave=EngineOptions::DEFAULT_MAX_WAVE, queue=EngineOptions::DEFAULT_QUEUE,
        max_nodes=4096, max_hops=6, temporal_strategy="uniform", times=true
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        fanouts: Vec<i64>,
        backend: &str,
        direct: bool,
        threads: Option<NonZeroUsize>,
        seed: u64,
        memory: Option<u64>,
        reserve: u64,
        features: bool,
        cache: Option<u64>,
        neighbor_cache: Option<u64>,
        batch_size: Option<NonZeroUsize>,
        max_wait_us: Option<u64>,
        max_wave: NonZeroUsize,
        queue: NonZeroUsize,
        max_nodes: usize,
        max_hops: usize,
        temporal_strategy: &str,
        times: bool,
    ) -> PyResult<PyClassInitializer<Self>> {
        let backend: BackendChoice = backend.parse().map_err(LoaderError)?;
        let dtype = Dataset::open(&path)
            .map_err(StoreError)?
            .manifest()
            .features
            .as_ref()
            .map(|f| f.dtype);
        let defaults = LoaderOptions::default();
        let loader = LoaderOptions {
            sample: SampleOptions {
                fanouts: self::fanouts(&fanouts)?,
                replace: false,
                seed,
                with_edge_ids: false,
            },
            backend,
            direct,
            threads: threads.unwrap_or(defaults.threads),
            memory,
            reserve,
            features: (features && dtype.is_some()).then_some(FeatureOptions {
                backend,
                cache,
                cache_policy: CachePolicy::Degree,
                staging_dir: None,
                staging_cap: None,
            }),
            batch_size: batch_size.unwrap_or(EngineOptions::DEFAULT_WAVE_SEEDS),
            neighbor_cache,
            ..defaults
        };
        let opts = EngineOptions {
            loader,
            max_wait: max_wait_us.map_or(EngineOptions::DEFAULT_MAX_WAIT, Duration::from_micros),
            max_wave,
            queue,
            limits: limits(max_nodes, max_hops),
            temporal_strategy: temporal_strategy_arg(temporal_strategy)?,
            times,
        };
        let inner = py
            .detach(|| ringgnn_serve::Engine::open(&path, opts))
            .map_err(serve_error)?;
        let engine = Engine {
            dtype: dtype.filter(|_| inner.dim() > 0),
            inner: Arc::new(inner),
        };
        Ok(ServedEngine::init(Served::Graph(engine.inner.clone())).add_subclass(engine))
    }

    #[getter]
    fn num_nodes(&self) -> u64 {
        self.inner.num_nodes()
    }

    #[getter]
    fn num_edges(&self) -> u64 {
        self.inner.num_edges()
    }

    /// Values per feature row (0 without features).
    #[getter]
    fn feature_dim(&self) -> usize {
        self.inner.dim()
    }

    /// "f32", "f16" or "bf16" (None without features).
    #[getter]
    fn feature_dtype(&self) -> Option<&'static str> {
        self.dtype.map(FeatureDtype::name)
    }

    /// The default fanouts of requests.
    #[getter]
    fn fanouts(&self) -> Vec<i64> {
        let o = self.inner.sample_options();
        o.fanouts.iter().map(|f| f.value()).collect()
    }

    fn plan<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        plan_dict(py, &self.inner.plan())
    }

    /// Whether the dataset has edge or node times (requests may give `time`/`seed_times`).
    #[getter]
    fn has_times(&self) -> bool {
        self.inner.has_times()
    }

    /// The sample of `nodes` (PyG layout, as `NeighborSampler.sample`), waiting at most
    /// `timeout` seconds and ending early once `token` is cancelled. With `rows`, a tuple of it
    /// and the f32 feature rows of its nodes (`[len(node), dim]`), from one wave: what a model
    /// runs on. With `reply`, the bytes of a `ringgnn.v1.SampleReply` (serve.proto) instead,
    /// encoded without the GIL: what the gRPC server sends. `node_type`: none (the typed
    /// engine's calls name one). `time` (every node) or `seed_times` (one per node): sampled at
    /// those times, the dict's `time` then giving each node's seed time (None otherwise).
    #[pyo3(signature = (
        nodes, fanouts=None, replace=false, seed=None, timeout=None, token=None, edge_ids=false,
        reply=false, rows=false, node_type=None, time=None, seed_times=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn sample<'py>(
        &self,
        py: Python<'py>,
        nodes: PyReadonlyArray1<'py, i64>,
        fanouts: Option<Vec<i64>>,
        replace: bool,
        seed: Option<u64>,
        timeout: Option<f64>,
        token: Option<PyRef<'py, CancelToken>>,
        edge_ids: bool,
        reply: bool,
        rows: bool,
        node_type: Option<&str>,
        time: Option<i64>,
        seed_times: Option<Vec<i64>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        untyped(node_type)?;
        let req = self.request(&nodes, fanouts, replace, seed, edge_ids, time, seed_times)?;
        let seed = req.seed;
        let (deadline, token) = call_args(timeout, token)?;
        if reply {
            // Encoded while a request larger than a wave still holds its room.
            let bytes = py
                .detach(|| {
                    self.inner.sample_then(req, deadline, token, |(s, time)| {
                        ringgnn_serve::wire::sample_reply(&s, seed, time.as_deref())
                    })
                })
                .map_err(serve_error)?;
            return Ok(PyBytes::new(py, &bytes).into_any());
        }
        let timed = |py: Python<'py>, (s, time): (Converted, Option<Vec<i64>>)| {
            let d = s.into_dict(py)?;
            d.set_item("time", time.map(|t| t.into_pyarray(py)))?;
            Ok::<_, PyErr>(d)
        };
        if rows {
            let (s, rows) = py
                .detach(|| {
                    self.inner
                        .sample_with_rows(req, deadline, token)
                        .map(|((s, t), r)| ((Converted::from(s), t), r))
                })
                .map_err(serve_error)?;
            let x: Bound<'py, PyArray2<f32>> =
                rows.data.into_pyarray(py).reshape([rows.rows, rows.dim])?;
            return Ok((timed(py, s)?, x).into_pyobject(py)?.into_any());
        }
        let out = py
            .detach(|| {
                self.inner
                    .sample_then(req, deadline, token, |(s, t)| (Converted::from(s), t))
            })
            .map_err(serve_error)?;
        Ok(timed(py, out)?.into_any())
    }

    /// The feature rows of `nodes`: an f32 array `[rows, dim]`, or with `stored` the rows in the
    /// dataset's dtype as little-endian bytes. `node_type`: none, as in `sample`.
    #[pyo3(signature = (nodes, timeout=None, token=None, stored=false, node_type=None))]
    fn features<'py>(
        &self,
        py: Python<'py>,
        nodes: PyReadonlyArray1<'py, i64>,
        timeout: Option<f64>,
        token: Option<PyRef<'py, CancelToken>>,
        stored: bool,
        node_type: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        untyped(node_type)?;
        let ids = seeds(&nodes, self.inner.num_nodes())?;
        let (deadline, token) = call_args(timeout, token)?;
        let rows = py
            .detach(|| self.inner.features(&ids, deadline, token))
            .map_err(serve_error)?;
        let stored = stored.then(|| self.dtype.unwrap_or(FeatureDtype::F32));
        rows_reply(py, rows, stored)
    }
}

/// An engine's counters as the dict of `InfoReply.stats`.
fn stats_dict(py: Python<'_>, s: ringgnn_serve::EngineStats) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("sample_requests", s.sample_requests)?;
    d.set_item("feature_requests", s.feature_requests)?;
    d.set_item("waves", s.waves)?;
    d.set_item("wave_requests", s.wave_requests)?;
    d.set_item("busy", s.busy)?;
    d.set_item("deadline_exceeded", s.deadline_exceeded)?;
    d.set_item("cancelled", s.cancelled)?;
    d.set_item("failed", s.failed)?;
    d.set_item("queued", s.queued)?;
    d.set_item("latency_buckets", s.latency.0)?;
    d.set_item("reads", s.reads)?;
    d.set_item("bytes_read", s.bytes_read)?;
    d.set_item("page_hits", s.page_hits)?;
    d.set_item("page_misses", s.page_misses)?;
    d.set_item("pages_cached", s.pages_cached)?;
    Ok(d)
}

/// The Python servicer's `dispatch(method, request, timeout, token)` as the gRPC server's
/// [`Delegate`] for Predict, Embed and Score: it returns `(0, reply bytes)` or `(code, message)`;
/// an exception it lets through is INTERNAL with its message.
struct PyDelegate(Py<PyAny>);

/// gRPC's INTERNAL.
const INTERNAL: i32 = 13;

impl Delegate for PyDelegate {
    fn call(
        &self,
        method: Method,
        request: &[u8],
        deadline: Option<Instant>,
        token: &ringgnn_serve::CancelToken,
    ) -> Result<Vec<u8>, Refusal> {
        Python::attach(|py| {
            let timeout =
                deadline.map(|d| d.saturating_duration_since(Instant::now()).as_secs_f64());
            let token = CancelToken {
                inner: token.clone(),
            };
            let answer = self
                .0
                .call1(
                    py,
                    (method.name(), PyBytes::new(py, request), timeout, token),
                )
                .and_then(|r| r.extract::<(i32, Py<PyAny>)>(py));
            match answer {
                Ok((0, reply)) => reply
                    .extract::<Vec<u8>>(py)
                    .map_err(|e| (INTERNAL, format!("the servicer's reply is not bytes: {e}"))),
                Ok((code, message)) => Err((code, message.bind(py).to_string())),
                Err(e) => Err((INTERNAL, e.value(py).to_string())),
            }
        })
    }
}

/// `ringgnn serve`'s gRPC server in Rust (tonic, `ringgnn_serve::grpc`): Sample, Features and
/// Info served without Python; Predict, Embed and Score through `delegate`.
#[pyclass(module = "ringgnn._core", frozen)]
pub struct GrpcServer {
    inner: Mutex<Option<ringgnn_serve::grpc::GrpcServer>>,
    port: u16,
}

#[pymethods]
impl GrpcServer {
    /// Bind `listen` and start serving `engine`; `delegate` (with a model) serves Predict,
    /// Embed and Score; `num_classes` and the `model_*` fields are what `Info` reports of them.
    #[new]
    #[pyo3(signature = (
        engine, listen, delegate, *, handlers, max_concurrent, max_message, dataset, num_classes=0,
        model=String::new(), model_run=String::new(), model_fanouts=Vec::new(), model_hidden=0,
        model_task=String::new(), model_decoder=String::new()
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        engine: &Bound<'_, PyAny>,
        listen: &str,
        delegate: Option<Py<PyAny>>,
        handlers: NonZeroUsize,
        max_concurrent: NonZeroUsize,
        max_message: usize,
        dataset: String,
        num_classes: i64,
        model: String,
        model_run: String,
        model_fanouts: Vec<i32>,
        model_hidden: i64,
        model_task: String,
        model_decoder: String,
    ) -> PyResult<Self> {
        let dtype = engine.cast::<Engine>().ok().and_then(|e| e.get().dtype);
        let eng = engine.cast::<ServedEngine>()?.get().served.clone();
        let opts = GrpcOptions {
            handlers: handlers.get(),
            max_concurrent: max_concurrent.get(),
            max_message,
            dataset,
            dtype,
            info: InfoFields {
                num_classes,
                model,
                model_run,
                model_fanouts,
                model_hidden,
                model_task,
                model_decoder,
                version: env!("CARGO_PKG_VERSION").into(),
            },
        };
        let delegate = delegate.map(|d| Arc::new(PyDelegate(d)) as Arc<dyn Delegate>);
        let server = py
            .detach(|| ringgnn_serve::grpc::GrpcServer::start(listen, eng, delegate, opts))
            .map_err(serve_error)?;
        Ok(GrpcServer {
            port: server.port(),
            inner: Mutex::new(Some(server)),
        })
    }

    #[getter]
    fn port(&self) -> u16 {
        self.port
    }

    /// Refuse new requests, let those in flight finish (`grace` seconds at most), close the
    /// engine. The GIL is released meanwhile: Predict, Embed and Score in flight need it.
    fn stop(&self, py: Python<'_>, grace: f64) {
        let server = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut s) = server {
            let grace = Duration::from_secs_f64(grace.clamp(0.0, 1e6));
            py.detach(move || s.stop(grace));
        }
    }
}

/// Feature rows as a features call answers them: the stored bytes in `stored`'s dtype (what the
/// gRPC reply carries), or a float32 `(rows, dim)` array when `stored` is None.
pub(crate) fn rows_reply<'py>(
    py: Python<'py>,
    rows: FeatureRows,
    stored: Option<FeatureDtype>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(dtype) = stored {
        let bytes = py.detach(|| rows.to_stored(dtype));
        return Ok(PyBytes::new(py, &bytes).into_any());
    }
    let (r, d) = (rows.rows, rows.dim);
    let arr: Bound<'py, PyArray2<f32>> = rows.data.into_pyarray(py).reshape([r, d])?;
    Ok(arr.into_any())
}
