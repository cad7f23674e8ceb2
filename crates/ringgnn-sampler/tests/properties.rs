//! Property tests: on random graphs (with hubs, self loops and parallel edges), every sample
//! satisfies the invariants of PyG's `SamplerOutput` and of uniform neighbor sampling, and all
//! backends (memory; pread with large and with one-page coalescing) give identical samples.

mod common;

use std::collections::HashSet;

use common::{build, csc, samplers, SampleIds};
use proptest::prelude::*;
use ringgnn_sampler::{sample_bound, SampledSubgraph};
use ringgnn_store::rng;

/// Random edges: destinations skewed towards low ids (min of two uniforms) so that some nodes
/// have large in-degree and their lists span several pages.
fn edges(n: u64, e: usize, graph_seed: u64) -> Vec<(u64, u64)> {
    let mut r = rng::stream(graph_seed, 1, 0);
    (0..e)
        .map(|_| {
            let src = rng::below(&mut r, n);
            let dst = rng::below(&mut r, n).min(rng::below(&mut r, n));
            (src, dst)
        })
        .collect()
}

/// Check every invariant of `out`, sampled from the graph `(indptr, nbrs)` with `fanouts`.
fn check(
    indptr: &[u64],
    nbrs: &[Vec<u64>],
    fanouts: &[i64],
    replace: bool,
    seeds: &[u64],
    out: &SampledSubgraph,
) {
    let hops = fanouts.len();
    assert_eq!(out.num_sampled_nodes.len(), hops + 1);
    assert_eq!(out.num_sampled_edges.len(), hops);
    assert_eq!(out.num_sampled_nodes.iter().sum::<usize>(), out.node.len());
    let ne: usize = out.num_sampled_edges.iter().sum();
    let edge = out.edge.as_ref().expect("edge ids were requested");
    assert_eq!((out.row.len(), out.col.len(), edge.len()), (ne, ne, ne));

    // Nodes: no duplicates, seeds first (deduplicated, first occurrence kept).
    let distinct: HashSet<u64> = out.node.iter().copied().collect();
    assert_eq!(distinct.len(), out.node.len(), "duplicate nodes");
    let mut seen = HashSet::new();
    let dedup: Vec<u64> = seeds.iter().copied().filter(|s| seen.insert(*s)).collect();
    assert_eq!(&out.node[..out.num_sampled_nodes[0]], &dedup[..]);

    let mut all_edges = HashSet::new();
    for k in 1..=hops {
        let frontier = out.hop_nodes(k - 1);
        let fresh = out.hop_nodes(k);
        let range = out.hop_edges(k);
        // Nodes first reached at hop k are exactly the new rows of hop k, in discovery order.
        let mut found = vec![];
        for &r in &out.row[range.clone()] {
            let r = r as usize;
            assert!(
                r < fresh.end,
                "row {r} beyond the nodes known after hop {k}"
            );
            if r >= fresh.start && !found.contains(&r) {
                found.push(r);
            }
        }
        assert_eq!(found, fresh.clone().collect::<Vec<_>>());
        // Cols: nodes of the frontier, in frontier order.
        let cols = &out.col[range.clone()];
        assert!(cols.windows(2).all(|w| w[0] <= w[1]));
        for l in frontier {
            let v = out.node[l] as usize;
            let (lo, hi) = (indptr[v], indptr[v + 1]);
            let deg = hi - lo;
            let mine: Vec<usize> = range
                .clone()
                .filter(|&i| out.col[i] as usize == l)
                .collect();
            let want = match (fanouts[k - 1], replace) {
                (-1, _) => deg,
                (f, false) => deg.min(f as u64),
                (f, true) => {
                    if deg == 0 {
                        0
                    } else {
                        f as u64
                    }
                }
            };
            assert_eq!(
                mine.len() as u64,
                want,
                "edges drawn for node {v} at hop {k}"
            );
            for (j, &i) in mine.iter().enumerate() {
                // The edge exists: its position lies in v's range and holds node[row].
                let e = edge[i];
                assert!(
                    lo <= e && e < hi,
                    "edge {e} outside node {v}'s range {lo}..{hi}"
                );
                assert_eq!(nbrs[v][(e - lo) as usize], out.node[out.row[i] as usize]);
                if j > 0 {
                    let prev = edge[mine[j - 1]];
                    assert!(prev <= e, "positions of one node are ascending");
                }
            }
        }
        for &e in &edge[range] {
            let new = all_edges.insert(e);
            assert!(
                new || replace,
                "position {e} drawn twice without replacement"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn samples_are_valid_and_backend_independent(
        n in 1u64..1500,
        e in 0usize..6000,
        graph_seed in any::<u64>(),
        seed_picks in prop::collection::vec(any::<u64>(), 0..12),
        fanouts in prop::collection::vec(prop_oneof![Just(-1i64), 1i64..8], 0..4),
        replace in any::<bool>(),
        seed in any::<u64>(),
        epoch in 0u64..4,
        batch in 0u64..1000,
    ) {
        let (_d, ds) = build(&edges(n, e, graph_seed), Some(n), false);
        let (indptr, nbrs) = csc(&ds);
        let seeds: Vec<u64> = seed_picks.iter().map(|s| s % n).collect();
        let mut all = samplers(&ds, &fanouts, replace);
        let first = all[0].sample_ids(&seeds, seed, epoch, batch, true).unwrap();
        check(&indptr, &nbrs, &fanouts, replace, &seeds, &first);
        // Within the bound the memory plan counts.
        let max_degree = indptr.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let b = sample_bound(seeds.len() as u64, &common::fan(&fanouts), replace, max_degree, n, e as u64);
        prop_assert!(first.node.len() as u64 <= b.nodes, "{} nodes > bound {:?}", first.node.len(), b);
        prop_assert!(first.row.len() as u64 <= b.edges, "{} edges > bound {:?}", first.row.len(), b);
        let hop_max = first.num_sampled_edges.iter().copied().max().unwrap_or(0) as u64;
        prop_assert!(hop_max <= b.hop_edges, "a hop of {hop_max} edges > bound {:?}", b);
        for s in &mut all[1..] {
            prop_assert_eq!(&s.sample_ids(&seeds, seed, epoch, batch, true).unwrap(), &first);
        }
        // Workspaces are reused across batches without leaking state into the next sample.
        let s = &mut all[2];
        let _ = s.sample_ids(&seeds, seed, epoch, batch + 1, false).unwrap();
        prop_assert_eq!(&s.sample_ids(&seeds, seed, epoch, batch, true).unwrap(), &first);
    }
}
