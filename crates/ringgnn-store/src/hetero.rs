//! Heterogeneous datasets (docs/FORMAT.md, "Typed nodes and relations"): node types, each with
//! its own id space `0 .. num_nodes` and its own features, labels and splits, and relations
//! `SRC:REL:DST`, each its own CSC from `SRC` ids to `DST` ids, so that sampling one relation
//! reads only its files.
//!
//! Every part of a heterogeneous dataset is read through a *view* ([`HeteroManifest::view`]): a
//! homogeneous [`Manifest`] of one node type (its features, labels and splits; no graph) or of
//! one relation (its CSC over the destination type's nodes, `num_sources` the source type's
//! count). Every reader of a homogeneous dataset (samplers, feature readers, `verify`) then reads
//! a part unchanged. Building is [`build`] (`convert/hetero.rs`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::manifest::{
    pretty_json, read_value, DegreeStats, EdgeSplitInfo, FeatureInfo, FileEntry, GraphInfo,
    IndexDtype, LabelInfo, Manifest, NodeIdInfo, TimeRange, FORMAT_NAME,
};
use crate::{Error, Result};

#[cfg(test)]
pub(crate) mod tests;

/// Building lives above the format, beside the homogeneous `convert`; its names stay reachable
/// here, where a heterogeneous dataset's users look for them.
pub use crate::convert::hetero::{
    build, build_with_times, HeteroSpec, HeteroTimes, NodeTypeSpec, RelationSpec,
};

/// One node type: its node count and its per-node files, as the top-level fields of a
/// homogeneous manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeTypeInfo {
    pub num_nodes: u64,
    pub features: Option<FeatureInfo>,
    pub labels: Option<LabelInfo>,
    /// Split name -> number of node ids (of this type) in `node.TYPE.split.NAME`.
    pub splits: BTreeMap<String, u64>,
    /// The type's original ids (`node.TYPE.node_ids`), as a homogeneous dataset's `node_ids`;
    /// absent (and not written) when the input named this type's nodes by dense ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ids: Option<NodeIdInfo>,
    /// The range of the type's node times (`node.TYPE.node_times`, version 3); absent (and not
    /// written) when its nodes have no times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_times: Option<TimeRange>,
}

/// One relation `SRC:REL:DST`: a CSC over the `DST` nodes whose entries are `SRC` ids.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RelationInfo {
    pub num_edges: u64,
    pub graph: GraphInfo,
    /// In-degree statistics over the `DST` nodes.
    pub degree: DegreeStats,
    #[serde(default)]
    pub edge_splits: BTreeMap<String, EdgeSplitInfo>,
    /// The range of the relation's edge times (`relation.S:R:D.edge_times`, version 3); absent
    /// (and not written) when its edges have no times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge_times: Option<TimeRange>,
}

/// The manifest of a heterogeneous dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeteroManifest {
    pub format: String,
    pub version: u32,
    pub created_by: String,
    /// Type name -> its nodes and per-node files.
    pub node_types: BTreeMap<String, NodeTypeInfo>,
    /// `SRC:REL:DST` -> its graph.
    pub relations: BTreeMap<String, RelationInfo>,
    /// Logical name (`node.TYPE.features`, `relation.SRC:REL:DST.indptr`, ...) -> file.
    pub files: BTreeMap<String, FileEntry>,
    #[serde(default)]
    pub source: serde_json::Value,
}

/// A part of a heterogeneous dataset that readers open as a homogeneous one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// A node type: its features, labels and splits (no graph).
    Node(String),
    /// A relation `SRC:REL:DST`: its CSC and edge splits.
    Relation(String),
}

impl Part {
    /// `node/TYPE` or `relation/SRC:REL:DST`: how bindings and messages name a part.
    pub fn parse(s: &str) -> Result<Self> {
        match s.split_once('/') {
            Some(("node", t)) => Ok(Part::Node(t.to_string())),
            Some(("relation", r)) => Ok(Part::Relation(r.to_string())),
            _ => crate::input_err!(
                "'{s}' does not name a part of a heterogeneous dataset: use node/TYPE or relation/SRC:REL:DST"
            ),
        }
    }

    /// The prefix of this part's keys in `files`.
    pub fn key_prefix(&self) -> String {
        match self {
            Part::Node(t) => format!("node.{t}."),
            Part::Relation(r) => format!("relation.{r}."),
        }
    }
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Part::Node(t) => write!(f, "node/{t}"),
            Part::Relation(r) => write!(f, "relation/{r}"),
        }
    }
}

/// The node type of a homogeneous dataset seen as a typed one (its one-type case);
/// `python/ringgnn/data/schema.py` names it the same.
pub const ONE_TYPE: &str = "node";
/// The relation of a homogeneous dataset seen as a typed one.
pub const ONE_RELATION: &str = "node:to:node";

/// Either kind of manifest, as `manifest.json` says.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // read once per open: its size never matters
pub enum AnyManifest {
    Homogeneous(Manifest),
    Heterogeneous(HeteroManifest),
}

impl AnyManifest {
    /// Read `DIR/manifest.json`, whichever kind it is.
    pub fn read(dir: &Path) -> Result<Self> {
        let (path, value) = read_value(dir)?;
        if value.get("node_types").is_some() || value.get("relations").is_some() {
            HeteroManifest::from_value(&path, value).map(AnyManifest::Heterogeneous)
        } else {
            Manifest::read(dir).map(AnyManifest::Homogeneous)
        }
    }

    pub fn to_json(&self) -> String {
        match self {
            AnyManifest::Homogeneous(m) => m.to_json(),
            AnyManifest::Heterogeneous(m) => m.to_json(),
        }
    }
}

/// Check a type or relation name: letters, digits and `_` (so keys and messages stay plain).
pub fn check_name(name: &str, what: &str) -> Result<()> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return crate::input_err!(
            "{what} '{name}' must be non-empty letters, digits, '_' or '-' (types and relations are named like paper, author:writes:paper)"
        );
    }
    Ok(())
}

/// Split `SRC:REL:DST` into its three names, each checked.
pub fn split_relation(name: &str) -> Result<(&str, &str, &str)> {
    let parts: Vec<&str> = name.split(':').collect();
    let [s, r, d] = parts[..] else {
        return crate::input_err!(
            "relation '{name}' must be SRC:REL:DST (three names separated by ':'), as in author:writes:paper"
        );
    };
    check_name(s, "node type")?;
    check_name(r, "relation name")?;
    check_name(d, "node type")?;
    Ok((s, r, d))
}

/// The name of the reverse of `S:R:D`: `D:rev_R:S`.
pub fn reverse_name(name: &str) -> Result<String> {
    let (s, r, d) = split_relation(name)?;
    Ok(format!("{d}:rev_{r}:{s}"))
}

impl HeteroManifest {
    /// Read `DIR/manifest.json` as a heterogeneous manifest.
    pub fn read(dir: &Path) -> Result<Self> {
        match AnyManifest::read(dir)? {
            AnyManifest::Heterogeneous(m) => Ok(m),
            AnyManifest::Homogeneous(_) => crate::input_err!(
                "{}: a homogeneous dataset (one node type, one relation), not a heterogeneous one",
                dir.display()
            ),
        }
    }

    fn from_value(path: &Path, value: serde_json::Value) -> Result<Self> {
        let m: HeteroManifest = serde_json::from_value(value).map_err(|e| {
            Error::Corrupt(format!(
                "{}: {e}; the manifest does not follow FORMAT.md",
                path.display()
            ))
        })?;
        m.check_fields(path)?;
        Ok(m)
    }

    fn check_fields(&self, path: &Path) -> Result<()> {
        let corrupt = |what: String| Error::Corrupt(format!("{}: {what}", path.display()));
        if self.version < 2 {
            return Err(corrupt("node_types and relations are fields of format version 2, but the manifest says version 1".into()));
        }
        if self.node_types.is_empty() {
            return Err(corrupt(
                "node_types is empty: a heterogeneous dataset has at least one".into(),
            ));
        }
        for name in self.node_types.keys() {
            check_name(name, "node type").map_err(|e| corrupt(e.to_string()))?;
            let part = Part::Node(name.clone());
            let view = self.view(&part).map_err(|e| corrupt(e.to_string()))?;
            check_part_files(&view, path, &part)?;
        }
        for (name, r) in &self.relations {
            let (s, _, d) = split_relation(name).map_err(|e| corrupt(e.to_string()))?;
            for t in [s, d] {
                if !self.node_types.contains_key(t) {
                    return Err(corrupt(format!(
                        "relation {name} names node type '{t}', which node_types does not have"
                    )));
                }
            }
            let rows = self.node_types[s]
                .num_nodes
                .max(self.node_types[d].num_nodes);
            let want = IndexDtype::for_nodes(rows);
            if r.graph.orientation != "csc" || r.graph.indices_dtype != want {
                return Err(corrupt(format!(
                    "relations.{name}.graph must be csc with indices_dtype {want:?} (from the larger of its two node counts)"
                )));
            }
            let part = Part::Relation(name.clone());
            let view = self.view(&part).map_err(|e| corrupt(e.to_string()))?;
            check_part_files(&view, path, &part)?;
        }
        // Every file belongs to a part (whose view checked its name).
        for key in self.files.keys() {
            let owned = self
                .node_types
                .keys()
                .any(|t| key.starts_with(&format!("node.{t}.")))
                || self
                    .relations
                    .keys()
                    .any(|r| key.starts_with(&format!("relation.{r}.")));
            if !owned {
                return Err(corrupt(format!(
                    "files.{key} belongs to no node type or relation"
                )));
            }
        }
        Ok(())
    }

    /// Serialize with a trailing newline, like [`Manifest::to_json`].
    pub fn to_json(&self) -> String {
        pretty_json(self)
    }

    /// The node types, by name.
    pub fn type_names(&self) -> impl Iterator<Item = &str> {
        self.node_types.keys().map(String::as_str)
    }

    /// A part as a homogeneous manifest (see the module docs). Its `files` hold the part's files
    /// under the keys of a homogeneous dataset (`features`, `indptr`, `split.train`, ...).
    pub fn view(&self, part: &Part) -> Result<Manifest> {
        let prefix = part.key_prefix();
        let files: BTreeMap<String, FileEntry> = self
            .files
            .iter()
            .filter_map(|(k, f)| k.strip_prefix(&prefix).map(|k| (k.to_string(), f.clone())))
            .collect();
        let base =
            |num_nodes: u64, num_edges: u64, graph: GraphInfo, degree: DegreeStats| Manifest {
                format: FORMAT_NAME.into(),
                version: self.version,
                created_by: self.created_by.clone(),
                num_nodes,
                num_edges,
                graph,
                features: None,
                labels: None,
                splits: BTreeMap::new(),
                edge_splits: BTreeMap::new(),
                node_ids: None,
                edge_times: None,
                node_times: None,
                degree,
                files: files.clone(),
                source: serde_json::json!({ "part": part.to_string() }),
                num_sources: None,
            };
        match part {
            Part::Node(t) => {
                let Some(info) = self.node_types.get(t) else {
                    return crate::input_err!(
                        "no node type '{t}' (the dataset has: {})",
                        self.node_types
                            .keys()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                };
                let graph = GraphInfo {
                    orientation: "csc".into(),
                    indices_dtype: IndexDtype::for_nodes(info.num_nodes),
                };
                let mut m = base(info.num_nodes, 0, graph, DegreeStats::default());
                m.features = info.features.clone();
                m.labels = info.labels.clone();
                m.splits = info.splits.clone();
                m.node_ids = info.node_ids.clone();
                m.node_times = info.node_times;
                Ok(m)
            }
            Part::Relation(r) => {
                let Some(info) = self.relations.get(r) else {
                    return crate::input_err!(
                        "no relation '{r}' (the dataset has: {})",
                        self.relations
                            .keys()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                };
                let (s, _, d) = split_relation(r)?;
                let count = |t: &str| {
                    self.node_types.get(t).map(|i| i.num_nodes).ok_or_else(|| {
                        Error::Corrupt(format!(
                            "relation {r} names node type '{t}', which node_types does not have"
                        ))
                    })
                };
                let mut m = base(
                    count(d)?,
                    info.num_edges,
                    info.graph.clone(),
                    info.degree.clone(),
                );
                m.edge_splits = info.edge_splits.clone();
                m.edge_times = info.edge_times;
                m.num_sources = Some(count(s)?);
                Ok(m)
            }
        }
    }
}

/// A view's files are what its fields say, part by part (a node type has no graph files).
fn check_part_files(view: &Manifest, path: &Path, part: &Part) -> Result<()> {
    view.check_files(matches!(part, Part::Relation(_)))
        .map_err(|what| Error::Corrupt(format!("{}: {part}: {what}", path.display())))
}
#[cfg(test)]
mod link_tests;
