//! The one error type of the sampler crate. Messages say what was wrong and what to do.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while building a sampler or drawing a sample.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A fanout that is neither `-1` (all neighbors) nor a positive count.
    #[error("fanout {value} at hop {hop} is not valid: use a positive number of neighbors (at most 4294967295), or -1 for all of them")]
    Fanout { hop: usize, value: i64 },
    /// A seed that is not a node of the graph (negative ids included).
    #[error(
        "seed node {id} is out of range: the graph has {num_nodes} nodes ({})",
        ringgnn_store::IdRange::of(.num_nodes)
    )]
    Seed { id: i128, num_nodes: u64 },
    /// An operating-system error (or a short read) on a named file; `source.kind()` keeps its
    /// class so bindings can map it faithfully.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The graph files contradict each other or themselves (a neighbor id beyond the node
    /// count, an offset index that runs past the neighbor file).
    #[error("{0}")]
    Corrupt(String),
    /// A sample too large for 32-bit local ids.
    #[error(
        "the sample has more than {} nodes; use smaller fanouts or fewer seeds",
        u32::MAX
    )]
    TooLarge,
    /// An option that cannot work (fanouts that are not integers, seeds checked against
    /// another graph); the message says what to change.
    #[error("{0}")]
    Input(String),
    /// Errors from opening or reading the dataset itself.
    #[error(transparent)]
    Store(#[from] ringgnn_store::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
