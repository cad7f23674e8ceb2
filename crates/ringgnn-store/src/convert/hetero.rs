//! Building a heterogeneous dataset ([`build`]): each node type's features, labels and splits
//! with the writers of a homogeneous dataset, and each relation with the out-of-core CSC
//! builder, one relation after another within the same `--memory`, all in one staging directory
//! committed atomically.
//!
//! A relation `S:R:D` is built as a homogeneous graph over `max(n_S, n_D)` nodes (so the
//! builder's id checks and key widths hold for both ends), each edge checked against its own
//! end's count first. When `n_S > n_D`, the offset index is cut to its first `n_D + 1` entries
//! (the rest all equal `E`: no edge enters a node beyond `n_D`) and the degree statistics are
//! recomputed over the `D` nodes.
//!
//! A relation may carry a link split ([`RelationSpec::link_split`]): the homogeneous holdout
//! ([`crate::link`]) decides its pairs while its CSC is written, and negatives are drawn among
//! the destination type's nodes. Its reverse `D:rev_R:S` (made by `add_reverse`, or listed under
//! that name) drops the same held-out pairs, swapped ([`LinkPlan::Relation`]), so that a held-out
//! pair reaches no sample through the reverse either.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::PathBuf;

use crate::attach;
use crate::builder::build_graph_split;
use crate::builder::degree_stats;
use crate::hetero::{
    check_name, reverse_name, split_relation, HeteroManifest, NodeTypeInfo, RelationInfo,
};
use crate::input::{self, EdgeSource, InputFormat};
use crate::link::{self, LinkPlan, LinkSplitOptions, LinkSplitSpec};
use crate::manifest::{FeatureDtype, GraphInfo, IndexDtype, Manifest, FORMAT_NAME, TRAIN};
use crate::node_ids::{attach_node_ids, check_unique, NodeIdsInput};
use crate::options::{GraphOptions, SplitSpec, TimeInput, TimeOptions};
use crate::progress::{Prefixed, Progress};
use crate::space::Need;
use crate::times::attach_node_times;
use crate::writer::Staging;
use crate::{Error, Excerpts, IoContext, Result};

/// One node type to build.
#[derive(Clone, Debug)]
pub struct NodeTypeSpec {
    pub name: String,
    pub num_nodes: u64,
    /// `.npy` of shape (num_nodes, D), float16/32/64.
    pub features: Option<PathBuf>,
    pub feature_dtype: Option<FeatureDtype>,
    /// `.npy` of num_nodes integer labels (-1 = unlabeled).
    pub labels: Option<PathBuf>,
    pub split: Option<SplitSpec>,
    /// The type's original ids in dense order (an importer that assigned the dense ids), stored
    /// as `node.TYPE.node_ids` exactly as [`crate::convert`] stores a homogeneous dataset's.
    pub node_ids: Option<NodeIdsInput>,
}

/// One relation to build from an edge list of (SRC id, DST id) pairs.
#[derive(Clone, Debug)]
pub struct RelationSpec {
    /// `SRC:REL:DST`.
    pub name: String,
    pub input: PathBuf,
    /// None: detected from the file.
    pub format: Option<InputFormat>,
    /// Hold out pairs of this relation for link prediction (as `convert --link-split`; listed
    /// pairs are (SRC id, DST id), negatives are DST ids).
    pub link_split: Option<LinkSplitOptions>,
}

/// A whole heterogeneous build.
#[derive(Clone, Debug)]
pub struct HeteroSpec {
    pub out: PathBuf,
    pub node_types: Vec<NodeTypeSpec>,
    pub relations: Vec<RelationSpec>,
    /// Also build `DST:rev_REL:SRC` from every relation's file (PyG's `ToUndirected`).
    pub add_reverse: bool,
    /// Byte budget of the build (each relation's CSC build gets all of it, one at a time).
    pub memory: u64,
    pub threads: usize,
    pub seed: u64,
    pub overwrite: bool,
    /// How the dataset was made, recorded in the manifest.
    pub source: serde_json::Value,
    /// Whether errors may quote the relations' files: not when a dataset description named them.
    pub excerpts: Excerpts,
}

/// A relation to build: its name, file, whether the file's pairs are read reversed, and the
/// link split that decides which of its pairs stay (its own, or a mirror of its forward's).
struct Planned<'a> {
    name: String,
    spec: &'a RelationSpec,
    reversed: bool,
    link: Option<LinkPlan>,
}

/// Check a relation's link split and read its listed pairs (before anything is written).
fn link_plan(r: &RelationSpec, n_s: u64, n_d: u64, seed: u64) -> Result<Option<LinkPlan>> {
    let Some(opts) = &r.link_split else {
        return Ok(None);
    };
    let named = |e: Error| match e {
        Error::Input(m) => Error::Input(format!("relation {}: {m}", r.name)),
        e => e,
    };
    let (s, _, d) = split_relation(&r.name)?;
    let plan = LinkPlan::relation(opts, seed, s != d).map_err(named)?;
    if let Some((name, _)) = opts.shared_negatives.first() {
        return Err(named(Error::Input(format!(
            "shared negatives are given for edge split '{name}', but a relation stores negatives per pair only"
        ))));
    }
    for (name, path) in &opts.given_negatives {
        let listed =
            matches!(&opts.spec, LinkSplitSpec::Files(v) if v.iter().any(|(n, _)| n == name));
        if !listed || name == TRAIN {
            return Err(named(Error::Input(format!(
                "negatives {} are given for edge split '{name}', which is not a listed held-out split",
                path.display()
            ))));
        }
        Error::must_exist(path, format!("negatives of edge split {name} not found"))?;
    }
    // Negatives are drawn for the held-out splits whose negatives are not given.
    let drawn = match &opts.spec {
        LinkSplitSpec::Fractions(_) | LinkSplitSpec::Times(_) => true,
        LinkSplitSpec::Files(v) => v
            .iter()
            .any(|(n, _)| n != TRAIN && !opts.given_negatives.iter().any(|(g, _)| g == n)),
    };
    if drawn {
        link::check_negatives(opts.negatives, n_d).map_err(named)?;
    }
    if let Some(g) = plan.given() {
        g.check_ends(n_s, n_d).map_err(named)?;
    }
    Ok(Some(plan))
}

/// The times of a heterogeneous build (docs/FORMAT.md "Times"), each an `.npy` of int64 (or
/// int32): a relation's edge times, one per edge of its file in file order (its reverse, built
/// from the same file, gets the same times), and a node type's node times, one per node.
#[derive(Clone, Debug, Default)]
pub struct HeteroTimes {
    /// `SRC:REL:DST` (a relation of the spec) -> its edge times.
    pub edges: BTreeMap<String, PathBuf>,
    /// Node type -> its node times.
    pub nodes: BTreeMap<String, PathBuf>,
}

/// Build the dataset `spec` describes; returns its manifest as read back.
pub fn build(spec: &HeteroSpec, progress: &dyn Progress) -> Result<HeteroManifest> {
    build_with_times(spec, &HeteroTimes::default(), progress)
}

/// [`build`], with edge and node times.
pub fn build_with_times(
    spec: &HeteroSpec,
    times: &HeteroTimes,
    progress: &dyn Progress,
) -> Result<HeteroManifest> {
    // Everything cheap is checked before the first byte is written.
    for (name, p) in &times.edges {
        if !spec.relations.iter().any(|r| &r.name == name) {
            return crate::input_err!(
                "edge times are given for '{name}', which is not a relation of the build"
            );
        }
        crate::times::check(&TimeOptions {
            edges: Some(TimeInput::File(p.clone())),
            nodes: None,
        })?;
    }
    for (name, p) in &times.nodes {
        if !spec.node_types.iter().any(|t| &t.name == name) {
            return crate::input_err!(
                "node times are given for '{name}', which is not a node type of the build"
            );
        }
        crate::times::check(&TimeOptions {
            edges: None,
            nodes: Some(TimeInput::File(p.clone())),
        })?;
    }
    let mut counts = BTreeMap::new();
    for t in &spec.node_types {
        check_name(&t.name, "node type")?;
        if counts.insert(t.name.clone(), t.num_nodes).is_some() {
            return crate::input_err!("node type '{}' is given twice", t.name);
        }
        if let Some(p) = &t.features {
            let h = attach::check_features(p)?;
            if h.shape[0] != t.num_nodes {
                return crate::input_err!(
                    "{}: {} feature rows, but node type '{}' has {} nodes; give one row per node",
                    p.display(),
                    h.shape[0],
                    t.name,
                    t.num_nodes
                );
            }
        }
        if let Some(p) = &t.labels {
            let h = attach::check_labels(p)?;
            if h.shape[0] != t.num_nodes {
                return crate::input_err!(
                    "{}: {} labels, but node type '{}' has {} nodes; give one label per node (-1 = unlabeled)",
                    p.display(),
                    h.shape[0],
                    t.name,
                    t.num_nodes
                );
            }
        }
        if let Some(s) = &t.split {
            attach::check_split_spec(s)?;
        }
        if let Some(ids) = &t.node_ids {
            ids.check(Some(t.num_nodes))
                .map_err(|e| in_type(e, &t.name))?;
        }
    }
    if counts.is_empty() {
        return crate::input_err!("a heterogeneous dataset needs at least one node type");
    }
    let mut planned = Vec::new();
    for r in &spec.relations {
        let (s, rel, d) = split_relation(&r.name)?;
        for t in [s, d] {
            if !counts.contains_key(t) {
                return crate::input_err!(
                    "relation {} names node type '{t}', which is not one of the node types ({})",
                    r.name,
                    counts.keys().cloned().collect::<Vec<_>>().join(", ")
                );
            }
        }
        Error::must_exist(&r.input, format!("the edge file of relation {}", r.name))?;
        let link = link_plan(r, counts[s], counts[d], spec.seed)?;
        if spec.add_reverse {
            planned.push(Planned {
                name: format!("{d}:rev_{rel}:{s}"),
                spec: r,
                reversed: true,
                link: link.as_ref().map(LinkPlan::mirror),
            });
        }
        planned.push(Planned {
            name: r.name.clone(),
            spec: r,
            reversed: false,
            link,
        });
    }
    // A listed relation named like the reverse of a split one is its reverse too.
    let split: BTreeMap<String, (String, LinkPlan)> = planned
        .iter()
        .filter(|p| !p.reversed && p.spec.link_split.is_some())
        .map(|p| {
            let plan = p.link.clone().expect("planned above");
            Ok((reverse_name(&p.name)?, (p.name.clone(), plan)))
        })
        .collect::<Result<_>>()?;
    for p in planned.iter_mut().filter(|p| !p.reversed) {
        if let Some((forward, plan)) = split.get(&p.name) {
            if p.link.is_some() {
                return crate::input_err!(
                    "relations {forward} and {} both have a link split, but {} is the reverse of {forward} (it drops {forward}'s held-out pairs); split one of them",
                    p.name,
                    p.name
                );
            }
            p.link = Some(plan.mirror());
        }
    }
    planned.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = planned.windows(2).find(|w| w[0].name == w[1].name) {
        return crate::input_err!(
            "relation {} is given twice{}",
            w[0].name,
            if spec.add_reverse {
                " (--add-reverse makes rev_ relations: do not list them yourself)"
            } else {
                ""
            }
        );
    }

    let mut staging = Staging::create(&spec.out, spec.overwrite, progress)?;
    let mut need = Need::new();
    for t in &spec.node_types {
        let feature_row = match &t.features {
            Some(p) => Some(attach::feature_row_bytes(
                &attach::check_features(p)?,
                t.feature_dtype,
            )),
            None => None,
        };
        let of = format!("node type '{}'", t.name);
        need.nodes(&of, t.num_nodes, feature_row, t.labels.is_some());
    }
    for p in &planned {
        // Each relation's index first covers max(sources, destinations) rows (then is cut).
        let (s, _, d) = split_relation(&p.name)?;
        need.graph(&format!("relation {}", p.name), counts[s].max(counts[d]), 0);
    }
    staging.check_room(&need)?;
    let mut node_types = BTreeMap::new();
    let mut sorted_types: Vec<&NodeTypeSpec> = spec.node_types.iter().collect();
    sorted_types.sort_by(|a, b| a.name.cmp(&b.name));
    for (i, t) in sorted_types.iter().enumerate() {
        staging.set_part(&format!("node.{}.", t.name), &format!("type{i}_"));
        let features = match &t.features {
            Some(p) => {
                let h = attach::check_features(p)?;
                let named = Prefixed {
                    inner: progress,
                    prefix: t.name.clone(),
                };
                Some(attach::attach_features(
                    &mut staging,
                    p,
                    &h,
                    t.num_nodes,
                    t.feature_dtype,
                    &named,
                )?)
            }
            None => None,
        };
        let labels = match &t.labels {
            Some(p) => {
                let h = attach::check_labels(p)?;
                Some(attach::attach_labels(&mut staging, p, &h, t.num_nodes)?)
            }
            None => None,
        };
        let splits = match &t.split {
            Some(s) => {
                attach::attach_splits(&mut staging, s, t.num_nodes, labels.is_some(), spec.seed)
                    .map_err(|e| in_type(e, &t.name))?
            }
            None => BTreeMap::new(),
        };
        let node_ids = match &t.node_ids {
            Some(ids) => {
                // Before any relation is built, so all of --memory is the sort's.
                check_unique(ids, spec.memory, staging.dir(), progress)
                    .map_err(|e| in_type(e, &t.name))?;
                Some(
                    attach_node_ids(&mut staging, ids, t.num_nodes)
                        .map_err(|e| in_type(e, &t.name))?,
                )
            }
            None => None,
        };
        let node_times = match times.nodes.get(&t.name) {
            Some(p) => attach_node_times(&mut staging, &TimeInput::File(p.clone()), t.num_nodes)
                .map_err(|e| in_type(e, &t.name))?,
            None => None,
        };
        node_types.insert(
            t.name.clone(),
            NodeTypeInfo {
                num_nodes: t.num_nodes,
                features,
                labels,
                splits,
                node_ids,
                node_times,
            },
        );
    }

    let mut relations = BTreeMap::new();
    for (j, p) in planned.iter().enumerate() {
        let (s, _, d) = split_relation(&p.name)?;
        let (n_s, n_d) = (counts[s], counts[d]);
        let rows = n_s.max(n_d);
        let key_prefix = format!("relation.{}.", p.name);
        staging.set_part(&key_prefix, &format!("rel{j}_"));
        // Ids are checked by `Bounded`, against each end's own count.
        let inner = input::open(&p.spec.input, p.spec.format, None, spec.excerpts)?;
        let mut source = Bounded {
            inner,
            reversed: p.reversed,
            sources: n_s,
            targets: n_d,
            relation: p.spec.name.clone(),
            path: p.spec.input.clone(),
            seen: 0,
        };
        let opts = GraphOptions {
            num_nodes: Some(rows),
            memory: spec.memory,
            threads: spec.threads,
            times: TimeOptions {
                edges: times.edges.get(&p.spec.name).cloned().map(TimeInput::File),
                nodes: None,
            },
            ..GraphOptions::default()
        };
        let named = Prefixed {
            inner: progress,
            prefix: p.name.clone(),
        };
        let g = build_graph_split(&mut source, &opts, p.link.as_ref(), &mut staging, &named)
            .map_err(|e| match e {
                // The holdout's messages (a listed pair the relation lacks) name no relation.
                Error::Input(m)
                    if (p.link.is_some() || opts.times.edges.is_some())
                        && !m.contains(&p.spec.name) =>
                {
                    Error::Input(format!("relation {}: {m}", p.name))
                }
                e => e,
            })?;
        let mut degree = g.degree.clone();
        if n_s > n_d {
            degree = cut_indptr(&mut staging, &key_prefix, n_d, g.num_edges)?;
        }
        let edge_splits = match (&g.held_out, &p.spec.link_split) {
            (Some(held), Some(l)) if !p.reversed => {
                let times = staging
                    .files()
                    .get(&format!("node.{d}.node_times"))
                    .map(|f| staging.dir().join(&f.path));
                let at = times.as_deref().map(|t| (t, spec.memory));
                link::attach_negatives(&mut staging, held, n_d, l, spec.seed, at, &named)?
            }
            _ => BTreeMap::new(),
        };
        relations.insert(
            p.name.clone(),
            RelationInfo {
                num_edges: g.num_edges,
                graph: GraphInfo {
                    orientation: "csc".into(),
                    indices_dtype: IndexDtype::for_nodes(rows),
                },
                degree,
                edge_splits,
                edge_times: g.edge_times,
            },
        );
    }
    staging.set_part("", "");
    let mut source = spec.source.clone();
    let described: serde_json::Map<String, serde_json::Value> = spec
        .relations
        .iter()
        .filter_map(|r| Some((r.name.clone(), r.link_split.as_ref()?.describe())))
        .collect();
    if !described.is_empty() {
        // Recorded even when the caller gave no source: verify reads a split by time's times here.
        if source.is_null() {
            source = serde_json::json!({});
        }
        if let serde_json::Value::Object(m) = &mut source {
            m.insert("link_split".into(), described.into());
        }
    }
    let timed = relations.values().any(|r| r.edge_times.is_some())
        || node_types.values().any(|t| t.node_times.is_some());
    let manifest = HeteroManifest {
        format: FORMAT_NAME.into(),
        version: Manifest::version_for(timed),
        created_by: format!("ringgnn {}", env!("CARGO_PKG_VERSION")),
        node_types,
        relations,
        files: staging.take_files(),
        source,
    };
    let out = staging.commit_json(&manifest.to_json())?;
    HeteroManifest::read(&out)
}

/// Name the node type in an error about one of its files.
fn in_type(e: Error, name: &str) -> Error {
    match e {
        Error::Input(m) => Error::Input(format!("node type '{name}': {m}")),
        e => e,
    }
}

/// Rewrite the relation's offset index with its first `rows + 1` entries, and return the degree
/// statistics over those rows.
fn cut_indptr(
    staging: &mut Staging,
    key_prefix: &str,
    rows: u64,
    num_edges: u64,
) -> Result<crate::manifest::DegreeStats> {
    let key = format!("{key_prefix}indptr");
    let old = staging.dir().join(&staging.files()[&key].path);
    let mut r = BufReader::with_capacity(1 << 20, File::open(&old).at(&old)?);
    let mut w = staging.writer("indptr_cut.bin")?;
    let mut hist = BTreeMap::new();
    let (mut prev, mut buf) = (0u64, vec![0u8; 1 << 16]);
    let mut left = rows + 1;
    let mut first = true;
    while left > 0 {
        let n = (left as usize).min(buf.len() / 8);
        r.read_exact(&mut buf[..n * 8]).at(&old)?;
        for c in buf[..n * 8].chunks_exact(8) {
            let x = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            if !first {
                *hist.entry(x - prev).or_insert(0u64) += 1;
            }
            first = false;
            prev = x;
        }
        w.write(&buf[..n * 8])?;
        left -= n as u64;
    }
    let mut entry = w.finish()?;
    // The cut index takes the full one's name.
    let cut = staging.dir().join(&entry.path);
    std::fs::rename(&cut, &old).at(&old)?;
    entry.path = staging.files()[&key].path.clone();
    staging.replace(&key, entry);
    Ok(degree_stats(&hist, rows, num_edges))
}

/// A relation's edge file, each pair checked against its own end's node count (and read as
/// (DST, SRC) for a reverse relation).
struct Bounded {
    inner: Box<dyn EdgeSource>,
    reversed: bool,
    sources: u64,
    targets: u64,
    relation: String,
    path: PathBuf,
    seen: u64,
}

impl EdgeSource for Bounded {
    fn fill(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<usize> {
        let start = out.len();
        let n = self.inner.fill(out, max)?;
        // A reverse relation reads the file's pairs as (dst, src) of the forward one.
        let (src_bound, dst_bound) = if self.reversed {
            (self.targets, self.sources)
        } else {
            (self.sources, self.targets)
        };
        for (i, e) in out[start..].iter_mut().enumerate() {
            let (s, d) = *e;
            if s >= src_bound || d >= dst_bound {
                let (col, id, bound) = if s >= src_bound {
                    ("first", s, src_bound)
                } else {
                    ("second", d, dst_bound)
                };
                return crate::input_err!(
                    "{}: edge {} (counting from 0) of relation {}: the {col} id {id} is out of range, its node type has {bound} nodes",
                    self.path.display(),
                    self.seen + i as u64,
                    self.relation,
                );
            }
            if self.reversed {
                *e = (d, s);
            }
        }
        self.seen += n as u64;
        Ok(n)
    }
    fn position(&self) -> (u64, Option<u64>) {
        self.inner.position()
    }
    fn unit(&self) -> &'static str {
        self.inner.unit()
    }
    fn ids_fit_u32(&self) -> bool {
        self.inner.ids_fit_u32()
    }
    fn rewind(&mut self) -> Result<bool> {
        self.seen = 0;
        self.inner.rewind()
    }
}
