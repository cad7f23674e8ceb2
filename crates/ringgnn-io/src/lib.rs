//! Positional I/O for ringgnn. This is the only crate with `unsafe` for I/O: page-aligned
//! buffers ([`AlignedBuf`]) and files opened with `O_DIRECT` ([`DirectFile`]), which bypass the
//! page cache so that data written once and read once (spill files, dataset outputs) costs no
//! kernel copy and no cache memory. Where a filesystem refuses `O_DIRECT` (tmpfs, some overlay
//! filesystems) files silently fall back to buffered I/O with the same results.
//!
//! Batched reads go through one interface, [`ReadBatch`], with two backends: [`PreadBatch`]
//! (portable) and [`UringBatch`] (io_uring, many reads in flight). [`open_backend`] picks one
//! after [`probe_uring`] has checked, once per process, that io_uring works here.
//! [`coalesce_pages`] plans the page-aligned, merged requests that both readers of scattered
//! data (neighbor entries, feature rows) send through it.

mod aligned;
mod batch;
mod coalesce;
mod direct;
mod probe;
mod uring;

pub use aligned::AlignedBuf;
pub use batch::{IoStats, PreadBatch, ReadBatch, ReadReq};
pub use coalesce::{coalesce_pages, CoalesceOptions, PageReader, ReadCount};
pub use direct::DirectFile;
pub use probe::{open_backend, probe_runs, probe_uring, BackendKind, DISABLE_ENV};
pub use uring::{UringBatch, DEFAULT_DEPTH, MAX_DEPTH};

/// Alignment of offsets, lengths and buffer addresses for `O_DIRECT` (the page size; larger
/// than the 512-byte logical block size of most devices, so it is always enough).
pub const ALIGN: usize = 4096;
