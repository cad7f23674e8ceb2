//! `verify` for the edge splits of format version 2: every pair's ends are nodes and differ;
//! a held-out pair is not an edge of the (training) graph and a `train` pair is; negatives are
//! nodes, distinct within their row, and never the row's own destination. A relation's pairs
//! are also checked against its reverse `D:rev_R:S`: a held-out pair must not be there either
//! (swapped), a `train` pair must.
//!
//! A split by time (version 3) holds events: a held-out pair may be an edge of the graph at an
//! earlier time, so its absence is checked by time instead ([`SplitTimes`], and the graph's
//! latest time against the first split time, in `verify`).

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::PathBuf;

use super::checks::{u64s, Check};
use crate::dataset::Dataset;
use crate::hetero::Part;
use crate::manifest::TRAIN;
use crate::{IoContext, Result};

/// `edge_split_NAME`: (src, dst) i64 pairs.
pub(super) struct Pairs {
    name: String,
    /// Bounds of the sources and the destinations (a relation's two node counts).
    bounds: (u64, u64),
    /// A relation between two node types: `(i, i)` is no self loop.
    bipartite: bool,
    graph: Dataset,
    reverse: Option<(Part, Dataset)>,
    /// The split is by time: a held-out pair may recur in the graph at an earlier time.
    by_time: bool,
}

impl Pairs {
    pub(super) fn new(
        name: &str,
        bounds: (u64, u64),
        bipartite: bool,
        graph: Dataset,
        reverse: Option<(&Part, Dataset)>,
    ) -> Self {
        Pairs {
            name: name.into(),
            bounds,
            bipartite,
            graph,
            reverse: reverse.map(|(p, d)| (p.clone(), d)),
            by_time: false,
        }
    }

    /// The pairs of a split by time.
    pub(super) fn by_time(mut self, by_time: bool) -> Self {
        self.by_time = by_time;
        self
    }
}

impl Check for Pairs {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        let v: Vec<u64> = u64s(data).collect();
        for (k, p) in v.chunks_exact(2).enumerate() {
            let i = pos / 16 + k as u64;
            let (src, dst) = (p[0] as i64, p[1] as i64);
            for (x, n) in [(src, self.bounds.0), (dst, self.bounds.1)] {
                if x < 0 || x as u64 >= n {
                    let what = if self.bounds.0 == self.bounds.1 {
                        format!("node ids must be in [0, {n})")
                    } else {
                        format!(
                            "sources must be in [0, {}) and destinations in [0, {})",
                            self.bounds.0, self.bounds.1
                        )
                    };
                    return Ok(Some(format!("pair {i} is ({src}, {dst}) but {what}")));
                }
            }
            if src == dst && !self.bipartite {
                return Ok(Some(format!(
                    "pair {i} is the self loop ({src}, {dst}); edge splits never hold self loops"
                )));
            }
            let present = self.graph.has_edge(src as u64, dst as u64)?;
            if self.name == TRAIN && !present {
                return Ok(Some(format!(
                    "pair {i} ({src}, {dst}) is a training pair but not an edge of the graph"
                )));
            }
            if self.by_time {
                continue;
            }
            if self.name != TRAIN && present {
                return Ok(Some(format!(
                    "pair {i} ({src}, {dst}) is held out but is still an edge of the graph (a held-out edge must never be sampled)"
                )));
            }
            if let Some((part, rev)) = &self.reverse {
                let present = rev.has_edge(dst as u64, src as u64)?;
                if self.by_time {
                    continue;
                }
                if self.name != TRAIN && present {
                    return Ok(Some(format!(
                        "pair {i} ({src}, {dst}) is held out but its reverse ({dst}, {src}) is an edge of {part} (a held-out edge must not reach a sample through the reverse relation)"
                    )));
                }
            }
        }
        Ok(None)
    }
}

/// `edge_split_times_NAME`: one i64 per pair of `edge_split_NAME`, the pairs ordered by
/// (time, src, dst), every time in the split's range: `(after, until]` (either end open).
pub(super) struct SplitTimes {
    pairs: BufReader<File>,
    pairs_path: PathBuf,
    after: Option<i64>,
    until: Option<i64>,
    prev: Option<(i64, u64, u64)>,
}

impl SplitTimes {
    pub(super) fn new(pairs_path: PathBuf, after: Option<i64>, until: Option<i64>) -> Result<Self> {
        Ok(SplitTimes {
            pairs: BufReader::new(File::open(&pairs_path).at(&pairs_path)?),
            pairs_path,
            after,
            until,
            prev: None,
        })
    }
}

impl Check for SplitTimes {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        for (j, t) in u64s(data).map(|x| x as i64).enumerate() {
            let i = pos / 8 + j as u64;
            let mut p = [0u8; 16];
            self.pairs.read_exact(&mut p).at(&self.pairs_path)?;
            let src = u64::from_le_bytes(p[..8].try_into().unwrap());
            let dst = u64::from_le_bytes(p[8..].try_into().unwrap());
            if let Some(prev) = self.prev.filter(|&prev| prev > (t, src, dst)) {
                return Ok(Some(format!(
                    "pair {i} ({src}, {dst}) at time {t} comes after ({}, {}) at time {}, but pairs are ordered by (time, src, dst)",
                    prev.1, prev.2, prev.0
                )));
            }
            self.prev = Some((t, src, dst));
            if let Some(a) = self.after.filter(|&a| t <= a) {
                return Ok(Some(format!(
                    "pair {i} ({src}, {dst}) has time {t}, but this split holds the edges after {a}"
                )));
            }
            if let Some(u) = self.until.filter(|&u| t > u) {
                return Ok(Some(format!(
                    "pair {i} ({src}, {dst}) has time {t}, but this split holds the edges up to {u}"
                )));
            }
        }
        Ok(None)
    }
}

/// `edge_shared_negatives_NAME`: (src, dst) i64 pairs, both in `[0, V)` (stored as the input
/// gave them: a pair may be a self loop or repeat, as OGB's `edge_neg` may).
pub(super) struct SharedNegatives(pub(super) u64);

impl Check for SharedNegatives {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        for (j, x) in u64s(data).map(|x| x as i64).enumerate() {
            let e = pos / 8 + j as u64;
            if x < 0 || x as u64 >= self.0 {
                return Ok(Some(format!(
                    "{} of shared negative pair {} is {x} but node ids must be in [0, {})",
                    if e.is_multiple_of(2) {
                        "source"
                    } else {
                        "destination"
                    },
                    e / 2,
                    self.0
                )));
            }
        }
        Ok(None)
    }
}

/// `edge_negatives_NAME`: `k` i64 per pair of `edge_split_NAME`.
pub(super) struct Negatives {
    num_nodes: u64,
    k: u64,
    pairs: BufReader<File>,
    pairs_path: PathBuf,
    dst: u64,
    row: HashSet<u64>,
    /// Drawn negatives are distinct and never the pair's destination; given ones
    /// (`given_negatives`) only in range.
    strict: bool,
}

impl Negatives {
    pub(super) fn new(num_nodes: u64, k: u64, pairs_path: PathBuf, strict: bool) -> Result<Self> {
        Ok(Negatives {
            num_nodes,
            k,
            strict,
            pairs: BufReader::new(File::open(&pairs_path).at(&pairs_path)?),
            pairs_path,
            dst: 0,
            row: HashSet::new(),
        })
    }
}

impl Check for Negatives {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        for (j, x) in u64s(data).map(|x| x as i64).enumerate() {
            let e = pos / 8 + j as u64;
            let (i, c) = (e / self.k, e % self.k);
            if c == 0 {
                let mut p = [0u8; 16];
                self.pairs.read_exact(&mut p).at(&self.pairs_path)?;
                self.dst = u64::from_le_bytes(p[8..].try_into().unwrap());
                self.row.clear();
            }
            if x < 0 || x as u64 >= self.num_nodes {
                return Ok(Some(format!(
                    "negative {c} of pair {i} is {x} but node ids must be in [0, {})",
                    self.num_nodes
                )));
            }
            if !self.strict {
                continue;
            }
            if x as u64 == self.dst {
                return Ok(Some(format!(
                    "negative {c} of pair {i} is {x}, the pair's own destination"
                )));
            }
            if !self.row.insert(x as u64) {
                return Ok(Some(format!(
                    "negative {c} of pair {i} is {x}, which appears earlier in the same row"
                )));
            }
        }
        Ok(None)
    }
}
