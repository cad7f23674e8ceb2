//! One hop of a [`HeteroSampler`] hyperbatch: every relation's draws for all the batches and
//! one fetch of them ([`HeteroSampler::hop`], into [`Drawn`]), then each batch's relabelling
//! of every relation in the sampler's maps, refilled with the batch's nodes
//! ([`HeteroSampler::relabel`]).

use super::TemporalStrategy;
use super::{corrupt_entry, HeteroRelation, HeteroRequest, HeteroSample, HeteroSampler};
use crate::batch::local_id;
use crate::draw::{relation_rng, Drawer};
use crate::idmap::{with_table, GroupKeys, IdMap, Lookup};
use crate::{Error, Fanout, Result};

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
                fill(map, &out.node[t], room);
                self.held_by[t] = Some(b);
            }
        }
        for r in 0..self.rels.len() {
            if !active(&self.rels[r]) {
                continue;
            }
            let d = &self.drawn[r];
            let at = if b == 0 { 0 } else { d.ends[b - 1] }..d.ends[b];
            if self.states[b].groups.on {
                self.relabel_in_groups(r, b, at, out)?;
                continue;
            }
            let (pos, nbr) = (&d.pos[at.clone()], &d.entries()[at]);
            let (n_src, src) = (self.num_nodes[self.rels[r].src], self.rels[r].src);
            let (row, node) = (&mut out.row[r], &mut out.node[src]);
            row.reserve_exact(nbr.len());
            with_table!(self.maps[src], t => for (&u, &p) in nbr.iter().zip(pos) {
                if u >= n_src {
                    return Err(corrupt_entry(r, p, u, src, n_src));
                }
                row.push(local_id(t, node, u)? as u64);
            });
            if let Some(e) = &mut out.edge {
                e[r].reserve_exact(pos.len());
                e[r].extend_from_slice(pos);
            }
        }
        Ok(())
    }

    /// Relation `r`'s draws at hop `k` for every batch of `outs` and one fetch of them all,
    /// into `drawn[r]` (relabelled by [`Self::relabel`]); their `col` and their count pushed to
    /// each `num_sampled_edges[r]`. `(seed, epoch)` and each request's batch pick the streams.
    /// Temporal batches first cut each range to its eligible edges (one batched search over
    /// the relation's times for all of them).
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
        // Every frontier node's range first, for all batches: independent loads whose cache
        // misses overlap, and the hop's size known before anything is reserved.
        let indptr = &rel.indptr;
        let temporal = states.iter().any(|s| s.groups.on);
        let n_dst = self.num_nodes[rel.dst];
        self.ranges.clear();
        self.cuts.clear();
        self.limits.clear();
        for (out, st) in outs.iter().zip(states) {
            let frontier = &out.node[rel.dst][st.frontier[rel.dst].clone()];
            if st.groups.on {
                for &key in frontier {
                    let (g, v) = GroupKeys::split(key, n_dst);
                    self.ranges.push(indptr.range(v as usize));
                    self.limits.push(st.groups.times[g as usize]);
                }
            } else {
                let ranges = frontier.iter().map(|&v| indptr.range(v as usize));
                self.ranges.extend(ranges);
                if temporal {
                    self.limits.resize(self.ranges.len(), i64::MAX);
                }
            }
            self.cuts.push(self.ranges.len());
        }
        if temporal {
            self.cut_to_times(r, fanout, outs.len())?;
        }
        let (rel, states) = (&mut self.rels[r], &self.states[..outs.len()]);
        let replace = self.replace;
        // Per batch, the fanout its (cut) ranges are drawn with.
        let last = self.strategy == TemporalStrategy::Last && rel.times.is_some();
        let fanout_of = |b: usize| match states[b].groups.on && last {
            true => Fanout::All,
            false => fanout,
        };
        let mut total = 0u64;
        let mut first = 0;
        for (b, &cut) in self.cuts.iter().enumerate() {
            let f = fanout_of(b);
            let ranges = &self.ranges[first..cut];
            total += ranges
                .iter()
                .map(|&(lo, hi)| Drawer::count(hi - lo, f, replace))
                .sum::<u64>();
            first = cut;
        }
        let total = usize::try_from(total).map_err(|_| Error::TooLarge)?;
        let Drawn { pos, nbr, ends } = &mut self.drawn[r];
        pos.clear();
        pos.reserve_exact(total);
        // Draws, batch by batch, each from its own stream; `cuts[b]` becomes the end of batch
        // b's positions.
        let mut first = 0;
        for (b, (out, st)) in outs.iter_mut().zip(states).enumerate() {
            let (ranges, start) = (&self.ranges[first..self.cuts[b]], pos.len());
            first = self.cuts[b];
            let mut rng = relation_rng(seed, epoch, requests[b].batch, r, k);
            let fanout = fanout_of(b);
            let col = &mut out.col[r];
            let n: u64 = ranges
                .iter()
                .map(|&(lo, hi)| Drawer::count(hi - lo, fanout, replace))
                .sum();
            col.reserve_exact(n as usize);
            for (l, &(lo, hi)) in st.frontier[rel.dst].clone().zip(ranges) {
                let at = pos.len();
                self.drawer.draw(&mut rng, hi - lo, fanout, replace, pos);
                pos[at..].iter_mut().for_each(|p| *p += lo);
                col.extend(std::iter::repeat_n(l as u64, pos.len() - at));
            }
            self.cuts[b] = pos.len();
            out.num_sampled_edges[r].push(pos.len() - start);
        }
        nbr.clear();
        if outs.first().is_some_and(|o| o.edge.is_some()) {
            // The positions are kept: they are the edge ids.
            nbr.reserve_exact(pos.len());
            nbr.resize(pos.len(), 0);
            rel.source.fetch(pos, nbr)?;
        } else {
            let n_src = self.num_nodes[rel.src];
            if let Some((p, u)) = rel.source.fetch_in_place(pos, n_src, &mut self.keys)? {
                return Err(corrupt_entry(r, p, u, rel.src, n_src));
            }
        }
        ends.clone_from(&self.cuts);
        Ok(())
    }
}

/// Make `map` hold exactly `keys` (a batch's nodes of one type, in local id order), with room
/// for `room` more.
fn fill(map: &mut IdMap, keys: &[u64], room: usize) {
    map.clear_for(keys.len() + room);
    with_table!(map, t => for (l, &v) in keys.iter().enumerate() {
        let _ = t.get_or_insert::<std::convert::Infallible>(v, || Ok(l as u32));
    });
}

/// What every batch of a hyperbatch drew from one relation at the current hop: the positions,
/// the entries read there, and where each batch's end (`ends[b]`). Without edge ids the
/// entries replace the positions (`nbr` is empty).
#[derive(Default)]
pub(super) struct Drawn {
    pub(super) pos: Vec<u64>,
    pub(super) nbr: Vec<u64>,
    pub(super) ends: Vec<usize>,
}

impl Drawn {
    /// The entries read, parallel to the positions.
    pub(super) fn entries(&self) -> &[u64] {
        match self.nbr.is_empty() {
            true => &self.pos,
            false => &self.nbr,
        }
    }

    pub(super) fn bytes(&self) -> usize {
        8 * (self.pos.capacity() + self.nbr.capacity() + self.ends.capacity())
    }
}
