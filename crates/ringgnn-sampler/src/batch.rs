//! [`BatchDraw`]: one mini-batch being sampled, hop by hop: its random stream, its dedup map,
//! its output so far and the current hop's drawn positions. The per-batch sampler
//! ([`crate::NeighborSampler`]) and the hyperbatch sampler ([`crate::HyperSampler`]) run the
//! same three steps on it (draw the hop, have the neighbor ids read, relabel), so a batch's
//! sample cannot depend on which of them ran it, nor on how the reads were grouped.

use std::ops::Range;

use ringgnn_store::rng::Rng;

use crate::draw::{batch_rng, Drawer};
pub(crate) use crate::idmap::IdMap;
use crate::idmap::{with_table, Lookup};
use crate::output::{CompactSample, SampledSubgraph};
use crate::{Error, Fanout, Offsets, Result};

/// The integer type a batch keeps its drawn positions (then the entries read there) in:
/// `u64`, or `u32` when the graph's edge positions and node ids all fit (a hyperbatch holds H
/// batches' positions at once: 4 bytes less each).
pub(crate) trait Word: Copy + Default + Send + Sync + 'static {
    fn get(self) -> u64;
    /// `x` must fit (the caller checked the graph's sizes).
    fn of(x: u64) -> Self;
    /// Append to `pos` the positions `drawer` draws for a node whose list is `range`
    /// (`tmp`: a workspace).
    fn draw_node(
        drawer: &mut Drawer,
        tmp: &mut Vec<u64>,
        rng: &mut Rng,
        range: (u64, u64),
        fanout: Fanout,
        replace: bool,
        pos: &mut Vec<Self>,
    );
}

impl Word for u64 {
    fn get(self) -> u64 {
        self
    }
    fn of(x: u64) -> Self {
        x
    }
    /// Drawn in place (the per-batch samplers' hot loop: no copy).
    fn draw_node(
        drawer: &mut Drawer,
        _: &mut Vec<u64>,
        rng: &mut Rng,
        (lo, hi): (u64, u64),
        fanout: Fanout,
        replace: bool,
        pos: &mut Vec<u64>,
    ) {
        let start = pos.len();
        drawer.draw(rng, hi - lo, fanout, replace, pos);
        pos[start..].iter_mut().for_each(|p| *p += lo);
    }
}

impl Word for u32 {
    fn get(self) -> u64 {
        self as u64
    }
    fn of(x: u64) -> Self {
        debug_assert!(x <= u32::MAX as u64);
        x as u32
    }
    /// Drawn as 64 bits, then narrowed as they join the batch.
    fn draw_node(
        drawer: &mut Drawer,
        tmp: &mut Vec<u64>,
        rng: &mut Rng,
        (lo, hi): (u64, u64),
        fanout: Fanout,
        replace: bool,
        pos: &mut Vec<u32>,
    ) {
        tmp.clear();
        drawer.draw(rng, hi - lo, fanout, replace, tmp);
        pos.extend(tmp.iter().map(|&p| Self::of(p + lo)));
    }
}

/// What drawing a hop needs only while it draws: the frontier's neighbor ranges and the
/// drawer's set of offsets taken. The caller lends one to [`BatchDraw::draw`] (a hyperbatch
/// keeps one per thread, not one per batch).
#[derive(Default)]
pub(crate) struct DrawScratch {
    drawer: Drawer,
    /// `(indptr[v], indptr[v + 1])` of each frontier node of the hop being drawn.
    ranges: Vec<(u64, u64)>,
    /// One node's offsets, before they join the batch's positions (32-bit positions only).
    node: Vec<u64>,
}

impl DrawScratch {
    /// Bytes of the ranges and one node's offsets (the drawer's set holds at most a fanout's).
    pub(crate) fn bytes(&self) -> u64 {
        16 * self.ranges.capacity() as u64 + 8 * self.node.capacity() as u64
    }
}

/// A mini-batch in the middle of being sampled. Its workspaces are reused from batch to batch:
/// their size follows the sample, never the graph. Its dedup map and its draw scratch are not
/// part of it: the caller lends them (the per-batch sampler keeps one of each for its batch; a
/// hyperbatch keeps one per thread and rebuilds the map from the batch's nodes when it
/// relabels, see [`Self::fill_map`], so that H batches in flight do not hold H of them).
pub(crate) struct BatchDraw<W: Word = u64> {
    rng: Rng,
    pub(crate) out: CompactSample,
    /// The local ids expanded at the current hop.
    frontier: Range<usize>,
    /// Edge positions drawn at the current hop, in draw order (the hyperbatch sampler then
    /// overwrites them with the entries read there, see [`Self::relabel_in_place`]).
    pub(crate) pos: Vec<W>,
}

impl<W: Word> Default for BatchDraw<W> {
    fn default() -> Self {
        BatchDraw {
            rng: batch_rng(0, 0, 0),
            out: CompactSample::default(),
            frontier: 0..0,
            pos: Vec::new(),
        }
    }
}

impl<W: Word> BatchDraw<W> {
    /// Start batch `batch` of epoch `epoch` under the user's `seed` around `seeds` (checked
    /// node ids): the seeds, deduplicated, are its first nodes and its first frontier. `map`
    /// ends up holding them.
    pub(crate) fn start(
        &mut self,
        map: &mut IdMap,
        seeds: &[u64],
        seed: u64,
        epoch: u64,
        batch: u64,
        with_edge_ids: bool,
    ) -> Result<()> {
        // Buffers a per-batch sampler left (see `finish`) are reused.
        let o = &mut self.out;
        o.node.clear();
        o.row.clear();
        o.counts.clear();
        o.edge = with_edge_ids.then(Vec::new);
        o.num_sampled_nodes.clear();
        o.num_sampled_edges.clear();
        map.clear();
        let node = &mut self.out.node;
        with_table!(map, t => seeds.iter().try_for_each(|&s| local_id(t, node, s).map(drop)))?;
        self.out.num_sampled_nodes.push(self.out.node.len());
        self.rng = batch_rng(seed, epoch, batch);
        self.frontier = 0..self.out.node.len();
        Ok(())
    }

    /// Draw the positions of the next hop for the whole frontier (a fixed order of the random
    /// stream: frontier order, one draw per node), into `pos`, and record how many were drawn
    /// for each frontier node, using the workspace `ws`.
    pub(crate) fn draw(
        &mut self,
        indptr: &Offsets,
        fanout: Fanout,
        replace: bool,
        ws: &mut DrawScratch,
    ) -> Result<()> {
        self.pos.clear();
        // Load every frontier node's range first: the loads are independent, so the CPU
        // overlaps their cache misses (interleaved with the draws, each miss stalled the
        // degree-dependent branches: 39% of sampling time on a 131M-edge graph).
        ws.ranges.clear();
        let node = &self.out.node;
        ws.ranges.extend(
            self.frontier
                .clone()
                .map(|l| indptr.range(node[l] as usize)),
        );
        // Exactly the room the hop takes: H batches in flight hold their positions at once.
        let total: u64 = ws
            .ranges
            .iter()
            .map(|&(lo, hi)| Drawer::count(hi - lo, fanout, replace))
            .sum();
        self.pos
            .reserve_exact(usize::try_from(total).map_err(|_| Error::TooLarge)?);
        self.out.counts.reserve_exact(ws.ranges.len());
        let DrawScratch {
            drawer,
            ranges,
            node,
        } = ws;
        for &range in ranges.iter() {
            let start = self.pos.len();
            W::draw_node(
                drawer,
                node,
                &mut self.rng,
                range,
                fanout,
                replace,
                &mut self.pos,
            );
            let n = u32::try_from(self.pos.len() - start).map_err(|_| Error::TooLarge)?;
            self.out.counts.push(n);
        }
        if let Some(e) = &mut self.out.edge {
            e.extend(self.pos.iter().map(|p| p.get()));
        }
        Ok(())
    }

    /// At most how many positions the next hop draws: the fanout per frontier node (its
    /// degree for [`Fanout::All`]: the only case that reads the offset index).
    pub(crate) fn hop_bound(&self, indptr: &Offsets, fanout: Fanout) -> u64 {
        match fanout {
            Fanout::Count(k) => k.saturating_mul(self.frontier.len() as u64),
            Fanout::All => self
                .frontier
                .clone()
                .map(|l| indptr.degree(self.out.node[l] as usize))
                .sum(),
        }
    }

    /// Frontier nodes the next hop expands.
    pub(crate) fn frontier_len(&self) -> u64 {
        self.frontier.len() as u64
    }

    /// How many frontier nodes the current hop drew positions for (after [`Self::draw`]).
    pub(crate) fn hop_runs(&self) -> u64 {
        let counts = &self.out.counts;
        let hop = &counts[counts.len() - self.frontier.len()..];
        hop.iter().filter(|&&n| n > 0).count() as u64
    }

    /// With `nbr[i]` the entry read at `pos[i]`, add the hop's edges and new nodes (an error if
    /// an entry is not a node id of a graph of `num_nodes` nodes); the new nodes are the next
    /// frontier. `map` must hold the batch's nodes.
    pub(crate) fn relabel(&mut self, nbr: &[u64], map: &mut IdMap, num_nodes: u64) -> Result<()> {
        let pos = &self.pos;
        let f = |i: usize, u: u64| check_entry(pos[i].get(), u, num_nodes);
        relabel(&mut self.out, &mut self.frontier, nbr, map, f)
    }

    /// [`Self::relabel`] with the entries read in `pos` itself, already checked.
    pub(crate) fn relabel_in_place(&mut self, map: &mut IdMap) -> Result<()> {
        let f = |_: usize, _: u64| Ok(());
        relabel(&mut self.out, &mut self.frontier, &self.pos, map, f)
    }

    /// Make `map` hold exactly this batch's nodes, with room for the current hop's.
    pub(crate) fn fill_map(&self, map: &mut IdMap) {
        map.clear_for(self.out.node.len() + self.pos.len());
        let node = &self.out.node;
        with_table!(map, t => for (l, &v) in node.iter().enumerate() {
            let _ = t.get_or_insert::<std::convert::Infallible>(v, || Ok(l as u32));
        });
    }

    /// The finished sample, compact; the workspaces stay for the next batch.
    pub(crate) fn take(&mut self) -> CompactSample {
        std::mem::take(&mut self.out)
    }

    /// The finished sample, expanded; the workspaces and the compact buffers stay for the next
    /// batch.
    pub(crate) fn finish(&mut self) -> SampledSubgraph {
        self.out.expand_reuse()
    }

    /// Bytes this batch holds now: its output and its workspaces (capacities). After
    /// [`Self::take`], the workspaces alone.
    pub(crate) fn bytes(&self) -> u64 {
        self.out.bytes() + std::mem::size_of::<W>() as u64 * self.pos.capacity() as u64
    }
}

fn relabel<N: Word>(
    out: &mut CompactSample,
    frontier: &mut Range<usize>,
    nbr: &[N],
    map: &mut IdMap,
    check: impl Fn(usize, u64) -> Result<()>,
) -> Result<()> {
    with_table!(map, t => relabel_with(out, frontier, nbr, t, &check))
}

fn relabel_with<N: Word, M: Lookup>(
    out: &mut CompactSample,
    frontier: &mut Range<usize>,
    nbr: &[N],
    map: &mut M,
    check: &impl Fn(usize, u64) -> Result<()>,
) -> Result<()> {
    let first_new = out.node.len();
    out.row.reserve_exact(nbr.len());
    for (i, u) in nbr.iter().enumerate() {
        let u = u.get();
        check(i, u)?;
        out.row.push(local_id(map, &mut out.node, u)?);
    }
    out.num_sampled_edges.push(nbr.len());
    out.num_sampled_nodes.push(out.node.len() - first_new);
    *frontier = first_new..out.node.len();
    Ok(())
}

/// The error for entry `p` of the neighbor file holding `u`, not a node id of a graph of
/// `num_nodes` nodes; `Ok` when it is one.
pub(crate) fn check_entry(p: u64, u: u64, num_nodes: u64) -> Result<()> {
    if u < num_nodes {
        return Ok(());
    }
    Err(Error::Corrupt(format!(
        "entry {p} of the neighbor file is {u} but the graph has {num_nodes} nodes; the \
         dataset is damaged, run `ringgnn verify`"
    )))
}

/// The local id of global node `v`, appending it to `node` when it is new (a list of 32-bit
/// ids only where every id fits: the typed hyperbatch's node lists while held). Inlined by
/// hand: with `relabel` made for both position widths, the compiler stopped inlining it, and
/// the per-batch sampler ran 10% slower (a call per drawn edge).
#[inline(always)]
pub(crate) fn local_id<M: Lookup, N: Word>(map: &mut M, node: &mut Vec<N>, v: u64) -> Result<u32> {
    map.get_or_insert(v, || {
        let next = u32::try_from(node.len()).map_err(|_| Error::TooLarge)?;
        node.push(N::of(v));
        Ok(next)
    })
}
