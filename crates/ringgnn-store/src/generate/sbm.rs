//! Degree-corrected planted-partition graph with power-law degrees, noisy class-signal features,
//! labels and splits: a dataset on which a GNN clearly beats an MLP. The model is documented in
//! `docs/generators.md`.

use std::path::PathBuf;

use crate::api::GraphOptions;
use crate::manifest::FeatureDtype;
use crate::progress::Progress;
use crate::{Manifest, Result};

#[derive(Clone, Debug)]
pub struct SbmOptions {
    pub out: PathBuf,
    pub nodes: u64,
    pub classes: u64,
    /// Mean in-degree of the stored (directed, both directions) graph.
    pub avg_degree: f64,
    pub feature_dim: u64,
    pub feature_dtype: FeatureDtype,
    pub seed: u64,
    /// Fractions of nodes for train/val/test (each in [0,1], summing to <= 1).
    pub split: Vec<(String, f64)>,
    /// memory / threads are used; the graph is always undirected, self loops dropped.
    pub graph: GraphOptions,
    pub overwrite: bool,
}

pub fn generate_sbm(opts: &SbmOptions, progress: &dyn Progress) -> Result<Manifest> {
    let _ = (opts, progress);
    todo!()
}
