//! `_core.Loader`, `_core.LoaderEpoch` and `_core.HostBuffer`: the pipelined loader
//! ([`BatchLoader`]) for Python. Each batch's feature matrix reaches numpy (and, through
//! `torch.from_numpy`, PyTorch) without a copy: the array borrows the worker's buffer, owned by
//! a `HostBuffer` that gives it back to the loader's buffer pool when Python releases it.
//!
//! Like `Sampler`, a `Loader` starts no thread and keeps no ring until an epoch starts; each
//! epoch's workers make their own rings, so a `Loader` made before a fork works after it.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ringgnn_loader::{
    default_threads_among, BackendChoice, BatchLoader, BufferPool, CachePolicy, Epoch,
    FeatureOptions, LoadedBatch, LoaderOptions, Pinner,
};
use ringgnn_sampler::SampleOptions;

use crate::errors::{input_error, LoaderError, StoreError};
use crate::features::stats_dict;
use crate::sampler::{epoch_options, fanouts, ints, next_of, plan_dict, seeds, Converted, HOLD};

/// Owner of one batch's feature buffer while numpy/PyTorch use it.
#[pyclass(module = "ringgnn._core", frozen)]
pub struct HostBuffer {
    array: Option<Array2<f32>>,
    pool: Arc<BufferPool>,
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if let Some(a) = self.array.take() {
            self.pool.give(a.into_raw_vec_and_offset().0);
        }
    }
}

/// `x` (`rows * dim` values) as a numpy array `[rows, dim]` borrowing it, owned by a
/// `HostBuffer` that returns it to `pool`. The crate's one `unsafe` site.
#[allow(unsafe_code)]
fn exposed<'py>(
    py: Python<'py>,
    x: Vec<f32>,
    rows: usize,
    dim: usize,
    pool: Arc<BufferPool>,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let array = Array2::from_shape_vec((rows, dim), x)
        .map_err(|e| input_error(format!("feature buffer of the wrong size: {e}")))?;
    let owner = Bound::new(
        py,
        HostBuffer {
            array: Some(array),
            pool,
        },
    )?;
    let view = owner.get().array.as_ref().expect("set above");
    // SAFETY: the numpy array points into `owner.array`, and `owner` is the array's base
    // object, so it lives at least as long as the array. `HostBuffer` is frozen and its
    // `array` is only taken in `Drop`, so the buffer is neither moved nor reallocated while
    // the array exists.
    Ok(unsafe { PyArray2::borrow_from_array(view, owner.clone().into_any()) })
}

/// A [`Pinner`] calling two Python functions.
struct PyPinner {
    pin: Py<PyAny>,
    unpin: Py<PyAny>,
}

/// What a pinner's function raised: reported as unraisable (the buffer stays pageable).
fn unraisable(py: Python<'_>, f: &Py<PyAny>, r: PyResult<Py<PyAny>>) {
    if let Err(e) = r {
        e.write_unraisable(py, Some(f.bind(py)));
    }
}

impl Pinner for PyPinner {
    fn pin(&self, addr: usize, bytes: usize) {
        Python::attach(|py| unraisable(py, &self.pin, self.pin.call1(py, (addr, bytes))));
    }

    fn unpin(&self, addr: usize) {
        Python::attach(|py| unraisable(py, &self.unpin, self.unpin.call1(py, (addr,))));
    }
}

/// Sampling and feature gathering on worker threads within one memory budget
/// (`ringgnn.Loader` wraps it; loaders of one dataset share one).
#[pyclass(module = "ringgnn._core", frozen)]
pub struct Loader {
    inner: BatchLoader,
}

#[pymethods]
impl Loader {
    /// `cache`: bytes of hot rows (None: what the budget leaves); `cache_policy`: "presample"
    /// (access counts over `presample_batches` look-ahead batches of `presample_seeds`) or
    /// "degree"; `memory`: the whole budget (None: `reserve` plus half the available memory); `reserve`: bytes
    /// the caller needs besides the loader; `prefetch`: gathered batches ahead (None: auto);
    /// `processes`: local ranks each running a loader on this machine, which share its cores
    /// (default threads) and available memory (default budget) equally (None: 1).
    #[new]
    #[pyo3(signature = (
        path, fanouts, batch_size, replace=false, backend="auto", direct=false, threads=None,
        seed=0, memory=None, reserve=0, cache=None, cache_policy="presample",
        presample_batches=64, presample_seeds=None, prefetch=None, hold=HOLD, feature_backend=None,
        hyperbatch="auto", staging_dir=None, staging_cap=None, processes=None, spill="auto"
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        fanouts: Vec<i64>,
        batch_size: NonZeroUsize,
        replace: bool,
        backend: &str,
        direct: bool,
        threads: Option<NonZeroUsize>,
        seed: u64,
        memory: Option<u64>,
        reserve: u64,
        cache: Option<u64>,
        cache_policy: &str,
        presample_batches: usize,
        presample_seeds: Option<PyReadonlyArray1<'_, i64>>,
        prefetch: Option<NonZeroUsize>,
        hold: NonZeroUsize,
        feature_backend: Option<&str>,
        hyperbatch: &str,
        staging_dir: Option<PathBuf>,
        staging_cap: Option<u64>,
        processes: Option<NonZeroUsize>,
        spill: &str,
    ) -> PyResult<Self> {
        let processes = processes.unwrap_or(NonZeroUsize::MIN);
        let backend: BackendChoice = backend.parse().map_err(LoaderError)?;
        let features = FeatureOptions {
            backend: match feature_backend {
                Some(b) => b.parse().map_err(LoaderError)?,
                None => backend,
            },
            cache,
            cache_policy: cache_policy
                .parse::<CachePolicy>()
                .map_err(LoaderError)?
                .with_batches(presample_batches),
            staging_dir: staging_dir.clone(),
            staging_cap,
        };
        let opts = LoaderOptions {
            sample: SampleOptions {
                fanouts: self::fanouts(&fanouts)?,
                replace,
                seed,
                with_edge_ids: false,
            },
            backend,
            direct,
            threads: threads.unwrap_or_else(|| default_threads_among(processes)),
            memory,
            reserve,
            features: Some(features),
            batch_size,
            prefetch,
            hold,
            hyperbatch: hyperbatch.parse().map_err(LoaderError)?,
            // Loading hyperbatches spill their samples when that holds more batches (`Spill`);
            // the spill file goes where the staging file does: both are scratch on the SSD.
            spill: spill.parse().map_err(LoaderError)?,
            spill_dir: staging_dir,
            neighbor_cache: LoaderOptions::default().neighbor_cache,
            processes,
        };
        let presample = match &presample_seeds {
            None => None,
            Some(a) => {
                let ds = py
                    .detach(|| ringgnn_store::Dataset::open(&path))
                    .map_err(StoreError)?;
                Some(seeds(a, ds.num_nodes())?)
            }
        };
        let inner = py
            .detach(|| BatchLoader::open(&path, opts, presample.as_ref()))
            .map_err(LoaderError)?;
        Ok(Loader { inner })
    }

    /// The sampler's backend: "memory", "uring", "uring-direct" or "pread".
    #[getter]
    fn backend(&self) -> &str {
        self.inner.backend_name()
    }

    /// How feature rows are read: "memory", "uring", "pread", ...
    #[getter]
    fn feature_backend(&self) -> &str {
        self.inner.feature_backend()
    }

    /// Why `auto` did not use io_uring (sampler or features), or None.
    #[getter]
    fn fallback_reason(&self) -> Option<&str> {
        self.inner.fallback_reason()
    }

    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    #[getter]
    fn num_nodes(&self) -> u64 {
        self.inner.num_nodes()
    }

    /// Pin the batch buffers from now on: `pin(address, bytes)` is called once for each
    /// buffer when it is first handed out (its whole capacity), `unpin(address)` before the
    /// buffer is freed (e.g. `cudaHostRegister`/`cudaHostUnregister`). Returns False when the
    /// buffers are already pinned (or the loader gathers no features). The callables run on
    /// worker threads holding the GIL; what they raise is reported as unraisable, and the
    /// buffer stays as it is (pageable).
    fn pin_buffers(&self, pin: Py<PyAny>, unpin: Py<PyAny>) -> bool {
        match self.inner.buffers() {
            Some(pool) => pool.pin_with(Arc::new(PyPinner { pin, unpin })),
            None => false,
        }
    }

    /// A device holds the rows of `ids` (node ids, int64): from now on each batch's `x` holds
    /// only the rows of its other nodes, in the order of `node`. Once per loader (shared by the
    /// loaders made with `share=`). Returns the number of distinct rows.
    fn set_device_rows(&self, py: Python<'_>, ids: PyReadonlyArray1<'_, i64>) -> PyResult<usize> {
        let ids = ids
            .as_array()
            .iter()
            .map(|&v| {
                u64::try_from(v)
                    .map_err(|_| input_error(format!("device row {v} is not a node id")))
            })
            .collect::<PyResult<Vec<u64>>>()?;
        Ok(py
            .detach(|| self.inner.set_device_rows(&ids))
            .map_err(LoaderError)?)
    }

    /// Rows a device holds (see `set_device_rows`).
    #[getter]
    fn device_rows(&self) -> usize {
        self.inner.device_rows()
    }

    /// Buffers pinned now (see `pin_buffers`).
    #[getter]
    fn pinned_buffers(&self) -> usize {
        self.inner.buffers().map_or(0, |p| p.pinned_count())
    }

    /// How the memory budget was split (bytes), and the prefetch depth chosen.
    fn plan<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        plan_dict(py, &self.inner.plan())
    }

    /// Counters over every batch so far: batches, worker seconds sampling and gathering,
    /// feature reads (rows, cache hits, pages and bytes read), the cache and its look-ahead.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = stats_dict(py, &s.gather)?;
        d.set_item("batches", s.batches)?;
        d.set_item("sample_seconds", s.sample_seconds)?;
        d.set_item("gather_seconds", s.gather_seconds)?;
        d.set_item("cached_rows", s.cached_rows)?;
        d.set_item("cache_bytes", s.cache_bytes)?;
        d.set_item("presample_seconds", s.presample_seconds)?;
        d.set_item("presample_batches", s.presample_batches)?;
        d.set_item("staged_hyperbatches", s.staged_hyperbatches)?;
        d.set_item("unstaged_hyperbatches", s.unstaged_hyperbatches)?;
        d.set_item("est_per_batch_seconds", s.est_per_batch_seconds)?;
        d.set_item("est_staged_seconds", s.est_staged_seconds)?;
        d.set_item("staging_pass_bytes", s.staging_pass_bytes)?;
        d.set_item("staging_written_bytes", s.staging_written_bytes)?;
        d.set_item("staging_seconds", s.staging_seconds)?;
        d.set_item("staging_load_seconds", s.staging_load_seconds)?;
        d.set_item("staging_write_seconds", s.staging_write_seconds)?;
        d.set_item("staged_gather_seconds", s.staged_gather_seconds)?;
        d.set_item("staged_read_seconds", s.staged_read_seconds)?;
        d.set_item("random_gather_seconds", s.random_gather_seconds)?;
        d.set_item("staging_needed_bytes", s.staging_needed_bytes)?;
        for (k, v) in crate::sampler::io_dict(py, &self.inner)?.iter() {
            d.set_item(format!("sampler_{}", k.extract::<String>()?), v)?;
        }
        d.set_item("backend", self.inner.backend_name())?;
        d.set_item("feature_backend", self.inner.feature_backend())?;
        Ok(d)
    }

    /// Iterate one epoch: see `LoaderEpoch.__next__`; `batches` selects global batch indices
    /// (a rank's share), default all; `bounds` gives the batches (`seeds[bounds[i]:bounds[i +
    /// 1]]` is batch `indices[i]`: link batches) instead of a cut.
    #[pyo3(signature = (seeds, batch_size, shuffle=true, epoch=0, drop_last=false, batches=None, bounds=None, indices=None))]
    #[allow(clippy::too_many_arguments)]
    fn epoch(
        &self,
        py: Python<'_>,
        seeds: PyReadonlyArray1<'_, i64>,
        batch_size: NonZeroUsize,
        shuffle: bool,
        epoch: u64,
        drop_last: bool,
        batches: Option<Vec<u64>>,
        bounds: Option<Vec<usize>>,
        indices: Option<Vec<u64>>,
    ) -> PyResult<LoaderEpoch> {
        let seeds = self::seeds(&seeds, self.inner.num_nodes())?;
        let e = epoch_options(
            batch_size, shuffle, epoch, drop_last, batches, bounds, indices,
        )?;
        let inner = py
            .detach(|| self.inner.epoch(&seeds, &e))
            .map_err(LoaderError)?;
        let buffers = self.inner.buffers().expect("a Loader always has features");
        Ok(LoaderEpoch {
            len: inner.len(),
            inner: Some(inner),
            buffers,
            dim: self.inner.dim(),
        })
    }
}

/// `(batch_index, seeds, sample, x, y, info)`, what `next()` of a loader epoch returns.
type LoadedTuple<'py> = (
    u64,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyDict>,
    Bound<'py, PyArray2<f32>>,
    Option<Bound<'py, PyArray1<i64>>>,
    Bound<'py, PyDict>,
);

/// The batches of one loader epoch. Its workers stop when it is exhausted, fails, or is
/// garbage collected.
#[pyclass(module = "ringgnn._core")]
pub struct LoaderEpoch {
    len: usize,
    inner: Option<Epoch<LoadedBatch>>,
    buffers: Arc<BufferPool>,
    dim: usize,
}

#[pymethods]
impl LoaderEpoch {
    fn __len__(&self) -> usize {
        self.len
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// `(batch_index, seeds, sample, x, y, info)`: `sample` as `Sampler.sample` gives it, `x`
    /// float32 `[len(sample["node"]), dim]`, `y` int64 or None, `info` the worker's seconds
    /// (`sample`, `wait`, `gather`) and this batch's read counters.
    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<LoadedTuple<'py>>> {
        let Some(b) = next_of(py, &mut self.inner)? else {
            return Ok(None);
        };
        // Fewer rows than nodes when a device holds some (`Loader.set_device_rows`).
        let rows = b.x.len() / self.dim.max(1);
        let info = stats_dict(py, &b.stats)?;
        info.set_item("sample", b.sample_time.as_secs_f64())?;
        info.set_item("wait", b.wait_time.as_secs_f64())?;
        info.set_item("gather", b.gather_time.as_secs_f64())?;
        let x = exposed(py, b.x, rows, self.dim, self.buffers.clone())?;
        let y = b.y.map(|y| y.into_pyarray(py));
        let seeds = ints(b.seeds).into_pyarray(py);
        let sample = Converted::from(b.sample).into_dict(py)?;
        Ok(Some((b.index, seeds, sample, x, y, info)))
    }
}
