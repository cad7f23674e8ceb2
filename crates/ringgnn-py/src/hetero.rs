//! `_core.HeteroGraph` and `_core.HeteroSampler`: heterogeneous neighbor sampling from Python.
//! A process holds one `HeteroGraph` (offset indexes and in-memory neighbor files, loaded once)
//! and one `HeteroSampler` per thread made from it (`ringgnn.HeteroNeighborSampler` does so):
//! a sampler's disk relations' read backends (an io_uring ring each, or file handles) belong to
//! it, and it is single-threaded. The graph itself is the loader crate's [`TypedGraph`], which
//! the typed loader's workers share too (`typed.rs`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ringgnn_io::{BackendKind, IoStats};
use ringgnn_loader::TypedGraph;
use ringgnn_sampler::{
    Fanout, HeteroRequest, HeteroSample, HeteroSampler as Core, TemporalStrategy, MAX_FANOUT,
};

use crate::errors::{input_error, LoaderError, SamplerError};

/// A fanout of one relation at one hop: `-1` (all), `0` (the relation is not sampled at that
/// hop) or a count up to `MAX_FANOUT`.
fn fanout(relation: &str, hop: usize, v: i64) -> PyResult<Fanout> {
    match v {
        -1 => Ok(Fanout::All),
        0 => Ok(Fanout::Count(0)),
        v if v > 0 && v <= MAX_FANOUT => Ok(Fanout::Count(v as u64)),
        v => Err(input_error(format!(
            "fanouts[{relation:?}][{hop}] = {v}: a fanout is -1 (all neighbors), 0 (skip the relation at that hop) or a count up to {MAX_FANOUT}"
        ))),
    }
}

/// A typed graph's neighbor backend by name: None for `memory` (files loaded), else how the
/// files not held are read: the names `_core.HeteroGraph` and `_core.HeteroEngine` take.
pub(crate) fn neighbor_backend(backend: &str) -> PyResult<Option<BackendKind>> {
    match backend {
        "memory" => Ok(None),
        "uring" => Ok(Some(BackendKind::Uring)),
        "pread" => Ok(Some(BackendKind::Pread)),
        "auto" => Ok(Some(BackendKind::Auto)),
        b => Err(input_error(format!(
            "backend '{b}' is unknown; use auto, memory, uring or pread"
        ))),
    }
}

/// Seeds per type as Python gives them: (node type name, ids).
type TypedSeeds<'py> = Vec<(String, PyReadonlyArray1<'py, i64>)>;

/// The relations of a heterogeneous dataset as every sampler of a process shares them
/// ([`TypedGraph`]: each offset index loaded once, and the neighbor files the caller's
/// placement holds in memory loaded once); `ringgnn.HeteroNeighborSampler` keeps one per
/// process, and a `HeteroSampler` per thread made from it.
#[pyclass(module = "ringgnn._core", frozen)]
pub struct HeteroGraph {
    pub(crate) inner: Arc<TypedGraph>,
}

#[pymethods]
impl HeteroGraph {
    /// `backend`: "memory" (every neighbor file loaded), "uring", "pread" or "auto" (io_uring,
    /// else pread) for the relations not in `memory_relations` (whose files are loaded).
    /// `times`: attach the dataset's edge and node times (false: none of their files is opened,
    /// and samples are drawn from every edge).
    #[new]
    #[pyo3(signature = (path, *, backend="auto", direct=false, memory_relations=Vec::new(), times=true))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        backend: &str,
        direct: bool,
        memory_relations: Vec<String>,
        times: bool,
    ) -> PyResult<Self> {
        let kind = neighbor_backend(backend)?;
        let inner = py
            .detach(|| TypedGraph::open(&path, kind, direct, &memory_relations, times))
            .map_err(LoaderError)?;
        Ok(HeteroGraph {
            inner: Arc::new(inner),
        })
    }

    /// Bytes held: offset indexes, the neighbor files in memory and the times held.
    #[getter]
    fn bytes(&self) -> u64 {
        self.inner.bytes()
    }
}

/// Fanouts per relation as Python gives them, checked: (relation, fanout per hop).
pub(crate) fn relation_fanouts(
    fanouts: Vec<(String, Vec<i64>)>,
) -> PyResult<Vec<(String, Vec<Fanout>)>> {
    fanouts
        .into_iter()
        .map(|(r, f)| {
            let hops = f
                .iter()
                .enumerate()
                .map(|(k, &v)| fanout(&r, k, v))
                .collect::<PyResult<Vec<_>>>()?;
            Ok((r, hops))
        })
        .collect()
}

/// Typed neighbor sampling over a [`HeteroGraph`]: one per thread (its disk relations' read
/// backends, an io_uring ring each or file handles, are its own).
#[pyclass(module = "ringgnn._core", frozen)]
pub struct HeteroSampler {
    inner: Mutex<Core>,
    types: Vec<String>,
    /// Node count of each type, to name a seed's type by name when it is out of range.
    counts: Vec<u64>,
    relations: Vec<String>,
    seed: u64,
    with_edge_ids: bool,
    backend: String,
    fallback: Option<String>,
}

#[pymethods]
impl HeteroSampler {
    /// `fanouts`: (relation `SRC:REL:DST`, fanout per hop) for every relation of `graph`;
    /// `disk_backend` ("uring", "pread" or "auto"): how this sampler reads the relations the
    /// graph does not hold in memory, instead of the graph's backend (a server's short-lived
    /// samplers use pread: a ring per relation costs more than their few reads).
    #[new]
    #[pyo3(signature = (graph, fanouts, *, replace=false, seed=0, with_edge_ids=false, disk_backend=None,
                        temporal_strategy="uniform"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        graph: &HeteroGraph,
        fanouts: Vec<(String, Vec<i64>)>,
        replace: bool,
        seed: u64,
        with_edge_ids: bool,
        disk_backend: Option<&str>,
        temporal_strategy: &str,
    ) -> PyResult<Self> {
        let strategy = temporal_strategy_arg(temporal_strategy)?;
        let disk = match disk_backend {
            None => None,
            Some("uring") => Some(BackendKind::Uring),
            Some("pread") => Some(BackendKind::Pread),
            Some("auto") => Some(BackendKind::Auto),
            Some(b) => {
                return Err(input_error(format!(
                    "disk_backend '{b}' is unknown; use auto, uring or pread"
                )))
            }
        };
        let names = graph.inner.relations();
        let fanouts = relation_fanouts(fanouts)?;
        let opened = py
            .detach(|| graph.inner.sampler(&fanouts, replace, disk))
            .map_err(LoaderError)?;
        let (mut inner, name, fallback) = (opened.sampler, opened.backend, opened.fallback);
        inner.set_temporal_strategy(strategy);
        Ok(HeteroSampler {
            inner: Mutex::new(inner),
            types: graph.inner.types().to_vec(),
            counts: graph.inner.counts().to_vec(),
            relations: names,
            seed,
            with_edge_ids,
            backend: name,
            fallback,
        })
    }

    /// "memory", "uring", "uring-direct" or "pread".
    #[getter]
    fn backend(&self) -> &str {
        &self.backend
    }

    /// Why "auto" fell back from io_uring to pread, or None.
    #[getter]
    fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Node type names and relation names, in the order of the core's indices.
    #[getter]
    fn node_types(&self) -> Vec<String> {
        self.types.clone()
    }

    #[getter]
    fn relations(&self) -> Vec<String> {
        self.relations.clone()
    }

    /// Sample batch `batch` of epoch `epoch` around `seeds` (ids of `seed_type`): a dict of
    /// `node`, `num_sampled_nodes` (per type), `row`, `col`, `num_sampled_edges` and `edge`
    /// (per relation; `edge` None unless asked for), and `time` (per type, with `times`: the
    /// seeds' times, parallel to `seeds`; else None).
    #[pyo3(signature = (seed_type, seeds, epoch=0, batch=0, times=None))]
    fn sample<'py>(
        &self,
        py: Python<'py>,
        seed_type: String,
        seeds: PyReadonlyArray1<'py, i64>,
        epoch: u64,
        batch: u64,
        times: Option<PyReadonlyArray1<'py, i64>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.sample_typed(
            py,
            vec![(seed_type, seeds)],
            epoch,
            batch,
            times.map(|t| vec![t]),
        )
    }

    /// [`Self::sample`] around seeds of several types at once: `seeds` is a list of
    /// (node type, ids) (a type given twice: its lists one after the other); every seeded
    /// type's frontier starts with its distinct seeds (`num_sampled_nodes[t][0]`).
    /// `times`: with seed times, one int64 array per list of `seeds` (parallel to its ids):
    /// the batch is sampled at those times (see `ringgnn_sampler::HeteroSampler`), and the
    /// dict's `time` gives each node's (its subgraph's seed time) per type.
    #[pyo3(signature = (seeds, epoch=0, batch=0, times=None))]
    fn sample_typed<'py>(
        &self,
        py: Python<'py>,
        seeds: TypedSeeds<'py>,
        epoch: u64,
        batch: u64,
        times: Option<Vec<PyReadonlyArray1<'py, i64>>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut outs = self.sample_many(py, vec![(seeds, batch)], epoch, times.map(|t| vec![t]))?;
        Ok(outs.pop().expect("one request, one sample"))
    }

    /// Sample several batches of epoch `epoch` together (a hyperbatch: each relation's file
    /// read once per hop for all of them): `requests` is a list of (seeds as in
    /// `sample_typed`, batch index); returns one dict per request, each the one `sample_typed`
    /// gives for that batch alone.
    /// `times`: with seed times, per request the times `sample_typed` takes.
    #[pyo3(signature = (requests, epoch=0, times=None))]
    fn sample_many<'py>(
        &self,
        py: Python<'py>,
        requests: Vec<(TypedSeeds<'py>, u64)>,
        epoch: u64,
        times: Option<Vec<Vec<PyReadonlyArray1<'py, i64>>>>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let typed = requests
            .iter()
            .map(|(seeds, batch)| Ok((self.typed_seeds(seeds)?, *batch)))
            .collect::<PyResult<Vec<_>>>()?;
        let times: Option<Vec<Vec<Vec<i64>>>> = match times {
            None => None,
            Some(t) if t.len() != typed.len() => {
                return Err(input_error(format!(
                "seed times for {} batches, but {} batches: give one list of seed times per batch",
                t.len(),
                typed.len()
            )))
            }
            Some(t) => Some(
                t.iter()
                    .map(|per| per.iter().map(|a| a.as_array().to_vec()).collect())
                    .collect(),
            ),
        };
        let outs: Vec<HeteroSample> = py
            .detach(|| {
                let refs: Vec<Vec<(usize, &[u64])>> = typed
                    .iter()
                    .map(|(s, _)| s.iter().map(|(t, v)| (*t, v.as_slice())).collect())
                    .collect();
                let time_refs: Option<Vec<Vec<&[i64]>>> = times.as_ref().map(|t| {
                    t.iter()
                        .map(|per| per.iter().map(Vec::as_slice).collect())
                        .collect()
                });
                let reqs: Vec<HeteroRequest> = refs
                    .iter()
                    .zip(&typed)
                    .enumerate()
                    .map(|(i, (seeds, (_, batch)))| HeteroRequest {
                        seeds,
                        batch: *batch,
                        times: time_refs.as_ref().map(|t| t[i].as_slice()),
                    })
                    .collect();
                let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
                s.sample_many(&reqs, self.seed, epoch, self.with_edge_ids)
            })
            .map_err(SamplerError)?;
        outs.into_iter()
            .map(|o| sample_dict(py, &self.types, &self.relations, o))
            .collect()
    }

    /// Upper bounds on one sample with `seeds[type]` seeds of each type given (others none):
    /// `nodes` per type, `edges` per relation, `hop_positions` (the largest relation's hop),
    /// `sample_bytes` (the sample as handed out) and `state_bytes` (what a batch of a
    /// hyperbatch holds at most while it is sampled, its sample and its share of the per-hop
    /// workspaces included).
    fn bound<'py>(
        &self,
        py: Python<'py>,
        seeds: std::collections::HashMap<String, u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut counts = vec![0u64; self.types.len()];
        for (name, n) in seeds {
            let Some(t) = self.types.iter().position(|x| *x == name) else {
                return Err(input_error(format!(
                    "seed type '{name}' is not a node type (the dataset has: {})",
                    self.types.join(", ")
                )));
            };
            counts[t] = n;
        }
        let b = py.detach(|| {
            self.inner
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .bound(&counts)
        });
        let d = PyDict::new(py);
        let nodes = PyDict::new(py);
        for (t, n) in self.types.iter().zip(&b.nodes) {
            nodes.set_item(t, n)?;
        }
        let edges = PyDict::new(py);
        for (r, e) in self.relations.iter().zip(&b.edges) {
            edges.set_item(r, e)?;
        }
        d.set_item("nodes", nodes)?;
        d.set_item("edges", edges)?;
        d.set_item("hop_positions", b.hop_positions)?;
        d.set_item("sample_bytes", b.sample_bytes(self.with_edge_ids))?;
        d.set_item("state_bytes", b.state_bytes(self.with_edge_ids))?;
        Ok(d)
    }

    /// Read counters summed over the relations: reads issued, bytes read, read batches.
    fn io_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s: IoStats = self
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .io_stats();
        let d = PyDict::new(py);
        d.set_item("reads", s.reads)?;
        d.set_item("bytes", s.bytes)?;
        d.set_item("batches", s.batches)?;
        Ok(d)
    }
}

impl HeteroSampler {
    /// Seeds per type from Python: each type name known, each id in its type's range (checked
    /// here too, so that the error names the type, where the core's names its index).
    fn typed_seeds(
        &self,
        seeds: &[(String, PyReadonlyArray1<'_, i64>)],
    ) -> PyResult<Vec<(usize, Vec<u64>)>> {
        let mut out = Vec::with_capacity(seeds.len());
        for (name, ids) in seeds {
            let Some(t) = self.types.iter().position(|x| x == name) else {
                return Err(input_error(format!(
                    "seed type '{name}' is not a node type (the dataset has: {})",
                    self.types.join(", ")
                )));
            };
            let a = ids.as_array();
            if let Some(&id) = a.iter().find(|&&x| x < 0) {
                return Err(input_error(format!(
                    "seed node {id} of node type {name} is negative: node ids are 0..num_nodes"
                )));
            }
            if let Some(&id) = a.iter().find(|&&x| x as u64 >= self.counts[t]) {
                let n = self.counts[t];
                return Err(input_error(format!(
                    "seed node {id} of node type {name} is out of range: that type has {n} \
                     nodes ({})",
                    ringgnn_store::IdRange(n)
                )));
            }
            out.push((t, a.iter().map(|&x| x as u64).collect()));
        }
        Ok(out)
    }
}

/// A core sample as the dict `HeteroSampler.sample` (and the server's typed `sample`) returns:
/// per node type (`types`) and per relation (`relations`), in the sampler's order.
pub(crate) fn sample_dict<'py>(
    py: Python<'py>,
    types: &[String],
    relations: &[String],
    out: HeteroSample,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let per = |names: &[String], v: Vec<Vec<u64>>| -> PyResult<Bound<'py, PyDict>> {
        let x = PyDict::new(py);
        for (n, a) in names.iter().zip(v) {
            let a: Vec<i64> = a.into_iter().map(|x| x as i64).collect();
            x.set_item(n, a.into_pyarray(py))?;
        }
        Ok(x)
    };
    let counts = |names: &[String], v: Vec<Vec<usize>>| -> PyResult<Bound<'py, PyDict>> {
        let x = PyDict::new(py);
        for (n, c) in names.iter().zip(v) {
            x.set_item(n, c)?;
        }
        Ok(x)
    };
    d.set_item("node", per(types, out.node)?)?;
    d.set_item("num_sampled_nodes", counts(types, out.num_sampled_nodes)?)?;
    d.set_item("row", per(relations, out.row)?)?;
    d.set_item("col", per(relations, out.col)?)?;
    d.set_item(
        "num_sampled_edges",
        counts(relations, out.num_sampled_edges)?,
    )?;
    match out.edge {
        Some(e) => d.set_item("edge", per(relations, e)?)?,
        None => d.set_item("edge", py.None())?,
    }
    match out.time {
        Some(t) => {
            let x = PyDict::new(py);
            for (n, a) in types.iter().zip(t) {
                x.set_item(n, a.into_pyarray(py))?;
            }
            d.set_item("time", x)?
        }
        None => d.set_item("time", py.None())?,
    }
    Ok(d)
}

/// `temporal_strategy` as Python gives it: "uniform" or "last".
pub(crate) fn temporal_strategy_arg(name: &str) -> PyResult<TemporalStrategy> {
    match name {
        "uniform" => Ok(TemporalStrategy::Uniform),
        "last" => Ok(TemporalStrategy::Last),
        s => Err(input_error(format!(
            "temporal_strategy '{s}' is unknown; use uniform (draw among the edges not newer than \
             the seed) or last (the most recent ones)"
        ))),
    }
}
