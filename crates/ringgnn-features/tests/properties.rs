//! Property tests: for random row sizes, dtypes, node counts, id lists and cache budgets,
//! every source gathers exactly the rows a direct reading of the input gives; and the cache's
//! galloping lookup agrees with a binary search.

mod common;

use std::sync::Arc;

use common::{build, expected, graph, values, DTYPES, TINY};
use proptest::prelude::*;
use ringgnn_features::{FeatureGatherer, HotRowCache};
use ringgnn_io::BackendKind;

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn gathered_rows_equal_the_input(
        dim in 1usize..1300,
        dtype in 0usize..3,
        v in 1u64..40,
        picks in prop::collection::vec(any::<u64>(), 0..90),
        budget_rows in 0u64..50,
        seed in any::<u64>(),
    ) {
        let dtype = DTYPES[dtype];
        let ids: Vec<u64> = picks.iter().map(|p| p % v).collect();
        let vals = values(v, dim, seed);
        let (_d, ds) = build(&graph(v, seed), v, &vals, dim, dtype);
        let row = ds.manifest().features.as_ref().unwrap().row_bytes + 8;
        let cache = Arc::new(HotRowCache::build_by_degree(&ds, budget_rows * row).unwrap());
        prop_assert_eq!(cache.len() as u64, budget_rows.min(v));
        let want = expected(&vals, dim, dtype, &ids);
        let open = |which: usize| match which {
            0 => FeatureGatherer::memory(&ds).unwrap(),
            1 => FeatureGatherer::open(&ds, BackendKind::Pread, false, TINY).unwrap().0,
            _ => {
                FeatureGatherer::open(&ds, BackendKind::Auto, true, Default::default())
                    .unwrap()
                    .0
            }
        };
        for which in 0..3 {
            for cached in [false, true] {
                let mut g = open(which);
                if cached {
                    g = g.with_cache(cache.clone()).unwrap();
                }
                let mut out = vec![f32::NAN; ids.len() * dim];
                g.gather(&ids, &mut out).unwrap();
                prop_assert!(out == want, "{} dim {} {:?} ids {:?}", g.source_name(), dim, dtype, ids);
            }
        }
    }

    #[test]
    fn galloping_lookup_agrees_with_binary_search(
        cached in prop::collection::btree_set(0u64..200, 0..60),
        mut batch in prop::collection::vec(0u64..220, 0..80),
    ) {
        batch.sort_unstable();
        batch.dedup();
        let v = 220;
        let dim = 2;
        let vals = values(v, dim, 0);
        let (_d, ds) = build(&graph(v, 0), v, &vals, dim, DTYPES[0]);
        let file = ringgnn_features::FeatureFile::of(&ds).unwrap();
        let mut src = ringgnn_features::RowSource::memory(&file).unwrap();
        let c = HotRowCache::load(&file, &mut src, cached.iter().copied().collect()).unwrap();
        let mut from = 0;
        for &id in &batch {
            let (pos, slot) = c.find_from(from, id);
            prop_assert!(pos >= from);
            prop_assert_eq!(slot, c.slot(id));
            prop_assert_eq!(pos, c.ids().partition_point(|&x| x < id));
            from = pos;
        }
    }
}
