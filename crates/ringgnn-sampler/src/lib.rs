//! Index-based neighbor sampling from an on-disk CSC graph, after RingSampler ("RingSampler:
//! GNN sampling on large-scale graphs with io_uring", Chen and Martinez): only the offset index
//! lives in memory; for each node the sampler draws positions inside its neighbor range first
//! ([`draw`]), then reads only those entries ([`fetch`]), coalesced into page-aligned runs for
//! disk backends ([`coalesce`]). [`NeighborSampler`] is the single-threaded loop; its output,
//! [`SampledSubgraph`], is PyG's `SamplerOutput`. [`SamplerPool`] shares one dataset between
//! samplers, picks the backend ([`BackendChoice`]) and runs epochs on worker threads
//! ([`EpochIter`]); [`budget`] sizes it.

pub mod budget;
pub mod coalesce;
pub mod draw;
mod epoch;
mod error;
pub mod fetch;
mod output;
mod pool;
mod sampler;

pub use coalesce::CoalesceOptions;
pub use draw::Fanout;
pub use epoch::{Batch, BatchWork, EpochIter, Next, SampleOnly, Turn};
pub use error::{Error, Result};
pub use fetch::{Backend, Indices};
pub use output::SampledSubgraph;
pub use pool::{BackendChoice, SamplerConfig, SamplerPool, SHUFFLE_PURPOSE};
pub use sampler::NeighborSampler;
