//! Positional I/O for ringgnn. This is the only crate with `unsafe` for I/O: page-aligned
//! buffers ([`AlignedBuf`]) and files opened with `O_DIRECT` ([`DirectFile`]), which bypass the
//! page cache so that data written once and read once (spill files, dataset outputs) costs no
//! kernel copy and no cache memory. Where a filesystem refuses `O_DIRECT` (tmpfs, some overlay
//! filesystems) files silently fall back to buffered I/O with the same results.

mod aligned;
mod batch;
mod direct;

pub use aligned::AlignedBuf;
pub use batch::{IoStats, PreadBatch, ReadBatch, ReadReq};
pub use direct::DirectFile;

/// Alignment of offsets, lengths and buffer addresses for `O_DIRECT` (the page size; larger
/// than the 512-byte logical block size of most devices, so it is always enough).
pub const ALIGN: usize = 4096;
