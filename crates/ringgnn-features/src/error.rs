//! The one error type of the feature crate. Messages say what was wrong and what to do.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A node id that is not a row of the feature file.
    #[error("node {id} is out of range: the dataset has {num_nodes} nodes ({})", ringgnn_store::IdRange::of(.num_nodes))]
    NodeOutOfRange { id: u64, num_nodes: u64 },
    /// The dataset was built without node features.
    #[error("{}: the dataset has no node features; rebuild it with `ringgnn convert --features FILE.npy`", dir.display())]
    NoFeatures { dir: PathBuf },
    /// Arguments that cannot work together (an output of the wrong size, a count for an unknown
    /// node); the message says what to change.
    #[error("{0}")]
    Input(String),
    /// An operating-system error (or a short read) on a named file; `source.kind()` keeps its
    /// class so bindings can map it faithfully.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Errors from opening or reading the dataset itself.
    #[error(transparent)]
    Store(#[from] ringgnn_store::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
