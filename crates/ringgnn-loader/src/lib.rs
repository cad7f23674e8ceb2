//! The loader: one dataset opened within one memory budget, and its epochs of mini-batches
//! (sampled, and with their feature rows and labels gathered) run on the worker pipeline.
//!
//! - **Where the memory budget is split**: [`budget`], the one owner of every in-memory decision
//!   (neighbor file, feature file, cache, buffers, batches ahead); [`BatchLoader::open`] opens
//!   the sampler's [`ringgnn_sampler::Graph`] and the feature reader as the plan says.
//! - **Options, typed and parsed once**: [`options`] ([`BackendChoice`], [`CachePolicy`],
//!   [`LoaderOptions`]).
//! - **An epoch as jobs**: [`epoch`], one global shuffle and global batch indices, so a shard
//!   of an epoch (one rank's batches) gives exactly the batches a single process gives.
//! - **The work of each job**: [`stages`]: sample ([`SampleStage`]), or sample then gather into
//!   reused buffers ([`buffers`]) on the same worker thread ([`LoadStage`]), so sampling,
//!   gathering and the consumer's training overlap. Two bounds keep memory flat: sampled batches
//!   wait in the pipeline's window, and a worker starts gathering only when its batch is among
//!   the next `prefetch` the consumer will take.
//!
//! - **Typed graphs**: [`typed`], heterogeneous epochs on the same pipeline: each worker samples
//!   a hyperbatch of consecutive batches together, then gathers each type's rows.
//!
//! Dropping an epoch stops its workers between read waves; an error in a worker (a failed read)
//! ends the epoch with that error.

#![forbid(unsafe_code)]

pub mod budget;
pub mod buffers;
pub mod epoch;
mod error;
pub mod labels;
mod loader;
pub mod options;
pub mod stages;
pub mod staging;
pub mod typed;

pub use budget::MemoryPlan;
pub use buffers::{BufferPool, Pinner};
pub use epoch::{BatchLists, EpochBatches, EpochOptions, SHUFFLE_PURPOSE};
pub use error::{Error, Result};
pub use labels::Labels;
pub use loader::{BatchLoader, Epoch, PRESAMPLE_EPOCH};
pub use options::{
    default_threads_among, BackendChoice, CachePolicy, FeatureOptions, Hyperbatch, LoaderOptions,
    Spill,
};
pub use ringgnn_pipeline::Next;
pub use stages::{Batch, LoadStage, LoadedBatch, LoaderStats, SampleStage};
pub use staging::StagingOptions;
pub use typed::{TypedBatch, TypedGraph, TypedLoader};
