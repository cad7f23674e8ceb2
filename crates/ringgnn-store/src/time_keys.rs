//! `edge_time_keys.bin` (docs/FORMAT.md "Times"): a 2-byte *key* per entry of `edge_times.bin`,
//! the entry's time bucket among [`BUCKETS`] buckets whose bounds are quantiles of the file's
//! times. A temporal search ("how many entries of this list have time `<= t`") reads the keys, a
//! file 4x smaller than the times, and only the few entries of `t`'s own bucket need their exact
//! times. The file is derived from `edge_times.bin` ([`derive`]) and optional for readers.
//!
//! Layout: bytes `[0, HEADER_BYTES)` hold the bounds `B[0..BUCKETS)`, int64 little-endian,
//! non-decreasing, `B[0]` the smallest time in the file (0 when there are no entries); entry
//! `i`'s key, u16 little-endian, is at byte `HEADER_BYTES + 2*i`; the file is zero-padded to a
//! whole page. An entry's key is [`key_of`]`(B, its time)`.
//!
//! What a key decides. For a seed time `t`, let `j = key_of(B, t)`:
//! - `Some(j)`: an entry with key `< j` has time `<= t`; an entry with key `> j` has time `> t`;
//!   an entry with key `== j` is undecided (its exact time says). Proof: an entry of key `k` has
//!   `B[k] <= time < B[k+1]` (where `k+1 < BUCKETS`), `t` likewise for `j`; `k < j` gives
//!   `time < B[k+1] <= B[j] <= t`, and `k > j` gives `time >= B[k] >= B[j+1] > t`.
//! - `None` (`t < B[0]`, below every time): no entry has time `<= t`.
//!
//! Keys are non-decreasing along a list sorted by time (`key_of` is monotone), so a list's
//! undecided entries are one contiguous run ([`undecided`]); the count of entries `<= t` is the
//! run's start plus the run's entries with time `<= t`.
//!
//! Bounds are quantiles of a sample ([`bounds_from`]); equal bounds are allowed (a time held by
//! many entries spans several buckets, and `key_of` takes the largest of them, so the run of
//! that time is still one bucket). Correctness never depends on the sample, only how long the
//! undecided runs are.

use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::path::Path;

use crate::manifest::{FileEntry, PAGE};
use crate::progress::{NoProgress, Progress};
use crate::temp::{Kind, Temp};
use crate::writer::BinWriter;
use crate::{Error, IoContext, Result};

/// The file's name in a dataset directory (and in each relation's directory of a typed one).
pub const EDGE_TIME_KEYS_FILE: &str = "edge_time_keys.bin";

/// Number of buckets, so that a key fits in a u16.
pub const BUCKETS: usize = 65536;

/// Bytes of the bounds header (512 KiB, a whole number of pages): entry keys start here.
pub const HEADER_BYTES: u64 = 65536 * 8;

/// How many times the bounds are taken from at most (8 MiB of memory): every k-th entry.
pub const MAX_SAMPLE: u64 = 1 << 20;

/// Bytes read from `edge_times.bin` at a time (and the keys buffered before each write).
const READ_BUF: usize = 4 << 20;

const _: () = assert!(HEADER_BYTES.is_multiple_of(PAGE));

/// Meaningful bytes of the file for `num_edges` entries (before the page padding).
/// (saturating, for the size checks before a build).
pub fn payload_bytes(num_edges: u64) -> u64 {
    HEADER_BYTES.saturating_add(num_edges.saturating_mul(2))
}

/// Byte offset of entry `i`'s key.
#[inline]
pub fn key_offset(i: u64) -> u64 {
    HEADER_BYTES + 2 * i
}

/// The key of time `t`: the largest `j` with `bounds[j] <= t`, or `None` when `t < bounds[0]`
/// (or `bounds` is empty). `bounds` must be non-decreasing and at most [`BUCKETS`] long.
#[inline]
pub fn key_of(bounds: &[i64], t: i64) -> Option<u16> {
    debug_assert!(bounds.len() <= BUCKETS);
    let n = bounds.partition_point(|&b| b <= t);
    n.checked_sub(1).map(|j| j as u16)
}

/// [`key_of`] for many times: the same answers, from a table of where each of [`CELLS`] equal
/// slices of the bounds' time span starts among the bounds, so that a key costs two table reads
/// and a search among the few bounds of one slice instead of a search of all 65,536, whose last
/// steps miss the cache (deriving R-MAT 23's keys: 1.1 s of user CPU against 3.6 s).
pub struct KeyIndex {
    bounds: Vec<i64>,
    /// `cell(t)` is `(t - bounds[0]) >> shift`, at most `CELLS - 1`: monotone in `t`.
    shift: u32,
    /// `first[c]`: how many bounds lie in cells before `c` (`first[CELLS]` = all of them).
    first: Vec<u32>,
}

/// Slices of the time span in a [`KeyIndex`] (256 KiB of table).
pub const CELLS: usize = 1 << 16;

impl KeyIndex {
    /// The index of non-decreasing `bounds` (at most [`BUCKETS`] of them).
    pub fn new(bounds: &[i64]) -> Self {
        debug_assert!(bounds.len() <= BUCKETS && bounds.windows(2).all(|w| w[0] <= w[1]));
        let (lo, hi) = match (bounds.first(), bounds.last()) {
            (Some(&lo), Some(&hi)) => (lo, hi),
            _ => (0, 0),
        };
        let span = hi.wrapping_sub(lo) as u64;
        // The least shift that puts the last bound in the last cell or before.
        let bits = 64 - span.leading_zeros();
        let shift = bits.saturating_sub(CELLS.trailing_zeros());
        let mut idx = KeyIndex {
            bounds: bounds.to_vec(),
            shift,
            first: vec![0; CELLS + 1],
        };
        let mut counts = vec![0u32; CELLS];
        for &b in bounds {
            counts[idx.cell(b)] += 1;
        }
        let mut acc = 0;
        for (c, n) in counts.into_iter().enumerate() {
            idx.first[c] = acc;
            acc += n;
        }
        idx.first[CELLS] = acc;
        idx
    }

    /// The cell of `t >= bounds[0]`.
    #[inline]
    fn cell(&self, t: i64) -> usize {
        let d = t.wrapping_sub(self.bounds[0]) as u64;
        ((d >> self.shift) as usize).min(CELLS - 1)
    }

    /// [`key_of`]`(bounds, t)`. A bound in an earlier cell than `t`'s is `< t` and one in a
    /// later cell `> t` (cells are monotone in time), so only the bounds of `t`'s cell are
    /// searched.
    #[inline]
    pub fn key(&self, t: i64) -> Option<u16> {
        if self.bounds.first().is_none_or(|&b0| t < b0) {
            return None;
        }
        let c = self.cell(t);
        let (a, b) = (self.first[c] as usize, self.first[c + 1] as usize);
        let n = a + self.bounds[a..b].partition_point(|&x| x <= t);
        // n >= 1: bounds[0] <= t, and it lies in cell 0 <= c.
        Some((n - 1) as u16)
    }
}

/// The undecided run of a list's keys (non-decreasing, as along a list sorted by time) for a
/// seed time of key `key` (see the module's docs): entries before it have time `<= t`, entries
/// after it `> t`. Empty at index 0 for `None` (no entry qualifies).
pub fn undecided(keys: &[u16], key: Option<u16>) -> Range<usize> {
    match key {
        None => 0..0,
        Some(j) => {
            let lo = keys.partition_point(|&k| k < j);
            let hi = lo + keys[lo..].partition_point(|&k| k == j);
            lo..hi
        }
    }
}

/// [`BUCKETS`] quantile bounds of a sorted sample: `B[j] = sample[j * len / BUCKETS]`, so
/// `B[0]` is the sample's minimum; duplicates allowed. An empty sample gives all zeros. The
/// caller lowers `B[0]` to the smallest time of the whole file if the sample missed it.
pub fn bounds_from(sorted_sample: &[i64]) -> Vec<i64> {
    debug_assert!(sorted_sample.windows(2).all(|w| w[0] <= w[1]));
    let n = sorted_sample.len();
    if n == 0 {
        return vec![0; BUCKETS];
    }
    (0..BUCKETS)
        .map(|j| sorted_sample[(j as u128 * n as u128 / BUCKETS as u128) as usize])
        .collect()
}

/// Read `times` (an `edge_times.bin` of `num_edges` int64 entries) twice, sequentially: a sample
/// of at most [`MAX_SAMPLE`] times for the bounds, then each entry's key. Writes `out` under a
/// temporary name beside it and renames it when complete, so a failure leaves no `out`.
pub fn derive(times: &Path, num_edges: u64, out: &Path) -> Result<()> {
    derive_entry(times, num_edges, out).map(drop)
}

/// [`derive`], returning the manifest entry of the file written (size, payload, crc32c).
pub fn derive_entry(times: &Path, num_edges: u64, out: &Path) -> Result<FileEntry> {
    derive_with(times, num_edges, out, &NoProgress)
}

/// [`derive_entry`], reporting the two passes to `progress` as the stage "time keys" (a build
/// step; `2 * num_edges` entries in all) and stopping when it is cancelled. Memory: the sample
/// (at most [`MAX_SAMPLE`] times, 8 MiB) and 8 MiB of read buffers in the first pass, 14 MiB of
/// buffers in the second: under 20 MiB.
pub fn derive_with(
    times: &Path,
    num_edges: u64,
    out: &Path,
    progress: &dyn Progress,
) -> Result<FileEntry> {
    progress.stage("time keys", Some(2 * num_edges), "edges");
    let stride = num_edges.div_ceil(MAX_SAMPLE).max(1);
    let mut sample = Vec::with_capacity(num_edges.div_ceil(stride) as usize);
    let mut min = i64::MAX;
    let mut i = 0u64;
    each_time(times, num_edges, |chunk| {
        for &t in chunk {
            min = min.min(t);
            if i.is_multiple_of(stride) {
                sample.push(t);
            }
            i += 1;
        }
        progress.advance(chunk.len() as u64)
    })?;
    sample.sort_unstable();
    let mut bounds = bounds_from(&sample);
    drop(sample);
    if num_edges > 0 {
        bounds[0] = min;
    }

    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = out
        .file_name()
        .map_or_else(|| EDGE_TIME_KEYS_FILE.into(), |n| n.to_string_lossy());
    let temp = Temp::create(parent, &name, Kind::File)?;
    let mut w = BinWriter::create(temp.path().to_path_buf())?.cancelled_by(progress.cancel());
    w.write_i64s(&bounds)?;
    let index = KeyIndex::new(&bounds);
    let mut keys: Vec<u8> = Vec::with_capacity(READ_BUF / 4);
    each_time(times, num_edges, |chunk| {
        keys.clear();
        for &t in chunk {
            // `bounds[0]` is the minimum, so every time has a key.
            let k = index.key(t).unwrap_or(0);
            keys.extend_from_slice(&k.to_le_bytes());
        }
        w.write(&keys)?;
        progress.advance(chunk.len() as u64)
    })?;
    let mut entry = w.finish()?;
    temp.commit(out)?;
    entry.path = name.into_owned();
    Ok(entry)
}

/// Call `f` on consecutive chunks of the first `num_edges` times of `path`; a file shorter than
/// that is an error naming it.
fn each_time(path: &Path, num_edges: u64, mut f: impl FnMut(&[i64]) -> Result<()>) -> Result<()> {
    // Whole buffers straight from the file: reads of 4 MiB need no second buffer.
    let mut r = File::open(path).at(path)?;
    let mut raw = vec![0u8; READ_BUF];
    let mut vals: Vec<i64> = Vec::with_capacity(READ_BUF / 8);
    let mut left = num_edges;
    while left > 0 {
        let n = (left.min((READ_BUF / 8) as u64)) as usize;
        let buf = &mut raw[..n * 8];
        r.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::Corrupt(format!(
                    "{}: shorter than its {num_edges} edge times; run `ringgnn verify` on the dataset and rebuild it",
                    path.display()
                ))
            } else {
                Error::io(path, e)
            }
        })?;
        vals.clear();
        vals.extend(
            buf.chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap())),
        );
        f(&vals)?;
        left -= n as u64;
    }
    Ok(())
}

/// Read and check the bounds of a keys file: at least [`HEADER_BYTES`] long and non-decreasing.
/// Errors name the file and say to run `ringgnn verify`.
pub fn read_bounds(path: &Path) -> Result<Vec<i64>> {
    let mut f = File::open(path).at(path)?;
    let len = f.metadata().at(path)?.len();
    if len < HEADER_BYTES {
        return Err(Error::Corrupt(format!(
            "{}: {len} bytes, shorter than the {HEADER_BYTES}-byte bounds header of a time keys \
             file; run `ringgnn verify` on the dataset and rebuild it",
            path.display()
        )));
    }
    let mut raw = vec![0u8; HEADER_BYTES as usize];
    f.read_exact(&mut raw).at(path)?;
    let bounds: Vec<i64> = raw
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    check_bounds(path, &bounds)?;
    Ok(bounds)
}

/// `Ok` when `bounds` has [`BUCKETS`] non-decreasing entries, else an error naming `path`, the
/// first bound out of order and `ringgnn verify`.
pub fn check_bounds(path: &Path, bounds: &[i64]) -> Result<()> {
    if bounds.len() != BUCKETS {
        return Err(Error::Corrupt(format!(
            "{}: {} time key bounds, expected {BUCKETS}; run `ringgnn verify` on the dataset and rebuild it",
            path.display(),
            bounds.len()
        )));
    }
    if let Some(j) = bounds.windows(2).position(|w| w[0] > w[1]) {
        return Err(Error::Corrupt(format!(
            "{}: time key bound {} ({}) is below bound {j} ({}): bounds must be non-decreasing; \
             run `ringgnn verify` on the dataset and rebuild it",
            path.display(),
            j + 1,
            bounds[j + 1],
            bounds[j]
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
