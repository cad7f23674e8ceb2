//! What every graph-building command is told, shared by `convert` ([`crate::convert`]), the
//! heterogeneous build ([`crate::hetero`]), the generators ([`crate::generate`]) and the CSC
//! builder below them ([`crate::builder`]): how to build the graph ([`GraphOptions`],
//! [`SelfLoops`]), how to split the nodes ([`SplitSpec`]), and which split names the format
//! accepts ([`check_split_name`]), for node and edge splits alike; where times come from
//! ([`TimeOptions`], a generator's rule [`TimeGen`]). Plain values with no
//! dependency on the modules that use them, so the builder never reaches up to `convert`.

use std::path::PathBuf;

use crate::rng::mix64;
use crate::{input_err, Result};

/// What to do with edges u->u.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelfLoops {
    Keep,
    Drop,
}

/// Options shared by everything that builds a graph.
#[derive(Clone, Debug)]
pub struct GraphOptions {
    /// Add v->u for every edge u->v.
    pub undirected: bool,
    pub self_loops: SelfLoops,
    /// Keep one copy of each distinct (src, dst) pair.
    pub dedup: bool,
    /// Number of nodes; ids must be below it. Default: largest id + 1.
    pub num_nodes: Option<u64>,
    /// Byte budget for the whole build (buffers, sort space, I/O buffers).
    pub memory: u64,
    /// Worker threads (>= 1).
    pub threads: usize,
    /// Edge and node times, when the graph has them (docs/FORMAT.md "Times").
    pub times: TimeOptions,
}

/// How a generator draws times: `Uniform` independent in `[lo, hi)` from the seed (item `i`'s
/// time a hash of (seed, i), whatever the chunking), `Growth` the item's index in generation
/// order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeGen {
    Uniform { seed: u64, lo: i64, hi: i64 },
    Growth,
}

/// The default range of uniform times: `[0, 2^31)`.
pub const UNIFORM_RANGE: (i64, i64) = (0, 1 << 31);

/// Separates the streams of edge and node times drawn from one seed.
pub(crate) const PURPOSE_EDGE_TIMES: u64 = 0x7E;
pub(crate) const PURPOSE_NODE_TIMES: u64 = 0x7F;

impl TimeGen {
    /// `uniform` or `growth` (the value of `option`) with `range` (`[lo, hi)`, uniform only),
    /// checked.
    pub fn parse(option: &str, kind: &str, seed: u64, range: Option<(i64, i64)>) -> Result<Self> {
        match kind {
            "uniform" => {
                let (lo, hi) = range.unwrap_or(UNIFORM_RANGE);
                if lo >= hi {
                    return input_err!(
                        "--time-range {lo},{hi} is empty: give LO,HI with LO < HI (times are drawn in [LO, HI))"
                    );
                }
                Ok(TimeGen::Uniform { seed, lo, hi })
            }
            "growth" if range.is_some() => input_err!(
                "--time-range applies to uniform times; {option} growth gives each item its index in generation order"
            ),
            "growth" => Ok(TimeGen::Growth),
            _ => input_err!("{option} '{kind}' is not known; use uniform or growth"),
        }
    }

    /// The time of item `i` of the stream `purpose`.
    pub(crate) fn at(self, purpose: u64, i: u64) -> i64 {
        match self {
            TimeGen::Growth => i as i64,
            TimeGen::Uniform { seed, lo, hi } => {
                let span = hi.abs_diff(lo);
                let h = mix64(mix64(seed ^ mix64(purpose)) ^ i);
                lo.wrapping_add(((h as u128 * span as u128) >> 64) as i64)
            }
        }
    }

    /// What the manifest's `source` records.
    pub fn describe(self) -> serde_json::Value {
        match self {
            TimeGen::Growth => serde_json::json!("growth"),
            TimeGen::Uniform { lo, hi, .. } => serde_json::json!({"uniform": [lo, hi]}),
        }
    }
}

/// Where times come from: a `.npy` file (one per input edge in input order, or one per node),
/// or a generator's rule.
#[derive(Clone, Debug, PartialEq)]
pub enum TimeInput {
    File(PathBuf),
    Generated(TimeGen),
}

/// The times of a build: of its edges (the builder orders each neighbor list by time) and of
/// its nodes. None: no times, and the dataset is the same as before times existed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimeOptions {
    pub edges: Option<TimeInput>,
    pub nodes: Option<TimeInput>,
}

impl TimeOptions {
    pub fn any(&self) -> bool {
        self.edges.is_some() || self.nodes.is_some()
    }
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions {
            undirected: false,
            self_loops: SelfLoops::Keep,
            dedup: false,
            num_nodes: None,
            memory: 1 << 30,
            threads: 1,
            times: TimeOptions::default(),
        }
    }
}

/// How to make train/val/test splits.
#[derive(Clone, Debug, PartialEq)]
pub enum SplitSpec {
    /// name -> `.npy` file of node ids (int32/int64/uint32/uint64, 1-D).
    Files(Vec<(String, PathBuf)>),
    /// name -> fraction of the nodes (of the labeled nodes when labels are given), drawn with the seed.
    Fractions(Vec<(String, f64)>),
}

/// A split name must be a plain file-name part: `[a-z0-9_]+`.
pub fn check_split_name(name: &str, option: &str) -> Result<()> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return input_err!(
            "{option}: split name '{name}' is not allowed: use lowercase letters, digits and '_' (e.g. train, val, test)"
        );
    }
    Ok(())
}
