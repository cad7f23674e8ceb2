//! `ringgnn verify`: checksums and structure of a dataset (indptr monotone, indices < V, sizes,
//! labels and split ids in range, zero padding, degree statistics as recorded, edge times in
//! order and time ranges as recorded).
//!
//! Every file is read once, front to back, in large blocks: the CRC-32C, the zero padding and the
//! structure are checked in the same pass, so memory stays O(1) in the edge count (indices are
//! never loaded; a split needs one bit per node to find duplicates). That each original node id
//! occurs once is checked last, by an external sort within the budget ([`unique_ids`]).
//!
//! This module decides which files a manifest lists and what each must hold; the one pass over
//! a file and the checks of each kind of file are [`checks`]'s, those of the edge splits
//! [`link`]'s, those of the time files [`times`]'.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::hetero::{reverse_name, split_relation, AnyManifest, Part};
use crate::manifest::{FeatureInfo, Manifest, NodeIdDtype, MANIFEST_FILE, TRAIN};
use crate::progress::Progress;
use crate::{Error, IoContext, Result};
use checks::{
    check_file, Check, Features, Indices, Indptr, Labels, Offsets, Opaque, Split, ADVICE,
};
use times::{EdgeTimeKeys, EdgeTimes, NodeTimes};
use unique_ids::IdCheck;

/// Memory the budget sets aside for everything but the sort of the original ids: the Python
/// interpreter that hosts the command, the read blocks and readers (about 45 MiB of RSS beside
/// the sort, measured: docs/benchmarks.md, "Measurements behind design choices", verify's 96 MiB
/// overhead), and room for the page
/// cache of the files read. The other checks run before the sort, never beside it; the only one
/// that grows with the dataset, a split's (one bit per node), must fit the sort's room too.
pub const OVERHEAD: u64 = 96 << 20;
/// Smallest budget accepted: the overhead plus a sort buffer of 1M ids.
pub const MIN_MEMORY: u64 = OVERHEAD + (16 << 20);

/// What `verify` may use besides reading the dataset.
#[derive(Clone, Debug)]
pub struct VerifyOptions {
    /// The command's memory budget in bytes ([`OVERHEAD`] of it for everything but the sort
    /// of the original ids).
    pub memory: u64,
    /// Where the sorted runs of the original ids go when they do not fit in memory (a
    /// temporary directory made there and removed afterwards); None: beside the dataset.
    pub spill_dir: Option<PathBuf>,
}

#[cfg(test)]
impl VerifyOptions {
    /// The tests' options: 1 GiB, runs beside the dataset.
    pub(crate) fn test() -> Self {
        VerifyOptions {
            memory: 1 << 30,
            spill_dir: None,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    pub files_checked: u64,
    pub bytes_checked: u64,
    /// Bytes the check of the original ids wrote to temporary files (0 when they fit).
    pub spilled_bytes: u64,
}

/// Check everything; the first problem is returned as `Error::Corrupt` naming the file and field.
pub fn verify(dir: &Path, opts: &VerifyOptions, progress: &dyn Progress) -> Result<VerifyReport> {
    if opts.memory < MIN_MEMORY {
        return Err(Error::Input(format!(
            "--memory {} bytes is too small; verify needs at least {}M",
            opts.memory,
            MIN_MEMORY >> 20
        )));
    }
    let spill_dir = match &opts.spill_dir {
        Some(d) if !d.is_dir() => {
            return Err(Error::Input(format!(
                "{}: the directory for the temporary files (--spill-dir) does not exist; create it first",
                d.display()
            )))
        }
        Some(d) => d.clone(),
        None => std::path::absolute(dir)
            .at(dir)?
            .parent()
            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf),
    };
    let how = IdCheck {
        sizes: runs::Sizes::for_budget(opts.memory - OVERHEAD),
        spill_dir: &spill_dir,
        hash: unique_ids::hash_bytes,
    };
    verify_with(dir, &how, progress)
}

/// [`verify`] with the sizes of the id check and its hash given (tests make them tiny).
pub(crate) fn verify_with(
    dir: &Path,
    how: &IdCheck<'_>,
    progress: &dyn Progress,
) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    match AnyManifest::read(dir)? {
        AnyManifest::Homogeneous(m) => {
            let parts = Parts {
                split_times: split_times(&m.source["link_split"]),
                ..Parts::default()
            };
            verify_view(dir, &m, parts, how, progress, &mut report)?
        }
        AnyManifest::Heterogeneous(h) => {
            // Each part is checked as the homogeneous dataset its view describes; the
            // relations' entries against their source type's count (`num_sources`).
            let parts = h
                .node_types
                .keys()
                .map(|t| Part::Node(t.clone()))
                .chain(h.relations.keys().map(|r| Part::Relation(r.clone())));
            for part in parts {
                let view = h.view(&part)?;
                // A split relation's reverse (`D:rev_R:S`) must not hold its held-out pairs.
                let reverse = match &part {
                    Part::Relation(r) if !view.edge_splits.is_empty() => Some(reverse_name(r)?)
                        .filter(|rev| h.relations.contains_key(rev))
                        .map(Part::Relation),
                    _ => None,
                };
                // A split relation's reverse holds none of its held-out events either.
                let split_times = match &part {
                    Part::Relation(r) => split_times(&h.source["link_split"][r]).or_else(|| {
                        let (d, rel, s) = split_relation(r).ok()?;
                        let forward = format!("{s}:{}:{d}", rel.strip_prefix("rev_")?);
                        split_times(&h.source["link_split"][&forward])
                    }),
                    Part::Node(_) => None,
                };
                let parts = Parts {
                    this: Some(&part),
                    reverse: reverse.as_ref(),
                    split_times,
                };
                verify_view(dir, &view, parts, how, progress, &mut report)?;
            }
        }
    }
    Ok(report)
}

/// Which part of a heterogeneous dataset a view is (none: a homogeneous dataset), and the
/// reverse relation its held-out pairs must be absent from.
#[derive(Clone, Default)]
struct Parts<'a> {
    this: Option<&'a Part>,
    reverse: Option<&'a Part>,
    /// A split by time: its split names and times, ascending, as `source.link_split.times`
    /// records them (`--link-split-time`).
    split_times: Option<Vec<(String, i64)>>,
}

/// Whether `part` is a relation between two node types (where `(i, i)` is no self loop).
fn bipartite(part: Option<&Part>) -> Result<bool> {
    Ok(match part {
        Some(Part::Relation(r)) => {
            let (s, _, d) = split_relation(r)?;
            s != d
        }
        _ => false,
    })
}

/// The split names and times of a split by time, from its `source.link_split` record.
fn split_times(link_split: &serde_json::Value) -> Option<Vec<(String, i64)>> {
    let mut v: Vec<(String, i64)> = link_split["times"]
        .as_object()?
        .iter()
        .filter_map(|(n, t)| Some((n.clone(), t.as_i64()?)))
        .collect();
    v.sort_by_key(|&(_, t)| t);
    Some(v)
}

/// The range `(after, until]` of split `name`'s times in a split by `times`: after its own
/// time, up to the next larger one (the record does not keep the order of splits with equal
/// times, of which all but the last are empty).
fn split_range(times: &[(String, i64)], name: &str) -> (Option<i64>, Option<i64>) {
    if name == TRAIN {
        return (None, times.first().map(|&(_, t)| t));
    }
    match times.iter().find(|(n, _)| n == name) {
        Some(&(_, after)) => (
            Some(after),
            times.iter().map(|&(_, t)| t).find(|&t| t > after),
        ),
        None => (None, None),
    }
}

/// Check the files of one (homogeneous) manifest or heterogeneous part.
fn verify_view(
    dir: &Path,
    m: &Manifest,
    parts: Parts<'_>,
    how: &IdCheck<'_>,
    progress: &dyn Progress,
    report: &mut VerifyReport,
) -> Result<()> {
    let part = parts.this;
    let manifest_path = dir.join(MANIFEST_FILE);
    let bad_manifest = |what: String| {
        Err(Error::Corrupt(format!(
            "{}: {}{what}; {ADVICE}",
            manifest_path.display(),
            part.map_or(String::new(), |p| format!("{p}: "))
        )))
    };
    if let Some(f) = &m.features {
        let want = FeatureInfo::new(f.dim, f.dtype);
        if f.dim == 0 {
            return bad_manifest("features.dim is 0".into());
        }
        if (f.row_bytes, f.rows_per_page) != (want.row_bytes, want.rows_per_page) {
            return bad_manifest(format!(
                "features.row_bytes {} and rows_per_page {} do not follow from dim {} and dtype {}: expected {} and {}",
                f.row_bytes,
                f.rows_per_page,
                f.dim,
                f.dtype.name(),
                want.row_bytes,
                want.rows_per_page
            ));
        }
    }
    // Graph files first: the indices check walks indptr, which must already be known good.
    // (A node type of a heterogeneous dataset has none.)
    let mut order: Vec<&str> = ["indptr", "indices"]
        .into_iter()
        .filter(|k| m.files.contains_key(*k))
        .collect();
    order.extend(
        m.files
            .keys()
            .map(String::as_str)
            .filter(|k| !matches!(*k, "indptr" | "indices" | "edge_time_keys")),
    );
    // The keys after the times they are derived from: a damaged time is reported as itself.
    if m.files.contains_key("edge_time_keys") {
        order.push("edge_time_keys");
    }
    let mut expected = BTreeMap::new();
    for &key in &order {
        let Some(payload) = payload_bytes(m, key) else {
            return bad_manifest(format!(
                "files.{key} is not a file of format version {}",
                m.version
            ));
        };
        expected.insert(key, payload);
    }
    let total: u64 = m.files.values().map(|f| f.bytes).sum();
    let stage = part.map_or("verify".to_string(), |p| format!("verify {p}"));
    progress.stage(&stage, Some(total), "B");
    let open = || match part {
        None => crate::dataset::Dataset::open(dir),
        Some(p) => crate::dataset::Dataset::open_part(dir, p),
    };
    for &key in &order {
        let entry = m.file(key)?;
        let path = dir.join(&entry.path);
        let mut check: Box<dyn Check> = match key {
            "indptr" => Box::new(Indptr::new(m)),
            "indices" => Box::new(Indices::new(m, dir.join(&m.file("indptr")?.path))),
            "features" => Box::new(Features(
                m.features.clone().expect("checked by Manifest::read"),
            )),
            "labels" => Box::new(Labels::new(m)),
            "edge_times" => {
                let first = parts.split_times.as_ref().and_then(|t| t.first().cloned());
                Box::new(
                    EdgeTimes::new(
                        m,
                        dir.join(&m.file("indptr")?.path),
                        dir.join(&m.file("indices")?.path),
                    )?
                    .held_out_after(first, bipartite(part)?),
                )
            }
            "node_times" => Box::new(NodeTimes::new(m)),
            "edge_time_keys" => Box::new(EdgeTimeKeys::new(dir.join(&m.file("edge_times")?.path))?),
            "node_ids" => match m.node_ids.as_ref().map(|i| i.dtype) {
                Some(NodeIdDtype::Str) => {
                    Box::new(Offsets::new(m.node_ids.as_ref().map_or(0, |i| i.bytes)))
                }
                _ => Box::new(Opaque),
            },
            "node_id_bytes" => Box::new(Opaque),
            _ => {
                if let Some(name) = key.strip_prefix("edge_split.") {
                    let reverse = parts
                        .reverse
                        .map(|r| Ok((r, crate::dataset::Dataset::open_part(dir, r)?)))
                        .transpose()?;
                    let bipartite = bipartite(part)?;
                    let by_time = m.edge_splits.get(name).is_some_and(|i| i.times);
                    Box::new(
                        link::Pairs::new(
                            name,
                            (m.num_sources(), m.num_nodes),
                            bipartite,
                            open()?,
                            reverse,
                        )
                        .by_time(by_time),
                    )
                } else if let Some(name) = key.strip_prefix("edge_split_times.") {
                    let pairs = dir.join(&m.file(&format!("edge_split.{name}"))?.path);
                    let (after, until) = parts
                        .split_times
                        .as_deref()
                        .map_or((None, None), |t| split_range(t, name));
                    Box::new(link::SplitTimes::new(pairs, after, until)?)
                } else if key.starts_with("edge_shared_negatives.") {
                    Box::new(link::SharedNegatives(m.num_nodes))
                } else if let Some(name) = key.strip_prefix("edge_negatives.") {
                    let info = &m.edge_splits[name];
                    let pairs = dir.join(&m.file(&format!("edge_split.{name}"))?.path);
                    let strict = !info.given_negatives;
                    Box::new(link::Negatives::new(
                        m.num_nodes,
                        info.negatives,
                        pairs,
                        strict,
                    )?)
                } else {
                    // One bit per node, held while the split is read (never beside the sort of
                    // the original ids): within the same room.
                    let bits = m.num_nodes.div_ceil(8);
                    if bits > how.sizes.budget() {
                        return Err(Error::Input(format!(
                            "{}: checking it takes one bit per node ({bits} bytes for {} nodes), more than --memory leaves beyond verify's own {} MiB; raise --memory to at least {}M",
                            path.display(),
                            m.num_nodes,
                            OVERHEAD >> 20,
                            (OVERHEAD + bits).div_ceil(1 << 20)
                        )));
                    }
                    Box::new(Split::new(m.num_nodes))
                }
            }
        };
        check_file(&path, key, entry, expected[key], check.as_mut(), progress)?;
        report.files_checked += 1;
        report.bytes_checked += entry.bytes;
    }
    // Last: the id files' bytes and offsets are known good by now.
    report.spilled_bytes += unique_ids::check(dir, m, part, how, progress)?;
    Ok(())
}

/// The payload the manifest's counts (and, for features and node ids, their descriptions) put in
/// the file `key`, before its padding; `None` for a key no file of the format has. The one rule
/// `verify` checks every file's size by and a dataset's opening checks the graph, labels and
/// times by.
pub(crate) fn payload_bytes(m: &Manifest, key: &str) -> Option<u64> {
    Some(match key {
        "indptr" => (m.num_nodes + 1) * 8,
        "indices" => m.num_edges * m.graph.indices_dtype.size(),
        "features" => m
            .features
            .as_ref()
            .map_or(0, |f| f.payload_bytes(m.num_nodes)),
        "labels" | "node_times" => m.num_nodes * 8,
        "edge_times" => m.num_edges * 8,
        "edge_time_keys" => crate::time_keys::payload_bytes(m.num_edges),
        "node_ids" => m
            .node_ids
            .as_ref()
            .map_or(0, |i| i.ids_payload(m.num_nodes)),
        "node_id_bytes" => m.node_ids.as_ref().map_or(0, |i| i.bytes),
        _ => edge_payload(m, key).or_else(|| {
            key.strip_prefix("split.")
                .and_then(|s| m.splits.get(s))
                .map(|n| n * 8)
        })?,
    })
}

/// Payload bytes of an edge split's pairs (16 per pair) or negatives (8 per negative); None for
/// other keys.
fn edge_payload(m: &Manifest, key: &str) -> Option<u64> {
    if let Some(info) = key
        .strip_prefix("edge_split.")
        .and_then(|s| m.edge_splits.get(s))
    {
        return Some(info.edges * 16);
    }
    if let Some(info) = key
        .strip_prefix("edge_split_times.")
        .and_then(|s| m.edge_splits.get(s))
        .filter(|i| i.times)
    {
        return Some(info.edges * 8);
    }
    if let Some(info) = key
        .strip_prefix("edge_shared_negatives.")
        .and_then(|s| m.edge_splits.get(s))
    {
        return Some(info.shared_negatives * 16);
    }
    let info = key
        .strip_prefix("edge_negatives.")
        .and_then(|s| m.edge_splits.get(s))?;
    Some(info.edges * info.negatives * 8)
}

mod checks;
mod link;
pub(crate) mod runs;
#[cfg(test)]
mod tests;
mod times;
pub(crate) mod unique_ids;
