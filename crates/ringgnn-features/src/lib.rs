//! Node features for GNN batches whose feature file is larger than RAM.
//!
//! [`FeatureGatherer::gather`] turns a batch's node ids into an `f32` matrix: ids are
//! deduplicated, rows found in the [`HotRowCache`] are copied from memory, and the rest are read
//! from `features.bin` ([`rows`]) with page-aligned, coalesced requests through any
//! [`ringgnn_io::ReadBatch`] backend (pread, io_uring, with or without `O_DIRECT`), or from a
//! copy of the file in memory. Rows stored as f16 or bf16 are widened to f32 on the way out.
//! For a hyperbatch, [`Stager`] packs each batch's cold rows into its own region of a staging
//! file in one pass over the feature file, so that each batch's gather is one sequential read.
//! For layer-wise inference, [`FeatureGatherer::aggregate`] folds a destination block's
//! in-neighbors' rows into its accumulators on all threads ([`aggregate`]; sums, GCN's weighted
//! sums, maxima and GAT's online softmax are the [`fold`] kernels), or, cut by source
//! partitions, spills their partial aggregates and merges them ([`partition`]).

// No unsafe code but the fold's cache prefetch hint (`aggregate::prefetch`), which allows it.
#![deny(unsafe_code)]

pub mod aggregate;
pub mod cache;
mod error;
pub mod fold;
pub mod gather;
pub mod partition;
pub mod rows;
pub mod staging;

pub use aggregate::{AggregateStats, BlockJob, NeighborFile, Times, Transform, PREFETCH};
pub use cache::HotRowCache;
pub use error::{Error, Result};
pub use fold::{Attention, Fold};
pub use gather::{FeatureGatherer, GatherStats};
pub use partition::{Combine, PartitionIo, Partitions};
pub use rows::{FeatureFile, RowSource};
pub use staging::Stager;
