//! [`HeteroSampler`]: neighbor sampling over typed nodes and relations (PyG's heterogeneous
//! `NeighborSampler` semantics). Each relation
//! `(S, R, D)` is its own CSC (an offset index of `n_D + 1` entries in memory, a neighbor file
//! of `S` ids behind a [`NeighborSource`]); each node type has its own id space, its own dedup
//! map and its own frontier. Its output is [`HeteroSample`].
//!
//! A hop draws, relation by relation, the positions of the whole frontier of the relation's
//! destination type with the same [`Drawer`] as the homogeneous sampler, then reads them in one
//! fetch (each relation's file is read once per hop, in coalesced page reads), then relabels.
//! Seeds may be of several types ([`HeteroSampler::sample_typed`]), and several batches may be
//! sampled together ([`HeteroSampler::sample_many`], a hyperbatch: each relation's positions of
//! all of them in one fetch per hop, each batch exactly as alone). Upper bounds on a sample and
//! on what a batch of a hyperbatch holds: `hetero/bound.rs`.
//!
//! **Threads** ([`HeteroSampler::set_threads`], one by default): a hyperbatch's work is split by
//! batch, its reads shared, as the homogeneous `HyperSampler` does. Per hop and relation, each
//! batch's count of positions (at seed times in memory, its search of edge times first) and
//! then its draws run on the threads (`hetero/hop.rs`), each batch into its own part of the
//! relation's positions; the one fetch of them all, from disk with 32-bit positions, is split
//! by file chunk over the threads, each with its own reader of the relation's file (opened at
//! the first such fetch and kept), and at seed times from disk the one search of every batch's
//! lists (the lists to search found on the threads, each its part of them) a slice of lists at a
//! time on whichever thread is free, each with its own reader of the times; the
//! wide fetch of 64-bit positions runs on the calling thread; then each
//! batch's relabelling of every relation runs on the threads (`hetero/relabel.rs`), at the last
//! hop in rounds of one batch a thread whose samples the calling thread hands out in batch
//! order. Per thread (a [`Scratch`], kept across calls): the dedup maps, the drawer, one node's
//! draws, one batch's frontier ranges and seed times; from disk, a reader of each relation's
//! file and of its times, its copies of one group of positions and its search of one slice. Shared: each relation's draws, entries and counts
//! ([`Drawn`]), the batches' states, the fetch's workspace and the search's. A batch's sample
//! depends on nothing a thread holds, so it is the same whatever the threads.
//!
//! **Sampling at a time** (PyG's temporal sampling with `disjoint=True`; the edge-time sources
//! and the search are `hetero/temporal.rs`): a request may give every seed a time. Its seeds
//! are then grouped by distinct time (group order: first appearance), and each group is its own
//! subgraph: a node reached in two groups is two nodes of the batch, seeds with the same time
//! share one. At every hop, a node expanded for a group at time `T` draws only among the edges
//! of time `<= T` of a relation with edge times (a prefix of its list, which is sorted by
//! (time, source id)); a relation without edge times offers all its edges. Every hop uses the
//! seed's time, never the time of the edge a node was reached by. [`TemporalStrategy::Uniform`]
//! draws as a non-temporal sample does over the eligible prefix (the same streams);
//! [`TemporalStrategy::Last`] takes its `k` most recent edges. Where the source type of a
//! relation has node times (in memory, [`HeteroSampler::set_node_times`]), a drawn neighbor
//! newer than `T` is dropped with its edge: pyg-lib instead draws among the neighbors not newer
//! than `T`, which needs lists sorted by node time; both leave no node newer than its seed.
//! `HeteroSample::time` gives each node the time of its group. A request without times samples
//! exactly as before (same output, same streams).

mod bound;
mod hop;
mod open;
mod record;
mod relabel;
mod temporal;

use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ringgnn_io::IoStats;

use crate::batch::local_id;
use crate::buckets::Workspace;
use crate::draw::Drawer;
use crate::hyper::par;
use crate::idmap::{with_table, GroupKeys, IdMap};
use crate::neighbors::{DiskNeighbors, NeighborSource};
use crate::sampler::check_indptr;
use crate::{Error, Fanout, Offsets, Result};
pub use bound::{hetero_bound, HeteroBound};
use hop::{Drawn, NarrowFetch};
pub use open::{fanouts_in_order, SharedRelation, TypedGraph};
use relabel::{Relabel, View};
use temporal::{check_times, Cutter, Groups};
pub use temporal::{EdgeTimes, TemporalStrategy, TimeKeys};

/// One relation `(S, R, D)` given to [`HeteroSampler::new`].
pub struct HeteroRelation {
    /// The index of its source type `S`: its neighbor entries are `S` ids.
    pub src: usize,
    /// The index of its destination type `D`.
    pub dst: usize,
    /// Its offset index: `n_D + 1` offsets into its neighbor file.
    pub indptr: Offsets,
    /// Where its neighbor entries are read from.
    pub source: NeighborSource,
    /// Neighbors drawn per destination node at each hop (`fanouts[0]` for the seeds);
    /// `Fanout::Count(0)` leaves the relation out of that hop.
    pub fanouts: Vec<Fanout>,
    /// Its edge times, one per entry of its neighbor file, if it has them.
    pub times: Option<EdgeTimes>,
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
/// - `time[t]`: for a request with seed times, parallel to `node[t]`, the seed time of the
///   subgraph each node belongs to; `None` without seed times. A node reached in two
///   subgraphs (two seed times) is in `node[t]` twice, once with each time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeteroSample {
    pub node: Vec<Vec<u64>>,
    pub num_sampled_nodes: Vec<Vec<usize>>,
    pub row: Vec<Vec<u64>>,
    pub col: Vec<Vec<u64>>,
    pub num_sampled_edges: Vec<Vec<usize>>,
    pub edge: Option<Vec<Vec<u64>>>,
    pub time: Option<Vec<Vec<i64>>>,
}

impl HeteroSample {
    /// Bytes of its id and time arrays (lengths, not capacities), as
    /// [`crate::SampledSubgraph::bytes`].
    pub fn bytes(&self) -> u64 {
        let len = |v: &[Vec<u64>]| v.iter().map(Vec::len).sum::<usize>();
        let edge = self.edge.as_deref().map_or(0, len);
        let time: usize = self.time.iter().flatten().map(Vec::len).sum();
        8 * (len(&self.node) + len(&self.row) + len(&self.col) + edge + time) as u64
    }
}

/// Node-wise uniform neighbor sampling over a heterogeneous graph whose relations' offset
/// indices are in memory and whose neighbor files are read through their sources. One per
/// pipeline worker (it owns its read backends), sampling a hyperbatch with
/// [`Self::set_threads`] threads; its workspaces (dedup maps, positions, entries read) are
/// reused from batch to batch.
///
/// What a batch of a hyperbatch holds between hops is its sample so far, its frontiers and its
/// seed-time groups ([`BatchState`]): the dedup maps are each thread's, one per node type,
/// refilled from a batch's nodes of that type when the thread relabels the batch (as the
/// homogeneous `HyperSampler` refills one per thread), so they do not grow with the hyperbatch.
pub struct HeteroSampler {
    num_nodes: Vec<u64>,
    rels: Vec<HeteroRelation>,
    hops: usize,
    replace: bool,
    strategy: TemporalStrategy,
    /// Per node type, its node times, if it has them.
    node_times: Vec<Option<Arc<[i64]>>>,
    /// Per batch of the current call, its frontiers and seed-time groups (kept for the next
    /// call).
    states: Vec<BatchState>,
    /// One per thread ([`Self::set_threads`]; one by default): the dedup maps, the draws'
    /// workspace and the ranges of the batch the thread draws or relabels ([`Scratch`]).
    scratch: Vec<Scratch>,
    /// `cuts[b]` ends batch `b`'s positions of the hop being drawn.
    cuts: Vec<usize>,
    /// Per relation, what every batch drew from it at the current hop.
    drawn: Vec<Drawn>,
    /// The sort keys of a wide fetch in place (see [`NeighborSource::fetch_in_place`]) and the
    /// workspace of a narrow one.
    keys: Vec<u64>,
    fetch: NarrowFetch,
    /// Per relation, the readers of its neighbor file besides its source, one per thread
    /// after the first: a narrow fetch from disk reads on every thread (opened at the first
    /// such fetch, kept; none in memory or where the source cannot open more).
    readers: Vec<Vec<NeighborSource>>,
    /// Per relation with edge times on disk, the readers of its times besides its own, one per
    /// thread after the first: the search of edge times reads on every thread (opened at the
    /// first search, kept).
    time_readers: Vec<Vec<DiskNeighbors>>,
    /// Per relation, its time keys read from disk, if it has them
    /// ([`Self::set_time_keys`]): its search from disk reads them instead of the times, then
    /// only the times the keys leave undecided.
    time_keys: Vec<Option<TimeKeys>>,
    /// Per relation with time keys, the readers of its keys besides its own, one per thread
    /// after the first (as `time_readers`).
    key_readers: Vec<Vec<DiskNeighbors>>,
    /// The workspace of the search of edge times read from disk (one slice's per reader).
    cutter: Cutter,
    /// Keep a batch's node lists and every hop's `row` in its sample, 64 bits, as they grow
    /// (tests of the wide state; else [`BatchState::nodes`] and [`BatchState::rows`] until
    /// the batch is finished).
    wide_state: bool,
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
                         node types ({}); give node counts for every type",
                        ringgnn_store::IdRange(types as u64)
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
            if let Some(EdgeTimes::Memory(t)) = &r.times {
                let edges = r.indptr.last().unwrap_or(0);
                if t.len() as u64 != edges {
                    return Err(Error::Input(format!(
                        "relation {i}: {} edge times for {edges} edges; give one time per \
                         entry of its neighbor file",
                        t.len()
                    )));
                }
            }
            if r.fanouts.len() != hops {
                return Err(Error::Input(format!(
                    "relation {i} has {} fanouts but relation 0 has {hops}: give every relation \
                     one fanout per hop (0 leaves it out of a hop)",
                    r.fanouts.len()
                )));
            }
        }
        Ok(HeteroSampler {
            states: Vec::new(),
            scratch: vec![Scratch::new(&num_nodes)],
            drawn: relations
                .iter()
                .map(|r| Drawn::new(r.indptr.last().unwrap_or(0), num_nodes[r.src]))
                .collect(),
            keys: Vec::new(),
            fetch: NarrowFetch::default(),
            readers: relations.iter().map(|_| Vec::new()).collect(),
            time_readers: relations.iter().map(|_| Vec::new()).collect(),
            time_keys: relations.iter().map(|_| None).collect(),
            key_readers: relations.iter().map(|_| Vec::new()).collect(),
            node_times: vec![None; num_nodes.len()],
            num_nodes,
            rels: relations,
            hops,
            replace,
            strategy: TemporalStrategy::default(),
            cuts: Vec::new(),
            cutter: Cutter::default(),
            wide_state: false,
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

    /// Upper bounds on one sample of `seeds[t]` seeds of each type `t` ([`hetero_bound`], with
    /// each relation's largest degree read from its offset index).
    pub fn bound(&self, seeds: &[u64]) -> HeteroBound {
        self.bound_at(seeds, 1)
    }

    /// [`Self::bound`] for a sample at seed times with `groups` distinct times: its subgraphs
    /// are apart, so a type may hold up to `groups` times its node count and a relation up to
    /// `groups` times its edges.
    pub fn bound_at(&self, seeds: &[u64], groups: u64) -> HeteroBound {
        let g = groups.max(1);
        let rels: Vec<(usize, usize, &[Fanout], u64, u64)> = self
            .rels
            .iter()
            .map(|r| {
                let max_degree = r.indptr.degrees().max().unwrap_or(0);
                let edges = r.indptr.last().unwrap_or(0).saturating_mul(g);
                (r.src, r.dst, r.fanouts.as_slice(), max_degree, edges)
            })
            .collect();
        let nodes: Vec<u64> = self
            .num_nodes
            .iter()
            .map(|&n| n.saturating_mul(g))
            .collect();
        hetero_bound(seeds, &nodes, &rels, self.replace)
    }

    /// Bytes its workspaces hold now: every thread's dedup maps (one per node type, sized for
    /// the largest batch the thread relabelled), ranges and draws of one node, and the per-hop
    /// buffers (every relation's positions and entries read and each frontier node's count of
    /// them, the sort order of each relation's fetch, and at seed times the search's), as grown
    /// by the calls so far. After a call of `h` batches, `1 / h` of what is not
    /// [`Self::scratch_bytes`] is what one batch of a hyperbatch holds besides its sample,
    /// measured (a loader sizes hyperbatches with it).
    pub fn held_bytes(&self) -> u64 {
        let threads: u64 = self.scratch.iter().map(Scratch::bytes).sum();
        let drawn: usize = self.drawn.iter().map(Drawn::bytes).sum::<usize>()
            + self.states.iter().map(BatchState::bytes).sum::<usize>();
        let buffers =
            8 * (self.cuts.capacity() + self.keys.capacity()) + self.fetch.bytes() + drawn;
        let fetch: u64 = self.rels.iter().map(|r| r.source.workspace_bytes()).sum();
        threads + buffers as u64 + fetch + self.reader_bytes() + self.cutter.bytes()
    }

    /// Bytes the batch of `sample` held, its sample's part, before its last hop was relabelled,
    /// when the samples of a hyperbatch are handed out as each is finished
    /// ([`HeteroSample::resident_bytes_with`]): a node 4 B where its type's ids fit 32 bits and
    /// the sample is not at seed times (its node list held compact), else 8.
    pub fn resident_bytes(&self, sample: &HeteroSample) -> u64 {
        let narrow = !self.wide_state && sample.time.is_none();
        let width: Vec<u64> = (self.num_nodes.iter())
            .map(|&n| if narrow && n <= 1 << 32 { 4 } else { 8 })
            .collect();
        sample.resident_bytes_with(&width)
    }

    /// Of [`Self::held_bytes`], the dedup maps: one per node type and thread whatever the
    /// hyperbatch size.
    pub fn map_bytes(&self) -> u64 {
        self.scratch.iter().map(Scratch::map_bytes).sum()
    }

    /// Of [`Self::held_bytes`], what does not grow with the hyperbatch size: per thread, its
    /// dedup maps, the ranges of one batch's frontier (in memory at seed times, their limits
    /// too), one node's draws and the copy of one batch's 32-bit positions bucketed from disk;
    /// the search of edge times read from disk but its order of the lists (one slice of lists
    /// searched at a time); where a relation's last hop was fetched with 32-bit positions, the
    /// fetch's copies of one group of them (a bounded number whatever the hyperbatch) and its
    /// source's sort workspace, sized for one group. The rest, over the batches of the last
    /// call, is what each batch holds.
    pub fn scratch_bytes(&self) -> u64 {
        let sources: u64 = (self.rels.iter().zip(&self.drawn))
            .filter(|(_, d)| d.is_narrow())
            .map(|(r, _)| r.source.workspace_bytes())
            .sum();
        let threads: u64 = self.scratch.iter().map(Scratch::bytes).sum();
        threads + self.fetch.group_bytes() + sources + self.reader_bytes() + self.cutter.bytes()
    }

    /// Of [`Self::scratch_bytes`], the read buffers of the readers its threads after the first
    /// opened (of neighbor files for a narrow fetch from disk, of edge-time files for the
    /// search): fixed by their read options, whatever the batches, so a plan counts them as
    /// they are, where it puts a margin on the rest it measured.
    pub fn thread_buffer_bytes(&self) -> u64 {
        let sources: u64 = (self.readers.iter().flatten())
            .map(NeighborSource::buffer_bytes)
            .sum();
        let times: u64 = (self.time_readers.iter().flatten())
            .map(DiskNeighbors::buffer_bytes)
            .sum();
        sources + times
    }

    /// Of [`Self::scratch_bytes`], the readers a narrow fetch from disk opened for its threads
    /// after the first: each one's read buffer and fetch workspace (sized for one group).
    fn reader_bytes(&self) -> u64 {
        let sources: u64 = (self.readers.iter().flatten())
            .map(|s| s.buffer_bytes() + s.workspace_bytes())
            .sum();
        let keys = self.time_keys.iter().flatten().map(|k| &k.disk);
        let times: u64 = (self.time_readers.iter().flatten())
            .chain(self.key_readers.iter().flatten())
            .map(|d| d.buffer_bytes() + d.workspace_bytes())
            .sum::<u64>()
            + keys.map(|d| d.buffer_bytes()).sum::<u64>();
        sources + times
    }

    /// Sample a hyperbatch with `threads` threads (0 is taken as 1; 1 by default): each hop's
    /// draws and each batch's relabelling are split by batch over them (see
    /// [`Self::sample_each`]), each thread with its own workspaces (`Scratch`), kept across calls. The
    /// samples are the same whatever the threads.
    pub fn set_threads(&mut self, threads: usize) {
        let num_nodes = &self.num_nodes;
        self.scratch
            .resize_with(threads.max(1), || Scratch::new(num_nodes));
        for more in &mut self.readers {
            more.truncate(threads.max(1) - 1);
        }
        for more in self.time_readers.iter_mut().chain(&mut self.key_readers) {
            more.truncate(threads.max(1) - 1);
        }
    }

    /// The threads a hyperbatch is sampled with ([`Self::set_threads`]).
    pub fn threads(&self) -> usize {
        self.scratch.len()
    }

    /// Search edge times on disk through at most `lists` neighbor lists at once: for tests,
    /// which need a hop's lists in several slices on small graphs. The samples are the same
    /// whatever the slice.
    #[doc(hidden)]
    pub fn set_cut_slice(&mut self, lists: usize) {
        self.cutter.set_slice(lists);
    }

    /// Group a fetch of 32-bit positions by chunks of `per_chunk` entries of each relation's
    /// file, at most `group` positions a read (or one chunk's): for tests, which need many
    /// chunks and groups on small graphs. The samples are the same whatever the groups.
    #[doc(hidden)]
    pub fn set_fetch_groups(&mut self, per_chunk: u64, group: usize) {
        for (r, d) in self.rels.iter().zip(&mut self.drawn) {
            d.set_chunks(r.indptr.last().unwrap_or(0), per_chunk);
        }
        self.fetch.group = group.max(1);
    }

    /// Keep a batch's node lists and its rows of the hops before its last in its sample, 64
    /// bits, rather than 32 until it is finished: for tests, which compare the two. The
    /// samples are the same.
    #[doc(hidden)]
    pub fn set_wide_state(&mut self, wide: bool) {
        self.wide_state = wide;
    }

    /// Cumulative I/O counters, summed over the relations' sources and edge-time sources.
    pub fn io_stats(&self) -> IoStats {
        let sources = self.rels.iter().flat_map(|r| {
            let times = r.times.as_ref().map(EdgeTimes::stats);
            std::iter::once(r.source.stats()).chain(times)
        });
        let more = self.readers.iter().flatten().map(NeighborSource::stats);
        let keys = self.time_keys.iter().flatten().map(|k| &k.disk);
        let times = (self.time_readers.iter().flatten())
            .chain(self.key_readers.iter().flatten())
            .chain(keys)
            .map(DiskNeighbors::stats);
        let sources = sources.chain(more).chain(times);
        sources.fold(IoStats::default(), |a, s| IoStats {
            reads: a.reads + s.reads,
            bytes: a.bytes + s.bytes,
            batches: a.batches + s.batches,
        })
    }

    /// Stop disk reads between waves once `flag` is set, for every relation: a sample in
    /// progress then ends with an `Interrupted` I/O error.
    pub fn set_cancel(&mut self, flag: Arc<AtomicBool>) {
        for s in self.readers.iter_mut().flatten() {
            s.set_cancel(flag.clone());
        }
        for d in (self.time_readers.iter_mut().flatten())
            .chain(self.key_readers.iter_mut().flatten())
            .chain(self.time_keys.iter_mut().flatten().map(|k| &mut k.disk))
        {
            d.set_cancel(flag.clone());
        }
        for r in &mut self.rels {
            r.source.set_cancel(flag.clone());
            // Readers opened later take the source's flag.
            if let Some(t) = &mut r.times {
                t.set_cancel(flag.clone());
            }
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
        let request = HeteroRequest {
            seeds,
            batch,
            times: None,
        };
        let mut out = self.sample_many(&[request], seed, epoch, with_edge_ids)?;
        Ok(out.pop().expect("one sample per request"))
    }

    /// Sample several mini-batches of epoch `epoch` together, a *hyperbatch*: hop by hop, and
    /// at each hop relation by relation, every batch draws its positions from its own stream
    /// (exactly as [`HeteroSampler::sample_typed`] alone), the positions of all of them are
    /// read in **one** fetch of the relation's file (sorted and page-coalesced, so a page that
    /// several batches need is read once per hop), and each batch relabels its own entries.
    /// Sample `i` is therefore the one `sample_typed(requests[i].seeds, seed, epoch,
    /// requests[i].batch, with_edge_ids)` gives, whatever the requests beside it and the
    /// sources (with its seed times, if it has them: see the module docs). Every request is
    /// checked before anything is read.
    pub fn sample_many(
        &mut self,
        requests: &[HeteroRequest<'_>],
        seed: u64,
        epoch: u64,
        with_edge_ids: bool,
    ) -> Result<Vec<HeteroSample>> {
        let mut outs = Vec::with_capacity(requests.len());
        self.sample_each(requests, seed, epoch, with_edge_ids, &mut |_, s| {
            outs.push(s);
            Ok(())
        })?;
        Ok(outs)
    }

    /// [`Self::sample_many`], each sample handed to `each` (with its index in `requests`, in
    /// that order) as soon as its last hop is relabelled, and dropped here: a hyperbatch then
    /// holds every batch's state only until its last hop is drawn and read, and a caller that
    /// writes finished samples out (a spill file) never holds them all. An error from `each`
    /// ends the call.
    pub fn sample_each(
        &mut self,
        requests: &[HeteroRequest<'_>],
        seed: u64,
        epoch: u64,
        with_edge_ids: bool,
        each: &mut dyn FnMut(usize, HeteroSample) -> Result<()>,
    ) -> Result<()> {
        let types = self.num_nodes.len();
        for req in requests {
            check_times(req)?;
            for &(seed_type, ids) in req.seeds {
                if seed_type >= types {
                    return Err(Error::Input(format!(
                        "seed type {seed_type} is out of range: there are {types} node types \
                         ({})",
                        ringgnn_store::IdRange(types as u64)
                    )));
                }
                let n = self.num_nodes[seed_type];
                if let Some(&id) = ids.iter().find(|&&s| s >= n) {
                    return Err(Error::Input(format!(
                        "seed node {id} of node type {seed_type} is out of range: that type \
                         has {n} nodes ({})",
                        ringgnn_store::IdRange(n)
                    )));
                }
            }
        }
        let rels = self.rels.len();
        let empty = || HeteroSample {
            node: vec![Vec::new(); types],
            num_sampled_nodes: vec![Vec::with_capacity(self.hops + 1); types],
            row: vec![Vec::new(); rels],
            col: vec![Vec::new(); rels],
            num_sampled_edges: vec![Vec::with_capacity(self.hops); rels],
            edge: with_edge_ids.then(|| vec![Vec::new(); rels]),
            time: None,
        };
        let mut outs: Vec<HeteroSample> = requests.iter().map(|_| empty()).collect();
        while self.states.len() < requests.len() {
            self.states.push(BatchState::new(types, rels));
        }
        // The seeds go in on the calling thread, through the first thread's maps; no thread's
        // maps hold a batch of this call before.
        self.scratch.iter_mut().for_each(|sc| sc.held_by.fill(None));
        for (b, ((req, out), st)) in requests
            .iter()
            .zip(&mut outs)
            .zip(&mut self.states)
            .enumerate()
        {
            st.groups.clear(req.times.is_some());
            st.cols.iter_mut().for_each(Vec::clear);
            st.rows.iter_mut().for_each(Vec::clear);
            for (t, (nodes, narrow)) in st.nodes.iter_mut().zip(&mut st.narrow).enumerate() {
                // Ids of a type of at most 2^32 nodes fit 32 bits; a batch at seed times keys
                // its nodes by group too (64 bits).
                *narrow = !self.wide_state && req.times.is_none() && self.num_nodes[t] <= 1 << 32;
                nodes.clear();
            }
            if let Some(times) = req.times {
                times.iter().flat_map(|t| t.iter()).for_each(|&t| {
                    st.groups.group(t);
                });
                for (t, &n) in self.num_nodes.iter().enumerate() {
                    let keys = st.groups.keys(n, t)?;
                    // Any thread may relabel the batch.
                    for sc in &mut self.scratch {
                        sc.maps[t].widen_for(keys);
                    }
                }
            }
            let sc = &mut self.scratch[0];
            for (t, map) in sc.maps.iter_mut().enumerate() {
                let n: usize = req
                    .seeds
                    .iter()
                    .filter(|s| s.0 == t)
                    .map(|s| s.1.len())
                    .sum();
                map.clear_for(n);
            }
            for (i, &(seed_type, ids)) in req.seeds.iter().enumerate() {
                if st.narrow[seed_type] {
                    let node = &mut st.nodes[seed_type];
                    with_table!(sc.maps[seed_type], t => ids.iter()
                        .try_for_each(|&s| local_id(t, node, s).map(drop)))?;
                    continue;
                }
                let node = &mut out.node[seed_type];
                let (groups, n) = (&mut st.groups, self.num_nodes[seed_type]);
                with_table!(sc.maps[seed_type], t => match req.times {
                    None => ids.iter().try_for_each(|&s| local_id(t, node, s).map(drop)),
                    Some(times) => ids.iter().zip(times[i]).try_for_each(|(&s, &time)| {
                        local_id(t, node, GroupKeys::key(groups.group(time), n, s)).map(drop)
                    }),
                })?;
            }
            for t in 0..types {
                st.frontier[t] = 0..st.count(out, t);
                out.num_sampled_nodes[t].push(st.frontier[t].len());
                sc.held_by[t] = Some((b, st.count(out, t)));
            }
        }
        if self.hops == 0 {
            for (b, out) in outs.into_iter().enumerate() {
                let mut out = out;
                self.states[b].finish_nodes(&mut out);
                self.states[b].groups.finish(&mut out, &self.num_nodes);
                each(b, out)?;
            }
            return Ok(());
        }
        for k in 0..self.hops {
            // Every relation's draws and reads first (a hop's frontiers are fixed when it
            // starts), then each batch relabels all of them, relation by relation, with the
            // maps refilled once for it: the same local ids as relabelling relation by relation
            // across the batches.
            for r in 0..rels {
                self.hop(r, k, (seed, epoch), requests, &mut outs)?;
            }
            let view = View::new(
                &self.rels,
                &self.num_nodes,
                &self.node_times,
                &self.drawn,
                (self.hops, self.wide_state),
            );
            let (scratch, last) = (&mut self.scratch, k + 1 == self.hops);
            let mut items: Vec<Relabel<'_>> = (self.states.iter_mut().zip(&mut outs))
                .enumerate()
                .map(|(b, (st, out))| Relabel {
                    b,
                    st,
                    out,
                    done: None,
                })
                .collect();
            if !last {
                par(&mut items, scratch, |sc, it| it.run(&view, sc, k))?;
                continue;
            }
            // The last hop in rounds of one batch a thread, each round's samples handed to
            // `each` here, in batch order, once the round is relabelled: at most one finished
            // sample a thread is held at once. The first error (in batch order) ends the call
            // after the samples before it were handed out, as on one thread.
            for round in items.chunks_mut(scratch.len()) {
                let done = par(round, scratch, |sc, it| it.run(&view, sc, k));
                for it in round.iter_mut() {
                    match it.done.take() {
                        Some(sample) => each(it.b, sample)?,
                        None => break,
                    }
                }
                done?;
            }
        }
        Ok(())
    }
}

/// The error for entry `p` of relation `r`'s neighbor file, `u`, not a node of its source type
/// `src` of `n_src` nodes.
fn corrupt_entry(r: usize, p: u64, u: u64, src: usize, n_src: u64) -> Error {
    Error::Corrupt(format!(
        "entry {p} of the neighbor file of relation {r} is {u}, but its source type {src} has \
         {n_src} nodes; the dataset is damaged, run `ringgnn verify`"
    ))
}

/// One mini-batch of a [`HeteroSampler::sample_many`] call: its seeds per type and its index
/// in the epoch (which picks its random streams).
#[derive(Clone, Copy, Debug)]
pub struct HeteroRequest<'a> {
    pub seeds: &'a [(usize, &'a [u64])],
    pub batch: u64,
    /// Per list of `seeds`, the time of each of its seeds (parallel to the ids); `None`: not
    /// temporal.
    pub times: Option<&'a [&'a [i64]]>,
}

/// What one batch keeps between the hops of a hyperbatch besides its sample: the frontier of
/// each node type (local ids first reached at the previous hop), its seed-time groups (its
/// dedup maps are refilled from its node lists when it is relabelled), and compact, until it is
/// finished, its node lists of types whose ids fit 32 bits and its edges of the hops before
/// the last.
struct BatchState {
    frontier: Vec<Range<usize>>,
    groups: Groups,
    /// Per node type, whether its node list is held here, 32 bits (`nodes[t]`), rather than in
    /// the sample: where its ids fit, and the batch is not at seed times.
    narrow: Vec<bool>,
    nodes: Vec<Vec<u32>>,
    /// Per relation, its `col` of the hops before the last relabelled so far: a count per
    /// frontier node (4 B a node, not 8 B an edge), expanded once the batch is finished.
    cols: Vec<Vec<u32>>,
    /// Per relation, its `row` of the hops before the last: local ids, which fit 32 bits (4 B
    /// an edge, not 8), widened once the batch is finished (empty with `wide_state`).
    rows: Vec<Vec<u32>>,
}

impl BatchState {
    fn new(types: usize, rels: usize) -> Self {
        BatchState {
            frontier: vec![0..0; types],
            groups: Groups::default(),
            narrow: vec![false; types],
            nodes: vec![Vec::new(); types],
            cols: vec![Vec::new(); rels],
            rows: vec![Vec::new(); rels],
        }
    }

    /// Its counts (capacities; its node lists and rows are its sample's,
    /// [`HeteroSampler::resident_bytes`]).
    fn bytes(&self) -> usize {
        4 * self.cols.iter().map(Vec::capacity).sum::<usize>()
    }

    /// Its nodes of type `t` so far (`out`: its sample).
    fn count(&self, out: &HeteroSample, t: usize) -> usize {
        match self.narrow[t] {
            true => self.nodes[t].len(),
            false => out.node[t].len(),
        }
    }

    /// Its nodes of type `t` so far, in local id order.
    fn ids<'a>(&'a self, out: &'a HeteroSample, t: usize) -> Ids<'a> {
        match self.narrow[t] {
            true => Ids::Narrow(&self.nodes[t]),
            false => Ids::Wide(&out.node[t]),
        }
    }

    /// Its node lists held here widened into `out`, and freed: what holding them saves.
    fn finish_nodes(&mut self, out: &mut HeteroSample) {
        for ((nodes, &narrow), node) in self.nodes.iter_mut().zip(&self.narrow).zip(&mut out.node) {
            if narrow {
                *node = nodes.iter().map(|&v| v as u64).collect();
                *nodes = Vec::new();
            }
        }
    }
}

/// What one thread lends the batches it draws or relabels, kept across calls (one per thread
/// of [`HeteroSampler::set_threads`]; what is shared is each relation's draws and fetch,
/// [`Drawn`], the batches' states and the search of edge times from disk, whose readers and
/// slices' workspaces are kept per reader with the fetch and the search).
pub(super) struct Scratch {
    /// Per node type, the dedup map of the batch the thread relabels: its nodes of that type
    /// (keys) and their local ids, refilled batch by batch; `held_by[t]`: the batch (of the
    /// current call) whose nodes map `t` holds and their count then, so that a map another
    /// thread has since grown the batch past is refilled, and a batch alone never is.
    pub(super) maps: Vec<IdMap>,
    pub(super) held_by: Vec<Option<(usize, usize)>>,
    pub(super) drawer: Drawer,
    /// One node's draws before they join the hop's positions.
    pub(super) tmp: Vec<u64>,
    /// Per frontier node of the batch being drawn, its neighbor range (cut at seed times), and
    /// for a batch at seed times searched in memory its seed time.
    pub(super) ranges: Vec<(u64, u64)>,
    /// The batch (of the current hop) whose ranges `ranges` holds as counted, if any.
    pub(super) ranges_of: Option<usize>,
    pub(super) limits: Vec<i64>,
    /// The copy of one batch's 32-bit positions that bucketing them by chunk from disk goes
    /// through ([`crate::buckets::Workspace`]).
    pub(super) moves: Workspace<u32>,
}

impl Scratch {
    fn new(num_nodes: &[u64]) -> Self {
        Scratch {
            maps: num_nodes.iter().map(|&n| IdMap::for_nodes(n)).collect(),
            held_by: vec![None; num_nodes.len()],
            drawer: Drawer::default(),
            tmp: Vec::new(),
            ranges: Vec::new(),
            ranges_of: None,
            limits: Vec::new(),
            moves: Workspace::default(),
        }
    }

    fn map_bytes(&self) -> u64 {
        self.maps.iter().map(IdMap::bytes).sum()
    }

    fn bytes(&self) -> u64 {
        let buffers =
            16 * self.ranges.capacity() + 8 * (self.limits.capacity() + self.tmp.capacity());
        self.map_bytes() + buffers as u64 + self.moves.bytes()
    }
}

/// A batch's node ids of one type, in local id order, as held ([`BatchState::ids`]).
#[derive(Clone, Copy)]
enum Ids<'a> {
    Narrow(&'a [u32]),
    Wide(&'a [u64]),
}

impl<'a> Ids<'a> {
    fn slice(self, r: Range<usize>) -> Self {
        match self {
            Ids::Narrow(v) => Ids::Narrow(&v[r]),
            Ids::Wide(v) => Ids::Wide(&v[r]),
        }
    }

    /// Its `i`-th id.
    fn at(self, i: usize) -> u64 {
        match self {
            Ids::Narrow(v) => v[i] as u64,
            Ids::Wide(v) => v[i],
        }
    }

    fn len(self) -> usize {
        match self {
            Ids::Narrow(v) => v.len(),
            Ids::Wide(v) => v.len(),
        }
    }

    fn iter(self) -> impl Iterator<Item = u64> + 'a {
        let (n, w) = match self {
            Ids::Narrow(v) => (v, &[][..]),
            Ids::Wide(v) => (&[][..], v),
        };
        n.iter().map(|&v| v as u64).chain(w.iter().copied())
    }
}
