//! One hop of a [`HeteroSampler`] hyperbatch: every relation's draws for all the batches and
//! one fetch of them ([`HeteroSampler::hop`], into [`Drawn`]), then each batch's relabelling
//! of every relation in the sampler's maps, refilled with the batch's nodes
//! ([`HeteroSampler::relabel`]).

use std::ops::Range;

use super::temporal::node_of;
use super::TemporalStrategy;
use super::{corrupt_entry, HeteroRelation, HeteroRequest, HeteroSample, HeteroSampler, Ids};
use crate::batch::{local_id, Word};
use crate::buckets::{Buckets, Chunking, Workspace};
use crate::draw::{relation_rng, Drawer};
use crate::idmap::{with_table, IdMap, Lookup};
use crate::neighbors::NeighborSource;
use crate::{Error, Fanout, Result};
use ringgnn_store::rng::Rng;

impl HeteroSampler {
    /// Relabel batch `b`'s draws of hop `k` (every relation's, in index order) into `out`,
    /// with each source type's map refilled with the batch's nodes of that type first.
    pub(super) fn relabel(&mut self, k: usize, b: usize, out: &mut HeteroSample) -> Result<()> {
        let active = |r: &HeteroRelation| r.fanouts[k] != Fanout::Count(0);
        let of = |d: &Drawn| d.ends[b] - if b == 0 { 0 } else { d.ends[b - 1] };
        for (t, map) in self.maps.iter_mut().enumerate() {
            let room: usize = (self.rels.iter().zip(&self.drawn))
                .filter(|(r, _)| r.src == t && active(r))
                .map(|(_, d)| of(d))
                .sum();
            if room > 0 && self.held_by[t] != Some(b) {
                match self.states[b].ids(out, t) {
                    Ids::Narrow(keys) => fill(map, keys, room),
                    Ids::Wide(keys) => fill(map, keys, room),
                }
                self.held_by[t] = Some(b);
            }
        }
        for r in 0..self.rels.len() {
            if !active(&self.rels[r]) {
                continue;
            }
            let d = &self.drawn[r];
            let at = d.of_batch(b);
            let counts = &d.counts[d.nodes_of_batch(b)];
            let (dst, last) = (self.rels[r].dst, k + 1 == self.hops);
            let st = &mut self.states[b];
            // Its `col`: each frontier node's local id once per position it drew, made only
            // for its last hop and where edges may be dropped; before its last hop a batch
            // keeps a count per frontier node ([`BatchState::cols`]).
            if last || st.groups.on {
                let col = &mut out.col[r];
                col.reserve_exact(at.len());
                for (l, &c) in st.frontier[dst].clone().zip(counts) {
                    col.extend(std::iter::repeat_n(l as u64, c as usize));
                }
            } else {
                st.cols[r].reserve_exact(counts.len());
                st.cols[r].extend_from_slice(counts);
            }
            // Before its last hop a batch keeps its rows compact ([`BatchState::rows`]).
            let held = !last && !self.wide_state;
            if st.groups.on {
                self.relabel_in_groups(r, b, at, out)?;
                if !last {
                    // The edges kept, counted per frontier node again.
                    let (st, col) = (&mut self.states[b], &mut out.col[r]);
                    st.cols[r].reserve_exact(st.frontier[dst].len());
                    let mut i = 0;
                    for l in st.frontier[dst].clone() {
                        let n = col[i..].iter().take_while(|&&c| c == l as u64).count();
                        st.cols[r].push(n as u32);
                        i += n;
                    }
                    col.clear();
                }
                if held {
                    // This hop's rows, the only ones in the sample: narrowed, and their
                    // 64-bit buffer freed.
                    let row = std::mem::take(&mut out.row[r]);
                    let rows = &mut self.states[b].rows[r];
                    rows.reserve_exact(row.len());
                    rows.extend(row.iter().map(|&l| l as u32));
                }
                continue;
            }
            let (n_src, src) = (self.num_nodes[self.rels[r].src], self.rels[r].src);
            let st = &mut self.states[b];
            let mut row = match held {
                true => Rows::Held(&mut st.rows[r]),
                false => Rows::Out(&mut out.row[r]),
            };
            row.reserve_exact(at.len());
            let map = &mut self.maps[src];
            let bad = match st.narrow[src] {
                true => relabel_into(map, &mut st.nodes[src], &mut row, d, at.clone(), n_src)?,
                false => relabel_into(map, &mut out.node[src], &mut row, d, at.clone(), n_src)?,
            };
            if let Some((p, u)) = bad {
                return Err(corrupt_entry(r, p, u, src, n_src));
            }
            if d.is_narrow() {
                continue;
            }
            let pos = &d.pos[at];
            if let Some(e) = &mut out.edge {
                e[r].reserve_exact(pos.len());
                e[r].extend_from_slice(pos);
            }
        }
        Ok(())
    }

    /// Put batch `b`'s `row` and `col` of every hop before its last (kept compact: the rows as
    /// 32-bit local ids, [`BatchState::rows`], the cols as counts per frontier node,
    /// [`BatchState::cols`]) in front of its last hop's, once its last hop is relabelled.
    pub(super) fn finish_edges(&mut self, b: usize, out: &mut HeteroSample) {
        let st = &mut self.states[b];
        for (r, rows) in st.rows.iter_mut().enumerate() {
            if rows.is_empty() {
                continue;
            }
            let mut row = Vec::with_capacity(rows.len() + out.row[r].len());
            row.extend(rows.iter().map(|&l| l as u64));
            row.extend_from_slice(&out.row[r]);
            out.row[r] = row;
            // Freed, not kept for the next batch: what holding them compact saves.
            *rows = Vec::new();
        }
        for (r, rel) in self.rels.iter().enumerate() {
            let (counts, nsn) = (&st.cols[r], &out.num_sampled_nodes[rel.dst]);
            if counts.is_empty() {
                continue;
            }
            let before: u64 = counts.iter().map(|&c| c as u64).sum();
            let mut col = Vec::with_capacity(before as usize + out.col[r].len());
            let (mut first, mut c) = (0, 0);
            for (k, &f) in rel.fanouts[..self.hops - 1].iter().enumerate() {
                // Hop k's frontier: the nodes first reached at hop k - 1 (the seeds at 0).
                let frontier = first..first + nsn[k];
                first = frontier.end;
                if f == Fanout::Count(0) {
                    continue;
                }
                let n = frontier.len();
                for (l, &m) in frontier.zip(&counts[c..c + n]) {
                    col.extend(std::iter::repeat_n(l as u64, m as usize));
                }
                c += n;
            }
            col.extend_from_slice(&out.col[r]);
            out.col[r] = col;
        }
    }

    /// Relation `r`'s draws at hop `k` for every batch of `outs` and one fetch of them all,
    /// into `drawn[r]` (relabelled by [`Self::relabel`]), with how many each frontier node drew
    /// (its `col`, made when the batch is relabelled); their count pushed to each
    /// `num_sampled_edges[r]`. `(seed, epoch)` and each request's batch pick the streams.
    /// Temporal batches draw from each range cut to its eligible edges (one batched search over
    /// the relation's times for all of them first, [`Self::cut_to_times`]).
    pub(super) fn hop(
        &mut self,
        r: usize,
        k: usize,
        (seed, epoch): (u64, u64),
        requests: &[HeteroRequest<'_>],
        outs: &mut [HeteroSample],
    ) -> Result<()> {
        let rel = &self.rels[r];
        let fanout = rel.fanouts[k];
        let states = &self.states[..outs.len()];
        if fanout == Fanout::Count(0) {
            outs.iter_mut().for_each(|o| o.num_sampled_edges[r].push(0));
            return Ok(());
        }
        // Each batch's ranges are made as it is drawn (one batch's held at a time); here only
        // the hop's size, before anything is reserved: without seed times from the offset index
        // (independent loads whose cache misses overlap); at seed times over a relation with
        // edge times, each frontier node's count of eligible edges first, found by one search
        // over the relation's times for every batch ([`Self::cut_to_times`]) and kept in its
        // `counts` entry until its draws replace it.
        let temporal = rel.times.is_some() && states.iter().any(|s| s.groups.on);
        let (n_dst, replace) = (self.num_nodes[rel.dst], self.replace);
        let nodes: usize = states.iter().map(|st| st.frontier[rel.dst].len()).sum();
        let d = &mut self.drawn[r];
        d.counts.clear();
        d.counts.reserve_exact(nodes);
        d.counts.resize(nodes, 0);
        let (total, mut kept) = match temporal {
            true => self.cut_to_times(r, fanout, outs)?,
            false => (
                (outs.iter().zip(states))
                    .map(|(out, st)| {
                        let frontier = st.ids(out, rel.dst).slice(st.frontier[rel.dst].clone());
                        let on = st.groups.on;
                        let count = |v: u64| {
                            let (lo, hi) = rel.indptr.range(node_of(v, on, n_dst) as usize);
                            Drawer::count(hi - lo, fanout, replace)
                        };
                        frontier.iter().map(count).sum::<u64>()
                    })
                    .sum::<u64>(),
                false,
            ),
        };
        let (rel, states) = (&mut self.rels[r], &self.states[..outs.len()]);
        // Per batch, the fanout its (cut) ranges are drawn with.
        let last = temporal && self.strategy == TemporalStrategy::Last;
        let fanout_of = |b: usize| match states[b].groups.on && last {
            true => Fanout::All,
            false => fanout,
        };
        let total = usize::try_from(total).map_err(|_| Error::TooLarge)?;
        let with_edge_ids = outs.first().is_some_and(|o| o.edge.is_some());
        let d = &mut self.drawn[r];
        // 32-bit positions and entries where the relation allows them, unless the positions
        // are kept as edge ids.
        d.wide = !d.fits_u32 || with_edge_ids;
        d.pos.clear();
        d.nbr.clear();
        d.narrow.clear();
        d.node_ends.clear();
        match d.wide {
            true => d.pos.reserve_exact(total),
            false => d.narrow.reserve_exact(total),
        }
        // Draws, batch by batch, each from its own stream; `cuts[b]` is the end of batch b's
        // positions.
        self.cuts.clear();
        let mut node = 0;
        for (b, out) in outs.iter_mut().enumerate() {
            let st = &states[b];
            let frontier = st.ids(out, rel.dst).slice(st.frontier[rel.dst].clone());
            match temporal && st.groups.on {
                // The ranges the search cut in memory, still held (see `cut_to_times`).
                true if std::mem::take(&mut kept) => {
                    if last {
                        for (lo, hi) in &mut self.ranges {
                            *lo = *hi - Drawer::count(*hi - *lo, fanout, false);
                        }
                    }
                }
                true => {
                    self.ranges.clear();
                    self.ranges.reserve_exact(frontier.len());
                    let eligible = &d.counts[node..node + frontier.len()];
                    let cut = (frontier.iter().zip(eligible)).map(|(key, &c)| {
                        let (lo, _) = rel.indptr.range(node_of(key, true, n_dst) as usize);
                        (lo, lo + c as u64)
                    });
                    self.ranges.extend(cut);
                    if last {
                        for (lo, hi) in &mut self.ranges {
                            *lo = *hi - Drawer::count(*hi - *lo, fanout, false);
                        }
                    }
                }
                false => {
                    self.ranges.clear();
                    self.ranges.reserve_exact(frontier.len());
                    let on = st.groups.on;
                    let full = frontier
                        .iter()
                        .map(|v| rel.indptr.range(node_of(v, on, n_dst) as usize));
                    self.ranges.extend(full);
                }
            }
            let start = d.len();
            let mut rng = relation_rng(seed, epoch, requests[b].batch, r, k);
            let fanout = fanout_of(b);
            let (drawer, tmp, n) = (&mut self.drawer, &mut self.tmp, self.ranges.len());
            let (how, counts) = ((fanout, replace), &mut d.counts[node..node + n]);
            match d.wide {
                true => draw_all(drawer, tmp, &mut rng, &self.ranges, how, &mut d.pos, counts),
                false => draw_all(
                    drawer,
                    tmp,
                    &mut rng,
                    &self.ranges,
                    how,
                    &mut d.narrow,
                    counts,
                ),
            }?;
            node += n;
            self.cuts.push(d.len());
            d.node_ends.push(node);
            out.num_sampled_edges[r].push(d.len() - start);
        }
        let n_src = self.num_nodes[rel.src];
        let bad = if !d.wide {
            let chunking = Chunking::new(d.per_chunk);
            let (fetch, cuts) = (&mut self.fetch, &self.cuts);
            fetch.run(
                &mut rel.source,
                &mut d.narrow,
                cuts,
                n_src,
                chunking,
                d.chunks,
            )?
        } else if with_edge_ids {
            // The positions are kept: they are the edge ids.
            d.nbr.reserve_exact(d.pos.len());
            d.nbr.resize(d.pos.len(), 0);
            rel.source.fetch(&d.pos, &mut d.nbr)?;
            None
        } else {
            rel.source
                .fetch_in_place(&mut d.pos, n_src, &mut self.keys)?
        };
        if let Some((p, u)) = bad {
            return Err(corrupt_entry(r, p, u, rel.src, n_src));
        }
        d.ends.clone_from(&self.cuts);
        Ok(())
    }
}

/// Where a relation's rows of one batch's hop go as they are relabelled: the batch's compact
/// rows of its hops before the last ([`super::BatchState::rows`]) or its sample's.
enum Rows<'a> {
    Held(&'a mut Vec<u32>),
    Out(&'a mut Vec<u64>),
}

impl Rows<'_> {
    fn reserve_exact(&mut self, n: usize) {
        match self {
            Rows::Held(v) => v.reserve_exact(n),
            Rows::Out(v) => v.reserve_exact(n),
        }
    }

    #[inline(always)]
    fn push(&mut self, l: u32) {
        match self {
            Rows::Held(v) => v.push(l),
            Rows::Out(v) => v.push(l as u64),
        }
    }
}

/// Append to `pos` the positions drawn for each of `ranges` (a frontier's neighbor ranges, in
/// order, from `rng`), and write into `counts` (one entry a range) how many each drew.
fn draw_all<W: Word>(
    drawer: &mut Drawer,
    tmp: &mut Vec<u64>,
    rng: &mut Rng,
    ranges: &[(u64, u64)],
    (fanout, replace): (Fanout, bool),
    pos: &mut Vec<W>,
    counts: &mut [u32],
) -> Result<()> {
    for (&range, count) in ranges.iter().zip(counts) {
        let at = pos.len();
        W::draw_node(drawer, tmp, rng, range, fanout, replace, pos);
        *count = u32::try_from(pos.len() - at).map_err(|_| Error::TooLarge)?;
    }
    Ok(())
}

/// Make `map` hold exactly `keys` (a batch's nodes of one type, in local id order), with room
/// for `room` more.
fn fill<N: Word>(map: &mut IdMap, keys: &[N], room: usize) {
    map.clear_for(keys.len() + room);
    with_table!(map, t => for (l, &v) in keys.iter().enumerate() {
        let _ = t.get_or_insert::<std::convert::Infallible>(v.get(), || Ok(l as u32));
    });
}

/// Relabel the entries `at` of `d` into `row`, new nodes appended to `node` (a batch's list of
/// the source type, of `n_src` nodes, `map` holding it): the first entry (in draw order) that
/// is not a node of the source type, with its position, if any, and nothing after it.
#[inline]
fn relabel_into<N: Word>(
    map: &mut IdMap,
    node: &mut Vec<N>,
    row: &mut Rows<'_>,
    d: &Drawn,
    at: Range<usize>,
    n_src: u64,
) -> Result<Option<(u64, u64)>> {
    if d.is_narrow() {
        // Checked against the source type's count as they were read.
        let nbr = &d.narrow[at];
        with_table!(map, t => for &u in nbr {
            row.push(local_id(t, node, u as u64)?);
        });
        return Ok(None);
    }
    let (pos, nbr) = (&d.pos[at.clone()], &d.entries()[at]);
    with_table!(map, t => for (&u, &p) in nbr.iter().zip(pos) {
        if u >= n_src {
            return Ok(Some((p, u)));
        }
        row.push(local_id(t, node, u)?);
    });
    Ok(None)
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

    /// Positions drawn this hop so far, all batches.
    fn len(&self) -> usize {
        match self.wide {
            true => self.pos.len(),
            false => self.narrow.len(),
        }
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

/// Positions a narrow fetch reads in one call of the source (whole chunks, at least this many
/// unless the hop has fewer): its copies of them are 64 bits.
const FETCH_GROUP: usize = 1 << 15;

/// The workspace of a narrow fetch ([`NarrowFetch::run`]): per batch, its positions' buckets
/// by chunk (about half a byte a position: see [`Buckets`]); the copy of one batch's positions
/// its moves go through; one group's positions and entries as the source reads them.
#[derive(Default)]
pub(super) struct NarrowFetch {
    /// Positions a read takes at most ([`FETCH_GROUP`] when 0).
    pub(super) group: usize,
    buckets: Vec<Buckets>,
    ws: Workspace<u32>,
    sub: Vec<u64>,
    out: Vec<u64>,
}

impl NarrowFetch {
    /// Replace each position of `vals` (batch `b`'s end at `ends[b]`) by the entry there, with
    /// the first entry (in position order) not below `below` and its position, if any (every
    /// entry is read either way), as [`NeighborSource::fetch_in_place`]. From disk each
    /// batch's positions are bucketed by chunk in place ([`Buckets`], as the homogeneous
    /// hyperbatch does), read in groups of whole chunks in file order (each group, every
    /// batch's positions in those chunks, in one fetch: each page is read once, as in one
    /// fetch of all of them), then put back in draw order.
    pub(super) fn run(
        &mut self,
        source: &mut NeighborSource,
        vals: &mut [u32],
        ends: &[usize],
        below: u64,
        chunking: Chunking,
        chunks: usize,
    ) -> Result<Option<(u64, u64)>> {
        let mut bad: Option<(u64, u64)> = None;
        let on_disk = matches!(source, NeighborSource::Disk(_));
        let group = if self.group == 0 {
            FETCH_GROUP
        } else {
            self.group
        };
        let mut read =
            |sub: &mut Vec<u64>, out: &mut Vec<u64>, vals: &mut [u32], at: &[Range<usize>]| {
                sub.clear();
                sub.reserve_exact(at.iter().map(|a| a.len()).sum());
                for a in at {
                    sub.extend(vals[a.clone()].iter().map(|&v| v as u64));
                }
                out.clear();
                out.resize(sub.len(), 0);
                source.fetch(sub, out)?;
                let mut k = 0;
                for a in at {
                    for v in &mut vals[a.clone()] {
                        let (u, p) = (out[k], sub[k]);
                        k += 1;
                        if u >= below {
                            if bad.is_none_or(|b| p < b.0) {
                                bad = Some((p, u));
                            }
                        } else {
                            *v = u as u32;
                        }
                    }
                }
                Ok::<(), Error>(())
            };
        let n = vals.len();
        if !on_disk {
            // In memory: no order to keep, groups in draw order.
            let mut first = 0;
            while first < n {
                let end = (first + group).min(n);
                read(
                    &mut self.sub,
                    &mut self.out,
                    vals,
                    std::slice::from_ref(&(first..end)),
                )?;
                first = end;
            }
            return Ok(bad);
        }
        let batches = ends.len();
        if self.buckets.len() < batches {
            self.buckets.resize_with(batches, Buckets::default);
        }
        let starts = |b: usize| if b == 0 { 0 } else { ends[b - 1] };
        for b in 0..batches {
            let batch = &mut vals[starts(b)..ends[b]];
            self.buckets[b].sort(batch, chunking, chunks, &mut self.ws)?;
        }
        let buckets = &self.buckets[..batches];
        // Every batch's positions in chunks `c0..c`.
        let mut at: Vec<Range<usize>> = Vec::with_capacity(batches);
        let mut c = 0;
        while c < chunks {
            let c0 = c;
            let mut size = 0;
            while c < chunks {
                let here: usize = (buckets.iter())
                    .map(|k| (k.starts[c + 1] - k.starts[c]) as usize)
                    .sum();
                if c > c0 && size + here > group {
                    break;
                }
                size += here;
                c += 1;
            }
            if size == 0 {
                continue;
            }
            at.clear();
            at.extend((0..batches).map(|b| {
                let k = &buckets[b];
                starts(b) + k.starts[c0] as usize..starts(b) + k.starts[c] as usize
            }));
            read(&mut self.sub, &mut self.out, vals, &at)?;
        }
        for b in 0..batches {
            self.buckets[b].unsort(&mut vals[starts(b)..ends[b]], &mut self.ws);
        }
        Ok(bad)
    }

    pub(super) fn bytes(&self) -> usize {
        let buckets: u64 = self.buckets.iter().map(Buckets::bytes).sum();
        (buckets + self.group_bytes()) as usize
    }

    /// Of [`Self::bytes`], what does not grow with the hyperbatch: the copies of one group (at
    /// most [`FETCH_GROUP`] positions, or one chunk's) and of one batch's positions.
    pub(super) fn group_bytes(&self) -> u64 {
        8 * (self.sub.capacity() + self.out.capacity()) as u64 + self.ws.bytes()
    }
}
