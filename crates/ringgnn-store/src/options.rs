//! What every graph-building command is told, shared by `convert` ([`crate::convert`]), the
//! heterogeneous build ([`crate::hetero`]), the generators ([`crate::generate`]) and the CSC
//! builder below them ([`crate::builder`]): how to build the graph ([`GraphOptions`],
//! [`SelfLoops`]), how to split the nodes ([`SplitSpec`]), and which split names the format
//! accepts ([`check_split_name`]), for node and edge splits alike. Plain values with no
//! dependency on the modules that use them, so the builder never reaches up to `convert`.

use std::path::PathBuf;

use crate::times::TimeGen;
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
