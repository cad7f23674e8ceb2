//! The hot pages chosen for on-demand sampling (`hot_pages`): exact scores on a graph worked
//! out by hand, the cache filled with the best pages and kept, samples unchanged, and more of
//! the requests' page touches caught than by a cache learning from the traffic.

mod common;

use std::sync::Arc;

use common::{build, fan};
use ringgnn_io::{BackendKind, PageCache};
use ringgnn_sampler::hot_pages::{page_scores, preload, work_bytes};
use ringgnn_sampler::{Graph, NeighborAccess, OffsetIndex, SampleOptions, Seeds};
use ringgnn_store::rng;

const PAGE: u64 = 1024; // u32 entries per page

/// Node 0 has in-neighbors 1..=3000 (entries 0..3000: pages 0, 1 and 952 entries of page 2);
/// node i in 1..=3000 has the single in-neighbor 0 (entry 2999 + i).
fn star() -> Vec<(u64, u64)> {
    (1..=3000u64).flat_map(|i| [(i, 0), (0, i)]).collect()
}

#[test]
fn scores_are_the_expected_touches_per_request() {
    let (_d, ds) = build(&star(), None, false);
    let index = OffsetIndex::load(&ds).unwrap();
    let got = page_scores(&index, &fan(&[10, 5]), false).unwrap();
    let pages = (6000 * 4u64).div_ceil(4096) as usize;
    assert_eq!(got.len(), pages);
    // Hop 0: every node is the seed with r0 = 1/3001; node 0 touches a page holding q of its
    // 3000 entries with 1 - (1 - q/3000)^10; node i touches the page of entry 2999 + i.
    // Hop 1: node 0 is reached from every i (r = 3000 r0) and draws 5; node i is reached from
    // node 0 with r0 * 10/3000.
    let r0 = 1.0 / 3001.0f64;
    let mut want = vec![0f64; pages];
    for (p, q) in [(0, 1024.0), (1, 1024.0), (2, 952.0)] {
        want[p] += r0 * (1.0 - (1.0 - q / 3000.0f64).powi(10));
        want[p] += 3000.0 * r0 * (1.0 - (1.0 - q / 3000.0f64).powi(5));
    }
    for i in 1..=3000u64 {
        let p = ((2999 + i) / PAGE) as usize;
        want[p] += r0 + r0 * 10.0 / 3000.0;
    }
    for (p, (&g, &w)) in got.iter().zip(&want).enumerate() {
        // f32 sums: a ranking, not a measurement.
        assert!(
            (g as f64 - w).abs() <= 1e-4 * w.max(1e-3),
            "page {p}: {g} vs {w}"
        );
    }
}

/// A skewed graph: R-MAT-like sources and destinations.
fn skewed(n: u64, e: usize) -> Vec<(u64, u64)> {
    let mut r = rng::stream(5, 1, 1);
    let pick = |r: &mut _| {
        // At each halving, the lower half with 0.6: heavy hubs at low ids.
        let mut lo = 0;
        let mut span = n;
        while span > 1 {
            let x = rng::below(r, 10);
            span /= 2;
            if x >= 6 {
                lo += span;
            }
        }
        lo
    };
    (0..e).map(|_| (pick(&mut r), pick(&mut r))).collect()
}

fn disk_graph(ds: &ringgnn_store::Dataset) -> Graph {
    let access = NeighborAccess::Disk {
        kind: BackendKind::Pread,
        direct: false,
    };
    Graph::open(OffsetIndex::load(ds).unwrap(), access).unwrap()
}

#[test]
fn the_best_pages_are_read_and_kept_and_samples_do_not_change() {
    let n = 1 << 12;
    let (_d, ds) = build(&skewed(n, 120_000), Some(n), false);
    let fanouts = fan(&[10, 5]);
    let index = OffsetIndex::load(&ds).unwrap();
    let scores = page_scores(&index, &fanouts, false).unwrap();
    let cache = PageCache::new(PageCache::BYTES_PER_PAGE * 32).unwrap();
    assert_eq!(preload(&index, &fanouts, &cache, false).unwrap(), 32);
    // Cached: in every shard, its best pages (and their bytes are the file's).
    let file = std::fs::read(index.indices_path()).unwrap();
    let mut left_max = [0f32; 16];
    let mut worst_kept = [f32::INFINITY; 16];
    for (p, &score) in scores.iter().enumerate() {
        let shard = PageCache::shard_of(p as u64);
        let mut bytes = None;
        cache.get(p as u64, |b| bytes = Some(b.to_vec()));
        match bytes {
            Some(b) => {
                let end = ((p + 1) * 4096).min(file.len());
                assert_eq!(&b[..end - p * 4096], &file[p * 4096..end]);
                worst_kept[shard] = worst_kept[shard].min(score);
            }
            None => left_max[shard] = left_max[shard].max(score),
        }
    }
    for sh in 0..16 {
        let (kept, left) = (worst_kept[sh], left_max[sh]);
        assert!(kept >= left, "shard {sh}: kept {kept} < left {left}");
    }
    assert_eq!(cache.stats().pages, 32);

    // Through a graph's samplers: the same samples as from memory, pages found in the cache,
    // and the kept pages stay.
    let bytes = work_bytes(&index).max(PageCache::BYTES_PER_PAGE * 32);
    let graph = disk_graph(&ds).with_page_cache(bytes, &fanouts).unwrap();
    let memory = Graph::open(OffsetIndex::load(&ds).unwrap(), NeighborAccess::Memory).unwrap();
    let opts = SampleOptions {
        fanouts: fanouts.clone(),
        seed: 3,
        ..Default::default()
    };
    let (mut a, mut b) = (
        graph.sampler(&opts).unwrap(),
        memory.sampler(&opts).unwrap(),
    );
    let before = graph.page_cache_stats().unwrap();
    for k in 0..200u64 {
        let seeds = Seeds::new(vec![(k * 37) % n], n).unwrap();
        let x = a.sample(&graph, seeds.as_slice(), 0, k).unwrap();
        let y = b.sample(&memory, seeds.as_slice(), 0, k).unwrap();
        assert_eq!(x, y);
    }
    let after = graph.page_cache_stats().unwrap();
    assert!(
        after.hits > 0 && after.pages == before.pages,
        "{before:?} {after:?}"
    );
    // Too small a share for the arrays: an empty cache that learns.
    let small = disk_graph(&ds)
        .with_page_cache(PageCache::BYTES_PER_PAGE * 16, &fanouts)
        .unwrap();
    assert_eq!(small.page_cache_stats().unwrap().pages, 0);
    // The file in memory: no cache.
    let mem = Graph::open(OffsetIndex::load(&ds).unwrap(), NeighborAccess::Memory)
        .unwrap()
        .with_page_cache(1 << 30, &fanouts)
        .unwrap();
    assert!(mem.page_cache_stats().is_none());
}

#[test]
fn chosen_pages_catch_more_requests_than_a_cache_learning_from_them() {
    let n = 1 << 14;
    let (_d, ds) = build(&skewed(n, 400_000), Some(n), false);
    let fanouts = fan(&[20, 15, 10]);
    let index = OffsetIndex::load(&ds).unwrap();
    let file_pages = index.neighbor_file_bytes().div_ceil(4096);
    // A quarter of the file.
    let pages = (file_pages / 4).max(16);
    let chosen = Arc::new(PageCache::new(PageCache::BYTES_PER_PAGE * pages).unwrap());
    preload(&index, &fanouts, &chosen, false).unwrap();
    let learning = Arc::new(PageCache::new(PageCache::BYTES_PER_PAGE * pages).unwrap());
    // The same requests through both (uniform seeds among nodes with neighbors).
    let indptr = index.indptr().clone();
    let with = (0..n)
        .filter(|&v| indptr.degree(v as usize) > 0)
        .collect::<Vec<_>>();
    let opts = SampleOptions {
        fanouts,
        seed: 1,
        with_edge_ids: true,
        ..Default::default()
    };
    let memory = Graph::open(OffsetIndex::load(&ds).unwrap(), NeighborAccess::Memory).unwrap();
    let mut s = memory.sampler(&opts).unwrap();
    let mut r = rng::stream(9, 2, 2);
    let (mut hit_chosen, mut hit_learning, mut total) = (0u64, 0u64, 0u64);
    for k in 0..3000u64 {
        let v = with[rng::below(&mut r, with.len() as u64) as usize];
        let seeds = Seeds::new(vec![v], n).unwrap();
        let out = s.sample(&memory, seeds.as_slice(), 0, k).unwrap();
        let mut touched: Vec<u64> = out.edge.unwrap().iter().map(|e| e * 4 / 4096).collect();
        touched.sort_unstable();
        touched.dedup();
        for p in touched {
            total += 1;
            hit_chosen += chosen.get(p, |_| ()) as u64;
            if learning.get(p, |_| ()) {
                hit_learning += 1;
            } else {
                learning.insert(p, &[0; 4096]);
            }
        }
    }
    let (c, l) = (
        hit_chosen as f64 / total as f64,
        hit_learning as f64 / total as f64,
    );
    eprintln!("hit rates: chosen {c:.3}, learning {l:.3}");
    assert!(c > l + 0.05, "chosen {c:.3} vs learning {l:.3}");
}
