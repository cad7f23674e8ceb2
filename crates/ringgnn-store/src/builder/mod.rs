//! The out-of-core CSC builder behind `convert` and the generators.
//!
//! Two passes, memory bounded by `GraphOptions::memory` whatever the edge count:
//! 1. *Partition.* Edges stream in (a reader thread parses while this thread works), become
//!    sort keys `(dst, src)`, or `(dst, time, src)` when the edges have times (see [`key`]), fill a buffer, and each full buffer is
//!    counting-sorted by destination range and appended to one spill file ([`spill`]). The
//!    largest id need not be known in advance: the range doubles as ids grow.
//! 2. *Sort and emit.* Consecutive buckets are grouped up to the memory budget, loaded with one
//!    sequential read per flush, radix-sorted ([`sort`]) and written out as CSC ([`emit`]). Groups are
//!    handed to `threads` workers that load and sort in parallel and emit in order. A bucket
//!    too large for memory (a hub with more in-edges than the budget holds) is re-partitioned
//!    on finer key ranges, recursively.
//!
//! The output depends only on the edges, never on the budget or the thread count: edges are
//! ordered by (dst, src), or (dst, time, src), so two builds of the same input are
//! byte-identical. Times travel inside the keys, so they take the same budget (16-byte keys
//! instead of 8: half as many per buffer) and need no second sort.

mod emit;
mod key;
mod sort;
mod spill;

use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};

use crate::budget::OVERHEAD;
pub use crate::budget::{check_memory, MIN_MEMORY};
use crate::input::EdgeSource;
use crate::link::{HeldOut, Holdout, LinkPlan};
use crate::manifest::{DegreeStats, IndexDtype, TimeRange};
use crate::options::{GraphOptions, SelfLoops};
use crate::progress::Progress;
use crate::space::Need;
use crate::time_keys::{self, EDGE_TIME_KEYS_FILE};
use crate::times::{Timed, EDGE_TIMES_FILE};
use crate::writer::Staging;
use crate::{Error, IoContext, Result};
pub use emit::degree_stats;
use emit::CscEmitter;
use key::{Key, TimedKey};
use ringgnn_io::AlignedBuf;
use sort::{sort_and_emit, sort_in_memory};
use spill::{Spill, FANOUT, FANOUT_BITS};

pub const INDPTR_FILE: &str = "indptr.bin";
pub const INDICES_FILE: &str = "indices.bin";

/// Disk the sort takes beside the output while building a graph of `edges` keys (after
/// `--undirected` doubles them) among `num_nodes` nodes: none when they fit one sort buffer,
/// else the spill file of every key (8 bytes, 16 where ids need 64 bits or edges have times).
/// An upper bound for the pre-write check ([`crate::space`]).
pub fn spill_bytes(num_nodes: u64, edges: u64, timed: bool) -> u64 {
    if edges <= MAX_BUFFER_KEYS as u64 {
        return 0;
    }
    edges.saturating_mul(if num_nodes <= 1 << 32 && !timed {
        8
    } else {
        16
    })
}

/// Edges per chunk handed from the reader thread to the partitioner.
const CHUNK_EDGES: usize = 1 << 18;

/// Largest sort buffer, in keys, whatever the budget. Bigger buffers do not make the build
/// faster: a buffer reused across flushes is warm, while a huge one costs a page fault per
/// 4 KiB on first touch (measured: 100M edges took 6.4 s with a 4G budget's single 1.6 GB
/// buffer, 4.6 s with 512M's reused ones). It also bounds the in-memory fast path.
const MAX_BUFFER_KEYS: usize = 16 << 20;

/// The message of the "no edges" error; `convert` prefixes it with the input path.
pub const NO_EDGES: &str = "the input has no edges; nothing to build (pass --num-nodes N to build a graph of isolated nodes)";

/// What the graph build produced (files `indptr` and `indices` are registered in the staging).
#[derive(Clone, Debug)]
pub struct GraphSummary {
    pub num_nodes: u64,
    pub num_edges: u64,
    pub indices_dtype: IndexDtype,
    pub degree: DegreeStats,
    /// With a link split: the pairs of each edge split (the CSC holds only `train`'s edges).
    pub held_out: Option<HeldOut>,
    /// With edge times (`edge_times` registered in the staging): their range; None when the
    /// edges had no times or none is left.
    pub edge_times: Option<TimeRange>,
}

/// Build `indptr.bin` and `indices.bin` from `source` within `opts.memory` bytes, and
/// `edge_times.bin` with each list ordered by (time, source) when `opts.times.edges` gives
/// one time per input edge.
pub fn build_graph(
    source: &mut dyn EdgeSource,
    opts: &GraphOptions,
    staging: &mut Staging,
    progress: &dyn Progress,
) -> Result<GraphSummary> {
    build_graph_split(source, opts, None, staging, progress)
}

/// [`build_graph`], holding out the edges of a link split from the CSC and writing every split's
/// pairs.
pub fn build_graph_split(
    source: &mut dyn EdgeSource,
    opts: &GraphOptions,
    link: Option<&LinkPlan>,
    staging: &mut Staging,
    progress: &dyn Progress,
) -> Result<GraphSummary> {
    check_memory(opts.memory)?;
    match link.map(LinkPlan::by_time) {
        Some(false) if opts.times.edges.is_some() => {
            // The holdout meets a pair's copies together only in (dst, src) order.
            return crate::input_err!(
                "--link-split and --edge-time cannot be combined: a graph with edge times is split by time (--link-split-time val=T1,test=T2)"
            );
        }
        Some(true) if opts.times.edges.is_none() => {
            return crate::input_err!(
                "--link-split-time needs edge times: give --edge-time T.npy (one time per input edge)"
            );
        }
        _ => {}
    }
    // The split files' write buffers and any listed pairs come out of the sort space. At the
    // least budget, where the sort space cannot shrink, they come out of the overhead's margin:
    // a split by time holds one sort of 8 MiB for all its splits, a split by fraction 4.5 MiB per
    // split file (measured under --memory 128M on R-MAT 20 with times: 90 MiB of anonymous
    // memory with a split by time, 80 without; docs/benchmarks.md).
    let reserve = link.map_or(0, LinkPlan::memory);
    if let Some(g) = link.and_then(LinkPlan::given) {
        // The listed pairs may take at most half of what the overhead leaves: the sort needs the
        // rest.
        if g.memory() > (opts.memory - OVERHEAD) / 2 {
            return crate::input_err!(
                "--link-split: the listed pairs take {} MiB in memory, more than --memory {} MiB allows them (half of it beyond the builder's own {} MiB); raise --memory to at least {}M",
                g.memory() >> 20,
                opts.memory >> 20,
                OVERHEAD >> 20,
                (OVERHEAD + 2 * g.memory()).div_ceil(1 << 20)
            );
        }
    }
    let sizes = Sizes::for_budget(
        opts.memory - reserve.min(opts.memory - MIN_MEMORY),
        opts.threads,
    );
    match &opts.times.edges {
        Some(times) => {
            let times = crate::times::edge_times(times)?;
            let mut timed = Timed::new(source, times, "the input".into());
            build_with(&mut timed, opts, link, staging, progress, sizes)
        }
        None => build_with(source, opts, link, staging, progress, sizes),
    }
}

/// Buffer sizes in keys, derived from the memory budget (tests set them directly).
#[derive(Clone, Copy, Debug)]
struct Sizes {
    /// Edges per reader chunk.
    chunk: usize,
    /// Pass-1 buffer, in bytes (the buffer and its counting-sort copy each take half).
    pass1_bytes: u64,
    /// Pass-2 group, in bytes per worker (the group and the radix sort's copy take half each).
    group_bytes: u64,
    workers: usize,
}

impl Sizes {
    fn for_budget(memory: u64, threads: usize) -> Self {
        let usable = memory - OVERHEAD;
        let workers = threads.clamp(1, 8);
        Sizes {
            chunk: CHUNK_EDGES,
            pass1_bytes: usable,
            group_bytes: usable / workers as u64,
            workers,
        }
    }
    fn pass1_cap(&self, key_bytes: u64) -> usize {
        ((self.pass1_bytes / (2 * key_bytes)) as usize).clamp(2 * self.chunk, MAX_BUFFER_KEYS)
    }
    fn group_cap(&self, key_bytes: u64) -> usize {
        ((self.group_bytes / (2 * key_bytes)) as usize).clamp(2, MAX_BUFFER_KEYS)
    }
}

fn build_with(
    source: &mut dyn EdgeSource,
    opts: &GraphOptions,
    link: Option<&LinkPlan>,
    staging: &mut Staging,
    progress: &dyn Progress,
    sizes: Sizes,
) -> Result<GraphSummary> {
    let narrow_ok = source.ids_fit_u32() || opts.num_nodes.is_some_and(|n| n <= 1 << 32);
    if source.timed() {
        return build::<TimedKey>(source, opts, link, staging, progress, sizes).map_err(
            |e| match e {
                Error::Input(m) if m == NEEDS_WIDE => Error::Input(
                    "edge times need node ids below 2^32; this graph has larger ones".into(),
                ),
                e => e,
            },
        );
    }
    if narrow_ok {
        return build::<u64>(source, opts, link, staging, progress, sizes);
    }
    // Ids may need 64 bits but almost never do: try compact keys, restart wide if one shows up.
    if source.rewind()? {
        match build::<u64>(source, opts, link, staging, progress, sizes) {
            Err(Error::Input(m)) if m == NEEDS_WIDE => {
                source.rewind()?;
            }
            other => return other,
        }
    }
    build::<u128>(source, opts, link, staging, progress, sizes)
}

const NEEDS_WIDE: &str = "internal: ids need 64-bit keys";

fn build<K: Key>(
    source: &mut dyn EdgeSource,
    opts: &GraphOptions,
    link: Option<&LinkPlan>,
    staging: &mut Staging,
    progress: &dyn Progress,
    sizes: Sizes,
) -> Result<GraphSummary> {
    let key_bytes = std::mem::size_of::<K>() as u64;
    let scratch = staging.scratch()?;

    // Pass 1: partition.
    let Partitioned {
        spill,
        in_memory,
        max_id,
        any,
    } = partition::<K>(
        source,
        opts,
        &scratch,
        sizes.pass1_cap(key_bytes),
        sizes.chunk,
        progress,
    )?;
    let num_nodes = match opts.num_nodes {
        Some(n) => n,
        None if !any => return crate::input_err!("{NO_EDGES}"),
        None => max_id + 1,
    };

    // Pass 2: sort and emit. The counts are known now: refuse before writing what cannot fit.
    let total = in_memory
        .as_ref()
        .map_or_else(|| spill.count(0, FANOUT), |b| b.len() as u64);
    let mut need = Need::new();
    need.graph("the graph", num_nodes, total);
    if K::TIMED {
        need.add("the edge times", total.saturating_mul(8));
        need.add("the edge time keys", time_keys::payload_bytes(total));
    }
    staging.check_room(&need)?;
    let indices_dtype = IndexDtype::for_nodes(num_nodes);
    let emitter = CscEmitter::new(
        staging.writer(INDPTR_FILE)?,
        staging.writer(INDICES_FILE)?,
        num_nodes,
    )
    .with_holdout(
        link.map(|plan| Holdout::new(plan, opts.undirected, num_nodes, staging))
            .transpose()?,
    )
    .with_times(if K::TIMED {
        Some(staging.writer(EDGE_TIMES_FILE)?)
    } else {
        None
    });
    progress.stage("sort", Some(total), "edges");
    let emitter = if let Some(buf) = in_memory {
        sort_in_memory(&spill, buf, emitter, opts.dedup, sizes.workers, progress)?
    } else {
        sort_and_emit(
            &spill,
            emitter,
            opts.dedup,
            sizes.workers,
            sizes.group_cap(key_bytes),
            &scratch,
            progress,
        )?
    };
    drop(spill);
    let out = emitter.finish()?;
    staging.add("indptr", out.indptr);
    staging.add("indices", out.indices);
    let edge_times = match out.edge_times {
        Some((entry, Some(range))) => {
            staging.add("edge_times", entry);
            // The keys beside the times (docs/FORMAT.md "Times"): the sort's buffers are free
            // by now, so the derivation's sample and buffers fit the same budget.
            let keys = time_keys::derive_with(
                &staging.file_path(EDGE_TIMES_FILE),
                out.num_edges,
                &staging.file_path(EDGE_TIME_KEYS_FILE),
                progress,
            )?;
            staging.add("edge_time_keys", keys);
            Some(range)
        }
        Some((_, None)) => {
            // No edge left (all dropped as self-loops): no times either.
            let path = staging.file_path(EDGE_TIMES_FILE);
            std::fs::remove_file(&path).at(&path)?;
            None
        }
        None => None,
    };
    let held_out = out
        .holdout
        .map(|h| h.finish(staging, progress))
        .transpose()?;
    Ok(GraphSummary {
        num_nodes,
        num_edges: out.num_edges,
        indices_dtype,
        degree: out.degree,
        held_out,
        edge_times,
    })
}

/// Pass 1. Returns the spill, the largest id seen and whether any edge was read.
fn partition<K: Key>(
    source: &mut dyn EdgeSource,
    opts: &GraphOptions,
    scratch: &Path,
    cap: usize,
    chunk_edges: usize,
    progress: &dyn Progress,
) -> Result<Partitioned<K>> {
    let (done0, total) = source.position();
    progress.stage("read", total, source.unit());
    let id_limit = if K::NARROW { 1u64 << 32 } else { u64::MAX };
    // Top level buckets by destination: shift past the source bits, then enough destination
    // bits that FANOUT buckets cover every node (or start small and double as ids grow).
    let dst_bits = match opts.num_nodes {
        Some(n) if n > 1 => 64 - (n - 1).leading_zeros(),
        _ => 0,
    };
    let mut spill = Spill::<K>::create(
        &scratch.join(format!("edges.{}.spill", K::BITS)),
        K::default(),
        K::LOW_BITS + dst_bits.saturating_sub(FANOUT_BITS),
    )?;
    let mut buf: Vec<K> = Vec::with_capacity(cap);
    let mut sorted = spill::key_buffer::<K>(cap);
    let mut max_id = 0u64;
    let mut max_dst = 0u64;
    let mut any = false;
    let mut last = done0;

    let drop_loops = opts.self_loops == SelfLoops::Drop;
    let result = std::thread::scope(|s| -> Result<()> {
        let (tx, rx) = sync_channel::<Result<(Chunk, u64)>>(2);
        // Empty chunks go back to the reader: reusing them avoids a fresh multi-MB allocation
        // (and the kernel zeroing its pages) per chunk.
        let (back_tx, back_rx) = sync_channel::<Chunk>(4);
        s.spawn(move || loop {
            let (mut chunk, mut times) = back_rx.try_recv().unwrap_or_else(|_| {
                let times = if K::TIMED { chunk_edges } else { 0 };
                (Vec::with_capacity(chunk_edges), Vec::with_capacity(times))
            });
            chunk.clear();
            times.clear();
            let r = source.fill_timed(&mut chunk, &mut times, chunk_edges);
            let pos = source.position().0;
            let end = matches!(r, Ok(0) | Err(_));
            if tx.send(r.map(|_| ((chunk, times), pos))).is_err() || end {
                return;
            }
        });
        let rx: Receiver<_> = rx;
        for msg in rx {
            let ((chunk, times), pos) = msg?;
            if chunk.is_empty() {
                break;
            }
            debug_assert!(!K::TIMED || times.len() == chunk.len());
            any = true;
            if buf.len() + 2 * chunk.len() > cap {
                flush(&mut spill, &mut buf, &mut sorted, max_dst)?;
            }
            for (i, &(src, dst)) in chunk.iter().enumerate() {
                let time = if K::TIMED { times[i] } else { 0 };
                let hi = src.max(dst);
                if hi >= id_limit {
                    if hi == u64::MAX {
                        // Largest id + 1 must be representable as the node count.
                        return crate::input_err!(
                            "edge ({src}, {dst}) uses node id {hi} (2^64-1); node ids must be below 2^64-1"
                        );
                    }
                    return crate::input_err!("{NEEDS_WIDE}");
                }
                if let Some(n) = opts.num_nodes {
                    if hi >= n {
                        return crate::input_err!(
                            "edge ({src}, {dst}) has node id {hi}, which is >= --num-nodes {n}; raise --num-nodes or drop the option"
                        );
                    }
                }
                max_id = max_id.max(hi);
                if src == dst {
                    if drop_loops {
                        continue;
                    }
                } else if opts.undirected {
                    buf.push(K::make(src, dst, time));
                    max_dst = max_dst.max(src);
                }
                buf.push(K::make(dst, src, time));
                max_dst = max_dst.max(dst);
            }
            let _ = back_tx.try_send((chunk, times));
            progress.advance(pos.saturating_sub(last))?;
            last = pos;
        }
        Ok(())
    });
    result?;
    while !spill.covers(K::make(max_dst, 0, i64::MIN)) {
        spill.widen();
    }
    if spill.is_empty() {
        // Everything fit in one buffer: sort it in memory, never touching the disk.
        return Ok(Partitioned {
            spill,
            in_memory: Some(buf),
            max_id,
            any,
        });
    }
    flush(&mut spill, &mut buf, &mut sorted, max_dst)?;
    Ok(Partitioned {
        spill,
        in_memory: None,
        max_id,
        any,
    })
}

/// A reader chunk: edges, and their times when the keys hold times.
type Chunk = (Vec<(u64, u64)>, Vec<i64>);

/// What pass 1 leaves: the spill, or the whole graph's keys when they fit in one buffer; the
/// largest id seen and whether any edge was read at all.
struct Partitioned<K: Key> {
    spill: Spill<K>,
    in_memory: Option<Vec<K>>,
    max_id: u64,
    any: bool,
}

fn flush<K: Key>(
    spill: &mut Spill<K>,
    buf: &mut Vec<K>,
    sorted: &mut AlignedBuf,
    max_dst: u64,
) -> Result<()> {
    while !spill.covers(K::make(max_dst, 0, i64::MIN)) {
        spill.widen();
    }
    spill.flush(buf, sorted)?;
    buf.clear();
    Ok(())
}

#[cfg(test)]
mod tests;
