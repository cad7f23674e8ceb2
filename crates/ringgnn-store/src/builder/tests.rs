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
    let r = build_with(&mut src, o, &mut staging, &NoProgress, sizes);
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
        &mut staging,
        &NoProgress,
        roomy(),
    );
    assert!(matches!(r, Err(Error::Input(m)) if m == NEEDS_WIDE));
    let mut src = VecSource::new(vec![(0, u64::MAX)]);
    let r = build::<u128>(
        &mut src,
        &opts(false, false, false, None),
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
    let g = build::<u128>(&mut src, o, &mut staging, &NoProgress, sizes).unwrap();
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
