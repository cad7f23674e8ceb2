//! Which pages of the neighbor file on-demand sampling touches most, computed before the first
//! request, to fill a [`PageCache`] with them and keep them.
//!
//! The model: requests sample the neighborhood of one seed drawn uniformly from the nodes that
//! have neighbors, with the server's default fanouts. Let `r_0(v)` be the chance that `v` is
//! the seed; a node `v` expanded at hop `h` draws `min(f_h, deg v)` of its `deg v` entries, so
//! each entry `u` of its list is reached with `r_h(v) * min(f_h, deg v) / deg v`, and
//! `r_{h+1}(u)` sums that over every list `u` is in (one sequential pass over the neighbor file
//! per hop but the last). A page of `v`'s list holding `q` of its entries is touched by an
//! expansion of `v` with chance `1 - (1 - q / deg v)^min(f_h, deg v)` (1 for a list within one
//! page). A page's score is the expected number of touches per request, summed over hops and the
//! lists it holds; the cache keeps the highest-scoring pages, read in one more sequential pass.
//!
//! On R-MAT 23 (fanouts 20,15,10) this choice catches 54% of the page touches of real requests
//! with a quarter of the file and 75% with half of it, where CLOCK, learning from the traffic,
//! catches 37% and 65% (a simulation on 20,000 requests, `docs/SERVING.md`), and as many as the
//! pages most touched by the first 10,000 requests of the trace. Memory while computing:
//! `8 * V + 8 * pages` bytes and 16 MiB of buffers ([`work_bytes`]), taken from the cache's share before any page is cached; when that
//! does not fit, the cache starts empty and learns by CLOCK instead.

use std::path::Path;

use ringgnn_io::{AlignedBuf, DirectFile, PageCache, ALIGN};

use crate::offset_index::OffsetIndex;
use crate::{Error, Fanout, Result};

/// Bytes read per step of a pass over the neighbor file.
const CHUNK: usize = 8 << 20;

/// Bytes [`preload`] needs for its arrays on a graph like `index`: two rates per node, a score
/// and a page number per page, and its read buffers.
pub fn work_bytes(index: &OffsetIndex) -> u64 {
    let pages = index.neighbor_file_bytes().div_ceil(ALIGN as u64);
    8 * index.num_nodes() + 8 * pages + 2 * CHUNK as u64
}

/// Fill `cache` with the pages of `index`'s neighbor file that requests with `fanouts` are
/// expected to touch most (see the module docs), and keep them. Returns the pages cached.
pub fn preload(
    index: &OffsetIndex,
    fanouts: &[Fanout],
    cache: &PageCache,
    direct: bool,
) -> Result<u64> {
    let score = page_scores(index, fanouts, direct)?;
    let mut order: Vec<u32> = (0..score.len() as u32)
        .filter(|&p| score[p as usize] > 0.0)
        .collect();
    order.sort_unstable_by(|&a, &b| score[b as usize].total_cmp(&score[a as usize]));
    let mut order: Vec<u64> = cache.fitting(order.into_iter().map(u64::from));
    drop(score);
    order.sort_unstable();
    let mut next = 0;
    let mut cached = 0;
    for_each_chunk(index, direct, |start, bytes| {
        let first = start / ALIGN as u64;
        let end = first + bytes.len().div_ceil(ALIGN) as u64;
        while next < order.len() && order[next] < end {
            let p = order[next];
            let at = ((p - first) as usize) * ALIGN;
            cache.insert(p, &bytes[at..(at + ALIGN).min(bytes.len())]);
            cached += 1;
            next += 1;
        }
    })?;
    cache.keep();
    Ok(cached)
}

/// Expected touches per request of every page of the neighbor file.
pub fn page_scores(index: &OffsetIndex, fanouts: &[Fanout], direct: bool) -> Result<Vec<f32>> {
    let indptr = index.indptr();
    let n = index.num_nodes() as usize;
    let width = index.dtype().size();
    let per_page = ALIGN as u64 / width;
    let pages = index.neighbor_file_bytes().div_ceil(ALIGN as u64) as usize;
    let deg = |v: usize| indptr.degree(v);
    let with_neighbors = (0..n).filter(|&v| deg(v) > 0).count();
    let mut score = vec![0f32; pages];
    if with_neighbors == 0 {
        return Ok(score);
    }
    let mut rate: Vec<f32> = (0..n)
        .map(|v| {
            if deg(v) > 0 {
                1.0 / with_neighbors as f32
            } else {
                0.0
            }
        })
        .collect();
    for (h, f) in fanouts.iter().enumerate() {
        let draws = |d: u64| match f {
            Fanout::All => d,
            Fanout::Count(k) => (*k).min(d),
        };
        // Touches of this hop's expansions.
        for (v, &r) in rate.iter().enumerate() {
            let d = deg(v);
            if d == 0 || r == 0.0 {
                continue;
            }
            let (s, e) = indptr.range(v);
            let (p0, p1) = (s / per_page, (e - 1) / per_page);
            if p0 == p1 {
                score[p0 as usize] += r;
                continue;
            }
            let k = draws(d) as f32;
            for p in p0..=p1 {
                let q = (e.min((p + 1) * per_page) - s.max(p * per_page)) as f32 / d as f32;
                score[p as usize] += r * (1.0 - (1.0 - q).powf(k));
            }
        }
        if h + 1 == fanouts.len() {
            break;
        }
        // Who the next hop expands: one pass over the file.
        let mut next = vec![0f32; n];
        let mut v = 0usize;
        for_each_chunk(index, direct, |start, bytes| {
            let first = start / width;
            let count = ((bytes.len() as u64) / width).min(index.num_edges().saturating_sub(first));
            for i in 0..count {
                let pos = first + i;
                while indptr.get(v + 1) <= pos {
                    v += 1;
                }
                let d = deg(v);
                let share = rate[v] * draws(d) as f32 / d as f32;
                let at = (i * width) as usize;
                let u = match width {
                    4 => u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as u64,
                    _ => u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()),
                };
                if let Some(x) = next.get_mut(u as usize) {
                    *x += share;
                }
            }
        })?;
        rate = next;
    }
    Ok(score)
}

/// Call `visit(offset, bytes)` over the neighbor file's entries, in order, in chunks of
/// [`CHUNK`] bytes (whole pages, the last one possibly short).
fn for_each_chunk(
    index: &OffsetIndex,
    direct: bool,
    mut visit: impl FnMut(u64, &[u8]),
) -> Result<()> {
    let path: &Path = index.indices_path();
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    // O_DIRECT where asked (and allowed): the pass leaves nothing in the page cache.
    let file = DirectFile::open_read(path, direct).map_err(io)?;
    let total = index.neighbor_file_bytes();
    let mut bounce = AlignedBuf::new(if file.is_direct() { CHUNK } else { ALIGN });
    let mut chunk = vec![0u8; CHUNK];
    let mut at = 0u64;
    while at < total {
        let len = (total - at).min(CHUNK as u64) as usize;
        file.read_exact_at(&mut chunk[..len], at, &mut bounce)
            .map_err(io)?;
        visit(at, &chunk[..len]);
        at += len as u64;
    }
    Ok(())
}
