//! `--link-split` with given edge lists: exactly the listed pairs leave the graph, whatever the
//! budget and the workers; every listing mistake is refused with the file named.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::*;
use crate::link::{LinkSplitOptions, LinkSplitSpec};
use crate::npy::write_npy;

/// Parallel edges, both directions listed, a self loop.
const EDGES: [(u64, u64); 12] = [
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
    (5, 2),
    (2, 6),
];

/// Write `pairs` as an int64 `.npy` of shape (n, 2), or (2, n) when `two_by_n` (but not for 2
/// pairs: shape (2, 2) reads as one pair per row).
fn write_pairs(dir: &Path, name: &str, pairs: &[(u64, u64)], two_by_n: bool) -> PathBuf {
    let path = dir.join(name);
    let two_by_n = two_by_n && pairs.len() != 2;
    let (shape, vals): ([u64; 2], Vec<u64>) = if two_by_n {
        let mut v: Vec<u64> = pairs.iter().map(|p| p.0).collect();
        v.extend(pairs.iter().map(|p| p.1));
        ([2, pairs.len() as u64], v)
    } else {
        (
            [pairs.len() as u64, 2],
            pairs.iter().flat_map(|&(s, d)| [s, d]).collect(),
        )
    };
    let data: Vec<u8> = vals
        .iter()
        .flat_map(|&x| (x as i64).to_le_bytes())
        .collect();
    write_npy(&path, "<i8", &shape, false, &data).unwrap();
    path
}

fn plan(files: Vec<(&str, PathBuf)>, o: &GraphOptions) -> Result<LinkPlan> {
    let opts = LinkSplitOptions::new(
        LinkSplitSpec::Files(files.into_iter().map(|(n, p)| (n.into(), p)).collect()),
        0,
    );
    LinkPlan::new(&opts, 0, o.undirected, o.num_nodes)
}

fn set(o: &GraphOptions, pairs: &[(u64, u64)]) -> BTreeSet<(u64, u64)> {
    pairs.iter().map(|&p| canonical(o, p)).collect()
}

/// Build `edges` with `val` listed as (n, 2) and `test` as (2, n) pairs, and check it
/// (`check_plan`): the splits' pair sets, `train` first.
fn hold_out(
    dir: &Path,
    edges: &[(u64, u64)],
    o: &GraphOptions,
    val: &[(u64, u64)],
    test: &[(u64, u64)],
) -> Vec<BTreeSet<(u64, u64)>> {
    let p = plan(
        vec![
            ("val", write_pairs(dir, "val.npy", val, false)),
            ("test", write_pairs(dir, "test.npy", test, true)),
        ],
        o,
    )
    .unwrap();
    check_plan(edges, o, &p, true)
}

#[test]
fn listed_pairs_leave_the_graph_exactly() {
    let dir = tempfile::tempdir().unwrap();
    for undirected in [false, true] {
        for dedup in [false, true] {
            let o = opts(undirected, false, dedup, None);
            // (1, 0) with --undirected is the pair (0, 1); both copies of (0, 1) and (1, 0) go.
            let val = [(1, 0), (5, 2)];
            let test = [(3, 4), (2, 6), (1, 3)];
            let sets = hold_out(dir.path(), &EDGES, &o, &val, &test);
            assert_eq!(sets[1], set(&o, &val));
            assert_eq!(sets[2], set(&o, &test));
        }
    }
}

#[test]
fn a_listed_train_split_is_stored_instead_of_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    for undirected in [false, true] {
        let o = opts(undirected, false, false, None);
        let train = [(0, 4), (4, 0), (2, 3)];
        let p = plan(
            vec![
                ("train", write_pairs(dir.path(), "train.npy", &train, false)),
                (
                    "test",
                    write_pairs(dir.path(), "test.npy", &[(2, 6)], false),
                ),
            ],
            &o,
        );
        if undirected {
            // (0, 4) and (4, 0) are one pair.
            let e = p.unwrap_err().to_string();
            assert!(
                e.contains(
                    "train.npy: the pair (0, 4) is listed more than once (with --undirected"
                ),
                "{e}"
            );
            continue;
        }
        let sets = check_plan(&EDGES, &o, &p.unwrap(), false);
        assert_eq!(sets[0], set(&o, &train));
        assert_eq!(sets[2], set(&o, &[(2, 6)]));
        assert!(sets[1].is_empty());
    }
}

/// The error of building `EDGES` with the listed files, at every budget.
fn build_error(files: &[(&str, &[(u64, u64)])], o: &GraphOptions) -> String {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<(&str, PathBuf)> = files
        .iter()
        .map(|&(n, pairs)| {
            (
                n,
                write_pairs(dir.path(), &format!("{n}.npy"), pairs, false),
            )
        })
        .collect();
    let p = match plan(files, o) {
        Ok(p) => p,
        Err(e) => return e.to_string(),
    };
    let mut first = None;
    for sizes in [tiny(1), tiny(3), roomy()] {
        let (_dir, r) = build_plan(&EDGES, o, sizes, &p);
        let e = r.unwrap_err().to_string();
        assert!(first.get_or_insert(e.clone()) == &e, "{e}");
    }
    first.unwrap()
}

#[test]
fn pairs_not_in_the_graph_are_refused_naming_the_file() {
    let o = opts(false, false, false, None);
    // Met in the middle of the stream, and past its end.
    for (pair, shown) in [((4, 3), "(4, 3)"), ((3, 6), "(3, 6)"), ((1, 2), "(1, 2)")] {
        let e = build_error(&[("val", &[(0, 1)]), ("test", &[(3, 4), pair])], &o);
        assert!(
            e.starts_with(&format!("held-out edge {shown} of test=")),
            "{e}"
        );
        assert!(e.contains("test.npy is not in the graph"), "{e}");
    }
    let e = build_error(&[("val", &[(0, 1)]), ("train", &[(4, 3)])], &o);
    assert!(e.starts_with("training edge (4, 3) of train="), "{e}");
    // With --undirected (4, 3) is the edge (3, 4); (6, 5) is no edge either way.
    let u = opts(true, false, false, None);
    let e = build_error(&[("val", &[(4, 3), (6, 5)])], &u);
    assert!(e.starts_with("held-out edge (5, 6) of val="), "{e}");
    // An id beyond the graph's nodes.
    let e = build_error(&[("val", &[(4, 3), (1, 9)])], &u);
    assert!(
        e.contains("val.npy: the pair (1, 9) has node id 9, but the graph has 7 nodes"),
        "{e}"
    );
}

#[test]
fn bad_lists_are_refused_before_the_build() {
    let o = opts(false, false, false, None);
    let e = build_error(&[("val", &[(0, 1)]), ("test", &[(3, 4), (0, 1)])], &o);
    assert!(e.contains("the pair (0, 1) is in both val="), "{e}");
    assert!(e.contains("test.npy; a pair belongs to one split"), "{e}");
    let e = build_error(&[("val", &[(0, 1), (3, 4), (0, 1)])], &o);
    assert!(
        e.contains("val.npy: the pair (0, 1) is listed more than once; list each pair once"),
        "{e}"
    );
    let e = build_error(&[("val", &[(0, 1), (2, 2)])], &o);
    assert!(e.contains("val.npy: pair 1 is the self loop (2, 2)"), "{e}");
    let e = build_error(&[("train", &[(0, 1)])], &o);
    assert!(
        e.contains("lists only train, so nothing is held out"),
        "{e}"
    );
    let n = opts(false, false, false, Some(5));
    let e = build_error(&[("val", &[(0, 1), (5, 2)])], &n);
    assert!(
        e.starts_with("--link-split val: ") && e.contains(">= --num-nodes 5"),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let bad = |descr: &str, shape: &[u64], data: &[u8]| {
        let path = dir.path().join("bad.npy");
        write_npy(&path, descr, shape, false, data).unwrap();
        plan(vec![("val", path)], &o).unwrap_err().to_string()
    };
    let e = bad("<i8", &[3], &[0; 24]);
    assert!(
        e.starts_with("--link-split val: ") && e.contains("bad.npy: the edge array has shape (3,)"),
        "{e}"
    );
    let e = bad("<f8", &[1, 2], &[0; 16]);
    assert!(
        e.contains("bad.npy: the edge array must have dtype int32"),
        "{e}"
    );
    let neg: Vec<u8> = [1i64, -1].iter().flat_map(|x| x.to_le_bytes()).collect();
    let e = bad("<i8", &[1, 2], &neg);
    assert!(e.contains("negative node id -1"), "{e}");
    let missing = dir.path().join("missing.npy");
    match plan(vec![("val", missing)], &o) {
        Err(Error::Io { path, source }) => {
            assert!(path.ends_with("missing.npy"));
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            assert!(source.to_string().contains("--link-split val"), "{source}");
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn listed_pairs_count_against_the_memory_budget() {
    // 400,000 pairs take about 10 MiB as keys: more than half of what --memory 128M leaves.
    let dir = tempfile::tempdir().unwrap();
    let pairs: Vec<(u64, u64)> = (0..400_000).map(|i| (i, i + 1)).collect();
    let mut o = opts(false, false, false, None);
    o.memory = MIN_MEMORY;
    let p = plan(
        vec![("val", write_pairs(dir.path(), "val.npy", &pairs, false))],
        &o,
    )
    .unwrap();
    let mut staging = Staging::create(&dir.path().join("ds"), false, &NoProgress).unwrap();
    let mut src = VecSource::new(EDGES.to_vec());
    let e = build_graph_split(&mut src, &o, Some(&p), &mut staging, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--link-split: the listed pairs take"), "{e}");
    assert!(e.contains("; raise --memory to at least"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn listed_pairs_never_leak(
        edges in prop::collection::vec((0u64..20, 0u64..20), 1..100),
        picks in prop::collection::vec(0u8..8, 400),
        undirected: bool,
        dedup: bool,
    ) {
        // Each distinct pair goes to val (pick 1 mod 4), test (2) or stays (0, 3).
        let o = opts(undirected, false, dedup, None);
        let pairs: BTreeSet<(u64, u64)> =
            edges.iter().filter(|(s, d)| s != d).map(|&p| canonical(&o, p)).collect();
        let (mut val, mut test) = (Vec::new(), Vec::new());
        for (i, &(s, d)) in pairs.iter().enumerate() {
            // Either orientation of an undirected pair may be listed.
            let p = if undirected && picks[i] >= 4 { (d, s) } else { (s, d) };
            match picks[i] % 4 {
                1 => val.push(p),
                2 => test.push(p),
                _ => {}
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let sets = hold_out(dir.path(), &edges, &o, &val, &test);
        prop_assert_eq!(&sets[1], &set(&o, &val));
        prop_assert_eq!(&sets[2], &set(&o, &test));
    }
}

/// With --undirected, a split whose negatives are given keeps its pairs as listed ((1, 0) and
/// (5, 2) stay so; their negatives replace that destination), in (dst, src) order, at every
/// budget; a split whose negatives are drawn stores (min, max) as before; both directions of
/// every held-out pair leave the graph either way.
#[test]
fn undirected_splits_with_given_negatives_keep_the_listed_direction() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(true, false, false, None);
    let files = vec![
        (
            "val".to_string(),
            write_pairs(dir.path(), "val.npy", &[(5, 2), (1, 0), (0, 4)], false),
        ),
        (
            "test".to_string(),
            write_pairs(dir.path(), "test.npy", &[(3, 1), (2, 6)], false),
        ),
    ];
    let mut l = LinkSplitOptions::new(LinkSplitSpec::Files(files), 0);
    l.given_negatives = vec![("val".into(), dir.path().join("unused.npy"))];
    let p = LinkPlan::new(&l, 0, true, None).unwrap();
    for sizes in [tiny(1), tiny(3), roomy()] {
        let (d, g) = build_plan(&EDGES, &o, sizes, &p);
        let g = g.unwrap();
        assert_eq!(
            split_pairs(d.path(), &g, "val"),
            [(1, 0), (5, 2), (0, 4)],
            "as listed, by (dst, src)"
        );
        assert_eq!(split_pairs(d.path(), &g, "test"), [(1, 3), (2, 6)]);
        let train = split_pairs(d.path(), &g, "train");
        for pair in [(0, 1), (2, 5), (0, 4), (1, 3), (2, 6)] {
            assert!(!train.contains(&pair), "{pair:?} is held out");
        }
    }
}
