//! Sampling at seed times with [`HeteroSampler`]: exact samples of tiny graphs worked out by
//! hand (uniform and last, a seed before every edge, disjoint subgraphs per seed time, the seed's
//! time at every hop, node times), a property test on random temporal graphs (nothing newer
//! than its seed, every backend identical, hyperbatches identical to single batches, a time
//! above every edge equal to non-temporal sampling), uniformity over the eligible prefix, clear
//! errors, and a homogeneous dataset opened as the one-type typed graph, with time files.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use ringgnn_io::{open_backend, probe_uring, BackendKind, CoalesceOptions};
use ringgnn_sampler::{
    EdgeTimes, Error, Fanout, HeteroRelation, HeteroRequest, HeteroSample, HeteroSampler, Indices,
    NeighborSampler, NeighborSource, Seeds, TemporalStrategy, TimeKeys, TypedGraph,
};
use ringgnn_store::manifest::{IndexDtype, TimeRange};

use Fanout::{All, Count};

mod common;
use common::timed::{self, write_padded, Graph, NodeTimes, Rel, Shape};

/// Where a sampler reads neighbor entries and edge times from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Backend {
    Memory,
    /// Disk reads with this backend, `O_DIRECT` or not, through this read buffer.
    Disk(BackendKind, bool, CoalesceOptions),
    /// [`Backend::Disk`], each relation's times searched over its time keys
    /// (`edge_time_keys.bin`, derived from its times).
    Keyed(BackendKind, bool, CoalesceOptions),
}

const SMALL: CoalesceOptions = CoalesceOptions {
    max_run: 4096,
    buffer: 4096,
};

fn backends() -> Vec<Backend> {
    let mut b = vec![
        Backend::Memory,
        Backend::Disk(BackendKind::Pread, false, CoalesceOptions::default()),
        Backend::Disk(BackendKind::Pread, false, SMALL),
        Backend::Disk(BackendKind::Pread, true, CoalesceOptions::default()),
        Backend::Keyed(BackendKind::Pread, false, CoalesceOptions::default()),
        Backend::Keyed(BackendKind::Pread, false, SMALL),
        Backend::Keyed(BackendKind::Pread, true, CoalesceOptions::default()),
    ];
    match probe_uring() {
        Ok(()) => {
            b.push(Backend::Disk(BackendKind::Uring, false, SMALL));
            b.push(Backend::Keyed(BackendKind::Uring, true, SMALL));
            b.push(Backend::Disk(
                BackendKind::Uring,
                true,
                CoalesceOptions::default(),
            ));
        }
        Err(why) => eprintln!("skipping the io_uring backend: {why}"),
    }
    b
}

/// A relation's time range from its times, as a dataset's manifest records it (or not, or wrong).
type Range = fn(&[i64]) -> Option<TimeRange>;

impl Graph {
    /// A sampler reading from `backend` (files written in `dir`), or `None` when `O_DIRECT`
    /// is not available there.
    fn sampler(
        &self,
        fanouts: &[Vec<Fanout>],
        strategy: TemporalStrategy,
        replace: bool,
        backend: Backend,
        dir: &Path,
    ) -> Option<HeteroSampler> {
        self.sampler_in(fanouts, (strategy, replace), backend, dir, |_| None)
    }

    /// [`Self::sampler`], each relation's times read from disk searched from `range(times)`
    /// (what a dataset's manifest gives: the search's first guess).
    fn sampler_in(
        &self,
        fanouts: &[Vec<Fanout>],
        (strategy, replace): (TemporalStrategy, bool),
        backend: Backend,
        dir: &Path,
        range: Range,
    ) -> Option<HeteroSampler> {
        let (mut rels, mut keys) = (vec![], vec![]);
        for (i, (r, f)) in self.rels.iter().zip(fanouts).enumerate() {
            let (source, times) = match backend {
                Backend::Memory => (
                    NeighborSource::Memory(Arc::new(Indices::U64(r.indices.clone()))),
                    EdgeTimes::Memory(r.times.clone().into()),
                ),
                Backend::Disk(kind, direct, opts) | Backend::Keyed(kind, direct, opts) => {
                    let ix = r.indices.iter().flat_map(|&x| (x as u32).to_le_bytes());
                    let ix = write_padded(dir, &format!("rel{i}.bin"), ix.collect());
                    let t = r.times.iter().flat_map(|&x| x.to_le_bytes());
                    let t = write_padded(dir, &format!("rel{i}_times.bin"), t.collect());
                    let Ok((reader, _)) = open_backend(kind, &ix, direct) else {
                        eprintln!("skipping O_DIRECT: not available in {}", dir.display());
                        return None;
                    };
                    let source = NeighborSource::disk(reader, &ix, IndexDtype::U32, opts);
                    let n = r.times.len() as u64;
                    let (times, _) = EdgeTimes::open(&t, n, kind, direct, opts).unwrap();
                    if let Backend::Keyed(..) = backend {
                        let k = dir.join(format!("rel{i}_keys.bin"));
                        ringgnn_store::time_keys::derive(&t, n, &k).unwrap();
                        let bounds = TimeKeys::bounds(&k).unwrap();
                        keys.push((i, TimeKeys::open(&k, n, bounds, (kind, direct), opts)));
                    }
                    (source, times.with_range(range(&r.times)))
                }
            };
            rels.push(HeteroRelation {
                src: r.src,
                dst: r.dst,
                indptr: r.indptr.clone().into(),
                source,
                fanouts: f.clone(),
                times: Some(times),
            });
        }
        let mut s = HeteroSampler::new(self.num_nodes.clone(), rels, replace).unwrap();
        for (i, k) in keys {
            s.set_time_keys(i, k.unwrap().0).unwrap();
        }
        s.set_temporal_strategy(strategy);
        let nt = self.node_times.iter().map(|t| t.clone().map(Arc::from));
        s.set_node_times(nt.collect()).unwrap();
        Some(s)
    }
}

/// The one-type graph of the hand-worked tests: 5 nodes, its in-lists as `(source, time)`:
/// node 0 <- (3, 1) (1, 2) (2, 2) (4, 5), node 1 <- (4, 3), node 2 <- nothing,
/// node 3 <- (0, 0) (4, 4), node 4 <- (2, 6). Positions in the files: node 0 at 0..4, node 1 at
/// 4, node 3 at 5..7, node 4 at 7.
fn tiny() -> Graph {
    let lists = vec![
        vec![(3, 1), (1, 2), (2, 2), (4, 5)],
        vec![(4, 3)],
        vec![],
        vec![(0, 0), (4, 4)],
        vec![(2, 6)],
    ];
    Graph {
        num_nodes: vec![5],
        rels: vec![Rel::new(0, 0, &lists)],
        node_times: vec![None],
    }
}

/// Sample one request of seeds of type 0 at `times` with every backend (all must agree).
fn at(
    g: &Graph,
    fanouts: &[Fanout],
    strategy: TemporalStrategy,
    seeds: &[u64],
    times: &[i64],
) -> HeteroSample {
    let dir = tempfile::tempdir().unwrap();
    let mut first: Option<HeteroSample> = None;
    for b in backends() {
        let fan = vec![fanouts.to_vec(); g.rels.len()];
        let Some(mut s) = g.sampler(&fan, strategy, false, b, dir.path()) else {
            continue;
        };
        let req = HeteroRequest {
            seeds: &[(0, seeds)],
            batch: 0,
            times: Some(&[times]),
        };
        let out = s.sample_many(&[req], 7, 0, true).unwrap().pop().unwrap();
        match &first {
            None => first = Some(out),
            Some(f) => assert_eq!(&out, f, "{b:?}"),
        }
    }
    first.unwrap()
}

/// A one-type sample written out: nodes with their times, edges `(row, col, edge)`, counts.
fn sample(
    node: &[(u64, i64)],
    nodes: &[usize],
    edges: &[(u64, u64, u64)],
    counts: &[usize],
) -> HeteroSample {
    HeteroSample {
        node: vec![node.iter().map(|n| n.0).collect()],
        time: Some(vec![node.iter().map(|n| n.1).collect()]),
        num_sampled_nodes: vec![nodes.to_vec()],
        row: vec![edges.iter().map(|e| e.0).collect()],
        col: vec![edges.iter().map(|e| e.1).collect()],
        edge: Some(vec![edges.iter().map(|e| e.2).collect()]),
        num_sampled_edges: vec![counts.to_vec()],
    }
}

const UNIFORM: TemporalStrategy = TemporalStrategy::Uniform;
const LAST: TemporalStrategy = TemporalStrategy::Last;

#[test]
fn uniform_with_a_fanout_above_the_eligible_count_takes_exactly_the_eligible_edges() {
    // Node 0 at time 2: (3, 1) (1, 2) (2, 2) are eligible, (4, 5) is not.
    let got = at(&tiny(), &[Count(10)], UNIFORM, &[0], &[2]);
    let want = sample(
        &[(0, 2), (3, 2), (1, 2), (2, 2)],
        &[1, 3],
        &[(1, 0, 0), (2, 0, 1), (3, 0, 2)],
        &[3],
    );
    assert_eq!(got, want);
}

#[test]
fn last_takes_the_most_recent_eligible_edges() {
    // At time 4: positions 0..3 eligible; the 2 most recent are positions 1 and 2.
    let got = at(&tiny(), &[Count(2)], LAST, &[0], &[4]);
    let want = sample(
        &[(0, 4), (1, 4), (2, 4)],
        &[1, 2],
        &[(1, 0, 1), (2, 0, 2)],
        &[2],
    );
    assert_eq!(got, want);
    // At time 9 all four; the last 3 are positions 1, 2, 3; -1 takes all eligible.
    let got = at(&tiny(), &[Count(3)], LAST, &[0], &[9]);
    let want = sample(
        &[(0, 9), (1, 9), (2, 9), (4, 9)],
        &[1, 3],
        &[(1, 0, 1), (2, 0, 2), (3, 0, 3)],
        &[3],
    );
    assert_eq!(got, want);
    let got = at(&tiny(), &[All], LAST, &[0], &[1]);
    assert_eq!(got, sample(&[(0, 1), (3, 1)], &[1, 1], &[(1, 0, 0)], &[1]));
}

#[test]
fn a_seed_time_before_every_edge_gives_no_edges() {
    for (t, strategy) in [(0, UNIFORM), (-5, LAST), (i64::MIN, UNIFORM)] {
        let got = at(&tiny(), &[All, All], strategy, &[0], &[t]);
        assert_eq!(got, sample(&[(0, t)], &[1, 0, 0], &[], &[0, 0]), "{t}");
    }
}

#[test]
fn one_node_at_two_times_is_two_nodes() {
    // Seeds 0 at time 2 and 0 at time 4: two subgraphs. Group 0 (time 2) reaches 3, 1, 2
    // (positions 0..3); group 1 (time 4) the same three again as new nodes.
    let got = at(&tiny(), &[All], UNIFORM, &[0, 0], &[2, 4]);
    let want = sample(
        &[
            (0, 2),
            (0, 4),
            (3, 2),
            (1, 2),
            (2, 2),
            (3, 4),
            (1, 4),
            (2, 4),
        ],
        &[2, 6],
        &[
            (2, 0, 0),
            (3, 0, 1),
            (4, 0, 2),
            (5, 1, 0),
            (6, 1, 1),
            (7, 1, 2),
        ],
        &[6],
    );
    assert_eq!(got, want);
}

#[test]
fn bounds_count_every_subgraph_of_a_batch() {
    // The sample above has 8 nodes of a 5-node type: the plain bound stops at 5, the bound at
    // 2 seed times does not.
    let g = tiny();
    let dir = tempfile::tempdir().unwrap();
    let s = g
        .sampler(&[vec![All]], UNIFORM, false, Backend::Memory, dir.path())
        .unwrap();
    assert_eq!((s.bound(&[2]).nodes[0], s.bound(&[2]).edges[0]), (5, 8));
    let b = s.bound_at(&[2], 2);
    // 2 seeds, each drawing at most the largest degree (4): 2 + 8 nodes, 8 edges.
    assert_eq!((b.nodes[0], b.edges[0]), (10, 8));
    assert_eq!(s.bound_at(&[2], 0), s.bound(&[2]));
}

#[test]
fn seeds_at_one_time_share_one_subgraph() {
    // Seeds 0 and 3 at time 4, and 0 again: node 0's edges reach 3 (a seed), 1, 2; node 3's
    // reach 0 (a seed) and 4.
    let got = at(&tiny(), &[All], UNIFORM, &[0, 3, 0], &[4, 4, 4]);
    let want = sample(
        &[(0, 4), (3, 4), (1, 4), (2, 4), (4, 4)],
        &[2, 3],
        &[(1, 0, 0), (2, 0, 1), (3, 0, 2), (0, 1, 5), (4, 1, 6)],
        &[5],
    );
    assert_eq!(got, want);
}

#[test]
fn every_hop_is_cut_by_the_seed_time_not_by_the_edge_a_node_came_by() {
    // Seed 0 at time 4. Hop 1 reaches 3 (by an edge of time 1), 1 and 2 (time 2). Hop 2:
    // node 3's edges (0, 0) and (4, 4) are both eligible (4 <= 4, though 4 > 1, the time of
    // the edge 3 came by), node 1's (4, 3) too.
    let got = at(&tiny(), &[All, All], UNIFORM, &[0], &[4]);
    let want = sample(
        &[(0, 4), (3, 4), (1, 4), (2, 4), (4, 4)],
        &[1, 3, 1],
        &[
            (1, 0, 0),
            (2, 0, 1),
            (3, 0, 2),
            (0, 1, 5),
            (4, 1, 6),
            (4, 2, 4),
        ],
        &[3, 3],
    );
    assert_eq!(got, want);
    // At time 2 the second hop keeps only (0, 0) of node 3.
    let got = at(&tiny(), &[All, All], UNIFORM, &[0], &[2]);
    let want = sample(
        &[(0, 2), (3, 2), (1, 2), (2, 2)],
        &[1, 3, 0],
        &[(1, 0, 0), (2, 0, 1), (3, 0, 2), (0, 1, 5)],
        &[3, 1],
    );
    assert_eq!(got, want);
}

#[test]
fn a_neighbor_newer_than_the_seed_is_dropped_with_its_edge() {
    // Node 2 exists from time 3 on: at time 2 its edge into 0 (time 2) is drawn, then dropped.
    let mut g = tiny();
    g.node_times = vec![Some(vec![0, 0, 3, 0, 9])];
    let got = at(&g, &[All], UNIFORM, &[0], &[2]);
    let want = sample(
        &[(0, 2), (3, 2), (1, 2)],
        &[1, 2],
        &[(1, 0, 0), (2, 0, 1)],
        &[2],
    );
    assert_eq!(got, want);
    // At time 3 it is in.
    let got = at(&g, &[All], UNIFORM, &[0], &[3]);
    assert_eq!(got.node[0], vec![0, 3, 1, 2]);
}

#[test]
fn two_types_group_their_seeds_together() {
    // Types a (2 nodes) and p (3 nodes); a -> p: p0 <- (a0, 1) (a1, 5); p -> a: a0 <- (p2, 2).
    // Seeds p0 at time 5 and a0 at time 5 share one subgraph; a0 at time 3 is another.
    let ap = Rel::new(0, 1, &[vec![(0, 1), (1, 5)], vec![], vec![]]);
    let pa = Rel::new(1, 0, &[vec![(2, 2)], vec![]]);
    let g = Graph {
        num_nodes: vec![2, 3],
        rels: vec![ap, pa],
        node_times: vec![None, None],
    };
    let dir = tempfile::tempdir().unwrap();
    let fan = vec![vec![All], vec![All]];
    let mut s = g
        .sampler(&fan, UNIFORM, false, Backend::Memory, dir.path())
        .unwrap();
    let (p, a): (&[u64], &[u64]) = (&[0], &[0, 0]);
    let (tp, ta): (&[i64], &[i64]) = (&[5], &[5, 3]);
    let req = HeteroRequest {
        seeds: &[(1, p), (0, a)],
        batch: 0,
        times: Some(&[tp, ta]),
    };
    let out = s.sample_many(&[req], 1, 0, false).unwrap().pop().unwrap();
    // a: a0@5, a0@3, then a1@5 (reached from p0@5); p: p0@5, then p2@5 and p2@3 (from a0
    // at each time).
    assert_eq!(out.node, vec![vec![0, 0, 1], vec![0, 2, 2]]);
    assert_eq!(out.time, Some(vec![vec![5, 3, 5], vec![5, 5, 3]]));
    assert_eq!(
        (out.row[0].clone(), out.col[0].clone()),
        (vec![0, 2], vec![0, 0])
    );
    assert_eq!(
        (out.row[1].clone(), out.col[1].clone()),
        (vec![1, 2], vec![0, 1])
    );
}

#[test]
fn requests_without_times_sample_as_before() {
    // A sampler with edge times, asked without seed times, gives what one without them gives.
    let g = tiny();
    let dir = tempfile::tempdir().unwrap();
    let fan = vec![vec![Count(2), Count(1)]];
    let mut s = g
        .sampler(&fan, LAST, false, Backend::Memory, dir.path())
        .unwrap();
    let r = &g.rels[0];
    let plain = HeteroRelation {
        src: 0,
        dst: 0,
        indptr: r.indptr.clone().into(),
        source: NeighborSource::Memory(Arc::new(Indices::U64(r.indices.clone()))),
        fanouts: fan[0].clone(),
        times: None,
    };
    let mut p = HeteroSampler::new(vec![5], vec![plain], false).unwrap();
    for b in 0..20 {
        let want = p.sample(0, &[0, 3], 5, 1, b, true).unwrap();
        assert_eq!(s.sample(0, &[0, 3], 5, 1, b, true).unwrap(), want);
        assert_eq!(want.time, None);
    }
}

/// A random temporal graph: `types` node types, relations between random pairs, random times:
/// mostly short lists, some of several pages of times.
fn random_graph(seed: u64, types: usize, rels: usize, node_times: bool) -> Graph {
    let shape = Shape {
        stream: (1, 2),
        max_nodes: 40,
        hub_one_in: 10,
        hub: (600, 1500),
        short: 12,
        node_times: match node_times {
            true => NodeTimes::All { span: 60 },
            false => NodeTimes::None,
        },
    };
    timed::random_graph(seed, types, rels, shape)
}

/// Check a temporal sample against its graph and request: every node's time is that of its
/// group, every edge exists, is not newer than its subgraph's time, joins nodes of the same
/// subgraph, and no node is newer than its subgraph; counts add up.
fn check(g: &Graph, out: &HeteroSample, seeds: &[(usize, &[u64])], times: &[&[i64]]) {
    let time = out.time.as_ref().expect("a temporal sample has times");
    let seed_times: Vec<i64> = times.iter().flat_map(|t| t.iter().copied()).collect();
    for (t, (node, tt)) in out.node.iter().zip(time).enumerate() {
        assert_eq!(node.len(), tt.len());
        assert_eq!(out.num_sampled_nodes[t].iter().sum::<usize>(), node.len());
        assert!(tt.iter().all(|x| seed_times.contains(x)));
        // (node, time) pairs are distinct: one node per subgraph.
        let mut pairs: Vec<(u64, i64)> = node.iter().copied().zip(tt.iter().copied()).collect();
        pairs.sort_unstable();
        pairs.dedup();
        assert_eq!(pairs.len(), node.len());
    }
    for (&(t, ids), ts) in seeds.iter().zip(times) {
        for (&v, &time_v) in ids.iter().zip(*ts) {
            let n = out.num_sampled_nodes[t][0];
            let hit = (0..n).any(|i| out.node[t][i] == v && time[t][i] == time_v);
            assert!(hit, "seed {v}@{time_v} of type {t}");
        }
    }
    for (r, rel) in g.rels.iter().enumerate() {
        assert_eq!(
            out.num_sampled_edges[r].iter().sum::<usize>(),
            out.row[r].len()
        );
        let edges = out.edge.as_ref().unwrap();
        for ((&row, &col), &e) in out.row[r].iter().zip(&out.col[r]).zip(&edges[r]) {
            let (u, d) = (
                out.node[rel.src][row as usize],
                out.node[rel.dst][col as usize],
            );
            let tu = time[rel.src][row as usize];
            assert_eq!(
                tu, time[rel.dst][col as usize],
                "an edge joins one subgraph"
            );
            let (lo, hi) = (rel.indptr[d as usize], rel.indptr[d as usize + 1]);
            assert!((lo..hi).contains(&e) && rel.indices[e as usize] == u);
            assert!(
                rel.times[e as usize] <= tu,
                "edge time {} > {tu}",
                rel.times[e as usize]
            );
            if let Some(nt) = &g.node_times[rel.src] {
                assert!(nt[u as usize] <= tu);
            }
        }
    }
}

/// A request's seed lists and their times.
type Lists<'a> = (Vec<(usize, &'a [u64])>, Vec<&'a [i64]>);

/// A batch's seeds of each of the first two types, each list with its times.
type Batch = Vec<(Vec<u64>, Vec<i64>)>;

/// The sample `s` (in memory) gives `requests`, each batch checked against its seed times, with
/// enough lists for the slices of the tests that compare the searches from disk with it.
fn sliced_reference(
    g: &Graph,
    s: &mut HeteroSampler,
    requests: &[HeteroRequest<'_>],
    seed: u64,
) -> Vec<HeteroSample> {
    let want = s.sample_many(requests, seed, 1, true).unwrap();
    for (req, out) in requests.iter().zip(&want) {
        match req.times {
            Some(times) => check(g, out, req.seeds, times),
            None => assert_eq!(out.time, None),
        }
    }
    let edges: usize = (want.iter())
        .map(|o| o.row.iter().map(Vec::len).sum::<usize>())
        .sum();
    assert!(edges > 200, "{edges} edges: too few lists to slice");
    want
}

/// `batches` batches of `per_type` random seeds of each of types 0 and 1, at random times in
/// [0, 110) (spread over the edges' and beyond), drawn from the stream `(seed, a, b)`: per batch
/// and type, its ids, then its times.
fn seed_batches(
    g: &Graph,
    (seed, a, b): (u64, u64, u64),
    batches: usize,
    per_type: usize,
) -> Vec<Batch> {
    let mut rng = ringgnn_store::rng::stream(seed, a, b);
    let mut below = |n: u64| ringgnn_store::rng::below(&mut rng, n);
    (0..batches)
        .map(|_| {
            (0..2)
                .map(|t| {
                    let ids = (0..per_type).map(|_| below(g.num_nodes[t])).collect();
                    (ids, (0..per_type).map(|_| below(110) as i64).collect())
                })
                .collect()
        })
        .collect()
}

/// Requests of `refs` numbered as batches in order, those `timed(i)` at their times.
fn requests<'a>(refs: &'a [Lists<'a>], timed: impl Fn(usize) -> bool) -> Vec<HeteroRequest<'a>> {
    (refs.iter().enumerate())
        .map(|(i, (s, t))| HeteroRequest {
            seeds: s,
            batch: i as u64,
            times: timed(i).then_some(t.as_slice()),
        })
        .collect()
}

/// Each of `batches` as a request's seed lists and times.
fn as_lists(batches: &[Batch]) -> Vec<Lists<'_>> {
    batches
        .iter()
        .map(|b| {
            let seeds = b.iter().enumerate().map(|(t, l)| (t, l.0.as_slice()));
            (seeds.collect(), b.iter().map(|l| l.1.as_slice()).collect())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random temporal graphs: the invariants above, every backend the same sample, a
    /// hyperbatch (with a batch without times among them) the same as its batches alone, and a
    /// time above every edge (no node times) the same edges as non-temporal sampling.
    #[test]
    fn temporal_samples_respect_time_and_agree_everywhere(
        seed in any::<u64>(),
        types in 1usize..4,
        rels in 1usize..4,
        node_times: bool,
        last: bool,
        replace: bool,
        fanouts in prop::collection::vec(prop_oneof![Just(All), (0u64..6).prop_map(Count)], 2),
        seeds in prop::collection::vec((0usize..3, 0u64..40, 0i64..110), 1..12),
    ) {
        let g = random_graph(seed, types, rels, node_times);
        let strategy = if last { LAST } else { UNIFORM };
        let fan = vec![fanouts.clone(); g.rels.len()];
        // Two batches: the seeds, and the seeds' first half at shifted times.
        let mut lists: Vec<(usize, Vec<u64>, Vec<i64>)> = vec![];
        for &(t, v, time) in &seeds {
            let t = t % types;
            lists.push((t, vec![v % g.num_nodes[t]], vec![time]));
        }
        let half = lists.len().div_ceil(2);
        let second: Vec<_> = lists[..half].iter().map(|(t, v, ts)| (*t, v.clone(), vec![ts[0] / 2])).collect();
        let batches = [lists, second];
        let refs: Vec<Lists> = batches
            .iter()
            .map(|b| (b.iter().map(|(t, v, _)| (*t, v.as_slice())).collect(), b.iter().map(|x| x.2.as_slice()).collect()))
            .collect();
        let mut requests: Vec<HeteroRequest> = refs
            .iter()
            .enumerate()
            .map(|(i, (s, t))| HeteroRequest { seeds: s, batch: i as u64 * 3, times: Some(t) })
            .collect();
        // And a batch without times among them.
        requests.push(HeteroRequest { seeds: &refs[0].0, batch: 1, times: None });
        let dir = tempfile::tempdir().unwrap();
        let mut want: Option<Vec<HeteroSample>> = None;
        for b in backends() {
            let Some(mut s) = g.sampler(&fan, strategy, replace, b, dir.path()) else { continue };
            let many = s.sample_many(&requests, seed, 2, true).unwrap();
            for (req, out) in requests.iter().zip(&many) {
                match req.times {
                    Some(times) => check(&g, out, req.seeds, times),
                    None => prop_assert!(out.time.is_none()),
                }
                let alone = s.sample_many(&[*req], seed, 2, true).unwrap().pop().unwrap();
                prop_assert_eq!(&alone, out);
            }
            match &want {
                None => want = Some(many),
                Some(w) => prop_assert_eq!(w, &many, "{:?}", b),
            }
        }
        // With every seed after every edge, Uniform draws what a non-temporal sample draws.
        if !node_times && !last {
            let mut s = g.sampler(&fan, strategy, replace, Backend::Memory, dir.path()).unwrap();
            let ids = &refs[0].0;
            let late: Vec<Vec<i64>> = ids.iter().map(|x| vec![100; x.1.len()]).collect();
            let one: Vec<&[i64]> = late.iter().map(Vec::as_slice).collect();
            let timed = HeteroRequest { seeds: ids, batch: 5, times: Some(&one) };
            let plain = HeteroRequest { seeds: ids, batch: 5, times: None };
            let a = s.sample_many(&[timed], seed, 2, true).unwrap().pop().unwrap();
            let b = s.sample_many(&[plain], seed, 2, true).unwrap().pop().unwrap();
            prop_assert_eq!(HeteroSample { time: None, ..a }, b);
        }
    }
}

/// A hop's lists searched on disk in slices of a few lists at a time (taken in file order, not the
/// frontier's) give the sample of one search over them all: every strategy, pread with and without
/// a small read buffer, a hyperbatch of three temporal batches whose hops probe hundreds of lists
/// (long ones among them, searched over several rounds).
#[test]
fn a_hops_lists_searched_in_slices_sample_as_one_search() {
    let dir = tempfile::tempdir().unwrap();
    for seed in 0..4 {
        let g = random_graph(seed, 2, 3, seed % 2 == 1);
        let fan = vec![vec![Count(4), All]; g.rels.len()];
        // Three batches of 40 seeds of each type.
        let lists = seed_batches(&g, (seed, 3, 4), 3, 40);
        let refs = as_lists(&lists);
        let requests = requests(&refs, |_| true);
        for strategy in [UNIFORM, LAST] {
            let mut want: Option<Vec<HeteroSample>> = None;
            let disk = |opts| Backend::Disk(BackendKind::Pread, false, opts);
            let keyed = |opts| Backend::Keyed(BackendKind::Pread, false, opts);
            for b in [CoalesceOptions::default(), SMALL]
                .map(disk)
                .into_iter()
                .chain([CoalesceOptions::default(), SMALL].map(keyed))
            {
                for slice in [usize::MAX, 1, 3, 64] {
                    let mut s = g.sampler(&fan, strategy, false, b, dir.path()).unwrap();
                    if slice != usize::MAX {
                        s.set_cut_slice(slice);
                    }
                    let many = s.sample_many(&requests, seed, 2, true).unwrap();
                    for (req, out) in requests.iter().zip(&many) {
                        check(&g, out, req.seeds, req.times.unwrap());
                    }
                    match &want {
                        None => want = Some(many),
                        Some(w) => assert_eq!(w, &many, "{strategy:?} {b:?} slice {slice}"),
                    }
                }
            }
            // And the same as in memory, where nothing is sliced.
            let mut s = (g.sampler(&fan, strategy, false, Backend::Memory, dir.path())).unwrap();
            let mem = s.sample_many(&requests, seed, 2, true).unwrap();
            assert_eq!(want.as_ref(), Some(&mem), "{strategy:?} in memory");
            // The hops probed more lists than the smallest slices hold.
            let edges: usize = mem
                .iter()
                .map(|o| o.row.iter().map(Vec::len).sum::<usize>())
                .sum();
            assert!(edges > 200, "{edges} edges: too few lists to slice");
        }
    }
}

/// A hop's lists searched on disk batch by batch, or in groups of three batches, give the sample
/// of one search over every batch's lists, and of the search in memory (batch by batch): both
/// strategies, with edge ids and without (32-bit positions), a hyperbatch of five batches at
/// seed times and one without, whose hops probe hundreds of lists in slices of a few.
#[test]
fn a_hops_lists_searched_by_groups_of_batches_sample_as_one_search() {
    let dir = tempfile::tempdir().unwrap();
    for seed in 0..3 {
        let g = random_graph(seed + 10, 2, 3, seed == 1);
        let fan = vec![vec![Count(3), Count(2), All]; g.rels.len()];
        // Six batches of 20 seeds of each type.
        let lists = seed_batches(&g, (seed, 5, 6), 6, 20);
        let refs = as_lists(&lists);
        // Batch 3 is sampled without times.
        let requests = requests(&refs, |i| i != 3);
        for strategy in [UNIFORM, LAST] {
            for ids in [true, false] {
                let mut s =
                    (g.sampler(&fan, strategy, false, Backend::Memory, dir.path())).unwrap();
                let want = s.sample_many(&requests, seed, 1, ids).unwrap();
                if ids {
                    for (req, out) in requests.iter().zip(&want) {
                        if let Some(times) = req.times {
                            check(&g, out, req.seeds, times);
                        }
                    }
                }
                assert_eq!(want[3].time, None);
                for b in [
                    Backend::Disk(BackendKind::Pread, false, SMALL),
                    Backend::Keyed(BackendKind::Pread, false, SMALL),
                ] {
                    for group in [1, 3, usize::MAX] {
                        let mut s = g.sampler(&fan, strategy, false, b, dir.path()).unwrap();
                        s.set_cut_group(group);
                        s.set_cut_slice(5);
                        let got = s.sample_many(&requests, seed, 1, ids).unwrap();
                        assert_eq!(got, want, "{strategy:?} {b:?} edge ids {ids} group {group}");
                    }
                }
                let edges: usize = want
                    .iter()
                    .map(|o| o.row.iter().map(Vec::len).sum::<usize>())
                    .sum();
                assert!(edges > 200, "{edges} edges: too few lists to slice");
            }
        }
    }
}

/// A hop's lists searched from disk on several threads (the lists to search found by each thread
/// in its part of them, split unevenly and across batches at seed times and without; then a slice
/// at a time by whichever thread is free, each with its own reader) give the sample in memory:
/// both strategies, 2 to 4 threads, slices of 1 and 7 lists, the search starting from each
/// relation's time range, a wrong one, or none.
#[test]
fn a_hops_lists_searched_on_several_threads_sample_as_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let ranges: [Range; 3] = [
        |_| None,
        TimeRange::of,
        |_| Some(TimeRange { min: -1000, max: 5 }),
    ];
    for seed in 0..3 {
        let g = random_graph(seed + 30, 2, 3, seed == 2);
        let fan = vec![vec![Count(3), Count(2), All]; g.rels.len()];
        // Five batches of 15 seeds of each type, batches 1 and 3 without times.
        let lists = seed_batches(&g, (seed, 7, 8), 5, 15);
        let refs = as_lists(&lists);
        let requests = requests(&refs, |i| i % 2 == 0);
        for strategy in [UNIFORM, LAST] {
            let how = (strategy, false);
            let mut s = (g.sampler_in(&fan, how, Backend::Memory, dir.path(), ranges[0])).unwrap();
            let want = sliced_reference(&g, &mut s, &requests, seed);
            for b in [
                Backend::Disk(BackendKind::Pread, false, SMALL),
                Backend::Keyed(BackendKind::Pread, false, SMALL),
            ] {
                for (k, &range) in ranges.iter().enumerate() {
                    for threads in 2..=4 {
                        for slice in [1, 7] {
                            let mut s = (g.sampler_in(&fan, how, b, dir.path(), range)).unwrap();
                            s.set_threads(threads);
                            s.set_cut_slice(slice);
                            let got = s.sample_many(&requests, seed, 1, true).unwrap();
                            let what = format!(
                                "{strategy:?} {b:?} range {k} {threads} threads slice {slice}"
                            );
                            assert_eq!(got, want, "{what}");
                        }
                    }
                }
            }
        }
    }
}

/// A hop's lists made from their node, index and seed-time group packed in their sort keys (the
/// default, where they fit, as they do on every small graph) or from their index alone, looked up
/// in their batch's frontier (the fallback where they do not fit, forced here), give the sample
/// in memory: both strategies, over times and over keys, whole or in slices of 1 and 7 lists,
/// batches by groups of 1, 2 or all, on 1 and 3 threads.
#[test]
fn lists_made_from_packed_sort_keys_or_looked_up_sample_alike() {
    let dir = tempfile::tempdir().unwrap();
    for seed in 0..3 {
        let g = random_graph(seed + 40, 2, 3, seed == 1);
        let fan = vec![vec![Count(3), Count(2), All]; g.rels.len()];
        // Five batches of 15 seeds of each type, batch 2 without times.
        let lists = seed_batches(&g, (seed, 4, 9), 5, 15);
        let refs = as_lists(&lists);
        let requests = requests(&refs, |i| i != 2);
        for strategy in [UNIFORM, LAST] {
            let mut s = (g.sampler(&fan, strategy, false, Backend::Memory, dir.path())).unwrap();
            let want = sliced_reference(&g, &mut s, &requests, seed);
            for b in [
                Backend::Disk(BackendKind::Pread, false, SMALL),
                Backend::Keyed(BackendKind::Pread, false, SMALL),
            ] {
                for packed in [true, false] {
                    for (slice, group, threads) in [
                        (10_000, usize::MAX, 1),
                        (1, 2, 1),
                        (7, 1, 3),
                        (7, usize::MAX, 3),
                    ] {
                        let mut s = g.sampler(&fan, strategy, false, b, dir.path()).unwrap();
                        s.set_cut_packed(packed);
                        s.set_cut_slice(slice);
                        s.set_cut_group(group);
                        s.set_threads(threads);
                        let got = s.sample_many(&requests, seed, 1, true).unwrap();
                        let what = format!(
                            "{strategy:?} {b:?} packed {packed} slice {slice} group {group} \
                             {threads} threads"
                        );
                        assert_eq!(got, want, "{what}");
                    }
                }
            }
        }
    }
}

/// A relation without edge times offers every edge at any seed time: a hyperbatch at several seed
/// times (frontiers of several subgraphs) samples it as a relation whose every edge is at the
/// earliest time, beside relations cut by their times.
#[test]
fn a_relation_without_times_samples_as_one_whose_edges_are_all_eligible() {
    for seed in 0..3 {
        let g = random_graph(seed + 20, 2, 3, false);
        let fan = vec![vec![Count(3), Count(2), All]; g.rels.len()];
        let sampler = |untimed: bool| {
            let rels = (g.rels.iter().zip(&fan).enumerate())
                .map(|(i, (r, f))| HeteroRelation {
                    src: r.src,
                    dst: r.dst,
                    indptr: r.indptr.clone().into(),
                    source: NeighborSource::Memory(Arc::new(Indices::U64(r.indices.clone()))),
                    fanouts: f.clone(),
                    times: match (i, untimed) {
                        (1, true) => None,
                        (1, false) => Some(EdgeTimes::Memory(vec![i64::MIN; r.times.len()].into())),
                        _ => Some(EdgeTimes::Memory(r.times.clone().into())),
                    },
                })
                .collect();
            HeteroSampler::new(g.num_nodes.clone(), rels, false).unwrap()
        };
        let lists = seed_batches(&g, (seed, 8, 9), 3, 15);
        let refs = as_lists(&lists);
        let requests: Vec<HeteroRequest> = (refs.iter().enumerate())
            .map(|(i, (s, t))| HeteroRequest {
                seeds: s,
                batch: i as u64,
                times: Some(t),
            })
            .collect();
        let want = sampler(false)
            .sample_many(&requests, seed, 4, true)
            .unwrap();
        let got = sampler(true).sample_many(&requests, seed, 4, true).unwrap();
        assert_eq!(got, want);
        let edges: usize = want.iter().map(|o| o.row[1].len()).sum();
        assert!(edges > 20, "{edges} edges of the relation without times");
    }
}

#[test]
fn uniform_draws_are_uniform_over_the_eligible_prefix() {
    // Node 0 has 10 edges at times 0..10; at time 3 the first 4 are eligible. One draw per
    // batch over 40,000 batches: each of the 4 positions about 10,000 times, none beyond.
    let list: Vec<(u64, i64)> = (0..10).map(|i| (i + 1, i as i64)).collect();
    let mut lists = vec![list];
    lists.extend((0..10).map(|_| vec![]));
    let g = Graph {
        num_nodes: vec![11],
        rels: vec![Rel::new(0, 0, &lists)],
        node_times: vec![None],
    };
    let dir = tempfile::tempdir().unwrap();
    let mut s = g
        .sampler(
            &[vec![Count(1)]],
            UNIFORM,
            false,
            Backend::Memory,
            dir.path(),
        )
        .unwrap();
    let mut counts: HashMap<u64, u64> = HashMap::new();
    let n = 40_000;
    for b in 0..n {
        let req = HeteroRequest {
            seeds: &[(0, &[0])],
            batch: b,
            times: Some(&[&[3]]),
        };
        let out = s.sample_many(&[req], 11, 0, true).unwrap().pop().unwrap();
        let e = out.edge.unwrap()[0].clone();
        assert_eq!(e.len(), 1);
        *counts.entry(e[0]).or_default() += 1;
    }
    assert!(counts.keys().all(|&p| p < 4), "{counts:?}");
    let expected = n as f64 / 4.0;
    let chi2: f64 = (0..4)
        .map(|p| (counts.get(&p).copied().unwrap_or(0) as f64 - expected).powi(2) / expected)
        .sum();
    // 3 degrees of freedom: P(chi2 > 16.27) = 0.001.
    assert!(chi2 < 16.27, "chi2 {chi2}: {counts:?}");
}

#[test]
fn wrong_times_are_clear_errors() {
    let g = tiny();
    let dir = tempfile::tempdir().unwrap();
    let mut s = g
        .sampler(&[vec![All]], UNIFORM, false, Backend::Memory, dir.path())
        .unwrap();
    // Seed times of the wrong length, or a list of times missing.
    let req = HeteroRequest {
        seeds: &[(0, &[0, 1])],
        batch: 0,
        times: Some(&[&[3]]),
    };
    let e = s.sample_many(&[req], 1, 0, false).unwrap_err().to_string();
    assert!(e.contains("1 seed times for 2 seeds of node type 0"), "{e}");
    let req = HeteroRequest {
        seeds: &[(0, &[0]), (0, &[1])],
        batch: 0,
        times: Some(&[&[3]]),
    };
    let e = s.sample_many(&[req], 1, 0, false).unwrap_err().to_string();
    assert!(
        e.contains("seed times for 1 seed lists, but the request has 2"),
        "{e}"
    );
    // Node times of the wrong length.
    let e = s.set_node_times(vec![Some(vec![1, 2].into())]).unwrap_err();
    assert!(e.to_string().contains("2 node times for 5 nodes"), "{e}");
    // In-memory edge times of the wrong length.
    let r = &g.rels[0];
    let rel = HeteroRelation {
        src: 0,
        dst: 0,
        indptr: r.indptr.clone().into(),
        source: NeighborSource::Memory(Arc::new(Indices::U64(r.indices.clone()))),
        fanouts: vec![All],
        times: Some(EdgeTimes::Memory(vec![1, 2, 3].into())),
    };
    let Err(e) = HeteroSampler::new(vec![5], vec![rel], false) else {
        panic!("3 times for 8 edges accepted")
    };
    assert!(e.to_string().contains("3 edge times for 8 edges"), "{e}");
    // A time file of the wrong length, and a missing one.
    let bad = write_padded(dir.path(), "short.bin", vec![0; 8 * 3]);
    let e = EdgeTimes::load(&bad, 600).unwrap_err();
    assert!(matches!(e, Error::Corrupt(_)), "{e}");
    assert!(
        e.to_string()
            .contains("short.bin: 4096 bytes of edge times"),
        "{e}"
    );
    let e = EdgeTimes::open(&bad, 600, BackendKind::Pread, false, SMALL)
        .err()
        .unwrap();
    assert!(e.to_string().contains("600 edges"), "{e}");
    // Unpadded: fine in memory, refused for disk reads (which read whole pages).
    let raw = dir.path().join("raw.bin");
    std::fs::write(
        &raw,
        [5i64, 6, 7]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert_eq!(&*EdgeTimes::load(&raw, 3).unwrap(), &[5, 6, 7]);
    assert!(EdgeTimes::open(&raw, 3, BackendKind::Pread, false, SMALL).is_err());
    let e = EdgeTimes::load(&dir.path().join("nope.bin"), 3).unwrap_err();
    assert!(
        matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    );
    assert!(e.to_string().contains("nope.bin"), "{e}");
}

#[test]
fn too_many_subgraphs_to_number_is_a_clear_error() {
    // A source-only type of 2^63 nodes: two seed times need keys up to 2^64.
    let rel = HeteroRelation {
        src: 0,
        dst: 1,
        indptr: vec![0, 0].into(),
        source: NeighborSource::Memory(Arc::new(Indices::U64(vec![]))),
        fanouts: vec![All],
        times: Some(EdgeTimes::Memory(Vec::new().into())),
    };
    let mut s = HeteroSampler::new(vec![1 << 63, 1], vec![rel], false).unwrap();
    let req = HeteroRequest {
        seeds: &[(0, &[5, 6])],
        batch: 0,
        times: Some(&[&[1, 2]]),
    };
    let e = s.sample_many(&[req], 1, 0, false).unwrap_err().to_string();
    assert!(
        e.contains("2 distinct seed times in one batch over node type 0"),
        "{e}"
    );
    // One time: fine, and keys above 32 bits (a wide dedup map) come back as node ids.
    let req = HeteroRequest {
        seeds: &[(0, &[5, (1 << 63) - 1])],
        batch: 0,
        times: Some(&[&[1, 1]]),
    };
    let out = s.sample_many(&[req], 1, 0, false).unwrap().pop().unwrap();
    assert_eq!(out.node[0], vec![5, (1 << 63) - 1]);
    // Ids that fit 32 bits, but two times over 2^31 nodes: keys up to 2^32 need the wide map.
    let rel = HeteroRelation {
        src: 0,
        dst: 1,
        indptr: vec![0, 0].into(),
        source: NeighborSource::Memory(Arc::new(Indices::U64(vec![]))),
        fanouts: vec![All],
        times: None,
    };
    let mut s = HeteroSampler::new(vec![1 << 31, 1], vec![rel], false).unwrap();
    let ids = [(1 << 31) - 1, 5, (1 << 31) - 1];
    let req = HeteroRequest {
        seeds: &[(0, &ids)],
        batch: 0,
        times: Some(&[&[1, 2, 2]]),
    };
    let out = s.sample_many(&[req], 1, 0, false).unwrap().pop().unwrap();
    assert_eq!(out.node[0], ids);
    assert_eq!(out.time.unwrap()[0], vec![1, 2, 2]);
}

/// The homogeneous fixture `tests/fixtures/v2-tiny` (7 nodes, 8 edges).
fn homogeneous_fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/v2-tiny")
}

#[test]
fn a_homogeneous_dataset_opens_as_the_one_type_case() {
    let dir = homogeneous_fixture();
    let g = TypedGraph::open(&dir, None, false, &[]).unwrap();
    assert_eq!(g.types, vec!["node".to_string()]);
    assert_eq!(g.counts, vec![7]);
    assert_eq!(g.relations.len(), 1);
    let r = &g.relations[0];
    assert_eq!(
        (r.name.as_str(), r.src, r.dst, r.num_edges()),
        ("node:to:node", 0, 0, 8)
    );
    // With every neighbor taken, the typed sampler gives the homogeneous sampler's sample.
    let ds = ringgnn_store::Dataset::open(&dir).unwrap();
    let fan = [All, All];
    let mut homo =
        NeighborSampler::open(&ds, &fan, false, NeighborSource::memory(&ds).unwrap()).unwrap();
    let (mut typed, name, _) = g.sampler(vec![fan.to_vec()], false, None).unwrap();
    assert_eq!(name, "memory");
    for seeds in [vec![0u64], vec![3, 1], vec![6, 2, 6]] {
        let s = Seeds::new(seeds.clone(), 7).unwrap();
        let h = homo.sample(s.as_slice(), 1, 0, 0, true).unwrap();
        let t = typed.sample(0, &seeds, 1, 0, 0, true).unwrap();
        assert_eq!(t.node, vec![h.node]);
        assert_eq!((t.row, t.col), (vec![h.row], vec![h.col]));
        assert_eq!(t.edge, Some(vec![h.edge.unwrap()]));
        assert_eq!(t.num_sampled_nodes, vec![h.num_sampled_nodes]);
        assert_eq!(t.num_sampled_edges, vec![h.num_sampled_edges]);
    }
    // A relation name it does not have is refused, naming the one it has.
    let e = TypedGraph::open(&dir, None, false, &["a:b:c".into()])
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .contains("unknown relation 'a:b:c' (the dataset has: node:to:node)"),
        "{e}"
    );
}

#[test]
fn a_typed_graph_samples_at_times_from_its_time_files() {
    // Edge times for the fixture's 8 edges, written next to a copy of it; in memory and from
    // disk (pread, and io_uring when available) they give the same samples.
    let tmp = tempfile::tempdir().unwrap();
    let (times, path) = timed::fixture_times(tmp.path());
    let dir = homogeneous_fixture();
    let mut kinds = vec![None, Some(BackendKind::Pread)];
    if probe_uring().is_ok() {
        kinds.push(Some(BackendKind::Uring));
    }
    let mut first: Option<Vec<HeteroSample>> = None;
    for kind in kinds {
        let mut g = TypedGraph::open(&dir, kind, false, &[]).unwrap();
        g.set_edge_times("node:to:node", &path).unwrap();
        g.set_node_times("node", vec![0, 0, 0, 0, 0, 0, 3].into())
            .unwrap();
        let (mut s, _, _) = g.sampler(vec![vec![Count(2), All]], false, None).unwrap();
        let out: Vec<HeteroSample> = [0i64, 3, 6, 10]
            .iter()
            .map(|&t| common::sample_seven_at(&mut s, t))
            .collect();
        for (o, t) in out.iter().zip([0i64, 3, 6, 10]) {
            let edges = &o.edge.as_ref().unwrap()[0];
            assert!(
                edges.iter().all(|&e| times[e as usize] <= t),
                "{t}: {edges:?}"
            );
            assert!(o.time.as_ref().unwrap()[0].iter().all(|&x| x == t));
        }
        match &first {
            None => first = Some(out),
            Some(f) => assert_eq!(f, &out, "{kind:?}"),
        }
    }
    // Bad inputs name what is wrong.
    let mut g = TypedGraph::open(&dir, Some(BackendKind::Pread), false, &[]).unwrap();
    let e = g.set_edge_times("x:y:z", &path).unwrap_err().to_string();
    assert!(e.contains("unknown relation 'x:y:z'"), "{e}");
    let short = write_padded(tmp.path(), "short.bin", vec![0; 8 * 600]);
    let e = g
        .set_edge_times("node:to:node", &short)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("short.bin: 8192 bytes of edge times, but the relation has 8 edges"),
        "{e}"
    );
    let e = g
        .set_node_times("node", vec![1].into())
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 node times for 7 nodes"), "{e}");
    let e = g
        .set_node_times("user", vec![1].into())
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown node type 'user'"), "{e}");
}

/// A typed graph whose edge times are read from disk samples over their time keys as over the
/// times, and as in memory (where keys are not used); the keys' bounds are counted in its
/// bytes; keys for a relation without times, or of the wrong length, are refused.
#[test]
fn a_typed_graph_samples_over_its_time_keys_as_over_its_times() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, path) = timed::fixture_times(tmp.path());
    let keys = tmp.path().join("edge_time_keys.bin");
    ringgnn_store::time_keys::derive(&path, 8, &keys).unwrap();
    let dir = homogeneous_fixture();
    let sample = |kind: Option<BackendKind>, with_keys: bool| {
        let mut g = TypedGraph::open(&dir, kind, false, &[]).unwrap();
        g.set_edge_times("node:to:node", &path).unwrap();
        let plain = g.bytes();
        if with_keys {
            g.set_edge_time_keys("node:to:node", &keys).unwrap();
        }
        let held = g.relations[0].time_keys.is_some();
        assert_eq!(held, with_keys && kind.is_some(), "{kind:?}");
        assert_eq!(g.bytes(), plain + if held { 8 * 65536 } else { 0 });
        let (mut s, _, _) = g.sampler(vec![vec![Count(2), All]], false, None).unwrap();
        let out: Vec<HeteroSample> = [-1i64, 0, 3, 6, 7, 10]
            .iter()
            .map(|&t| common::sample_seven_at(&mut s, t))
            .collect();
        out
    };
    let want = sample(None, false);
    assert_eq!(sample(None, true), want);
    assert_eq!(sample(Some(BackendKind::Pread), false), want);
    assert_eq!(sample(Some(BackendKind::Pread), true), want);
    // Refused: an unknown relation, keys before times, keys of another length.
    let mut g = TypedGraph::open(&dir, Some(BackendKind::Pread), false, &[]).unwrap();
    let e = g
        .set_edge_time_keys("x:y:z", &keys)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown relation 'x:y:z'"), "{e}");
    let e = g
        .set_edge_time_keys("node:to:node", &keys)
        .unwrap_err()
        .to_string();
    assert!(e.contains("has no edge times"), "{e}");
    g.set_edge_times("node:to:node", &path).unwrap();
    let e = g
        .set_edge_time_keys("node:to:node", &path)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("edge_times.bin") && e.contains("bytes of time keys"),
        "{e}"
    );
}
