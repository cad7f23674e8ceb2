//! Batched positional reads: the interface every read backend implements (pread here, io_uring
//! in `uring.rs`), so the sampler and the feature store never care which one runs.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Read `len` bytes at file `offset` into `buf[dst .. dst + len]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadReq {
    pub offset: u64,
    pub len: usize,
    pub dst: usize,
}

/// Counters every backend keeps (cumulative since creation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Read requests issued to the kernel (after any splitting of short reads).
    pub reads: u64,
    /// Bytes requested and read.
    pub bytes: u64,
    /// Calls to `read_batch`.
    pub batches: u64,
}

/// A backend that performs a batch of reads on one file. Implementations must either fill every
/// request completely or return an error: a short read (file shorter than `offset + len`) is an
/// `UnexpectedEof` error, never silently zero-filled data.
pub trait ReadBatch: Send {
    fn read_batch(&mut self, reqs: &[ReadReq], buf: &mut [u8]) -> io::Result<()>;
    fn stats(&self) -> IoStats;
    /// "pread", "uring", "uring-direct", ... for reports.
    fn name(&self) -> &'static str;
}

/// The portable backend: one `pread` per request, in order.
pub struct PreadBatch {
    file: File,
    stats: IoStats,
}

impl PreadBatch {
    pub fn new(file: File) -> Self {
        PreadBatch {
            file,
            stats: IoStats::default(),
        }
    }
}

impl ReadBatch for PreadBatch {
    fn read_batch(&mut self, reqs: &[ReadReq], buf: &mut [u8]) -> io::Result<()> {
        self.stats.batches += 1;
        for r in reqs {
            let dst = buf.get_mut(r.dst..r.dst + r.len).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "read request outside the buffer",
                )
            })?;
            self.file.read_exact_at(dst, r.offset)?;
            self.stats.reads += 1;
            self.stats.bytes += r.len as u64;
        }
        Ok(())
    }
    fn stats(&self) -> IoStats {
        self.stats
    }
    fn name(&self) -> &'static str {
        "pread"
    }
}
