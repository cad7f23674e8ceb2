//! Which feature rows the typed hot-row cache holds: each row's hits counted out of core from the
//! neighbor files ([`source_hits`]), every row of every type ranked by hits per byte held
//! ([`ranked_groups`]), and the longest prefix of that ranking that fits a budget
//! ([`choose_rows`]).
//!
//! A row of type `t` is gathered each time its node is sampled, and a node of `t` is sampled as a
//! source of the relations `t:REL:D` the sampler reads: about once per appearance in their
//! neighbor files, its out-degree there. Types differ in row width and dtype, so a byte of cache
//! buys more hits on a narrow type: a row's value is `hits / (row_bytes + 8)` (the row in its
//! stored dtype plus its id in the cache's lookup array,
//! [`ringgnn_features::cache::INDEX_BYTES_PER_ROW`]), ties to the type name then the smaller id.
//! Rows never sampled (no out-edge in a read relation) are never cached.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use ringgnn_features::cache::INDEX_BYTES_PER_ROW;

use crate::error::{Error, Result};

/// Neighbor-file entries read at a time while counting (2 MiB of u64 ids at most): large enough
/// that reads are sequential, small enough to cost nothing beside the counts.
pub const COUNT_CHUNK: usize = 1 << 18;

/// One neighbor file to count: its path, the bytes of an entry (4 or 8) and its entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighborFile {
    pub path: PathBuf,
    pub width: usize,
    pub entries: u64,
}

/// Per node of a type of `nodes` nodes (named `node_type` in errors), how often it appears in
/// `files` (u32, saturating), read `chunk` entries at a time.
pub fn source_hits(
    node_type: &str,
    nodes: u64,
    files: &[NeighborFile],
    chunk: usize,
) -> Result<Vec<u32>> {
    let mut hits = vec![0u32; usize::try_from(nodes).map_err(|_| too_many(nodes))?];
    let chunk = chunk.max(1);
    for f in files {
        if !matches!(f.width, 4 | 8) {
            return Err(Error::Input(format!(
                "{}: entries of {} bytes; a neighbor file's are u32 or u64",
                f.path.display(),
                f.width
            )));
        }
        if f.entries == 0 {
            continue;
        }
        let mut file = File::open(&f.path).map_err(|e| io(&f.path, e))?;
        let mut buf = vec![0u8; chunk.min(f.entries as usize) * f.width];
        let mut lo = 0u64;
        while lo < f.entries {
            let k = (chunk as u64).min(f.entries - lo);
            let bytes = &mut buf[..k as usize * f.width];
            if let Err(e) = file.read_exact(bytes) {
                if e.kind() == ErrorKind::UnexpectedEof {
                    return Err(Error::Input(format!(
                        "{}: ends before entry {}; run `ringgnn verify` on the dataset",
                        f.path.display(),
                        lo + k
                    )));
                }
                return Err(io(&f.path, e));
            }
            let ids = bytes.chunks_exact(f.width).map(|b| match b.len() {
                4 => u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64,
                _ => u64::from_le_bytes(b.try_into().expect("8 bytes")),
            });
            let most = ids.clone().max().unwrap_or(0);
            if most >= nodes {
                return Err(Error::Store(ringgnn_store::Error::Corrupt(format!(
                    "{}: entry {most} is not a node of type '{node_type}' ({nodes} nodes); run \
                     `ringgnn verify` on the dataset",
                    f.path.display()
                ))));
            }
            for id in ids {
                let h = &mut hits[id as usize];
                *h = h.saturating_add(1);
            }
            lo += k;
        }
    }
    Ok(hits)
}

fn too_many(nodes: u64) -> Error {
    Error::Input(format!("{nodes} nodes: more than this machine can count"))
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Store(ringgnn_store::Error::io(path, source))
}

/// The hits of one type's rows and the bytes of one stored row.
#[derive(Clone, Copy, Debug)]
pub struct TypeHits<'a> {
    pub node_type: &'a str,
    pub hits: &'a [u32],
    pub row_bytes: u64,
}

impl TypeHits<'_> {
    /// Bytes a cached row holds: the row and its id in the lookup array.
    pub fn cost(&self) -> u64 {
        self.row_bytes + INDEX_BYTES_PER_ROW
    }
}

/// Rows of one type with one hit count: their value per byte is equal, so the ranking of single
/// rows is these groups in order, smaller ids first within one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub node_type: String,
    pub hits: u32,
    pub rows: u64,
}

/// The rows with at least one hit, grouped by (type, hits), best first: by hits per byte held
/// (exact), then type name.
pub fn ranked_groups(types: &[TypeHits<'_>]) -> Vec<Group> {
    let mut groups: Vec<(u64, Group)> = Vec::new();
    for t in types {
        let mut counts: BTreeMap<u32, u64> = BTreeMap::new();
        for &h in t.hits.iter().filter(|&&h| h > 0) {
            *counts.entry(h).or_insert(0) += 1;
        }
        groups.extend(counts.into_iter().map(|(hits, rows)| {
            let g = Group {
                node_type: t.node_type.to_string(),
                hits,
                rows,
            };
            (t.cost(), g)
        }));
    }
    groups.sort_by(|(ca, a), (cb, b)| {
        // a.hits / ca against b.hits / cb, exactly: larger first.
        let (x, y) = (a.hits as u128 * *cb as u128, b.hits as u128 * *ca as u128);
        y.cmp(&x).then_with(|| a.node_type.cmp(&b.node_type))
    });
    groups.into_iter().map(|(_, g)| g).collect()
}

/// The rows a cache of `budget` bytes holds: per type (in name order) its ids, ascending, and the
/// bytes they hold (`rows * (row_bytes + 8)`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheRows {
    pub budget: u64,
    pub ids: Vec<(String, Vec<u64>)>,
    pub bytes: Vec<(String, u64)>,
}

impl CacheRows {
    pub fn total(&self) -> u64 {
        self.bytes.iter().map(|(_, b)| b).sum()
    }
}

/// The longest prefix of the ranking of every row of every type by hits per byte held whose
/// rows fit in `budget` bytes (a group that does not fit whole gives its first rows that fit,
/// and ends the prefix).
pub fn choose_rows(types: &[TypeHits<'_>], budget: u64) -> CacheRows {
    let mut room = budget;
    // Per type: the least hit count taken whole, or the hit count of which only `partial` rows are.
    let mut lowest: BTreeMap<&str, (u32, Option<u64>)> = BTreeMap::new();
    let cost: BTreeMap<&str, u64> = types.iter().map(|t| (t.node_type, t.cost())).collect();
    for g in ranked_groups(types) {
        let c = cost[g.node_type.as_str()];
        let key = types
            .iter()
            .find(|t| t.node_type == g.node_type)
            .expect("a ranked type")
            .node_type;
        if g.rows * c <= room {
            room -= g.rows * c;
            lowest.insert(key, (g.hits, None));
            continue;
        }
        let take = room / c;
        if take > 0 {
            lowest.insert(key, (g.hits, Some(take)));
        }
        break;
    }
    let mut sorted: Vec<&TypeHits<'_>> = types.iter().collect();
    sorted.sort_by(|a, b| a.node_type.cmp(b.node_type));
    let mut out = CacheRows {
        budget,
        ..CacheRows::default()
    };
    for t in sorted {
        let ids: Vec<u64> = match lowest.get(t.node_type) {
            None => Vec::new(),
            Some(&(v, None)) => ids_where(t.hits, |h| h >= v),
            Some(&(v, Some(partial))) => {
                let mut equal = 0u64;
                ids_where(t.hits, |h| {
                    h > v
                        || (h == v && {
                            equal += 1;
                            equal <= partial
                        })
                })
            }
        };
        out.bytes
            .push((t.node_type.to_string(), ids.len() as u64 * t.cost()));
        out.ids.push((t.node_type.to_string(), ids));
    }
    out
}

fn ids_where(hits: &[u32], mut keep: impl FnMut(u32) -> bool) -> Vec<u64> {
    hits.iter()
        .enumerate()
        .filter(|&(_, &h)| keep(h))
        .map(|(i, _)| i as u64)
        .collect()
}

/// Hits of `rows` ids of one type, summed.
pub fn hits_of(hits: &[u32], ids: &[u64]) -> u64 {
    ids.iter().map(|&i| hits[i as usize] as u64).sum()
}

/// Compares two values per byte as the plan's greedy does (no NaN arises: every divisor is at
/// least 1).
pub(super) fn by_value(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}
