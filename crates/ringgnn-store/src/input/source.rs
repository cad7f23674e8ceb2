//! What every edge-list reader is and shares: the [`EdgeSource`] stream the builder pulls edges
//! from, and the helpers the readers ([`super::binary`], [`super::text`], [`super::npy_edges`])
//! have in common. Kept apart from `input`'s choice of a reader for a file, so the readers
//! depend on this module and `input` on them, never back.

use std::io::{self, Read};
use std::path::Path;

use crate::Result;

/// A stream of directed edges `(src, dst)`.
pub trait EdgeSource: Send {
    /// Append up to `max` edges to `out`; returns how many were appended, 0 once exhausted.
    fn fill(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<usize>;
    /// [`EdgeSource::fill`], also appending one time per edge appended to `times` when the
    /// edges have times ([`EdgeSource::timed`]; see [`crate::times::Timed`]). By default: no
    /// times.
    fn fill_timed(
        &mut self,
        out: &mut Vec<(u64, u64)>,
        _times: &mut Vec<i64>,
        max: usize,
    ) -> Result<usize> {
        self.fill(out, max)
    }
    /// Whether [`EdgeSource::fill_timed`] yields a time per edge.
    fn timed(&self) -> bool {
        false
    }
    /// Work done so far and the total, in the unit of [`EdgeSource::unit`], for progress bars.
    fn position(&self) -> (u64, Option<u64>);
    /// "B" (input bytes) or "edges".
    fn unit(&self) -> &'static str;
    /// True when every id this source can yield is below 2^32 (enables the compact build path).
    fn ids_fit_u32(&self) -> bool;
    /// Start again from the first edge. Returns false when the source cannot (then the builder
    /// plans for 64-bit ids from the start instead of restarting when one shows up). File
    /// sources should implement it (reopen/seek to the start).
    fn rewind(&mut self) -> Result<bool> {
        Ok(false)
    }
}

/// Read until `buf` is full or the reader is at its end; returns the bytes read (the one copy:
/// `verify` reads its files with it too).
pub(crate) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Check the edges appended to `out` since `start` against `--num-nodes` (`limit`). On a
/// violation they are dropped and the error names the edge, `done` being the index of the
/// input's edge at `out[start]` (0-based).
pub(super) fn check_limit(
    out: &mut Vec<(u64, u64)>,
    start: usize,
    limit: Option<u64>,
    path: &Path,
    done: u64,
) -> Result<()> {
    let Some(limit) = limit else { return Ok(()) };
    let edges = &out[start..];
    // A max over the batch vectorises; the search only runs on the (fatal) bad batch.
    if edges.iter().fold(0u64, |m, &(s, d)| m.max(s).max(d)) < limit {
        return Ok(());
    }
    let Some((i, id)) = edges
        .iter()
        .enumerate()
        .find_map(|(i, &(s, d))| [s, d].into_iter().find(|&v| v >= limit).map(|v| (i, v)))
    else {
        return Ok(()); // empty batch
    };
    out.truncate(start);
    crate::input_err!(
        "{}: edge {} (0-based) has node id {id}, which is >= --num-nodes {limit}; raise --num-nodes or leave it out (the default is the largest id + 1)",
        path.display(),
        done + i as u64
    )
}
