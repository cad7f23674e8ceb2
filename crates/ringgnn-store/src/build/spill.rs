//! The spill file: edges partitioned into key-range buckets on disk.
//!
//! Edges arrive in input order. Each time the in-memory buffer fills, it is counting-sorted by
//! bucket (one pass) and appended to the spill file as one sequential write, leaving one
//! *segment* per non-empty bucket. Because every flush is written in bucket order, the segments
//! of a run of consecutive buckets are contiguous within each flush: loading a group of buckets
//! costs one sequential read per flush, never a merge.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::key::Key;
use crate::{IoContext, Result};

/// Buckets per partition level: enough that groups fill the memory budget evenly, few enough
/// that the per-flush histogram stays in L1/L2.
pub const FANOUT_BITS: u32 = 12;
pub const FANOUT: usize = 1 << FANOUT_BITS;

/// One bucket's data from one flush: `len` keys starting at key index `start` of the file.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    pub start: u64,
    pub len: u64,
}

pub struct Spill<K: Key> {
    path: PathBuf,
    file: File,
    /// Keys in this spill are in `[base, base + (FANOUT << shift))`; bucket = `(key - base) >> shift`.
    pub base: K,
    pub shift: u32,
    /// Per bucket, its segments in flush order.
    pub segments: Vec<Vec<Segment>>,
    written: u64,
}

impl<K: Key> Spill<K> {
    pub fn create(path: &Path, base: K, shift: u32) -> Result<Self> {
        let file = File::options().read(true).write(true).create_new(true).open(path).at(path)?;
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

    /// Counting-sort `buf` by bucket into `scratch` and append it as one write.
    pub fn flush(&mut self, buf: &[K], scratch: &mut Vec<K>) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let starts = bucketize(buf, scratch, self.base, self.shift);
        for b in 0..FANOUT {
            let len = (starts[b + 1] - starts[b]) as u64;
            if len > 0 {
                self.segments[b].push(Segment {
                    start: self.written + starts[b] as u64,
                    len,
                });
            }
        }
        self.file.write_all(bytemuck::cast_slice(scratch)).at(&self.path)?;
        self.written += buf.len() as u64;
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

    /// Read every key of buckets `[lo, hi)` into `out` (cleared first): one read per flush.
    pub fn load(&self, lo: usize, hi: usize, out: &mut Vec<K>) -> Result<()> {
        out.clear();
        // Segments of consecutive buckets from the same flush are adjacent: coalesce them.
        let mut runs: Vec<Segment> = self.segments[lo..hi].iter().flatten().copied().collect();
        runs.sort_unstable_by_key(|s| s.start);
        let mut merged: Vec<Segment> = Vec::with_capacity(runs.len());
        for s in runs {
            match merged.last_mut() {
                Some(m) if m.start + m.len == s.start => m.len += s.len,
                _ => merged.push(s),
            }
        }
        for s in merged {
            let at = out.len();
            out.resize(at + s.len as usize, K::default());
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out[at..]);
            self.file
                .read_exact_at(bytes, s.start * std::mem::size_of::<K>() as u64)
                .at(&self.path)?;
        }
        Ok(())
    }

    /// Stream the keys of bucket `b` in pieces of at most `max` keys (for re-partitioning a
    /// bucket that does not fit in memory).
    pub fn for_each_piece(&self, b: usize, max: usize, buf: &mut Vec<K>, mut f: impl FnMut(&[K]) -> Result<()>) -> Result<()> {
        for s in &self.segments[b] {
            let mut done = 0;
            while done < s.len {
                let n = (s.len - done).min(max as u64) as usize;
                buf.clear();
                buf.resize(n, K::default());
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut buf[..]);
                self.file
                    .read_exact_at(bytes, (s.start + done) * std::mem::size_of::<K>() as u64)
                    .at(&self.path)?;
                f(buf)?;
                done += n as u64;
            }
        }
        Ok(())
    }
}

/// Counting-sort `buf` by bucket `(key - base) >> shift` into `out`; returns the FANOUT + 1
/// bucket start offsets in `out`.
pub fn bucketize<K: Key>(buf: &[K], out: &mut Vec<K>, base: K, shift: u32) -> Vec<usize> {
    let mut starts = vec![0usize; FANOUT + 1];
    for &k in buf {
        starts[k.bucket(base, shift) + 1] += 1;
    }
    for b in 0..FANOUT {
        starts[b + 1] += starts[b];
    }
    let mut pos = starts.clone();
    out.clear();
    out.resize(buf.len(), K::default());
    for &k in buf {
        let b = k.bucket(base, shift);
        out[pos[b]] = k;
        pos[b] += 1;
    }
    starts
}

/// Sort keys that are already grouped by bucket: each bucket is sorted on its own, small
/// enough to stay in cache, which is several times faster than one big radix sort.
pub fn sort_buckets<K: Key>(keys: &mut [K], starts: &[usize]) {
    for w in starts.windows(2) {
        if w[1] - w[0] > 1 {
            radsort::sort(&mut keys[w[0]..w[1]]);
        }
    }
}

impl<K: Key> Drop for Spill<K> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
