//! Batched positional reads: the interface every read backend implements ([`crate::PreadBatch`]
//! in `pread.rs`, [`crate::UringBatch`] in `uring.rs`), so the sampler and the feature store never
//! care which one runs, and the checks every backend applies to a request before reading.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use crate::ALIGN;

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
    /// Register `buf`, the buffer its owner reads into for the backend's whole life, with the
    /// kernel, so that reads into it skip pinning its pages each time (io_uring's fixed
    /// buffers). Returns whether it is registered; by default nothing is.
    ///
    /// # Safety
    ///
    /// `buf` must stay allocated at the same address, and be read into only through this
    /// backend, until the backend is dropped: the kernel keeps its pages and writes there.
    unsafe fn register_buffer(&mut self, _buf: &mut [u8]) -> bool {
        false
    }
    fn stats(&self) -> IoStats;
    /// "pread", "uring", "uring-direct", ... for reports.
    fn name(&self) -> &'static str;
}

/// Whether `file` was opened with `O_DIRECT` (by [`crate::DirectFile`] or by the caller).
pub(crate) fn is_direct(file: &File) -> bool {
    // SAFETY: F_GETFL only reads the flags of a descriptor that `file` keeps open.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    flags != -1 && flags & libc::O_DIRECT != 0
}

/// Check request `i` before any I/O: it must lie inside `buf` and, for `O_DIRECT`, have its
/// offset, length and buffer address on [`ALIGN`] boundaries.
pub(crate) fn check_request(i: usize, r: &ReadReq, buf: &[u8], direct: bool) -> io::Result<()> {
    let invalid = |what: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "read request {i} (offset {}, len {}, dst {}) {what}",
                r.offset, r.len, r.dst
            ),
        )
    };
    if r.dst.checked_add(r.len).is_none_or(|end| end > buf.len()) {
        return Err(invalid(format!(
            "ends outside the {}-byte buffer",
            buf.len()
        )));
    }
    if r.offset.checked_add(r.len as u64).is_none() {
        return Err(invalid("overflows the file offset".into()));
    }
    let addr = buf.as_ptr() as usize + r.dst;
    if direct
        && !(r.offset.is_multiple_of(ALIGN as u64)
            && r.len.is_multiple_of(ALIGN)
            && addr.is_multiple_of(ALIGN))
    {
        return Err(invalid(format!(
            "is not aligned for O_DIRECT: offset, length and buffer address must be multiples \
             of {ALIGN} (use an AlignedBuf and page-sized reads, or open without O_DIRECT)"
        )));
    }
    Ok(())
}

/// The error for a read that reached the end of the file after `got` of its bytes.
pub(crate) fn eof_error(i: usize, r: &ReadReq, got: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!(
            "read request {i} (offset {}, len {}) runs past the end of the file: only {got} bytes \
             were there",
            r.offset, r.len
        ),
    )
}

/// Set to 0 not to register each block reader's buffer with its ring. By default it is
/// registered (io_uring fixed buffers, read with `READ_FIXED`, so an `O_DIRECT` read does not pin
/// its pages each time: about 0.87x the capped hyperbatch epoch, docs/benchmarks.md); where the kernel
/// refuses (old kernels, `RLIMIT_MEMLOCK`), reads are plain.
pub const FIXED_BUFFERS_ENV: &str = "RINGGNN_URING_FIXED_BUFFERS";

/// Register `buf` with `reader` as its fixed buffer, unless [`FIXED_BUFFERS_ENV`]
/// is 0: for the readers that own one buffer for their whole life, [`crate::BlockReader`] and
/// [`crate::PageReader`].
///
/// # Safety
///
/// As [`ReadBatch::register_buffer`]: the caller keeps `buf` (whose mapping never moves) for
/// `reader`'s whole life, reads into it only through `reader`, and drops `reader` first (the
/// field before `buf`).
pub(crate) unsafe fn register_owned(reader: &mut dyn ReadBatch, buf: &mut crate::AlignedBuf) {
    if std::env::var(FIXED_BUFFERS_ENV).as_deref() != Ok("0") {
        // SAFETY: this function's own contract.
        unsafe { reader.register_buffer(buf.spare()) };
    }
}
