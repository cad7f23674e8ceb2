//! The sampling loop: [`NeighborSampler::sample`] expands a mini-batch hop by hop (draw
//! positions for the whole frontier, fetch the hop's entries in one go, relabel), single
//! threaded. The worker pipeline (`ringgnn-pipeline`, driven by `ringgnn-loader`) runs one of
//! these per worker thread, made by [`crate::Graph::sampler`].

use std::sync::Arc;

use ringgnn_io::IoStats;
use ringgnn_store::Dataset;

use crate::batch::{BatchDraw, DrawScratch, IdMap};
use crate::neighbors::NeighborSource;
use crate::{Error, Fanout, Offsets, Result, SampledSubgraph, SeedSlice};

/// What one sampled batch held (see [`NeighborSampler::last_batch_bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchBytes {
    /// Everything, when it was done: its output, its dedup map, the workspaces.
    pub total: u64,
    /// Its output.
    pub output: u64,
    /// What the same batch holds in a hyperbatch (a compact sample and one hop's positions,
    /// no dedup map: see [`crate::HyperSampler::peaks`]), and when its sample is spilled: its
    /// state before the last hop is relabelled, and its compact sample.
    pub hyper_state: u64,
    pub hyper_resident: u64,
    pub compact: u64,
}

/// Node-wise uniform neighbor sampling (GraphSAGE, PyG semantics) over a CSC graph of which
/// only the offset index (`indptr`) is in memory.
pub struct NeighborSampler {
    /// Shared by the samplers of every thread (see [`crate::Graph`]): the one structure whose
    /// size follows `V`.
    indptr: Offsets,
    fanouts: Vec<Fanout>,
    replace: bool,
    source: NeighborSource,
    /// The node count that neighbor entries are ids of: `indptr.len() - 1`, except for a
    /// bipartite relation ([`Self::bipartite`]).
    num_sources: u64,
    /// Made by [`Self::bipartite`]: at most one hop (its sampled sources are not destinations).
    bipartite: bool,
    /// The batch being sampled, with workspaces reused across batches: its state, its dedup
    /// map and the entries read at the current hop.
    state: BatchDraw,
    map: IdMap,
    ws: DrawScratch,
    nbr: Vec<u64>,
    /// The requests of [`Self::sample_many`] and their positions of a hop, all together.
    many: Vec<BatchDraw>,
    many_pos: Vec<u64>,
    /// What the last batch held when it was done.
    last_bytes: BatchBytes,
}

impl NeighborSampler {
    /// A sampler over the offset index `indptr` (`V + 1` entries) reading neighbors from
    /// `source`. `fanouts[k]` is the number of neighbors drawn per node at hop `k + 1`;
    /// `replace` draws with replacement. Pass an [`Offsets`] to share one index between
    /// several samplers (a `Vec<u64>` becomes a new one).
    pub fn new(
        indptr: impl Into<Offsets>,
        fanouts: &[Fanout],
        replace: bool,
        source: NeighborSource,
    ) -> Result<Self> {
        let indptr = indptr.into();
        let file_len = match &source {
            NeighborSource::Memory(ix) => Some(ix.len() as u64),
            NeighborSource::Disk(_) => None,
        };
        check_indptr(&indptr, file_len)?;
        let num_nodes = indptr.len() as u64 - 1;
        Ok(NeighborSampler {
            indptr,
            fanouts: fanouts.to_vec(),
            replace,
            source,
            num_sources: num_nodes,
            bipartite: false,
            state: BatchDraw::default(),
            map: IdMap::for_nodes(num_nodes),
            ws: DrawScratch::default(),
            nbr: Vec::new(),
            many: Vec::new(),
            many_pos: Vec::new(),
            last_bytes: BatchBytes::default(),
        })
    }

    /// A sampler of one bipartite relation: `indptr` has one neighbor range per destination
    /// node (`n_dst + 1` offsets; seeds are destination ids, checked against `n_dst`) and the
    /// neighbor entries are ids of `num_sources` source nodes, which may be more or fewer than
    /// the destinations. It samples one hop at most: its sampled sources are not destinations.
    ///
    /// Sources and destinations are separate id spaces: a sample's `node` holds the seeds
    /// (destination ids, `num_sampled_nodes[0]` of them), then the sampled sources (source ids,
    /// each once), and a source is never merged with a seed of the same id.
    pub fn bipartite(
        indptr: impl Into<Offsets>,
        num_sources: u64,
        fanouts: &[Fanout],
        replace: bool,
        source: NeighborSource,
    ) -> Result<Self> {
        check_bipartite_hops(fanouts.len())?;
        let mut s = Self::new(indptr, fanouts, replace, source)?;
        s.num_sources = num_sources;
        s.bipartite = true;
        s.map = IdMap::for_nodes(s.num_nodes().max(num_sources));
        Ok(s)
    }

    /// A sampler over dataset `ds`: loads its offset index, reads neighbors from `source`.
    pub fn open(
        ds: &Dataset,
        fanouts: &[Fanout],
        replace: bool,
        source: NeighborSource,
    ) -> Result<Self> {
        Self::new(Offsets::load(ds)?, fanouts, replace, source)
    }

    pub fn num_nodes(&self) -> u64 {
        self.indptr.len() as u64 - 1
    }

    /// The node count that neighbor entries are ids of: [`Self::num_nodes`], or the source
    /// count of a [`Self::bipartite`] sampler.
    pub fn num_sources(&self) -> u64 {
        self.num_sources
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

    /// What the last sampled batch held when it was done: what sampling takes in practice,
    /// next to the upper bounds of [`crate::bounds`].
    pub fn last_batch_bytes(&self) -> BatchBytes {
        self.last_bytes
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
        let (st, map, nbr, ws) = (&mut self.state, &mut self.map, &mut self.nbr, &mut self.ws);
        st.start(map, seeds.ids(), seed, epoch, batch, with_edge_ids)?;
        if self.bipartite {
            map.clear();
        }
        // What the batch would hold in a hyperbatch (see `crate::HyperSampler`): its compact
        // sample and its largest hop's positions with their buckets, and, spilled, what it
        // holds before its last hop is relabelled. A piece per node drawn from: a node's
        // positions are one stretch of the file, rarely across two chunks.
        let (mut hyper_resident, mut largest_hop) = (0, 0);
        for &fanout in &self.fanouts {
            // Draw every position of the hop first (fixed RNG order), then read them together.
            st.draw(&self.indptr, fanout, self.replace, ws)?;
            nbr.clear();
            nbr.resize(st.pos.len(), 0);
            self.source.fetch(&st.pos, nbr)?;
            // Lengths: this sampler's buffers keep the capacity of earlier, finished batches.
            let hop = crate::hyper::hop_bytes(&self.indptr, st.pos.len() as u64, st.hop_runs());
            largest_hop = largest_hop.max(hop);
            hyper_resident = st.out.len_bytes() + hop;
            st.relabel(nbr, map, self.num_sources)?;
        }
        let compact = st.out.bytes();
        let hyper_state = st.out.len_bytes() + largest_hop;
        // The compact buffers stay (for the next batch) next to the expanded sample.
        let out = st.finish();
        let held = st.bytes() + ws.bytes() + map.bytes() + 8 * nbr.capacity() as u64;
        self.last_bytes = BatchBytes {
            total: held + out.bytes(),
            output: out.bytes(),
            hyper_state,
            hyper_resident,
            compact,
        };
        Ok(out)
    }
}

/// One request of [`NeighborSampler::sample_many`]: seeds and everything that decides their
/// sample, as [`NeighborSampler::sample`] takes them, but with its own fanouts and `replace`.
#[derive(Clone, Copy, Debug)]
pub struct ManyRequest<'a> {
    pub seeds: SeedSlice<'a>,
    pub fanouts: &'a [Fanout],
    pub replace: bool,
    pub seed: u64,
    pub epoch: u64,
    pub batch: u64,
    pub with_edge_ids: bool,
}

impl NeighborSampler {
    /// Sample independent requests together: at each hop every request draws its positions
    /// (its own random stream, as alone), then all of them are read in one fetch (one set of
    /// coalesced I/O waves: a page two requests need is read once), then each relabels its
    /// hop. Each result is exactly what [`Self::sample`] gives for that request with a sampler
    /// of its fanouts and `replace`. This sampler's own fanouts are not used.
    pub fn sample_many(&mut self, reqs: &[ManyRequest<'_>]) -> Result<Vec<SampledSubgraph>> {
        let num_nodes = self.num_nodes();
        if let Some(r) = reqs.iter().find(|r| r.seeds.num_nodes() != num_nodes) {
            return Err(Error::Input(format!(
                "the seeds were checked against a graph of {} nodes, but this one has {num_nodes}",
                r.seeds.num_nodes()
            )));
        }
        if self.bipartite {
            reqs.iter()
                .try_for_each(|r| check_bipartite_hops(r.fanouts.len()))?;
        }
        if self.many.len() < reqs.len() {
            self.many.resize_with(reqs.len(), Default::default);
        }
        let (states, map) = (&mut self.many[..reqs.len()], &mut self.map);
        for (st, r) in states.iter_mut().zip(reqs) {
            st.start(
                map,
                r.seeds.ids(),
                r.seed,
                r.epoch,
                r.batch,
                r.with_edge_ids,
            )?;
        }
        let hops = reqs.iter().map(|r| r.fanouts.len()).max().unwrap_or(0);
        for k in 0..hops {
            let (pos, nbr, ws) = (&mut self.many_pos, &mut self.nbr, &mut self.ws);
            pos.clear();
            for (st, r) in states.iter_mut().zip(reqs) {
                if let Some(&f) = r.fanouts.get(k) {
                    st.draw(&self.indptr, f, r.replace, ws)?;
                    pos.extend_from_slice(&st.pos);
                }
            }
            nbr.clear();
            nbr.resize(pos.len(), 0);
            self.source.fetch(pos, nbr)?;
            let mut at = 0;
            for (st, r) in states.iter_mut().zip(reqs) {
                if k < r.fanouts.len() {
                    let n = st.pos.len();
                    if self.bipartite {
                        map.clear();
                    } else {
                        st.fill_map(map);
                    }
                    st.relabel(&nbr[at..at + n], map, self.num_sources)?;
                    at += n;
                }
            }
        }
        Ok(states.iter_mut().map(|st| st.finish()).collect())
    }
}

/// A bipartite sampler's sampled sources are not destinations: a second hop would look them up
/// in the destinations' offset index.
fn check_bipartite_hops(hops: usize) -> Result<()> {
    if hops > 1 {
        return Err(Error::Input(format!(
            "a bipartite relation samples one hop, not {hops}: its sources are not \
             destinations; sample further hops with the relations into the source type"
        )));
    }
    Ok(())
}

/// The offset index must be well formed before any range is trusted: a bad one would make
/// `hi - lo` underflow or point past the neighbor file.
pub(crate) fn check_indptr(indptr: &Offsets, entries: Option<u64>) -> Result<()> {
    let bad = |m: String| {
        Err(Error::Corrupt(format!(
            "offset index: {m}; rebuild the dataset"
        )))
    };
    match indptr.iter().next() {
        None => return bad("it is empty, it needs num_nodes + 1 entries".into()),
        Some(x) if x != 0 => return bad(format!("indptr[0] is {x}, not 0")),
        _ => {}
    }
    if let Some(v) = (0..indptr.len() - 1).find(|&v| indptr.get(v) > indptr.get(v + 1)) {
        return bad(format!(
            "indptr[{v}] = {} > indptr[{}] = {}",
            indptr.get(v),
            v + 1,
            indptr.get(v + 1)
        ));
    }
    let e = indptr.last().unwrap();
    if let Some(n) = entries {
        if e > n {
            return bad(format!(
                "it ends at {e} but the neighbor file has {n} entries"
            ));
        }
    }
    Ok(())
}
