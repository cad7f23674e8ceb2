//! `_core.Sampler` and `_core.SamplerEpoch`: a [`BatchLoader`] opened for samples alone, its
//! calls with the GIL released, samples back as dicts of numpy arrays. Also the conversions the
//! loader binding shares: fanouts and seeds into their typed forms (the core's one rule for
//! each), an epoch's options, the memory plan as a dict, and the signal-checking wait for an
//! epoch's next item.
//!
//! Creating a `Sampler` reads the offset index (and the neighbor file when the plan holds it in
//! memory) and may probe io_uring (a ring made and closed at once); it starts no thread and
//! keeps no ring, so a `Sampler` made before a fork is safe to use after it. Rings and threads
//! appear on the first `sample()` / `epoch()`.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use ringgnn_loader::{
    Batch, BatchLists, BatchLoader, Epoch, EpochOptions, LoaderOptions, MemoryPlan, Next,
};
use ringgnn_sampler::{
    parse_fanouts as parse_fanout_text, Fanout, SampleOptions, SampledSubgraph, Seeds,
};

use crate::errors::{input_error, LoaderError, SamplerError};

/// Defaults of the signatures: a plain `for` loop's hold, the plan's default batch.
pub(crate) const HOLD: NonZeroUsize = NonZeroUsize::new(2).unwrap();
pub(crate) const PLAN_BATCH: NonZeroUsize =
    NonZeroUsize::new(ringgnn_loader::budget::DEFAULT_PLAN_BATCH).unwrap();

/// The fanouts of a list of integers, by the core's one rule ([`Fanout::parse_all`]).
pub(crate) fn fanouts(values: &[i64]) -> PyResult<Vec<Fanout>> {
    Ok(Fanout::parse_all(values).map_err(SamplerError)?)
}

/// `ringgnn._options.fanouts`: fanouts from text ("20,15,10") or a sequence of integers,
/// checked by the core's rule, as a list of ints.
#[pyfunction]
pub fn parse_fanouts(value: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let parsed = if let Ok(s) = value.cast::<PyString>() {
        parse_fanout_text(&s.to_cow()?).map_err(SamplerError)?
    } else {
        let values: Vec<i64> = value.extract().map_err(|_| {
            input_error(format!(
                "fanouts must be integers such as [20, 15, 10] or text such as \"20,15,10\", \
                 not {}",
                value.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ))
        })?;
        fanouts(&values)?
    };
    Ok(parsed.iter().map(|f| f.value()).collect())
}

/// Bytes the offset index of `nodes` nodes and `edges` edges holds in memory, as the sampler
/// lays it out (`ringgnn_sampler::Offsets::bytes_for`): what a plan counts before loading it.
#[pyfunction]
pub fn offset_index_bytes(nodes: u64, edges: u64) -> u64 {
    ringgnn_sampler::Offsets::bytes_for(nodes + 1, edges)
}

/// Seeds from numpy int64, checked once against the graph (negative ids too).
pub(crate) fn seeds(arr: &PyReadonlyArray1<'_, i64>, num_nodes: u64) -> PyResult<Seeds> {
    let a = arr.as_array();
    let r = match a.as_slice() {
        Some(s) => Seeds::from_signed(s, num_nodes),
        None => Seeds::from_signed(&a.iter().copied().collect::<Vec<_>>(), num_nodes),
    };
    Ok(r.map_err(SamplerError)?)
}

/// The epoch's cut and selection, from the binding's arguments: `bounds` and `indices` (the
/// global index of each of those batches) give the caller's own batches instead of a cut.
pub(crate) fn epoch_options(
    batch_size: NonZeroUsize,
    shuffle: bool,
    epoch: u64,
    drop_last: bool,
    batches: Option<Vec<u64>>,
    bounds: Option<Vec<usize>>,
    indices: Option<Vec<u64>>,
) -> PyResult<EpochOptions> {
    let lists = match (bounds, indices) {
        (None, None) => None,
        (Some(bounds), Some(indices)) => Some(BatchLists { bounds, indices }),
        _ => {
            return Err(input_error(
                "bounds and indices go together: give both or neither".into(),
            ))
        }
    };
    Ok(EpochOptions {
        batch_size,
        shuffle,
        epoch,
        drop_last,
        batches,
        lists,
    })
}

/// How the memory budget was split (bytes), and the batches ahead chosen.
pub(crate) fn plan_dict<'py>(py: Python<'py>, p: &MemoryPlan) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("budget", p.budget)?;
    d.set_item("slack", p.slack)?;
    d.set_item("reserve", p.reserve)?;
    d.set_item("sampler", p.sampler)?;
    d.set_item("neighbor_file", p.neighbor_file)?;
    d.set_item("labels", p.labels)?;
    d.set_item("gather", p.gather)?;
    d.set_item("buffers", p.buffers)?;
    d.set_item("features", p.features)?;
    d.set_item("cache", p.cache)?;
    d.set_item("neighbor_cache", p.neighbor_cache)?;
    d.set_item("total", p.total())?;
    d.set_item("prefetch", p.prefetch)?;
    d.set_item("hold", p.hold)?;
    d.set_item("neighbors_in_memory", p.neighbors_in_memory)?;
    d.set_item("features_in_memory", p.features_in_memory)?;
    d.set_item("hyperbatch", p.hyperbatch)?;
    d.set_item("hyperbatch_size", p.hyperbatch_size)?;
    d.set_item("note", p.note.clone())?;
    d.set_item("workers", p.workers)?;
    d.set_item("cost_seconds", p.cost_ms as f64 / 1000.0)?;
    d.set_item("why", p.why.clone())?;
    d.set_item("text", p.to_string())?;
    Ok(d)
}

/// What a command's default memory budget may grow the process by: half of the machine's
/// `MemAvailable`, or 7/8 of the room under the memory cgroups above the process (v1 or v2),
/// never into its last `KERNEL_FLOOR`, when that is less; `None` when neither can be read. The
/// one rule every command's default follows (`ringgnn_loader::budget::default_budget`).
#[pyfunction]
pub fn default_budget() -> Option<u64> {
    ringgnn_loader::budget::default_budget().map(|d| d.growth)
}

/// The refusal of a default `budget` (what the process holds, `held`, plus the default growth)
/// below the `least` a command needs, when a memory cgroup bounds the default: the message
/// naming the cgroup's limit, the least budget and the least limit
/// (`ringgnn_loader::budget::DefaultBudget::refusal`); `None` otherwise.
#[pyfunction]
pub fn default_refusal(budget: u64, least: u64, held: u64) -> Option<String> {
    ringgnn_loader::budget::default_budget()?.refusal(budget, least, held, 1)
}

/// A sampler over one dataset with one configuration (`ringgnn.NeighborSampler` wraps it).
#[pyclass(module = "ringgnn._core", frozen)]
pub struct Sampler {
    inner: BatchLoader,
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
    /// `memory`: the whole process's budget (None: `reserve` plus half the available memory), of which
    /// `reserve` is the caller's; `batch_size`: the largest batch the plan is made for (a larger
    /// one is accepted when the plan still fits); `prefetch`: batches sampled ahead.
    #[new]
    #[pyo3(signature = (
        path, fanouts, replace=false, backend="auto", direct=false, threads=None, seed=0,
        memory=None, reserve=0, with_edge_ids=false, prefetch=None, batch_size=PLAN_BATCH,
        hyperbatch="auto", spill="auto", spill_dir=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        fanouts: Vec<i64>,
        replace: bool,
        backend: &str,
        direct: bool,
        threads: Option<NonZeroUsize>,
        seed: u64,
        memory: Option<u64>,
        reserve: u64,
        with_edge_ids: bool,
        prefetch: Option<NonZeroUsize>,
        batch_size: NonZeroUsize,
        hyperbatch: &str,
        spill: &str,
        spill_dir: Option<PathBuf>,
    ) -> PyResult<Self> {
        let defaults = LoaderOptions::default();
        let opts = LoaderOptions {
            sample: SampleOptions {
                fanouts: self::fanouts(&fanouts)?,
                replace,
                seed,
                with_edge_ids,
            },
            backend: backend.parse().map_err(LoaderError)?,
            direct,
            threads: threads.unwrap_or(defaults.threads),
            memory,
            reserve,
            features: None,
            batch_size,
            prefetch,
            hold: defaults.hold,
            hyperbatch: hyperbatch.parse().map_err(LoaderError)?,
            spill: spill.parse().map_err(LoaderError)?,
            spill_dir,
            neighbor_cache: defaults.neighbor_cache,
            processes: defaults.processes,
        };
        let inner = py
            .detach(|| BatchLoader::open(&path, opts, None))
            .map_err(LoaderError)?;
        Ok(Sampler { inner })
    }

    /// The backend in use: "memory", "uring", "uring-direct" or "pread".
    #[getter]
    fn backend(&self) -> &str {
        self.inner.backend_name()
    }

    /// Why `backend="auto"` did not pick io_uring, or None.
    #[getter]
    fn fallback_reason(&self) -> Option<&str> {
        self.inner.fallback_reason()
    }

    #[getter]
    fn num_nodes(&self) -> u64 {
        self.inner.num_nodes()
    }

    /// How the memory budget was split.
    fn plan<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        plan_dict(py, &self.inner.plan())
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
        let seeds = self::seeds(&seeds, self.inner.num_nodes())?;
        let out = py
            .detach(|| self.inner.sample(&seeds, epoch, batch).map(Converted::from))
            .map_err(LoaderError)?;
        out.into_dict(py)
    }

    /// Iterate one epoch on worker threads: `(batch_index, seeds, sample)` in order; `batches`
    /// selects global batch indices (a rank's share), default all; `bounds` gives the batches
    /// (`seeds[bounds[i]:bounds[i + 1]]` is batch `indices[i]`) instead of a cut.
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
    ) -> PyResult<SamplerEpoch> {
        let seeds = self::seeds(&seeds, self.inner.num_nodes())?;
        let e = epoch_options(
            batch_size, shuffle, epoch, drop_last, batches, bounds, indices,
        )?;
        let inner = py
            .detach(|| self.inner.sample_epoch(&seeds, &e))
            .map_err(LoaderError)?;
        Ok(SamplerEpoch {
            len: inner.len(),
            inner: Some(inner),
        })
    }

    /// I/O counters over all samplers and epochs: reads issued, bytes read, read batches, and
    /// of hyperbatches: bytes read sequentially (whole blocks) and randomly (page runs), their
    /// number and the batches in them.
    fn io_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        io_dict(py, &self.inner)
    }
}

/// The sampler's I/O counters as a dict (`Sampler.io_stats`, part of `Loader.stats`).
pub(crate) fn io_dict<'py>(py: Python<'py>, l: &BatchLoader) -> PyResult<Bound<'py, PyDict>> {
    let s = l.io_stats();
    let h = l.graph().hyper_totals();
    let d = PyDict::new(py);
    d.set_item("reads", s.reads)?;
    d.set_item("bytes", s.bytes)?;
    d.set_item("batches", s.batches)?;
    d.set_item("sequential_bytes", h.sequential_bytes)?;
    d.set_item("random_bytes", h.random_bytes)?;
    d.set_item("hyperbatches", h.hyperbatches)?;
    d.set_item("hyperbatch_batches", h.batches)?;
    d.set_item("spilled_bytes", h.spilled_bytes)?;
    Ok(d)
}

/// The next item of the epoch in `slot`, waiting with the GIL released in slices of 100 ms and
/// checking for signals between them: Ctrl-C raises `KeyboardInterrupt` at once even while the
/// next batch is seconds away (the epoch stays usable; dropping it stops its workers). At the
/// end, or on a worker's error, the slot is emptied so the workers are joined at once.
pub(crate) fn next_of<T: Send>(py: Python<'_>, slot: &mut Option<Epoch<T>>) -> PyResult<Option<T>> {
    let Some(it) = slot.as_mut() else {
        return Ok(None);
    };
    let next = loop {
        match py.detach(|| it.next_within(Duration::from_millis(100))) {
            Next::Item(i) => break Some(i),
            Next::End => break None,
            Next::NotYet => py.check_signals()?,
        }
    };
    match next {
        Some(Ok(item)) => Ok(Some(item)),
        None => {
            *slot = None;
            Ok(None)
        }
        Some(Err(e)) => {
            *slot = None;
            Err(LoaderError(e).into())
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
    inner: Option<Epoch<Batch>>,
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
        let Some(b) = next_of(py, &mut self.inner)? else {
            return Ok(None);
        };
        let seeds = ints(b.seeds).into_pyarray(py);
        Ok(Some((
            b.index,
            seeds,
            Converted::from(b.sample).into_dict(py)?,
        )))
    }
}
