//! The out-of-core CSC builder. See `docs/ARCHITECTURE.md` ("convert") for the design.

use crate::api::GraphOptions;
use crate::input::EdgeSource;
use crate::manifest::{DegreeStats, IndexDtype};
use crate::progress::Progress;
use crate::writer::Staging;
use crate::Result;

pub const INDPTR_FILE: &str = "indptr.bin";
pub const INDICES_FILE: &str = "indices.bin";

/// What the graph build produced (files `indptr` and `indices` are registered in the staging).
#[derive(Clone, Debug)]
pub struct GraphSummary {
    pub num_nodes: u64,
    pub num_edges: u64,
    pub indices_dtype: IndexDtype,
    pub degree: DegreeStats,
}

/// Build `indptr.bin` and `indices.bin` from `source` within `opts.memory` bytes.
pub fn build_graph(
    source: &mut dyn EdgeSource,
    opts: &GraphOptions,
    staging: &mut Staging,
    progress: &dyn Progress,
) -> Result<GraphSummary> {
    let _ = (source, opts, staging, progress);
    todo!()
}
