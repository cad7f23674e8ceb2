//! `_core.HeteroEngine`: the request engine of `ringgnn serve` over a heterogeneous dataset
//! (`ringgnn_serve::HeteroEngine`), called from the server's handler threads with the GIL
//! released. Arguments are converted here (type names to indices, fanouts per relation), the
//! core call runs without the GIL, and its sample comes back as `_core.HeteroSampler.sample`'s
//! dict. What it answers as `_core.Engine` does is `_core.ServedEngine`'s (`serve`).

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use numpy::{IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::pyclass_init::PyClassInitializer;
use pyo3::types::PyDict;
use ringgnn_sampler::{fanouts_in_order, Fanout};
use ringgnn_serve::grpc::Served;
use ringgnn_serve::{EngineOptions, HeteroOptions, HeteroSampleRequest};
use ringgnn_store::hetero::{AnyManifest, ONE_RELATION};

use crate::errors::input_error;
use crate::errors::SamplerError;
use crate::hetero::temporal_strategy_arg;
use crate::hetero::{self, neighbor_backend, sample_dict};
use crate::serve::{
    call_args, limits, request_times, rows_reply, serve_error, CancelToken, ServedEngine,
};

/// Fanouts per relation from Python: (relation, one fanout per hop) for every relation, in any
/// order; returned in the engine's relation order.
fn relation_fanouts(
    names: &[String],
    given: Vec<(String, Vec<i64>)>,
) -> PyResult<Vec<Vec<Fanout>>> {
    Ok(fanouts_in_order(names, hetero::relation_fanouts(given)?).map_err(SamplerError)?)
}

/// The request engine over one heterogeneous dataset (see `ringgnn/serving`).
#[pyclass(module = "ringgnn._core", extends = ServedEngine, frozen)]
pub struct HeteroEngine {
    pub(crate) inner: Arc<ringgnn_serve::HeteroEngine>,
    relations: Vec<String>,
}

impl HeteroEngine {
    /// The index of a call's node type, which it must name.
    fn node_type(&self, name: Option<&str>) -> PyResult<usize> {
        let types = self.inner.node_types();
        let Some(name) = name else {
            return Err(input_error(format!(
                "node_type is required (the dataset has: {})",
                types.join(", ")
            )));
        };
        types.iter().position(|t| t == name).ok_or_else(|| {
            input_error(format!(
                "node_type '{name}' is not a node type (the dataset has: {})",
                types.join(", ")
            ))
        })
    }
}

#[pymethods]
impl HeteroEngine {
    /// `fanouts`: the defaults of requests that give none, (relation, fanout per hop) for every
    /// relation; `backend`: "memory" (every file loaded), else how the relations not in
    /// `memory_relations` and the feature files (unless `features_memory`) are read ("auto",
    /// "uring", "pread"); `neighbor_cache`: bytes of hot pages of the relations read from disk;
    /// `batch_size`: seeds of the wave each worker serves (a larger request is answered alone,
    /// in turn); `max_wait_us`: how long a wave waits for requests to join it;
    /// `queue`: requests waiting at most; `max_nodes`, `max_hops`: the limits of one request;
    /// `times`: open the dataset's times (false: none of their files, and requests at times
    /// are refused).
    #[new]
    #[pyo3(signature = (
        path, fanouts, *, backend="auto", direct=false, memory_relations=Vec::new(),
        features_memory=false, threads=None, seed=0, neighbor_cache=0, batch_size=None,
        max_wait_us=None, max_wave=EngineOptions::DEFAULT_MAX_WAVE, queue=EngineOptions::DEFAULT_QUEUE,
        max_nodes=4096, max_hops=6, temporal_strategy="uniform", times=true
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        fanouts: Vec<(String, Vec<i64>)>,
        backend: &str,
        direct: bool,
        memory_relations: Vec<String>,
        features_memory: bool,
        threads: Option<NonZeroUsize>,
        seed: u64,
        neighbor_cache: u64,
        batch_size: Option<NonZeroUsize>,
        max_wait_us: Option<u64>,
        max_wave: NonZeroUsize,
        queue: NonZeroUsize,
        max_nodes: usize,
        max_hops: usize,
        temporal_strategy: &str,
        times: bool,
    ) -> PyResult<PyClassInitializer<Self>> {
        let kind = neighbor_backend(backend)?;
        // A homogeneous dataset is served as its one-type case: its one relation.
        let names: Vec<String> =
            match AnyManifest::read(&path).map_err(crate::errors::StoreError)? {
                AnyManifest::Heterogeneous(m) => m.relations.keys().cloned().collect(),
                AnyManifest::Homogeneous(_) => vec![ONE_RELATION.to_string()],
            };
        let opts = HeteroOptions {
            fanouts: relation_fanouts(&names, fanouts)?,
            seed,
            threads: threads.unwrap_or_else(|| {
                std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
            }),
            backend: kind,
            direct,
            memory_relations,
            features_in_memory: features_memory,
            neighbor_cache,
            batch_size: batch_size.unwrap_or(EngineOptions::DEFAULT_WAVE_SEEDS),
            max_wait: max_wait_us.map_or(EngineOptions::DEFAULT_MAX_WAIT, Duration::from_micros),
            max_wave,
            queue,
            limits: limits(max_nodes, max_hops),
            temporal_strategy: temporal_strategy_arg(temporal_strategy)?,
            times,
        };
        let inner = py
            .detach(|| ringgnn_serve::HeteroEngine::open(&path, opts))
            .map_err(serve_error)?;
        let engine = HeteroEngine {
            relations: inner.relations(),
            inner: Arc::new(inner),
        };
        Ok(ServedEngine::init(Served::Typed(engine.inner.clone())).add_subclass(engine))
    }

    /// Node types, in name order, and their node counts.
    #[getter]
    fn node_types(&self) -> Vec<String> {
        self.inner.node_types().to_vec()
    }

    #[getter]
    fn num_nodes(&self) -> Vec<u64> {
        self.inner.num_nodes().to_vec()
    }

    /// Relations, in name order, and their edge counts.
    #[getter]
    fn relations(&self) -> Vec<String> {
        self.relations.clone()
    }

    #[getter]
    fn num_edges(&self) -> Vec<u64> {
        self.inner.num_edges()
    }

    /// Each type's (feature width, stored dtype), or None without features.
    #[getter]
    fn feature_info(&self) -> Vec<Option<(usize, &'static str)>> {
        self.inner
            .feature_info()
            .into_iter()
            .map(|f| f.map(|(d, t)| (d, t.name())))
            .collect()
    }

    /// The default fanouts: (relation, fanout per hop).
    #[getter]
    fn fanouts(&self) -> Vec<(String, Vec<i64>)> {
        self.relations
            .iter()
            .cloned()
            .zip(
                self.inner
                    .options()
                    .fanouts
                    .iter()
                    .map(|f| f.iter().map(|x| x.value()).collect()),
            )
            .collect()
    }

    #[getter]
    fn threads(&self) -> usize {
        self.inner.options().threads.get()
    }

    /// Whether the dataset has edge or node times (requests may give `time`/`seed_times`).
    #[getter]
    fn has_times(&self) -> bool {
        self.inner.has_times()
    }

    /// The sample of `nodes` of type `node_type` (`_core.HeteroSampler.sample`'s dict; `fanouts`
    /// per relation, default the engine's), and with `rows` a tuple of it and the f32 feature
    /// rows of its nodes per type with features (`{type: [n, dim]}`), from one wave; waiting at
    /// most `timeout` seconds, ending early once `token` is cancelled. `time` (every node) or
    /// `seed_times` (one per node): sampled at those times (the dict's `time` per type).
    #[pyo3(signature = (
        nodes, node_type=None, fanouts=None, replace=false, seed=None, edge_ids=false, rows=false,
        timeout=None, token=None, time=None, seed_times=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn sample<'py>(
        &self,
        py: Python<'py>,
        nodes: PyReadonlyArray1<'py, i64>,
        node_type: Option<&str>,
        fanouts: Option<BTreeMap<String, Vec<i64>>>,
        replace: bool,
        seed: Option<u64>,
        edge_ids: bool,
        rows: bool,
        timeout: Option<f64>,
        token: Option<PyRef<'py, CancelToken>>,
        time: Option<i64>,
        seed_times: Option<Vec<i64>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let t = self.node_type(node_type)?;
        let times = request_times(time, seed_times)?;
        let seeds = self
            .inner
            .check_ids(t, nodes.as_slice()?)
            .map_err(serve_error)?;
        let req = HeteroSampleRequest {
            seed_type: t,
            seeds,
            fanouts: match fanouts {
                Some(f) => relation_fanouts(&self.relations, f.into_iter().collect())?,
                None => self.inner.options().fanouts.clone(),
            },
            replace,
            seed: seed.unwrap_or(self.inner.options().seed),
            with_edge_ids: edge_ids,
            times,
        };
        let (deadline, token) = call_args(timeout, token)?;
        let (s, x) = py
            .detach(|| self.inner.sample(req, rows, deadline, token))
            .map_err(serve_error)?;
        let s = sample_dict(py, self.inner.node_types(), &self.relations, s)?;
        let Some(per) = x else {
            return Ok(s.into_any());
        };
        let d = PyDict::new(py);
        for (name, r) in self.inner.node_types().iter().zip(per) {
            if let Some(r) = r {
                let a: Bound<'py, PyArray2<f32>> =
                    r.data.into_pyarray(py).reshape([r.rows, r.dim])?;
                d.set_item(name, a)?;
            }
        }
        Ok((s, d).into_pyobject(py)?.into_any())
    }

    /// The feature rows of `nodes` of type `node_type`: an f32 array `[rows, dim]`, or with
    /// `stored` the rows in the type's stored dtype as little-endian bytes.
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
        let t = self.node_type(node_type)?;
        let ids = self
            .inner
            .check_ids(t, nodes.as_slice()?)
            .map_err(serve_error)?;
        let (deadline, token) = call_args(timeout, token)?;
        let rows = py
            .detach(|| self.inner.features(t, ids, deadline, token))
            .map_err(serve_error)?;
        let stored = stored.then(|| {
            let dtype = self.inner.feature_info()[t].map(|(_, d)| d);
            dtype.expect("a type with features")
        });
        rows_reply(py, rows, stored)
    }
}
