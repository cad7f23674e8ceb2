//! The builder against an in-memory reference, on random graphs and the corner cases that
//! exercise every path: several flushes, many groups, range doubling, oversized buckets,
//! buckets of one repeated key, wide keys, and 1 vs several workers.

use proptest::prelude::*;

use super::*;
use crate::dataset::Dataset;
use crate::input::EdgeSource;
use crate::progress::NoProgress;

struct VecSource {
    edges: Vec<(u64, u64)>,
    at: usize,
    narrow: bool,
    rewinds: bool,
}

impl VecSource {
    fn new(edges: Vec<(u64, u64)>) -> Self {
        let narrow = edges.iter().all(|&(a, b)| a.max(b) < 1 << 32);
        VecSource {
            edges,
            at: 0,
            narrow,
            rewinds: true,
        }
    }
}

impl EdgeSource for VecSource {
    fn fill(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<usize> {
        let n = max.min(self.edges.len() - self.at);
        out.extend_from_slice(&self.edges[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
    fn position(&self) -> (u64, Option<u64>) {
        (self.at as u64, Some(self.edges.len() as u64))
    }
    fn unit(&self) -> &'static str {
        "edges"
    }
    fn ids_fit_u32(&self) -> bool {
        self.narrow
    }
    fn rewind(&mut self) -> Result<bool> {
        self.at = 0;
        Ok(self.rewinds)
    }
}

/// The CSC the spec defines, computed the obvious way.
fn reference(edges: &[(u64, u64)], o: &GraphOptions) -> (u64, Vec<Vec<u64>>) {
    let n = o
        .num_nodes
        .unwrap_or_else(|| edges.iter().map(|&(a, b)| a.max(b) + 1).max().unwrap_or(0));
    let mut lists = vec![Vec::new(); n as usize];
    for &(s, d) in edges {
        if s == d && o.self_loops == SelfLoops::Drop {
            continue;
        }
        lists[d as usize].push(s);
        if o.undirected && s != d {
            lists[s as usize].push(d);
        }
    }
    for l in &mut lists {
        l.sort_unstable();
        if o.dedup {
            l.dedup();
        }
    }
    (n, lists)
}

fn build_small(
    edges: &[(u64, u64)],
    o: &GraphOptions,
    sizes: Sizes,
) -> (tempfile::TempDir, Result<GraphSummary>) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mut staging = Staging::create(&out, false, &crate::NoProgress).unwrap();
    let mut src = VecSource::new(edges.to_vec());
    let r = build_with(&mut src, o, None, &mut staging, &NoProgress, sizes);
    if let Ok(g) = &r {
        let m =
            crate::convert::assemble(g, None, None, Default::default(), serde_json::Value::Null);
        staging.commit(m).unwrap();
    }
    (dir, r)
}

fn check(edges: &[(u64, u64)], o: &GraphOptions, sizes: Sizes) -> Vec<u8> {
    let (dir, r) = build_small(edges, o, sizes);
    let g = r.unwrap();
    let (n, lists) = reference(edges, o);
    assert_eq!(g.num_nodes, n);
    assert_eq!(
        g.num_edges,
        lists.iter().map(|l| l.len() as u64).sum::<u64>()
    );
    let ds = Dataset::open(&dir.path().join("ds")).unwrap();
    let mut want_ptr = vec![0u64];
    for l in &lists {
        want_ptr.push(want_ptr.last().unwrap() + l.len() as u64);
    }
    assert_eq!(ds.load_indptr().unwrap(), want_ptr);
    for (v, l) in lists
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .take(200)
    {
        assert_eq!(&ds.neighbors(v as u64).unwrap(), l, "node {v}");
    }
    let all: Vec<u64> = lists.concat();
    let raw = std::fs::read(dir.path().join("ds/indices.bin")).unwrap();
    let got: Vec<u64> = raw[..all.len() * 4]
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()) as u64)
        .collect();
    assert_eq!(got, all);
    let degs: Vec<u64> = lists.iter().map(|l| l.len() as u64).collect();
    if n > 0 {
        let mut sorted = degs.clone();
        sorted.sort_unstable();
        assert_eq!(g.degree.min, sorted[0]);
        assert_eq!(g.degree.max, *sorted.last().unwrap());
        assert_eq!(g.degree.median, sorted[(sorted.len() - 1) / 2]);
        assert_eq!(
            g.degree.zero,
            degs.iter().filter(|&&d| d == 0).count() as u64
        );
    }
    let mut bytes = std::fs::read(dir.path().join("ds/indptr.bin")).unwrap();
    bytes.extend(std::fs::read(dir.path().join("ds/indices.bin")).unwrap());
    bytes
}

fn tiny(workers: usize) -> Sizes {
    Sizes {
        chunk: 3,
        pass1_bytes: 16 * 8 * 2,
        group_bytes: 10 * 8 * 2,
        workers,
    }
}
fn roomy() -> Sizes {
    Sizes {
        chunk: 1024,
        pass1_bytes: 1 << 24,
        group_bytes: 1 << 24,
        workers: 1,
    }
}

fn opts(undirected: bool, drop: bool, dedup: bool, num_nodes: Option<u64>) -> GraphOptions {
    GraphOptions {
        undirected,
        self_loops: if drop {
            SelfLoops::Drop
        } else {
            SelfLoops::Keep
        },
        dedup,
        num_nodes,
        ..Default::default()
    }
}

#[test]
fn exact_small_graph() {
    // 0->1, 2->1, 1->2, 2->2 (self loop), 2->1 again.
    let e = [(0, 1), (2, 1), (1, 2), (2, 2), (2, 1)];
    let (dir, r) = build_small(&e, &opts(false, false, false, Some(4)), roomy());
    let g = r.unwrap();
    assert_eq!((g.num_nodes, g.num_edges), (4, 5));
    let ip: Vec<u64> = std::fs::read(dir.path().join("ds/indptr.bin")).unwrap()[..40]
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(ip, vec![0, 0, 3, 5, 5]);
    let ix: Vec<u32> = std::fs::read(dir.path().join("ds/indices.bin")).unwrap()[..20]
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(ix, vec![0, 2, 2, 1, 2]);
    assert_eq!(
        g.degree,
        DegreeStats {
            min: 0,
            max: 3,
            mean: 1.25,
            median: 0,
            zero: 2
        }
    );
}

#[test]
fn empty_input_needs_num_nodes() {
    let (_d, r) = build_small(&[], &opts(false, false, false, None), roomy());
    assert!(r.unwrap_err().to_string().contains("no edges"));
    check(&[], &opts(false, false, false, Some(5)), roomy());
    check(&[], &opts(false, false, false, Some(0)), roomy());
}

#[test]
fn ids_beyond_num_nodes_are_refused() {
    let (_d, r) = build_small(&[(0, 7)], &opts(false, false, false, Some(5)), roomy());
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("7") && msg.contains("--num-nodes 5"), "{msg}");
}

#[test]
fn hub_larger_than_memory_is_repartitioned() {
    // Node 3 has 200 in-edges, far above the 10-key group: forces re-partitioning, and the
    // 50 copies of 9->3 form a single-key bucket at the finest level.
    let mut e: Vec<(u64, u64)> = (0..150).map(|i| (i * 7 % 1000, 3)).collect();
    e.extend(std::iter::repeat_n((9, 3), 50));
    e.extend((0..40).map(|i| (i, i * 13 % 97)));
    for dedup in [false, true] {
        let a = check(&e, &opts(false, false, dedup, None), tiny(1));
        let b = check(&e, &opts(false, false, dedup, None), tiny(2));
        let c = check(&e, &opts(false, false, dedup, None), roomy());
        assert_eq!(a, b);
        assert_eq!(a, c);
    }
}

#[test]
fn ids_beyond_32_bits_ask_for_wide_keys() {
    // A full wide build needs a 2^33-entry indptr (64 GB), so check the switch itself here and
    // the wide key path on small ids in `matches_reference`.
    let dir = tempfile::tempdir().unwrap();
    let mut staging = Staging::create(&dir.path().join("ds"), false, &crate::NoProgress).unwrap();
    let mut src = VecSource::new(vec![(0, 1), (1 << 33, 1)]);
    let r = build::<u64>(
        &mut src,
        &opts(false, false, false, None),
        None,
        &mut staging,
        &NoProgress,
        roomy(),
    );
    assert!(matches!(r, Err(Error::Input(m)) if m == NEEDS_WIDE));
    let mut src = VecSource::new(vec![(0, u64::MAX)]);
    let r = build::<u128>(
        &mut src,
        &opts(false, false, false, None),
        None,
        &mut staging,
        &NoProgress,
        roomy(),
    );
    assert!(r.unwrap_err().to_string().contains("2^64-1"));
}

/// Build with wide (u128) keys although ids are small: must give the same bytes.
fn check_wide(edges: &[(u64, u64)], o: &GraphOptions, sizes: Sizes) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mut staging = Staging::create(&out, false, &crate::NoProgress).unwrap();
    let mut src = VecSource::new(edges.to_vec());
    let g = build::<u128>(&mut src, o, None, &mut staging, &NoProgress, sizes).unwrap();
    let m = crate::convert::assemble(&g, None, None, Default::default(), serde_json::Value::Null);
    staging.commit(m).unwrap();
    let mut bytes = std::fs::read(out.join("indptr.bin")).unwrap();
    bytes.extend(std::fs::read(out.join("indices.bin")).unwrap());
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn matches_reference(
        edges in prop::collection::vec((0u64..40, 0u64..40), 0..300),
        hub in prop::option::of(0u64..40),
        undirected: bool, drop: bool, dedup: bool, extra_nodes in prop::option::of(0u64..5),
        workers in 1usize..3,
    ) {
        let mut edges = edges;
        if let Some(h) = hub {
            edges.extend((0..60).map(|i| (i % 40, h)));
        }
        let max = edges.iter().map(|&(a, b)| a.max(b) + 1).max().unwrap_or(0);
        let num_nodes = extra_nodes.map(|x| max + x);
        if edges.is_empty() && num_nodes.is_none() {
            return Ok(());
        }
        let o = opts(undirected, drop, dedup, num_nodes);
        let a = check(&edges, &o, tiny(workers));
        let b = check(&edges, &o, roomy());
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(&a, &check_wide(&edges, &o, tiny(workers)));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn large_sparse_ids(edges in prop::collection::vec((0u64..300_000, 0u64..300_000), 1..200)) {
        let o = opts(false, false, false, None);
        let a = check(&edges, &o, tiny(2));
        let b = check(&edges, &o, roomy());
        prop_assert_eq!(a, b);
    }
}

// --- link splits -------------------------------------------------------------------------------

/// Build with `--link-split val=0.2,test=0.3`; return the dataset's files and the pairs of every
/// split (train, val, test).
fn build_link(
    edges: &[(u64, u64)],
    o: &GraphOptions,
    sizes: Sizes,
    seed: u64,
) -> (tempfile::TempDir, GraphSummary) {
    let plan = LinkPlan::Fractions {
        fractions: vec![("val".into(), 0.2), ("test".into(), 0.3)],
        seed,
    };
    let (dir, g) = build_plan(edges, o, sizes, &plan);
    (dir, g.unwrap())
}

/// Build with a link split; the dataset is committed when the build succeeds.
fn build_plan(
    edges: &[(u64, u64)],
    o: &GraphOptions,
    sizes: Sizes,
    plan: &LinkPlan,
) -> (tempfile::TempDir, Result<GraphSummary>) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mut staging = Staging::create(&out, false, &crate::NoProgress).unwrap();
    let mut src = VecSource::new(edges.to_vec());
    let r = build_with(&mut src, o, Some(plan), &mut staging, &NoProgress, sizes);
    if let Ok(g) = &r {
        let m =
            crate::convert::assemble(g, None, None, Default::default(), serde_json::Value::Null);
        staging.commit(m).unwrap();
    }
    (dir, r)
}

/// The pairs of split `name` (none when the build made no such split).
fn split_pairs(dir: &Path, g: &GraphSummary, name: &str) -> Vec<(u64, u64)> {
    let held = g.held_out.as_ref().unwrap();
    let Some(n) = held.splits.iter().find(|s| s.0 == name).map(|s| s.2) else {
        return Vec::new();
    };
    crate::link::read_pairs(&dir.join("ds").join(crate::link::pairs_file(name)), n).unwrap()
}

fn canonical(o: &GraphOptions, (s, d): (u64, u64)) -> (u64, u64) {
    if o.undirected {
        (s.min(d), s.max(d))
    } else {
        (s, d)
    }
}

/// The training graph is the reference graph less every held-out pair (both directions when
/// undirected, every parallel copy); the splits partition the distinct pairs; nothing depends on
/// the budget or the workers.
fn check_link(edges: &[(u64, u64)], o: &GraphOptions, seed: u64) {
    let plan = LinkPlan::Fractions {
        fractions: vec![("val".into(), 0.2), ("test".into(), 0.3)],
        seed,
    };
    check_plan(edges, o, &plan, true);
}

/// [`check_link`] for any plan; returns the pairs of train, val and test. `partition`: the
/// splits hold every distinct pair (false when `train` is a given list).
fn check_plan(
    edges: &[(u64, u64)],
    o: &GraphOptions,
    plan: &LinkPlan,
    partition: bool,
) -> Vec<std::collections::BTreeSet<(u64, u64)>> {
    use std::collections::BTreeSet;
    type Sets = Vec<BTreeSet<(u64, u64)>>;
    let mut first: Option<(Vec<Vec<u8>>, Sets)> = None;
    for sizes in [tiny(1), tiny(3), roomy()] {
        let (dir, g) = build_plan(edges, o, sizes, plan);
        let g = g.unwrap();
        let names = ["train", "val", "test"];
        let sets: Sets = names
            .iter()
            .map(|n| {
                let v = split_pairs(dir.path(), &g, n);
                let s: BTreeSet<_> = v.iter().copied().collect();
                assert_eq!(s.len(), v.len(), "split {n} holds a pair twice");
                let mut order = v.clone();
                order.sort_by_key(|&(s, d)| (d, s));
                assert_eq!(order, v, "split {n} is not in (dst, src) order");
                s
            })
            .collect();
        let (_, full) = reference(edges, o);
        let mut pairs = BTreeSet::new();
        for (d, l) in full.iter().enumerate() {
            for &s in l {
                if s != d as u64 {
                    pairs.insert(canonical(o, (s, d as u64)));
                }
            }
        }
        let union: BTreeSet<_> = sets.iter().flatten().copied().collect();
        let count = sets.iter().map(|s| s.len()).sum::<usize>();
        assert_eq!(count, union.len(), "a pair is in two splits");
        if partition {
            assert_eq!(union, pairs, "the splits must partition the distinct pairs");
        } else {
            assert!(union.is_subset(&pairs), "a split holds a pair of no edge");
        }
        let held: BTreeSet<_> = sets[1].union(&sets[2]).copied().collect();
        let kept: Vec<(u64, u64)> = edges
            .iter()
            .copied()
            .filter(|&(s, d)| s == d || !held.contains(&canonical(o, (s, d))))
            .collect();
        let mut ko = o.clone();
        ko.num_nodes = Some(g.num_nodes);
        let (_, want) = reference(&kept, &ko);
        let ds = Dataset::open(&dir.path().join("ds")).unwrap();
        for (v, l) in want.iter().enumerate() {
            assert_eq!(&ds.neighbors(v as u64).unwrap(), l, "node {v}");
        }
        assert_eq!(
            g.num_edges,
            want.iter().map(|l| l.len() as u64).sum::<u64>()
        );
        let files: Vec<Vec<u8>> = ["indptr.bin", "indices.bin"]
            .iter()
            .map(|f| f.to_string())
            .chain(names.iter().map(|n| crate::link::pairs_file(n)))
            .map(|f| std::fs::read(dir.path().join("ds").join(f)).unwrap_or_default())
            .collect();
        match &first {
            None => first = Some((files, sets)),
            Some((f, _)) => assert!(f == &files, "output depends on the budget or workers"),
        }
    }
    first.unwrap().1
}

#[test]
fn link_split_exact_small_graph() {
    // Parallel edges, both directions listed, a self loop.
    let edges = [
        (0, 1),
        (0, 1),
        (1, 0),
        (2, 2),
        (2, 3),
        (3, 4),
        (4, 0),
        (1, 3),
        (3, 1),
        (0, 4),
    ];
    for undirected in [false, true] {
        for dedup in [false, true] {
            for seed in 0..6 {
                check_link(&edges, &opts(undirected, false, dedup, None), seed);
            }
        }
    }
}

#[test]
fn link_split_of_a_hub_larger_than_memory() {
    // 60 copies of one edge: a bucket of one repeated key, emitted without loading it.
    let mut edges = vec![(3u64, 7u64); 60];
    edges.extend((0..40).map(|i| (i % 9, 7)));
    for seed in 0..8 {
        check_link(&edges, &opts(false, false, false, None), seed);
        check_link(&edges, &opts(true, false, true, None), seed);
    }
}

#[test]
fn link_split_sizes_follow_the_fractions() {
    // 40,000 distinct undirected pairs: each is held out with probability 0.2 (val) and 0.3
    // (test), so the counts are binomial with sd about 80 and 92; allow 5 sd.
    let mut edges = Vec::new();
    for a in 0..400u64 {
        for k in 1..=100u64 {
            edges.push((a, 400 + (a * 7 + k * 13) % 4000 + a));
        }
    }
    let o = opts(true, false, true, None);
    let (dir, g) = build_link(&edges, &o, roomy(), 11);
    let val = split_pairs(dir.path(), &g, "val").len() as f64;
    let test = split_pairs(dir.path(), &g, "test").len() as f64;
    let train = split_pairs(dir.path(), &g, "train").len() as f64;
    let n = val + test + train;
    assert!(
        (val - 0.2 * n).abs() < 5.0 * (n * 0.2 * 0.8).sqrt(),
        "val {val} of {n}"
    );
    assert!(
        (test - 0.3 * n).abs() < 5.0 * (n * 0.3 * 0.7).sqrt(),
        "test {test} of {n}"
    );
}

#[test]
fn a_node_count_beyond_the_disk_is_refused_before_the_index_is_written() {
    // One id of 2^40: the first pass learns the count; nothing of the 8 TiB index is written.
    let dir = tempfile::tempdir().unwrap();
    let mut staging = Staging::create(&dir.path().join("ds"), false, &NoProgress).unwrap();
    let mut src = VecSource::new(vec![(0, 1), (1, 1 << 40)]);
    let e = build_graph(
        &mut src,
        &GraphOptions::default(),
        &mut staging,
        &NoProgress,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("writing it needs 8.0 TiB") && e.contains("1099511627777 nodes x 8 B"),
        "{e}"
    );
    assert!(!staging.dir().join(INDPTR_FILE).exists());
}

/// Raises the cancellation when the build's stage of that name starts, as the Python relay does
/// on Ctrl-C.
struct CancelAt(&'static str, crate::Cancel);

impl Progress for CancelAt {
    fn stage(&self, name: &str, _: Option<u64>, _: &str) {
        if name == self.0 {
            self.1.cancel();
        }
    }
    fn advance(&self, _: u64) -> Result<()> {
        self.1.check()
    }
    fn cancel(&self) -> crate::Cancel {
        self.1.clone()
    }
}

#[test]
fn cancel_stops_a_long_run_of_empty_nodes() {
    // 2^28 nodes and two edges: 2 GiB of index written in one loop without a progress report;
    // the writer notices the cancellation within its buffer.
    let dir = tempfile::tempdir().unwrap();
    let progress = CancelAt("sort", Default::default());
    let mut staging = Staging::create(&dir.path().join("ds"), false, &progress).unwrap();
    let o = GraphOptions {
        num_nodes: Some(1 << 28),
        ..GraphOptions::default()
    };
    let mut src = VecSource::new(vec![(0, 1), (1, 2)]);
    let r = build_graph(&mut src, &o, &mut staging, &progress);
    assert!(matches!(r, Err(Error::Interrupted)), "{r:?}");
    let written = std::fs::metadata(staging.dir().join(INDPTR_FILE))
        .unwrap()
        .len();
    assert!(
        written <= 8 << 20,
        "{written} bytes of index written after the cancellation"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn link_split_never_leaks(
        edges in prop::collection::vec((0u64..30, 0u64..30), 1..120),
        undirected: bool,
        dedup: bool,
        seed in 0u64..1000,
    ) {
        check_link(&edges, &opts(undirected, false, dedup, None), seed);
    }
}

mod given;
mod split_time;
mod times;
