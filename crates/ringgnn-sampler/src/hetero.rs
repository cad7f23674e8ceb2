//! [`HeteroSampler`]: neighbor sampling over typed nodes and relations (PyG's heterogeneous
//! `NeighborSampler` semantics), single threaded like [`crate::NeighborSampler`]. Each relation
//! `(S, R, D)` is its own CSC (an offset index of `n_D + 1` entries in memory, a neighbor file
//! of `S` ids behind a [`NeighborSource`]); each node type has its own id space, its own dedup
//! map and its own frontier. Its output is [`HeteroSample`].
//!
//! A hop draws, relation by relation, the positions of the whole frontier of the relation's
//! destination type with the same [`Drawer`] as the homogeneous sampler, then reads them in one
//! fetch (each relation's file is read once per hop, in coalesced page reads), then relabels.

use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ringgnn_io::IoStats;

use crate::batch::local_id;
use crate::draw::{relation_rng, Drawer};
use crate::idmap::{with_table, IdMap};
use crate::neighbors::NeighborSource;
use crate::sampler::check_indptr;
use crate::{Error, Fanout, Result};

/// One relation `(S, R, D)` given to [`HeteroSampler::new`].
pub struct HeteroRelation {
    /// The index of its source type `S`: its neighbor entries are `S` ids.
    pub src: usize,
    /// The index of its destination type `D`.
    pub dst: usize,
    /// Its offset index: `n_D + 1` offsets into its neighbor file.
    pub indptr: Arc<[u64]>,
    /// Where its neighbor entries are read from.
    pub source: NeighborSource,
    /// Neighbors drawn per destination node at each hop (`fanouts[0]` for the seeds);
    /// `Fanout::Count(0)` leaves the relation out of that hop.
    pub fanouts: Vec<Fanout>,
}

/// One heterogeneous mini-batch, PyG's heterogeneous `SamplerOutput` with types and relations
/// as indices (node types `0..T`, relations `0..R`, in the order the sampler was given them).
///
/// - `node[t]`: ids of type `t`, each once: for a seeded type its seeds first (deduplicated,
///   first occurrence kept), then per hop the nodes first reached at that hop, in discovery
///   order.
/// - `row[r]`, `col[r]`: relation `r`'s sampled edges, as local indices into `node[S]` (the
///   sampled neighbor) and `node[D]` (the node it was drawn for). Grouped by hop; within a hop
///   in the order of the expanded `D` nodes, and for each the ascending order of its drawn
///   positions.
/// - `edge[r]`: positions in relation `r`'s neighbor file, parallel to `row[r]`, when asked.
/// - `num_sampled_nodes[t]`: `K + 1` entries; entry 0 is the number of distinct seeds of type
///   `t` (0 for a type without seeds), entry `k` the nodes of type `t` first reached at hop `k`.
///   They sum to `node[t].len()`.
/// - `num_sampled_edges[r]`: `K` entries, relation `r`'s edges at each hop. They sum to
///   `row[r].len()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeteroSample {
    pub node: Vec<Vec<u64>>,
    pub num_sampled_nodes: Vec<Vec<usize>>,
    pub row: Vec<Vec<u64>>,
    pub col: Vec<Vec<u64>>,
    pub num_sampled_edges: Vec<Vec<usize>>,
    pub edge: Option<Vec<Vec<u64>>>,
}

impl HeteroSample {
    /// Bytes of its id arrays (lengths, not capacities), as [`crate::SampledSubgraph::bytes`].
    pub fn bytes(&self) -> u64 {
        let len = |v: &[Vec<u64>]| v.iter().map(Vec::len).sum::<usize>();
        let edge = self.edge.as_deref().map_or(0, len);
        8 * (len(&self.node) + len(&self.row) + len(&self.col) + edge) as u64
    }
}

/// Node-wise uniform neighbor sampling over a heterogeneous graph whose relations' offset
/// indices are in memory and whose neighbor files are read through their sources. One per
/// thread; its workspaces (dedup maps, positions, entries read) are reused from batch to batch.
pub struct HeteroSampler {
    num_nodes: Vec<u64>,
    rels: Vec<HeteroRelation>,
    hops: usize,
    replace: bool,
    /// One dedup map per node type, and the local ids of its nodes the current hop expands.
    maps: Vec<IdMap>,
    frontier: Vec<Range<usize>>,
    drawer: Drawer,
    /// Per frontier node of the relation being drawn, its neighbor range.
    ranges: Vec<(u64, u64)>,
    /// The relation's positions drawn at the current hop, then the entries read there.
    pos: Vec<u64>,
    nbr: Vec<u64>,
}

impl HeteroSampler {
    /// A sampler over node types with `num_nodes[t]` nodes each and `relations` (all with one
    /// fanout per hop, the same number of hops). `replace` draws with replacement.
    pub fn new(num_nodes: Vec<u64>, relations: Vec<HeteroRelation>, replace: bool) -> Result<Self> {
        let types = num_nodes.len();
        let hops = relations.first().map_or(0, |r| r.fanouts.len());
        for (i, r) in relations.iter().enumerate() {
            for (what, t) in [("source", r.src), ("destination", r.dst)] {
                if t >= types {
                    return Err(Error::Input(format!(
                        "relation {i}: its {what} type {t} is out of range: there are {types} \
                         node types (0..{types}); give node counts for every type"
                    )));
                }
            }
            let n_dst = num_nodes[r.dst];
            if r.indptr.len() as u64 != n_dst.saturating_add(1) {
                return Err(Error::Input(format!(
                    "relation {i}: its offset index has {} entries, but its destination type {} \
                     has {n_dst} nodes, so it needs {}; pass the relation's own indptr, and \
                     node counts in the order of the type indices",
                    r.indptr.len(),
                    r.dst,
                    n_dst.saturating_add(1)
                )));
            }
            let file_len = match &r.source {
                NeighborSource::Memory(ix) => Some(ix.len() as u64),
                NeighborSource::Disk(_) => None,
            };
            check_indptr(&r.indptr, file_len).map_err(|e| match e {
                Error::Corrupt(m) => Error::Corrupt(format!("relation {i}: {m}")),
                e => e,
            })?;
            if r.fanouts.len() != hops {
                return Err(Error::Input(format!(
                    "relation {i} has {} fanouts but relation 0 has {hops}: give every relation \
                     one fanout per hop (0 leaves it out of a hop)",
                    r.fanouts.len()
                )));
            }
        }
        Ok(HeteroSampler {
            maps: num_nodes.iter().map(|&n| IdMap::for_nodes(n)).collect(),
            frontier: vec![0..0; types],
            num_nodes,
            rels: relations,
            hops,
            replace,
            drawer: Drawer::default(),
            ranges: Vec::new(),
            pos: Vec::new(),
            nbr: Vec::new(),
        })
    }

    /// Node count of each type.
    pub fn num_nodes(&self) -> &[u64] {
        &self.num_nodes
    }

    pub fn num_relations(&self) -> usize {
        self.rels.len()
    }

    /// Hops every sample has (the fanouts per relation).
    pub fn hops(&self) -> usize {
        self.hops
    }

    pub fn replace(&self) -> bool {
        self.replace
    }

    /// Cumulative I/O counters, summed over the relations' sources.
    pub fn io_stats(&self) -> IoStats {
        self.rels.iter().fold(IoStats::default(), |a, r| {
            let s = r.source.stats();
            IoStats {
                reads: a.reads + s.reads,
                bytes: a.bytes + s.bytes,
                batches: a.batches + s.batches,
            }
        })
    }

    /// Stop disk reads between waves once `flag` is set, for every relation: a sample in
    /// progress then ends with an `Interrupted` I/O error.
    pub fn set_cancel(&mut self, flag: Arc<AtomicBool>) {
        for r in &mut self.rels {
            r.source.set_cancel(flag.clone());
        }
    }

    /// Sample the subgraph of mini-batch `batch` of epoch `epoch` around `seeds`, nodes of
    /// type `seed_type`: [`HeteroSampler::sample_typed`] with seeds of that one type.
    pub fn sample(
        &mut self,
        seed_type: usize,
        seeds: &[u64],
        seed: u64,
        epoch: u64,
        batch: u64,
        with_edge_ids: bool,
    ) -> Result<HeteroSample> {
        self.sample_typed(&[(seed_type, seeds)], seed, epoch, batch, with_edge_ids)
    }

    /// Sample the subgraph of mini-batch `batch` of epoch `epoch` around seeds of several
    /// types at once, `seeds[i] = (type, ids)` (PyG's heterogeneous link loader seeds the
    /// source endpoints of a batch of pairs and their destination endpoints together). Each
    /// type's seeds go into its own dedup map in the order given (a type given twice: its
    /// lists one after the other), and every seeded type's frontier at hop 0 is its distinct
    /// seeds, so `num_sampled_nodes[t][0]` is the number of distinct seeds of type `t`.
    ///
    /// Hop `k` (0-based) expands, for each relation `r` in index order whose fanout at hop `k`
    /// is not `Count(0)`, the nodes of its destination type first reached at hop `k - 1` (the
    /// seeds at hop 0): the frontier is fixed when the hop starts, so a node reached at hop `k`
    /// by one relation is expanded at hop `k + 1`, never again at hop `k`, and a node is
    /// expanded at most once. Relation `r` at hop `k` draws from
    /// [`relation_rng`]`(seed, epoch, batch, r, k)`, one [`Drawer::draw`] per frontier node in
    /// frontier order, so the result depends only on the graph, the fanouts, `replace`,
    /// `seeds` and `(seed, epoch, batch)`: never on the sources. With `with_edge_ids`, `edge`
    /// holds the position of every sampled edge in its relation's neighbor file.
    pub fn sample_typed(
        &mut self,
        seeds: &[(usize, &[u64])],
        seed: u64,
        epoch: u64,
        batch: u64,
        with_edge_ids: bool,
    ) -> Result<HeteroSample> {
        let types = self.num_nodes.len();
        for &(seed_type, ids) in seeds {
            if seed_type >= types {
                return Err(Error::Input(format!(
                    "seed type {seed_type} is out of range: there are {types} node types \
                     (0..{types})"
                )));
            }
            let n = self.num_nodes[seed_type];
            if let Some(&id) = ids.iter().find(|&&s| s >= n) {
                return Err(Error::Input(format!(
                    "seed node {id} of node type {seed_type} is out of range: that type has \
                     {n} nodes (ids 0..{n})"
                )));
            }
        }
        let rels = self.rels.len();
        let mut out = HeteroSample {
            node: vec![Vec::new(); types],
            num_sampled_nodes: vec![Vec::with_capacity(self.hops + 1); types],
            row: vec![Vec::new(); rels],
            col: vec![Vec::new(); rels],
            num_sampled_edges: vec![Vec::with_capacity(self.hops); rels],
            edge: with_edge_ids.then(|| vec![Vec::new(); rels]),
        };
        self.maps.iter_mut().for_each(IdMap::clear);
        for &(seed_type, ids) in seeds {
            let node = &mut out.node[seed_type];
            with_table!(self.maps[seed_type], t => {
                ids.iter().try_for_each(|&s| local_id(t, node, s).map(drop))
            })?;
        }
        for (t, f) in self.frontier.iter_mut().enumerate() {
            *f = 0..out.node[t].len();
            out.num_sampled_nodes[t].push(f.len());
        }
        for k in 0..self.hops {
            for r in 0..rels {
                let n = self.hop(r, k, (seed, epoch, batch), &mut out)?;
                out.num_sampled_edges[r].push(n);
            }
            // The nodes first reached at this hop are the next frontier.
            for (t, f) in self.frontier.iter_mut().enumerate() {
                *f = f.end..out.node[t].len();
                out.num_sampled_nodes[t].push(f.len());
            }
        }
        Ok(out)
    }

    /// Relation `r`'s edges at hop `k` (draw, one fetch, relabel) added to `out`; returns how
    /// many. `(seed, epoch, batch)` picks the random stream.
    fn hop(
        &mut self,
        r: usize,
        k: usize,
        (seed, epoch, batch): (u64, u64, u64),
        out: &mut HeteroSample,
    ) -> Result<usize> {
        let rel = &mut self.rels[r];
        let fanout = rel.fanouts[k];
        let frontier = self.frontier[rel.dst].clone();
        if fanout == Fanout::Count(0) || frontier.is_empty() {
            return Ok(0);
        }
        // Every frontier node's range first: independent loads whose cache misses overlap.
        let (indptr, dst_nodes) = (&rel.indptr, &out.node[rel.dst]);
        self.ranges.clear();
        self.ranges.extend(frontier.clone().map(|l| {
            let v = dst_nodes[l] as usize;
            (indptr[v], indptr[v + 1])
        }));
        let replace = self.replace;
        let total: u64 = self
            .ranges
            .iter()
            .map(|&(lo, hi)| Drawer::count(hi - lo, fanout, replace))
            .sum();
        let total = usize::try_from(total).map_err(|_| Error::TooLarge)?;
        let (pos, col) = (&mut self.pos, &mut out.col[r]);
        pos.clear();
        pos.reserve(total);
        col.reserve(total);
        let mut rng = relation_rng(seed, epoch, batch, r, k);
        for (l, &(lo, hi)) in frontier.zip(&self.ranges) {
            let start = pos.len();
            self.drawer.draw(&mut rng, hi - lo, fanout, replace, pos);
            pos[start..].iter_mut().for_each(|p| *p += lo);
            col.extend(std::iter::repeat_n(l as u64, pos.len() - start));
        }
        let nbr = &mut self.nbr;
        nbr.clear();
        nbr.resize(pos.len(), 0);
        rel.source.fetch(pos, nbr)?;
        let (n_src, src) = (self.num_nodes[rel.src], rel.src);
        let (row, node) = (&mut out.row[r], &mut out.node[src]);
        row.reserve(nbr.len());
        with_table!(self.maps[src], t => for (&u, &p) in nbr.iter().zip(pos.iter()) {
            if u >= n_src {
                return Err(Error::Corrupt(format!(
                    "entry {p} of the neighbor file of relation {r} is {u}, but its source \
                     type {src} has {n_src} nodes; the dataset is damaged, run `ringgnn verify`"
                )));
            }
            row.push(local_id(t, node, u)? as u64);
        });
        if let Some(e) = &mut out.edge {
            e[r].extend_from_slice(pos);
        }
        Ok(pos.len())
    }
}
