//! Synthetic datasets streamed straight into the format, deterministic by seed:
//! Graph500 R-MAT ([`rmat`]) and a degree-corrected planted partition with features and labels
//! ([`sbm`]).

mod chunked;
pub mod rmat;
pub mod sbm;

pub use rmat::{generate_rmat, RmatOptions};
pub use sbm::{generate_sbm, SbmOptions};
