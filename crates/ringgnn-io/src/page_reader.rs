//! [`PageReader`]: the one loop every scattered disk read of ringgnn goes through (the sampler's
//! neighbor entries, the feature gatherer's rows). It plans waves of page-aligned, merged
//! requests with [`coalesce_pages`], reads each wave into one reused aligned buffer through a
//! [`ReadBatch`] backend (so `O_DIRECT` works), and hands every range its bytes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::{coalesce_pages, AlignedBuf, CoalesceOptions, ReadBatch, ReadReq, ALIGN};

/// What one [`PageReader::read_ranges`] call read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadCount {
    /// 4 KiB pages read (each counted once per read batch that fetched it).
    pub pages: u64,
    /// Read requests (runs of adjacent pages).
    pub requests: u64,
    /// Calls to [`ReadBatch::read_batch`] ("waves"): more than one when the pages needed
    /// exceed the buffer.
    pub batches: u64,
}

/// A read backend with the workspace of coalesced page reads (see the module docs).
pub struct PageReader {
    /// Declared before `buf`, so dropped first: its ring may hold `buf` registered.
    reader: Box<dyn ReadBatch>,
    max_run: usize,
    buf: AlignedBuf,
    reqs: Vec<ReadReq>,
    at: Vec<usize>,
    cancel: Option<Arc<AtomicBool>>,
}

impl PageReader {
    /// Reads through `reader`; the buffer holds `opts.buffer` bytes, grown to one run and to
    /// `min_buffer` (the pages the largest single range can touch).
    pub fn new(reader: Box<dyn ReadBatch>, opts: CoalesceOptions, min_buffer: usize) -> Self {
        let max_run = opts.run_bytes();
        let (mut reader, mut buf) = (
            reader,
            AlignedBuf::new(opts.buffer.max(max_run).max(min_buffer)),
        );
        // SAFETY: `buf` is this reader's for its whole life, read into only through `reader`,
        // which is the field before it.
        unsafe { crate::read_batch::register_owned(reader.as_mut(), &mut buf) };
        PageReader {
            reader,
            max_run,
            buf,
            reqs: Vec::new(),
            at: Vec::new(),
            cancel: None,
        }
    }

    /// Make [`Self::read_ranges`] stop between waves, with an `Interrupted` error, once `flag`
    /// is set: a reader working for a consumer that went away need not finish a long read.
    pub fn set_cancel(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    /// The backend (for its name and counters).
    pub fn reader(&self) -> &dyn ReadBatch {
        self.reader.as_ref()
    }

    /// Call `visit(k, bytes)` with the bytes of `range(k) = (offset, len)` for every `k` in
    /// `0..n`; the ranges must be in ascending order of offset.
    pub fn read_ranges(
        &mut self,
        n: usize,
        range: impl Fn(usize) -> (u64, usize),
        mut visit: impl FnMut(usize, &[u8]),
    ) -> std::io::Result<ReadCount> {
        self.read_ranges_in_pages(n, range, |k, bytes, _| visit(k, bytes))
    }

    /// [`Self::read_ranges`], also handing each range the whole page (`ALIGN` bytes at
    /// `offset / ALIGN * ALIGN`) its first byte is in: what a [`crate::PageCache`] keeps.
    pub fn read_ranges_in_pages(
        &mut self,
        n: usize,
        range: impl Fn(usize) -> (u64, usize),
        mut visit: impl FnMut(usize, &[u8], &[u8]),
    ) -> std::io::Result<ReadCount> {
        let mut count = ReadCount::default();
        let mut next = 0;
        while next < n {
            stop_if_cancelled(self.cancel.as_deref())?;
            let cap = self.buf.capacity();
            let used = coalesce_pages(
                (next..n).map(&range),
                self.max_run,
                cap,
                &mut self.reqs,
                &mut self.at,
            );
            let buf = &mut self.buf.spare()[..used];
            self.reader.read_batch(&self.reqs, buf)?;
            for (j, &at) in self.at.iter().enumerate() {
                let (offset, len) = range(next + j);
                // Runs start on page boundaries of the file and of the buffer alike.
                let page = at - (offset % ALIGN as u64) as usize;
                visit(next + j, &buf[at..at + len], &buf[page..page + ALIGN]);
            }
            count.pages += (used / ALIGN) as u64;
            count.requests += self.reqs.len() as u64;
            count.batches += 1;
            next += self.at.len();
        }
        Ok(count)
    }
}

/// An `Interrupted` error once `flag` is set: how a reader working for a consumer that went
/// away stops between reads ([`PageReader`] between waves, `BlockReader` between chunks).
pub(crate) fn stop_if_cancelled(flag: Option<&AtomicBool>) -> std::io::Result<()> {
    if flag.is_some_and(|c| c.load(Ordering::Relaxed)) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "read cancelled: its consumer stopped",
        ));
    }
    Ok(())
}
