//! The ringgnn dataset: on-disk format ([`manifest`], `docs/FORMAT.md`), the out-of-core builder
//! ([`build`]) behind `convert` and the generators ([`generate`]), attaching features, labels and
//! splits ([`attach`]), checking ([`verify`]) and reading ([`dataset`]).

pub mod api;
pub mod attach;
pub mod build;
pub mod dataset;
mod error;
pub mod features;
pub mod generate;
pub mod input;
pub mod manifest;
pub mod npy;
pub mod progress;
pub mod rng;
pub mod verify;
pub mod writer;

pub use api::{convert, ConvertOptions, GraphOptions, SelfLoops, SplitSpec};
pub use dataset::Dataset;
pub use error::{Error, IoContext, Result};
pub use manifest::Manifest;
pub use progress::{NoProgress, Progress};
