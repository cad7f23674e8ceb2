//! The dataset manifest (`manifest.json`): what a dataset holds and how its files are laid out.
//! `docs/FORMAT.md` is the byte-level specification; this module is its executable form.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Error, IoContext, Result};

/// The `format` field of every manifest.
pub const FORMAT_NAME: &str = "ringgnn-dataset";
/// The newest format version this build writes. It reads every version up to this one.
pub const FORMAT_VERSION: u32 = 3;
/// The version of a dataset without times: datasets that do not need version 3 stay at 2, byte
/// for byte as before, so that readers that predate times read them.
pub const UNTIMED_VERSION: u32 = 2;
/// The first version with edge and node times (FORMAT.md "Times"): neighbor lists ordered by
/// (time, source) instead of by source, which a reader of version 2 would misread.
pub const TIMES_VERSION: u32 = 3;
/// Every binary file is zero-padded to a multiple of this, so that O_DIRECT may read any page.
pub const PAGE: u64 = 4096;
pub const MANIFEST_FILE: &str = "manifest.json";

/// Width of the entries of `indices`: u32 when every node id fits, as the spec requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexDtype {
    U32,
    U64,
}

impl IndexDtype {
    /// The dtype FORMAT.md prescribes for a graph of `num_nodes` nodes.
    pub fn for_nodes(num_nodes: u64) -> Self {
        if num_nodes < (1u64 << 32) {
            IndexDtype::U32
        } else {
            IndexDtype::U64
        }
    }
    pub fn size(self) -> u64 {
        match self {
            IndexDtype::U32 => 4,
            IndexDtype::U64 => 8,
        }
    }
}

/// Storage type of feature values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureDtype {
    F32,
    F16,
    Bf16,
}

impl FeatureDtype {
    pub fn size(self) -> u64 {
        match self {
            FeatureDtype::F32 => 4,
            FeatureDtype::F16 | FeatureDtype::Bf16 => 2,
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "f32" | "float32" => Ok(FeatureDtype::F32),
            "f16" | "float16" => Ok(FeatureDtype::F16),
            "bf16" | "bfloat16" => Ok(FeatureDtype::Bf16),
            _ => crate::input_err!("feature dtype '{s}' is not supported; use f32, f16 or bf16"),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            FeatureDtype::F32 => "f32",
            FeatureDtype::F16 => "f16",
            FeatureDtype::Bf16 => "bf16",
        }
    }
}

/// The graph section: CSC orientation, for node v the sources u of edges u->v.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphInfo {
    /// Always "csc" in version 1.
    pub orientation: String,
    pub indices_dtype: IndexDtype,
}

/// Feature rows: `[num_nodes, dim]` values; see [`FeatureInfo::row_offset`] for the padding rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeatureInfo {
    pub dim: u64,
    pub dtype: FeatureDtype,
    /// `dim * dtype size`.
    pub row_bytes: u64,
    /// Rows packed into each 4 KiB page before padding to the next page; 0 when a row is larger
    /// than a page, in which case rows are stored back to back.
    pub rows_per_page: u64,
}

impl FeatureInfo {
    pub fn new(dim: u64, dtype: FeatureDtype) -> Self {
        let row_bytes = dim * dtype.size();
        let rows_per_page = if row_bytes == 0 || row_bytes > PAGE {
            0
        } else {
            PAGE / row_bytes
        };
        FeatureInfo {
            dim,
            dtype,
            row_bytes,
            rows_per_page,
        }
    }
    /// Byte offset of row `i` in `features.bin`: no row straddles a page boundary unless it is
    /// larger than a page.
    pub fn row_offset(&self, i: u64) -> u64 {
        match i.checked_div(self.rows_per_page) {
            None => i * self.row_bytes,
            Some(page) => page * PAGE + (i % self.rows_per_page) * self.row_bytes,
        }
    }
    /// Payload bytes (before the final padding) of a file holding `n` rows.
    pub fn payload_bytes(&self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.row_offset(n - 1) + self.row_bytes
        }
    }
}

/// Labels: i64 per node, -1 for unlabeled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabelInfo {
    /// Largest label + 1 (0 when no node is labeled).
    pub num_classes: u64,
    pub num_labeled: u64,
}

/// In-degree statistics of the CSC graph (the number of neighbors a sampler can draw from).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DegreeStats {
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    /// The lower median (element `(V-1)/2` of the sorted degrees).
    pub median: u64,
    /// Number of nodes with in-degree 0.
    pub zero: u64,
}

/// Name of the edge split that holds the edges left in the training graph.
pub const TRAIN: &str = "train";

/// One held-out (or training) edge set of a link-prediction split (format version 2): `edges`
/// (src, dst) pairs in `edge_split.NAME`, and when `negatives > 0`, that many fixed negative
/// destinations per pair in `edge_negatives.NAME`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeSplitInfo {
    pub edges: u64,
    pub negatives: u64,
    /// The negatives were given by the input (a GraphBolt task), not drawn: they may repeat
    /// within a row or equal the pair's destination. Written only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub given_negatives: bool,
    /// Negative (src, dst) pairs shared by every pair of the split (OGB's `edge_neg`), in
    /// `edge_shared_negatives.NAME`; 0 (not written) when there are none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_negatives: u64,
    /// A split by time: its events' times are in `edge_split_times.NAME`, ordered with its
    /// pairs by (time, src, dst). Written only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub times: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How `node_ids.bin` spells each node's original id (datasets converted from tables whose ids
/// were not dense integers, `docs/FORMAT.md` "Original node ids").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeIdDtype {
    /// `node_ids.bin` is i64 `[V]`.
    I64,
    /// `node_ids.bin` is u64 `[V]`.
    U64,
    /// `node_ids.bin` is u64 offsets `[V + 1]` into `node_id_bytes.bin` (UTF-8).
    Str,
}

/// The original ids of the nodes: node `v` of the dataset was called `node_ids[v]` in the input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeIdInfo {
    pub dtype: NodeIdDtype,
    /// Bytes of `node_id_bytes.bin`'s payload (`Str`); 0 otherwise.
    pub bytes: u64,
}

impl NodeIdInfo {
    /// Payload bytes of `node_ids.bin` for `num_nodes` nodes.
    pub fn ids_payload(&self, num_nodes: u64) -> u64 {
        match self.dtype {
            NodeIdDtype::Str => (num_nodes + 1) * 8,
            _ => num_nodes * 8,
        }
    }
}

/// The smallest and largest time of an edge or node time file (int64), recorded in the manifest
/// so that readers know the range without reading the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRange {
    pub min: i64,
    pub max: i64,
}

impl TimeRange {
    /// The range of `times`, or None when it is empty.
    pub fn of(times: &[i64]) -> Option<Self> {
        let (&first, rest) = times.split_first()?;
        Some(rest.iter().fold(
            TimeRange {
                min: first,
                max: first,
            },
            |r, &t| r.with(t),
        ))
    }
    /// This range grown to hold `t`.
    pub fn with(self, t: i64) -> Self {
        TimeRange {
            min: self.min.min(t),
            max: self.max.max(t),
        }
    }
    /// The union of two optional ranges.
    pub fn union(a: Option<Self>, b: Option<Self>) -> Option<Self> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.with(b.min).with(b.max)),
            (a, b) => a.or(b),
        }
    }
}

/// One binary file of the dataset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// File name relative to the dataset directory.
    pub path: String,
    /// Size on disk, a multiple of 4096.
    pub bytes: u64,
    /// Meaningful bytes at the start of the file; the rest is zero padding.
    pub payload_bytes: u64,
    /// CRC-32C (Castagnoli) of all `bytes` bytes, 8 lowercase hex digits.
    pub crc32c: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub created_by: String,
    pub num_nodes: u64,
    pub num_edges: u64,
    pub graph: GraphInfo,
    pub features: Option<FeatureInfo>,
    pub labels: Option<LabelInfo>,
    /// Split name -> number of node ids in `split.NAME`.
    pub splits: BTreeMap<String, u64>,
    /// Edge split name -> its pairs and negatives (version 2; empty in version 1).
    #[serde(default)]
    pub edge_splits: BTreeMap<String, EdgeSplitInfo>,
    /// The nodes' original ids, when the input named nodes by other ids (absent otherwise, and
    /// then not written, so that other datasets' manifests are unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ids: Option<NodeIdInfo>,
    /// The range of the edge times in `edge_times` (version 3), when the edges have times;
    /// absent (and not written) otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge_times: Option<TimeRange>,
    /// The range of the node times in `node_times` (version 3), when the nodes have times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_times: Option<TimeRange>,
    pub degree: DegreeStats,
    /// Logical name ("indptr", "indices", "features", "labels", "split.train", ...) -> file.
    pub files: BTreeMap<String, FileEntry>,
    /// How the dataset was made (input file, options, generator parameters). Informative only.
    #[serde(default)]
    pub source: serde_json::Value,
    /// In a view of one relation of a heterogeneous dataset ([`crate::hetero`]): the number of
    /// nodes of its source type, which bounds the entries of `indices` (`num_nodes` counts its
    /// destination type). `None` in a homogeneous dataset, where `num_nodes` bounds both.
    #[serde(skip)]
    pub num_sources: Option<u64>,
}

impl Manifest {
    /// The bound of the entries of `indices`: `num_nodes`, or a relation's source count.
    pub fn num_sources(&self) -> u64 {
        self.num_sources.unwrap_or(self.num_nodes)
    }

    /// Read and check `DIR/manifest.json`: the format name, a version this build can read, and
    /// the fields FORMAT.md requires.
    pub fn read(dir: &Path) -> Result<Self> {
        let (path, value) = read_value(dir)?;
        if value.get("relations").is_some() || value.get("node_types").is_some() {
            return Err(Error::Input(format!(
                "{}: this is a heterogeneous dataset (it has node types and relations); open one of its parts (a node type or a relation), or use a command that takes heterogeneous datasets",
                path.display()
            )));
        }
        let m: Manifest = serde_json::from_value(value).map_err(|e| {
            Error::Corrupt(format!(
                "{}: {e}; the manifest does not follow FORMAT.md",
                path.display()
            ))
        })?;
        m.check_fields(&path)?;
        Ok(m)
    }

    fn check_fields(&self, path: &Path) -> Result<()> {
        let bad = |what: String| Err(Error::Corrupt(format!("{}: {what}", path.display())));
        if self.graph.orientation != "csc" {
            return bad(format!(
                "graph.orientation is '{}', only 'csc' is defined",
                self.graph.orientation
            ));
        }
        if self.graph.indices_dtype != IndexDtype::for_nodes(self.num_nodes) {
            return bad(format!(
                "graph.indices_dtype {:?} does not match num_nodes {}",
                self.graph.indices_dtype, self.num_nodes
            ));
        }
        if self.version < 2 && !self.edge_splits.is_empty() {
            return bad(
                "edge_splits is a field of format version 2, but the manifest says version 1"
                    .into(),
            );
        }
        self.check_files(true).or_else(bad)
    }

    /// The files the fields say, present or absent (`graph`: `indptr` and `indices`, which a
    /// node type of a heterogeneous dataset has not), each a plain file name; the problem in
    /// words. Also what `hetero` checks of each part's view.
    pub(crate) fn check_files(&self, graph: bool) -> std::result::Result<(), String> {
        for key in ["indptr", "indices"] {
            match (graph, self.files.contains_key(key)) {
                (true, false) => return Err(format!("files.{key} is missing")),
                (false, true) => return Err(format!("a node type has no files.{key}")),
                _ => {}
            }
        }
        if self.features.is_some() != self.files.contains_key("features") {
            return Err("'features' and files.features must be both present or both absent".into());
        }
        if self.labels.is_some() != self.files.contains_key("labels") {
            return Err("'labels' and files.labels must be both present or both absent".into());
        }
        for name in self.splits.keys() {
            if !self.files.contains_key(&format!("split.{name}")) {
                return Err(format!("files.split.{name} is missing"));
            }
        }
        for (name, info) in &self.edge_splits {
            if !self.files.contains_key(&format!("edge_split.{name}")) {
                return Err(format!("files.edge_split.{name} is missing"));
            }
            if (info.negatives > 0) != self.files.contains_key(&format!("edge_negatives.{name}")) {
                return Err(format!(
                    "edge_splits.{name}.negatives is {} but files.edge_negatives.{name} is {}",
                    info.negatives,
                    if info.negatives > 0 {
                        "missing"
                    } else {
                        "present"
                    }
                ));
            }
            let shared = self
                .files
                .contains_key(&format!("edge_shared_negatives.{name}"));
            if (info.shared_negatives > 0) != shared {
                return Err(format!(
                    "edge_splits.{name}.shared_negatives is {} but files.edge_shared_negatives.{name} is {}",
                    info.shared_negatives,
                    if shared { "present" } else { "missing" }
                ));
            }
        }
        for (key, range) in [
            ("edge_times", self.edge_times),
            ("node_times", self.node_times),
        ] {
            if range.is_some() != self.files.contains_key(key) {
                return Err(format!(
                    "'{key}' and files.{key} must be both present or both absent"
                ));
            }
            if range.is_some_and(|r| r.min > r.max) {
                return Err(format!("{key}.min is larger than {key}.max"));
            }
        }
        if self.files.contains_key("edge_time_keys") && !self.files.contains_key("edge_times") {
            return Err(
                "files.edge_time_keys needs files.edge_times, the times it is derived from".into(),
            );
        }
        if self.version < TIMES_VERSION && (self.edge_times.is_some() || self.node_times.is_some())
        {
            return Err(format!(
                "edge_times and node_times are fields of format version {TIMES_VERSION}, but the manifest says version {}",
                self.version
            ));
        }
        if self.edge_times.is_some() && !graph {
            return Err("a node type has no edge_times".into());
        }
        let ids = self.node_ids.as_ref().map(|i| i.dtype);
        if ids.is_some() != self.files.contains_key("node_ids") {
            return Err("'node_ids' and files.node_ids must be both present or both absent".into());
        }
        if (ids == Some(NodeIdDtype::Str)) != self.files.contains_key("node_id_bytes") {
            return Err(
                "files.node_id_bytes must be present exactly when node_ids.dtype is \"str\"".into(),
            );
        }
        for (key, f) in &self.files {
            if f.path.contains('/') || f.path.contains('\\') || f.path.starts_with('.') {
                return Err(format!(
                    "files.{key}.path '{}' must be a plain file name",
                    crate::excerpt::excerpt(f.path.as_bytes())
                ));
            }
        }
        Ok(())
    }

    /// Serialize with a trailing newline (stable field order, so equal datasets have equal manifests).
    pub fn to_json(&self) -> String {
        pretty_json(self)
    }

    /// The version a dataset with these fields is written in: [`TIMES_VERSION`] when it has
    /// edge or node times, else [`UNTIMED_VERSION`].
    pub fn version_for(timed: bool) -> u32 {
        if timed {
            TIMES_VERSION
        } else {
            UNTIMED_VERSION
        }
    }

    pub fn file(&self, key: &str) -> Result<&FileEntry> {
        self.files
            .get(key)
            .ok_or_else(|| Error::Corrupt(format!("manifest has no files.{key}")))
    }
}

/// Read `DIR/manifest.json` as JSON and check what every manifest shares: the format name and
/// a version this build reads. Returns the manifest's path with the value.
pub(crate) fn read_value(dir: &Path) -> Result<(std::path::PathBuf, serde_json::Value)> {
    let path = dir.join(MANIFEST_FILE);
    if !dir.is_dir() {
        return Err(Error::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such dataset directory"),
        ));
    }
    let text = std::fs::read_to_string(&path).at(&path)?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Error::Corrupt(format!(
            "{}: not valid JSON ({e}); the dataset is damaged, rebuild it",
            path.display()
        ))
    })?;
    match value.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT_NAME) => {}
        other => {
            return Err(Error::Corrupt(format!(
            "{}: field 'format' is {:?}, expected \"{FORMAT_NAME}\"; is this a ringgnn dataset?",
            path.display(),
            other
        )))
        }
    }
    match value.get("version").and_then(|v| v.as_u64()) {
            Some(v) if v >= 1 && v <= FORMAT_VERSION as u64 => {}
            Some(v) => {
                return Err(Error::Corrupt(format!(
                    "{}: format version {v} is newer than this ringgnn reads (up to {FORMAT_VERSION}); upgrade ringgnn",
                    path.display()
                )))
            }
            None => {
                return Err(Error::Corrupt(format!("{}: field 'version' is missing or not an integer", path.display())))
            }
        }
    Ok((path, value))
}

/// A manifest as written: pretty-printed JSON with a trailing newline.
pub(crate) fn pretty_json(m: &impl Serialize) -> String {
    let mut s = serde_json::to_string_pretty(m).expect("manifest serializes");
    s.push('\n');
    s
}

/// Round `n` up to a multiple of [`PAGE`]; saturates at `u64::MAX` (the size check adds up
/// sizes of absurd counts, which must be refused, never wrap to small ones).
pub fn pad_to_page(n: u64) -> u64 {
    n.div_ceil(PAGE).saturating_mul(PAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_rows_never_straddle_pages() {
        for dim in [1u64, 3, 100, 128, 1000, 1024, 1025, 3000] {
            for dtype in [FeatureDtype::F32, FeatureDtype::F16] {
                let f = FeatureInfo::new(dim, dtype);
                for i in 0..300 {
                    let off = f.row_offset(i);
                    let end = off + f.row_bytes;
                    if f.row_bytes <= PAGE {
                        assert_eq!(off / PAGE, (end - 1) / PAGE, "dim {dim} row {i}");
                    }
                    if i > 0 {
                        assert!(off >= f.row_offset(i - 1) + f.row_bytes);
                    }
                }
            }
        }
        let f = FeatureInfo::new(100, FeatureDtype::F32); // 400 B rows, 10 per page
        assert_eq!(f.rows_per_page, 10);
        assert_eq!(f.row_offset(9), 3600);
        assert_eq!(f.row_offset(10), 4096);
        assert_eq!(f.payload_bytes(11), 4096 + 400);
        let big = FeatureInfo::new(1100, FeatureDtype::F32);
        assert_eq!(big.rows_per_page, 0);
        assert_eq!(big.row_offset(3), 3 * 4400);
    }

    #[test]
    fn index_dtype_follows_node_count() {
        assert_eq!(IndexDtype::for_nodes(0), IndexDtype::U32);
        assert_eq!(IndexDtype::for_nodes((1 << 32) - 1), IndexDtype::U32);
        assert_eq!(IndexDtype::for_nodes(1 << 32), IndexDtype::U64);
    }
}
