//! Link splits of a relation (FORMAT.md "Edge splits", "Typed nodes and relations"): exact
//! assignment on a tiny typed graph, the reverse relation dropping the held-out pairs, verify,
//! and every refusal.

use std::path::{Path, PathBuf};

use super::tests::{edges, node};
use super::*;
use crate::dataset::Dataset;
use crate::link::{LinkSplitOptions, LinkSplitSpec};
use crate::npy::write_npy;
use crate::progress::NoProgress;
use crate::rng::mix64;

const WRITES: &str = "author:writes:paper";
const REV: &str = "paper:rev_writes:author";

/// A `.npy` (n, 2) int64 pair list.
fn pairs_npy(dir: &Path, name: &str, pairs: &[(i64, i64)]) -> PathBuf {
    let p = dir.join(name);
    let v: Vec<i64> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    write_npy(
        &p,
        "<i8",
        &[pairs.len() as u64, 2],
        false,
        bytemuck::cast_slice(&v),
    )
    .unwrap();
    p
}

fn rel(name: &str, input: PathBuf, link: Option<(LinkSplitSpec, u64)>) -> RelationSpec {
    RelationSpec {
        name: name.into(),
        input,
        format: None,
        link_split: link.map(|(spec, negatives)| LinkSplitOptions::new(spec, negatives)),
    }
}

fn spec(out: PathBuf, relations: Vec<RelationSpec>, add_reverse: bool) -> HeteroSpec {
    HeteroSpec {
        out,
        node_types: vec![node("author", 6), node("paper", 4)],
        relations,
        add_reverse,
        memory: 256 << 20,
        threads: 1,
        seed: 7,
        overwrite: false,
        source: serde_json::json!({}),
        excerpts: Default::default(),
    }
}

/// Every (author, paper) pair: 6 x 4, including the pairs (i, i), which join two types and are
/// no self loops.
fn complete() -> Vec<(u64, u64)> {
    (0..4).flat_map(|p| (0..6).map(move |a| (a, p))).collect()
}

fn part(dir: &Path, r: &str) -> Dataset {
    Dataset::open_part(dir, &Part::Relation(r.into())).unwrap()
}

fn split_pairs(ds: &Dataset, name: &str) -> Vec<(u64, u64)> {
    let (v, _) = ds.edge_split(name).unwrap();
    v.chunks_exact(2)
        .map(|c| (c[0] as u64, c[1] as u64))
        .collect()
}

fn fractions() -> LinkSplitSpec {
    LinkSplitSpec::Fractions(vec![("val".into(), 0.25), ("test".into(), 0.25)])
}

#[test]
fn fraction_split_of_a_relation_is_the_documented_hash_and_the_reverse_drops_it() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let w = edges(d, "w.csv", &complete());
    let out = d.join("out");
    let m = build(
        &spec(
            out.clone(),
            vec![rel(WRITES, w, Some((fractions(), 2)))],
            true,
        ),
        &NoProgress,
    )
    .unwrap();
    // FORMAT.md: h = mix64(mix64(B ^ src) + dst), B = mix64(S ^ mix64("lsplit")); val below
    // 2^64 * 0.25 = 2^62, test below 2^63, the rest train; in (dst, src) order.
    let base = mix64(7 ^ mix64(0x6c73706c6974));
    let (mut want_val, mut want_test, mut want_train) = (vec![], vec![], vec![]);
    for (a, p) in complete() {
        let h = mix64(mix64(base ^ a).wrapping_add(p));
        match h {
            h if h < 1 << 62 => want_val.push((a, p)),
            h if h < 1 << 63 => want_test.push((a, p)),
            _ => want_train.push((a, p)),
        }
    }
    assert!(
        !want_val.is_empty() && !want_test.is_empty(),
        "seed 7 must hold some pairs out"
    );
    let ds = part(&out, WRITES);
    assert_eq!(split_pairs(&ds, "val"), want_val);
    assert_eq!(split_pairs(&ds, "test"), want_test);
    assert_eq!(split_pairs(&ds, "train"), want_train);
    let info = &m.relations[WRITES].edge_splits;
    assert_eq!(info["val"].negatives, 2);
    assert_eq!(info["train"].negatives, 0);
    assert_eq!(m.relations[WRITES].num_edges, want_train.len() as u64);
    // The relation and its reverse hold exactly the training pairs.
    let rev = part(&out, REV);
    assert!(m.relations[REV].edge_splits.is_empty());
    for (a, p) in complete() {
        let kept = want_train.contains(&(a, p));
        assert_eq!(ds.has_edge(a, p).unwrap(), kept, "({a}, {p})");
        assert_eq!(rev.has_edge(p, a).unwrap(), kept, "reverse of ({a}, {p})");
    }
    // Negatives: 2 distinct papers per pair, never its own paper.
    for name in ["val", "test"] {
        let (neg, k) = ds.edge_negatives(name).unwrap();
        assert_eq!(k, 2);
        for (row, (_, p)) in neg.chunks_exact(2).zip(split_pairs(&ds, name)) {
            assert!(row[0] != row[1] && row.iter().all(|&x| (0..4).contains(&x) && x as u64 != p));
        }
    }
    assert_eq!(m.source["link_split"][WRITES]["fractions"]["val"], 0.25);
    crate::verify::verify(&out, &crate::verify::VerifyOptions::test(), &NoProgress).unwrap();
}

#[test]
fn given_lists_of_a_relation_and_a_listed_reverse() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let w = edges(d, "w.csv", &complete());
    let val = pairs_npy(d, "val.npy", &[(2, 2), (0, 1)]);
    let test = pairs_npy(d, "test.npy", &[(5, 3)]);
    // The reverse is listed (no add_reverse): every pair swapped, plus one of its own; (3, 5)
    // is missing, which a reverse may be.
    let mut rev_pairs: Vec<(u64, u64)> = complete()
        .into_iter()
        .map(|(a, p)| (p, a))
        .filter(|&x| x != (3, 5))
        .collect();
    rev_pairs.push((0, 0));
    rev_pairs.sort();
    rev_pairs.dedup();
    let r = edges(d, "r.csv", &rev_pairs);
    let given = LinkSplitSpec::Files(vec![("val".into(), val), ("test".into(), test)]);
    let out = d.join("out");
    let m = build(
        &spec(
            out.clone(),
            vec![rel(WRITES, w, Some((given, 3))), rel(REV, r, None)],
            false,
        ),
        &NoProgress,
    )
    .unwrap();
    let ds = part(&out, WRITES);
    assert_eq!(split_pairs(&ds, "val"), vec![(0, 1), (2, 2)]);
    assert_eq!(split_pairs(&ds, "test"), vec![(5, 3)]);
    assert_eq!(split_pairs(&ds, "train").len(), 21);
    // 3 negatives of 4 papers other than the pair's own: exactly the other three.
    let (neg, _) = ds.edge_negatives("val").unwrap();
    let mut row: Vec<i64> = neg[..3].to_vec();
    row.sort();
    assert_eq!(row, vec![0, 2, 3]);
    let rev = part(&out, REV);
    assert_eq!(m.relations[REV].num_edges, rev_pairs.len() as u64 - 2);
    assert!(!rev.has_edge(1, 0).unwrap() && !rev.has_edge(2, 2).unwrap());
    assert!(rev.has_edge(0, 0).unwrap() && rev.has_edge(3, 4).unwrap());
    crate::verify::verify(&out, &crate::verify::VerifyOptions::test(), &NoProgress).unwrap();
}

#[test]
fn verify_finds_a_held_out_pair_in_the_reverse() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let w = edges(d, "w.csv", &complete());
    let (a, b) = (d.join("a"), d.join("b"));
    build(
        &spec(
            a.clone(),
            vec![rel(WRITES, w.clone(), Some((fractions(), 1)))],
            true,
        ),
        &NoProgress,
    )
    .unwrap();
    let mb = build(
        &spec(b.clone(), vec![rel(WRITES, w, None)], true),
        &NoProgress,
    )
    .unwrap();
    // Give `a` the reverse of `b`, which still holds every pair.
    let mut ma = HeteroManifest::read(&a).unwrap();
    ma.relations.insert(REV.into(), mb.relations[REV].clone());
    for (key, f) in mb.files.iter().filter(|(k, _)| k.contains(REV)) {
        std::fs::copy(b.join(&f.path), a.join(&f.path)).unwrap();
        ma.files.insert(key.clone(), f.clone());
    }
    std::fs::write(a.join("manifest.json"), ma.to_json()).unwrap();
    let e = crate::verify::verify(&a, &crate::verify::VerifyOptions::test(), &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is an edge of relation/paper:rev_writes:author"),
        "{e}"
    );
}

#[test]
fn bad_link_splits_are_refused_naming_the_relation_and_nothing_is_written() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let w = edges(d, "w.csv", &[(0, 0), (1, 2)]);
    let out = d.join("out");
    let files = |file: &str, pairs: &[(i64, i64)]| {
        LinkSplitSpec::Files(vec![("val".into(), pairs_npy(d, file, pairs))])
    };
    let cases: Vec<(Vec<RelationSpec>, &str)> =
        vec![
        (
            vec![rel(WRITES, w.clone(), Some((fractions(), 4)))],
            "relation author:writes:paper: --link-negatives 4 is not below the number of nodes (4)",
        ),
        (
            vec![rel(WRITES, w.clone(), Some((files("v1.npy", &[(6, 0)]), 1)))],
            "relation author:writes:paper: --link-split val=",
        ),
        (
            vec![rel(WRITES, w.clone(), Some((files("v0.npy", &[(6, 0)]), 1)))],
            "source id 6, but its node type has 6 nodes",
        ),
        (
            vec![rel(WRITES, w.clone(), Some((files("v2.npy", &[(0, 4)]), 1)))],
            "destination id 4, but its node type has 4 nodes",
        ),
        (
            vec![rel(WRITES, w.clone(), Some((files("v3.npy", &[(1, 1)]), 1)))],
            "relation author:writes:paper: held-out edge (1, 1) of val=",
        ),
        (
            vec![
                rel(WRITES, w.clone(), Some((fractions(), 1))),
                rel(REV, w.clone(), Some((fractions(), 1))),
            ],
            "paper:rev_writes:author is the reverse of author:writes:paper",
        ),
        (
            vec![rel(
                WRITES,
                w.clone(),
                Some((LinkSplitSpec::Fractions(vec![("val".into(), 1.0)]), 1)),
            )],
            "relation author:writes:paper: --link-split fractions add up to 1",
        ),
    ];
    for (relations, want) in cases {
        let e = build(&spec(out.clone(), relations, false), &NoProgress)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}\n  wanted: {want}");
        assert!(!out.exists());
        let left: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(left.is_empty(), "temporaries left: {left:?}");
    }
}

#[test]
fn given_negatives_are_stored_as_given_and_absent_pairs_when_allowed() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let w = edges(d, "w.csv", &[(0, 0), (1, 2), (3, 3)]);
    // (5, 1) is not an edge: allowed with absent_ok, stored in its place (ascending (dst, src)).
    let val = pairs_npy(d, "val.npy", &[(1, 2), (5, 1)]);
    let negs = d.join("neg.npy");
    // Rows in the stored order: (5, 1) then (1, 2); given negatives may repeat or be the dst.
    let rows: Vec<i64> = vec![1, 1, 0, 2, 3, 2];
    write_npy(&negs, "<i8", &[2, 3], false, bytemuck::cast_slice(&rows)).unwrap();
    let mut opts =
        LinkSplitOptions::new(LinkSplitSpec::Files(vec![("val".into(), val.clone())]), 9);
    opts.given_negatives = vec![("val".into(), negs.clone())];
    opts.absent_ok = true;
    let mut r = rel(WRITES, w.clone(), None);
    r.link_split = Some(opts.clone());
    let out = d.join("out");
    let m = build(&spec(out.clone(), vec![r], true), &NoProgress).unwrap();
    let ds = part(&out, WRITES);
    assert_eq!(split_pairs(&ds, "val"), vec![(5, 1), (1, 2)]);
    assert_eq!(ds.edge_negatives("val").unwrap(), (rows, 3));
    let info = &m.relations[WRITES].edge_splits["val"];
    assert!(info.given_negatives && info.negatives == 3);
    assert!(!ds.has_edge(1, 2).unwrap() && !part(&out, REV).has_edge(2, 1).unwrap());
    crate::verify::verify(&out, &crate::verify::VerifyOptions::test(), &NoProgress).unwrap();

    // Without absent_ok the missing pair is refused; a wrong shape or id is refused.
    let mut strict = opts.clone();
    strict.absent_ok = false;
    let bad_shape = d.join("bad.npy");
    write_npy(
        &bad_shape,
        "<i8",
        &[3, 2],
        false,
        bytemuck::cast_slice(&[0i64; 6]),
    )
    .unwrap();
    let far = d.join("far.npy");
    write_npy(
        &far,
        "<i8",
        &[2, 1],
        false,
        bytemuck::cast_slice(&[0i64, 4]),
    )
    .unwrap();
    let with = |f: &PathBuf| {
        let mut o = opts.clone();
        o.given_negatives = vec![("val".into(), f.clone())];
        o
    };
    for (o, want) in [
        (strict, "held-out edge (5, 1) of val="),
        (
            with(&bad_shape),
            "must be a C-order array of shape (2, K >= 1)",
        ),
        (with(&far), "negative 0 of pair 1 of edge split val is 4"),
    ] {
        let mut r = rel(WRITES, w.clone(), None);
        r.link_split = Some(o);
        let e = build(&spec(d.join("o2"), vec![r], true), &NoProgress)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}\n  wanted: {want}");
        assert!(!d.join("o2").exists());
    }
}
