//! `_core.Sampler` and `_core.SamplerEpoch`: arguments to a [`SamplerConfig`], the pool's calls
//! with the GIL released, samples back as dicts of numpy arrays.
//!
//! Creating a `Sampler` reads the offset index and may probe io_uring (a ring made and closed
//! at once); it starts no thread and keeps no ring, so a `Sampler` made before a fork is safe to
//! use after it. Rings and threads appear on the first `sample()` / `epoch()`.

use std::path::PathBuf;
use std::time::Duration;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use ringgnn_sampler::{
    BackendChoice, BatchWork, EpochIter, Next, SampledSubgraph, SamplerConfig, SamplerPool,
};

use crate::errors::{input_error, SamplerError};

/// A sampler over one dataset with one configuration (`ringgnn.NeighborSampler` wraps it).
#[pyclass(module = "ringgnn._core", frozen)]
pub struct Sampler {
    pool: SamplerPool,
}

/// Node ids from numpy, checked to be non-negative (the pool checks the upper bound).
pub(crate) fn node_ids(seeds: &PyReadonlyArray1<'_, i64>) -> PyResult<Vec<u64>> {
    let s = seeds.as_array();
    if let Some(&id) = s.iter().find(|&&x| x < 0) {
        return Err(input_error(format!(
            "seed node {id} is negative: node ids are 0..num_nodes"
        )));
    }
    Ok(s.iter().map(|&x| x as u64).collect())
}

/// A sample with its arrays already int64 (converted outside the GIL; in place, no copy).
pub(crate) struct Converted {
    node: Vec<i64>,
    row: Vec<i64>,
    col: Vec<i64>,
    edge: Option<Vec<i64>>,
    num_sampled_nodes: Vec<usize>,
    num_sampled_edges: Vec<usize>,
}

pub(crate) fn ints(v: Vec<u64>) -> Vec<i64> {
    // Node and edge ids are below 2^63; numpy users index with int64.
    v.into_iter().map(|x| x as i64).collect()
}

impl From<SampledSubgraph> for Converted {
    fn from(s: SampledSubgraph) -> Self {
        Converted {
            node: ints(s.node),
            row: ints(s.row),
            col: ints(s.col),
            edge: s.edge.map(ints),
            num_sampled_nodes: s.num_sampled_nodes,
            num_sampled_edges: s.num_sampled_edges,
        }
    }
}

impl Converted {
    pub(crate) fn into_dict(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("node", self.node.into_pyarray(py))?;
        d.set_item("row", self.row.into_pyarray(py))?;
        d.set_item("col", self.col.into_pyarray(py))?;
        d.set_item("edge", self.edge.map(|e| e.into_pyarray(py)))?;
        d.set_item("num_sampled_nodes", self.num_sampled_nodes)?;
        d.set_item("num_sampled_edges", self.num_sampled_edges)?;
        Ok(d)
    }
}

#[pymethods]
impl Sampler {
    #[new]
    #[pyo3(signature = (
        path, fanouts, replace=false, backend="auto", direct=false, threads=None, seed=0,
        memory=None, with_edge_ids=false, prefetch=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        fanouts: Vec<i64>,
        replace: bool,
        backend: &str,
        direct: bool,
        threads: Option<usize>,
        seed: u64,
        memory: Option<u64>,
        with_edge_ids: bool,
        prefetch: Option<usize>,
    ) -> PyResult<Self> {
        let backend: BackendChoice = backend.parse().map_err(SamplerError)?;
        let mut cfg = SamplerConfig {
            fanouts,
            replace,
            backend,
            direct,
            seed,
            memory,
            with_edge_ids,
            ..Default::default()
        };
        if let Some(t) = threads {
            cfg.threads = t;
        }
        cfg.prefetch = prefetch.unwrap_or(2 * cfg.threads);
        let pool = py
            .detach(|| SamplerPool::open(&path, cfg))
            .map_err(SamplerError)?;
        Ok(Sampler { pool })
    }

    /// The backend in use: "memory", "uring", "uring-direct" or "pread".
    #[getter]
    fn backend(&self) -> &str {
        self.pool.backend_name()
    }

    /// Why `backend="auto"` did not pick io_uring, or None.
    #[getter]
    fn fallback_reason(&self) -> Option<&str> {
        self.pool.fallback_reason()
    }

    #[getter]
    fn num_nodes(&self) -> u64 {
        self.pool.num_nodes()
    }

    /// Upper bound on the bytes this sampler uses with batches of 1024 seeds.
    #[getter]
    fn memory_estimate(&self) -> u64 {
        self.pool.memory_estimate()
    }

    /// Sample mini-batch `batch` of epoch `epoch` around `seeds` on the calling thread.
    #[pyo3(signature = (seeds, epoch=0, batch=0))]
    fn sample<'py>(
        &self,
        py: Python<'py>,
        seeds: PyReadonlyArray1<'py, i64>,
        epoch: u64,
        batch: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let seeds = node_ids(&seeds)?;
        let out = py
            .detach(|| self.pool.sample(&seeds, epoch, batch).map(Converted::from))
            .map_err(SamplerError)?;
        out.into_dict(py)
    }

    /// Iterate one epoch on worker threads: `(batch_index, seeds, sample)` in order.
    #[pyo3(signature = (seeds, batch_size, shuffle=true, epoch=0, drop_last=false))]
    fn epoch(
        &self,
        py: Python<'_>,
        seeds: PyReadonlyArray1<'_, i64>,
        batch_size: usize,
        shuffle: bool,
        epoch: u64,
        drop_last: bool,
    ) -> PyResult<SamplerEpoch> {
        let seeds = node_ids(&seeds)?;
        let inner = py
            .detach(|| {
                self.pool
                    .epoch(seeds, batch_size, shuffle, epoch, drop_last)
            })
            .map_err(SamplerError)?;
        Ok(SamplerEpoch {
            len: inner.len(),
            inner: Some(inner),
        })
    }

    /// I/O counters over all samplers and epochs: reads issued, bytes read, read batches.
    fn io_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.pool.io_stats();
        let d = PyDict::new(py);
        d.set_item("reads", s.reads)?;
        d.set_item("bytes", s.bytes)?;
        d.set_item("batches", s.batches)?;
        Ok(d)
    }
}

/// The next item of an epoch, waiting with the GIL released in slices of 100 ms and checking
/// for signals between them: Ctrl-C raises `KeyboardInterrupt` at once even while the next
/// batch is seconds away (the epoch stays usable; dropping it stops its workers).
pub(crate) fn next_checking_signals<W: BatchWork>(
    py: Python<'_>,
    it: &mut EpochIter<W>,
) -> PyResult<Option<Result<W::Output, W::Error>>> {
    loop {
        match py.detach(|| it.next_within(Duration::from_millis(100))) {
            Next::Item(i) => return Ok(Some(i)),
            Next::End => return Ok(None),
            Next::NotYet => py.check_signals()?,
        }
    }
}

/// `(batch_index, seeds, sample)`, what `next()` of an epoch returns.
type BatchTuple<'py> = (u64, Bound<'py, PyArray1<i64>>, Bound<'py, PyDict>);

/// The batches of one epoch (`Sampler.epoch`). Its worker threads stop when it is exhausted,
/// fails, or is garbage collected.
#[pyclass(module = "ringgnn._core")]
pub struct SamplerEpoch {
    len: usize,
    /// `None` once finished, so the workers are joined as soon as possible.
    inner: Option<EpochIter>,
}

#[pymethods]
impl SamplerEpoch {
    fn __len__(&self) -> usize {
        self.len
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<BatchTuple<'py>>> {
        let Some(it) = self.inner.as_mut() else {
            return Ok(None);
        };
        let next = next_checking_signals(py, it)?
            .map(|r| r.map(|b| (b.index, ints(b.seeds), Converted::from(b.sample))));
        match next {
            None => {
                self.inner = None;
                Ok(None)
            }
            Some(Err(e)) => {
                self.inner = None;
                Err(SamplerError(e).into())
            }
            Some(Ok((index, seeds, sample))) => {
                Ok(Some((index, seeds.into_pyarray(py), sample.into_dict(py)?)))
            }
        }
    }
}
