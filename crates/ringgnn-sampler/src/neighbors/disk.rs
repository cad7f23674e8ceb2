//! [`DiskNeighbors`]: scattered neighbor entries read from the `indices` file with few,
//! page-aligned reads.
//!
//! The paper issues one 4-byte read per sampled neighbor. Here the entries wanted by one hop
//! are sorted by position, reduced to the distinct 4 KiB pages that hold them, and adjacent
//! pages are merged into runs of at most `max_run` bytes: one request per run (planned by
//! [`ringgnn_io::coalesce_pages`] and read by [`PageReader`], shared with the feature gatherer). Offsets,
//! lengths and buffer addresses are multiples of [`ringgnn_io::ALIGN`], so the same requests serve
//! buffered and `O_DIRECT` backends. A whole short neighbor list costs one request; a hop
//! costs at most one request per distinct page, and exactly one page of bytes per distinct page.
//!
//! Reads go through the [`ReadBatch`] trait, so pread and io_uring backends are interchangeable.
//!
//! With a [`PageCache`] (shared by the samplers of one graph), pages found there cost no read,
//! and every page read enters it: on-demand sampling of single nodes keeps the hub lists that
//! most of its reads would otherwise fetch again and again.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ringgnn_io::{
    CoalesceOptions, DirectFile, IoStats, PageCache, PageReader, PreadBatch, ReadBatch, UringBatch,
    ALIGN,
};
use ringgnn_store::manifest::IndexDtype;

use super::copied::{fetch_copied, first_bad};
use crate::{Error, Result};

/// One little-endian entry of 2, 4 or 8 bytes.
fn decode(b: &[u8]) -> u64 {
    match b.len() {
        2 => u16::from_le_bytes(b.try_into().unwrap()) as u64,
        4 => u32::from_le_bytes(b.try_into().unwrap()) as u64,
        _ => u64::from_le_bytes(b.try_into().unwrap()),
    }
}

/// Opens another backend over the same file (see [`DiskNeighbors::with_reopen`]).
pub type Reopen = Arc<dyn Fn() -> std::io::Result<Box<dyn ReadBatch>> + Send + Sync>;

/// What [`DiskNeighbors::another`] opens again: the file (named in errors), the read options,
/// how to open another backend over it, if known, and the cancel flag.
struct FileRead {
    path: PathBuf,
    opts: CoalesceOptions,
    reopen: Option<Reopen>,
    cancel: Option<Arc<AtomicBool>>,
}

/// The neighbor file read through a [`ReadBatch`] backend, with its reusable workspace.
pub struct DiskNeighbors {
    pages: PageReader,
    /// The file and how it is read (boxed: a source is one variant of two small enums).
    file: Box<FileRead>,
    width: u64,
    /// (position, index of the request in the caller's slice), sorted by position.
    order: Vec<(u64, usize)>,
    cache: Option<Arc<PageCache>>,
    /// The entries of `order` whose pages are not cached.
    miss: Vec<(u64, usize)>,
    /// [`Self::fetch_narrow`]'s workspace (boxed: a source is one variant of two small enums).
    narrow: Box<NarrowWork>,
}

/// [`DiskNeighbors::fetch_narrow`]'s workspace: a bit per page of its span, marking the pages
/// to read, and each page's place in the read buffer; its copies of the positions and entries
/// where it sorts them.
#[derive(Default)]
struct NarrowWork {
    marked: Vec<u64>,
    slot: Vec<u32>,
    copies: (Vec<u64>, Vec<u64>),
}

impl DiskNeighbors {
    /// Read the neighbor file `path` (entries of type `dtype`) through `reader`; `path` only
    /// names the file in errors.
    pub fn new(
        reader: Box<dyn ReadBatch>,
        path: &Path,
        dtype: IndexDtype,
        opts: CoalesceOptions,
    ) -> Self {
        DiskNeighbors {
            pages: PageReader::new(reader, opts, 0),
            file: Box::new(FileRead {
                path: path.to_path_buf(),
                opts,
                reopen: None,
                cancel: None,
            }),
            width: dtype.size(),
            order: Vec::new(),
            cache: None,
            miss: Vec::new(),
            narrow: Box::default(),
        }
    }

    /// Entries of 2 bytes (the time keys of an edge-time file) instead of its dtype's: read by
    /// [`Self::fetch_runs`] only.
    pub fn with_u16_entries(mut self) -> Self {
        self.width = 2;
        self
    }

    /// Let [`Self::another`] open more readers of the file with `reopen` (a backend of the
    /// same kind as this one's, over the same file).
    pub fn with_reopen(mut self, reopen: Reopen) -> Self {
        self.file.reopen = Some(reopen);
        self
    }

    /// [`Self::with_reopen`] by a descriptor opened once, now (`O_DIRECT` when `direct`, as
    /// this reader's file was): each further backend, of this reader's kind, reads a duplicate
    /// of it. The readers a sampler's threads open later, at their first hop, so read the very
    /// file the sampler was made with: a file removed, replaced or made unreadable since cannot
    /// fail them mid-epoch; opening it fails here, naming it.
    pub fn reopening_file(self, direct: bool) -> Result<Self> {
        let path = &self.file.path;
        let file = DirectFile::open_read(path, direct)
            .map(DirectFile::into_file)
            .map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
        let uring = self.name().starts_with("uring");
        let reopen: Reopen = Arc::new(move || {
            let f = file.try_clone()?;
            Ok(match uring {
                true => Box::new(UringBatch::new(f)?),
                false => Box::new(PreadBatch::new(f)),
            })
        });
        Ok(self.with_reopen(reopen))
    }

    /// Another reader of the same file, with its own backend (opened by the function given
    /// to [`Self::with_reopen`]; `None` without one), read buffer and workspace, the same page
    /// cache and the same cancel flag: for a thread of its own.
    pub fn another(&self) -> Option<Result<DiskNeighbors>> {
        let f = &self.file;
        let reopen = f.reopen.as_ref()?;
        Some(
            reopen()
                .map_err(|source| Error::Io {
                    path: f.path.clone(),
                    source,
                })
                .map(|reader| {
                    let mut d = DiskNeighbors::new(reader, &f.path, IndexDtype::U32, f.opts)
                        .with_cache(self.cache.clone())
                        .with_reopen(reopen.clone());
                    d.width = self.width;
                    if let Some(flag) = &f.cancel {
                        d.set_cancel(flag.clone());
                    }
                    d
                }),
        )
    }

    /// Bytes of its read buffer (what [`PageReader::new`] allocates for its options).
    pub fn buffer_bytes(&self) -> u64 {
        let opts = self.file.opts;
        opts.buffer.max(opts.run_bytes()) as u64
    }

    /// Serve pages from `cache` where it has them, and keep every page read there.
    pub fn with_cache(mut self, cache: Option<Arc<PageCache>>) -> Self {
        self.cache = cache;
        self
    }

    pub fn stats(&self) -> IoStats {
        self.pages.reader().stats()
    }

    /// Bytes of its fetch's workspace as the fetches so far grew it: the sort order of the
    /// positions (16 B each) and of those not cached, and [`Self::fetch_narrow`]'s.
    pub fn workspace_bytes(&self) -> u64 {
        let entry = std::mem::size_of::<(u64, usize)>();
        let w = &self.narrow;
        let narrow = 8 * (w.marked.capacity() + w.copies.0.capacity() + w.copies.1.capacity())
            + 4 * w.slot.capacity();
        (entry * (self.order.capacity() + self.miss.capacity()) + narrow) as u64
    }

    /// Bytes of an entry.
    pub fn width(&self) -> u64 {
        self.width
    }

    /// Pages of the file that [`Self::fetch_narrow`] reads in one wave, without sorting: what
    /// its read buffer holds.
    pub fn wave_pages(&self) -> u64 {
        self.pages.buffer_pages() as u64
    }

    /// Each position of `parts` (32 bits, every one in the file pages `pages`) replaced by the
    /// entry there, with the first entry (in position order) not below `below` (at most
    /// 2^32), and its position, if any, left in place (every entry is read either way). Where
    /// the span fits the read buffer ([`Self::wave_pages`]) and no page cache is kept, the
    /// pages holding a position are marked in a bitmap, read once in one wave of runs in file
    /// order, and each position looks its page up: no sort, as the homogeneous hyperbatch's
    /// `BlockReader` serves its chunks. Otherwise it is [`Self::fetch`] of a copy.
    pub fn fetch_narrow(
        &mut self,
        pages: Range<u64>,
        parts: &mut [&mut [u32]],
        below: u64,
    ) -> Result<Option<(u64, u64)>> {
        let width = self.width;
        let span = (pages.end - pages.start) as usize;
        if self.cache.is_some() || pages.end - pages.start > self.wave_pages() {
            let mut copies = std::mem::take(&mut self.narrow.copies);
            let r = fetch_copied(&mut copies, parts, below, |sub, out| self.fetch(sub, out));
            self.narrow.copies = copies;
            return r;
        }
        let mut bad = None;
        let page = |v: u32| (v as u64 * width / ALIGN as u64 - pages.start) as usize;
        let NarrowWork { marked, slot, .. } = &mut *self.narrow;
        marked.clear();
        marked.resize(span.div_ceil(64), 0);
        for &v in parts.iter().flat_map(|p| p.iter()) {
            let i = page(v);
            marked[i / 64] |= 1 << (i % 64);
        }
        slot.resize(span, 0);
        let (_, bytes) = self
            .pages
            .read_marked(pages.start, marked, slot)
            .map_err(|source| Error::Io {
                path: self.file.path.clone(),
                source,
            })?;
        for v in parts.iter_mut().flat_map(|p| p.iter_mut()) {
            let p = *v as u64 * width;
            let at = slot[page(*v)] as usize * ALIGN + (p % ALIGN as u64) as usize;
            let u = decode(&bytes[at..at + width as usize]);
            match u < below {
                true => *v = u as u32,
                false => bad = first_bad(bad, Some((p / width, u))),
            }
        }
        Ok(bad)
    }

    /// `vals[i] = indices[vals[i]]` for every `i`: the positions replaced by the entries
    /// there, with the first entry (in position order) not below `below`, and its position,
    /// if any (every entry is read either way). Without a page cache, and where positions and
    /// indices fit one word together, it sorts them as one key each (`position << bits |
    /// index`) in `keys`, the caller's workspace: 8 B a position besides `vals`; else it is
    /// [`Self::fetch`] from a copy.
    pub fn fetch_in_place(
        &mut self,
        vals: &mut [u64],
        below: u64,
        keys: &mut Vec<u64>,
    ) -> Result<Option<(u64, u64)>> {
        let bits = u64::BITS - (vals.len() as u64).leading_zeros();
        let max = vals.iter().copied().max().unwrap_or(0);
        if self.cache.is_some()
            || bits >= 64
            || max.checked_shl(bits).is_none_or(|m| m >> bits != max)
        {
            let positions = vals.to_vec();
            self.fetch(&positions, vals)?;
            let bad = positions
                .iter()
                .zip(vals.iter())
                .filter(|x| *x.1 >= below)
                .min();
            return Ok(bad.map(|(&p, &u)| (p, u)));
        }
        let mask = (1u64 << bits) - 1;
        keys.clear();
        keys.reserve_exact(vals.len());
        keys.extend(vals.iter().enumerate().map(|(i, &p)| p << bits | i as u64));
        keys.sort_unstable();
        let (width, packed) = (self.width, &*keys);
        let range = |k: usize| ((packed[k] >> bits) * width, width as usize);
        let mut bad = None;
        self.pages
            .read_ranges(packed.len(), range, |k, b| {
                let u = decode(b);
                if u >= below && bad.is_none() {
                    bad = Some((packed[k] >> bits, u));
                }
                vals[(packed[k] & mask) as usize] = u;
            })
            .map_err(|source| Error::Io {
                path: self.file.path.clone(),
                source,
            })?;
        Ok(bad)
    }

    pub fn name(&self) -> &'static str {
        self.pages.reader().name()
    }

    /// Stop a fetch between read waves, with an `Interrupted` I/O error, once `flag` is set.
    pub fn set_cancel(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.file.cancel = Some(flag.clone());
        self.pages.set_cancel(flag);
    }

    /// `out[i] = indices[positions[i]]` for every `i`.
    pub fn fetch(&mut self, positions: &[u64], out: &mut [u64]) -> Result<()> {
        assert_eq!(positions.len(), out.len(), "fetch: one output per position");
        self.order.clear();
        // What this fetch needs, once: `extend` alone grows by doubling, up to 2x the largest
        // fetch (16 B a position).
        self.order.reserve_exact(positions.len());
        self.order
            .extend(positions.iter().enumerate().map(|(i, &p)| (p, i)));
        self.order.sort_unstable();
        let width = self.width;
        let page_of = |pos: u64| pos * width / ALIGN as u64;
        let Some(cache) = &self.cache else {
            let order = &self.order;
            let range = |k: usize| (order[k].0 * width, width as usize);
            return self
                .pages
                .read_ranges(order.len(), range, |k, b| out[order[k].1] = decode(b))
                .map(|_| ())
                .map_err(|source| Error::Io {
                    path: self.file.path.clone(),
                    source,
                });
        };
        // Entries in cached pages come from there, one lookup per distinct page.
        self.miss.clear();
        let order = &self.order;
        let mut k = 0;
        while k < order.len() {
            let page = page_of(order[k].0);
            let end = k + order[k..].partition_point(|&(p, _)| page_of(p) == page);
            let hit = cache.get(page, |bytes| {
                for &(p, i) in &order[k..end] {
                    let at = (p * width % ALIGN as u64) as usize;
                    out[i] = decode(&bytes[at..at + width as usize]);
                }
            });
            if !hit {
                self.miss.extend_from_slice(&order[k..end]);
            }
            k = end;
        }
        let miss = &self.miss;
        let range = |k: usize| (miss[k].0 * width, width as usize);
        let mut last = u64::MAX;
        self.pages
            .read_ranges_in_pages(miss.len(), range, |k, b, page| {
                out[miss[k].1] = decode(b);
                let p = page_of(miss[k].0);
                if p != last {
                    cache.insert(p, page);
                    last = p;
                }
            })
            .map_err(|source| Error::Io {
                path: self.file.path.clone(),
                source,
            })?;
        Ok(())
    }

    /// `out` gets the entries of `runs[0] = (first, count)`, then those of `runs[1]`, ...: runs
    /// of adjacent entries read whole (what the temporal search reads of an edge-time file),
    /// `runs` in ascending order of `first`, each `count > 0` and its pages within the read
    /// buffer (this panics otherwise: size it for the longest run). The page cache is not used.
    pub fn fetch_runs(&mut self, runs: &[(u64, u64)], out: &mut [u64]) -> Result<()> {
        let width = self.width;
        let range = |k: usize| (runs[k].0 * width, (runs[k].1 * width) as usize);
        // Ranges are visited in order, so each run's entries follow the previous run's.
        let mut at = 0;
        self.pages
            .read_ranges(runs.len(), range, |_, b| {
                for (o, e) in out[at..].iter_mut().zip(b.chunks_exact(width as usize)) {
                    *o = decode(e);
                }
                at += b.len() / width as usize;
            })
            .map(|_| ())
            .map_err(|source| Error::Io {
                path: self.file.path.clone(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use ringgnn_io::testing::{ReadLog, Recorder};
    use ringgnn_io::ReadReq;

    use super::*;

    const PAGE: u64 = ALIGN as u64;

    /// 10 pages of u32 entries whose value is their position.
    fn fixture(opts: CoalesceOptions) -> (DiskNeighbors, ReadLog) {
        let data: Vec<u8> = (0..10 * 1024u32).flat_map(|x| x.to_le_bytes()).collect();
        let (rec, log) = Recorder::new(data);
        let d = DiskNeighbors::new(Box::new(rec), Path::new("x"), IndexDtype::U32, opts);
        (d, log)
    }

    fn req(page: u64, pages: usize, dst_page: usize) -> ReadReq {
        ReadReq {
            offset: page * PAGE,
            len: pages * ALIGN,
            dst: dst_page * ALIGN,
        }
    }

    #[test]
    fn adjacent_pages_merge_up_to_the_run_cap() {
        // Pages 0, 1, 2 (adjacent), 5, 6 (adjacent), 9; positions given out of order and twice.
        let positions = [
            5 * 1024 + 3,
            0,
            1023,
            1024,
            2 * 1024 + 7,
            6 * 1024,
            9 * 1024 + 1023,
            0,
        ];
        let opts = CoalesceOptions {
            max_run: 2 * ALIGN,
            buffer: 1 << 20,
        };
        let (mut d, log) = fixture(opts);
        let mut out = vec![0; positions.len()];
        d.fetch(&positions, &mut out).unwrap();
        assert_eq!(out, positions);
        // Runs are capped at two pages: 0-1, 2, 5-6, 9; packed back to back in the buffer.
        let want = vec![vec![req(0, 2, 0), req(2, 1, 2), req(5, 2, 3), req(9, 1, 5)]];
        assert_eq!(*log.lock().unwrap(), want);
    }

    #[test]
    fn a_small_buffer_splits_a_hop_into_several_batches() {
        let positions: Vec<u64> = (0..10).map(|p| p * 1024 + 5).collect();
        let opts = CoalesceOptions {
            max_run: 128 << 10,
            buffer: 3 * ALIGN,
        };
        let (mut d, log) = fixture(opts);
        let mut out = vec![0; positions.len()];
        d.fetch(&positions, &mut out).unwrap();
        assert_eq!(out, positions);
        // The run cap is larger than the buffer, so the buffer grows to the cap: one batch.
        assert_eq!(*log.lock().unwrap(), vec![vec![req(0, 10, 0)]]);

        let opts = CoalesceOptions {
            max_run: ALIGN,
            buffer: 3 * ALIGN,
        };
        let (mut d, log) = fixture(opts);
        let mut out = vec![0; positions.len()];
        d.fetch(&positions, &mut out).unwrap();
        assert_eq!(out, positions);
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 4, "10 pages through a 3-page buffer");
        assert_eq!(log[3], vec![req(9, 1, 0)]);
        for r in log.iter().flatten() {
            // What O_DIRECT needs: aligned offsets, lengths and buffer positions.
            assert_eq!((r.offset % PAGE, r.len % ALIGN, r.dst % ALIGN), (0, 0, 0));
        }
    }

    #[test]
    fn cached_pages_cost_no_read_and_give_the_same_entries() {
        let opts = CoalesceOptions {
            max_run: 2 * ALIGN,
            buffer: 1 << 20,
        };
        let (d, log) = fixture(opts);
        let cache = Arc::new(PageCache::new(PageCache::BYTES_PER_PAGE * 64).unwrap());
        let mut d = d.with_cache(Some(cache.clone()));
        let first = [5 * 1024 + 3, 0, 1023, 6 * 1024, 0];
        let mut out = vec![0; first.len()];
        d.fetch(&first, &mut out).unwrap();
        assert_eq!(out, first);
        // Pages 0, 5, 6 were read (5-6 merged) and are cached now.
        assert_eq!(*log.lock().unwrap(), vec![vec![req(0, 1, 0), req(5, 2, 1)]]);
        let again = [6 * 1024 + 1000, 7 * 1024, 3, 5 * 1024];
        let mut out = vec![0; again.len()];
        d.fetch(&again, &mut out).unwrap();
        assert_eq!(out, again);
        // Only page 7 is read.
        assert_eq!(log.lock().unwrap()[1], vec![req(7, 1, 0)]);
        let st = cache.stats();
        assert_eq!((st.hits, st.misses, st.pages), (3, 4, 4));
        // All cached: no read at all.
        let mut out = vec![0; 3];
        d.fetch(&[7 * 1024 + 5, 1, 5 * 1024 + 9], &mut out).unwrap();
        assert_eq!(out, [7 * 1024 + 5, 1, 5 * 1024 + 9]);
        assert_eq!(log.lock().unwrap().len(), 2);
    }

    #[test]
    fn in_place_reads_what_fetch_reads_and_names_the_first_entry_too_large() {
        // Entries equal their positions: below 3000, every one is fine; below 1024, the first
        // too large in position order is at 1024, whatever the order given.
        let positions = [5 * 1024 + 3, 0, 1023, 1024, 2 * 1024 + 7, 5 * 1024 + 3];
        for cache in [false, true] {
            let (d, log) = fixture(CoalesceOptions::default());
            let c = Arc::new(PageCache::new(PageCache::BYTES_PER_PAGE * 64).unwrap());
            let mut d = d.with_cache(cache.then_some(c));
            let (mut vals, mut keys) = (positions, Vec::new());
            assert_eq!(
                d.fetch_in_place(&mut vals, 10 * 1024, &mut keys).unwrap(),
                None
            );
            assert_eq!(vals, positions);
            // The same reads as fetch: pages 0-2 merged, then page 5.
            assert_eq!(*log.lock().unwrap(), vec![vec![req(0, 3, 0), req(5, 1, 3)]]);
            let mut vals = positions;
            let bad = d.fetch_in_place(&mut vals, 1024, &mut keys).unwrap();
            assert_eq!((bad, vals), (Some((1024, 1024)), positions));
            let mut none: [u64; 0] = [];
            assert_eq!(d.fetch_in_place(&mut none, 0, &mut keys).unwrap(), None);
            // Without a cache, one key a position and no other workspace.
            if !cache {
                assert_eq!((keys.capacity(), d.workspace_bytes()), (positions.len(), 0));
            }
        }
    }

    #[test]
    fn the_sort_order_holds_the_largest_fetch_not_twice_it() {
        // 3 positions, then 5: the order holds 5 entries (doubling grew it to 8); then 4 fits.
        let (mut d, _) = fixture(CoalesceOptions::default());
        let entry = std::mem::size_of::<(u64, usize)>() as u64;
        for (n, held) in [(3usize, 3u64), (5, 5), (4, 5)] {
            let positions: Vec<u64> = (0..n as u64).map(|p| p * 1000).collect();
            let mut out = vec![0; n];
            d.fetch(&positions, &mut out).unwrap();
            assert_eq!(out, positions);
            assert_eq!(d.workspace_bytes(), held * entry, "after {n}");
        }
    }

    #[test]
    fn narrow_fetch_reads_each_page_once_without_sorting_else_through_fetch() {
        // Two parts of positions, out of order and repeated, in pages 1, 2, 5 and 6 of the
        // 10 (entries equal their positions).
        let a = [5 * 1024 + 3, 1024, 2 * 1024 + 7, 1024, 6 * 1024];
        let b = [2 * 1024, 6 * 1024 + 1023, 5 * 1024];
        let run = |d: &mut DiskNeighbors, pages: Range<u64>, below: u64| {
            let (mut x, mut y) = (a, b);
            let bad = d.fetch_narrow(pages, &mut [&mut x, &mut y], below).unwrap();
            (bad, x, y)
        };
        let opts = CoalesceOptions {
            max_run: 2 * ALIGN,
            buffer: 4 * ALIGN,
        };
        let (mut d, log) = fixture(opts);
        assert_eq!(d.wave_pages(), 4);
        // Pages 1..7 (6) do not fit the 4-page buffer: a fetch of a copy, as one sorted fetch.
        assert_eq!(run(&mut d, 1..7, 1 << 20), (None, a, b));
        let want = vec![vec![req(1, 2, 0), req(5, 2, 2)]];
        assert_eq!(*log.lock().unwrap(), want);
        // Pages 4..7 (3) fit: the same, through the bitmap.
        let (mut d, log) = fixture(opts);
        let (a, b) = (
            [5 * 1024 + 3, 6 * 1024, 5 * 1024 + 3],
            [6 * 1024 + 1023, 5 * 1024],
        );
        let (mut x, mut y) = (a, b);
        let bad = d
            .fetch_narrow(4..7, &mut [&mut x, &mut y], 1 << 20)
            .unwrap();
        assert_eq!((bad, x, y), (None, a, b));
        assert_eq!(*log.lock().unwrap(), vec![vec![req(5, 2, 0)]]);
        // Entries from 6 * 1024 on are too large: the first in position order is named, and left
        // as its position; the others are read.
        let (mut x, mut y) = (
            [5 * 1024 + 3, 6 * 1024 + 9, 5 * 1024],
            [6 * 1024 + 1, 4 * 1024],
        );
        let bad = d
            .fetch_narrow(4..7, &mut [&mut x, &mut y], 6 * 1024)
            .unwrap();
        assert_eq!(bad, Some((6 * 1024 + 1, 6 * 1024 + 1)));
        assert_eq!(
            (x, y),
            (
                [5 * 1024 + 3, 6 * 1024 + 9, 5 * 1024],
                [6 * 1024 + 1, 4 * 1024]
            )
        );
        assert_eq!(log.lock().unwrap()[1], vec![req(4, 2, 0), req(6, 1, 2)]);
        // With a page cache: through fetch, the same entries.
        let (d, _) = fixture(opts);
        let cache = Arc::new(PageCache::new(PageCache::BYTES_PER_PAGE * 64).unwrap());
        let mut d = d.with_cache(Some(cache));
        let (mut x, mut y) = (a, b);
        let bad = d
            .fetch_narrow(4..7, &mut [&mut x, &mut y], 1 << 20)
            .unwrap();
        assert_eq!((bad, x, y), (None, a, b));
        // Entries too large through either copy (the page cache; pages 1..7 through the 4-page
        // buffer): the same first one named and left as its position as through the bitmap.
        for (cache, pages) in [(true, 4..7), (false, 1..7)] {
            let (d, _) = fixture(opts);
            let c = Arc::new(PageCache::new(PageCache::BYTES_PER_PAGE * 64).unwrap());
            let mut d = d.with_cache(cache.then_some(c));
            let (mut x, mut y) = (
                [5 * 1024 + 3, 6 * 1024 + 9, 5 * 1024],
                [6 * 1024 + 1, 4 * 1024],
            );
            let bad = d
                .fetch_narrow(pages, &mut [&mut x, &mut y], 6 * 1024)
                .unwrap();
            assert_eq!(bad, Some((6 * 1024 + 1, 6 * 1024 + 1)), "cache {cache}");
            assert_eq!(
                (x, y),
                (
                    [5 * 1024 + 3, 6 * 1024 + 9, 5 * 1024],
                    [6 * 1024 + 1, 4 * 1024]
                )
            );
        }
    }

    #[test]
    fn no_positions_no_reads() {
        let (mut d, log) = fixture(CoalesceOptions::default());
        d.fetch(&[], &mut []).unwrap();
        assert!(log.lock().unwrap().is_empty());
    }
}
