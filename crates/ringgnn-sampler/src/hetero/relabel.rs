//! Each batch's relabelling of a [`HeteroSampler`] hop: every relation's entries read for the
//! batch, in index order, into local ids through the dedup maps of the thread that relabels
//! it, refilled with the batch's nodes ([`Relabel::run`]); at the last hop, its sample
//! finished ([`finish_edges`]). Batches are relabelled on any thread, in any order: a batch's
//! local ids depend only on its own nodes and draws.

use std::ops::Range;
use std::sync::Arc;

use super::hop::Drawn;
use super::temporal::relabel_in_groups;
#[cfg(doc)]
use super::HeteroSampler;
use super::{corrupt_entry, BatchState, HeteroRelation, HeteroSample, Ids, Scratch};
use crate::batch::{local_id, Word};
use crate::idmap::{with_table, IdMap, Lookup};
use crate::{Fanout, Result};

/// One relation as the threads see it.
pub(super) struct Shape<'a> {
    pub(super) src: usize,
    pub(super) dst: usize,
    pub(super) fanouts: &'a [Fanout],
}

/// What every thread reads while it relabels: the relations, node counts and node times, and
/// every relation's draws and entries of the hop.
pub(super) struct View<'a> {
    pub(super) rels: Vec<Shape<'a>>,
    pub(super) num_nodes: &'a [u64],
    pub(super) node_times: &'a [Option<Arc<[i64]>>],
    pub(super) drawn: &'a [Drawn],
    pub(super) hops: usize,
    pub(super) wide_state: bool,
}

impl<'a> View<'a> {
    pub(super) fn new(
        rels: &'a [HeteroRelation],
        num_nodes: &'a [u64],
        node_times: &'a [Option<Arc<[i64]>>],
        drawn: &'a [Drawn],
        (hops, wide_state): (usize, bool),
    ) -> Self {
        let rels = rels.iter().map(|r| Shape {
            src: r.src,
            dst: r.dst,
            fanouts: &r.fanouts,
        });
        View {
            rels: rels.collect(),
            num_nodes,
            node_times,
            drawn,
            hops,
            wide_state,
        }
    }
}

/// Batch `b` of a hop to relabel: its state and sample, and at its last hop its finished
/// sample (`done`, taken out of `out`).
pub(super) struct Relabel<'a> {
    pub(super) b: usize,
    pub(super) st: &'a mut BatchState,
    pub(super) out: &'a mut HeteroSample,
    pub(super) done: Option<HeteroSample>,
}

impl Relabel<'_> {
    /// Relabel the batch's draws of hop `k`, set its next frontier, and at its last hop finish
    /// its sample into `done`.
    pub(super) fn run(&mut self, v: &View<'_>, sc: &mut Scratch, k: usize) -> Result<()> {
        let (b, st, out) = (self.b, &mut *self.st, &mut *self.out);
        relabel(v, sc, k, b, st, out)?;
        // The nodes first reached at this hop are the next frontier.
        for t in 0..v.num_nodes.len() {
            st.frontier[t] = st.frontier[t].end..st.count(out, t);
            out.num_sampled_nodes[t].push(st.frontier[t].len());
        }
        if k + 1 < v.hops {
            // Held until the last hop with the other batches': not the room a doubling left (up
            // to half of it unused), as the homogeneous hyperbatch does.
            out.node.iter_mut().for_each(Vec::shrink_to_fit);
            st.nodes.iter_mut().for_each(Vec::shrink_to_fit);
            return Ok(());
        }
        let mut done = std::mem::take(out);
        finish_edges(v, st, &mut done);
        st.finish_nodes(&mut done);
        st.groups.finish(&mut done, v.num_nodes);
        self.done = Some(done);
        Ok(())
    }
}

/// Relabel batch `b`'s draws of hop `k` (every relation's, in index order) into `out`, with
/// each source type's map of `sc` refilled with the batch's nodes first where it does not hold
/// them.
fn relabel(
    v: &View<'_>,
    sc: &mut Scratch,
    k: usize,
    b: usize,
    st: &mut BatchState,
    out: &mut HeteroSample,
) -> Result<()> {
    let active = |r: &Shape| r.fanouts[k] != Fanout::Count(0);
    let of = |d: &Drawn| d.ends[b] - if b == 0 { 0 } else { d.ends[b - 1] };
    for (t, map) in sc.maps.iter_mut().enumerate() {
        let room: usize = (v.rels.iter().zip(v.drawn))
            .filter(|(r, _)| r.src == t && active(r))
            .map(|(_, d)| of(d))
            .sum();
        // A map that holds the batch's nodes is refilled only to make room for this hop's:
        // growing as they come would place its entries again at every doubling.
        let held = Some((b, st.count(out, t)));
        if sc.held_by[t] == held && map.has_room(room) {
            continue;
        }
        match room > 0 {
            true => {
                match st.ids(out, t) {
                    Ids::Narrow(keys) => fill(map, keys, room),
                    Ids::Wide(keys) => fill(map, keys, room),
                }
                sc.held_by[t] = held;
            }
            // Not needed now, and not the batch's nodes as they are.
            false => sc.held_by[t] = None,
        }
    }
    for r in 0..v.rels.len() {
        if !active(&v.rels[r]) {
            continue;
        }
        let d = &v.drawn[r];
        let at = d.of_batch(b);
        let counts = &d.counts[d.nodes_of_batch(b)];
        let (dst, last) = (v.rels[r].dst, k + 1 == v.hops);
        // Its `col`: each frontier node's local id once per position it drew, made only for its
        // last hop and where edges may be dropped; before its last hop a batch keeps a count
        // per frontier node ([`BatchState::cols`]).
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
        let held = !last && !v.wide_state;
        if st.groups.on {
            relabel_in_groups(v, sc, r, st, at, out)?;
            if !last {
                // The edges kept, counted per frontier node again.
                let col = &mut out.col[r];
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
                // This hop's rows, the only ones in the sample: narrowed, and their 64-bit
                // buffer freed.
                let row = std::mem::take(&mut out.row[r]);
                let rows = &mut st.rows[r];
                rows.reserve_exact(row.len());
                rows.extend(row.iter().map(|&l| l as u32));
            }
            continue;
        }
        let src = v.rels[r].src;
        let n_src = v.num_nodes[src];
        let mut row = match held {
            true => Rows::Held(&mut st.rows[r]),
            false => Rows::Out(&mut out.row[r]),
        };
        row.reserve_exact(at.len());
        let map = &mut sc.maps[src];
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
    // The maps relabelling grew hold the batch's nodes so far (any other map of it was
    // refilled or dropped above).
    for (t, h) in sc.held_by.iter_mut().enumerate() {
        if h.is_some_and(|(hb, _)| hb == b) {
            *h = Some((b, st.count(out, t)));
        }
    }
    Ok(())
}

/// Put a batch's `row` and `col` of every hop before its last (kept compact: the rows as
/// 32-bit local ids, [`BatchState::rows`], the cols as counts per frontier node,
/// [`BatchState::cols`]) in front of its last hop's, once its last hop is relabelled.
fn finish_edges(v: &View<'_>, st: &mut BatchState, out: &mut HeteroSample) {
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
    for (r, rel) in v.rels.iter().enumerate() {
        let (counts, nsn) = (&st.cols[r], &out.num_sampled_nodes[rel.dst]);
        if counts.is_empty() {
            continue;
        }
        let before: u64 = counts.iter().map(|&c| c as u64).sum();
        let mut col = Vec::with_capacity(before as usize + out.col[r].len());
        let (mut first, mut c) = (0, 0);
        for (k, &f) in rel.fanouts[..v.hops - 1].iter().enumerate() {
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

/// Where a relation's rows of one batch's hop go as they are relabelled: the batch's compact
/// rows of its hops before the last ([`BatchState::rows`]) or its sample's.
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
