//! The ringgnn dataset: on-disk format ([`manifest`], `docs/FORMAT.md`); `convert` and the
//! options every graph-building command shares ([`convert`](mod@convert)); edge-list readers
//! ([`input`]); the out-of-core CSC builder ([`builder`]) behind `convert` and the generators
//! ([`generate`]); attaching features, labels and splits ([`attach`]) through the writers of the
//! per-node files ([`node_files`]); atomic staging ([`writer`]) in temporaries a killed run cannot leak ([`temp`]), replacing
//! only what an existing dataset owns ([`replace`]); checking ([`verify`]) and
//! reading ([`dataset`]); heterogeneous datasets, their views and their build ([`hetero`]); the
//! check that a build's output fits the free space before it is written ([`space`]).
#![forbid(unsafe_code)]

pub mod attach;
pub mod bitmap;
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
pub mod progress;
pub mod replace;
pub mod rng;
pub mod shared_negatives;
pub mod space;
pub mod temp;
pub mod verify;
pub mod writer;

pub use bitmap::Bitmap;
pub use convert::{convert, ConvertOptions, GraphOptions, SelfLoops, SplitSpec};
pub use dataset::Dataset;
pub use error::{Error, IoContext, Result};
pub use excerpt::{Excerpts, EXCERPT_CHARS};
pub use id_range::IdRange;
pub use manifest::Manifest;
pub use progress::{Cancel, NoProgress, Progress};
