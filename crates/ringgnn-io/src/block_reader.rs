//! [`BlockReader`]: the pages that many readers of one file need, read once per region ("chunk")
//! of the file, with a per-block choice between reading only the needed pages and reading the
//! whole block (AGNES' block-wise I/O, section 3.2), made from a [`ReadModel`] of the device.
//!
//! This is the read path of hyperbatches: the neighbor entries (or feature rows) of many
//! mini-batches are marked in one bitmap per chunk, the chunk's needed pages are read once into
//! one aligned buffer, and every batch then takes its bytes from there. Within a block (1 MiB by
//! default), needed pages that are few and scattered are read as page runs; a block dense enough
//! that reading it whole is cheaper is read whole, and adjacent whole blocks merge into long
//! sequential requests. Offsets, lengths and buffer positions are page multiples, so `O_DIRECT`
//! works.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::read_batch::register_owned;
use crate::{AlignedBuf, ReadBatch, ReadReq, ALIGN};

const PAGE: u64 = ALIGN as u64;
const NONE: u32 = u32::MAX;

/// What reading costs on the device: enough to choose, per block, between the needed pages and
/// the whole block. The defaults are this project's reference machine, measured with fio: about
/// 92k random 4 KiB reads/s at queue depth 64 and 1.1 GB/s sequential.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadModel {
    /// Bytes of a block, the unit of the choice (a multiple of 4 KiB).
    pub block: usize,
    /// Random 4 KiB reads per second with the queue full.
    pub random_iops: f64,
    /// Sequential bytes per second.
    pub seq_bytes_per_s: f64,
    /// Longest single request, in bytes (a multiple of 4 KiB).
    pub max_request: usize,
}

impl Default for ReadModel {
    fn default() -> Self {
        ReadModel {
            block: 1 << 20,
            random_iops: 92_000.0,
            seq_bytes_per_s: 1.1e9,
            max_request: 1 << 20,
        }
    }
}

/// Environment variable overriding the device rates of [`ReadModel::from_env`]:
/// `RANDOM_IOPS,SEQ_MB_PER_S` (e.g. `92000,1100`).
pub const DEVICE_ENV: &str = "RINGGNN_DEVICE";

impl ReadModel {
    /// The defaults, with the rates of [`DEVICE_ENV`] when it is set and well formed.
    pub fn from_env() -> Self {
        let mut m = ReadModel::default();
        if let Ok(v) = std::env::var(DEVICE_ENV) {
            let parts: Vec<f64> = v.split(',').filter_map(|p| p.trim().parse().ok()).collect();
            if let [iops, mbs] = parts[..] {
                if iops > 0.0 && mbs > 0.0 {
                    m.random_iops = iops;
                    m.seq_bytes_per_s = mbs * 1e6;
                }
            }
        }
        m
    }

    /// Pages per block (at least 1).
    pub fn block_pages(&self) -> usize {
        (self.block / ALIGN).max(1)
    }

    /// Seconds to read one page sequentially, and the extra cost of starting a request (what a
    /// random read costs beyond its bytes).
    fn costs(&self) -> (f64, f64) {
        let page = ALIGN as f64 / self.seq_bytes_per_s;
        let request = (1.0 / self.random_iops - page).max(0.0);
        (page, request)
    }

    /// Whether reading a whole block of `block_pages` is cheaper than reading its `needed` pages
    /// in `runs` runs of adjacent pages.
    pub fn read_whole(&self, needed: usize, runs: usize, block_pages: usize) -> bool {
        let (page, request) = self.costs();
        let pages = runs as f64 * request + needed as f64 * page;
        let whole = request + block_pages as f64 * page;
        pages > whole
    }

    /// Estimated seconds to read `pages` pages in `requests` requests.
    pub fn seconds(&self, pages: u64, requests: u64) -> f64 {
        let (page, request) = self.costs();
        pages as f64 * page + requests as f64 * request
    }
}

/// What a [`BlockReader`] read, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockCounts {
    /// Pages read (each counted once per load that fetched it).
    pub pages: u64,
    /// Read requests issued.
    pub requests: u64,
    /// Chunks loaded.
    pub loads: u64,
    /// Bytes read as whole blocks (sequential) and as runs of needed pages (random).
    pub sequential_bytes: u64,
    pub random_bytes: u64,
}

/// Loads the needed pages of one chunk of a file at a time; see the module docs.
pub struct BlockReader {
    /// Declared before `buf`, so dropped first: its ring may hold `buf` registered.
    reader: Box<dyn ReadBatch>,
    model: ReadModel,
    buf: AlignedBuf,
    chunk_pages: usize,
    file_pages: u64,
    first_page: u64,
    /// For each page of the loaded chunk: its page index in `buf`, or `NONE`.
    slot: Vec<u32>,
    /// Pages to read, after the per-block choice (one bit per page of the chunk).
    read: Vec<u64>,
    reqs: Vec<ReadReq>,
    cancel: Option<Arc<AtomicBool>>,
    counts: BlockCounts,
}

impl BlockReader {
    /// Read the file behind `reader` (`file_bytes` long) in chunks of `chunk_bytes` (rounded to
    /// whole blocks, at least one block).
    pub fn new(
        reader: Box<dyn ReadBatch>,
        model: ReadModel,
        chunk_bytes: usize,
        file_bytes: u64,
    ) -> Self {
        let bp = model.block_pages();
        let chunk_pages = (chunk_bytes / ALIGN).div_ceil(bp).max(1) * bp;
        let mut reader = reader;
        let mut buf = AlignedBuf::new(chunk_pages * ALIGN);
        // SAFETY: `buf` is this reader's for its whole life, read into only through `reader`,
        // which is the field before it.
        unsafe { register_owned(reader.as_mut(), &mut buf) };
        BlockReader {
            reader,
            model,
            buf,
            chunk_pages,
            file_pages: file_bytes.div_ceil(PAGE),
            first_page: 0,
            slot: vec![NONE; chunk_pages],
            read: vec![0; chunk_pages.div_ceil(64)],
            reqs: Vec::new(),
            cancel: None,
            counts: BlockCounts::default(),
        }
    }

    /// Pages per chunk: chunk `c` covers pages `c * chunk_pages .. (c + 1) * chunk_pages`.
    pub fn chunk_pages(&self) -> usize {
        self.chunk_pages
    }

    /// Chunks covering the file.
    pub fn chunks(&self) -> u64 {
        self.file_pages.div_ceil(self.chunk_pages as u64)
    }

    pub fn model(&self) -> &ReadModel {
        &self.model
    }

    /// The backend (for its name and counters).
    pub fn reader(&self) -> &dyn ReadBatch {
        self.reader.as_ref()
    }

    pub fn counts(&self) -> BlockCounts {
        self.counts
    }

    /// Make [`Self::load`] fail with an `Interrupted` error once `flag` is set.
    pub fn set_cancel(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    /// Load chunk `chunk`: the pages whose bits are set in `needed` (bit `i` is the chunk's
    /// page `i`, i.e. file page `chunk * chunk_pages + i`), or their whole blocks where that is
    /// cheaper. Afterwards [`Self::bytes`] serves any range inside needed pages.
    pub fn load(&mut self, chunk: u64, needed: &[u64]) -> std::io::Result<()> {
        crate::page_reader::stop_if_cancelled(self.cancel.as_deref())?;
        let cp = self.chunk_pages;
        assert!(
            needed.len() * 64 >= cp,
            "load: the bitmap holds one bit per chunk page"
        );
        self.first_page = chunk * cp as u64;
        let in_file = self
            .file_pages
            .saturating_sub(self.first_page)
            .min(cp as u64) as usize;
        let bp = self.model.block_pages();
        self.read.iter_mut().for_each(|w| *w = 0);
        let bit = |v: &[u64], i: usize| v[i / 64] >> (i % 64) & 1 == 1;
        let (mut seq, mut rnd) = (0u64, 0u64);
        for b0 in (0..in_file).step_by(bp) {
            let b1 = (b0 + bp).min(in_file);
            let (mut n, mut runs, mut prev) = (0, 0, false);
            for i in b0..b1 {
                let on = bit(needed, i);
                n += on as usize;
                runs += (on && !prev) as usize;
                prev = on;
            }
            if n == 0 {
                continue;
            }
            let whole = self.model.read_whole(n, runs, b1 - b0);
            for i in b0..b1 {
                if whole || bit(needed, i) {
                    self.read[i / 64] |= 1 << (i % 64);
                }
            }
            if whole {
                seq += ((b1 - b0) * ALIGN) as u64;
            } else {
                rnd += (n * ALIGN) as u64;
            }
        }
        // Requests: runs of pages to read, packed back to back into the buffer.
        self.reqs.clear();
        self.slot.iter_mut().for_each(|s| *s = NONE);
        let max_pages = (self.model.max_request / ALIGN).max(1);
        let mut used = 0usize;
        let mut prev: Option<usize> = None;
        for i in 0..in_file {
            if !bit(&self.read, i) {
                continue;
            }
            match self.reqs.last_mut() {
                Some(r) if prev == Some(i - 1) && r.len < max_pages * ALIGN => r.len += ALIGN,
                _ => self.reqs.push(ReadReq {
                    offset: (self.first_page + i as u64) * PAGE,
                    len: ALIGN,
                    dst: used * ALIGN,
                }),
            }
            self.slot[i] = used as u32;
            used += 1;
            prev = Some(i);
        }
        if used > 0 {
            let buf = &mut self.buf.spare()[..used * ALIGN];
            self.reader.read_batch(&self.reqs, buf)?;
        }
        self.buf.set_len(used * ALIGN);
        self.counts.pages += used as u64;
        self.counts.requests += self.reqs.len() as u64;
        self.counts.loads += 1;
        self.counts.sequential_bytes += seq;
        self.counts.random_bytes += rnd;
        Ok(())
    }

    /// The bytes of the file at `offset .. offset + len`, all inside needed pages of the loaded
    /// chunk (consecutive pages are consecutive in the buffer). Panics otherwise: a bug of the
    /// caller, which marked the pages.
    pub fn bytes(&self, offset: u64, len: usize) -> &[u8] {
        let page = (offset / PAGE - self.first_page) as usize;
        let s = self.slot[page];
        assert!(s != NONE, "bytes: page {} was not loaded", offset / PAGE);
        let at = s as usize * ALIGN + (offset % PAGE) as usize;
        &self.buf[at..at + len]
    }
}

#[cfg(test)]
mod tests;
