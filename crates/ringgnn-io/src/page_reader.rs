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

impl PageReader {
    /// Pages the buffer holds: what one [`Self::read_marked`] reads at most.
    pub fn buffer_pages(&self) -> usize {
        self.buf.capacity() / ALIGN
    }

    /// Read, in one wave, the file pages `first + i` for every bit `i` set in `marked` (bit `i`
    /// of word `i / 64`), runs of adjacent pages merged up to the run cap and packed back to
    /// back in the buffer, as [`Self::read_ranges`] reads them, but found from the bits rather
    /// than from ranges sorted by offset; `slot[i]` is set to each read page's index in the
    /// returned bytes (`slot` one entry per bit at least). The marked pages must fit the buffer
    /// ([`Self::buffer_pages`]): this panics otherwise.
    pub fn read_marked(
        &mut self,
        first: u64,
        marked: &[u64],
        slot: &mut [u32],
    ) -> std::io::Result<(ReadCount, &[u8])> {
        stop_if_cancelled(self.cancel.as_deref())?;
        let run_pages = self.max_run / ALIGN;
        self.reqs.clear();
        let mut used = 0usize;
        let mut prev = usize::MAX;
        for (w, &bits) in marked.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                match self.reqs.last_mut() {
                    Some(r) if prev.wrapping_add(1) == i && r.len < run_pages * ALIGN => {
                        r.len += ALIGN
                    }
                    _ => self.reqs.push(ReadReq {
                        offset: (first + i as u64) * ALIGN as u64,
                        len: ALIGN,
                        dst: used * ALIGN,
                    }),
                }
                slot[i] = used as u32;
                used += 1;
                prev = i;
            }
        }
        assert!(
            used <= self.buffer_pages(),
            "read_marked: {used} pages marked, the buffer holds {}",
            self.buffer_pages()
        );
        let count = ReadCount {
            pages: used as u64,
            requests: self.reqs.len() as u64,
            batches: (used > 0) as u64,
        };
        if used > 0 {
            let buf = &mut self.buf.spare()[..used * ALIGN];
            self.reader.read_batch(&self.reqs, buf)?;
        }
        self.buf.set_len(used * ALIGN);
        Ok((count, &self.buf[..used * ALIGN]))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Recorder;

    #[test]
    fn marked_pages_are_read_once_in_runs_and_found_by_their_slots() {
        // 200 pages, each filled with its page number.
        let data: Vec<u8> = (0..200u32).flat_map(|p| [p as u8; ALIGN]).collect();
        let (rec, log) = Recorder::new(data);
        let opts = CoalesceOptions {
            max_run: 2 * ALIGN,
            buffer: 8 * ALIGN,
        };
        let mut r = PageReader::new(Box::new(rec), opts, 0);
        assert_eq!(r.buffer_pages(), 8);
        // From page 100: pages 100, 101, 102 (a run cut at two pages), 164 (bit 64, the second
        // word), 166.
        let marked = [0b111, 0b101];
        let mut slot = vec![u32::MAX; 128];
        let (count, bytes) = r.read_marked(100, &marked, &mut slot).unwrap();
        let pages: Vec<u8> = bytes.chunks(ALIGN).map(|p| p[0]).collect();
        assert_eq!(pages, [100, 101, 102, 164, 166]);
        for (i, s) in [(0, 0), (1, 1), (2, 2), (64, 3), (66, 4), (3, u32::MAX)] {
            assert_eq!(slot[i], s, "bit {i}");
        }
        assert_eq!((count.pages, count.requests, count.batches), (5, 4, 1));
        let req = |page: u64, pages: usize, dst: usize| ReadReq {
            offset: page * ALIGN as u64,
            len: pages * ALIGN,
            dst: dst * ALIGN,
        };
        let want = vec![
            req(100, 2, 0),
            req(102, 1, 2),
            req(164, 1, 3),
            req(166, 1, 4),
        ];
        assert_eq!(*log.lock().unwrap(), vec![want]);
        // Nothing marked: no read.
        let (count, bytes) = r.read_marked(0, &[0, 0], &mut slot).unwrap();
        assert_eq!(
            (count.pages, bytes.len(), log.lock().unwrap().len()),
            (0, 0, 1)
        );
    }

    #[test]
    #[should_panic(expected = "the buffer holds 2")]
    fn more_marked_pages_than_the_buffer_holds_is_a_bug_of_the_caller() {
        let (rec, _) = Recorder::new(vec![0; 8 * ALIGN]);
        let opts = CoalesceOptions {
            max_run: ALIGN,
            buffer: 2 * ALIGN,
        };
        let mut r = PageReader::new(Box::new(rec), opts, 0);
        r.read_marked(0, &[0b111], &mut [0; 64]).unwrap();
    }
}
