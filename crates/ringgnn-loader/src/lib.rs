//! The pipelined mini-batch loader: [`BatchLoader`].
//!
//! Each worker thread of an epoch samples a whole mini-batch (with its own io_uring ring, as
//! the sampler's epochs do) and then gathers that batch's feature rows and labels into a reused
//! buffer ([`buffers`]), so sampling, gathering and the consumer's training overlap. Two bounds
//! keep memory flat: sampled batches wait in the epoch's reorder window (`prefetch + threads`
//! of them, small), and a worker starts gathering only when its batch is among the next
//! `prefetch` the consumer will take ([`ringgnn_sampler::Turn`]), so at most `prefetch` feature
//! matrices exist ahead of the consumer. One memory budget covers all of it ([`plan`]); the
//! hot-row cache gets what the rest leaves and is filled by look-ahead access counts
//! ([`CachePolicy::Presample`]) or by in-degree.
//!
//! Dropping an epoch stops its workers: a worker between read waves gives up its batch
//! ([`ringgnn_io::PageReader::set_cancel`]), so leaving early does not wait for a whole
//! batch's reads. An error in a worker (a failed read) ends the epoch with that error.

pub mod buffers;
mod error;
pub mod labels;
mod loader;
pub mod plan;

pub use buffers::BufferPool;
pub use error::{Error, Result};
pub use labels::Labels;
pub use loader::{
    BatchLoader, CachePolicy, GatherState, GatherWork, LoadedBatch, LoaderOptions, LoaderStats,
    PRESAMPLE_EPOCH,
};
pub use plan::MemoryPlan;

/// The epoch iterator of a [`BatchLoader`].
pub type EpochIterOf = ringgnn_sampler::EpochIter<GatherWork>;
