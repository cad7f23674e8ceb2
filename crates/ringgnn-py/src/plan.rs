//! The typed loaders' plan of files and cache (`ringgnn_loader::budget::files`): Python's
//! `ringgnn.sampling.plan.plan_hetero` gathers the sizes from the dataset and turns the dict
//! returned here into its `HeteroPlan`; the cache's ranking is exposed for
//! `ringgnn.sampling.features`.

use std::path::PathBuf;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ringgnn_loader::budget::files::{
    self, CacheRows, FeatureFile, FileChoice, FilesAsked, NeighborFile, RelationFile, TypeHits,
};

use crate::errors::LoaderError;

/// A relation as Python gives it: (name, source type, destination type, edges, bytes held,
/// bytes read, fanouts, its neighbor file (path, bytes an entry) or None).
type PyRelation = (
    String,
    String,
    String,
    u64,
    u64,
    u64,
    Vec<i64>,
    Option<(PathBuf, usize)>,
);

/// A feature file as Python gives it: (node type, bytes, bytes of a stored row).
type PyFeatureFile = (String, u64, u64);

fn relation(r: &PyRelation) -> RelationFile {
    RelationFile {
        name: r.0.clone(),
        src: r.1.clone(),
        dst: r.2.clone(),
        edges: r.3,
        held_bytes: r.4,
        read_bytes: r.5,
        fanouts: r.6.clone(),
    }
}

/// The neighbor files whose sources are `t` among the relations `read`.
fn neighbor_files(relations: &[PyRelation], t: &str, read: &[&str]) -> Vec<NeighborFile> {
    relations
        .iter()
        .filter(|r| r.1 == t && read.contains(&r.0.as_str()) && r.3 > 0)
        .filter_map(|r| {
            let (path, width) = r.7.clone()?;
            Some(NeighborFile {
                path,
                width,
                entries: r.3,
            })
        })
        .collect()
}

/// The plan of files and cache (`ringgnn_loader::budget::files::plan_files`) as a dict: `room`,
/// `batch_bytes`, `batches`, `relations`/`features`/`tables` (lists of (name, held, bytes,
/// saved, why)), `cache` (None, or (budget, ids per type as int64 arrays, bytes per type)),
/// `cache_saved`, `disk_backend`, `feature_disk_backend`, `notes`.
#[pyfunction]
#[pyo3(signature = (*, budget, process, index, batch_bytes, nodes, relations, target, batch_size, seeds,
                    backend, features, cache, fixed_relations, tables, fixed_tables))]
#[allow(clippy::too_many_arguments)]
pub fn plan_files<'py>(
    py: Python<'py>,
    budget: u64,
    process: u64,
    index: u64,
    batch_bytes: Option<u64>,
    nodes: Vec<(String, u64)>,
    relations: Vec<PyRelation>,
    target: Option<String>,
    batch_size: Option<u64>,
    seeds: Option<u64>,
    backend: String,
    features: Option<(String, Vec<PyFeatureFile>)>,
    cache: Option<u64>,
    fixed_relations: Option<(String, Vec<String>)>,
    tables: Vec<(String, u64)>,
    fixed_tables: Vec<(String, bool)>,
) -> PyResult<Bound<'py, PyDict>> {
    let asked = FilesAsked {
        budget,
        process,
        index,
        batch_bytes,
        nodes: nodes.clone(),
        relations: relations.iter().map(relation).collect(),
        target,
        batch_size,
        seeds,
        backend,
        features: features.map(|(b, f)| {
            let files = f
                .into_iter()
                .map(|(node_type, bytes, row_bytes)| FeatureFile {
                    node_type,
                    bytes,
                    row_bytes,
                });
            (b, files.collect())
        }),
        cache,
        fixed_relations,
        tables,
        fixed_tables,
    };
    let plan = py
        .detach(|| {
            files::plan_files(&asked, &mut |t, read| {
                let n = nodes
                    .iter()
                    .find(|(name, _)| name == t)
                    .map_or(0, |(_, c)| *c);
                files::source_hits(
                    t,
                    n,
                    &neighbor_files(&relations, t, read),
                    files::rows::COUNT_CHUNK,
                )
            })
        })
        .map_err(LoaderError)?;
    let d = PyDict::new(py);
    d.set_item("room", plan.room)?;
    d.set_item("batch_bytes", plan.batch_bytes)?;
    d.set_item("batches", plan.batches)?;
    let choices = |c: Vec<FileChoice>| -> Vec<_> {
        c.into_iter()
            .map(|c| (c.name, c.held, c.bytes, c.saved, c.why))
            .collect()
    };
    d.set_item("relations", choices(plan.relations))?;
    d.set_item("features", choices(plan.features))?;
    d.set_item("tables", choices(plan.tables))?;
    d.set_item("cache", plan.cache.map(|c| cache_rows(py, c)).transpose()?)?;
    d.set_item("cache_saved", plan.cache_saved)?;
    d.set_item("disk_backend", plan.disk_backend)?;
    d.set_item("feature_disk_backend", plan.feature_disk_backend)?;
    d.set_item("notes", plan.notes)?;
    Ok(d)
}

/// (budget, ids per type as int64 arrays, bytes per type).
fn cache_rows<'py>(py: Python<'py>, c: CacheRows) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
    let ids = PyDict::new(py);
    for (t, v) in c.ids {
        // Node ids are below 2^63; numpy users index with int64.
        ids.set_item(
            t,
            PyArray1::from_vec(py, v.into_iter().map(|i| i as i64).collect()),
        )?;
    }
    let bytes = PyDict::new(py);
    for (t, b) in c.bytes {
        bytes.set_item(t, b)?;
    }
    pyo3::types::PyTuple::new(
        py,
        [
            c.budget.into_pyobject(py)?.into_any(),
            ids.into_any(),
            bytes.into_any(),
        ],
    )
}

/// Per batch, (bytes read per relation from disk, rows sampled per type)
/// (`ringgnn_loader::budget::files::expected_reads`), as two lists of (name, value).
#[pyfunction]
#[pyo3(signature = (nodes, relations, target=None, batch_size=None))]
pub fn expected_reads(
    nodes: Vec<(String, u64)>,
    relations: Vec<PyRelation>,
    target: Option<String>,
    batch_size: Option<u64>,
) -> PyResult<files::Reads> {
    let relations: Vec<RelationFile> = relations.iter().map(relation).collect();
    Ok(
        files::expected_reads(&nodes, &relations, target.as_deref(), batch_size)
            .map_err(LoaderError)?,
    )
}

/// Per node of a type of `nodes` nodes, how often it appears in `files` ((path, bytes an entry,
/// entries)), read `chunk` entries at a time (`ringgnn_loader::budget::files::source_hits`).
#[pyfunction]
#[pyo3(signature = (node_type, nodes, files, chunk=None))]
pub fn source_hits<'py>(
    py: Python<'py>,
    node_type: String,
    nodes: u64,
    files: Vec<(PathBuf, usize, u64)>,
    chunk: Option<usize>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let files: Vec<NeighborFile> = files
        .into_iter()
        .map(|(path, width, entries)| NeighborFile {
            path,
            width,
            entries,
        })
        .collect();
    let chunk = chunk.unwrap_or(files::rows::COUNT_CHUNK);
    let hits = py
        .detach(|| files::source_hits(&node_type, nodes, &files, chunk))
        .map_err(LoaderError)?;
    Ok(PyArray1::from_vec(py, hits))
}

/// Per type (name, hits per row as uint32, bytes of a stored row).
type PyTypeHits<'py> = (String, PyReadonlyArray1<'py, u32>, u64);

fn type_hits<'a>(types: &'a [PyTypeHits<'_>]) -> PyResult<Vec<TypeHits<'a>>> {
    types
        .iter()
        .map(|(t, h, row_bytes)| {
            Ok(TypeHits {
                node_type: t,
                hits: h.as_slice()?,
                row_bytes: *row_bytes,
            })
        })
        .collect()
}

/// The rows with at least one hit grouped by (type, hits), best first, as (type, hits, rows)
/// (`ringgnn_loader::budget::files::ranked_groups`).
#[pyfunction]
pub fn ranked_groups(types: Vec<PyTypeHits<'_>>) -> PyResult<Vec<(String, u32, u64)>> {
    Ok(files::ranked_groups(&type_hits(&types)?)
        .into_iter()
        .map(|g| (g.node_type, g.hits, g.rows))
        .collect())
}

/// The rows a cache of `budget` bytes holds (`ringgnn_loader::budget::files::choose_rows`):
/// (budget, ids per type as int64 arrays, bytes per type).
#[pyfunction]
pub fn choose_cache_rows<'py>(
    py: Python<'py>,
    types: Vec<PyTypeHits<'py>>,
    budget: u64,
) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
    cache_rows(py, files::choose_rows(&type_hits(&types)?, budget))
}
