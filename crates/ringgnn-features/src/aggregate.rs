//! The neighbor aggregation of layer-wise inference (issue 24): for one destination block
//! `a..b` (or a window `lo..hi` of its in-edges), its in-neighbors' rows folded into the caller's
//! f32 accumulators `[b - a, width]`: summed, GCN-weighted, maxed or attended (the kernels are
//! [`crate::fold`]), optionally after a transform of each piece of rows (a layer's weight).
//!
//! The block's in-neighbor lists are one sequential read of the neighbor file (CSC, so they come
//! grouped by destination). Their distinct sources, found with a bitmap over the sources' id
//! range (no sort of the edges), are read in ascending order in **pieces** of `piece_rows` rows
//! with the row source's coalesced page reads (io_uring or pread, `O_DIRECT` when the source was
//! opened so), so a block reads each page of the input matrix at most once, in file order; a
//! second thread reads piece `i + 1` while piece `i` is transformed and folded in. The first
//! piece's reads start as soon as the distinct sources are known: meanwhile each edge is turned
//! into the position of its source among them (a look-up in the bitmap's running counts) and,
//! when there are several pieces, each destination's positions are sorted, so that a cursor per
//! destination walks them piece by piece: folding a piece in touches only its own edges. The
//! folding runs on `threads` threads over ranges of destinations of about equal edge counts, each
//! thread owning its accumulator rows (no atomics, no locks). Each thread folds its edges of a
//! piece in batches across its destinations, prefetching the rows of the edge [`PREFETCH`] ahead
//! (on a large block every source row and accumulator row is a cache miss).
//!
//! Peak memory: one id an edge (the sources, read straight into it through a reused buffer of
//! [`READ_CHUNK`] entries, then turned into positions in place), 20 bytes a destination (its
//! edges' bounds, cursor and next position), 16 bytes per 64 node ids of the sources' range (the
//! bitmap: at most a quarter of a byte a node of the graph), two pieces of rows with their ids
//! and a transformed piece. The distinct sources are the bitmap's bits, taken a piece at a time
//! as the pieces are read, never copied out whole. The caller's plan counts them
//! (`python/ringgnn/inference/run.py`, [`edge_bytes`]). An id is 4 bytes where the graph's node ids
//! fit in 32 bits, else 8: the edges of a block are most of its memory on a large graph, so each
//! byte less an edge means larger blocks, so fewer sweeps of its input.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

pub use crate::fold::{Attention, Fold};
use crate::rows::{decode_row, FeatureFile, ReadCount, RowSource};
use crate::{Error, Result};
use ringgnn_io::{advise_huge_pages, collect_huge};

/// What is done to each piece's rows before they are folded in (a layer's weight, in the
/// caller's dense library): `apply(rows, n)` takes `n` rows of the source's width and returns
/// `n` rows of `width` values.
pub struct Transform<'f> {
    pub width: usize,
    pub apply: &'f mut dyn FnMut(Vec<f32>, usize) -> Result<Vec<f32>>,
}

/// The in-neighbor lists: the neighbor file (`docs/FORMAT.md`: the CSC's source ids) and the
/// width of an id in it.
#[derive(Clone, Copy, Debug)]
pub struct NeighborFile<'a> {
    pub path: &'a Path,
    /// 4 (u32 ids) or 8 (u64 ids).
    pub id_bytes: usize,
}

/// One destination block (or window of it) to aggregate.
#[derive(Clone, Copy, Debug)]
pub struct BlockJob<'a> {
    /// The first destination node (of the rows' graph, but for [`Fold::Sum`] and [`Fold::Max`],
    /// whose destinations may be nodes of another type: a heterogeneous graph's relation).
    pub a: u64,
    /// The offset index of destinations `a..=b`: destination `a + d`'s in-edges are entries
    /// `indptr[d]..indptr[d + 1]` of the neighbor file.
    pub indptr: &'a [u64],
    /// The entries of the neighbor file to fold in (all of the block's, or a window for a hub).
    pub lo: u64,
    pub hi: u64,
    pub fold: Fold<'a>,
    /// Source rows read (and held) at a time; two pieces are in memory with the read-ahead.
    pub piece_rows: usize,
    /// Threads folding rows in (0: all the machine's).
    pub threads: usize,
    /// Edges ahead whose source and accumulator rows are prefetched while an edge is folded in:
    /// [`PREFETCH`], but for benchmarks (`benchmarks/fold_bench.py`); 0 turns it off.
    pub prefetch: usize,
    /// The destinations' node ids, one per row of the accumulator, where they are not
    /// `a..`: a source partition's window reaches scattered destinations
    /// ([`crate::partition`]); GCN's weights and self loops look them up.
    pub dests: Option<&'a [u64]>,
}

impl BlockJob<'_> {
    /// The node id of the block's `d`-th destination.
    #[inline]
    pub fn dest(&self, d: usize) -> u64 {
        self.dests.map_or(self.a + d as u64, |x| x[d])
    }
}

/// The fold's prefetch distance ([`BlockJob::prefetch`]): edges are folded in while the rows of
/// the edge this many ahead are being loaded (measured in `docs/benchmarks.md`, "The fold's
/// software prefetch").
pub const PREFETCH: usize = 8;

/// What one aggregation read.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AggregateStats {
    /// Bytes read from the neighbor file.
    pub neighbor_bytes: u64,
    /// Distinct source rows read.
    pub rows: u64,
    /// Page reads of the row source.
    pub read: ReadCount,
    /// Where the calling thread's time went: reading the neighbor lists and turning them into
    /// the distinct sources (the first piece's reads start after), mapping the edges to
    /// positions among them (overlapped with the first piece's reads), waiting for pieces to be
    /// read, transforming and folding them in.
    pub times: Times,
}

/// Seconds of each phase of an aggregation ([`AggregateStats::times`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Times {
    pub sources: f64,
    pub positions: f64,
    pub read_wait: f64,
    pub transform: f64,
    pub fold: f64,
}

/// The ids of a block's edges as the aggregation holds them: u32 where every node id of the
/// graph and the "dropped" mark fit, else u64.
pub(crate) trait Id: Copy + Ord + Send + Sync + 'static {
    /// A dropped entry (a stored self loop): sorts last, never folded in.
    const NONE: Self;
    fn from_u64(v: u64) -> Self;
    fn get(self) -> u64;
}

impl Id for u32 {
    const NONE: Self = u32::MAX;
    fn from_u64(v: u64) -> Self {
        v as u32
    }
    fn get(self) -> u64 {
        self as u64
    }
}

impl Id for u64 {
    const NONE: Self = u64::MAX;
    fn from_u64(v: u64) -> Self {
        v
    }
    fn get(self) -> u64 {
        self
    }
}

/// Bytes one in-edge of a block takes at the aggregation's peak for a graph of `num_nodes`
/// nodes (its source id, turned into its position in place: one id, whatever the neighbor
/// file's id width); the plan's per-edge cost.
pub fn edge_bytes(num_nodes: u64) -> usize {
    if narrow_ids(num_nodes) {
        4
    } else {
        8
    }
}

fn narrow_ids(num_nodes: u64) -> bool {
    num_nodes < u32::MAX as u64
}

/// Fold the rows of the in-neighbors of `job`'s block, edges `lo..hi`, into `acc`
/// (`(indptr.len() - 1)` rows of [`Fold::acc_width`] values, row `d` for destination `a + d`).
/// Rows come from `source` (the layout `file`), through `transform` when given; ids are checked
/// against `file.num_nodes`.
pub fn aggregate_block(
    file: &FeatureFile,
    source: &mut RowSource,
    neighbors: NeighborFile<'_>,
    job: &BlockJob<'_>,
    transform: Option<Transform<'_>>,
    acc: &mut [f32],
) -> Result<AggregateStats> {
    if narrow_ids(file.num_nodes) {
        aggregate_ids::<u32>(file, source, neighbors, job, transform, acc)
    } else {
        aggregate_ids::<u64>(file, source, neighbors, job, transform, acc)
    }
}

fn aggregate_ids<I: Id>(
    file: &FeatureFile,
    source: &mut RowSource,
    neighbors: NeighborFile<'_>,
    job: &BlockJob<'_>,
    mut transform: Option<Transform<'_>>,
    acc: &mut [f32],
) -> Result<AggregateStats> {
    let dim = file.dim();
    let n_d = job.indptr.len().saturating_sub(1);
    let width = transform.as_ref().map_or(dim, |t| t.width);
    let acc_width = check_job(file, job, acc.len(), n_d, width)?;
    let mut stats = AggregateStats::default();
    if job.hi <= job.lo {
        return Ok(stats);
    }
    let mut clock = Instant::now();
    let mut lap = move || {
        let now = Instant::now();
        let t = now.duration_since(clock).as_secs_f64();
        clock = now;
        t
    };
    let mut pos: Vec<I> = read_ids(neighbors, job.lo, job.hi, file.num_nodes)?;
    stats.neighbor_bytes = (job.hi - job.lo) * neighbors.id_bytes as u64;
    // Each destination's edges within the window: `seg[d]..seg[d + 1]` of `pos`.
    // (This and the other per-destination arrays are read at each destination with an edge in
    // a piece, scattered: on huge pages, as the ids are.)
    let seg: Vec<usize> = collect_huge(
        job.indptr
            .iter()
            .map(|&p| (p.clamp(job.lo, job.hi) - job.lo) as usize),
    );
    if job.fold.drops_self_loops() {
        for d in 0..n_d {
            for id in &mut pos[seg[d]..seg[d + 1]] {
                if id.get() == job.dest(d) {
                    *id = I::NONE; // a stored self loop: sorted last, never folded in
                }
            }
        }
    }
    // The distinct sources are the bitmap's bits: never copied out whole, each piece's ids are
    // taken from it as the piece is read (one id an edge is then the block's only per-edge memory).
    let ranks = Ranks::of(&pos[..]);
    let distinct = ranks.count();
    let threads = thread_count(job.threads);
    let mut cursor: Vec<usize> = collect_huge(seg[..n_d].iter().copied());
    let piece_rows = job.piece_rows.max(1);
    let pieces: Vec<(usize, usize)> = (0..distinct)
        .step_by(piece_rows)
        .map(|p0| (p0, (p0 + piece_rows).min(distinct)))
        .collect();
    stats.rows = distinct as u64;
    stats.times.sources = lap();
    let (dtype, rb) = (file.info.dtype, file.row_bytes());
    debug_assert!(rb > 0);
    let ranks = &ranks;
    thread::scope(|s| -> Result<()> {
        let (full_tx, full_rx) = mpsc::sync_channel::<Result<Piece>>(1);
        let (empty_tx, empty_rx) = mpsc::channel::<(Vec<f32>, Vec<u64>)>();
        for _ in 0..2 {
            let _ = empty_tx.send((Vec::new(), Vec::new()));
        }
        let todo = pieces.clone();
        // The reader starts on the first piece now: its reads overlap the edges' mapping below.
        s.spawn(move || {
            let mut sources = ranks.ids();
            for (p0, p1) in todo {
                let Ok((mut buf, mut ids)) = empty_rx.recv() else {
                    return;
                };
                if buf.capacity() < (p1 - p0) * dim {
                    // A new buffer (a transform kept the last one): its rows are taken at random
                    // by the fold, so on huge pages where the system gives them.
                    buf.reserve_exact((p1 - p0) * dim - buf.len());
                    advise_huge_pages(buf.spare_capacity_mut());
                }
                buf.resize((p1 - p0) * dim, 0.0);
                ids.clear();
                ids.extend(sources.by_ref().take(p1 - p0));
                let read = source.for_each_row(file, &ids, |k, row| {
                    decode_row(dtype, row, &mut buf[k * dim..(k + 1) * dim])
                });
                let failed = read.is_err();
                let piece = read.map(|read| Piece {
                    p0,
                    p1,
                    rows: buf,
                    ids,
                    read,
                });
                if full_tx.send(piece).is_err() || failed {
                    return;
                }
            }
        });
        // Sources -> positions among the distinct ones, then each destination's in position order
        // (in one piece, every edge is folded at once: no order needed).
        let sort = pieces.len() > 1;
        parallel_segments(&seg, threads, &mut pos, |range, part, base| {
            for id in part.iter_mut() {
                if *id != I::NONE {
                    *id = I::from_u64(ranks.rank(*id) as u64);
                }
            }
            if sort {
                for d in range {
                    part[seg[d] - base..seg[d + 1] - base].sort_unstable();
                }
            }
        });
        // Each destination's next position (a hint: see `hint`), so that a piece skips the
        // destinations without edges in it by a sequential scan, never touching their edges.
        let mut next: Vec<u32> = collect_huge((0..n_d).map(|d| {
            if seg[d] == seg[d + 1] {
                DONE
            } else if sort {
                hint(pos[seg[d]])
            } else {
                0 // one piece: every destination is visited once anyway
            }
        }));
        let layout = Layout {
            seg: &seg,
            pos: &pos,
            width,
            acc_width,
            threads,
        };
        stats.times.positions = lap();
        for _ in 0..pieces.len() {
            let got = full_rx.recv();
            stats.times.read_wait += lap();
            let Piece {
                p0,
                p1,
                rows: buf,
                ids,
                read: count,
            } = got.map_err(|_| Error::Input("aggregate: the row reader stopped".into()))??;
            stats.read.pages += count.pages;
            stats.read.requests += count.requests;
            stats.read.batches += count.batches;
            // The rows folded in: the piece's own (its buffers then go back to the reader), or
            // the transform's (the piece's buffer went to it; the reader makes new ones).
            let (rows, reuse) = match transform.as_mut() {
                None => (buf, true),
                Some(t) => {
                    let _ = empty_tx.send((Vec::new(), Vec::new()));
                    let rows = (t.apply)(buf, p1 - p0)?;
                    if rows.len() != (p1 - p0) * width {
                        return Err(Error::Input(format!(
                            "aggregate: the transform gave {} values for {} rows of {width}",
                            rows.len(),
                            p1 - p0
                        )));
                    }
                    stats.times.transform += lap();
                    (rows, false)
                }
            };
            fold_piece(
                job,
                &layout,
                &mut cursor,
                &mut next,
                acc,
                p0,
                p1,
                &rows,
                &ids,
            );
            if reuse {
                let _ = empty_tx.send((rows, ids));
            }
            stats.times.fold += lap();
        }
        Ok(())
    })?;
    Ok(stats)
}

/// A piece of a block's distinct sources as the reader hands it over: positions `p0..p1` among
/// them, their ids and their rows (`width` values each), and what reading them took.
struct Piece {
    p0: usize,
    p1: usize,
    rows: Vec<f32>,
    ids: Vec<u64>,
    read: ReadCount,
}

/// The distinct ids of a list (but [`Id::NONE`], a dropped entry) as a bitmap over their range,
/// with the count of ids before each 64-bit word: an id's position among the distinct ones,
/// ascending, is one look-up and a popcount (no sort of the edges; 16 bytes per 64 ids of the
/// range).
struct Ranks<I> {
    base: u64,
    words: Vec<u64>,
    before: Vec<u64>,
    id: std::marker::PhantomData<I>,
}

impl<I: Id> Ranks<I> {
    fn of(ids: &[I]) -> Self {
        let live = || ids.iter().copied().filter(|&id| id != I::NONE).map(I::get);
        let (Some(min), Some(max)) = (live().min(), live().max()) else {
            return Ranks {
                base: 0,
                words: Vec::new(),
                before: Vec::new(),
                id: std::marker::PhantomData,
            };
        };
        let mut words = vec![0u64; ((max - min) / 64 + 1) as usize];
        for id in live() {
            let i = id - min;
            words[(i / 64) as usize] |= 1 << (i % 64);
        }
        let mut before = Vec::with_capacity(words.len());
        let mut count = 0u64;
        for w in &words {
            before.push(count);
            count += w.count_ones() as u64;
        }
        Ranks {
            base: min,
            words,
            before,
            id: std::marker::PhantomData,
        }
    }

    /// How many distinct ids there are.
    fn count(&self) -> usize {
        self.before
            .last()
            .map_or(0, |b| b + self.words.last().unwrap().count_ones() as u64) as usize
    }

    /// The distinct ids, ascending, taken from the bitmap as they are asked for (the readers
    /// of a block's pieces take them a piece at a time: they are never held all at once).
    fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.words.iter().enumerate().flat_map(move |(i, &w)| {
            let base = self.base + 64 * i as u64;
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros() as u64;
                    w &= w - 1;
                    base + bit
                })
            })
        })
    }

    /// The position of `id` (one of the ids) among the distinct ones.
    fn rank(&self, id: I) -> usize {
        let i = id.get() - self.base;
        let w = (i / 64) as usize;
        (self.before[w] + (self.words[w] & ((1u64 << (i % 64)) - 1)).count_ones() as u64) as usize
    }
}

/// What every piece of a block shares: each destination's edges `seg[d]..seg[d + 1]` of `pos`
/// (positions among the block's distinct sources), the row widths, the threads.
struct Layout<'a, I> {
    seg: &'a [usize],
    pos: &'a [I],
    width: usize,
    acc_width: usize,
    threads: usize,
}

fn check_job(
    file: &FeatureFile,
    job: &BlockJob<'_>,
    acc_len: usize,
    n_d: usize,
    width: usize,
) -> Result<usize> {
    if n_d == 0 {
        return Err(Error::Input(
            "aggregate: the offset index of the block is empty".into(),
        ));
    }
    if width == 0 {
        return Err(Error::Input("aggregate: rows of 0 values".into()));
    }
    let acc_width = job.fold.acc_width(width, n_d, file.num_nodes)?;
    if acc_len != n_d * acc_width {
        return Err(Error::Input(format!(
            "aggregate: the accumulator holds {acc_len} values but {n_d} destinations of {acc_width} need {}",
            n_d * acc_width
        )));
    }
    // Destinations are nodes of the rows' graph where the fold looks them up (GCN's weights) or
    // compares them with sources (self loops); otherwise they may be of another node type (a
    // relation of a heterogeneous graph), only rows of the accumulator.
    if let Some(dests) = job.dests {
        if dests.len() != n_d {
            return Err(Error::Input(format!(
                "aggregate: {} destination ids for {n_d} destinations",
                dests.len()
            )));
        }
        let looked_up = job.fold.drops_self_loops();
        if let Some(&id) = dests.iter().find(|&&v| looked_up && v >= file.num_nodes) {
            return Err(Error::NodeOutOfRange {
                id,
                num_nodes: file.num_nodes,
            });
        }
    } else if job.fold.drops_self_loops() && job.a + n_d as u64 > file.num_nodes {
        return Err(Error::NodeOutOfRange {
            id: job.a + n_d as u64 - 1,
            num_nodes: file.num_nodes,
        });
    }
    if job.indptr.windows(2).any(|w| w[0] > w[1]) {
        return Err(Error::Input(
            "aggregate: the offset index is not ascending".into(),
        ));
    }
    let (first, last) = (job.indptr[0], job.indptr[n_d]);
    if job.lo > job.hi || job.lo < first || job.hi > last {
        return Err(Error::Input(format!(
            "aggregate: edges {}..{} are not within the block's {first}..{last}",
            job.lo, job.hi
        )));
    }
    Ok(acc_width)
}

/// Entries of the neighbor file [`read_ids`] reads at a time through its buffer (4 or 8 MiB).
const READ_CHUNK: usize = 1 << 20;

/// Entries `lo..hi` of the neighbor file as ids `I` (wide enough for the graph's nodes: see
/// [`aggregate_block`]), checked to be below `num_nodes`. They are read straight into the ids
/// (exactly their size) through a buffer of [`READ_CHUNK`] entries, reused: the raw bytes of the
/// whole range are never held beside them, so the read costs one id an edge, whatever the
/// file's id width.
pub(crate) fn read_ids<I: Id>(
    nb: NeighborFile<'_>,
    lo: u64,
    hi: u64,
    num_nodes: u64,
) -> Result<Vec<I>> {
    read_ids_by::<I>(nb, lo, hi, num_nodes, READ_CHUNK)
}

/// [`read_ids`] through a buffer of `chunk` entries.
fn read_ids_by<I: Id>(
    nb: NeighborFile<'_>,
    lo: u64,
    hi: u64,
    num_nodes: u64,
    chunk: usize,
) -> Result<Vec<I>> {
    let io = |source| Error::Io {
        path: nb.path.to_path_buf(),
        source,
    };
    let w = nb.id_bytes;
    if w != 4 && w != 8 {
        return Err(Error::Input(format!(
            "{}: neighbor ids of {w} bytes (4 or 8 expected)",
            nb.path.display(),
        )));
    }
    let n = hi.saturating_sub(lo) as usize;
    let mut out: Vec<I> = Vec::with_capacity(n);
    if n == 0 {
        return Ok(out);
    }
    // The fold reads each destination's next ids at scattered places: huge pages spare a page
    // walk each (asked for before the ids are written, so the pages come huge).
    advise_huge_pages(out.spare_capacity_mut());
    let file = File::open(nb.path).map_err(io)?;
    let mut buf = vec![0u8; chunk.clamp(1, n) * w];
    let mut at = 0usize;
    while at < n {
        let k = (n - at).min(buf.len() / w);
        let bytes = &mut buf[..k * w];
        file.read_exact_at(bytes, (lo + at as u64) * w as u64)
            .map_err(io)?;
        for (i, raw) in bytes.chunks_exact(w).enumerate() {
            let id = if w == 4 {
                u32::from_le_bytes(raw.try_into().unwrap()) as u64
            } else {
                u64::from_le_bytes(raw.try_into().unwrap())
            };
            // An id past the graph is refused before it is narrowed (so never mistaken for another).
            if id >= num_nodes {
                return Err(Error::Input(format!(
                    "{}: entry {} is node {id}, but the graph has {num_nodes} nodes; run `ringgnn verify` on the dataset",
                    nb.path.display(),
                    lo + (at + i) as u64,
                )));
            }
            out.push(I::from_u64(id));
        }
        at += k;
    }
    Ok(out)
}

pub(crate) fn thread_count(asked: usize) -> usize {
    if asked > 0 {
        asked
    } else {
        thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Destination ranges of about equal edge counts, one per thread (at least one destination each).
pub(crate) fn split(seg: &[usize], threads: usize) -> Vec<(usize, usize)> {
    let n_d = seg.len() - 1;
    let total = seg[n_d] - seg[0];
    let t = threads.clamp(1, n_d.max(1));
    let mut out = Vec::with_capacity(t);
    let mut d0 = 0;
    for i in 1..=t {
        let d1 = if i == t {
            n_d
        } else {
            let target = seg[0] + total * i / t;
            seg.partition_point(|&e| e <= target)
                .saturating_sub(1)
                .clamp(d0, n_d)
        };
        if d1 > d0 {
            out.push((d0, d1));
            d0 = d1;
        }
    }
    out
}

/// `f(destinations, their edges' slice of pos, index of that slice's first edge)` on threads.
fn parallel_segments<I: Id, F>(seg: &[usize], threads: usize, pos: &mut [I], f: F)
where
    F: Fn(std::ops::Range<usize>, &mut [I], usize) + Sync,
{
    let ranges = split(seg, threads);
    thread::scope(|s| {
        let mut rest = pos;
        let mut at = seg[0];
        for (d0, d1) in ranges {
            let (part, tail) = rest.split_at_mut(seg[d1] - at);
            rest = tail;
            let f = &f;
            let base = at;
            at = seg[d1];
            s.spawn(move || f(d0..d1, part, base));
        }
    });
}

/// A destination without edges left: `next`'s value for it.
const DONE: u32 = u32::MAX;

/// A destination's next position as `next` holds it: the position, or `u32::MAX - 1` for any
/// position beyond (graphs of 4G sources and more; never above the true one), `DONE` for a
/// dropped edge (they sort last). A piece `p0..p1` skips the destination when `next >= p1`
/// (its next edge comes later, or none does) and otherwise walks its edges.
fn hint<I: Id>(p: I) -> u32 {
    if p == I::NONE {
        DONE
    } else {
        p.get().min(u64::from(u32::MAX - 1)) as u32
    }
}

/// Fold the rows of distinct sources `p0..p1` (`buf`, `width` values each; their node ids
/// `ids`) into the accumulators of the destinations whose next edges come from them.
///
/// Each thread walks its destinations and collects their edges of the piece as tasks (the
/// destination, the source's row in the piece) into a small buffer, folded in when it is full:
/// a destination has few edges in a piece, so the prefetch of the rows `job.prefetch` tasks
/// ahead ([`fold_tasks`]) runs across destinations. A destination's edges stay in their order
/// (the sums and GAT's online softmax are the same to the bit whatever the prefetch).
#[allow(clippy::too_many_arguments)]
fn fold_piece<I: Id>(
    job: &BlockJob<'_>,
    l: &Layout<'_, I>,
    cursor: &mut [usize],
    next: &mut [u32],
    acc: &mut [f32],
    p0: usize,
    p1: usize,
    buf: &[f32],
    ids: &[u64],
) {
    let (seg, pos, aw) = (l.seg, l.pos, l.acc_width);
    let ranges = split(seg, l.threads);
    thread::scope(|s| {
        let (mut acc_rest, mut cur_rest, mut next_rest) = (acc, cursor, next);
        for (d0, d1) in ranges {
            let (acc_part, a_tail) = acc_rest.split_at_mut((d1 - d0) * aw);
            let (cur_part, c_tail) = cur_rest.split_at_mut(d1 - d0);
            let (next_part, n_tail) = next_rest.split_at_mut(d1 - d0);
            acc_rest = a_tail;
            cur_rest = c_tail;
            next_rest = n_tail;
            s.spawn(move || {
                let mut tasks: Vec<Task> = Vec::with_capacity(TASKS);
                let mut run = |tasks: &mut Vec<Task>| {
                    fold_tasks(job, l, acc_part, d0, buf, ids, tasks);
                    tasks.clear();
                };
                // The destinations with edges in this piece, a few at a time: the next edges of
                // the one `ahead` further are prefetched (another cache miss each: they are
                // scattered over `pos`).
                let mut live: Vec<usize> = Vec::with_capacity(LIVE);
                let (n, ahead) = (d1 - d0, job.prefetch);
                let mut i0 = 0;
                while i0 < n {
                    live.clear();
                    while i0 < n && live.len() < LIVE {
                        if (next_part[i0] as usize) < p1 {
                            live.push(i0);
                            if ahead > 0 {
                                // Its cursor and edge bound, read when its edges are walked (a
                                // miss each: one destination in tens has an edge in a piece).
                                prefetch(cur_part[i0..].as_ptr() as usize, 1);
                                prefetch(seg[d0 + i0 + 1..].as_ptr() as usize, 1);
                            }
                        }
                        i0 += 1;
                    }
                    for (m, &i) in live.iter().enumerate() {
                        if ahead > 0 {
                            if let Some(&j) = live.get(m + ahead) {
                                let at = pos.as_ptr() as usize;
                                prefetch(at + cur_part[j] * std::mem::size_of::<I>(), 1);
                            }
                        }
                        let (mut c, end) = (cur_part[i], seg[d0 + i + 1]);
                        // Dropped edges (Id::NONE) sort last, but come anywhere in a single piece.
                        while c < end {
                            let p = pos[c];
                            if p == I::NONE {
                                c += 1;
                                continue;
                            }
                            let p = p.get() as usize;
                            if p >= p1 {
                                break;
                            }
                            tasks.push(Task { i, k: p - p0 });
                            if tasks.len() == TASKS {
                                run(&mut tasks);
                            }
                            c += 1;
                        }
                        cur_part[i] = c;
                        next_part[i] = if c < end { hint(pos[c]) } else { DONE };
                    }
                }
                run(&mut tasks);
            });
        }
    });
}

/// Edges collected before they are folded in (16 bytes each: 8 KiB a thread, in L1).
const TASKS: usize = 512;

/// Destinations with edges in a piece collected before their edges are walked.
const LIVE: usize = 256;

/// One edge of a piece to fold: the destination's index within the thread's range, its
/// source's row within the piece.
#[derive(Clone, Copy)]
struct Task {
    i: usize,
    k: usize,
}

/// Fold `tasks` in, in order, prefetching the source row and the accumulator row of the task
/// `job.prefetch` ahead: both are cache misses on a large block (the piece is megabytes of rows
/// taken in no order; the destinations with an edge in a piece are scattered over the block's
/// accumulators), and a destination has too few edges in a piece for the misses of one
/// destination's edges to overlap.
#[allow(clippy::too_many_arguments)]
fn fold_tasks<I: Id>(
    job: &BlockJob<'_>,
    l: &Layout<'_, I>,
    acc: &mut [f32],
    d0: usize,
    buf: &[f32],
    ids: &[u64],
    tasks: &[Task],
) {
    // One loop per fold, the kernel inlined in it (and the ids looked up only where it uses
    // them: GCN's weights); the folds that ignore `u`, `v` or `d` are given 0.
    let u = |k: usize| ids[k];
    let ahead = job.prefetch;
    let none = |_| 0;
    match job.fold {
        Fold::Sum => each_task(ahead, l, acc, d0, buf, tasks, none, |o, x, _, _| {
            Fold::Sum.edge(o, x, 0, 0, 0)
        }),
        Fold::Max => each_task(ahead, l, acc, d0, buf, tasks, none, |o, x, _, _| {
            Fold::Max.edge(o, x, 0, 0, 0)
        }),
        Fold::Gcn(dinv) => {
            // The destination's weight is another miss (the source's is in the piece's range).
            let side = |d| dinv.as_ptr() as usize + 4 * job.dest(d) as usize;
            each_task(ahead, l, acc, d0, buf, tasks, side, |o, x, k, d| {
                Fold::Gcn(dinv).edge(o, x, u(k), job.dest(d), d)
            })
        }
        Fold::Softmax(att) => {
            // So are the destination's logits.
            let side = |d| att.a_dst.as_ptr() as usize + 4 * d * att.heads;
            each_task(ahead, l, acc, d0, buf, tasks, side, |o, x, _, d| {
                Fold::Softmax(att).edge(o, x, 0, 0, d)
            })
        }
    }
}

/// [`fold_tasks`]' loop for one fold: `edge(acc row, source row, k, d)` for each task in
/// order (`k` its row in the piece, `d` its destination in the block), the rows of the task
/// `ahead` further prefetched, and the line at address `side(d)` of its destination (0: none).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn each_task<I: Id>(
    ahead: usize,
    l: &Layout<'_, I>,
    acc: &mut [f32],
    d0: usize,
    buf: &[f32],
    tasks: &[Task],
    side: impl Fn(usize) -> usize,
    edge: impl Fn(&mut [f32], &[f32], usize, usize),
) {
    let (w, aw) = (l.width, l.acc_width);
    let acc_at = acc.as_ptr() as usize;
    let fetch = |t: &Task| {
        prefetch(buf[t.k * w..].as_ptr() as usize, 4 * w);
        prefetch(acc_at + 4 * t.i * aw, 4 * aw);
        match side(d0 + t.i) {
            0 => {}
            at => prefetch(at, 1),
        }
    };
    if ahead > 0 {
        tasks.iter().take(ahead).for_each(fetch);
    }
    for (n, t) in tasks.iter().enumerate() {
        if ahead > 0 {
            if let Some(t) = tasks.get(n + ahead) {
                fetch(t);
            }
        }
        let (i, k) = (t.i, t.k);
        edge(
            &mut acc[i * aw..(i + 1) * aw],
            &buf[k * w..(k + 1) * w],
            k,
            d0 + i,
        );
    }
}

/// Ask for the cache lines of the `bytes` bytes at address `start` to be loaded (a hint: it
/// reads nothing, so it cannot change a result, nor fault even past the end of memory; nothing
/// where the target has no prefetch instruction). Public for `examples/fold_bound.rs`, which
/// times the fold's bare pattern with it.
#[inline(always)]
#[allow(unsafe_code)]
pub fn prefetch(start: usize, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let end = start + bytes;
        let mut line = start & !63;
        while line < end {
            // SAFETY: a prefetch is a hint: it never faults and neither reads nor writes memory.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ringgnn_store::manifest::{FeatureDtype, FeatureInfo};
    use std::sync::Arc;

    /// Block 1..4 of a 5-node graph (node `i`'s row is `[i, 10 i]`), its in-neighbor lists
    /// `[0, 2, 0]`, `[1, 2, 2, 4]` (a self loop, a duplicate) and `[]`, folded with 4-byte and
    /// 8-byte ids, in one piece and in pieces of one row: the sums by hand, whatever the id width.
    #[test]
    fn both_id_widths_fold_the_same_sums() {
        let dir = tempfile::tempdir().unwrap();
        let ids: [u64; 10] = [3, 4, 0, 2, 0, 1, 2, 2, 4, 1];
        let file = FeatureFile {
            path: dir.path().join("features.bin"),
            info: FeatureInfo::new(2, FeatureDtype::F32),
            num_nodes: 5,
        };
        let rows: Vec<u8> = (0..5)
            .flat_map(|i| [i as f32, 10.0 * i as f32])
            .flat_map(f32::to_le_bytes)
            .collect();
        let indptr = [2u64, 5, 9, 9]; // destinations 1, 2, 3
        let want = [2.0, 20.0, 9.0, 90.0, 0.0, 0.0];
        // GCN with dinv[i] = i + 1 (the fold gets each piece's source ids with its rows): node 1
        // gets 2 * (1 * x0 + 3 * x2 + 1 * x0) = [12, 120]; node 2, its self loops dropped,
        // 3 * (2 * x1 + 5 * x4) = [66, 660]; node 3 none.
        let dinv = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        let want_gcn = [12.0, 120.0, 66.0, 660.0, 0.0, 0.0];
        for file_ids in [4, 8] {
            let nb_path = neighbor_file(dir.path(), &ids, file_ids);
            for pieces in [1, 8] {
                for narrow in [true, false] {
                    for (fold, want) in [(Fold::Sum, &want), (Fold::Gcn(&dinv), &want_gcn)] {
                        let job = BlockJob {
                            a: 1,
                            indptr: &indptr,
                            lo: 2,
                            hi: 9,
                            fold,
                            piece_rows: pieces,
                            threads: 2,
                            prefetch: PREFETCH,
                            dests: None,
                        };
                        let nb = NeighborFile {
                            path: &nb_path,
                            id_bytes: file_ids,
                        };
                        let mut source = RowSource::Memory(Arc::new(rows.clone()));
                        let mut acc = vec![0f32; 6];
                        let stats = if narrow {
                            aggregate_ids::<u32>(&file, &mut source, nb, &job, None, &mut acc)
                        } else {
                            aggregate_ids::<u64>(&file, &mut source, nb, &job, None, &mut acc)
                        }
                        .unwrap();
                        let what = format!(
                            "{fold:?}, pieces of {pieces} rows, narrow ids {narrow}, {file_ids}-byte file"
                        );
                        assert_eq!(&acc, want, "{what}");
                        assert_eq!(stats.rows, 4, "{what}: distinct sources 0, 1, 2, 4");
                    }
                }
            }
        }
        assert_eq!(edge_bytes(5), 4);
        assert_eq!(edge_bytes(u32::MAX as u64 - 1), 4);
        assert_eq!(
            edge_bytes(u32::MAX as u64),
            8,
            "u32::MAX is the dropped mark"
        );
    }

    /// A neighbor file of `ids` at `id_bytes` bytes each.
    fn neighbor_file(dir: &Path, ids: &[u64], id_bytes: usize) -> std::path::PathBuf {
        let path = dir.join(format!("indices{id_bytes}.bin"));
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| id.to_le_bytes()[..id_bytes].to_vec())
            .collect();
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Entries past the graph are refused with the file and the entry's index in the file, also
    /// when they come in a later chunk of the buffer; a file shorter than the entries asked is
    /// an error naming it; an id width other than 4 or 8 is refused.
    #[test]
    fn read_ids_names_the_file_and_the_entry_of_an_id_past_the_graph() {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<u64> = vec![0, 1, 2, 3, 4, 5, 6, 9, 8, 7];
        for w in [4, 8] {
            let path = neighbor_file(dir.path(), &ids, w);
            let nb = NeighborFile {
                path: &path,
                id_bytes: w,
            };
            // Entry 7 (node 9) of a 9-node graph: in the third chunk of 3 read from entry 1.
            for chunk in [1, 3, 4, 100] {
                let err = read_ids_by::<u32>(nb, 1, 10, 9, chunk)
                    .unwrap_err()
                    .to_string();
                assert!(
                    err.contains(&path.display().to_string())
                        && err.contains("entry 7 is node 9, but the graph has 9 nodes"),
                    "{err}"
                );
                let err = read_ids_by::<u64>(nb, 1, 10, 9, chunk)
                    .unwrap_err()
                    .to_string();
                assert!(err.contains("entry 7 is node 9"), "{err}");
                // Before it, the same entries are read whole.
                let got = read_ids_by::<u32>(nb, 2, 7, 9, chunk).unwrap();
                assert_eq!(got, vec![2, 3, 4, 5, 6]);
            }
            // Entries 8..12 of a 10-entry file: short, in a later chunk too.
            for chunk in [2, 100] {
                let err = read_ids_by::<u64>(nb, 8, 12, 100, chunk).unwrap_err();
                assert!(matches!(err, Error::Io { .. }), "{err}");
                assert!(
                    err.to_string().contains(&path.display().to_string()),
                    "{err}"
                );
            }
        }
        let path = neighbor_file(dir.path(), &ids, 4);
        let nb = NeighborFile {
            path: &path,
            id_bytes: 2,
        };
        let err = read_ids::<u32>(nb, 0, 2, 100).unwrap_err().to_string();
        assert!(
            err.contains("neighbor ids of 2 bytes (4 or 8 expected)"),
            "{err}"
        );
        // No entries: nothing read (not even the file opened).
        let missing = dir.path().join("missing.bin");
        let nb = NeighborFile {
            path: &missing,
            id_bytes: 4,
        };
        assert!(read_ids::<u32>(nb, 5, 5, 100).unwrap().is_empty());
    }

    /// A graph of `lists.len()` nodes, node `v`'s in-neighbors `lists[v]`, its rows `rows` of
    /// `width` values: the feature file (in memory), the neighbor file written to `dir`, the
    /// offset index.
    fn graph(
        dir: &Path,
        lists: &[Vec<u32>],
        rows: &[f32],
        width: usize,
    ) -> (FeatureFile, RowSource, std::path::PathBuf, Vec<u64>) {
        let all: Vec<u64> = lists.iter().flatten().map(|&id| id as u64).collect();
        let nb_path = neighbor_file(dir, &all, 4);
        let mut indptr = vec![0u64];
        for l in lists {
            indptr.push(indptr.last().unwrap() + l.len() as u64);
        }
        let file = FeatureFile {
            path: dir.join("features.bin"),
            info: FeatureInfo::new(width as u64, FeatureDtype::F32),
            num_nodes: lists.len() as u64,
        };
        // Rows do not straddle pages: each is placed where the layout puts it.
        let n = lists.len() as u64;
        let mut bytes = vec![0u8; (file.info.row_offset(n) as usize).max(4096)];
        for (i, row) in rows.chunks(width).enumerate() {
            let at = file.info.row_offset(i as u64) as usize;
            let row: Vec<u8> = row.iter().flat_map(|x| x.to_le_bytes()).collect();
            bytes[at..at + row.len()].copy_from_slice(&row);
        }
        (file, RowSource::Memory(Arc::new(bytes)), nb_path, indptr)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Whatever the prefetch distance (0: off), pieces and threads, every destination's
        /// edges are folded in one order: each accumulator equals, to the bit, the kernel applied
        /// to its edges in stored order (one piece) or by source id (several pieces; stored self
        /// loops dropped for GAT), for sums and GAT's online softmax. The graphs have hundreds of
        /// destinations and a hub of up to 1500 edges, so that a thread's destinations and edges
        /// of a piece fill its buffers ([`LIVE`], [`TASKS`]) several times.
        #[test]
        fn the_prefetch_keeps_each_destinations_order(
            degrees in prop::collection::vec(0usize..5, 1..700),
            hub in 0usize..1500,
            seed in 0u64..1000,
            pieces in prop_oneof![Just(1usize), 2usize..40, Just(1 << 20)],
            threads in 1usize..4,
            softmax in any::<bool>(),
        ) {
            let n = degrees.len();
            let mut x = seed * 2654435761 + 1;
            let mut rnd = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut lists: Vec<Vec<u32>> = degrees
                .iter()
                .map(|&k| (0..k).map(|_| (rnd() % n as u64) as u32).collect())
                .collect();
            let h = (rnd() % n as u64) as usize;
            lists[h].extend((0..hub).map(|_| (rnd() % n as u64) as u32));
            lists[h].push(h as u32); // a self loop
            let width = 6; // GAT: 2 heads of 2 channels, then their 2 logits
            let rows: Vec<f32> = (0..n * width).map(|_| (rnd() % 2000) as f32 / 250.0 - 4.0).collect();
            let a_dst: Vec<f32> = (0..n * 2).map(|_| (rnd() % 800) as f32 / 200.0 - 2.0).collect();
            let fold = if softmax {
                Fold::Softmax(Attention { heads: 2, negative_slope: 0.2, a_dst: &a_dst })
            } else {
                Fold::Sum
            };
            let aw = fold.acc_width(width, n, n as u64).unwrap();
            let start = |acc: &mut Vec<f32>| {
                for r in acc.chunks_mut(aw) {
                    r.fill(0.0);
                    if softmax {
                        r[4..6].fill(f32::NEG_INFINITY);
                    }
                }
            };
            let mut want = vec![0f32; n * aw];
            start(&mut want);
            for (v, l) in lists.iter().enumerate() {
                let mut l: Vec<u32> =
                    l.iter().copied().filter(|&u| !(softmax && u as usize == v)).collect();
                if pieces < n {
                    l.sort(); // duplicates: the same row either way
                }
                for u in l {
                    let u = u as usize;
                    fold.edge(&mut want[v * aw..(v + 1) * aw], &rows[u * width..(u + 1) * width], u as u64, v as u64, v);
                }
            }
            let dir = tempfile::tempdir().unwrap();
            let (file, mut source, nb_path, indptr) = graph(dir.path(), &lists, &rows, width);
            for prefetch in [0, 1, PREFETCH, 40] {
                let job = BlockJob {
                    a: 0,
                    indptr: &indptr,
                    lo: 0,
                    hi: *indptr.last().unwrap(),
                    fold,
                    piece_rows: pieces,
                    threads,
                    prefetch,
                    dests: None,
                };
                let nb = NeighborFile { path: &nb_path, id_bytes: 4 };
                let mut acc = vec![0f32; n * aw];
                start(&mut acc);
                aggregate_block(&file, &mut source, nb, &job, None, &mut acc).unwrap();
                let same = acc.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                prop_assert!(same, "prefetch {}: {:?} != {:?}", prefetch, acc, want);
            }
        }
    }

    proptest! {
        /// The bitmap's distinct ids are the sorted, deduplicated ids (dropped entries left out),
        /// and each id's rank is its position among them.
        #[test]
        fn ranks_are_positions_among_the_sorted_distinct_ids(
            ids in prop::collection::vec(prop_oneof![0u64..300, 1_000_000u64..1_000_200, Just(u64::MAX)], 0..200),
        ) {
            let ranks = Ranks::of(&ids);
            let mut want: Vec<u64> = ids.iter().copied().filter(|&i| i != u64::MAX).collect();
            want.sort_unstable();
            want.dedup();
            prop_assert_eq!(ranks.ids().collect::<Vec<_>>(), want.clone());
            prop_assert_eq!(ranks.count(), want.len());
            for &id in ids.iter().filter(|&&i| i != u64::MAX) {
                prop_assert_eq!(ranks.rank(id), want.binary_search(&id).unwrap());
            }
            // The same with 4-byte ids (u32::MAX the dropped mark).
            let narrow: Vec<u32> = ids.iter().map(|&i| if i == u64::MAX { u32::MAX } else { i as u32 }).collect();
            let r32 = Ranks::of(&narrow);
            prop_assert_eq!(r32.ids().collect::<Vec<_>>(), want.clone());
            prop_assert_eq!(r32.count(), want.len());
            for &id in narrow.iter().filter(|&&i| i != u32::MAX) {
                prop_assert_eq!(r32.rank(id), want.binary_search(&(id as u64)).unwrap());
            }
        }

        /// Entries `lo..hi` read through a buffer of any number of entries, from a file of 4-
        /// or 8-byte ids, into 4- or 8-byte ids, are the file's entries, and exactly as many ids
        /// are held as entries (the vector is never grown past them).
        #[test]
        fn read_ids_reads_the_entries_whatever_the_chunks_and_widths(
            ids in prop::collection::vec(0u64..5000, 0..300),
            cut in (0usize..300, 0usize..300),
            chunk in 1usize..40,
            wide_file in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let w = if wide_file { 8 } else { 4 };
            let path = neighbor_file(dir.path(), &ids, w);
            let nb = NeighborFile { path: &path, id_bytes: w };
            let (lo, hi) = (cut.0.min(ids.len()), cut.1.min(ids.len()));
            let (lo, hi) = (lo.min(hi), lo.max(hi));
            let want = &ids[lo..hi];
            let narrow = read_ids_by::<u32>(nb, lo as u64, hi as u64, 5000, chunk).unwrap();
            prop_assert_eq!(narrow.iter().map(|&i| u64::from(i)).collect::<Vec<_>>(), want.to_vec());
            prop_assert_eq!(narrow.capacity(), hi - lo);
            let wide = read_ids_by::<u64>(nb, lo as u64, hi as u64, 5000, chunk).unwrap();
            prop_assert_eq!(&wide[..], want);
            prop_assert_eq!(wide.capacity(), hi - lo);
            // The first entry at or past a smaller graph's node count is the one named.
            let limit = 2500;
            let res = read_ids_by::<u32>(nb, lo as u64, hi as u64, limit, chunk);
            match want.iter().position(|&id| id >= limit) {
                None => prop_assert!(res.is_ok()),
                Some(i) => {
                    let err = res.unwrap_err().to_string();
                    let msg = format!("entry {} is node {}, but", lo + i, want[i]);
                    prop_assert!(err.contains(&msg), "{}", err);
                }
            }
        }

        /// The threads' destination ranges are non-empty, in order, and cover every destination
        /// once, whatever the degrees (hubs, empty lists) and the thread count.
        #[test]
        fn ranges_cover_every_destination_once(degs in prop::collection::vec(0usize..50, 1..60), t in 1usize..9) {
            let mut seg = vec![0usize];
            for d in &degs {
                seg.push(seg.last().unwrap() + d);
            }
            let r = split(&seg, t);
            prop_assert!(!r.is_empty() && r.len() <= t);
            prop_assert_eq!(r[0].0, 0);
            prop_assert_eq!(r.last().unwrap().1, degs.len());
            for w in r.windows(2) {
                prop_assert_eq!(w[0].1, w[1].0);
            }
            prop_assert!(r.iter().all(|&(a, b)| a < b));
        }
    }
}
