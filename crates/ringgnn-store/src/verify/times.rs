//! `verify`'s checks of the time files (FORMAT.md "Times"): `edge_times` ordered by (time,
//! source) within each node's in-edges, with indptr and indices streamed alongside (both
//! already verified), and the range the manifest records; `node_times`' range;
//! `edge_time_keys` against the times it is derived from. Memory stays
//! O(1) in the file sizes, as for every check ([`super::checks`]).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::PathBuf;

use super::checks::{u64s, Check};
use crate::manifest::{IndexDtype, Manifest, TimeRange};
use crate::time_keys::{KeyIndex, BUCKETS, HEADER_BYTES};
use crate::{IoContext, Result};

/// The problem when the times seen do not span the range the manifest records under `key`.
fn range_problem(
    key: &str,
    seen: Option<TimeRange>,
    recorded: Option<TimeRange>,
) -> Option<String> {
    match (seen, recorded) {
        (Some(s), Some(r)) if s != r => Some(format!(
            "the times range from {} to {}, but the manifest records {key}.min {} and {key}.max {}",
            s.min, s.max, r.min, r.max
        )),
        _ => None,
    }
}

/// A file read front to back in the check's own buffer.
struct Stream {
    path: PathBuf,
    reader: BufReader<File>,
}

impl Stream {
    fn open(path: PathBuf, skip: u64) -> Result<Self> {
        let mut reader = BufReader::with_capacity(1 << 20, File::open(&path).at(&path)?);
        std::io::copy(&mut (&mut reader).take(skip), &mut std::io::sink()).at(&path)?;
        Ok(Stream { path, reader })
    }
    fn next(&mut self, width: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.reader.read_exact(&mut b[..width]).at(&self.path)?;
        Ok(u64::from_le_bytes(b))
    }
}

/// edge_times: within each node's in-edges, (time, source) never decreases; the smallest and
/// largest time are the manifest's `edge_times`.
pub(super) struct EdgeTimes {
    recorded: Option<TimeRange>,
    width: usize,
    indptr: Stream,
    indices: Stream,
    /// The segment entry `p` is in: node `node - 1` owns entries `start..end`.
    node: u64,
    start: u64,
    end: u64,
    /// (time, source) of the entry before, within the segment.
    prev: Option<(i64, u64)>,
    seen: Option<TimeRange>,
    /// A split by time: (first held-out split, its time, whether `(i, i)` is a pair of two node
    /// types): no edge but a self loop may be later than that time.
    held_out: Option<(String, i64, bool)>,
}

impl EdgeTimes {
    pub(super) fn new(m: &Manifest, indptr: PathBuf, indices: PathBuf) -> Result<Self> {
        Ok(EdgeTimes {
            recorded: m.edge_times,
            width: match m.graph.indices_dtype {
                IndexDtype::U32 => 4,
                IndexDtype::U64 => 8,
            },
            indptr: Stream::open(indptr, 8)?, // indptr[0], known to be 0
            indices: Stream::open(indices, 0)?,
            node: 0,
            start: 0,
            end: 0,
            prev: None,
            seen: None,
            held_out: None,
        })
    }

    /// Check too that no edge but a self loop is after `time`, the time of edge split `name`
    /// (a split by time: its events left the graph). `bipartite`: `(i, i)` is no self loop.
    pub(super) fn held_out_after(mut self, split: Option<(String, i64)>, bipartite: bool) -> Self {
        self.held_out = split.map(|(n, t)| (n, t, bipartite));
        self
    }
}

impl Check for EdgeTimes {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        for (k, t) in u64s(data).enumerate() {
            let (p, t) = (pos / 8 + k as u64, t as i64);
            while p >= self.end {
                self.node += 1;
                self.start = self.end;
                self.end = self.indptr.next(8)?;
                self.prev = None;
            }
            let src = self.indices.next(self.width)?;
            if let Some((pt, ps)) = self.prev.filter(|&prev| (t, src) < prev) {
                return Ok(Some(format!(
                    "entry {p} is time {t} with source {src}, before entry {}'s time {pt} with source {ps}, but the in-edges of node {} (entries {}..{}) must be ordered by time, then source",
                    p - 1,
                    self.node - 1,
                    self.start,
                    self.end
                )));
            }
            if let Some((name, after, bipartite)) = &self.held_out {
                let dst = self.node - 1;
                if t > *after && (src != dst || *bipartite) {
                    return Ok(Some(format!(
                        "entry {p}, the edge ({src}, {dst}) at time {t}, is after the time {after} of edge split {name}: a held-out edge is still in the graph (it must never be sampled)"
                    )));
                }
            }
            self.prev = Some((t, src));
            self.seen = Some(
                self.seen
                    .map_or(TimeRange { min: t, max: t }, |r| r.with(t)),
            );
        }
        Ok(None)
    }
    fn finish(&mut self) -> Result<Option<String>> {
        Ok(range_problem("edge_times", self.seen, self.recorded))
    }
}

/// node_times: any int64 per node; the smallest and largest are the manifest's `node_times`.
pub(super) struct NodeTimes {
    recorded: Option<TimeRange>,
    seen: Option<TimeRange>,
}

impl NodeTimes {
    pub(super) fn new(m: &Manifest) -> Self {
        NodeTimes {
            recorded: m.node_times,
            seen: None,
        }
    }
}

impl Check for NodeTimes {
    fn feed(&mut self, _pos: u64, data: &[u8]) -> Result<Option<String>> {
        let times: Vec<i64> = u64s(data).map(|t| t as i64).collect();
        self.seen = TimeRange::union(self.seen, TimeRange::of(&times));
        Ok(None)
    }
    fn finish(&mut self) -> Result<Option<String>> {
        Ok(range_problem("node_times", self.seen, self.recorded))
    }
}

/// edge_time_keys: bounds non-decreasing, the first the smallest time, and every entry's key
/// `key_of` its time in `edge_times` (streamed alongside, one pass over both files).
pub(super) struct EdgeTimeKeys {
    times: Stream,
    bounds: Vec<i64>,
    /// Made from the bounds at the first key.
    index: Option<KeyIndex>,
    /// Entries checked so far.
    entry: u64,
    min: Option<i64>,
}

impl EdgeTimeKeys {
    pub(super) fn new(times: PathBuf) -> Result<Self> {
        Ok(EdgeTimeKeys {
            times: Stream::open(times, 0)?,
            bounds: Vec::with_capacity(BUCKETS),
            index: None,
            entry: 0,
            min: None,
        })
    }
}

impl Check for EdgeTimeKeys {
    fn feed(&mut self, pos: u64, mut data: &[u8]) -> Result<Option<String>> {
        if pos < HEADER_BYTES {
            let n = (HEADER_BYTES - pos).min(data.len() as u64) as usize;
            for b in u64s(&data[..n]).map(|b| b as i64) {
                if let Some(&prev) = self.bounds.last().filter(|&&p| b < p) {
                    return Ok(Some(format!(
                        "time key bound {} is {b}, below bound {}'s {prev}: the bounds must be non-decreasing",
                        self.bounds.len(),
                        self.bounds.len() - 1
                    )));
                }
                self.bounds.push(b);
            }
            data = &data[n..];
        }
        if data.is_empty() {
            return Ok(None);
        }
        let index = self
            .index
            .get_or_insert_with(|| KeyIndex::new(&self.bounds));
        for k in data.chunks_exact(2) {
            let k = u16::from_le_bytes([k[0], k[1]]);
            let t = self.times.next(8)? as i64;
            let want = index.key(t);
            if want != Some(k) {
                let bucket = want
                    .map_or(format!("below the first bound {}", self.bounds[0]), |j| {
                        format!("in bucket {j}")
                    });
                return Ok(Some(format!(
                    "entry {} has key {k}, but its time {t} in {} is {bucket}",
                    self.entry,
                    self.times.path.display()
                )));
            }
            self.min = Some(self.min.map_or(t, |m| m.min(t)));
            self.entry += 1;
        }
        Ok(None)
    }
    fn finish(&mut self) -> Result<Option<String>> {
        Ok(match self.min {
            Some(min) if self.bounds[0] != min => Some(format!(
                "time key bound 0 is {}, but the smallest edge time is {min}",
                self.bounds[0]
            )),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests;
