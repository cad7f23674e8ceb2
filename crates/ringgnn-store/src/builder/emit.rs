//! Writing the CSC files from keys arriving in sorted order: `indices.bin` takes the sources,
//! `edge_times.bin` the times of timed keys, `indptr.bin` is written as destinations advance,
//! and degree statistics are gathered on the way. Nothing here grows with the graph except the degree histogram (one entry per distinct
//! degree value, at most about sqrt(2E)).

use std::collections::BTreeMap;

use super::key::Key;
use crate::link::Holdout;
use crate::manifest::{DegreeStats, FileEntry, IndexDtype, TimeRange};
use crate::writer::BinWriter;
use crate::Result;

const CHUNK: usize = 1 << 16;

pub struct CscEmitter {
    indptr: BinWriter,
    indices: BinWriter,
    wide: bool,
    num_nodes: u64,
    /// Next node whose indptr entry has not been written.
    next: u64,
    /// Edges emitted so far.
    count: u64,
    /// indptr value of the previous node (to get degrees).
    prev: u64,
    ptr_buf: Vec<u64>,
    idx32: Vec<u32>,
    idx64: Vec<u64>,
    degrees: BTreeMap<u64, u64>,
    /// With `--link-split`: which edges leave the training graph (and the split files).
    holdout: Option<Holdout>,
    /// With edge times: their file, a buffer, and their range so far.
    times: Option<BinWriter>,
    time_buf: Vec<i64>,
    time_range: Option<TimeRange>,
}

impl CscEmitter {
    pub fn new(indptr: BinWriter, indices: BinWriter, num_nodes: u64) -> Self {
        CscEmitter {
            indptr,
            indices,
            wide: IndexDtype::for_nodes(num_nodes) == IndexDtype::U64,
            num_nodes,
            next: 0,
            count: 0,
            prev: 0,
            ptr_buf: Vec::with_capacity(CHUNK),
            idx32: Vec::with_capacity(CHUNK),
            idx64: Vec::new(),
            degrees: BTreeMap::new(),
            holdout: None,
            times: None,
            time_buf: Vec::new(),
            time_range: None,
        }
    }

    /// Write the keys' times to `times` (`edge_times.bin`) beside the sources.
    pub fn with_times(mut self, times: Option<BinWriter>) -> Self {
        self.times = times;
        self
    }

    /// Hold out edges as `holdout` decides: they go to its split files, not to the CSC.
    pub fn with_holdout(mut self, holdout: Option<Holdout>) -> Self {
        self.holdout = holdout;
        self
    }

    /// Close every node up to and including `upto - 1`: their indptr entries become final.
    fn advance_to(&mut self, upto: u64) -> Result<()> {
        while self.next < upto {
            if self.next > 0 {
                *self.degrees.entry(self.count - self.prev).or_insert(0) += 1;
            }
            self.prev = self.count;
            self.ptr_buf.push(self.count);
            self.next += 1;
            if self.ptr_buf.len() == CHUNK {
                self.indptr.write_u64s(&self.ptr_buf)?;
                self.ptr_buf.clear();
            }
            // Long runs of empty nodes: skip the per-node loop when nothing changes.
            if self.next < upto && self.ptr_buf.is_empty() && upto - self.next > CHUNK as u64 {
                let run = (upto - self.next) / CHUNK as u64 * CHUNK as u64;
                *self.degrees.entry(0).or_insert(0) += run;
                let block = vec![self.count; CHUNK];
                for _ in 0..run / CHUNK as u64 {
                    self.indptr.write_u64s(&block)?;
                }
                self.next += run;
            }
        }
        Ok(())
    }

    /// Append edge `src -> dst` at `time`; calls must come in key order.
    #[inline]
    fn edge(&mut self, dst: u64, src: u64, time: i64) -> Result<()> {
        debug_assert!(dst >= self.next.saturating_sub(1) && dst < self.num_nodes);
        if let Some(w) = &mut self.times {
            self.time_buf.push(time);
            self.time_range = TimeRange::union(self.time_range, TimeRange::of(&[time]));
            if self.time_buf.len() == CHUNK {
                w.write_i64s(&self.time_buf)?;
                self.time_buf.clear();
            }
        }
        if dst >= self.next {
            self.advance_to(dst + 1)?;
        }
        self.count += 1;
        if self.wide {
            self.idx64.push(src);
            if self.idx64.len() == CHUNK {
                self.indices.write_u64s(&self.idx64)?;
                self.idx64.clear();
            }
        } else {
            self.idx32.push(src as u32);
            if self.idx32.len() == CHUNK {
                self.indices.write_u32s(&self.idx32)?;
                self.idx32.clear();
            }
        }
        Ok(())
    }

    /// Append `n` copies of the edge of `key` (a run of identical keys).
    pub fn edges<K: Key>(&mut self, key: K, n: u64) -> Result<()> {
        let (dst, src) = (key.dst(), key.src());
        if let Some(h) = &mut self.holdout {
            if n > 0 && !h.keep(dst, src, key.time())? {
                return Ok(());
            }
        }
        for _ in 0..n {
            self.edge(dst, src, key.time())?;
        }
        Ok(())
    }

    /// Append edges given as sorted keys: sources go to `indices` in bulk, and `indptr`
    /// advances once per run of equal destinations. With a holdout, the keys it keeps, a chunk
    /// at a time (a filtered copy of a whole sort group would double the build's memory).
    pub fn sorted<K: Key>(&mut self, keys: &[K]) -> Result<()> {
        let Some(mut h) = self.holdout.take() else {
            return self.sorted_kept(keys);
        };
        let mut kept = Vec::with_capacity(CHUNK.min(keys.len()));
        let r = (|| {
            for chunk in keys.chunks(CHUNK) {
                kept.clear();
                for &k in chunk {
                    if h.keep(k.dst(), k.src(), k.time())? {
                        kept.push(k);
                    }
                }
                self.sorted_kept(&kept)?;
            }
            Ok(())
        })();
        self.holdout = Some(h);
        r
    }

    fn sorted_kept<K: Key>(&mut self, keys: &[K]) -> Result<()> {
        self.flush_indices()?;
        let mut i = 0;
        while i < keys.len() {
            let dst = keys[i].dst();
            debug_assert!(dst < self.num_nodes);
            let mut j = i + 1;
            while j < keys.len() && keys[j].dst() == dst {
                j += 1;
            }
            if dst >= self.next {
                self.advance_to(dst + 1)?;
            }
            self.count += (j - i) as u64;
            i = j;
        }
        for chunk in keys.chunks(CHUNK) {
            if self.wide {
                self.idx64.clear();
                self.idx64.extend(chunk.iter().map(|k| k.src()));
                self.indices.write_u64s(&self.idx64)?;
            } else {
                self.idx32.clear();
                self.idx32.extend(chunk.iter().map(|k| k.src() as u32));
                self.indices.write_u32s(&self.idx32)?;
            }
        }
        self.idx32.clear();
        self.idx64.clear();
        if let Some(w) = &mut self.times {
            for chunk in keys.chunks(CHUNK) {
                self.time_buf.clear();
                self.time_buf.extend(chunk.iter().map(|k| k.time()));
                self.time_range = TimeRange::union(self.time_range, TimeRange::of(&self.time_buf));
                w.write_i64s(&self.time_buf)?;
            }
            self.time_buf.clear();
        }
        Ok(())
    }

    /// Write out sources (and times) buffered by [`CscEmitter::edge`].
    fn flush_indices(&mut self) -> Result<()> {
        self.indices.write_u32s(&self.idx32)?;
        self.indices.write_u64s(&self.idx64)?;
        self.idx32.clear();
        self.idx64.clear();
        if let Some(w) = &mut self.times {
            w.write_i64s(&self.time_buf)?;
            self.time_buf.clear();
        }
        Ok(())
    }

    /// Write the remaining indptr entries (through `indptr[V] = E`) and close both files.
    pub fn finish(mut self) -> Result<Emitted> {
        self.advance_to(self.num_nodes + 1)?;
        self.indptr.write_u64s(&self.ptr_buf)?;
        self.flush_indices()?;
        let degree = degree_stats(&self.degrees, self.num_nodes, self.count);
        Ok(Emitted {
            indptr: self.indptr.finish()?,
            indices: self.indices.finish()?,
            num_edges: self.count,
            degree,
            holdout: self.holdout,
            edge_times: match self.times {
                Some(w) => Some((w.finish()?, self.time_range)),
                None => None,
            },
        })
    }
}

/// What [`CscEmitter::finish`] leaves: the two CSC files, the edge count and degrees of the
/// training graph, and the holdout whose split files are still to be closed.
pub struct Emitted {
    pub indptr: FileEntry,
    pub indices: FileEntry,
    pub num_edges: u64,
    pub degree: DegreeStats,
    pub holdout: Option<Holdout>,
    /// With edge times: their file and range (None when no edge was emitted).
    pub edge_times: Option<(FileEntry, Option<TimeRange>)>,
}

/// Statistics from a histogram degree -> number of nodes.
pub fn degree_stats(hist: &BTreeMap<u64, u64>, num_nodes: u64, num_edges: u64) -> DegreeStats {
    if num_nodes == 0 {
        return DegreeStats::default();
    }
    let min = hist.keys().next().copied().unwrap_or(0);
    let max = hist.keys().next_back().copied().unwrap_or(0);
    let target = (num_nodes - 1) / 2;
    let mut seen = 0;
    let mut median = 0;
    for (&d, &c) in hist {
        if seen + c > target {
            median = d;
            break;
        }
        seen += c;
    }
    DegreeStats {
        min,
        max,
        mean: num_edges as f64 / num_nodes as f64,
        median,
        zero: hist.get(&0).copied().unwrap_or(0),
    }
}
