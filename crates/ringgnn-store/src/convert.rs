//! `ringgnn convert` ([`convert()`]): an edge list plus optional features, labels and splits
//! become a dataset, built in a staging directory and committed atomically (see
//! [`crate::writer`]). Also [`assemble`], the manifest of a freshly built dataset, which the
//! generators ([`crate::generate`]) share; the options every graph-building command takes are
//! [`crate::options`]'s (re-exported here, as [`ConvertOptions`] holds them). `ringgnn verify`
//! lives in [`crate::verify`]. The heterogeneous build ([`hetero`], exported as
//! `ringgnn_store::hetero::build`) sits here too, above the format it writes ([`crate::hetero`]).

pub(crate) mod hetero;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::builder::{build_graph_split, GraphSummary, NO_EDGES};
use crate::input::{self, InputFormat};
use crate::link::{self, LinkPlan, LinkSplitOptions};
use crate::manifest::{
    EdgeSplitInfo, FeatureDtype, FeatureInfo, GraphInfo, LabelInfo, Manifest, FORMAT_NAME,
};
use crate::node_ids::{attach_node_ids, check_unique, NodeIdsInput};
pub use crate::options::{GraphOptions, SelfLoops, SplitSpec, TimeInput, TimeOptions};
use crate::progress::Progress;
use crate::space::Need;
use crate::times::{attach_node_times, NODE_TIMES_FILE};
use crate::writer::Staging;
use crate::{attach, Error, Excerpts, Result};

#[derive(Clone, Debug)]
pub struct ConvertOptions {
    pub input: PathBuf,
    pub out: PathBuf,
    /// None: detect from the file name and contents.
    pub format: Option<InputFormat>,
    pub graph: GraphOptions,
    pub features: Option<PathBuf>,
    /// None: f32 for float32/float64 input, f16 for float16.
    pub feature_dtype: Option<FeatureDtype>,
    pub labels: Option<PathBuf>,
    pub split: Option<SplitSpec>,
    /// Hold out edges for link prediction (`--link-split`, `--link-negatives`).
    pub link_split: Option<LinkSplitOptions>,
    pub seed: u64,
    pub overwrite: bool,
    /// The nodes' original ids, in dense id order (an importer's; `docs/FORMAT.md`).
    pub node_ids: Option<NodeIdsInput>,
    /// Whether errors may quote `input`'s lines: not when a dataset description named it.
    pub excerpts: Excerpts,
}

impl ConvertOptions {
    /// Convert the edge list `input` into `out` with `graph`'s options: the format detected,
    /// no features, labels or splits, seed 0, never overwriting.
    pub fn new(input: PathBuf, out: PathBuf, graph: GraphOptions) -> Self {
        ConvertOptions {
            input,
            out,
            format: None,
            graph,
            features: None,
            feature_dtype: None,
            labels: None,
            split: None,
            link_split: None,
            seed: 0,
            overwrite: false,
            node_ids: None,
            excerpts: Excerpts::Quote,
        }
    }
}

/// `ringgnn convert`: build a dataset from an edge list and optional features, labels, splits.
pub fn convert(opts: &ConvertOptions, progress: &dyn Progress) -> Result<Manifest> {
    // Check everything cheap before the long graph build, so mistakes fail in a second.
    let format = match opts.format {
        Some(f) => f,
        None => input::detect(&opts.input)?,
    };
    let feat_header = opts
        .features
        .as_deref()
        .map(attach::check_features)
        .transpose()?;
    let label_header = opts
        .labels
        .as_deref()
        .map(attach::check_labels)
        .transpose()?;
    if let Some(spec) = &opts.split {
        attach::check_split_spec(spec)?;
    }
    if let Some(ids) = &opts.node_ids {
        ids.check(opts.graph.num_nodes)?;
    }
    crate::times::check(&opts.graph.times)?;
    let link_plan = link_plan(opts.link_split.as_ref(), opts.seed, &opts.graph)?;
    let mut staging = Staging::create(&opts.out, opts.overwrite, progress)?;
    // A node count given up front sizes the per-node files now; the builder checks the graph's
    // files again once its first pass knows the node and edge counts.
    if let Some(n) = opts.graph.num_nodes {
        let mut need = Need::new();
        need.graph("the graph", n, 0).nodes(
            "the graph",
            n,
            feat_header
                .as_ref()
                .map(|h| attach::feature_row_bytes(h, opts.feature_dtype)),
            opts.labels.is_some(),
        );
        staging.check_room(&need)?;
    }
    // Before the graph: a repeated original id fails fast, with all of --memory to sort in.
    if let Some(ids) = &opts.node_ids {
        check_unique(ids, opts.graph.memory, staging.dir(), progress)?;
    }
    let mut source = input::open(
        &opts.input,
        Some(format),
        opts.graph.num_nodes,
        opts.excerpts,
    )?;
    let graph = build_graph_split(
        source.as_mut(),
        &opts.graph,
        link_plan.as_ref(),
        &mut staging,
        progress,
    )
    .map_err(|e| match e {
        Error::Input(m) if m == NO_EDGES => Error::Input(format!("{}: {m}", opts.input.display())),
        e => e,
    })?;
    let n = graph.num_nodes;
    let features = match (&opts.features, feat_header) {
        (Some(p), Some(h)) => Some(attach::attach_features(
            &mut staging,
            p,
            &h,
            n,
            opts.feature_dtype,
            progress,
        )?),
        _ => None,
    };
    let labels = match (&opts.labels, label_header) {
        (Some(p), Some(h)) => Some(attach::attach_labels(&mut staging, p, &h, n)?),
        _ => None,
    };
    let splits = match &opts.split {
        Some(spec) => attach::attach_splits(&mut staging, spec, n, labels.is_some(), opts.seed)?,
        None => BTreeMap::new(),
    };
    // Before the negatives: a split by time draws them among the nodes not newer than the pair.
    let node_times = match &opts.graph.times.nodes {
        Some(t) => attach_node_times(&mut staging, t, n)?,
        None => None,
    };
    let edge_splits = edge_splits(
        &mut staging,
        &graph,
        opts.link_split.as_ref(),
        opts.seed,
        node_times.is_some(),
        opts.graph.memory,
        progress,
    )?;
    let source = serde_json::json!({
        "command": "convert",
        "input": opts.input.file_name().map(|s| s.to_string_lossy().into_owned()),
        "format": format!("{format:?}").to_lowercase(),
        "undirected": opts.graph.undirected,
        "self_loops": format!("{:?}", opts.graph.self_loops).to_lowercase(),
        "dedup": opts.graph.dedup,
        "seed": opts.seed,
        "link_split": opts.link_split.as_ref().map(LinkSplitOptions::describe),
    });
    let node_ids = match &opts.node_ids {
        Some(ids) => Some(attach_node_ids(&mut staging, ids, n)?),
        None => None,
    };
    let mut manifest = assemble(&graph, features, labels, splits, source);
    manifest.edge_splits = edge_splits;
    manifest.node_ids = node_ids;
    manifest.node_times = node_times;
    record_times(&mut manifest, &opts.graph.times);
    let out = staging.commit(manifest)?;
    Manifest::read(&out)
}

/// The builder's plan of the link split `link` of a graph built with `graph`'s options, checked
/// before the build so that mistakes fail in a second (`convert` and the generators share it):
/// drawn negatives need fewer than `graph.num_nodes` nodes, when it is known.
pub(crate) fn link_plan(
    link: Option<&LinkSplitOptions>,
    seed: u64,
    graph: &GraphOptions,
) -> Result<Option<LinkPlan>> {
    let Some(l) = link else { return Ok(None) };
    if let (Some(n), true) = (graph.num_nodes, link::draws_negatives(l)) {
        link::check_negatives(l.negatives, n)?;
    }
    crate::shared_negatives::check(l)?;
    LinkPlan::new(l, seed, graph.undirected, graph.num_nodes).map(Some)
}

/// The edge splits of `graph`, built with the plan of `link`: every held-out split's negatives
/// drawn (a split by time draws them among the nodes not newer than the pair when `node_times`:
/// the staging holds them, read within `memory`), or stored as given or shared.
pub(crate) fn edge_splits(
    staging: &mut Staging,
    graph: &GraphSummary,
    link: Option<&LinkSplitOptions>,
    seed: u64,
    node_times: bool,
    memory: u64,
    progress: &dyn Progress,
) -> Result<BTreeMap<String, EdgeSplitInfo>> {
    let (Some(held), Some(l)) = (&graph.held_out, link) else {
        return Ok(BTreeMap::new());
    };
    let n = graph.num_nodes;
    let times_path = staging.file_path(NODE_TIMES_FILE);
    let at = node_times.then_some((times_path.as_path(), memory));
    let mut splits = link::attach_negatives(staging, held, n, l, seed, at, progress)?;
    crate::shared_negatives::attach(staging, &mut splits, &l.shared_negatives, n)?;
    Ok(splits)
}

/// The manifest of a freshly built dataset (files are filled in by [`Staging::commit`]), in
/// the version its edge times need ([`add_node_times`] adds the rest of the times).
pub fn assemble(
    graph: &GraphSummary,
    features: Option<FeatureInfo>,
    labels: Option<LabelInfo>,
    splits: BTreeMap<String, u64>,
    source: serde_json::Value,
) -> Manifest {
    Manifest {
        format: FORMAT_NAME.into(),
        version: Manifest::version_for(graph.edge_times.is_some()),
        created_by: format!("ringgnn {}", env!("CARGO_PKG_VERSION")),
        num_nodes: graph.num_nodes,
        num_edges: graph.num_edges,
        graph: GraphInfo {
            orientation: "csc".into(),
            indices_dtype: graph.indices_dtype,
        },
        features,
        labels,
        splits,
        edge_splits: BTreeMap::new(),
        node_ids: None,
        edge_times: graph.edge_times,
        node_times: None,
        degree: graph.degree.clone(),
        files: BTreeMap::new(),
        source,
        num_sources: None,
    }
}

/// Write the node times `times` gives (if any) for `manifest`'s nodes, record them and where
/// the times came from (`source.edge_time`, `source.node_time`), and set the version the
/// times need.
pub fn add_node_times(
    manifest: &mut Manifest,
    staging: &mut Staging,
    times: &TimeOptions,
) -> Result<()> {
    if let Some(t) = &times.nodes {
        manifest.node_times = attach_node_times(staging, t, manifest.num_nodes)?;
    }
    record_times(manifest, times);
    Ok(())
}

/// Record where the times came from (`source.edge_time`, `source.node_time`) and set the
/// version they need (node times already attached).
fn record_times(manifest: &mut Manifest, times: &TimeOptions) {
    if let serde_json::Value::Object(source) = &mut manifest.source {
        for (key, input) in [("edge_time", &times.edges), ("node_time", &times.nodes)] {
            let said = match input {
                Some(TimeInput::File(p)) => {
                    serde_json::json!(p.file_name().map(|s| s.to_string_lossy().into_owned()))
                }
                Some(TimeInput::Generated(g)) => g.describe(),
                None => continue,
            };
            source.insert(key.into(), said);
        }
    }
    manifest.version =
        Manifest::version_for(manifest.edge_times.is_some() || manifest.node_times.is_some());
}
