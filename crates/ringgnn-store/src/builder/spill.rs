//! The spill file: edges partitioned into key-range buckets on disk.
//!
//! Edges arrive in input order. Each time the in-memory buffer fills, it is counting-sorted by
//! bucket (one pass) and appended to the spill file as one sequential write, leaving one
//! *segment* per non-empty bucket. Because every flush is written in bucket order, the segments
//! of a run of consecutive buckets are contiguous within each flush: loading a group of buckets
//! costs one sequential read per flush, never a merge. The file is read and written with
//! O_DIRECT (each flush starts page-aligned): spill data is written once and read once, so the
//! page cache would only cost a copy and memory.

use std::path::{Path, PathBuf};

use ringgnn_io::{AlignedBuf, DirectFile, ALIGN};

use super::key::Key;
use crate::{IoContext, Result};

/// Buckets per partition level: enough that groups fill the memory budget evenly, few enough
/// that the per-flush histogram stays in L1/L2.
pub const FANOUT_BITS: u32 = 12;
pub const FANOUT: usize = 1 << FANOUT_BITS;

/// Bounce buffer size for unaligned O_DIRECT reads (one per reader).
pub const BOUNCE: usize = 4 << 20;

/// One bucket's data from one flush: `len` keys starting at byte `start` of the file.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    pub start: u64,
    pub len: u64,
}

pub struct Spill<K: Key> {
    path: PathBuf,
    file: DirectFile,
    /// Keys in this spill are in `[base, base + (FANOUT << shift))`; bucket = `(key - base) >> shift`.
    pub base: K,
    pub shift: u32,
    /// Per bucket, its segments in flush order.
    pub segments: Vec<Vec<Segment>>,
    /// Bytes written (always a multiple of ALIGN).
    written: u64,
}

/// A page-aligned buffer viewed as `n` keys.
pub fn keys_mut<K: Key>(buf: &mut AlignedBuf, n: usize) -> &mut [K] {
    let bytes = n * std::mem::size_of::<K>();
    buf.set_len(bytes);
    bytemuck::cast_slice_mut(&mut buf[..])
}

/// An aligned buffer able to hold `n` keys padded to a page.
pub fn key_buffer<K: Key>(n: usize) -> AlignedBuf {
    AlignedBuf::new((n * std::mem::size_of::<K>()).max(1))
}

impl<K: Key> Spill<K> {
    pub fn create(path: &Path, base: K, shift: u32) -> Result<Self> {
        let file = DirectFile::create(path).at(path)?;
        Ok(Spill {
            path: path.to_path_buf(),
            file,
            base,
            shift,
            segments: vec![Vec::new(); FANOUT],
            written: 0,
        })
    }

    /// Double the key range covered (used while the largest id is still unknown): bucket `b`
    /// becomes bucket `b / 2`. Only bookkeeping moves; no data is rewritten.
    pub fn widen(&mut self) {
        debug_assert!(self.base == K::default());
        let mut merged = vec![Vec::new(); FANOUT];
        for (b, segs) in std::mem::take(&mut self.segments).into_iter().enumerate() {
            merged[b / 2].extend(segs);
        }
        self.segments = merged;
        self.shift += 1;
    }

    /// Whether `key` falls in the range this spill covers.
    pub fn covers(&self, key: K) -> bool {
        key >= self.base && key.bucket(self.base, self.shift) < FANOUT
    }

    /// Counting-sort `buf` by bucket into `scratch` and append it as one aligned write.
    pub fn flush(&mut self, buf: &[K], scratch: &mut AlignedBuf) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let size = std::mem::size_of::<K>() as u64;
        let starts = bucketize(buf, keys_mut(scratch, buf.len()), self.base, self.shift);
        for b in 0..FANOUT {
            let len = (starts[b + 1] - starts[b]) as u64;
            if len > 0 {
                self.segments[b].push(Segment {
                    start: self.written + starts[b] as u64 * size,
                    len,
                });
            }
        }
        // Pad the write to a page; the padding is never referenced by a segment.
        let padded = scratch.len().div_ceil(ALIGN) * ALIGN;
        scratch.set_len(padded);
        self.file
            .write_all_at(scratch, self.written)
            .at(&self.path)?;
        self.written += padded as u64;
        Ok(())
    }

    /// Whether nothing was flushed yet.
    pub fn is_empty(&self) -> bool {
        self.written == 0
    }

    /// Total keys in buckets `[lo, hi)`.
    pub fn count(&self, lo: usize, hi: usize) -> u64 {
        self.segments[lo..hi].iter().flatten().map(|s| s.len).sum()
    }

    /// Read every key of buckets `[lo, hi)` grouped by bucket into `out`, using `raw` as the
    /// landing buffer; returns the `hi - lo + 1` bucket start offsets in `out`.
    ///
    /// Segments of consecutive buckets from the same flush are adjacent in the file, so this is
    /// one large read per flush; the segments are then put in bucket order with one `memcpy`
    /// each (no per-key scatter: the flush already bucketed every key).
    pub fn load_bucketed(
        &self,
        lo: usize,
        hi: usize,
        raw: &mut Vec<K>,
        out: &mut Vec<K>,
        bounce: &mut AlignedBuf,
    ) -> Result<Vec<usize>> {
        let size = std::mem::size_of::<K>() as u64;
        let mut segs: Vec<(usize, Segment)> = (lo..hi)
            .flat_map(|b| self.segments[b].iter().map(move |s| (b, *s)))
            .collect();
        segs.sort_unstable_by_key(|(_, s)| s.start);
        // Read each maximal run of adjacent segments at once; remember where each segment landed.
        raw.clear();
        let mut placed: Vec<(usize, usize, usize)> = Vec::with_capacity(segs.len());
        let mut i = 0;
        while i < segs.len() {
            let mut j = i + 1;
            let mut end = segs[i].1.start + segs[i].1.len * size;
            while j < segs.len() && segs[j].1.start == end {
                end += segs[j].1.len * size;
                j += 1;
            }
            let at = raw.len();
            let n = ((end - segs[i].1.start) / size) as usize;
            raw.resize(at + n, K::default());
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut raw[at..]);
            self.file
                .read_exact_at(bytes, segs[i].1.start, bounce)
                .at(&self.path)?;
            for (b, s) in &segs[i..j] {
                placed.push((
                    *b,
                    at + ((s.start - segs[i].1.start) / size) as usize,
                    s.len as usize,
                ));
            }
            i = j;
        }
        let mut starts = vec![0usize; hi - lo + 1];
        for &(b, _, len) in &placed {
            starts[b - lo + 1] += len;
        }
        for k in 0..hi - lo {
            starts[k + 1] += starts[k];
        }
        out.clear();
        out.resize(raw.len(), K::default());
        let mut cursor = starts.clone();
        for (b, at, len) in placed {
            let c = &mut cursor[b - lo];
            out[*c..*c + len].copy_from_slice(&raw[at..at + len]);
            *c += len;
        }
        Ok(starts)
    }

    /// Stream the keys of bucket `b` in pieces of at most `max` keys (for re-partitioning a
    /// bucket that does not fit in memory).
    pub fn for_each_piece(
        &self,
        b: usize,
        max: usize,
        buf: &mut Vec<K>,
        bounce: &mut AlignedBuf,
        mut f: impl FnMut(&[K]) -> Result<()>,
    ) -> Result<()> {
        let size = std::mem::size_of::<K>() as u64;
        for s in &self.segments[b] {
            let mut done = 0;
            while done < s.len {
                let n = (s.len - done).min(max as u64) as usize;
                buf.clear();
                buf.resize(n, K::default());
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut buf[..]);
                self.file
                    .read_exact_at(bytes, s.start + done * size, bounce)
                    .at(&self.path)?;
                f(buf)?;
                done += n as u64;
            }
        }
        Ok(())
    }
}

/// Counting-sort `buf` by bucket `(key - base) >> shift` into `out` (same length); returns the
/// FANOUT + 1 bucket start offsets in `out`.
pub fn bucketize<K: Key>(buf: &[K], out: &mut [K], base: K, shift: u32) -> Vec<usize> {
    debug_assert_eq!(buf.len(), out.len());
    let mut starts = vec![0usize; FANOUT + 1];
    for &k in buf {
        starts[k.bucket(base, shift) + 1] += 1;
    }
    for b in 0..FANOUT {
        starts[b + 1] += starts[b];
    }
    let mut pos = starts.clone();
    for &k in buf {
        let b = k.bucket(base, shift);
        out[pos[b]] = k;
        pos[b] += 1;
    }
    starts
}

/// Sort keys that are already grouped by bucket: each bucket is sorted on its own, small
/// enough to stay in cache.
pub fn sort_buckets<K: Key>(keys: &mut [K], starts: &[usize]) {
    let mut tmp = Vec::new();
    let mut counts = Vec::new();
    for w in starts.windows(2) {
        if w[1] - w[0] > 1 {
            sort_bucket(&mut keys[w[0]..w[1]], &mut tmp, &mut counts);
        }
    }
}

/// Sort one bucket. Its destinations span a narrow range, so a counting sort by destination
/// followed by sorting each (short) neighbor list beats a full radix sort; a bucket whose
/// destinations are spread thin (re-partitioned hubs, sparse ids) falls back to radix sort.
fn sort_bucket<K: Key>(keys: &mut [K], tmp: &mut Vec<K>, counts: &mut Vec<usize>) {
    let (lo, hi) = keys
        .iter()
        .fold((u64::MAX, 0), |(a, b), k| (a.min(k.dst()), b.max(k.dst())));
    let range = (hi - lo) as usize + 1;
    if range > 4 * keys.len() + 1024 {
        K::sort(keys);
        return;
    }
    counts.clear();
    counts.resize(range + 1, 0);
    for k in keys.iter() {
        counts[(k.dst() - lo) as usize + 1] += 1;
    }
    for d in 0..range {
        counts[d + 1] += counts[d];
    }
    tmp.clear();
    tmp.resize(keys.len(), K::default());
    {
        let mut pos = counts[..range].to_vec();
        for &k in keys.iter() {
            let d = (k.dst() - lo) as usize;
            tmp[pos[d]] = k;
            pos[d] += 1;
        }
    }
    for d in 0..range {
        let list = &mut tmp[counts[d]..counts[d + 1]];
        if list.len() > 1 {
            list.sort_unstable();
        }
    }
    keys.copy_from_slice(tmp);
}

impl<K: Key> Drop for Spill<K> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
