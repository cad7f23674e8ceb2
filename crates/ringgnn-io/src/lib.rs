//! Positional I/O for ringgnn. This is the only crate with `unsafe` for I/O: page-aligned
//! buffers ([`AlignedBuf`]) and files opened with `O_DIRECT` ([`DirectFile`]), which bypass the
//! page cache so that data written once and read once (spill files, dataset outputs) costs no
//! kernel copy and no cache memory. Where a filesystem refuses `O_DIRECT` (tmpfs, some overlay
//! filesystems) files silently fall back to buffered I/O with the same results.
//!
//! Where a read happens: batched reads go through one interface, [`ReadBatch`]
//! (`read_batch.rs`), with two backends: [`PreadBatch`] (`pread.rs`, portable) and
//! [`UringBatch`] (`uring.rs`, io_uring, many reads in flight). [`open_backend`] (`probe.rs`)
//! picks one after [`probe_uring`] has checked, once per process, that io_uring works here.
//! Scattered reads (neighbor entries, feature rows) all go through one loop, [`PageReader`]
//! (`page_reader.rs`), which plans page-aligned, merged requests with [`coalesce_pages`]
//! (`page_plan.rs`) and reads them in waves into one aligned buffer. The pages that many
//! The hot pages of a file read at random by many requests (the neighbor file under on-demand
//! sampling) can be kept in a [`PageCache`] (`page_cache.rs`). The pages that many
//! mini-batches need at once (a hyperbatch) are read once per chunk of the file by
//! [`BlockReader`] (`block_reader.rs`), which reads a block whole where that is cheaper than its
//! needed pages ([`ReadModel`]). Large buffers read at random can ask for transparent huge
//! pages ([`advise_huge_pages`], `huge.rs`). The free space of a file system, which builds check
//! before they write, is [`free_bytes`] (`space.rs`).

mod aligned;
mod block_reader;
mod direct;
mod huge;
mod page_cache;
mod page_plan;
mod page_reader;
mod pread;
mod probe;
mod read_batch;
mod space;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod uring;

pub use aligned::AlignedBuf;
pub use block_reader::{BlockCounts, BlockReader, ReadModel, DEVICE_ENV};
pub use direct::DirectFile;
pub use huge::{advise_huge_pages, collapse_huge_pages, collect_huge, HUGE_MIN_BYTES};
pub use page_cache::{release_free_memory, CacheStats, PageCache};
pub use page_plan::{coalesce_pages, CoalesceOptions};
pub use page_reader::{PageReader, ReadCount};
pub use pread::PreadBatch;
pub use probe::{open_backend, probe_runs, probe_uring, BackendKind, DISABLE_ENV};
pub use read_batch::{IoStats, ReadBatch, ReadReq};
pub use space::free_bytes;
pub use uring::{UringBatch, DEFAULT_DEPTH, MAX_DEPTH, SQPOLL_ENV};

/// Alignment of offsets, lengths and buffer addresses for `O_DIRECT` (the page size; larger
/// than the 512-byte logical block size of most devices, so it is always enough).
pub const ALIGN: usize = 4096;
