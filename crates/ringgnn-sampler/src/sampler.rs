//! The sampling loop: [`NeighborSampler::sample`] expands a mini-batch hop by hop (draw
//! positions for the whole frontier, fetch the hop's entries in one go, relabel), single
//! threaded. The worker pipeline (`ringgnn-pipeline`, driven by `ringgnn-loader`) runs one of
//! these per worker thread, made by [`crate::Graph::sampler`].

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use ringgnn_io::IoStats;
use ringgnn_store::rng::mix64;
use ringgnn_store::Dataset;

use crate::draw::{batch_rng, Drawer};
use crate::neighbors::NeighborSource;
use crate::{Error, Fanout, Result, SampledSubgraph, SeedSlice};

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

/// Node-wise uniform neighbor sampling (GraphSAGE, PyG semantics) over a CSC graph of which
/// only the offset index (`indptr`) is in memory.
pub struct NeighborSampler {
    /// Shared by the samplers of every thread (see [`crate::Graph`]): the one structure whose
    /// size follows `V`.
    indptr: Arc<[u64]>,
    fanouts: Vec<Fanout>,
    replace: bool,
    source: NeighborSource,
    // Workspaces reused across batches: their size follows the sample, never the graph.
    drawer: Drawer,
    map: IdMap,
    /// Edge positions drawn at the current hop, in draw order.
    pos: Vec<u64>,
    /// For each of `pos`, the local id of the node it was drawn for.
    owner: Vec<u64>,
    /// For each of `pos`, the neighbor id read from the file.
    nbr: Vec<u64>,
    /// `(indptr[v], indptr[v + 1])` of each frontier node of the current hop.
    ranges: Vec<(u64, u64)>,
}

impl NeighborSampler {
    /// A sampler over the offset index `indptr` (`V + 1` entries) reading neighbors from
    /// `source`. `fanouts[k]` is the number of neighbors drawn per node at hop `k + 1`;
    /// `replace` draws with replacement. Pass an `Arc<[u64]>` to share one index between
    /// several samplers (a `Vec<u64>` is moved into a new one).
    pub fn new(
        indptr: impl Into<Arc<[u64]>>,
        fanouts: &[Fanout],
        replace: bool,
        source: NeighborSource,
    ) -> Result<Self> {
        let indptr = indptr.into();
        check_indptr(&indptr, &source)?;
        Ok(NeighborSampler {
            indptr,
            fanouts: fanouts.to_vec(),
            replace,
            source,
            drawer: Drawer::default(),
            map: IdMap::default(),
            pos: Vec::new(),
            owner: Vec::new(),
            nbr: Vec::new(),
            ranges: Vec::new(),
        })
    }

    /// A sampler over dataset `ds`: loads its offset index, reads neighbors from `source`.
    pub fn open(
        ds: &Dataset,
        fanouts: &[Fanout],
        replace: bool,
        source: NeighborSource,
    ) -> Result<Self> {
        Self::new(ds.load_indptr()?, fanouts, replace, source)
    }

    pub fn num_nodes(&self) -> u64 {
        self.indptr.len() as u64 - 1
    }

    pub fn fanouts(&self) -> &[Fanout] {
        &self.fanouts
    }

    pub fn replace(&self) -> bool {
        self.replace
    }

    pub fn source(&self) -> &NeighborSource {
        &self.source
    }

    /// Stop disk reads between waves once `flag` is set: a sample in progress then ends with an
    /// `Interrupted` I/O error.
    pub fn set_cancel(&mut self, flag: Arc<std::sync::atomic::AtomicBool>) {
        self.source.set_cancel(flag);
    }

    /// Cumulative I/O counters of the source (reads issued, bytes read).
    pub fn io_stats(&self) -> IoStats {
        self.source.stats()
    }

    /// Sample the subgraph of mini-batch `batch` of epoch `epoch` around `seeds`.
    ///
    /// The result depends only on the graph, the fanouts, `replace`, `seeds` and
    /// `(seed, epoch, batch)`: never on the source. Duplicate seeds are kept once, at their
    /// first occurrence. Hop `k` expands only the nodes first reached at hop `k - 1`. With
    /// `with_edge_ids`, `edge` holds the position of every sampled edge in the neighbor file.
    /// The seeds were checked when their [`crate::Seeds`] was made, against this graph's node
    /// count (seeds checked against another graph are refused).
    pub fn sample(
        &mut self,
        seeds: SeedSlice<'_>,
        seed: u64,
        epoch: u64,
        batch: u64,
        with_edge_ids: bool,
    ) -> Result<SampledSubgraph> {
        let num_nodes = self.num_nodes();
        if seeds.num_nodes() != num_nodes {
            return Err(Error::Input(format!(
                "the seeds were checked against a graph of {} nodes, but this one has {num_nodes}",
                seeds.num_nodes()
            )));
        }
        let seeds = seeds.ids();
        let mut out = SampledSubgraph {
            edge: with_edge_ids.then(Vec::new),
            ..Default::default()
        };
        self.map.clear();
        for &s in seeds {
            local_id(&mut self.map, &mut out.node, s)?;
        }
        out.num_sampled_nodes.push(out.node.len());
        let mut rng = batch_rng(seed, epoch, batch);
        let mut frontier = 0..out.node.len();
        for &fanout in &self.fanouts {
            // Draw every position of the hop first (fixed RNG order), then read them together.
            self.pos.clear();
            self.owner.clear();
            // Load every frontier node's range first: the loads are independent, so the CPU
            // overlaps their cache misses (interleaved with the draws, each miss stalled the
            // degree-dependent branches: 39% of sampling time on a 131M-edge graph).
            self.ranges.clear();
            self.ranges.extend(frontier.clone().map(|l| {
                let v = out.node[l] as usize;
                (self.indptr[v], self.indptr[v + 1])
            }));
            for (l, &(lo, hi)) in frontier.clone().zip(&self.ranges) {
                let start = self.pos.len();
                self.drawer
                    .draw(&mut rng, hi - lo, fanout, self.replace, &mut self.pos);
                self.pos[start..].iter_mut().for_each(|p| *p += lo);
                self.owner.resize(self.pos.len(), l as u64);
            }
            self.nbr.clear();
            self.nbr.resize(self.pos.len(), 0);
            self.source.fetch(&self.pos, &mut self.nbr)?;
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
            frontier = first_new..out.node.len();
        }
        Ok(out)
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

/// The offset index must be well formed before any range is trusted: a bad one would make
/// `hi - lo` underflow or point past the neighbor file.
fn check_indptr(indptr: &[u64], source: &NeighborSource) -> Result<()> {
    let bad = |m: String| {
        Err(Error::Corrupt(format!(
            "offset index: {m}; rebuild the dataset"
        )))
    };
    match indptr.first() {
        None => return bad("it is empty, it needs num_nodes + 1 entries".into()),
        Some(&x) if x != 0 => return bad(format!("indptr[0] is {x}, not 0")),
        _ => {}
    }
    if let Some(v) = indptr.windows(2).position(|w| w[0] > w[1]) {
        return bad(format!(
            "indptr[{v}] = {} > indptr[{}] = {}",
            indptr[v],
            v + 1,
            indptr[v + 1]
        ));
    }
    let e = *indptr.last().unwrap();
    if let NeighborSource::Memory(ix) = source {
        if e > ix.len() as u64 {
            return bad(format!(
                "it ends at {e} but the neighbor file has {} entries",
                ix.len()
            ));
        }
    }
    Ok(())
}
