//! [`BatchDraw`]: one mini-batch being sampled, hop by hop: its random stream, its dedup map,
//! its output so far and the current hop's drawn positions. The per-batch sampler
//! ([`crate::NeighborSampler`]) and the hyperbatch sampler ([`crate::HyperSampler`]) run the
//! same three steps on it (draw the hop, have the neighbor ids read, relabel), so a batch's
//! sample cannot depend on which of them ran it, nor on how the reads were grouped.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

use ringgnn_store::rng::{mix64, Rng};

use crate::draw::{batch_rng, Drawer};
use crate::{Error, Fanout, Result, SampledSubgraph};

/// Hashes node ids with the SplitMix64 finalizer: much cheaper than SipHash, and well mixed in
/// every bit, so ids that share low bits (multiples of a power of two) do not collide. HashDoS
/// is no concern: the keys come from the graph the user chose.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix64(self.0 ^ b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = mix64(x);
    }
}

type IdMap = HashMap<u64, u32, BuildHasherDefault<IdHasher>>;

/// A mini-batch in the middle of being sampled. Its workspaces are reused from batch to batch:
/// their size follows the sample, never the graph.
pub(crate) struct BatchDraw {
    rng: Rng,
    drawer: Drawer,
    map: IdMap,
    pub(crate) out: SampledSubgraph,
    /// The local ids expanded at the current hop.
    frontier: Range<usize>,
    /// Edge positions drawn at the current hop, in draw order.
    pub(crate) pos: Vec<u64>,
    /// For each of `pos`, the local id of the node it was drawn for.
    owner: Vec<u64>,
    /// For each of `pos`, the neighbor id read from the file (filled by the caller).
    pub(crate) nbr: Vec<u64>,
    /// `(indptr[v], indptr[v + 1])` of each frontier node of the current hop.
    ranges: Vec<(u64, u64)>,
}

impl Default for BatchDraw {
    fn default() -> Self {
        BatchDraw {
            rng: batch_rng(0, 0, 0),
            drawer: Drawer::default(),
            map: IdMap::default(),
            out: SampledSubgraph::default(),
            frontier: 0..0,
            pos: Vec::new(),
            owner: Vec::new(),
            nbr: Vec::new(),
            ranges: Vec::new(),
        }
    }
}

impl BatchDraw {
    /// Start batch `batch` of epoch `epoch` under the user's `seed` around `seeds` (checked
    /// node ids): the seeds, deduplicated, are its first nodes and its first frontier.
    pub(crate) fn start(
        &mut self,
        seeds: &[u64],
        seed: u64,
        epoch: u64,
        batch: u64,
        with_edge_ids: bool,
    ) -> Result<()> {
        self.out = SampledSubgraph {
            edge: with_edge_ids.then(Vec::new),
            ..Default::default()
        };
        self.map.clear();
        for &s in seeds {
            local_id(&mut self.map, &mut self.out.node, s)?;
        }
        self.out.num_sampled_nodes.push(self.out.node.len());
        self.rng = batch_rng(seed, epoch, batch);
        self.frontier = 0..self.out.node.len();
        Ok(())
    }

    /// Draw the positions of the next hop for the whole frontier (a fixed order of the random
    /// stream: frontier order, one draw per node), into `pos`; `nbr` is sized to match.
    pub(crate) fn draw(&mut self, indptr: &[u64], fanout: Fanout, replace: bool) {
        self.pos.clear();
        self.owner.clear();
        // Load every frontier node's range first: the loads are independent, so the CPU
        // overlaps their cache misses (interleaved with the draws, each miss stalled the
        // degree-dependent branches: 39% of sampling time on a 131M-edge graph).
        self.ranges.clear();
        let node = &self.out.node;
        self.ranges.extend(self.frontier.clone().map(|l| {
            let v = node[l] as usize;
            (indptr[v], indptr[v + 1])
        }));
        for (l, &(lo, hi)) in self.frontier.clone().zip(&self.ranges) {
            let start = self.pos.len();
            self.drawer
                .draw(&mut self.rng, hi - lo, fanout, replace, &mut self.pos);
            self.pos[start..].iter_mut().for_each(|p| *p += lo);
            self.owner.resize(self.pos.len(), l as u64);
        }
        self.nbr.clear();
        self.nbr.resize(self.pos.len(), 0);
    }

    /// With `nbr` read, add the hop's edges and new nodes; the new nodes are the next frontier.
    pub(crate) fn relabel(&mut self, num_nodes: u64) -> Result<()> {
        let out = &mut self.out;
        let first_new = out.node.len();
        out.row.reserve(self.nbr.len());
        for (&u, &p) in self.nbr.iter().zip(&self.pos) {
            if u >= num_nodes {
                return Err(Error::Corrupt(format!(
                    "entry {p} of the neighbor file is {u} but the graph has {num_nodes} \
                     nodes; the dataset is damaged, run `ringgnn verify`"
                )));
            }
            out.row.push(local_id(&mut self.map, &mut out.node, u)?);
        }
        out.col.extend_from_slice(&self.owner);
        if let Some(e) = &mut out.edge {
            e.extend_from_slice(&self.pos);
        }
        out.num_sampled_edges.push(self.pos.len());
        out.num_sampled_nodes.push(out.node.len() - first_new);
        self.frontier = first_new..out.node.len();
        Ok(())
    }

    /// The finished sample; the workspaces stay for the next batch.
    pub(crate) fn take(&mut self) -> SampledSubgraph {
        std::mem::take(&mut self.out)
    }

    /// Bytes this batch holds now: its output, its dedup map and its workspaces (capacities,
    /// the map at about 20 bytes per slot with its control bytes). After [`Self::take`], the
    /// workspaces alone.
    pub(crate) fn bytes(&self) -> u64 {
        let o = &self.out;
        let v8 = |n: usize| n as u64 * 8;
        v8(o.node.capacity())
            + v8(o.row.capacity())
            + v8(o.col.capacity())
            + o.edge.as_ref().map_or(0, |e| v8(e.capacity()))
            + self.map.capacity() as u64 * 20
            + v8(self.pos.capacity())
            + v8(self.owner.capacity())
            + v8(self.nbr.capacity())
            + self.ranges.capacity() as u64 * 16
    }
}

/// The local id of global node `v`, appending it to `node` when it is new.
fn local_id(map: &mut IdMap, node: &mut Vec<u64>, v: u64) -> Result<u64> {
    let next = u32::try_from(node.len()).map_err(|_| Error::TooLarge)?;
    let id = *map.entry(v).or_insert_with(|| {
        node.push(v);
        next
    });
    Ok(id as u64)
}
