//! The ringgnn dataset, in layers; a module uses only modules of its own layer or below it
//! (`python3 scripts/rust_modules.py crates/ringgnn-store` shows the graph and any circle):
//!
//! - commands that build: `convert` and the heterogeneous build ([`convert`](mod@convert)),
//!   the generators ([`generate`]);
//! - build steps: attaching features, labels and splits ([`attach`]), original ids
//!   ([`node_ids`]), edge splits for link prediction ([`link`], [`shared_negatives`]), the
//!   out-of-core CSC builder ([`builder`]), all within one memory budget ([`budget`]);
//! - checking ([`verify`], whose external sort and id check the builds share) and reading
//!   ([`dataset`]);
//! - inputs: what every build is told ([`options`]), edge-list readers ([`input`]), edge and
//!   node times ([`times`]) and the time keys derived from edge times ([`time_keys`]);
//! - writing: the per-node files ([`node_files`]), atomic staging ([`writer`]) in temporaries a
//!   killed run cannot leak ([`temp`]), replacing only what an existing dataset owns
//!   ([`replace`]), the check that a build's output fits the free space ([`space`]);
//! - the format: the manifest ([`manifest`], `docs/FORMAT.md`), heterogeneous datasets and
//!   their views ([`hetero`]), `.npy` headers ([`npy`]), and the small pieces everything shares
//!   (errors, [`progress`], [`rng`], [`excerpt`], [`bitmap`], [`id_range`]).
#![forbid(unsafe_code)]

pub mod attach;
pub mod bitmap;
pub mod budget;
pub mod builder;
pub mod convert;
pub mod dataset;
mod error;
pub mod excerpt;
pub mod generate;
pub mod hetero;
pub mod id_range;
pub mod input;
pub mod link;
pub mod manifest;
pub mod node_files;
pub mod node_ids;
pub mod npy;
pub mod options;
pub mod progress;
pub mod replace;
pub mod rng;
pub mod shared_negatives;
pub mod space;
pub mod temp;
pub mod time_keys;
pub mod times;
pub mod verify;
pub mod writer;

pub use bitmap::Bitmap;
pub use convert::{convert, ConvertOptions};
pub use dataset::Dataset;
pub use error::{Error, IoContext, Result};
pub use excerpt::{Excerpts, EXCERPT_CHARS};
pub use id_range::IdRange;
pub use manifest::Manifest;
pub use options::{GraphOptions, SelfLoops, SplitSpec};
pub use progress::{Cancel, NoProgress, Progress};
