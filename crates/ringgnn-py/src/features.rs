//! `_core.FeatureReader`: feature rows gathered from disk (page-coalesced, optional hot-row
//! cache) into a numpy float32 array, with the GIL released.
//!
//! The gatherer owns a read backend (an io_uring ring for `uring`), which must not cross a
//! fork: it is created on first use and again in any process whose id differs from its
//! creator's (PyTorch DataLoader workers fork). The cache is plain memory and is shared.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use numpy::{
    PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray2,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ringgnn_features::{
    Attention, BlockJob, Combine, FeatureFile, FeatureGatherer, Fold, GatherStats, HotRowCache,
    NeighborFile, Partitions, RowSource, Transform,
};
use ringgnn_io::{BackendKind, CoalesceOptions};
use ringgnn_loader::BackendChoice;
use ringgnn_store::manifest::{FeatureDtype, FeatureInfo};

use crate::errors::{input_error, FeaturesError, LoaderError, StoreError};

/// Gather counters as a dict (`FeatureReader.stats`, the loader's batch info and stats).
pub(crate) fn stats_dict<'py>(py: Python<'py>, s: &GatherStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("rows_requested", s.rows_requested)?;
    d.set_item("distinct_rows", s.distinct_rows)?;
    d.set_item("cache_hits", s.cache_hits)?;
    d.set_item("pages_read", s.pages_read)?;
    d.set_item("bytes_read", s.bytes_read)?;
    d.set_item("read_requests", s.read_requests)?;
    d.set_item("hit_rate", s.hit_rate())?;
    Ok(d)
}

#[pyclass(module = "ringgnn._core", frozen)]
pub struct FeatureReader {
    /// The rows: a dataset's feature file, or a matrix file in the same layout.
    file: FeatureFile,
    kind: BackendKind,
    direct: bool,
    memory: bool,
    cache: Option<Arc<HotRowCache>>,
    pub(crate) dim: usize,
    /// (process id that made it, the gatherer, why auto fell back to pread).
    gatherer: Mutex<Option<(u32, FeatureGatherer, Option<String>)>>,
    /// A `memory` reader's rows, loaded once and shared with its siblings and the typed
    /// loader's workers.
    loaded: Arc<std::sync::OnceLock<Arc<Vec<u8>>>>,
}

impl FeatureReader {
    fn make(&self) -> Result<(FeatureGatherer, Option<String>), ringgnn_features::Error> {
        let (source, why) = if self.memory {
            (RowSource::Memory(self.loaded()?), None)
        } else {
            RowSource::open(
                &self.file,
                self.kind,
                self.direct,
                CoalesceOptions::default(),
            )?
        };
        let g = FeatureGatherer::new(self.file.clone(), source);
        Ok(match &self.cache {
            Some(c) => (g.with_cache(c.clone())?, why),
            None => (g, why),
        })
    }

    /// A `memory` reader's rows, loaded on first use.
    fn loaded(&self) -> Result<Arc<Vec<u8>>, ringgnn_features::Error> {
        if let Some(m) = self.loaded.get() {
            return Ok(m.clone());
        }
        let m = self.file.load()?;
        Ok(self.loaded.get_or_init(|| m).clone())
    }

    /// Where this reader's rows come from, for the typed loader's workers (each makes its own
    /// gatherer; a `memory` file and the cache are shared).
    pub(crate) fn type_rows(
        &self,
    ) -> Result<ringgnn_loader::typed::TypeRows, ringgnn_features::Error> {
        Ok(ringgnn_loader::typed::TypeRows {
            file: self.file.clone(),
            memory: if self.memory {
                Some(self.loaded()?)
            } else {
                None
            },
            kind: self.kind,
            direct: self.direct,
            cache: self.cache.clone(),
        })
    }

    /// Run `f` on this process's gatherer, creating it first if needed.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut FeatureGatherer, &Option<String>) -> Result<T, ringgnn_features::Error>,
    ) -> Result<T, ringgnn_features::Error> {
        let mut slot = self.gatherer.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        if !matches!(&*slot, Some((p, _, _)) if *p == pid) {
            let (g, why) = self.make()?;
            *slot = Some((pid, g, why));
        }
        let (_, g, why) = slot.as_mut().expect("just made");
        f(g, why)
    }
}

/// The read backend of a backend name (the same names and rule as the sampler and the loader),
/// and whether the file is loaded into memory.
fn backend_of(backend: &str) -> PyResult<(BackendKind, bool)> {
    let choice: BackendChoice = backend.parse().map_err(LoaderError)?;
    let kind = match choice {
        BackendChoice::Uring => BackendKind::Uring,
        BackendChoice::Pread | BackendChoice::Memory => BackendKind::Pread,
        // Probed when the gatherer is made; the reason of a fallback is in `stats()`.
        BackendChoice::Auto => BackendKind::Auto,
    };
    Ok((kind, choice == BackendChoice::Memory))
}

#[pymethods]
impl FeatureReader {
    /// `backend`: "auto" | "uring" | "pread" (read from disk) or "memory" (load the file);
    /// `cache`: bytes of hot rows (highest in-degree) kept in memory, 0 for none;
    /// `cache_ids`: instead, exactly these rows (ascending, distinct node ids) kept in memory.
    #[new]
    /// `part`: a node type of a heterogeneous dataset (`node/TYPE`).
    #[pyo3(signature = (path, backend="auto", direct=false, cache=0, part=None, cache_ids=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        backend: &str,
        direct: bool,
        cache: u64,
        part: Option<&str>,
        cache_ids: Option<PyReadonlyArray1<'_, i64>>,
    ) -> PyResult<Self> {
        let (kind, memory) = backend_of(backend)?;
        let dataset = py
            .detach(|| crate::dataset::open_dataset(&path, part))
            .map_err(StoreError)?;
        let file = FeatureFile::of(&dataset).map_err(FeaturesError)?;
        let cache = if let Some(ids) = cache_ids {
            if cache > 0 {
                return Err(input_error(
                    "give the cache as bytes (cache) or as node ids (cache_ids), not both"
                        .to_string(),
                ));
            }
            let ids = ids.as_array();
            if let Some(&id) = ids.iter().find(|&&x| x < 0) {
                return Err(input_error(format!(
                    "cache_ids: node {id} is negative: node ids are 0..num_nodes"
                )));
            }
            let ids: Vec<u64> = ids.iter().map(|&x| x as u64).collect();
            if memory {
                None
            } else {
                let c = py
                    .detach(|| HotRowCache::build_from_ids(&dataset, ids))
                    .map_err(FeaturesError)?;
                Some(Arc::new(c))
            }
        } else if cache > 0 && !memory {
            let c = py
                .detach(|| HotRowCache::build_by_degree(&dataset, cache))
                .map_err(FeaturesError)?;
            Some(Arc::new(c))
        } else {
            None
        };
        Ok(FeatureReader {
            dim: file.dim(),
            file,
            kind,
            direct,
            memory,
            cache,
            gatherer: Mutex::new(None),
            loaded: Default::default(),
        })
    }

    /// A reader of a matrix of `rows` x `dim` values of `dtype` (f32, f16 or bf16; read as
    /// float32) stored in the layout of a dataset's feature file (`docs/FORMAT.md`: whole rows
    /// packed per 4 KiB page), e.g. one layer's outputs written by `ringgnn.infer`. No cache.
    #[staticmethod]
    #[pyo3(signature = (path, rows, dim, backend="auto", direct=false, dtype="f32"))]
    fn matrix(
        path: PathBuf,
        rows: u64,
        dim: u64,
        backend: &str,
        direct: bool,
        dtype: &str,
    ) -> PyResult<Self> {
        let dtype = FeatureDtype::parse(dtype).map_err(|e| input_error(e.to_string()))?;
        let (kind, memory) = backend_of(backend)?;
        if dim == 0 {
            return Err(input_error(format!(
                "{}: a matrix of 0 columns",
                path.display()
            )));
        }
        let file = FeatureFile {
            path,
            info: FeatureInfo::new(dim, dtype),
            num_nodes: rows,
        };
        Ok(FeatureReader {
            dim: dim as usize,
            file,
            kind,
            direct,
            memory,
            cache: None,
            gatherer: Mutex::new(None),
            loaded: Default::default(),
        })
    }

    /// A reader of the same rows with the same backend sharing this one's hot-row cache (held
    /// once), with a gatherer of its own: one per thread, as a gatherer serves one caller at a
    /// time. Its counters start at 0.
    fn sibling(&self) -> Self {
        FeatureReader {
            file: self.file.clone(),
            kind: self.kind,
            direct: self.direct,
            memory: self.memory,
            cache: self.cache.clone(),
            dim: self.dim,
            gatherer: Mutex::new(None),
            loaded: self.loaded.clone(),
        }
    }

    /// Bytes the hot-row cache holds (rows and their ids).
    #[getter]
    fn cache_bytes(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.bytes())
    }

    /// Feature width.
    #[getter]
    fn dim(&self) -> usize {
        self.dim
    }

    /// Rows held by the hot-row cache.
    #[getter]
    fn cached_rows(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.len())
    }

    /// The rows of `ids` (int64, any order, duplicates allowed) as a float32 array [len(ids), dim].
    fn gather<'py>(
        &self,
        py: Python<'py>,
        ids: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let ids = ids.as_array();
        if let Some(&id) = ids.iter().find(|&&x| x < 0) {
            return Err(input_error(format!(
                "node {id} is negative: node ids are 0..num_nodes"
            )));
        }
        let ids: Vec<u64> = ids.iter().map(|&x| x as u64).collect();
        let mut out = vec![0f32; ids.len() * self.dim];
        py.detach(|| self.with(|g, _| g.gather(&ids, &mut out)))
            .map_err(FeaturesError)?;
        let arr = numpy::PyArray1::from_vec(py, out);
        arr.reshape([ids.len(), self.dim])
    }

    /// Fold the in-neighbors' rows of destinations `a..a + len(indptr) - 1`, edges `lo..hi` of
    /// the neighbor file `neighbors` (ids of `id_bytes` bytes), into `acc` (float32, C order, a
    /// row per destination). `fold`: "sum" (every stored edge), "gcn" (with `dinv`, one float32
    /// per node: `dinv[u] * dinv[v]` weights, stored self loops dropped; the default when `dinv`
    /// is given), "max" (element-wise; `acc` starts at -inf) or "softmax" (GAT's attention with
    /// `a_dst`, float32 `[destinations, heads]`, and `negative_slope`; source rows are messages
    /// then logits, `acc` rows are the weighted sums, running maxima and sums of exponentials,
    /// see `ringgnn_features::fold`). `transform(rows)`, given, maps each piece's float32 rows
    /// `[n, dim]` to `[n, width]` before they are folded in (it runs with the GIL; a Python
    /// exception it raises stops the aggregation and is raised). `indptr`: the offset index of
    /// `a..=b`. Sources are read `piece_rows` at a time, on `threads` threads (0: all), with the
    /// GIL released. `prefetch`: the fold's prefetch distance in edges (None: the core's
    /// `ringgnn_features::PREFETCH`; 0: off), for `benchmarks/fold_bench.py`; it changes no
    /// result. Returns a dict: `neighbor_bytes` read from the neighbor file, `rows` (the
    /// distinct sources read), and the seconds of each phase (`sources`, `positions`,
    /// `read_wait`, `transform`, `fold`; `ringgnn_features::Times`).
    #[pyo3(signature = (acc, a, indptr, lo, hi, neighbors, id_bytes, dinv=None, piece_rows=1 << 20, threads=0,
                        fold=None, a_dst=None, negative_slope=0.2, transform=None, width=None, prefetch=None))]
    #[allow(clippy::too_many_arguments)]
    fn aggregate<'py>(
        &self,
        py: Python<'py>,
        mut acc: PyReadwriteArray2<'_, f32>,
        a: u64,
        indptr: PyReadonlyArray1<'_, i64>,
        lo: u64,
        hi: u64,
        neighbors: PathBuf,
        id_bytes: usize,
        dinv: Option<PyReadonlyArray1<'_, f32>>,
        piece_rows: usize,
        threads: usize,
        fold: Option<&str>,
        a_dst: Option<PyReadonlyArray2<'_, f32>>,
        negative_slope: f32,
        transform: Option<Py<PyAny>>,
        width: Option<usize>,
        prefetch: Option<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let indptr = indptr.as_array();
        if let Some(&x) = indptr.iter().find(|&&x| x < 0) {
            return Err(input_error(format!("indptr: offset {x} is negative")));
        }
        let indptr: Vec<u64> = indptr.iter().map(|&x| x as u64).collect();
        let fold = fold_of(fold, dinv.as_ref(), a_dst.as_ref(), negative_slope)?;
        let acc = acc
            .as_slice_mut()
            .map_err(|_| input_error("acc: a C-contiguous float32 array is needed".to_string()))?;
        let job = BlockJob {
            a,
            indptr: &indptr,
            lo,
            hi,
            fold,
            piece_rows,
            threads,
            prefetch: prefetch.unwrap_or(ringgnn_features::PREFETCH),
            dests: None,
        };
        let nb = NeighborFile {
            path: &neighbors,
            id_bytes,
        };
        let s = with_transform(py, transform.as_ref(), self.dim, width, |t| {
            self.with(|g, _| g.aggregate(nb, &job, t, acc))
        })?;
        aggregate_dict(py, &s)
    }

    /// Partition `q`'s bucket edges `e0..e1` of `parts` (a `SourcePartitions`) aggregated from
    /// this reader's rows and spilled as partials (`ringgnn_features::partition`): `fold`,
    /// `dinv`, `a_dst` (here of every node, `[num_nodes, heads]`), `negative_slope`,
    /// `transform`, `width`, `piece_rows` and `threads` as for :meth:`aggregate`. Returns its
    /// dict (`neighbor_bytes` 0: the bucket's bytes are counted by `parts.io`).
    #[pyo3(signature = (parts, q, e0, e1, dinv=None, piece_rows=1 << 20, threads=0, fold=None, a_dst=None,
                        negative_slope=0.2, transform=None, width=None))]
    #[allow(clippy::too_many_arguments)]
    fn partials<'py>(
        &self,
        py: Python<'py>,
        parts: &SourcePartitions,
        q: usize,
        e0: u64,
        e1: u64,
        dinv: Option<PyReadonlyArray1<'_, f32>>,
        piece_rows: usize,
        threads: usize,
        fold: Option<&str>,
        a_dst: Option<PyReadonlyArray2<'_, f32>>,
        negative_slope: f32,
        transform: Option<Py<PyAny>>,
        width: Option<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let fold = fold_of(fold, dinv.as_ref(), a_dst.as_ref(), negative_slope)?;
        let s = with_transform(py, transform.as_ref(), self.dim, width, |t| {
            let mut p = parts.inner.lock().unwrap_or_else(|e| e.into_inner());
            p.window(q, e0, e1, fold, piece_rows, threads, |nb, job, acc| {
                self.with(|g, _| g.aggregate(nb, job, t, acc))
            })
        })?;
        aggregate_dict(py, &s)
    }

    /// Read counters since creation (this process): rows, distinct rows, cache hits, pages and
    /// bytes read, read requests; and the backend in use.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (s, name, why) = self
            .with(|g, why| Ok((g.stats(), g.source_name(), why.clone())))
            .map_err(FeaturesError)?;
        let d = stats_dict(py, &s)?;
        d.set_item("backend", name)?;
        d.set_item("fallback_reason", why)?;
        Ok(d)
    }
}

/// Bytes one in-edge of a destination block takes at the peak of `FeatureReader.aggregate` on a
/// graph of `num_nodes` nodes (4 where node ids fit in 32 bits, else 8): what the inference
/// plan counts per edge of a block (`ringgnn_features::aggregate::edge_bytes`).
#[pyfunction]
pub fn aggregate_edge_bytes(num_nodes: u64) -> usize {
    ringgnn_features::aggregate::edge_bytes(num_nodes)
}

fn aggregate_dict<'py>(
    py: Python<'py>,
    s: &ringgnn_features::AggregateStats,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("neighbor_bytes", s.neighbor_bytes)?;
    d.set_item("rows", s.rows)?;
    let t = s.times;
    for (k, v) in [
        ("sources", t.sources),
        ("positions", t.positions),
        ("read_wait", t.read_wait),
        ("transform", t.transform),
        ("fold", t.fold),
    ] {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// The fold of `aggregate`'s and `partials`' arguments (see `FeatureReader.aggregate`).
fn fold_of<'a>(
    fold: Option<&str>,
    dinv: Option<&'a PyReadonlyArray1<'_, f32>>,
    a_dst: Option<&'a PyReadonlyArray2<'_, f32>>,
    negative_slope: f32,
) -> PyResult<Fold<'a>> {
    let dinv = dinv
        .map(|d| d.as_slice())
        .transpose()
        .map_err(|_| input_error("dinv: a contiguous float32 array is needed".to_string()))?;
    let heads = a_dst.map_or(0, |x| x.shape()[1]);
    let a_dst = a_dst
        .map(|d| d.as_slice())
        .transpose()
        .map_err(|_| input_error("a_dst: a C-contiguous float32 array is needed".to_string()))?;
    Ok(
        match (fold.unwrap_or(if dinv.is_some() { "gcn" } else { "sum" }), dinv, a_dst) {
            ("sum", None, None) => Fold::Sum,
            ("max", None, None) => Fold::Max,
            ("gcn", Some(d), None) => Fold::Gcn(d),
            ("softmax", None, Some(a_dst)) => Fold::Softmax(Attention {
                heads,
                negative_slope,
                a_dst,
            }),
            (f, _, _) => {
                return Err(input_error(format!(
                    "fold {f:?}: use sum or max (without dinv and a_dst), gcn (with dinv) or softmax (with a_dst)"
                )))
            }
        },
    )
}

/// Run `f` with the GIL released, handing it `transform` (a Python callable mapping a piece's
/// float32 rows `[n, dim]` to `[n, width]`) as a [`Transform`] that takes the GIL for each call;
/// a Python exception it raises stops `f` and is raised.
fn with_transform<T: Send>(
    py: Python<'_>,
    transform: Option<&Py<PyAny>>,
    dim: usize,
    width: Option<usize>,
    f: impl FnOnce(Option<Transform<'_>>) -> Result<T, ringgnn_features::Error> + Send,
) -> PyResult<T> {
    let out_width = match (transform, width) {
        (Some(_), Some(w)) => w,
        (None, None) => dim,
        _ => {
            return Err(input_error(
                "aggregate: give transform and width (its rows' values) together".to_string(),
            ))
        }
    };
    // A Python exception raised by the transform, raised again once the GIL is back.
    let mut raised: Option<PyErr> = None;
    let s = py.detach(|| {
        let mut apply = |rows: Vec<f32>, n: usize| -> Result<Vec<f32>, ringgnn_features::Error> {
            let f = transform.expect("only called with a transform");
            Python::attach(|py| {
                let call = || -> PyResult<Vec<f32>> {
                    let x = numpy::PyArray1::from_vec(py, rows).reshape([n, dim])?;
                    let got = f.call1(py, (x,))?;
                    let got: PyReadonlyArray2<'_, f32> = got.extract(py)?;
                    if got.shape() != [n, out_width] {
                        return Err(input_error(format!(
                            "aggregate: the transform returned an array of shape {:?} for {n} rows; \
                             [{n}, {out_width}] float32 is needed",
                            got.shape()
                        )));
                    }
                    Ok(got.as_array().iter().copied().collect())
                };
                call().map_err(|e| {
                    raised = Some(e);
                    ringgnn_features::Error::Input("aggregate: the transform raised".into())
                })
            })
        };
        let t = transform.map(|_| Transform {
            width: out_width,
            apply: &mut apply,
        });
        f(t)
    });
    if let Some(e) = raised {
        return Err(e);
    }
    s.map_err(|e| FeaturesError(e).into())
}

/// `_core.SourcePartitions`: one layer's source partitions and their temporaries in `dir`
/// (`ringgnn_features::partition`; `python/ringgnn/inference/partition.py` drives it): the buckets,
/// the spilled partials (written by `FeatureReader.partials`), and their merge per block.
#[pyclass(module = "ringgnn._core", frozen)]
pub struct SourcePartitions {
    inner: Mutex<Partitions>,
}

impl SourcePartitions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Partitions> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn u64s(name: &str, a: PyReadonlyArray1<'_, i64>) -> PyResult<Vec<u64>> {
    let a = a.as_array();
    if let Some(&x) = a.iter().find(|&&x| x < 0) {
        return Err(input_error(format!("{name}: {x} is negative")));
    }
    Ok(a.iter().map(|&x| x as u64).collect())
}

#[pymethods]
impl SourcePartitions {
    /// Sources cut at `bounds` (int64, ascending from 0 to the number of sources, which may differ
    /// from the `num_nodes` destinations: a typed relation), partials of `width` float32 values
    /// merged in the destination blocks between `merge` bounds (0..=num_nodes), ids `id_bytes` wide.
    #[new]
    #[pyo3(signature = (dir, bounds, merge, num_nodes, id_bytes, width, threads=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        dir: PathBuf,
        bounds: PyReadonlyArray1<'_, i64>,
        merge: PyReadonlyArray1<'_, i64>,
        num_nodes: u64,
        id_bytes: usize,
        width: usize,
        threads: usize,
    ) -> PyResult<Self> {
        let (bounds, merge) = (u64s("bounds", bounds)?, u64s("merge", merge)?);
        let p = Partitions::new(&dir, &bounds, &merge, num_nodes, id_bytes, width, threads)
            .map_err(FeaturesError)?;
        Ok(SourcePartitions {
            inner: Mutex::new(p),
        })
    }

    /// Bucket every edge of the neighbor file `neighbors` (offset index `indptr`) by source
    /// partition, `chunk_edges` at a time, on `threads` threads (0: all), the GIL released.
    #[pyo3(signature = (neighbors, indptr, drop_self_loops, chunk_edges, threads=0))]
    fn bucket(
        &self,
        py: Python<'_>,
        neighbors: PathBuf,
        indptr: PyReadonlyArray1<'_, i64>,
        drop_self_loops: bool,
        chunk_edges: usize,
        threads: usize,
    ) -> PyResult<()> {
        let indptr = u64s("indptr", indptr)?;
        py.detach(|| {
            let mut p = self.lock();
            let nb = NeighborFile {
                path: &neighbors,
                id_bytes: p.id_bytes(),
            };
            p.bucket(nb, &indptr, drop_self_loops, chunk_edges, threads)
        })
        .map_err(|e| FeaturesError(e).into())
    }

    /// The number of source partitions.
    #[getter]
    fn parts(&self) -> usize {
        self.lock().parts()
    }

    /// Edges bucketed in partition `q`.
    fn edges(&self, q: usize) -> PyResult<u64> {
        let p = self.lock();
        if q >= p.parts() {
            return Err(input_error(format!("no partition {q} of {}", p.parts())));
        }
        Ok(p.edges(q))
    }

    /// Remove partition `q`'s bucket files.
    fn remove_bucket(&self, q: usize) -> PyResult<()> {
        self.lock()
            .remove_bucket(q)
            .map_err(|e| FeaturesError(e).into())
    }

    /// Merge block `j`'s partials into `acc` (float32 `[rows, width]`, C order, set here):
    /// `fold` "sum" or "gcn" (added), "max" or "softmax" (with `heads`), `slice_rows` partials at
    /// a time per thread, the GIL released.
    #[pyo3(signature = (j, acc, fold, heads=0, slice_rows=1 << 16))]
    fn merge(
        &self,
        py: Python<'_>,
        j: usize,
        mut acc: PyReadwriteArray2<'_, f32>,
        fold: &str,
        heads: usize,
        slice_rows: usize,
    ) -> PyResult<()> {
        let how = match (fold, heads) {
            ("sum" | "gcn", 0) => Combine::Add,
            ("max", 0) => Combine::Max,
            ("softmax", h) if h > 0 => Combine::Softmax { heads: h },
            _ => {
                return Err(input_error(format!(
                    "merge: fold {fold:?} with {heads} heads: use sum, gcn or max (no heads) or softmax (heads > 0)"
                )))
            }
        };
        let acc = acc
            .as_slice_mut()
            .map_err(|_| input_error("acc: a C-contiguous float32 array is needed".to_string()))?;
        py.detach(|| self.lock().merge(j, how, acc, slice_rows))
            .map_err(|e| FeaturesError(e).into())
    }

    /// The merge blocks' bounds, as given.
    fn merge_bounds(&self) -> Vec<u64> {
        self.lock().merge_bounds()
    }

    /// Bytes written to and read from the temporaries, and read from the neighbor file.
    #[getter]
    fn io<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let io = self.lock().io;
        let d = PyDict::new(py);
        d.set_item("temp_written", io.written)?;
        d.set_item("temp_read", io.read)?;
        d.set_item("neighbor_bytes", io.neighbor_bytes)?;
        Ok(d)
    }
}
