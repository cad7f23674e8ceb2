//! `_core.TypedLoader` and `_core.TypedEpoch`: the typed loader (`ringgnn_loader::typed`)
//! from Python. `ringgnn.HeteroLoader` and `HeteroLinkBatches` (their base
//! `ringgnn.sampling.typed.TypedEpochs`) make one per process over the sampler's `HeteroGraph`
//! and the feature readers, and iterate its epochs; each batch comes back as the sample dict of
//! `HeteroSampler.sample` plus `x` (per type with features, float32 rows) and `y` (labels of
//! the loader's type, or None), and `batch` (its index in the epoch).

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ringgnn_loader::typed::{
    SeedTimes, TypedBatch, TypedJob, TypedLoader as Core, TypedRun, TypedSeeds,
};
use ringgnn_loader::{Error, Labels, Next};
use ringgnn_store::hetero::Part;
use ringgnn_store::Dataset;

use crate::errors::{input_error, FeaturesError, LoaderError};
use crate::features::{stats_dict, FeatureReader};
use crate::hetero::{relation_fanouts, sample_dict, HeteroGraph};

/// Node ids from Python, checked non-negative.
fn ids(a: &PyReadonlyArray1<'_, i64>) -> PyResult<Vec<u64>> {
    let a = a.as_array();
    if let Some(&id) = a.iter().find(|&&x| x < 0) {
        return Err(input_error(format!(
            "seed node {id} is negative: node ids are 0..num_nodes"
        )));
    }
    Ok(a.iter().map(|&x| x as u64).collect())
}

/// Seeds of one batch from Python, (node type name, its ids) for each type seeded.
type PySeeds<'py> = Vec<(String, PyReadonlyArray1<'py, i64>)>;
/// A batch's seed times as Python gives them: one int64 array per entry of its seeds, or None.
type PyTimes<'py> = Option<Vec<PyReadonlyArray1<'py, i64>>>;

fn nonzero(v: usize, what: &str) -> PyResult<NonZeroUsize> {
    NonZeroUsize::new(v).ok_or_else(|| input_error(format!("{what} must be at least 1")))
}

#[pyclass(module = "ringgnn._core", frozen)]
pub struct TypedLoader {
    inner: std::sync::Arc<Core>,
    types: Vec<String>,
    relations: Vec<String>,
    /// Feature width per type (0 without features), for the shape of an empty batch's rows.
    dims: Vec<usize>,
}

#[pymethods]
impl TypedLoader {
    /// Batches over `graph` (seeds of any type: a node loader's of its target, a link
    /// batcher's of both ends' types), sampled with `fanouts` ((relation, fanout per hop) for
    /// every relation); `features`: (type, its `FeatureReader`) for each type with features,
    /// whose file (loaded once when `memory`), backend and cache the workers share; `labels`:
    /// gather the labels of type `target` (loaded from `path` here, in their narrowest type);
    /// `staging_dir`, `staging_cap`: where the rows of each type read from disk may be staged
    /// (`ringgnn_loader::typed::stage`; default beside the dataset, each type's file at most its
    /// feature file's size; a cap of 0 never stages); `temporal_strategy`: how batches at seed
    /// times draw, "uniform" or "last" (`ringgnn_sampler::TemporalStrategy`).
    #[new]
    #[pyo3(signature = (graph, fanouts, target, *, replace=false, seed=0, features=Vec::new(), labels=false, with_edge_ids=false, staging_dir=None, staging_cap=None, temporal_strategy="uniform"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        graph: &HeteroGraph,
        fanouts: Vec<(String, Vec<i64>)>,
        target: String,
        replace: bool,
        seed: u64,
        features: Vec<(String, PyRef<'_, FeatureReader>)>,
        labels: bool,
        with_edge_ids: bool,
        staging_dir: Option<PathBuf>,
        staging_cap: Option<u64>,
        temporal_strategy: &str,
    ) -> PyResult<Self> {
        let strategy = crate::hetero::temporal_strategy_arg(temporal_strategy)?;
        let g = graph.inner.clone();
        let fanouts = relation_fanouts(fanouts)?;
        let mut rows = vec![None; g.types().len()];
        let mut dims = vec![0; g.types().len()];
        for (t, reader) in &features {
            let Some(i) = g.types().iter().position(|x| x == t) else {
                return Err(input_error(format!(
                    "features: '{t}' is not a node type (the dataset has: {})",
                    g.types().join(", ")
                )));
            };
            let reader: &FeatureReader = reader;
            dims[i] = reader.dim;
            rows[i] = Some(py.detach(|| reader.type_rows()).map_err(FeaturesError)?);
        }
        let path: PathBuf = g.path().to_path_buf();
        let labels = if labels {
            py.detach(|| -> Result<Option<Labels>, Error> {
                let ds = Dataset::open_part(&path, &Part::Node(target.clone()))?;
                Labels::load(&ds)
            })
            .map_err(LoaderError)?
        } else {
            None
        };
        let (types, relations) = (g.types().to_vec(), g.relations());
        let inner = py
            .detach(|| {
                Core::new(
                    g,
                    fanouts,
                    replace,
                    seed,
                    with_edge_ids,
                    &target,
                    rows,
                    labels,
                )
            })
            .map_err(LoaderError)?
            .with_staging(staging_dir, staging_cap)
            .with_temporal_strategy(strategy);
        Ok(TypedLoader {
            inner: std::sync::Arc::new(inner),
            types,
            relations,
            dims,
        })
    }

    /// The batches of epoch `epoch` as jobs: `jobs[j]` is a list of (batch index, seeds: a list
    /// of (node type, ids) for each type seeded, their times or None), the
    /// batches one worker samples together; `workers` workers (`sizes()["workers"]`), each
    /// sampling its job with `threads` threads (`sizes()["threads"]`), a job started when its
    /// first batch is among the next `window` the consumer takes, a batch's rows gathered when
    /// it is among the next `prefetch`; `stage`: whether hyperbatches may be staged.
    #[pyo3(signature = (epoch, jobs, workers, window, prefetch, stage=true, threads=1))]
    #[allow(clippy::too_many_arguments)]
    fn epoch(
        &self,
        py: Python<'_>,
        epoch: u64,
        jobs: Vec<Vec<(u64, PySeeds<'_>, PyTimes<'_>)>>,
        workers: usize,
        window: usize,
        prefetch: usize,
        stage: bool,
        threads: usize,
    ) -> PyResult<TypedEpoch> {
        let jobs = jobs
            .iter()
            .map(|j| self.job(j))
            .collect::<PyResult<Vec<_>>>()?;
        let len = jobs.iter().map(Vec::len).sum();
        let (workers, window) = (nonzero(workers, "workers")?, nonzero(window, "window")?);
        let (prefetch, threads) = (nonzero(prefetch, "prefetch")?, nonzero(threads, "threads")?);
        let run = py
            .detach(|| {
                self.inner
                    .epoch(epoch, jobs, workers, window, prefetch, stage, threads)
            })
            .map_err(LoaderError)?;
        Ok(TypedEpoch {
            len,
            run: Some(run),
            types: self.types.clone(),
            relations: self.relations.clone(),
            dims: self.dims.clone(),
        })
    }

    /// The batches of one job (a list of (batch index, seeds, times)) of epoch `epoch`, made on
    /// the calling thread, in order.
    fn make<'py>(
        &self,
        py: Python<'py>,
        epoch: u64,
        job: Vec<(u64, PySeeds<'py>, PyTimes<'py>)>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let job = self.job(&job)?;
        let out = py
            .detach(|| self.inner.make(epoch, job))
            .map_err(LoaderError)?;
        out.into_iter()
            .map(|b| batch_dict(py, &self.types, &self.relations, &self.dims, b))
            .collect()
    }

    /// What each batch of `seeds` holds while its hyperbatch is sampled, measured (sampled
    /// together as a probe hyperbatch): a list of dicts of `state` (its share of the sampler's
    /// hop buffers), `scratch` (the sampler's dedup maps, whatever H), `readers` (the read
    /// buffers of the readers its threads after the first opened), `batch` (what its sample
    /// holds while sampled), `sample` (its finished sample), `edges`, `rows` (what gathering it holds: feature
    /// rows, gather scratch, labels), `staging` (its cold row ids and write buffers, where
    /// rows are staged), and seconds: `sample_s` (its share of the probe's sampling, measured),
    /// `read_s` (its rows read batch by batch), `pass_s` (one pass over the feature files for
    /// all the probe's batches), `back_s` (its staged rows written and read back), estimated
    /// over the types whose rows may be staged.
    /// `times`: None, or per batch of `seeds` its times (as a job's); `threads`: the threads
    /// the probe's sampler draws with (as an epoch's drivers would).
    #[pyo3(signature = (seeds, times=None, threads=1))]
    fn probe<'py>(
        &self,
        py: Python<'py>,
        seeds: Vec<PySeeds<'py>>,
        times: Option<Vec<PyTimes<'py>>>,
        threads: usize,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let seeds = self.probe_seeds(seeds, times)?;
        let threads = nonzero(threads, "threads")?.get();
        let out = py
            .detach(|| self.inner.probe(&seeds, threads))
            .map_err(LoaderError)?;
        out.iter()
            .map(|p| {
                let d = PyDict::new(py);
                d.set_item("state", p.state)?;
                d.set_item("batch", p.batch)?;
                d.set_item("sample", p.sample)?;
                d.set_item("scratch", p.scratch)?;
                d.set_item("readers", p.readers)?;
                d.set_item("edges", p.edges)?;
                d.set_item("rows", p.rows)?;
                d.set_item("staging", p.staging)?;
                d.set_item("sample_s", p.sample_s)?;
                d.set_item("read_s", p.read_s)?;
                d.set_item("pass_s", p.pass_s)?;
                d.set_item("back_s", p.back_s)?;
                Ok(d)
            })
            .collect()
    }

    /// The sizes of the jobs (hyperbatches) an epoch of `batches` batches is cut into, `most`
    /// at most each (`ringgnn_loader::epoch::job_sizes`, the homogeneous loader's rule):
    /// `balance` (H from the budget) as few as that allows, of sizes that differ by one at
    /// most; else `most` each and the rest.
    #[staticmethod]
    fn job_sizes(batches: usize, most: usize, balance: bool) -> PyResult<Vec<usize>> {
        let most = nonzero(most, "hyperbatch")?.get();
        Ok(ringgnn_loader::epoch::job_sizes(
            batches, most, balance, false,
        ))
    }

    /// Batches the probe of `auto` samples: the epoch's first ones.
    #[classattr]
    const PROBE_BATCHES: usize = ringgnn_loader::budget::typed::PROBE_BATCHES;

    /// The hyperbatch size, batches ahead, workers and staging of an epoch of `batches`
    /// batches within `share` bytes (`ringgnn_loader::budget::typed::choose`): `asked` fixes H;
    /// None (`auto`) measures `seeds` (with `times`, as `probe` takes them: the epoch's first
    /// `PROBE_BATCHES` batches; none where H is given) unless every neighbor file is in
    /// memory. `prefetch`: None for the default, or fewer where they do not fit. A dict:
    /// `hyperbatch` (H), `prefetch`, `workers` (the run's workers, each holding a job at a
    /// time), `threads` (the threads each samples its job with), `drivers` (whether the
    /// workers are hyperbatch drivers: one hyperbatch at a time each, sampled with every
    /// thread), `staging` (whether hyperbatches' rows may be staged), `window` (batches sampled
    /// ahead of the consumer's), `why` in words, `warning` (None, or why even one batch at a
    /// time exceeds the share), and what the probe measured, with its margins (`per_batch`,
    /// `rows`, `buffers`, `sample`, `held`, `staging_per_batch`, `staging_buffers`; 0 where
    /// nothing was measured).
    #[pyo3(signature = (asked, share, threads, prefetch, batches, seeds, times=None))]
    #[allow(clippy::too_many_arguments)]
    fn sizes<'py>(
        &self,
        py: Python<'py>,
        asked: Option<usize>,
        share: u64,
        threads: usize,
        prefetch: Option<usize>,
        batches: usize,
        seeds: Vec<PySeeds<'py>>,
        times: Option<Vec<PyTimes<'py>>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let seeds = self.probe_seeds(seeds, times)?;
        let threads = nonzero(threads, "threads")?.get();
        let prefetch = prefetch.map(|p| nonzero(p, "prefetch")).transpose()?;
        let asked = asked.map(|h| nonzero(h, "hyperbatch")).transpose()?;
        let (s, n) = py
            .detach(|| {
                self.inner.sizes(
                    asked.map(NonZeroUsize::get),
                    share,
                    threads,
                    prefetch.map(NonZeroUsize::get),
                    batches,
                    &seeds,
                )
            })
            .map_err(LoaderError)?;
        let d = PyDict::new(py);
        d.set_item("hyperbatch", s.hyperbatch)?;
        d.set_item("prefetch", s.prefetch)?;
        d.set_item("workers", s.workers)?;
        d.set_item("threads", s.threads)?;
        d.set_item("drivers", s.shared)?;
        d.set_item("staging", s.staging)?;
        d.set_item("window", s.window())?;
        d.set_item("why", &s.why)?;
        d.set_item("warning", &s.warning)?;
        d.set_item("per_batch", n.per_batch)?;
        d.set_item("rows", n.rows)?;
        d.set_item("buffers", n.buffers)?;
        d.set_item("sample", n.sample)?;
        d.set_item("held", n.held)?;
        d.set_item("staging_per_batch", n.staging_per_batch)?;
        d.set_item("staging_buffers", n.staging_buffers)?;
        Ok(d)
    }

    /// Bytes the loader holds whatever its epochs: the target's labels.
    fn held_bytes(&self) -> u64 {
        self.inner.held_bytes()
    }

    /// Bytes one worker holds whatever its batches: its read buffers.
    fn worker_bytes(&self) -> u64 {
        self.inner.worker_bytes()
    }

    /// Bytes one worker's staging holds whatever its batches (0 where nothing may be staged).
    fn staging_bytes(&self) -> u64 {
        self.inner.staging_bytes()
    }

    /// Hyperbatches whose rows were staged, per node type, over every epoch.
    fn staged_hyperbatches<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (t, n) in self.types.iter().zip(self.inner.staged()) {
            d.set_item(t, n)?;
        }
        Ok(d)
    }

    /// Feature read counters per type with features, summed over every epoch's workers.
    fn feature_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (t, s) in self.types.iter().zip(self.inner.stats()) {
            d.set_item(t, stats_dict(py, &s)?)?;
        }
        Ok(d)
    }
}

impl TypedLoader {
    /// Probe batches from Python: each one's seeds and, where given, their times.
    fn probe_seeds(
        &self,
        seeds: Vec<PySeeds<'_>>,
        times: Option<Vec<PyTimes<'_>>>,
    ) -> PyResult<Vec<(TypedSeeds, SeedTimes)>> {
        let times = times.unwrap_or_else(|| seeds.iter().map(|_| None).collect());
        if times.len() != seeds.len() {
            return Err(input_error(format!(
                "probe: {} lists of seed times for {} batches",
                times.len(),
                seeds.len()
            )));
        }
        seeds
            .iter()
            .zip(&times)
            .map(|(s, t)| Ok((self.seeds(s)?, self.times(s, t)?)))
            .collect()
    }

    /// One batch's seeds by type index.
    fn seeds(&self, seeds: &PySeeds<'_>) -> PyResult<TypedSeeds> {
        seeds
            .iter()
            .map(|(t, a)| {
                let Some(i) = self.types.iter().position(|x| x == t) else {
                    return Err(input_error(format!(
                        "seeds: '{t}' is not a node type (the dataset has: {})",
                        self.types.join(", ")
                    )));
                };
                Ok((i, ids(a)?))
            })
            .collect()
    }

    /// One batch's seed times, checked against its seeds: one array per entry, one time per id.
    fn times(&self, seeds: &PySeeds<'_>, times: &PyTimes<'_>) -> PyResult<SeedTimes> {
        let Some(times) = times else { return Ok(None) };
        if times.len() != seeds.len() {
            return Err(input_error(format!(
                "seed times: {} arrays for {} lists of seeds; give one per list",
                times.len(),
                seeds.len()
            )));
        }
        seeds
            .iter()
            .zip(times)
            .map(|((t, ids), ts)| {
                if ts.len()? != ids.len()? {
                    return Err(input_error(format!(
                        "seed times of node type {t}: {} times for {} seeds; give one per seed",
                        ts.len()?,
                        ids.len()?
                    )));
                }
                Ok(ts.as_array().to_vec())
            })
            .collect::<PyResult<Vec<_>>>()
            .map(Some)
    }

    /// One job: its batches' indices, seeds by type index and their times.
    fn job(&self, job: &[(u64, PySeeds<'_>, PyTimes<'_>)]) -> PyResult<TypedJob> {
        job.iter()
            .map(|(b, s, t)| Ok((*b, self.seeds(s)?, self.times(s, t)?)))
            .collect()
    }
}

/// A typed batch as a dict: the sample's entries, `x`, `y` and `batch`.
fn batch_dict<'py>(
    py: Python<'py>,
    types: &[String],
    relations: &[String],
    dims: &[usize],
    b: TypedBatch,
) -> PyResult<Bound<'py, PyDict>> {
    let TypedBatch {
        index,
        sample,
        x,
        y,
    } = b;
    let counts: Vec<usize> = sample.node.iter().map(Vec::len).collect();
    let d = sample_dict(py, types, relations, sample)?;
    let xs = PyDict::new(py);
    for (((t, rows), n), dim) in types.iter().zip(x).zip(counts).zip(dims) {
        if let Some(rows) = rows {
            xs.set_item(t, PyArray1::from_vec(py, rows).reshape([n, *dim])?)?;
        }
    }
    d.set_item("x", xs)?;
    match y {
        Some(y) => d.set_item("y", PyArray1::from_vec(py, y))?,
        None => d.set_item("y", py.None())?,
    }
    d.set_item("batch", index)?;
    Ok(d)
}

/// The batches of one epoch of a [`TypedLoader`], in order. Its workers stop when it is
/// exhausted, fails, or is garbage collected.
#[pyclass(module = "ringgnn._core")]
pub struct TypedEpoch {
    len: usize,
    /// `None` once finished, so the workers are joined as soon as possible.
    run: Option<TypedRun>,
    types: Vec<String>,
    relations: Vec<String>,
    dims: Vec<usize>,
}

#[pymethods]
impl TypedEpoch {
    fn __len__(&self) -> usize {
        self.len
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next batch, waiting with the GIL released in slices of 100 ms and checking for
    /// signals between them (Ctrl-C raises at once).
    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(run) = self.run.as_mut() else {
            return Ok(None);
        };
        let next = loop {
            match py.detach(|| run.next_within(Duration::from_millis(100))) {
                Next::Item(i) => break Some(i),
                Next::End => break None,
                Next::NotYet => py.check_signals()?,
            }
        };
        match next {
            None => {
                self.run = None;
                Ok(None)
            }
            Some(Err(e)) => {
                self.run = None;
                Err(LoaderError(e).into())
            }
            Some(Ok(b)) => batch_dict(py, &self.types, &self.relations, &self.dims, b).map(Some),
        }
    }

    /// Stop the workers now.
    fn close(&mut self) {
        self.run = None;
    }
}
