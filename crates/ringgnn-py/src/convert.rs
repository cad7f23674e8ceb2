//! `_core.convert` and `_core.generate_rmat` / `_core.generate_sbm`: Python arguments to the
//! store's option structs, the build on a worker thread, the manifest back as JSON.

use std::path::PathBuf;

use pyo3::prelude::*;
use ringgnn_store::generate::{
    generate_rmat_split as core_rmat, generate_sbm_split as core_sbm, RmatOptions, SbmOptions,
};
use ringgnn_store::hetero::{
    build_with_times, HeteroSpec, HeteroTimes, NodeTypeSpec, RelationSpec,
};
use ringgnn_store::input::InputFormat;
use ringgnn_store::link::{LinkSplitOptions, LinkSplitSpec};
use ringgnn_store::manifest::{FeatureDtype, NodeIdDtype};
use ringgnn_store::node_ids::NodeIdsInput;
use ringgnn_store::options::{TimeInput, TimeOptions};
use ringgnn_store::times;
use ringgnn_store::{ConvertOptions, Excerpts, GraphOptions, SelfLoops, SplitSpec};

use crate::errors::{input_error, StoreError};
use crate::progress;

/// Refuse, before any work, an output a build may not write: `out` exists and `overwrite` is not
/// given, or it is neither an empty directory nor a ringgnn dataset (`ringgnn_store::replace`;
/// the build checks again when it commits). For the builds that stage their input in Python
/// first (importers, GraphBolt, the heterogeneous generator).
#[pyfunction]
pub fn check_output(out: PathBuf, overwrite: bool) -> PyResult<()> {
    ringgnn_store::replace::check(&out, overwrite).map_err(StoreError)?;
    Ok(())
}

fn self_loops(s: &str) -> PyResult<SelfLoops> {
    match s {
        "keep" => Ok(SelfLoops::Keep),
        "drop" => Ok(SelfLoops::Drop),
        _ => Err(input_error(format!(
            "self_loops must be 'keep' or 'drop', not '{s}'"
        ))),
    }
}

fn threads(n: Option<usize>) -> PyResult<usize> {
    match n {
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
        Some(0) => Err(input_error("threads must be at least 1".into())),
        Some(n) => Ok(n),
    }
}

/// The graph options of a build from the binding's arguments (`convert`, `generate_rmat`).
fn graph_options(
    undirected: bool,
    self_loops: &str,
    dedup: bool,
    num_nodes: Option<u64>,
    memory: u64,
    threads: Option<usize>,
) -> PyResult<GraphOptions> {
    Ok(GraphOptions {
        undirected,
        self_loops: self::self_loops(self_loops)?,
        dedup,
        num_nodes,
        memory,
        threads: self::threads(threads)?,
        times: TimeOptions::default(),
    })
}

fn feature_dtype(s: Option<&str>) -> PyResult<Option<FeatureDtype>> {
    s.map(FeatureDtype::parse)
        .transpose()
        .map_err(|e| StoreError(e).into())
}

/// A split argument (node or link), already parsed by `ringgnn._options.parse_split` or
/// `parse_link_split`: a list of `(name, fraction)` or a list of `(name, path)`.
#[derive(FromPyObject)]
pub enum SplitArg {
    Fractions(Vec<(String, f64)>),
    Files(Vec<(String, PathBuf)>),
}

impl From<SplitArg> for LinkSplitSpec {
    fn from(arg: SplitArg) -> Self {
        match arg {
            SplitArg::Fractions(v) => LinkSplitSpec::Fractions(v),
            SplitArg::Files(v) => LinkSplitSpec::Files(v),
        }
    }
}

/// The link split of a build: `link_split` (fractions or lists) or `link_split_time` (split
/// name -> time, ascending, already parsed by `ringgnn._options.parse_link_split_time`).
fn link_spec(
    link_split: Option<SplitArg>,
    link_split_time: Option<Vec<(String, i64)>>,
) -> PyResult<Option<LinkSplitSpec>> {
    match (link_split, link_split_time) {
        (Some(_), Some(_)) => Err(input_error(
            "--link-split and --link-split-time cannot be combined: split by time (a graph with edge times) or by --link-split, not both".into(),
        )),
        (Some(v), None) => Ok(Some(LinkSplitSpec::from(v))),
        (None, Some(v)) => Ok(Some(LinkSplitSpec::Times(v))),
        (None, None) => Ok(None),
    }
}

/// A generator's link split, with `negatives` drawn negatives per held-out pair.
fn generated_link(
    link_split: Option<SplitArg>,
    link_split_time: Option<Vec<(String, i64)>>,
    negatives: u64,
) -> PyResult<Option<LinkSplitOptions>> {
    let spec = link_spec(link_split, link_split_time)?;
    Ok(spec.map(|spec| LinkSplitOptions::new(spec, negatives)))
}

impl From<SplitArg> for SplitSpec {
    fn from(arg: SplitArg) -> Self {
        match arg {
            SplitArg::Fractions(v) => SplitSpec::Fractions(v),
            SplitArg::Files(v) => SplitSpec::Files(v),
        }
    }
}

/// Build a dataset from an edge list; returns the manifest as JSON.
#[pyfunction]
#[pyo3(signature = (
    input, out, *, format=None, undirected=false, self_loops="keep", dedup=false, num_nodes=None,
    features=None, labels=None, split=None, link_split=None, link_negatives=100, seed=0,
    feature_dtype=None, memory=1<<30, overwrite=false, threads=None, progress=None, node_ids=None,
    given_negatives=Vec::new(), absent_ok=false, shared_negatives=Vec::new(), quote_input=true,
    edge_time=None, node_time=None, link_split_time=None
))]
#[allow(clippy::too_many_arguments)]
pub fn convert(
    py: Python<'_>,
    input: PathBuf,
    out: PathBuf,
    format: Option<&str>,
    undirected: bool,
    self_loops: &str,
    dedup: bool,
    num_nodes: Option<u64>,
    features: Option<PathBuf>,
    labels: Option<PathBuf>,
    split: Option<SplitArg>,
    link_split: Option<SplitArg>,
    link_negatives: u64,
    seed: u64,
    feature_dtype: Option<&str>,
    memory: u64,
    overwrite: bool,
    threads: Option<usize>,
    progress: Option<Py<PyAny>>,
    node_ids: Option<NodeIdsArg>,
    given_negatives: Vec<(String, PathBuf)>,
    absent_ok: bool,
    shared_negatives: Vec<(String, PathBuf)>,
    quote_input: bool,
    edge_time: Option<PathBuf>,
    node_time: Option<PathBuf>,
    link_split_time: Option<Vec<(String, i64)>>,
) -> PyResult<String> {
    let node_ids = node_ids.map(node_ids_input).transpose()?;
    let link = link_spec(link_split, link_split_time)?;
    let times = TimeOptions {
        edges: edge_time.map(TimeInput::File),
        nodes: node_time.map(TimeInput::File),
    };
    let opts = ConvertOptions {
        input,
        out,
        format: format
            .map(InputFormat::parse)
            .transpose()
            .map_err(StoreError)?
            .flatten(),
        graph: GraphOptions {
            times,
            ..graph_options(undirected, self_loops, dedup, num_nodes, memory, threads)?
        },
        features,
        feature_dtype: self::feature_dtype(feature_dtype)?,
        labels,
        split: split.map(SplitSpec::from),
        link_split: link.map(|spec| LinkSplitOptions {
            given_negatives,
            shared_negatives,
            absent_ok,
            ..LinkSplitOptions::new(spec, link_negatives)
        }),
        seed,
        overwrite,
        node_ids,
        excerpts: excerpts(quote_input),
    };
    let manifest = progress::run(py, progress, |p| ringgnn_store::convert(&opts, p))?;
    Ok(manifest.to_json())
}

/// Original ids as Python passes them: (dtype, ids file, bytes file).
type NodeIdsArg = (String, PathBuf, Option<PathBuf>);

fn node_ids_input((dtype, ids, bytes): NodeIdsArg) -> PyResult<NodeIdsInput> {
    let dtype = match dtype.as_str() {
        "i64" => NodeIdDtype::I64,
        "u64" => NodeIdDtype::U64,
        "str" => NodeIdDtype::Str,
        other => {
            return Err(input_error(format!(
                "node id dtype '{other}': use i64, u64 or str"
            )))
        }
    };
    Ok(NodeIdsInput { dtype, ids, bytes })
}

/// Generate a Graph500 R-MAT graph (2^scale nodes, edge_factor * 2^scale edges).
#[pyfunction]
#[pyo3(signature = (
    out, *, scale, edge_factor=16, undirected=false, self_loops="keep", dedup=false, seed=0,
    memory=1<<30, overwrite=false, threads=None, progress=None, edge_time=None, node_time=None,
    time_range=None, link_split=None, link_split_time=None, link_negatives=100
))]
#[allow(clippy::too_many_arguments)]
pub fn generate_rmat(
    py: Python<'_>,
    out: PathBuf,
    scale: u32,
    edge_factor: u64,
    undirected: bool,
    self_loops: &str,
    dedup: bool,
    seed: u64,
    memory: u64,
    overwrite: bool,
    threads: Option<usize>,
    progress: Option<Py<PyAny>>,
    edge_time: Option<&str>,
    node_time: Option<&str>,
    time_range: Option<(i64, i64)>,
    link_split: Option<SplitArg>,
    link_split_time: Option<Vec<(String, i64)>>,
    link_negatives: u64,
) -> PyResult<String> {
    let link = generated_link(link_split, link_split_time, link_negatives)?;
    let opts = RmatOptions {
        out,
        scale,
        edge_factor,
        seed,
        graph: GraphOptions {
            times: times::generated(edge_time, node_time, time_range, seed).map_err(StoreError)?,
            ..graph_options(undirected, self_loops, dedup, None, memory, threads)?
        },
        overwrite,
    };
    let manifest = progress::run(py, progress, |p| core_rmat(&opts, link.as_ref(), p))?;
    Ok(manifest.to_json())
}

/// Generate a degree-corrected planted-partition dataset with features, labels and splits.
#[pyfunction]
#[pyo3(signature = (
    out, *, nodes, classes, avg_degree, feature_dim, split, feature_dtype="f32", seed=0,
    memory=1<<30, overwrite=false, threads=None, progress=None, edge_time=None, node_time=None,
    time_range=None, link_split=None, link_split_time=None, link_negatives=100
))]
#[allow(clippy::too_many_arguments)]
pub fn generate_sbm(
    py: Python<'_>,
    out: PathBuf,
    nodes: u64,
    classes: u64,
    avg_degree: f64,
    feature_dim: u64,
    split: Vec<(String, f64)>,
    feature_dtype: &str,
    seed: u64,
    memory: u64,
    overwrite: bool,
    threads: Option<usize>,
    progress: Option<Py<PyAny>>,
    edge_time: Option<&str>,
    node_time: Option<&str>,
    time_range: Option<(i64, i64)>,
    link_split: Option<SplitArg>,
    link_split_time: Option<Vec<(String, i64)>>,
    link_negatives: u64,
) -> PyResult<String> {
    let link = generated_link(link_split, link_split_time, link_negatives)?;
    let opts = SbmOptions {
        out,
        nodes,
        classes,
        avg_degree,
        feature_dim,
        feature_dtype: FeatureDtype::parse(feature_dtype).map_err(StoreError)?,
        seed,
        split,
        graph: GraphOptions {
            memory,
            threads: self::threads(threads)?,
            times: times::generated(edge_time, node_time, time_range, seed).map_err(StoreError)?,
            ..GraphOptions::default()
        },
        overwrite,
    };
    let manifest = progress::run(py, progress, |p| core_sbm(&opts, link.as_ref(), p))?;
    Ok(manifest.to_json())
}

/// One node type of `build_hetero`: (name, count, features .npy, feature dtype, labels .npy,
/// split, original ids).
type NodeTypeArg = (
    String,
    u64,
    Option<PathBuf>,
    Option<String>,
    Option<PathBuf>,
    Option<SplitArg>,
    Option<NodeIdsArg>,
);

/// One relation of `build_hetero`: (SRC:REL:DST, edge file, format or None, link split or None,
/// negatives per held-out pair, given negatives per split name, whether listed held-out pairs
/// may be absent from the edge file, link split by time or None).
type RelationArg = (
    String,
    PathBuf,
    Option<String>,
    Option<SplitArg>,
    u64,
    Vec<(String, PathBuf)>,
    bool,
    Option<Vec<(String, i64)>>,
);

/// Build a heterogeneous dataset: `node_types` as [`NodeTypeArg`]s and `relations` as [`RelationArg`]s; `source` is JSON
/// recorded in the manifest; `edge_times`/`node_times` the `.npy` times of relations and node types by name. Returns
/// the manifest as JSON.
#[pyfunction]
#[pyo3(signature = (
    out, *, node_types, relations, add_reverse=false, seed=0, memory=1<<30, overwrite=false,
    threads=None, source="null", progress=None, quote_input=true, edge_times=Vec::new(),
    node_times=Vec::new()
))]
#[allow(clippy::too_many_arguments)]
pub fn build_hetero(
    py: Python<'_>,
    out: PathBuf,
    node_types: Vec<NodeTypeArg>,
    relations: Vec<RelationArg>,
    add_reverse: bool,
    seed: u64,
    memory: u64,
    overwrite: bool,
    threads: Option<usize>,
    source: &str,
    progress: Option<Py<PyAny>>,
    quote_input: bool,
    edge_times: Vec<(String, PathBuf)>,
    node_times: Vec<(String, PathBuf)>,
) -> PyResult<String> {
    let times = HeteroTimes {
        edges: edge_times.into_iter().collect(),
        nodes: node_times.into_iter().collect(),
    };
    let mut types = Vec::new();
    for (name, num_nodes, features, dtype, labels, split, node_ids) in node_types {
        types.push(NodeTypeSpec {
            name,
            num_nodes,
            features,
            feature_dtype: self::feature_dtype(dtype.as_deref())?,
            labels,
            split: split.map(SplitSpec::from),
            node_ids: node_ids.map(node_ids_input).transpose()?,
        });
    }
    let mut rels = Vec::new();
    for (name, input, format, link_split, negatives, given_negatives, absent_ok, by_time) in
        relations
    {
        let format = format
            .as_deref()
            .map(InputFormat::parse)
            .transpose()
            .map_err(StoreError)?
            .flatten();
        rels.push(RelationSpec {
            name,
            input,
            format,
            link_split: link_spec(link_split, by_time)?.map(|spec| LinkSplitOptions {
                given_negatives,
                absent_ok,
                ..LinkSplitOptions::new(spec, negatives)
            }),
        });
    }
    let spec = HeteroSpec {
        out,
        node_types: types,
        relations: rels,
        add_reverse,
        memory,
        threads: self::threads(threads)?,
        seed,
        overwrite,
        source: serde_json::from_str(source)
            .map_err(|e| input_error(format!("source is not JSON: {e}")))?,
        excerpts: excerpts(quote_input),
    };
    let manifest = progress::run(py, progress, |p| build_with_times(&spec, &times, p))?;
    Ok(manifest.to_json())
}

/// `quote_input=False`: the input files were named by a dataset description, so errors quote
/// nothing of them (`ringgnn_store::excerpt`).
fn excerpts(quote_input: bool) -> Excerpts {
    if quote_input {
        Excerpts::Quote
    } else {
        Excerpts::Withhold
    }
}

/// Refuse, before writing, files of `parts` (`(what, bytes)`) that exceed the free space of the
/// file system holding `dir`; the message names `out` (`ringgnn_store::space`, the one owner of
/// the pre-write size check, for what the Python importers stage).
#[pyfunction]
pub fn check_room(dir: PathBuf, out: PathBuf, parts: Vec<(String, u64)>) -> PyResult<()> {
    ringgnn_store::space::check_room(&dir, &out, &parts).map_err(|e| StoreError(e).into())
}
