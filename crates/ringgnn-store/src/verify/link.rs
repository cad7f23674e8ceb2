//! `verify` for the edge splits of format version 2: every pair's ends are nodes and differ;
//! a held-out pair is not an edge of the (training) graph and a `train` pair is; negatives are
//! nodes, distinct within their row, and never the row's own destination.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{u64s, Check};
use crate::link::TRAIN;
use crate::manifest::Manifest;
use crate::{IoContext, Result};

/// Looks up single edges in the CSC files by reading them (binary search within one neighbor
/// list), so verifying a split costs O(log d) small reads per pair and no memory.
pub(super) struct EdgeLookup {
    indptr: File,
    indptr_path: PathBuf,
    indices: File,
    indices_path: PathBuf,
    width: u64,
}

impl EdgeLookup {
    pub(super) fn open(dir: &Path, m: &Manifest) -> Result<Self> {
        let indptr_path = dir.join(&m.file("indptr")?.path);
        let indices_path = dir.join(&m.file("indices")?.path);
        Ok(EdgeLookup {
            indptr: File::open(&indptr_path).at(&indptr_path)?,
            indptr_path,
            indices: File::open(&indices_path).at(&indices_path)?,
            indices_path,
            width: m.graph.indices_dtype.size(),
        })
    }

    fn index(&self, i: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        let w = self.width as usize;
        self.indices
            .read_exact_at(&mut b[..w], i * self.width)
            .at(&self.indices_path)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Whether `src -> dst` is an edge (`src` in `dst`'s ascending in-neighbor list).
    pub(super) fn contains(&self, src: u64, dst: u64) -> Result<bool> {
        let mut b = [0u8; 16];
        self.indptr
            .read_exact_at(&mut b, dst * 8)
            .at(&self.indptr_path)?;
        let (mut lo, mut hi) = (
            u64::from_le_bytes(b[..8].try_into().unwrap()),
            u64::from_le_bytes(b[8..].try_into().unwrap()),
        );
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let x = self.index(mid)?;
            if x == src {
                return Ok(true);
            }
            if x < src {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(false)
    }
}

/// `edge_split_NAME`: (src, dst) i64 pairs.
pub(super) struct Pairs {
    name: String,
    num_nodes: u64,
    graph: EdgeLookup,
}

impl Pairs {
    pub(super) fn new(name: &str, num_nodes: u64, graph: EdgeLookup) -> Self {
        Pairs {
            name: name.into(),
            num_nodes,
            graph,
        }
    }
}

impl Check for Pairs {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        let v: Vec<u64> = u64s(data).collect();
        for (k, p) in v.chunks_exact(2).enumerate() {
            let i = pos / 16 + k as u64;
            let (src, dst) = (p[0] as i64, p[1] as i64);
            for x in [src, dst] {
                if x < 0 || x as u64 >= self.num_nodes {
                    return Ok(Some(format!(
                        "pair {i} is ({src}, {dst}) but node ids must be in [0, {})",
                        self.num_nodes
                    )));
                }
            }
            if src == dst {
                return Ok(Some(format!(
                    "pair {i} is the self loop ({src}, {dst}); edge splits never hold self loops"
                )));
            }
            let present = self.graph.contains(src as u64, dst as u64)?;
            if self.name == TRAIN && !present {
                return Ok(Some(format!(
                    "pair {i} ({src}, {dst}) is a training pair but not an edge of the graph"
                )));
            }
            if self.name != TRAIN && present {
                return Ok(Some(format!(
                    "pair {i} ({src}, {dst}) is held out but is still an edge of the graph (a held-out edge must never be sampled)"
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
}

impl Negatives {
    pub(super) fn new(num_nodes: u64, k: u64, pairs_path: PathBuf) -> Result<Self> {
        Ok(Negatives {
            num_nodes,
            k,
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
