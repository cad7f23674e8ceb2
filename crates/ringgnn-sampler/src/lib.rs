//! Index-based neighbor sampling from an on-disk CSC graph, after RingSampler ("RingSampler:
//! GNN sampling on large-scale graphs with io_uring", Chen and Martinez): only the offset index
//! lives in memory; for each node the sampler draws positions inside its neighbor range first
//! ([`draw`]), then reads only those entries ([`neighbors`]: from memory, or from disk in
//! page-coalesced reads through `ringgnn_io::PageReader`).
//!
//! - **The sampling loop**: [`NeighborSampler`] (`sampler.rs`), single-threaded; its output,
//!   [`SampledSubgraph`] (`output.rs`), is PyG's `SamplerOutput`.
//! - **Heterogeneous graphs** (typed nodes, one CSC per relation `SRC:REL:DST`):
//!   [`HeteroSampler`] (`hetero.rs`), PyG's heterogeneous neighbor sampling with one dedup map
//!   and frontier per node type and one read of each relation's file per hop (for several
//!   batches at once with `sample_many`); its output is [`HeteroSample`], its bounds
//!   [`HeteroBound`] (`hetero/bound.rs`). A single bipartite relation alone: [`NeighborSampler::bipartite`].
//!   Sampling at seed times (edge times, node times, disjoint subgraphs per seed time) is the
//!   same sampler ([`TemporalStrategy`], [`EdgeTimes`], `hetero/temporal.rs`); a homogeneous
//!   dataset with times is sampled as its one-type case.
//! - **Typed inputs, checked once**: [`Fanout`] and [`SampleOptions`] (`options.rs`), [`Seeds`]
//!   (`seeds.rs`).
//! - **The offset index in memory**: [`Offsets`] (`offset_index.rs`), 4 bytes per entry where
//!   it can be, exact; [`OffsetIndex`] adds what a memory plan needs before anything else loads.
//! - **Sharing one dataset between threads**: [`Graph`] (`graph.rs`), opened with a
//!   [`NeighborAccess`] decided by the caller's memory plan; one [`GraphSampler`] per thread.
//! - **Hyperbatches**: [`HyperSampler`] (`hyper.rs`) samples several batches hop by hop with one
//!   shared pass of reads per hop, each batch byte-identical to its per-batch sample (the
//!   per-batch state both use is `batch.rs`, a hop's positions grouped by file chunk are
//!   `buckets.rs`); when their finished samples do not fit, they go to a [`SpillFile`]
//!   (`spill.rs`) as each is done and come back one at a time.
//! - **The dedup map** of both samplers: `idmap.rs`.
//! - **Sizes for the memory plan**: [`bounds`].
//! - **Hot pages for on-demand sampling**: [`hot_pages`] chooses the neighbor-file pages that
//!   single-node requests touch most, to keep in a `ringgnn_io::PageCache`.
//!
//! Threads, epochs and memory budgets are not here: the worker pipeline is `ringgnn-pipeline`,
//! and `ringgnn-loader` plans the memory and runs epochs.

#![forbid(unsafe_code)]

mod batch;
pub mod bounds;
mod buckets;
pub mod draw;
mod error;
mod graph;
mod hetero;
pub mod hot_pages;
mod hyper;
mod idmap;
pub mod neighbors;
mod offset_index;
mod options;
mod output;
mod sampler;
mod seeds;
mod spill;

pub use bounds::{sample_bound, SampleBound};
pub use error::{Error, Result};
pub use graph::{Graph, GraphSampler, HyperTotals, NeighborAccess, OffsetIndex, Offsets};
pub use hetero::{
    fanouts_in_order, hetero_bound, EdgeTimes, HeteroBound, HeteroRelation, HeteroRequest,
    HeteroSample, HeteroSampler, SharedRelation, TemporalStrategy, TimeKeys, TypedGraph,
};
pub use hyper::{HyperBatch, HyperPeaks, HyperSampler, HyperStates, Keep};
pub use neighbors::{DiskNeighbors, Indices, NeighborSource, Reopen};
pub use offset_index::BLOCK_SHIFT;
pub use options::{parse_fanouts, Fanout, SampleOptions, MAX_FANOUT};
pub use output::{CompactSample, SampledSubgraph};
pub use ringgnn_io::CoalesceOptions;
pub use sampler::{BatchBytes, ManyRequest, NeighborSampler};
pub use seeds::{SeedSlice, Seeds};
pub use spill::{SpillFile, Spilled, SPILL_BUFFER};
