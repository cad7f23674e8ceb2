//! The hot-row cache: exact selection by degree and by access counts on tiny graphs, the budget
//! rules (0 holds nothing, more than the file holds the file and no more), and cached rows equal
//! to the file's.

mod common;

use common::{build, expected, stored, values, DTYPES};
use ringgnn_features::cache::INDEX_BYTES_PER_ROW;
use ringgnn_features::rows::decode_row;
use ringgnn_features::{Error, FeatureFile, HotRowCache};

/// A star into node 0 (in-degree 8) over 12 nodes, plus edges giving node 6 in-degree 3 and
/// nodes 2 and 9 in-degree 1: degrees 8, 0, 1, 0, 0, 0, 3, 0, 0, 1, 0, 0.
fn star() -> Vec<(u64, u64)> {
    let mut e: Vec<_> = (1..9).map(|i| (i, 0)).collect();
    e.extend([(0, 6), (1, 6), (2, 6), (3, 2), (4, 9)]);
    e
}

#[test]
fn rows_are_chosen_by_in_degree_ties_to_small_ids() {
    let (v, dim) = (12, 5);
    let vals = values(v, dim, 1);
    let (_d, ds) = build(&star(), v, &vals, dim, DTYPES[0]);
    let row = 20 + INDEX_BYTES_PER_ROW;
    let ids = |budget| {
        HotRowCache::build_by_degree(&ds, budget)
            .unwrap()
            .ids()
            .to_vec()
    };
    assert_eq!(ids(0), Vec::<u64>::new());
    assert_eq!(ids(row - 1), Vec::<u64>::new());
    assert_eq!(ids(row), vec![0]);
    assert_eq!(ids(2 * row + row - 1), vec![0, 6]);
    assert_eq!(ids(3 * row), vec![0, 2, 6]);
    assert_eq!(ids(4 * row), vec![0, 2, 6, 9]);
    // Then degree 0, smallest ids first.
    assert_eq!(ids(6 * row), vec![0, 1, 2, 3, 6, 9]);
    assert_eq!(ids(1 << 40), (0..12).collect::<Vec<_>>());
}

#[test]
fn the_budget_bounds_memory_and_never_over_allocates() {
    let (v, dim) = (12, 5);
    let vals = values(v, dim, 1);
    for dtype in DTYPES {
        let (_d, ds) = build(&star(), v, &vals, dim, dtype);
        let file = FeatureFile::of(&ds).unwrap();
        let row = file.info.row_bytes + INDEX_BYTES_PER_ROW;
        let empty = HotRowCache::build_by_degree(&ds, 0).unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.bytes(), 0);
        for budget in [row * 3 + 1, row * 7, 1 << 40, u64::MAX] {
            let c = HotRowCache::build_by_degree(&ds, budget).unwrap();
            assert!(c.bytes() <= budget, "{dtype:?} {budget}");
            assert_eq!(c.len() as u64, (budget / row).min(v), "{dtype:?} {budget}");
            assert_eq!(c.bytes(), c.len() as u64 * row);
            // Rows are kept in the stored dtype and read back exactly.
            for (slot, &id) in c.ids().iter().enumerate() {
                assert_eq!(c.slot(id), Some(slot));
                let mut got = vec![0.0; dim];
                decode_row(dtype, c.row(slot), &mut got);
                assert_eq!(got, expected(&vals, dim, dtype, &[id]));
                assert_eq!(got[0], stored(vals[id as usize * dim], dtype));
            }
        }
        let all = HotRowCache::build_by_degree(&ds, u64::MAX).unwrap();
        assert_eq!(all.len(), 12);
        assert_eq!(all.bytes(), 12 * row);
        assert_eq!(all.slot(12), None);
    }
}

#[test]
fn rows_are_chosen_by_access_counts() {
    let (v, dim) = (12, 5);
    let vals = values(v, dim, 2);
    let (_d, ds) = build(&star(), v, &vals, dim, DTYPES[2]);
    let row = 10 + INDEX_BYTES_PER_ROW;
    // Node 3 is counted twice (5 + 2 = 7), as often as node 9; node 2 never.
    let counts = [(3, 5), (7, 1), (3, 2), (9, 7), (2, 0), (11, 4)];
    let ids = |budget| {
        HotRowCache::build_from_counts(&ds, budget, &counts)
            .unwrap()
            .ids()
            .to_vec()
    };
    assert_eq!(ids(0), Vec::<u64>::new());
    assert_eq!(ids(row), vec![3]);
    assert_eq!(ids(2 * row), vec![3, 9]);
    assert_eq!(ids(3 * row), vec![3, 9, 11]);
    assert_eq!(ids(4 * row), vec![3, 7, 9, 11]);
    // Ids never accessed are not cached, whatever the budget.
    assert_eq!(ids(u64::MAX), vec![3, 7, 9, 11]);
    assert_eq!(
        HotRowCache::build_from_counts(&ds, u64::MAX, &[])
            .unwrap()
            .len(),
        0
    );
    let e = HotRowCache::build_from_counts(&ds, 1 << 20, &[(1, 1), (12, 3)]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::NodeOutOfRange {
                id: 12,
                num_nodes: 12
            }
        ),
        "{e:?}"
    );
}

#[test]
fn cache_ids_must_be_ascending_and_in_range() {
    let (v, dim) = (12, 5);
    let vals = values(v, dim, 2);
    let (_d, ds) = build(&star(), v, &vals, dim, DTYPES[0]);
    let file = FeatureFile::of(&ds).unwrap();
    let mut src = ringgnn_features::RowSource::memory(&file).unwrap();
    let e = HotRowCache::load(&file, &mut src, vec![3, 2]).unwrap_err();
    assert!(e.to_string().contains("ascending and distinct"), "{e}");
    let e = HotRowCache::load(&file, &mut src, vec![3, 3]).unwrap_err();
    assert!(e.to_string().contains("found 3 then 3"), "{e}");
    let e = HotRowCache::load(&file, &mut src, vec![3, 12]).unwrap_err();
    assert!(e.to_string().contains("node 12 is out of range"), "{e}");
}

#[test]
fn rows_are_exactly_the_ids_given() {
    let (v, dim) = (12, 5);
    let vals = values(v, dim, 3);
    for dtype in DTYPES {
        let (_d, ds) = build(&star(), v, &vals, dim, dtype);
        let c = HotRowCache::build_from_ids(&ds, vec![1, 4, 11]).unwrap();
        assert_eq!(c.ids(), &[1, 4, 11]);
        for (slot, &id) in c.ids().iter().enumerate() {
            let mut got = vec![0.0; dim];
            decode_row(dtype, c.row(slot), &mut got);
            assert_eq!(got, expected(&vals, dim, dtype, &[id]));
        }
        assert!(HotRowCache::build_from_ids(&ds, vec![]).unwrap().is_empty());
        let e = HotRowCache::build_from_ids(&ds, vec![4, 1]).unwrap_err();
        assert!(e.to_string().contains("found 4 then 1"), "{e}");
        let e = HotRowCache::build_from_ids(&ds, vec![12]).unwrap_err();
        assert!(e.to_string().contains("node 12 is out of range"), "{e}");
    }
}
