//! `_core.FeatureReader`: feature rows gathered from disk (page-coalesced, optional hot-row
//! cache) into a numpy float32 array, with the GIL released.
//!
//! The gatherer owns a read backend (an io_uring ring for `uring`), which must not cross a
//! fork: it is created on first use and again in any process whose id differs from its
//! creator's (PyTorch DataLoader workers fork). The cache is plain memory and is shared.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use numpy::{PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadwriteArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ringgnn_features::{
    BlockJob, FeatureFile, FeatureGatherer, GatherStats, HotRowCache, NeighborFile, RowSource,
    Weighting,
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
    dim: usize,
    /// (process id that made it, the gatherer, why auto fell back to pread).
    gatherer: Mutex<Option<(u32, FeatureGatherer, Option<String>)>>,
}

impl FeatureReader {
    fn make(&self) -> Result<(FeatureGatherer, Option<String>), ringgnn_features::Error> {
        let (source, why) = if self.memory {
            (RowSource::memory(&self.file)?, None)
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
        })
    }

    /// A reader of a float32 matrix of `rows` x `dim` stored in the layout of a dataset's
    /// feature file (`docs/FORMAT.md`: whole rows packed per 4 KiB page), e.g. one layer's
    /// outputs written by `ringgnn.infer`. No cache.
    #[staticmethod]
    #[pyo3(signature = (path, rows, dim, backend="auto", direct=false))]
    fn matrix(path: PathBuf, rows: u64, dim: u64, backend: &str, direct: bool) -> PyResult<Self> {
        let (kind, memory) = backend_of(backend)?;
        if dim == 0 {
            return Err(input_error(format!(
                "{}: a matrix of 0 columns",
                path.display()
            )));
        }
        let file = FeatureFile {
            path,
            info: FeatureInfo::new(dim, FeatureDtype::F32),
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

    /// Add the in-neighbors' rows of destinations `a..a + len(indptr) - 1`, edges `lo..hi` of
    /// the neighbor file `neighbors` (ids of `id_bytes` bytes), into `acc` (float32
    /// `[len(indptr) - 1, dim]`, C order): plain sums, or with `dinv` (one float32 per node)
    /// GCN's `dinv[u] * dinv[v]` weights with stored self loops dropped. `indptr`: the offset
    /// index of `a..=b`. Sources are read `piece_rows` at a time, on `threads` threads (0: all),
    /// with the GIL released. Returns the bytes read from the neighbor file.
    #[pyo3(signature = (acc, a, indptr, lo, hi, neighbors, id_bytes, dinv=None, piece_rows=1 << 20, threads=0))]
    #[allow(clippy::too_many_arguments)]
    fn aggregate(
        &self,
        py: Python<'_>,
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
    ) -> PyResult<u64> {
        let indptr = indptr.as_array();
        if let Some(&x) = indptr.iter().find(|&&x| x < 0) {
            return Err(input_error(format!("indptr: offset {x} is negative")));
        }
        let indptr: Vec<u64> = indptr.iter().map(|&x| x as u64).collect();
        let dinv = dinv
            .as_ref()
            .map(|d| d.as_slice())
            .transpose()
            .map_err(|_| input_error("dinv: a contiguous float32 array is needed".to_string()))?;
        let acc = acc
            .as_slice_mut()
            .map_err(|_| input_error("acc: a C-contiguous float32 array is needed".to_string()))?;
        let job = BlockJob {
            a,
            indptr: &indptr,
            lo,
            hi,
            weighting: match dinv {
                Some(d) => Weighting::Gcn(d),
                None => Weighting::Sum,
            },
            piece_rows,
            threads,
        };
        let nb = NeighborFile {
            path: &neighbors,
            id_bytes,
        };
        let s = py
            .detach(|| self.with(|g, _| g.aggregate(nb, &job, acc)))
            .map_err(FeaturesError)?;
        Ok(s.neighbor_bytes)
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
