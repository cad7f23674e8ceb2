//! [`HeteroSampler`]: exact samples of a tiny paper/author graph worked out by hand, the
//! invariants of PyG's heterogeneous sampling on random typed graphs, identical samples from
//! every backend (each relation's file read once per hop), reproducibility, and clear errors.

use std::collections::{BTreeSet, HashSet};
use std::fs::File;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use proptest::prelude::*;
use ringgnn_io::{open_backend, probe_uring, BackendKind, PreadBatch, UringBatch};
use ringgnn_sampler::draw::Drawer;
use ringgnn_sampler::{
    CoalesceOptions, Error, Fanout, HeteroRelation, HeteroRequest, HeteroSample, HeteroSampler,
    Indices, NeighborSource,
};
use ringgnn_store::manifest::IndexDtype;
use ringgnn_store::rng;

const ONE_PAGE: CoalesceOptions = CoalesceOptions {
    max_run: 4096,
    buffer: 4096,
};

/// One relation of a [`Typed`] graph: its CSC in memory.
struct Rel {
    src: usize,
    dst: usize,
    indptr: Vec<u64>,
    indices: Vec<u64>,
}

impl Rel {
    /// From the neighbor list of each destination node.
    fn new(src: usize, dst: usize, lists: &[&[u64]]) -> Self {
        let mut indptr = vec![0];
        let mut indices = vec![];
        for l in lists {
            indices.extend_from_slice(l);
            indptr.push(indices.len() as u64);
        }
        Rel {
            src,
            dst,
            indptr,
            indices,
        }
    }

    fn degree(&self, v: u64) -> u64 {
        self.indptr[v as usize + 1] - self.indptr[v as usize]
    }
}

struct Typed {
    num_nodes: Vec<u64>,
    rels: Vec<Rel>,
}

/// Where a sampler's relations read their entries from.
#[derive(Clone, Copy, Debug)]
enum Backend {
    Mem32,
    Mem64,
    Pread(CoalesceOptions),
    Uring,
    /// `O_DIRECT` where the file system allows it, with io_uring or pread.
    Direct(BackendKind),
}

const BACKENDS: [Backend; 7] = [
    Backend::Mem32,
    Backend::Mem64,
    Backend::Pread(CoalesceOptions {
        max_run: 128 << 10,
        buffer: 1 << 20,
    }),
    Backend::Pread(ONE_PAGE),
    Backend::Uring,
    Backend::Direct(BackendKind::Uring),
    Backend::Direct(BackendKind::Pread),
];

/// The source of `entries` on `backend` (disk files, page-padded u32, written in `dir`), or
/// `None` when io_uring is not available here.
fn source(dir: &Path, name: &str, entries: &[u64], backend: Backend) -> Option<NeighborSource> {
    let mem = |ix| Some(NeighborSource::Memory(Arc::new(ix)));
    let path = dir.join(name);
    if !matches!(backend, Backend::Mem32 | Backend::Mem64) && !path.exists() {
        let mut b: Vec<u8> = entries
            .iter()
            .flat_map(|&x| (x as u32).to_le_bytes())
            .collect();
        b.resize(b.len().div_ceil(4096).max(1) * 4096, 0);
        std::fs::write(&path, b).unwrap();
    }
    let disk = |reader, opts| NeighborSource::disk(reader, &path, IndexDtype::U32, opts);
    match backend {
        Backend::Mem32 => mem(Indices::U32(entries.iter().map(|&x| x as u32).collect())),
        Backend::Mem64 => mem(Indices::U64(entries.to_vec())),
        Backend::Pread(opts) => Some(disk(
            Box::new(PreadBatch::new(File::open(&path).unwrap())),
            opts,
        )),
        Backend::Uring => {
            if let Err(why) = probe_uring() {
                eprintln!("skipping the io_uring backend: {why}");
                return None;
            }
            let reader = UringBatch::new(File::open(&path).unwrap()).unwrap();
            Some(disk(Box::new(reader), CoalesceOptions::default()))
        }
        Backend::Direct(kind) => {
            if kind == BackendKind::Uring && probe_uring().is_err() {
                return None;
            }
            let (reader, _) = open_backend(kind, &path, true).unwrap();
            Some(disk(reader, CoalesceOptions::default()))
        }
    }
}

impl Typed {
    /// A sampler of this graph, `fanouts[r]` for relation `r`; `dir` holds the disk files.
    fn sampler(
        &self,
        fanouts: &[Vec<Fanout>],
        replace: bool,
        backend: Backend,
        dir: &Path,
    ) -> Option<HeteroSampler> {
        let mut rels = vec![];
        for (i, (r, f)) in self.rels.iter().zip(fanouts).enumerate() {
            rels.push(HeteroRelation {
                src: r.src,
                dst: r.dst,
                indptr: r.indptr.clone().into(),
                source: source(dir, &format!("rel{i}.bin"), &r.indices, backend)?,
                fanouts: f.clone(),
                times: None,
            });
        }
        Some(HeteroSampler::new(self.num_nodes.clone(), rels, replace).unwrap())
    }

    fn mem_sampler(&self, fanouts: &[Vec<Fanout>], replace: bool) -> HeteroSampler {
        self.sampler(fanouts, replace, Backend::Mem64, Path::new("/nonexistent"))
            .unwrap()
    }
}

fn fan(values: &[i64]) -> Vec<Fanout> {
    values
        .iter()
        .map(|&v| match v {
            -1 => Fanout::All,
            k => Fanout::Count(k as u64),
        })
        .collect()
}

/// Types author (0, 5 nodes) and paper (1, 4 nodes); relations in name order:
/// 0 `author:writes:paper` (5 sources, 4 destinations), 1 `paper:cites:paper`,
/// 2 `paper:rev_writes:author`. Paper 2 has no neighbors in any relation.
fn papers() -> Typed {
    Typed {
        num_nodes: vec![5, 4],
        rels: vec![
            // Authors of p0: a0, a1 (positions 0, 1); p1: a4 (2); p2: none; p3: a1 (3).
            Rel::new(0, 1, &[&[0, 1], &[4], &[], &[1]]),
            // p0 is cited by p1 (position 0), p1 by p3 (1).
            Rel::new(1, 1, &[&[1], &[3], &[], &[]]),
            // Papers of a0: p0 (0); a1: p0, p3 (1, 2); a2, a3: none; a4: p1 (3).
            Rel::new(1, 0, &[&[0], &[0, 3], &[], &[], &[1]]),
        ],
    }
}

/// A sample written literally: per type `(node, num_sampled_nodes)`, per relation
/// `(row, col, edge, num_sampled_edges)`.
type RelOut<'a> = (&'a [u64], &'a [u64], &'a [u64], &'a [usize]);
fn expect(types: &[(&[u64], &[usize])], rels: &[RelOut]) -> HeteroSample {
    HeteroSample {
        node: types.iter().map(|t| t.0.to_vec()).collect(),
        num_sampled_nodes: types.iter().map(|t| t.1.to_vec()).collect(),
        row: rels.iter().map(|r| r.0.to_vec()).collect(),
        col: rels.iter().map(|r| r.1.to_vec()).collect(),
        edge: Some(rels.iter().map(|r| r.2.to_vec()).collect()),
        num_sampled_edges: rels.iter().map(|r| r.3.to_vec()).collect(),
        time: None,
    }
}

/// Sample with every backend (they must agree) and return the common result.
fn sample_all(
    g: &Typed,
    fanouts: &[Vec<Fanout>],
    replace: bool,
    seed_type: usize,
    seeds: &[u64],
) -> HeteroSample {
    sample_all_typed(g, fanouts, replace, &[(seed_type, seeds)])
}

/// [`sample_all`] with seeds of several types; with one entry, `sample` must agree with
/// `sample_typed`.
fn sample_all_typed(
    g: &Typed,
    fanouts: &[Vec<Fanout>],
    replace: bool,
    seeds: &[(usize, &[u64])],
) -> HeteroSample {
    let dir = tempfile::tempdir().unwrap();
    let mut first: Option<HeteroSample> = None;
    for b in BACKENDS {
        let Some(mut s) = g.sampler(fanouts, replace, b, dir.path()) else {
            continue;
        };
        let out = s.sample_typed(seeds, 7, 0, 0, true).unwrap();
        check_typed(g, fanouts, replace, seeds, &out);
        if let [(t, ids)] = seeds {
            assert_eq!(s.sample(*t, ids, 7, 0, 0, true).unwrap(), out);
        }
        match &first {
            None => first = Some(out),
            Some(f) => assert_eq!(&out, f, "{b:?} disagrees"),
        }
    }
    first.unwrap()
}

#[test]
fn papers_and_authors_by_hand() {
    let g = papers();
    // Fanouts at or above every degree: nothing is random.
    let fanouts = [fan(&[5, -1]), fan(&[-1, 3]), fan(&[2, 2])];
    // Seeds p0, p2 (no neighbors), p0 again.
    // Hop 0: writes expands p0 -> a0, a1; cites expands p0 -> p1; rev_writes has no author
    // frontier yet (a0, a1 were reached at this hop). Hop 1: writes expands p1 -> a4; cites
    // p1 -> p3; rev_writes a0 -> p0, a1 -> p0, p3 (p3 reached by two relations at hop 1); a4,
    // reached at hop 1, is not expanded.
    let want = expect(
        &[(&[0, 1, 4], &[0, 2, 1]), (&[0, 2, 1, 3], &[2, 1, 1])],
        &[
            (&[0, 1, 2], &[0, 0, 2], &[0, 1, 2], &[2, 1]),
            (&[2, 3], &[0, 2], &[0, 1], &[1, 1]),
            (&[0, 0, 3], &[0, 1, 1], &[0, 1, 2], &[0, 3]),
        ],
    );
    assert_eq!(sample_all(&g, &fanouts, false, 1, &[0, 2, 0]), want);
    assert_eq!(want.bytes(), 8 * (7 + 2 * 8 + 8));

    // Cites left out of hop 0: no paper is new at hop 0, so hop 1 has no paper frontier and
    // only rev_writes samples (a1 reaches p3).
    let skip = [fan(&[5, -1]), fan(&[0, 3]), fan(&[2, 2])];
    let want = expect(
        &[(&[0, 1], &[0, 2, 0]), (&[0, 2, 3], &[2, 0, 1])],
        &[
            (&[0, 1], &[0, 0], &[0, 1], &[2, 0]),
            (&[], &[], &[], &[0, 0]),
            (&[0, 0, 2], &[0, 1, 1], &[0, 1, 2], &[0, 3]),
        ],
    );
    assert_eq!(sample_all(&g, &skip, false, 1, &[0, 2, 0]), want);

    // Author seeds a1, a3 (no papers): rev_writes reaches p0, p3 at hop 0; at hop 1 writes
    // expands them (a0 new, a1 again) and cites reaches p1.
    let want = expect(
        &[(&[1, 3, 0], &[2, 0, 1]), (&[0, 3, 1], &[0, 2, 1])],
        &[
            (&[2, 0, 0], &[0, 0, 1], &[0, 1, 3], &[0, 3]),
            (&[2], &[0], &[0], &[0, 1]),
            (&[0, 1], &[0, 0], &[1, 2], &[2, 0]),
        ],
    );
    assert_eq!(sample_all(&g, &fanouts, false, 0, &[1, 3]), want);

    // With replacement a fanout above a degree of 1 repeats the neighbor.
    let once = [fan(&[3]), fan(&[0]), fan(&[0])];
    let got = sample_all(&g, &once, true, 1, &[1]);
    let want = expect(
        &[(&[4], &[0, 1]), (&[1], &[1, 0])],
        &[
            (&[0, 0, 0], &[0, 0, 0], &[2, 2, 2], &[3]),
            (&[], &[], &[], &[0]),
            (&[], &[], &[], &[0]),
        ],
    );
    assert_eq!(got, want);

    // No hops: the seeds alone; no edge ids when not asked.
    let mut s = g.mem_sampler(&[vec![], vec![], vec![]], false);
    let got = s.sample(1, &[3, 3], 0, 0, 0, false).unwrap();
    assert_eq!(got.node, vec![vec![], vec![3]]);
    assert_eq!(got.num_sampled_nodes, vec![vec![0], vec![1]]);
    assert_eq!(got.edge, None);
    assert_eq!(got.num_sampled_edges, vec![Vec::<usize>::new(); 3]);
}

#[test]
fn bounds_of_the_paper_graph_by_hand() {
    let g = papers();
    let s = g.mem_sampler(&[fan(&[5, -1]), fan(&[-1, 3]), fan(&[2, 2])], false);
    // Two paper seeds. Hop 0: writes 2 x min(5, 2) = 4 authors (all 4 of its edges), cites
    // 2 x 1 = 2 papers (both its edges), rev_writes nothing (no author frontier). Hop 1: writes
    // 2 x 2 and cites 2 x 1 again (hop 0 may have drawn fewer: each capped at its edges over
    // both hops), rev_writes 4 x 2 = 8, capped at its 4 edges; nodes capped at the counts.
    let b = s.bound(&[0, 2]);
    assert_eq!(b.nodes, vec![5, 4]);
    assert_eq!(b.edges, vec![4, 2, 4]);
    assert_eq!(b.hop_positions, 4);
    assert_eq!(b.sample_bytes(false), 9 * 8 + 10 * 16);
    // With replacement the fanouts are drawn whatever the degrees or edges: 2 x 5 authors
    // (capped at 5), 2 x 1 papers; then 2 papers x 2 (writes: all at 2 x max degree 2 = 4),
    // 2 x 3 (cites), 5 authors x 2.
    let s = g.mem_sampler(&[fan(&[5, -1]), fan(&[-1, 3]), fan(&[2, 2])], true);
    let b = s.bound(&[0, 2]);
    assert_eq!(b.edges, vec![10 + 4, 2 + 6, 10]);
    assert_eq!(b.nodes, vec![5, 4]);
}

#[test]
fn seeds_of_two_types_by_hand() {
    let g = papers();
    let fanouts = [fan(&[5, -1]), fan(&[-1, 3]), fan(&[2, 2])];
    // Seeds a4, a2, a4 and p3, in one sample: both frontiers start with their seeds.
    // Hop 0: writes expands p3 -> a1 (position 3, a new author); cites: p3 has no citer;
    // rev_writes expands a4 -> p1 (position 3, a new paper) and a2 -> nothing (a1, reached at
    // this hop, waits). Hop 1: writes expands p1 -> a4 (position 2, a seed); cites p1 -> p3
    // (position 1, a seed); rev_writes a1 -> p0 (new), p3 (positions 1, 2).
    let want = expect(
        &[(&[4, 2, 1], &[2, 1, 0]), (&[3, 1, 0], &[1, 1, 1])],
        &[
            (&[2, 0], &[0, 1], &[3, 2], &[1, 1]),
            (&[0], &[1], &[1], &[0, 1]),
            (&[1, 2, 0], &[0, 2, 2], &[3, 1, 2], &[1, 2]),
        ],
    );
    let seeds: [(usize, &[u64]); 2] = [(0, &[4, 2, 4]), (1, &[3])];
    assert_eq!(sample_all_typed(&g, &fanouts, false, &seeds), want);
    // The order of the types does not matter; a type given twice is its lists in turn.
    let swapped: [(usize, &[u64]); 2] = [(1, &[3]), (0, &[4, 2, 4])];
    assert_eq!(sample_all_typed(&g, &fanouts, false, &swapped), want);
    let split: [(usize, &[u64]); 3] = [(0, &[4]), (1, &[3]), (0, &[2, 4])];
    assert_eq!(sample_all_typed(&g, &fanouts, false, &split), want);
    // An empty list of a type is no seed of it: the one-type sample.
    let one: [(usize, &[u64]); 2] = [(1, &[0, 2, 0]), (0, &[])];
    assert_eq!(
        sample_all_typed(&g, &fanouts, false, &one),
        sample_all(&g, &fanouts, false, 1, &[0, 2, 0])
    );
}

/// Check every invariant of `out`, sampled from `g` with `fanouts`, `replace` and `seeds`.
fn check(
    g: &Typed,
    fanouts: &[Vec<Fanout>],
    replace: bool,
    seed_type: usize,
    seeds: &[u64],
    out: &HeteroSample,
) {
    check_typed(g, fanouts, replace, &[(seed_type, seeds)], out);
}

/// [`check`] with seeds of several types (`(type, ids)`, a type possibly more than once).
fn check_typed(
    g: &Typed,
    fanouts: &[Vec<Fanout>],
    replace: bool,
    seeds: &[(usize, &[u64])],
    out: &HeteroSample,
) {
    let (types, hops) = (g.num_nodes.len(), fanouts.first().map_or(0, Vec::len));
    assert_eq!(out.node.len(), types);
    assert_eq!(out.num_sampled_nodes.len(), types);
    let edge = out.edge.as_ref().expect("edge ids were asked");
    for v in [&out.row, &out.col, edge] {
        assert_eq!(v.len(), g.rels.len());
    }
    // Per type: distinct nodes, counts that add up, the seeds first.
    let mut seen = vec![HashSet::new(); types];
    let mut dedup: Vec<Vec<u64>> = vec![vec![]; types];
    for &(t, ids) in seeds {
        dedup[t].extend(ids.iter().copied().filter(|s| seen[t].insert(*s)));
    }
    let mut rebuilt = dedup.clone();
    let mut known: Vec<HashSet<u64>> = rebuilt
        .iter()
        .map(|v| v.iter().copied().collect())
        .collect();
    for (t, seeds) in dedup.iter().enumerate() {
        let nsn = &out.num_sampled_nodes[t];
        assert_eq!(nsn.len(), hops + 1);
        assert_eq!(nsn.iter().sum::<usize>(), out.node[t].len());
        let distinct: HashSet<u64> = out.node[t].iter().copied().collect();
        assert_eq!(distinct.len(), out.node[t].len(), "type {t} repeats a node");
        assert_eq!(nsn[0], seeds.len());
        assert_eq!(&out.node[t][..seeds.len()], &seeds[..]);
    }
    let start = |t: usize, k: usize| out.num_sampled_nodes[t][..k].iter().sum::<usize>();
    assert_eq!(out.num_sampled_edges.len(), g.rels.len());
    for (r, nse) in out.num_sampled_edges.iter().enumerate() {
        assert_eq!(nse.len(), hops);
        let ne = nse.iter().sum::<usize>();
        assert_eq!(
            (out.row[r].len(), out.col[r].len(), edge[r].len()),
            (ne, ne, ne)
        );
    }
    for k in 0..hops {
        for (r, (rel, rel_fanouts)) in g.rels.iter().zip(fanouts).enumerate() {
            let (s, d) = (rel.src, rel.dst);
            let e0: usize = out.num_sampled_edges[r][..k].iter().sum();
            let edges = e0..e0 + out.num_sampled_edges[r][k];
            // The expanded nodes: those of type D first reached at the hop before.
            let frontier = start(d, k)..start(d, k + 1);
            let mut count = vec![0u64; frontier.len()];
            let mut last: Option<(u64, u64)> = None;
            for i in edges {
                let (row, col, e) = (out.row[r][i], out.col[r][i], edge[r][i]);
                assert!(
                    frontier.contains(&(col as usize)),
                    "relation {r} hop {k}: col {col}"
                );
                let (u, v) = (out.node[s][row as usize], out.node[d][col as usize]);
                // The edge exists: position e is in v's list and holds u.
                assert!((rel.indptr[v as usize]..rel.indptr[v as usize + 1]).contains(&e));
                assert_eq!(rel.indices[e as usize], u);
                // Frontier order, then ascending positions (distinct without replacement).
                if let Some((lc, le)) = last {
                    assert!(lc < col || (lc == col && (le < e || (replace && le == e))));
                }
                last = Some((col, e));
                count[col as usize - frontier.start] += 1;
                if known[s].insert(u) {
                    rebuilt[s].push(u);
                }
            }
            let f = rel_fanouts[k];
            for (j, &c) in count.iter().enumerate() {
                let deg = rel.degree(out.node[d][frontier.start + j]);
                let want = if f == Fanout::Count(0) {
                    0
                } else {
                    Drawer::count(deg, f, replace)
                };
                assert_eq!(c, want, "relation {r} hop {k}: degree {deg}, {f:?}");
            }
        }
        // Nodes first reached at hop k are exactly the new sources of its edges.
        for (t, nodes) in rebuilt.iter().enumerate() {
            assert_eq!(nodes.len(), start(t, k + 2), "type {t} after hop {k}");
        }
    }
    // ... in discovery order.
    assert_eq!(rebuilt, out.node);
}

/// A random typed graph: `types` types of up to `max_nodes` nodes (the seed type 0 has at
/// least 1), `rels` relations between random types, degrees up to `max_deg` (parallel edges
/// allowed).
fn random_graph(graph_seed: u64, types: usize, rels: usize, max_nodes: u64, max_deg: u64) -> Typed {
    let mut r = rng::stream(graph_seed, 11, 0);
    let mut num_nodes: Vec<u64> = (0..types)
        .map(|_| rng::below(&mut r, max_nodes + 1))
        .collect();
    num_nodes[0] = num_nodes[0].max(1);
    let rels = (0..rels)
        .map(|_| {
            let (src, dst) = (
                rng::below(&mut r, types as u64) as usize,
                rng::below(&mut r, types as u64) as usize,
            );
            let n_src = num_nodes[src];
            let lists: Vec<Vec<u64>> = (0..num_nodes[dst])
                .map(|_| {
                    let deg = if n_src == 0 {
                        0
                    } else {
                        rng::below(&mut r, max_deg + 1)
                    };
                    (0..deg).map(|_| rng::below(&mut r, n_src)).collect()
                })
                .collect();
            let lists: Vec<&[u64]> = lists.iter().map(Vec::as_slice).collect();
            Rel::new(src, dst, &lists)
        })
        .collect();
    Typed { num_nodes, rels }
}

/// Random fanouts: `Count(0)` (left out), 1 to 3, or all.
fn random_fanouts(seed: u64, rels: usize, hops: usize) -> Vec<Vec<Fanout>> {
    let mut r = rng::stream(seed, 12, 0);
    let choices = [
        Fanout::Count(0),
        Fanout::Count(1),
        Fanout::Count(2),
        Fanout::Count(3),
        Fanout::All,
    ];
    (0..rels)
        .map(|_| {
            (0..hops)
                .map(|_| choices[rng::below(&mut r, 5) as usize])
                .collect()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_typed_graphs_keep_every_invariant(
        graph_seed: u64,
        types in 1usize..4,
        rels in 0usize..5,
        hops in 0usize..4,
        replace: bool,
        seed: u64,
        seed_ids in prop::collection::vec(any::<u64>(), 0..6),
    ) {
        let g = random_graph(graph_seed, types, rels, 6, 5);
        let fanouts = random_fanouts(graph_seed, rels, hops);
        let seeds: Vec<u64> = seed_ids.iter().map(|s| s % g.num_nodes[0]).collect();
        let mut s = g.mem_sampler(&fanouts, replace);
        let out = s.sample(0, &seeds, seed, 1, 2, true).unwrap();
        check(&g, &fanouts, replace, 0, &seeds, &out);
        // Reused for another batch, the sampler gives the same sample again.
        s.sample(0, &seeds, seed, 1, 3, false).unwrap();
        prop_assert_eq!(s.sample(0, &seeds, seed, 1, 2, true).unwrap(), out.clone());
        // The one-type sample is the one-entry case of seeds per type.
        prop_assert_eq!(s.sample_typed(&[(0, &seeds)], seed, 1, 2, true).unwrap(), out.clone());
        // The bounds hold: nodes per type, edges per relation, positions of every (relation,
        // hop).
        let mut counts = vec![0u64; types];
        counts[0] = seeds.len() as u64;
        let b = s.bound(&counts);
        for (t, n) in out.node.iter().enumerate() {
            prop_assert!(n.len() as u64 <= b.nodes[t], "type {}: {} > {:?}", t, n.len(), b);
        }
        for (r, e) in out.row.iter().enumerate() {
            prop_assert!(e.len() as u64 <= b.edges[r], "relation {}: {} > {:?}", r, e.len(), b);
            let most = out.num_sampled_edges[r].iter().max().copied().unwrap_or(0);
            prop_assert!(most as u64 <= b.hop_positions);
        }
        prop_assert!(out.bytes() <= b.sample_bytes(true));
        // Seeds of every type at once (the ids taken modulo each type's count).
        let typed: Vec<(usize, Vec<u64>)> = (0..types)
            .filter(|&t| g.num_nodes[t] > 0)
            .map(|t| (t, seed_ids.iter().map(|s| (s >> t) % g.num_nodes[t]).collect()))
            .collect();
        let typed: Vec<(usize, &[u64])> = typed.iter().map(|(t, v)| (*t, v.as_slice())).collect();
        let out = s.sample_typed(&typed, seed, 1, 2, true).unwrap();
        check_typed(&g, &fanouts, replace, &typed, &out);
    }
}

/// A graph with lists spanning pages: 3 types, 6 relations (one from a type to itself, some
/// with more sources than destinations, some with fewer), degrees up to 40.
fn big_graph() -> Typed {
    let mut r = rng::stream(42, 0, 0);
    let num_nodes = vec![2000, 800, 3000];
    let rels = [(0, 0), (1, 0), (0, 1), (2, 1), (1, 2), (0, 2)]
        .into_iter()
        .map(|(src, dst)| {
            let lists: Vec<Vec<u64>> = (0..num_nodes[dst])
                .map(|_| {
                    let deg = rng::below(&mut r, 41);
                    (0..deg)
                        .map(|_| rng::below(&mut r, num_nodes[src]))
                        .collect()
                })
                .collect();
            let lists: Vec<&[u64]> = lists.iter().map(Vec::as_slice).collect();
            Rel::new(src, dst, &lists)
        })
        .collect();
    Typed { num_nodes, rels }
}

fn big_fanouts() -> Vec<Vec<Fanout>> {
    [
        [10, 4, 2],
        [5, 0, 3],
        [6, 0, 2],
        [8, 8, 0],
        [3, 2, -1],
        [4, 0, 2],
    ]
    .iter()
    .map(|f| fan(f))
    .collect()
}

#[test]
fn every_backend_gives_the_same_sample_and_reads_each_page_once_per_relation_and_hop() {
    let g = big_graph();
    let fanouts = big_fanouts();
    let dir = tempfile::tempdir().unwrap();
    let seeds: Vec<u64> = (0..200).map(|i| i * 7 % 800).collect();
    let mut first: Option<HeteroSample> = None;
    for b in BACKENDS {
        let Some(mut s) = g.sampler(&fanouts, false, b, dir.path()) else {
            continue;
        };
        for batch in 0..3 {
            let before = s.io_stats();
            let out = s.sample(1, &seeds, 5, 2, batch, true).unwrap();
            let after = s.io_stats();
            if batch == 0 {
                check(&g, &fanouts, false, 1, &seeds, &out);
                assert!(out.row.iter().map(Vec::len).sum::<usize>() > 5000);
                match &first {
                    None => first = Some(out.clone()),
                    Some(f) => assert_eq!(&out, f, "{b:?} disagrees with memory"),
                }
            }
            // Disk reads: exactly one page of bytes per distinct page of each relation's
            // positions at each hop (a page two relations need is read by each: its own file).
            let edge = out.edge.as_ref().unwrap();
            let mut pages = 0;
            for (r, e) in edge.iter().enumerate() {
                let mut at = 0;
                for &n in &out.num_sampled_edges[r] {
                    let set: BTreeSet<u64> = e[at..at + n].iter().map(|p| p * 4 / 4096).collect();
                    pages += set.len() as u64;
                    at += n;
                }
            }
            match b {
                Backend::Mem32 | Backend::Mem64 => assert_eq!(after.bytes, 0),
                _ => assert_eq!(after.bytes - before.bytes, pages * 4096, "{b:?}"),
            }
            if let Backend::Pread(ONE_PAGE) = b {
                assert_eq!(after.reads - before.reads, pages);
            }
        }
    }
}

#[test]
fn same_batch_same_sample_other_batch_other_sample() {
    let g = big_graph();
    let fanouts = big_fanouts();
    let seeds: Vec<u64> = (0..50).map(|i| i * 13 % 800).collect();
    let mut s = g.mem_sampler(&fanouts, false);
    let mut again = g.mem_sampler(&fanouts, false);
    let out = s.sample(1, &seeds, 5, 2, 3, true).unwrap();
    assert_eq!(again.sample(1, &seeds, 5, 2, 3, true).unwrap(), out);
    for (seed, epoch, batch) in [(5, 2, 4), (5, 3, 3), (6, 2, 3)] {
        assert_ne!(s.sample(1, &seeds, seed, epoch, batch, true).unwrap(), out);
    }
    assert_eq!(s.sample(1, &seeds, 5, 2, 3, true).unwrap(), out);
    // With replacement, another stream of draws.
    let mut rep = g.mem_sampler(&fanouts, true);
    assert_ne!(rep.sample(1, &seeds, 5, 2, 3, true).unwrap(), out);

    // A relation's draws are its own: leaving relation 2 out of hop 0 changes nothing that
    // relation 3 samples at hop 0 (compared as global ids: local ids may shift).
    let hop0 = |out: &HeteroSample, r: usize| -> Vec<(u64, u64, u64)> {
        let rel = &g.rels[r];
        (0..out.num_sampled_edges[r][0])
            .map(|i| {
                let u = out.node[rel.src][out.row[r][i] as usize];
                let v = out.node[rel.dst][out.col[r][i] as usize];
                (u, v, out.edge.as_ref().unwrap()[r][i])
            })
            .collect()
    };
    let mut fewer = fanouts.clone();
    fewer[2][0] = Fanout::Count(0);
    let other = g
        .mem_sampler(&fewer, false)
        .sample(1, &seeds, 5, 2, 3, true)
        .unwrap();
    assert!(!hop0(&out, 3).is_empty());
    assert_eq!(hop0(&other, 3), hop0(&out, 3));
    assert!(hop0(&other, 2).is_empty() && !hop0(&out, 2).is_empty());
}

fn mem(v: Vec<u64>) -> NeighborSource {
    NeighborSource::Memory(Arc::new(Indices::U64(v)))
}

fn relation(
    src: usize,
    dst: usize,
    indptr: Vec<u64>,
    entries: Vec<u64>,
    hops: usize,
) -> HeteroRelation {
    HeteroRelation {
        src,
        dst,
        indptr: indptr.into(),
        source: mem(entries),
        fanouts: vec![Fanout::All; hops],
        times: None,
    }
}

#[test]
fn bad_inputs_are_clear_errors() {
    let new = |rels| {
        HeteroSampler::new(vec![3, 2], rels, false)
            .err()
            .unwrap()
            .to_string()
    };
    // Type indices.
    let msg = new(vec![relation(2, 0, vec![0, 0, 0, 0], vec![], 1)]);
    assert_eq!(
        msg,
        "relation 0: its source type 2 is out of range: there are 2 node types (ids 0..1); give \
         node counts for every type"
    );
    let msg = new(vec![
        relation(0, 0, vec![0; 4], vec![], 1),
        relation(0, 5, vec![0; 4], vec![], 1),
    ]);
    assert!(
        msg.starts_with("relation 1: its destination type 5 is out of range"),
        "{msg}"
    );
    // An offset index for the wrong type (3 nodes, but the destination has 2).
    let msg = new(vec![relation(0, 1, vec![0; 4], vec![], 1)]);
    assert!(
        msg.starts_with(
            "relation 0: its offset index has 4 entries, but its destination type 1 has 2 \
             nodes, so it needs 3"
        ),
        "{msg}"
    );
    // Hop counts that differ.
    let msg = new(vec![
        relation(0, 0, vec![0; 4], vec![], 2),
        relation(1, 0, vec![0; 4], vec![], 1),
    ]);
    assert!(
        msg.starts_with("relation 1 has 1 fanouts but relation 0 has 2"),
        "{msg}"
    );
    // A damaged offset index, or one past its neighbor file.
    let msg = new(vec![relation(0, 1, vec![0, 2, 1], vec![0, 0], 1)]);
    assert!(
        msg.contains("relation 0: offset index: indptr[1] = 2 > indptr[2] = 1"),
        "{msg}"
    );
    let msg = new(vec![relation(0, 1, vec![0, 1, 3], vec![0, 0], 1)]);
    assert!(msg.contains("neighbor file has 2 entries"), "{msg}");

    // Seeds: out of range for their type, or a type that does not exist.
    let mut s = HeteroSampler::new(
        vec![3, 2],
        vec![relation(1, 0, vec![0, 1, 1, 1], vec![5], 1)],
        false,
    )
    .unwrap();
    let err = s.sample(1, &[1, 2, 7], 0, 0, 0, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "seed node 2 of node type 1 is out of range: that type has 2 nodes (ids 0..1)"
    );
    let err = s.sample(2, &[0], 0, 0, 0, false).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("seed type 2 is out of range: there are 2 node types"),
        "{err}"
    );
    // Seeds of several types: the offending type is named, whichever entry it is.
    let err = s
        .sample_typed(&[(0, &[2, 0]), (1, &[1, 5])], 0, 0, 0, false)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "seed node 5 of node type 1 is out of range: that type has 2 nodes (ids 0..1)"
    );
    let err = s
        .sample_typed(&[(0, &[3]), (1, &[0])], 0, 0, 0, false)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "seed node 3 of node type 0 is out of range: that type has 3 nodes (ids 0..2)"
    );
    let err = s
        .sample_typed(&[(1, &[0]), (4, &[0])], 0, 0, 0, false)
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("seed type 4 is out of range: there are 2 node types"),
        "{err}"
    );
    // An entry that is not a node of the source type.
    let err = s.sample(0, &[0], 0, 0, 0, false).unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err:?}");
    assert!(
        err.to_string().starts_with(
            "entry 0 of the neighbor file of relation 0 is 5, but its source type 1 has 2 nodes"
        ),
        "{err}"
    );
    // The sampler still works afterwards.
    assert_eq!(
        s.sample(0, &[2, 1], 0, 0, 0, false).unwrap().node,
        vec![vec![2, 1], vec![]]
    );
}

#[test]
fn cancelling_stops_every_relation() {
    let g = papers();
    let dir = tempfile::tempdir().unwrap();
    for r in 0..3 {
        // Only relation r samples; seeds of its destination type, which has a neighbor there.
        let mut fanouts = vec![fan(&[0]); 3];
        fanouts[r] = fan(&[2]);
        let mut s = g
            .sampler(&fanouts, false, Backend::Pread(ONE_PAGE), dir.path())
            .unwrap();
        let dst = g.rels[r].dst;
        assert!(s.sample(dst, &[0], 0, 0, 0, false).is_ok());
        let reads = s.io_stats().reads;
        assert!(reads > 0);
        s.set_cancel(Arc::new(AtomicBool::new(true)));
        match s.sample(dst, &[0], 0, 0, 0, false) {
            Err(Error::Io { source, .. }) => assert_eq!(source.kind(), ErrorKind::Interrupted),
            other => panic!("relation {r}: expected an interrupted read, got {other:?}"),
        }
        assert_eq!(s.io_stats().reads, reads);
    }
}

// Hyperbatches: several batches sampled together, each relation's file read once per hop for
// all of them.

/// Seeds of batch `b` drawn from `ids`: of type 0 only for even `b`, of every type with nodes
/// for odd `b` (ids taken modulo each type's count, shifted so batches differ).
fn batch_seeds(g: &Typed, ids: &[u64], b: usize) -> Vec<(usize, Vec<u64>)> {
    let types: Vec<usize> = if b.is_multiple_of(2) {
        vec![0]
    } else {
        (0..g.num_nodes.len())
            .filter(|&t| g.num_nodes[t] > 0)
            .collect()
    };
    types
        .into_iter()
        .map(|t| {
            let n = g.num_nodes[t];
            (t, ids.iter().map(|&s| (s >> (t + b)) % n).collect())
        })
        .collect()
}

fn as_refs(seeds: &[(usize, Vec<u64>)]) -> Vec<(usize, &[u64])> {
    seeds.iter().map(|(t, v)| (*t, v.as_slice())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn a_hyperbatch_gives_each_batch_its_sample_alone(
        graph_seed: u64,
        types in 1usize..4,
        rels in 0usize..5,
        hops in 0usize..4,
        replace: bool,
        with_edge_ids: bool,
        seed: u64,
        h in 1usize..6,
        seed_ids in prop::collection::vec(any::<u64>(), 0..8),
    ) {
        let g = random_graph(graph_seed, types, rels, 300, 12);
        let fanouts = random_fanouts(graph_seed, rels, hops);
        let seeds: Vec<Vec<(usize, Vec<u64>)>> =
            (0..h).map(|b| batch_seeds(&g, &seed_ids, b)).collect();
        let refs: Vec<Vec<(usize, &[u64])>> = seeds.iter().map(|s| as_refs(s)).collect();
        let requests: Vec<HeteroRequest> = refs
            .iter()
            .enumerate()
            .map(|(b, s)| HeteroRequest { seeds: s, batch: 3 * b as u64 + 1, times: None })
            .collect();
        // Each batch alone, from memory, by a fresh sampler.
        let alone: Vec<HeteroSample> = requests
            .iter()
            .map(|q| {
                g.mem_sampler(&fanouts, replace)
                    .sample_typed(q.seeds, seed, 4, q.batch, with_edge_ids)
                    .unwrap()
            })
            .collect();
        if with_edge_ids {
            for (q, out) in requests.iter().zip(&alone) {
                check_typed(&g, &fanouts, replace, q.seeds, out);
            }
        }
        let dir = tempfile::tempdir().unwrap();
        for b in BACKENDS {
            let Some(mut s) = g.sampler(&fanouts, replace, b, dir.path()) else {
                continue;
            };
            let outs = s.sample_many(&requests, seed, 4, with_edge_ids).unwrap();
            prop_assert_eq!(&outs, &alone, "{:?}", b);
            // The sampler's states are reused: a smaller hyperbatch, then one batch, agree too.
            let outs = s.sample_many(&requests[h / 2..], seed, 4, with_edge_ids).unwrap();
            prop_assert_eq!(&outs[..], &alone[h / 2..], "{:?}", b);
            let q = requests[0];
            prop_assert_eq!(
                &s.sample_typed(q.seeds, seed, 4, q.batch, with_edge_ids).unwrap(),
                &alone[0]
            );
        }
    }
}

/// Distinct 4 KiB pages of u32 entries at each (relation, hop) of `outs`, over all of them.
fn pages_per_hop(outs: &[HeteroSample]) -> u64 {
    let (rels, hops) = (outs[0].row.len(), outs[0].num_sampled_edges[0].len());
    let mut pages = 0;
    for r in 0..rels {
        for k in 0..hops {
            let mut set = BTreeSet::new();
            for out in outs {
                let at: usize = out.num_sampled_edges[r][..k].iter().sum();
                let n = out.num_sampled_edges[r][k];
                let e = &out.edge.as_ref().unwrap()[r][at..at + n];
                set.extend(e.iter().map(|p| p * 4 / 4096));
            }
            pages += set.len() as u64;
        }
    }
    pages
}

#[test]
fn a_hyperbatch_reads_each_page_once_per_relation_and_hop() {
    let g = big_graph();
    let fanouts = big_fanouts();
    let dir = tempfile::tempdir().unwrap();
    // Four batches of 150 papers, one of them with 40 seeds of type 0 too.
    let seeds: Vec<Vec<(usize, Vec<u64>)>> = (0..4u64)
        .map(|b| {
            let mut s = vec![(1, (0..150).map(|i| (i * 11 + b * 97) % 800).collect())];
            if b == 2 {
                s.push((0, (0..40).map(|i| i * 31 % 2000).collect()));
            }
            s
        })
        .collect();
    let refs: Vec<Vec<(usize, &[u64])>> = seeds.iter().map(|s| as_refs(s)).collect();
    let requests: Vec<HeteroRequest> = refs
        .iter()
        .enumerate()
        .map(|(b, s)| HeteroRequest {
            seeds: s,
            batch: b as u64,
            times: None,
        })
        .collect();
    for b in [
        Backend::Pread(ONE_PAGE),
        Backend::Pread(CoalesceOptions::default()),
        Backend::Uring,
    ] {
        let Some(mut s) = g.sampler(&fanouts, false, b, dir.path()) else {
            continue;
        };
        let before = s.io_stats();
        let outs = s.sample_many(&requests, 5, 2, true).unwrap();
        let read = s.io_stats().bytes - before.bytes;
        let union = pages_per_hop(&outs);
        assert_eq!(read, union * 4096, "{b:?}");
        if let Backend::Pread(ONE_PAGE) = b {
            assert_eq!(s.io_stats().reads - before.reads, union);
        }
        // Alone, each batch reads its own pages: the pages batches share are read once here.
        let alone: u64 = outs
            .iter()
            .map(|o| pages_per_hop(std::slice::from_ref(o)))
            .sum();
        assert!(union * 10 < alone * 9, "{union} pages of {alone}");
        let before = s.io_stats();
        for q in &requests {
            s.sample_typed(q.seeds, 5, 2, q.batch, true).unwrap();
        }
        assert_eq!(s.io_stats().bytes - before.bytes, alone * 4096);
    }
}

#[test]
fn a_hyperbatch_checks_every_request_before_reading() {
    let g = papers();
    let fanouts = [fan(&[2]), fan(&[2]), fan(&[2])];
    let dir = tempfile::tempdir().unwrap();
    let mut s = g
        .sampler(&fanouts, false, Backend::Pread(ONE_PAGE), dir.path())
        .unwrap();
    let good: [(usize, &[u64]); 1] = [(1, &[0, 1])];
    let bad: [(usize, &[u64]); 2] = [(1, &[0]), (0, &[5])];
    let requests = [
        HeteroRequest {
            seeds: &good,
            batch: 0,
            times: None,
        },
        HeteroRequest {
            seeds: &bad,
            batch: 1,
            times: None,
        },
    ];
    let err = s.sample_many(&requests, 0, 0, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "seed node 5 of node type 0 is out of range: that type has 5 nodes (ids 0..4)"
    );
    assert_eq!(s.io_stats().reads, 0);
    // No request: no sample.
    assert!(s.sample_many(&[], 0, 0, false).unwrap().is_empty());
}
