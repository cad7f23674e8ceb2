//! One hop of a [`HeteroSampler`] hyperbatch, relation by relation ([`HeteroSampler::hop`]):
//! every batch's count of positions (at seed times, its lists searched first), then its draws,
//! both split by batch over the sampler's threads (each batch on its own random stream, into its
//! own part of the relation's [`Drawn`]), then one fetch of them all: from disk with 32-bit
//! positions split by file chunk over the threads, each with its own reader
//! ([`NarrowFetch::run`]), else on the calling thread. Each
//! batch's relabelling follows, relation by relation (`relabel.rs`).

use std::ops::Range;

use super::temporal::{cut_batch_in_memory, node_of};
use super::{corrupt_entry, BatchState, EdgeTimes, HeteroRequest, HeteroSample, HeteroSampler};
use super::{Scratch, TemporalStrategy};
use crate::batch::Word;
use crate::buckets::{Buckets, Chunking};
use crate::draw::{relation_rng, Drawer};
use crate::hyper::par;
use crate::idmap::GroupKeys;
use crate::neighbors::{fetch_copied, first_bad, DiskNeighbors, NeighborSource};
use crate::offset_index::Offsets;
use crate::{Error, Fanout, Result};
use ringgnn_io::ALIGN;
use ringgnn_store::rng::Rng;

impl HeteroSampler {
    /// Relation `r`'s draws at hop `k` for every batch of `outs` and one fetch of them all,
    /// into `drawn[r]` (relabelled by `relabel.rs`), with how many each frontier node drew (its
    /// `col`, made when the batch is relabelled); their count pushed to each
    /// `num_sampled_edges[r]`. `(seed, epoch)` and each request's batch pick the streams.
    /// Temporal batches draw from each range cut to its eligible edges: from disk one batched
    /// search over the relation's times for all of them first ([`Self::cut_to_times`]), in
    /// memory each batch's search where it is counted.
    pub(super) fn hop(
        &mut self,
        r: usize,
        k: usize,
        (seed, epoch): (u64, u64),
        requests: &[HeteroRequest<'_>],
        outs: &mut [HeteroSample],
    ) -> Result<()> {
        let h = outs.len();
        let fanout = self.rels[r].fanouts[k];
        if fanout == Fanout::Count(0) {
            outs.iter_mut().for_each(|o| o.num_sampled_edges[r].push(0));
            return Ok(());
        }
        let dst = self.rels[r].dst;
        let temporal = self.rels[r].times.is_some() && self.states[..h].iter().any(|s| s.groups.on);
        // Each frontier node's count of draws; at seed times over a relation with edge times
        // read from disk, its count of eligible edges first, found by one search over the
        // relation's times for every batch, kept in its entry until its draws replace it.
        let nodes: usize = self.states[..h]
            .iter()
            .map(|st| st.frontier[dst].len())
            .sum();
        let d = &mut self.drawn[r];
        d.counts.clear();
        d.counts.reserve_exact(nodes);
        d.counts.resize(nodes, 0);
        if temporal {
            self.cut_to_times(r, outs)?;
        }
        let HeteroSampler {
            rels,
            num_nodes,
            replace,
            strategy,
            states,
            scratch,
            cuts,
            drawn,
            keys,
            fetch,
            readers,
            ..
        } = self;
        let (rel, d, states) = (&mut rels[r], &mut drawn[r], &states[..h]);
        let how = Hop {
            dst,
            n_dst: num_nodes[dst],
            indptr: &rel.indptr,
            fanout,
            replace: *replace,
            temporal,
            last: temporal && *strategy == TemporalStrategy::Last,
            memory: match &rel.times {
                Some(EdgeTimes::Memory(t)) if temporal => Some(t),
                _ => None,
            },
        };
        // Each batch's count of positions (one batch's ranges held at a time, by its thread):
        // without seed times from the offset index; at seed times from its eligible counts.
        // The ranges a thread holds after the counts are those of the last batch it counted
        // (`ranges_of`), which it draws from without looking its lists up again.
        scratch.iter_mut().for_each(|sc| sc.ranges_of = None);
        let mut totals = vec![0u64; h];
        let mut items = Vec::with_capacity(h);
        let mut rest = &mut d.counts[..];
        for (b, ((st, out), total)) in states.iter().zip(&*outs).zip(&mut totals).enumerate() {
            let (counts, tail) = std::mem::take(&mut rest).split_at_mut(st.frontier[dst].len());
            rest = tail;
            items.push((b, st, out, counts, total));
        }
        par(&mut items, scratch, |sc, (b, st, out, counts, total)| {
            **total = how.count(sc, (*b, st, out), counts)?;
            Ok(())
        })?;
        drop(items);
        let total = usize::try_from(totals.iter().sum::<u64>()).map_err(|_| Error::TooLarge)?;
        let with_edge_ids = outs.first().is_some_and(|o| o.edge.is_some());
        // 32-bit positions and entries where the relation allows them, unless the positions
        // are kept as edge ids.
        d.wide = !d.fits_u32 || with_edge_ids;
        d.pos.clear();
        d.nbr.clear();
        d.narrow.clear();
        d.node_ends.clear();
        match d.wide {
            true => {
                d.pos.reserve_exact(total);
                d.pos.resize(total, 0);
            }
            false => {
                d.narrow.reserve_exact(total);
                d.narrow.resize(total, 0);
            }
        }
        // `cuts[b]` ends batch b's positions.
        cuts.clear();
        let (mut end, mut node) = (0, 0);
        for ((st, out), &n) in states.iter().zip(outs.iter_mut()).zip(&totals) {
            end += n as usize;
            cuts.push(end);
            node += st.frontier[dst].len();
            d.node_ends.push(node);
            out.num_sampled_edges[r].push(n as usize);
        }
        let stream = |b: usize| relation_rng(seed, epoch, requests[b].batch, r, k);
        let draws: Draws = (states, &*outs, &stream);
        match d.wide {
            true => how.draw_batches(scratch, draws, &mut d.counts, &mut d.pos, &totals),
            false => how.draw_batches(scratch, draws, &mut d.counts, &mut d.narrow, &totals),
        }?;
        let n_src = num_nodes[rel.src];
        // From disk, one reader per thread for a narrow fetch, opened once and kept (where
        // the source can open more).
        let more = &mut readers[r];
        while !d.wide && more.len() + 1 < scratch.len() {
            match rel.source.another() {
                Some(s) => more.push(s?),
                None => break,
            }
        }
        let bad = if !d.wide {
            let chunks = (d.per_chunk, d.chunks);
            fetch.run(
                &mut rel.source,
                more,
                scratch,
                &mut d.narrow,
                cuts,
                n_src,
                chunks,
            )?
        } else if with_edge_ids {
            // The positions are kept: they are the edge ids.
            d.nbr.reserve_exact(d.pos.len());
            d.nbr.resize(d.pos.len(), 0);
            rel.source.fetch(&d.pos, &mut d.nbr)?;
            None
        } else {
            rel.source.fetch_in_place(&mut d.pos, n_src, keys)?
        };
        if let Some((p, u)) = bad {
            return Err(corrupt_entry(r, p, u, rel.src, n_src));
        }
        d.ends.clone_from(cuts);
        Ok(())
    }
}

/// What every thread reads while it counts and draws a relation's hop.
struct Hop<'a> {
    dst: usize,
    n_dst: u64,
    indptr: &'a Offsets,
    fanout: Fanout,
    replace: bool,
    /// Whether the relation has edge times and some batch is at seed times.
    temporal: bool,
    /// Whether batches at seed times take their most recent eligible edges.
    last: bool,
    /// The edge times in memory, searched batch by batch.
    memory: Option<&'a [i64]>,
}

/// The batches of a hop as its draws see them: their states and samples, and each batch's
/// random stream.
type Draws<'a, 'b> = (
    &'a [BatchState],
    &'a [HeteroSample],
    &'a (dyn Fn(usize) -> Rng + Sync + 'b),
);

impl Hop<'_> {
    /// Batch `b`'s count of positions at this hop; at seed times in memory its search first,
    /// each frontier node's count of eligible edges into `counts`. The ranges it draws from
    /// (cut at seed times in memory) go into the thread's, for [`Self::draw`] (`ranges_of`);
    /// from disk at seed times, none (the search made the counts).
    fn count(
        &self,
        sc: &mut Scratch,
        (b, st, out): (usize, &BatchState, &HeteroSample),
        counts: &mut [u32],
    ) -> Result<u64> {
        let (indptr, n_dst, fanout, replace) = (self.indptr, self.n_dst, self.fanout, self.replace);
        let frontier = st.ids(out, self.dst).slice(st.frontier[self.dst].clone());
        let on = st.groups.on;
        if self.temporal && on {
            if let Some(t) = self.memory {
                let list = |j: usize| {
                    let (g, v) = GroupKeys::split(frontier.at(j), n_dst);
                    (indptr.range(v as usize), st.groups.times[g as usize])
                };
                let lent = (&mut sc.ranges, &mut sc.limits);
                cut_batch_in_memory(t, frontier.len(), list, lent, counts)?;
                sc.ranges_of = Some(b);
            }
            // [`TemporalStrategy::Last`] draws all of the `min(k, c)` most recent.
            let draws = replace && !self.last;
            return Ok((counts.iter())
                .map(|&c| Drawer::count(c as u64, fanout, draws))
                .sum());
        }
        // Independent loads of the offset index, whose cache misses overlap.
        let ranges = &mut sc.ranges;
        ranges.clear();
        ranges.reserve_exact(frontier.len());
        ranges.extend(
            frontier
                .iter()
                .map(|v| indptr.range(node_of(v, on, n_dst) as usize)),
        );
        sc.ranges_of = Some(b);
        Ok((ranges.iter())
            .map(|&(lo, hi)| Drawer::count(hi - lo, fanout, replace))
            .sum())
    }

    /// Every batch's draws into its part of `pos` (`totals[b]` positions each) and of
    /// `counts` (one per frontier node), split by batch over the threads of `scratch`.
    fn draw_batches<W: Word + Send>(
        &self,
        scratch: &mut [Scratch],
        (states, outs, stream): Draws<'_, '_>,
        counts: &mut [u32],
        pos: &mut [W],
        totals: &[u64],
    ) -> Result<()> {
        let mut items = Vec::with_capacity(states.len());
        let (mut counts, mut pos) = (counts, pos);
        for (b, (st, out)) in states.iter().zip(outs).enumerate() {
            let n = st.frontier[self.dst].len();
            let (c, rest) = std::mem::take(&mut counts).split_at_mut(n);
            counts = rest;
            let (p, rest) = std::mem::take(&mut pos).split_at_mut(totals[b] as usize);
            pos = rest;
            items.push((b, st, out, c, p));
        }
        par(&mut items, scratch, |sc, (b, st, out, counts, pos)| {
            let kept = sc.ranges_of.take() == Some(*b);
            self.draw(sc, (st, out, kept), &mut stream(*b), counts, pos)
        })
    }

    /// One batch's draws from `rng` into `pos` and `counts` (each frontier node's count of
    /// draws, at seed times its count of eligible edges until then), from the ranges of its
    /// frontier made here (cut at seed times), or those the thread holds (`kept`).
    fn draw<W: Word>(
        &self,
        sc: &mut Scratch,
        (st, out, kept): (&BatchState, &HeteroSample, bool),
        rng: &mut Rng,
        counts: &mut [u32],
        pos: &mut [W],
    ) -> Result<()> {
        let (indptr, n_dst) = (self.indptr, self.n_dst);
        let frontier = st.ids(out, self.dst).slice(st.frontier[self.dst].clone());
        let Scratch {
            drawer,
            tmp,
            ranges,
            ..
        } = sc;
        let on = st.groups.on;
        match self.temporal && on {
            // The ranges counted (cut by the search in memory), still held.
            _ if kept => {}
            true => {
                ranges.clear();
                ranges.reserve_exact(frontier.len());
                let cut = (frontier.iter().zip(&*counts)).map(|(key, &c)| {
                    let (lo, _) = indptr.range(node_of(key, true, n_dst) as usize);
                    (lo, lo + c as u64)
                });
                ranges.extend(cut);
            }
            false => {
                ranges.clear();
                ranges.reserve_exact(frontier.len());
                let full = frontier
                    .iter()
                    .map(|v| indptr.range(node_of(v, on, n_dst) as usize));
                ranges.extend(full);
            }
        }
        let fanout = match self.temporal && on && self.last {
            true => {
                for (lo, hi) in ranges.iter_mut() {
                    *lo = *hi - Drawer::count(*hi - *lo, self.fanout, false);
                }
                Fanout::All
            }
            false => self.fanout,
        };
        draw_into(
            drawer,
            tmp,
            rng,
            ranges,
            (fanout, self.replace),
            pos,
            counts,
        )
    }
}

/// Write into `pos` the positions drawn for each of `ranges` (a frontier's neighbor ranges, in
/// order, from `rng`), exactly filling it, and into `counts` (one entry a range) how many each
/// drew.
fn draw_into<W: Word>(
    drawer: &mut Drawer,
    tmp: &mut Vec<u64>,
    rng: &mut Rng,
    ranges: &[(u64, u64)],
    (fanout, replace): (Fanout, bool),
    pos: &mut [W],
    counts: &mut [u32],
) -> Result<()> {
    // The count made before drawing is the number drawn ([`Drawer::count`]).
    let want = pos.len();
    let miscounted = || {
        Error::Input(format!(
            "a batch drew other than the {want} positions counted for it: a bug in the \
             sampler, please report it"
        ))
    };
    let mut at = 0;
    for (&(lo, hi), count) in ranges.iter().zip(counts) {
        tmp.clear();
        drawer.draw(rng, hi - lo, fanout, replace, tmp);
        let n = tmp.len();
        *count = u32::try_from(n).map_err(|_| Error::TooLarge)?;
        let Some(to) = pos.get_mut(at..at + n) else {
            return Err(miscounted());
        };
        for (p, &o) in to.iter_mut().zip(tmp.iter()) {
            *p = W::of(lo + o);
        }
        at += n;
    }
    match at == pos.len() {
        true => Ok(()),
        false => Err(miscounted()),
    }
}

/// What every batch of a hyperbatch drew from one relation at the current hop: the positions,
/// the entries read there, how many positions each frontier node drew (`counts`, every batch's
/// frontier in turn), and where each batch's end (`ends[b]` for its positions, `node_ends[b]`
/// for its counts).
///
/// Where the relation's file has fewer than 2^32 entries and its source type fewer than 2^32
/// nodes (`fits_u32`, decided once per relation), and edge ids are not asked for, a hop's
/// positions are 32 bits (`narrow`), replaced in place by the entries read; otherwise they are
/// 64 bits (`pos`), with the entries in `nbr` when the positions are kept as edge ids, else in
/// place.
#[derive(Default)]
pub(super) struct Drawn {
    pub(super) pos: Vec<u64>,
    pub(super) nbr: Vec<u64>,
    pub(super) narrow: Vec<u32>,
    pub(super) counts: Vec<u32>,
    pub(super) ends: Vec<usize>,
    pub(super) node_ends: Vec<usize>,
    /// Whether this hop's positions are in `pos` (else in `narrow`).
    pub(super) wide: bool,
    pub(super) fits_u32: bool,
    /// The chunks of the relation's file a narrow fetch groups its positions by.
    pub(super) per_chunk: u64,
    pub(super) chunks: usize,
}

impl Drawn {
    /// For a relation whose file has `entries` entries, of a source type of `n_src` nodes.
    pub(super) fn new(entries: u64, n_src: u64) -> Self {
        let limit = 1u64 << 32;
        let mut d = Drawn {
            fits_u32: entries <= limit && n_src <= limit,
            wide: true,
            ..Drawn::default()
        };
        d.set_chunks(entries, (entries >> 16).next_power_of_two().max(MIN_CHUNK));
        d
    }

    /// Group a narrow fetch's positions by chunks of `per_chunk` of the `entries` entries.
    pub(super) fn set_chunks(&mut self, entries: u64, per_chunk: u64) {
        self.per_chunk = per_chunk.max(1);
        self.chunks = entries.div_ceil(self.per_chunk).max(1) as usize;
    }

    pub(super) fn is_narrow(&self) -> bool {
        !self.wide
    }

    /// Batch `b`'s positions.
    pub(super) fn of_batch(&self, b: usize) -> Range<usize> {
        let start = if b == 0 { 0 } else { self.ends[b - 1] };
        start..self.ends[b]
    }

    /// Batch `b`'s counts (one per node of its frontier).
    pub(super) fn nodes_of_batch(&self, b: usize) -> Range<usize> {
        let start = if b == 0 { 0 } else { self.node_ends[b - 1] };
        start..self.node_ends[b]
    }

    /// The entries read, parallel to the positions (wide).
    pub(super) fn entries(&self) -> &[u64] {
        match self.nbr.is_empty() {
            true => &self.pos,
            false => &self.nbr,
        }
    }

    /// The entries `at` read and their positions (the entry again where it replaced its
    /// position).
    pub(super) fn pairs(&self, at: Range<usize>) -> Pairs<'_> {
        match self.wide {
            true => Pairs::Wide(self.entries()[at.clone()].iter().zip(&self.pos[at])),
            false => Pairs::Narrow(self.narrow[at].iter()),
        }
    }

    pub(super) fn bytes(&self) -> usize {
        8 * (self.pos.capacity()
            + self.nbr.capacity()
            + self.ends.capacity()
            + self.node_ends.capacity())
            + 4 * (self.narrow.capacity() + self.counts.capacity())
    }
}

/// See [`Drawn::pairs`]: `(entry, position)`.
pub(super) enum Pairs<'a> {
    Wide(std::iter::Zip<std::slice::Iter<'a, u64>, std::slice::Iter<'a, u64>>),
    Narrow(std::slice::Iter<'a, u32>),
}

impl Iterator for Pairs<'_> {
    type Item = (u64, u64);

    #[inline]
    fn next(&mut self) -> Option<(u64, u64)> {
        match self {
            Pairs::Wide(it) => it.next().map(|(&u, &p)| (u, p)),
            Pairs::Narrow(it) => it.next().map(|&u| (u as u64, u as u64)),
        }
    }
}

/// The fewest entries of a chunk a narrow fetch groups positions by: whole pages of 4- and
/// 8-byte entries, so that no page is in two chunks.
const MIN_CHUNK: u64 = 1 << 12;

/// Positions a narrow fetch in memory reads in one call of the source: its copies of them are
/// 64 bits.
const FETCH_GROUP: usize = 1 << 15;

/// The workspace of a narrow fetch ([`NarrowFetch::run`]): per batch, its positions' buckets
/// by chunk (about half a byte a position: see [`Buckets`]); in memory, one group's positions
/// and entries as the source reads them (from disk each reader reads the positions where they
/// lie, [`DiskNeighbors::fetch_narrow`]). (The copy of one batch's positions its moves go
/// through is each thread's, [`Scratch::moves`].)
#[derive(Default)]
pub(super) struct NarrowFetch {
    /// Positions a read takes at most (when 0: [`FETCH_GROUP`] in memory, as many as a wave of
    /// the reader's buffer holds from disk).
    pub(super) group: usize,
    buckets: Vec<Buckets>,
    /// In memory: one group's positions and the entries read there.
    bufs: Vec<(Vec<u64>, Vec<u64>)>,
}

/// What one reading thread of a narrow fetch sees of one batch: its bucket starts by chunk,
/// and its sorted positions in the thread's chunks (from `starts[first chunk]`).
type Part<'a> = (&'a [u32], &'a mut [u32]);

/// Read the chunks `range` (of `per_chunk` entries of `width` bytes each) in groups of whole
/// chunks, in file order, through `source`: each group, every batch's positions of `parts` in
/// those chunks in one fetch ([`DiskNeighbors::fetch_narrow`], each page read once), a group
/// spanning at most the pages of one wave of its read buffer (or one chunk) and at most `group`
/// positions (or one chunk's).
fn read_chunks(
    source: &mut DiskNeighbors,
    mut parts: Vec<Part<'_>>,
    range: Range<usize>,
    (per_chunk, width): (u64, u64),
    group: usize,
    below: u64,
) -> Result<Option<(u64, u64)>> {
    let mut bad = None;
    let page = ALIGN as u64;
    let first_page = |c: usize| c as u64 * per_chunk * width / page;
    let end_page = |c: usize| (c as u64 * per_chunk * width).div_ceil(page);
    let wave = source.wave_pages();
    let base: Vec<u32> = parts.iter().map(|p| p.0[range.start]).collect();
    let mut at: Vec<Range<usize>> = Vec::with_capacity(parts.len());
    let mut c = range.start;
    while c < range.end {
        let c0 = c;
        let mut size = 0;
        while c < range.end {
            let here: usize = (parts.iter()).map(|p| (p.0[c + 1] - p.0[c]) as usize).sum();
            let wide = end_page(c + 1) - first_page(c0) > wave;
            if c > c0 && (size + here > group || wide) {
                break;
            }
            size += here;
            c += 1;
        }
        if size == 0 {
            continue;
        }
        at.clear();
        at.extend(
            (parts.iter().zip(&base)).map(|(p, &b)| (p.0[c0] - b) as usize..(p.0[c] - b) as usize),
        );
        let mut vals: Vec<&mut [u32]> = (parts.iter_mut().zip(&at))
            .map(|(p, a)| &mut p.1[a.clone()])
            .collect();
        let pages = first_page(c0)..end_page(c);
        bad = first_bad(bad, source.fetch_narrow(pages, &mut vals, below)?);
    }
    Ok(bad)
}

/// The disk reader behind `s`, if it reads from disk.
fn on_disk(s: &mut NeighborSource) -> Option<&mut DiskNeighbors> {
    match s {
        NeighborSource::Disk(d) => Some(d),
        NeighborSource::Memory(_) => None,
    }
}

impl NarrowFetch {
    /// Replace each position of `vals` (batch `b`'s end at `ends[b]`) by the entry there, with
    /// the first entry (in position order) not below `below` and its position, if any (every
    /// entry is read either way), as [`NeighborSource::fetch_in_place`]. From disk each
    /// batch's positions are bucketed by chunk in place ([`Buckets`], as the homogeneous
    /// hyperbatch does; batches split over the threads of `scratch`), the chunks split into
    /// contiguous ranges of about as many positions, one per reader (`source`, then each of
    /// `more`, each on its own thread), each read in groups of whole chunks in file order (each
    /// group, every batch's positions in those chunks, in one wave of its reader's buffer:
    /// each page is read once, as in one fetch of all of them, and no position is sorted
    /// further than by chunk), then put back in draw order (on the threads again).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run(
        &mut self,
        source: &mut NeighborSource,
        more: &mut [NeighborSource],
        scratch: &mut [Scratch],
        vals: &mut [u32],
        ends: &[usize],
        below: u64,
        (per_chunk, chunks): (u64, usize),
    ) -> Result<Option<(u64, u64)>> {
        let chunking = Chunking::new(per_chunk);
        let group = if self.group == 0 {
            FETCH_GROUP
        } else {
            self.group
        };
        let n = vals.len();
        let Some(disk) = on_disk(source) else {
            // In memory: no order to keep, groups in draw order.
            if self.bufs.is_empty() {
                self.bufs.push(Default::default());
            }
            let mut bad = None;
            let mut first = 0;
            while first < n {
                let end = (first + group).min(n);
                let fetch = |sub: &[u64], out: &mut [u64]| source.fetch(sub, out);
                let parts = &mut [&mut vals[first..end]];
                let b = fetch_copied(&mut self.bufs[0], parts, below, fetch)?;
                bad = first_bad(bad, b);
                first = end;
            }
            return Ok(bad);
        };
        let group = match self.group {
            0 => usize::MAX,
            g => g,
        };
        let width = disk.width();
        let mut sources: Vec<&mut DiskNeighbors> = std::iter::once(disk)
            .chain(more.iter_mut().filter_map(on_disk))
            .collect();
        let readers = sources.len();
        let batches = ends.len();
        if self.buckets.len() < batches {
            self.buckets.resize_with(batches, Buckets::default);
        }
        par(
            &mut per_batch(&mut self.buckets, vals, ends),
            scratch,
            |sc, (bk, batch)| bk.sort(batch, chunking, chunks, &mut sc.moves),
        )?;
        // The chunks split into `readers` contiguous ranges of about as many positions.
        let bounds = {
            let buckets = &self.buckets[..batches];
            let per_chunk = (0..chunks).map(|c| {
                (buckets.iter())
                    .map(|k| (k.starts[c + 1] - k.starts[c]) as u64)
                    .sum::<u64>()
            });
            split_chunks(per_chunk, n as u64, readers, chunks)
        };
        // Per reader, per batch: its part of the batch's (sorted) positions.
        let mut parts: Vec<Vec<Part<'_>>> =
            (0..readers).map(|_| Vec::with_capacity(batches)).collect();
        for (bk, batch) in per_batch(&mut self.buckets, vals, ends) {
            let (starts, mut rest) = (&bk.starts[..], batch);
            for (t, p) in parts.iter_mut().enumerate() {
                let (c0, c1) = (bounds[t], bounds[t + 1]);
                let len = (starts[c1] - starts[c0]) as usize;
                let (part, tail) = std::mem::take(&mut rest).split_at_mut(len);
                rest = tail;
                p.push((starts, part));
            }
        }
        let sizes = (per_chunk, width);
        let bad = if readers == 1 {
            let p = parts.pop().expect("one reader");
            read_chunks(sources[0], p, 0..chunks, sizes, group, below)?
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = (sources.iter_mut().zip(parts))
                    .enumerate()
                    .map(|(t, (src, p))| {
                        let range = bounds[t]..bounds[t + 1];
                        s.spawn(move || read_chunks(src, p, range, sizes, group, below))
                    })
                    .collect();
                let mut first: Result<Option<(u64, u64)>> = Ok(None);
                for h in handles {
                    let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                    first = match (first, r) {
                        (Ok(a), Ok(b)) => Ok(first_bad(a, b)),
                        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
                    };
                }
                first
            })?
        };
        par(
            &mut per_batch(&mut self.buckets, vals, ends),
            scratch,
            |sc, (bk, batch)| {
                bk.unsort(batch, &mut sc.moves);
                Ok(())
            },
        )?;
        Ok(bad)
    }

    pub(super) fn bytes(&self) -> usize {
        let buckets: u64 = self.buckets.iter().map(Buckets::bytes).sum();
        (buckets + self.group_bytes()) as usize
    }

    /// Of [`Self::bytes`], what does not grow with the hyperbatch: in memory, the copies of one
    /// group (at most [`FETCH_GROUP`] positions).
    pub(super) fn group_bytes(&self) -> u64 {
        let each = |(sub, out): &(Vec<u64>, Vec<u64>)| 8 * (sub.capacity() + out.capacity());
        self.bufs.iter().map(each).sum::<usize>() as u64
    }
}

/// Bounds of `readers` contiguous ranges of `chunks` chunks (`bounds[t]..bounds[t + 1]` the
/// `t`-th) holding about `total / readers` of the positions each (`per_chunk`, chunk by chunk),
/// as the homogeneous hyperbatch splits its chunks.
fn split_chunks(
    per_chunk: impl Iterator<Item = u64>,
    total: u64,
    readers: usize,
    chunks: usize,
) -> Vec<usize> {
    let t = readers as u64;
    let mut bounds = vec![chunks; readers + 1];
    bounds[0] = 0;
    let (mut acc, mut next) = (0u64, 1);
    for (c, n) in per_chunk.enumerate() {
        acc += n;
        while next < readers && acc * t >= total * next as u64 {
            bounds[next] = c + 1;
            next += 1;
        }
    }
    bounds
}

/// Each batch's buckets (the first `ends.len()` of `buckets`) with its positions of `vals`
/// (batch `b`'s end at `ends[b]`).
fn per_batch<'a>(
    buckets: &'a mut [Buckets],
    vals: &'a mut [u32],
    ends: &[usize],
) -> Vec<(&'a mut Buckets, &'a mut [u32])> {
    let (mut rest, mut start) = (vals, 0);
    (buckets.iter_mut().zip(ends))
        .map(|(bk, &end)| {
            let (batch, tail) = std::mem::take(&mut rest).split_at_mut(end - start);
            (rest, start) = (tail, end);
            (bk, batch)
        })
        .collect()
}
