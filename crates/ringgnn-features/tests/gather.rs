//! Gathered rows equal the rows in the file: every dtype, row sizes below, at and above a page,
//! every source, with and without the hot-row cache, for id sets with duplicates, in any order,
//! empty and complete. Reads touch each needed page once, and bad ids are clear errors.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::{build, caches, expected, gatherers, graph, values, Rng, DTYPES, TINY};
use ringgnn_features::{Error, FeatureFile, FeatureGatherer, GatherStats, HotRowCache};
use ringgnn_io::{BackendKind, CoalesceOptions, ALIGN};

/// Id sets worth gathering for `v` nodes.
fn id_sets(v: u64, seed: u64) -> Vec<Vec<u64>> {
    let mut r = Rng::new(seed);
    let random: Vec<u64> = (0..3 * v).map(|_| r.below(v)).collect();
    vec![
        vec![],
        vec![v - 1],
        (0..v).collect(),
        (0..v).rev().collect(),
        random,
        vec![0, v - 1, 0, v / 2, v - 1, v / 2, 0],
    ]
}

/// The distinct pages the rows of `ids` touch.
fn pages_of(file: &FeatureFile, ids: &BTreeSet<u64>) -> u64 {
    let rb = file.info.row_bytes;
    let pages: BTreeSet<u64> = ids
        .iter()
        .flat_map(|&id| {
            let off = file.info.row_offset(id);
            off / ALIGN as u64..=(off + rb - 1) / ALIGN as u64
        })
        .collect();
    pages.len() as u64
}

#[test]
fn rows_match_the_file_for_every_dtype_source_and_cache() {
    let v = 40;
    // Row bytes (f32 / 16-bit): 12/6, 400/200, 4096/2048, 4400/2200 (f32 straddles pages),
    // 8400/4200 (both straddle).
    for dim in [3, 100, 1024, 1100, 2100] {
        for dtype in DTYPES {
            let vals = values(v, dim, dim as u64);
            let (_d, ds) = build(&graph(v, 1), v, &vals, dim, dtype);
            let file = FeatureFile::of(&ds).unwrap();
            for (cname, cache) in caches(&ds) {
                for (gname, g) in gatherers(&ds) {
                    let mut g = match &cache {
                        Some(c) => g.with_cache(c.clone()).unwrap(),
                        None => g,
                    };
                    for ids in id_sets(v, dim as u64) {
                        let what = format!("{dtype:?} dim {dim}, {gname}, {cname}, {ids:?}");
                        let mut out = vec![f32::NAN; ids.len() * dim];
                        let st = g.gather(&ids, &mut out).unwrap();
                        let want = expected(&vals, dim, dtype, &ids);
                        assert!(out == want, "{what}: wrong rows");
                        let distinct: BTreeSet<u64> = ids.iter().copied().collect();
                        assert_eq!(st.rows_requested, ids.len() as u64, "{what}");
                        assert_eq!(st.distinct_rows, distinct.len() as u64, "{what}");
                        let cached: BTreeSet<u64> = match &cache {
                            Some(c) => c.ids().iter().copied().collect(),
                            None => BTreeSet::new(),
                        };
                        let misses: BTreeSet<u64> = distinct.difference(&cached).copied().collect();
                        assert_eq!(
                            st.cache_hits,
                            (distinct.len() - misses.len()) as u64,
                            "{what}"
                        );
                        check_pages(&file, &misses, &st, &gname, &what);
                    }
                }
            }
        }
    }
}

/// Each needed page is read once per call: exactly the distinct pages when one read batch
/// holds them (or rows fit in a page, so no row shares a page across a wave boundary), at most
/// one extra page per extra wave otherwise.
fn check_pages(file: &FeatureFile, misses: &BTreeSet<u64>, st: &GatherStats, g: &str, what: &str) {
    assert_eq!(st.bytes_read, st.pages_read * ALIGN as u64, "{what}");
    if g == "memory" {
        assert_eq!((st.pages_read, st.read_batches), (0, 0), "{what}");
        return;
    }
    let need = pages_of(file, misses);
    if st.read_batches <= 1 || file.info.row_bytes <= ALIGN as u64 {
        assert_eq!(st.pages_read, need, "{what}");
    } else {
        assert!(st.pages_read >= need, "{what}");
        assert!(st.pages_read < need + st.read_batches, "{what}");
    }
    assert!(st.read_requests <= st.pages_read, "{what}");
    assert_eq!(st.read_batches == 0, misses.is_empty(), "{what}");
}

#[test]
fn one_read_batch_reads_exactly_the_distinct_pages() {
    // 2000 rows of 400 bytes, 10 per page: 200 pages. Ids from pages 0-9 plus every 10th page.
    let (v, dim) = (2000, 100);
    let vals = values(v, dim, 7);
    let (_d, ds) = build(&graph(v, 2), v, &vals, dim, common::DTYPES[0]);
    let file = FeatureFile::of(&ds).unwrap();
    let mut ids: Vec<u64> = (0..100).rev().collect();
    ids.extend((0..200).step_by(10).map(|p| p * 10 + 3));
    ids.extend([5, 5, 5]);
    let distinct: BTreeSet<u64> = ids.iter().copied().collect();
    let need = pages_of(&file, &distinct);
    assert_eq!(need, 10 + 19);
    let (mut g, _) =
        FeatureGatherer::open(&ds, BackendKind::Pread, false, Default::default()).unwrap();
    let mut out = vec![0.0; ids.len() * dim];
    let st = g.gather(&ids, &mut out).unwrap();
    assert_eq!(out, expected(&vals, dim, common::DTYPES[0], &ids));
    assert_eq!((st.pages_read, st.read_batches), (need, 1));
    // Pages 0-10 are one run (page 10 is adjacent); pages 20, 30, ..., 190 one request each.
    assert_eq!(st.read_requests, 1 + 18);
    assert!(
        st.pages_read * 4096 < ids.len() as u64 * 4096,
        "coalescing saves reads"
    );
    // With one page per request and per batch, still each page once.
    let (mut g, _) = FeatureGatherer::open(&ds, BackendKind::Pread, false, TINY).unwrap();
    let st = g.gather(&ids, &mut out).unwrap();
    assert_eq!(
        (st.pages_read, st.read_requests, st.read_batches),
        (need, need, need)
    );
    assert_eq!(g.stats(), st);
}

#[test]
fn hit_counting_is_exact() {
    // Node 0 has in-degree 9, node 5 degree 2, node 7 degree 1, the rest 0.
    let mut edges: Vec<_> = (1..10).map(|i| (i, 0)).collect();
    edges.extend([(1, 5), (2, 5), (3, 7)]);
    let (v, dim) = (10, 6);
    let vals = values(v, dim, 3);
    let dtype = common::DTYPES[1];
    let (_d, ds) = build(&edges, v, &vals, dim, dtype);
    let row = 12 + 8;
    let cache = Arc::new(HotRowCache::build_by_degree(&ds, 2 * row + row - 1).unwrap());
    assert_eq!(cache.ids(), &[0, 5]);
    let (g, _) = FeatureGatherer::open(&ds, BackendKind::Pread, false, TINY).unwrap();
    let mut g = g.with_cache(cache).unwrap();
    let ids = [0, 0, 5, 1, 2, 5, 9];
    let mut out = vec![0.0; ids.len() * dim];
    let st = g.gather(&ids, &mut out).unwrap();
    assert_eq!(out, expected(&vals, dim, dtype, &ids));
    let want = GatherStats {
        rows_requested: 7,
        distinct_rows: 5,
        cache_hits: 2,
        // Rows 1, 2 and 9 share page 0 (682 rows of 12 bytes per page).
        pages_read: 1,
        bytes_read: 4096,
        read_requests: 1,
        read_batches: 1,
    };
    assert_eq!(st, want);
    assert_eq!(st.hit_rate(), 0.4);
    // All hits: nothing read.
    let st = g.gather(&[5, 0], &mut out[..2 * dim]).unwrap();
    assert_eq!((st.cache_hits, st.pages_read, st.read_batches), (2, 0, 0));
    assert_eq!(g.stats().cache_hits, 4);
    assert_eq!(g.stats().rows_requested, 9);
}

#[test]
fn bad_ids_and_outputs_are_clear_errors() {
    let (v, dim) = (10, 4);
    let vals = values(v, dim, 1);
    let (_d, ds) = build(&graph(v, 3), v, &vals, dim, common::DTYPES[0]);
    for (name, mut g) in gatherers(&ds) {
        let mut out = vec![0.0; 3 * dim];
        let e = g.gather(&[1, 10, 2], &mut out).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NodeOutOfRange {
                    id: 10,
                    num_nodes: 10
                }
            ),
            "{name}: {e:?}"
        );
        assert!(e.to_string().contains("node 10 is out of range"), "{e}");
        let e = g.gather(&[u64::MAX], &mut out[..dim]).unwrap_err();
        assert!(e.to_string().contains(&u64::MAX.to_string()), "{e}");
        assert_eq!(
            g.stats(),
            GatherStats::default(),
            "{name}: nothing was read"
        );
        let e = g.gather(&[1, 2], &mut out).unwrap_err();
        assert!(e.to_string().contains("the output holds 12 values"), "{e}");
    }
    // A cache of another dataset is refused.
    let (_d2, other) = build(
        &graph(v, 3),
        v,
        &vals[..v as usize * 2],
        2,
        common::DTYPES[0],
    );
    let c = Arc::new(HotRowCache::build_by_degree(&other, 1 << 20).unwrap());
    let g = FeatureGatherer::memory(&ds).unwrap();
    let e = g.with_cache(c).err().unwrap();
    assert!(e.to_string().contains("another feature layout"), "{e}");
}

#[test]
fn a_dataset_without_features_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("e.txt");
    std::fs::write(&input, "0 1\n1 2\n").unwrap();
    let opts = ringgnn_store::ConvertOptions {
        input,
        out: dir.path().join("ds"),
        format: None,
        graph: Default::default(),
        features: None,
        feature_dtype: None,
        labels: None,
        split: None,
        link_split: None,
        seed: 0,
        overwrite: false,
        node_ids: None,
        excerpts: Default::default(),
    };
    ringgnn_store::convert(&opts, &ringgnn_store::NoProgress).unwrap();
    let ds = ringgnn_store::Dataset::open(&dir.path().join("ds")).unwrap();
    let e = FeatureGatherer::memory(&ds).err().unwrap();
    assert!(e.to_string().contains("has no node features"), "{e}");
    let e = HotRowCache::build_by_degree(&ds, 1 << 20).unwrap_err();
    assert!(matches!(e, Error::NoFeatures { .. }), "{e:?}");
    let e = FeatureGatherer::open(&ds, BackendKind::Pread, false, CoalesceOptions::default())
        .err()
        .unwrap();
    assert!(matches!(e, Error::NoFeatures { .. }), "{e:?}");
}

#[test]
fn gatherers_move_to_worker_threads_and_share_caches() {
    fn send<T: Send>() {}
    fn share<T: Send + Sync>() {}
    send::<FeatureGatherer>();
    share::<HotRowCache>();
}
