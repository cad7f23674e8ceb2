//! Graph500 R-MAT generator (a=0.57, b=0.19, c=0.19, d=0.05), ids permuted so hubs are scattered.

use std::path::PathBuf;

use crate::api::GraphOptions;
use crate::progress::Progress;
use crate::{Manifest, Result};

#[derive(Clone, Debug)]
pub struct RmatOptions {
    pub out: PathBuf,
    /// 2^scale nodes.
    pub scale: u32,
    /// edge_factor * 2^scale generated edges (before --undirected doubling, self-loop drop, dedup).
    pub edge_factor: u64,
    pub seed: u64,
    /// undirected / self_loops / dedup / memory / threads as for convert; num_nodes is ignored (2^scale).
    pub graph: GraphOptions,
    pub overwrite: bool,
}

pub fn generate_rmat(opts: &RmatOptions, progress: &dyn Progress) -> Result<Manifest> {
    let _ = (opts, progress);
    todo!()
}
