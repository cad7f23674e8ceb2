use std::path::{Path, PathBuf};

use super::*;
use crate::convert::SplitSpec;
use crate::dataset::Dataset;
use crate::npy::write_npy;
use crate::progress::NoProgress;

/// A text edge list in `dir`.
/// A text edge list `src,dst` per line (also `link_tests`').
pub(super) fn edges(dir: &Path, name: &str, pairs: &[(u64, u64)]) -> PathBuf {
    let p = dir.join(name);
    let text: String = pairs.iter().map(|(s, d)| format!("{s},{d}\n")).collect();
    std::fs::write(&p, text).unwrap();
    p
}

fn f32s(dir: &Path, name: &str, rows: u64, dim: u64) -> PathBuf {
    let p = dir.join(name);
    let v: Vec<f32> = (0..rows * dim).map(|i| i as f32).collect();
    write_npy(&p, "<f4", &[rows, dim], false, bytemuck::cast_slice(&v)).unwrap();
    p
}

fn i64s(dir: &Path, name: &str, v: &[i64]) -> PathBuf {
    let p = dir.join(name);
    write_npy(&p, "<i8", &[v.len() as u64], false, bytemuck::cast_slice(v)).unwrap();
    p
}

/// A featureless, unlabeled node type (also `link_tests`').
pub(super) fn node(name: &str, n: u64) -> NodeTypeSpec {
    node_with_ids(name, n, None)
}

/// [`node`] with original ids (also the id checks' tests: `node_ids`, `verify::unique_ids`).
pub(crate) fn node_with_ids(
    name: &str,
    n: u64,
    node_ids: Option<crate::node_ids::NodeIdsInput>,
) -> NodeTypeSpec {
    NodeTypeSpec {
        name: name.into(),
        num_nodes: n,
        features: None,
        feature_dtype: None,
        labels: None,
        split: None,
        node_ids,
    }
}

/// A dataset at `out` of `node_types` whose first two are users and items, with edges
/// `user:buys:item` 0->0 and 1->1 (written to `dir/buys.csv`; the id checks' tests).
pub(crate) fn buys_spec(dir: &Path, out: PathBuf, node_types: Vec<NodeTypeSpec>) -> HeteroSpec {
    let buys = dir.join("buys.csv");
    std::fs::write(&buys, "0,0\n1,1\n").unwrap();
    HeteroSpec {
        out,
        node_types,
        relations: vec![RelationSpec {
            name: "user:buys:item".into(),
            input: buys,
            format: None,
            link_split: None,
        }],
        add_reverse: false,
        memory: 256 << 20,
        threads: 1,
        seed: 0,
        overwrite: true,
        source: serde_json::Value::Null,
        excerpts: Default::default(),
    }
}

fn rel(name: &str, input: PathBuf) -> RelationSpec {
    RelationSpec {
        name: name.into(),
        input,
        format: None,
        link_split: None,
    }
}

fn spec(out: PathBuf, node_types: Vec<NodeTypeSpec>, relations: Vec<RelationSpec>) -> HeteroSpec {
    HeteroSpec {
        out,
        node_types,
        relations,
        add_reverse: false,
        memory: 256 << 20,
        threads: 1,
        seed: 0,
        overwrite: false,
        source: serde_json::Value::Null,
        excerpts: Default::default(),
    }
}

/// The CSC of relation `r`: (indptr, in-neighbors of every destination node).
fn csc(dir: &Path, r: &str) -> (Vec<u64>, Vec<Vec<u64>>) {
    let ds = Dataset::open_part(dir, &Part::Relation(r.into())).unwrap();
    let indptr = ds.load_indptr().unwrap();
    let lists = (0..ds.num_nodes())
        .map(|v| ds.neighbors(v).unwrap())
        .collect();
    (indptr, lists)
}

/// Three papers, five authors (more sources than destinations: the offset index is cut), two
/// institutions; reverse relations added.
#[test]
fn builds_each_relation_as_its_own_csc() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let writes = edges(d, "writes.csv", &[(4, 0), (0, 0), (1, 2), (4, 2)]);
    let cites = edges(d, "cites.csv", &[(1, 0), (2, 0), (0, 1)]);
    let affil = edges(d, "affil.csv", &[(0, 1), (3, 0)]);
    let mut paper = node("paper", 3);
    paper.features = Some(f32s(d, "x.npy", 3, 2));
    paper.labels = Some(i64s(d, "y.npy", &[1, -1, 0]));
    paper.split = Some(SplitSpec::Files(vec![(
        "train".into(),
        i64s(d, "tr.npy", &[0, 2]),
    )]));
    let mut s = spec(
        d.join("out"),
        vec![paper, node("author", 5), node("institution", 2)],
        vec![
            rel("author:writes:paper", writes),
            rel("paper:cites:paper", cites),
            rel("author:affiliated_with:institution", affil),
        ],
    );
    s.add_reverse = true;
    let m = build(&s, &NoProgress).unwrap();
    let out = d.join("out");
    assert_eq!(
        m.relations.keys().cloned().collect::<Vec<_>>(),
        [
            "author:affiliated_with:institution",
            "author:writes:paper",
            "institution:rev_affiliated_with:author",
            "paper:cites:paper",
            "paper:rev_cites:paper",
            "paper:rev_writes:author",
        ]
    );
    assert_eq!(
        csc(&out, "author:writes:paper"),
        (vec![0, 2, 2, 4], vec![vec![0, 4], vec![], vec![1, 4]])
    );
    assert_eq!(
        csc(&out, "paper:rev_writes:author"),
        (
            vec![0, 1, 2, 2, 2, 4],
            vec![vec![0], vec![2], vec![], vec![], vec![0, 2]]
        )
    );
    assert_eq!(
        csc(&out, "author:affiliated_with:institution"),
        (vec![0, 1, 2], vec![vec![3], vec![0]])
    );
    let r = &m.relations["author:writes:paper"];
    assert_eq!(r.num_edges, 4);
    // Degrees over the 3 papers (the build ran over 5 rows): 2, 0, 2.
    assert_eq!(
        (r.degree.min, r.degree.max, r.degree.median, r.degree.zero),
        (0, 2, 2, 1)
    );
    assert!((r.degree.mean - 4.0 / 3.0).abs() < 1e-12);
    let paper = Dataset::open_part(&out, &Part::Node("paper".into())).unwrap();
    assert_eq!(paper.num_nodes(), 3);
    assert_eq!(paper.labels().unwrap(), Some(vec![1, -1, 0]));
    assert_eq!(paper.split("train").unwrap(), vec![0, 2]);
    assert_eq!(paper.manifest().features.as_ref().unwrap().dim, 2);
    // A node type has no graph.
    let e = paper.neighbors(0).unwrap_err().to_string();
    assert!(e.contains("no graph of its own"), "{e}");
    // The whole dataset verifies, and the homogeneous opener refuses it with advice.
    crate::verify::verify(&out, &crate::verify::VerifyOptions::test(), &NoProgress).unwrap();
    let e = Dataset::open(&out).err().unwrap().to_string();
    assert!(e.contains("heterogeneous dataset"), "{e}");
    // The manifest reads back equal to what the build returned.
    assert_eq!(HeteroManifest::read(&out).unwrap(), m);
}

#[test]
fn verify_finds_an_entry_beyond_the_source_type() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let writes = edges(d, "w.csv", &[(1, 0), (0, 1)]);
    let s = spec(
        d.join("out"),
        vec![node("paper", 2), node("author", 2)],
        vec![rel("author:writes:paper", writes)],
    );
    let m = build(&s, &NoProgress).unwrap();
    let out = d.join("out");
    // Shrink the author type: entry 0 (author 1) is now out of range, though below the
    // destination count: the check must use the source type's count.
    let mut m2 = m.clone();
    m2.node_types.get_mut("author").unwrap().num_nodes = 1;
    std::fs::write(out.join("manifest.json"), m2.to_json()).unwrap();
    let e = crate::verify::verify(&out, &crate::verify::VerifyOptions::test(), &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("relation/author:writes:paper") || e.contains("entry 0 is 1"),
        "{e}"
    );
}

#[test]
fn bad_input_is_refused_naming_the_file_and_nothing_is_written() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let good = edges(d, "w.csv", &[(1, 0)]);
    let far = edges(d, "far.csv", &[(0, 0), (0, 5)]);
    let out = d.join("out");
    let types = || vec![node("paper", 2), node("author", 3)];
    let cases: Vec<(HeteroSpec, &str)> =
        vec![
        (
            spec(out.clone(), types(), vec![rel("author:writes:venue", good.clone())]),
            "names node type 'venue'",
        ),
        (
            spec(out.clone(), types(), vec![rel("writes", good.clone())]),
            "must be SRC:REL:DST",
        ),
        (
            spec(out.clone(), types(), vec![rel("author:writes:paper", far)]),
            "far.csv: edge 1 (counting from 0) of relation author:writes:paper: the second id 5",
        ),
        (
            spec(out.clone(), types(), vec![rel("author:writes:paper", d.join("nope.csv"))]),
            "nope.csv",
        ),
        (
            spec(
                out.clone(),
                vec![node("paper", 2), node("paper", 3)],
                vec![],
            ),
            "node type 'paper' is given twice",
        ),
        (
            spec(
                out.clone(),
                vec![NodeTypeSpec {
                    features: Some(f32s(d, "x3.npy", 3, 2)),
                    ..node("paper", 2)
                }],
                vec![],
            ),
            "x3.npy: 3 feature rows, but node type 'paper' has 2 nodes",
        ),
        (
            spec(out.clone(), vec![node("pa per", 2)], vec![]),
            "node type 'pa per'",
        ),
    ];
    for (s, want) in cases {
        let e = build(&s, &NoProgress).unwrap_err().to_string();
        assert!(e.contains(want), "{e:?} should contain {want:?}");
        assert!(!out.exists());
        // No staging directory is left beside it either.
        let left: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
    // Listing a rev_ relation yourself with --add-reverse.
    let mut s = spec(
        out.clone(),
        types(),
        vec![
            rel("author:writes:paper", good.clone()),
            rel("paper:rev_writes:author", good),
        ],
    );
    s.add_reverse = true;
    let e = build(&s, &NoProgress).unwrap_err().to_string();
    assert!(e.contains("given twice"), "{e}");
}

#[test]
fn parts_are_named_and_parsed() {
    assert_eq!(
        Part::parse("node/paper").unwrap(),
        Part::Node("paper".into())
    );
    assert_eq!(
        Part::parse("relation/a:b:c").unwrap().to_string(),
        "relation/a:b:c"
    );
    assert!(Part::parse("paper").is_err());
}

/// Raw little-endian u64s / i64s (the original-id files an importer writes).
fn raw(dir: &Path, name: &str, v: &[u64]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .unwrap();
    p
}

/// Each type's original ids are stored under `node.TYPE.`, read through its view as a
/// homogeneous dataset's, and checked by `verify` per type; a type without them writes none.
#[test]
fn original_ids_are_stored_per_type() {
    use crate::manifest::NodeIdDtype;
    use crate::node_ids::NodeIdsInput;
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let buys = edges(d, "buys.csv", &[(0, 1), (2, 0), (2, 1)]);
    let mut user = node("user", 3);
    // i64 ids past 2^32, and a negative one
    let user_ids = [5_000_000_000i64, -1, 7];
    user.node_ids = Some(NodeIdsInput {
        dtype: NodeIdDtype::I64,
        ids: raw(d, "u.bin", &user_ids.map(|x| x as u64)),
        bytes: None,
    });
    // string ids "b", "cd": offsets 0, 1, 3 over "bcd"
    let mut item = node("item", 2);
    let item_bytes = d.join("i.bytes");
    std::fs::write(&item_bytes, b"bcd").unwrap();
    item.node_ids = Some(NodeIdsInput {
        dtype: NodeIdDtype::Str,
        ids: raw(d, "i.bin", &[0, 1, 3]),
        bytes: Some(item_bytes),
    });
    let out = d.join("out");
    let s = spec(
        out.clone(),
        vec![user, item, node("shop", 1)],
        vec![rel("user:buys:item", buys)],
    );
    let m = build(&s, &NoProgress).unwrap();
    let info = |t: &str| m.node_types[t].node_ids.clone().map(|i| (i.dtype, i.bytes));
    assert_eq!(info("user"), Some((NodeIdDtype::I64, 0)));
    assert_eq!(info("item"), Some((NodeIdDtype::Str, 3)));
    assert_eq!(info("shop"), None);
    let keys: Vec<&str> = m
        .files
        .keys()
        .map(String::as_str)
        .filter(|k| k.contains("node_id"))
        .collect();
    assert_eq!(
        keys,
        [
            "node.item.node_id_bytes",
            "node.item.node_ids",
            "node.user.node_ids"
        ]
    );
    let json = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    let shop = &serde_json::from_str::<serde_json::Value>(&json).unwrap()["node_types"]["shop"];
    assert!(shop.get("node_ids").is_none(), "{shop}");
    // The view of a type is a homogeneous dataset with its ids, byte for byte as given.
    let view = m.view(&Part::Node("user".into())).unwrap();
    assert_eq!(view.node_ids.as_ref().unwrap().dtype, NodeIdDtype::I64);
    let stored = std::fs::read(out.join(&view.files["node_ids"].path)).unwrap();
    let want: Vec<u8> = user_ids.iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(&stored[..24], &want[..]);
    assert!(stored[24..].iter().all(|&b| b == 0));
    let view = m.view(&Part::Node("item".into())).unwrap();
    assert_eq!(
        &std::fs::read(out.join(&view.files["node_id_bytes"].path)).unwrap()[..3],
        b"bcd"
    );
    crate::verify::verify(&out, &crate::verify::VerifyOptions::test(), &NoProgress).unwrap();
    // Offsets that decrease are found in the item type's file, checksum fixed.
    let file = view.files["node_ids"].path.clone();
    let p = out.join(&file);
    let mut b = std::fs::read(&p).unwrap();
    b[8..16].copy_from_slice(&4u64.to_le_bytes()); // 0, 4, 3
    std::fs::write(&p, &b).unwrap();
    let mut h = HeteroManifest::read(&out).unwrap();
    for e in h.files.values_mut().filter(|e| e.path == file) {
        e.crc32c = format!("{:08x}", crc32c::crc32c(&b));
    }
    std::fs::write(out.join("manifest.json"), h.to_json()).unwrap();
    match crate::verify::verify(&out, &crate::verify::VerifyOptions::test(), &NoProgress) {
        Err(Error::Corrupt(e)) => assert!(e.contains(&file) && e.contains("offset 1 is 4"), "{e}"),
        other => panic!("{other:?}"),
    }
    // A file whose size does not match the type's count is refused before anything is built.
    let mut bad = node("user", 3);
    bad.node_ids = Some(NodeIdsInput {
        dtype: NodeIdDtype::U64,
        ids: raw(d, "short.bin", &[1, 2]),
        bytes: None,
    });
    let s = spec(d.join("out2"), vec![bad, node("item", 2)], vec![]);
    match build(&s, &NoProgress) {
        Err(Error::Input(e)) => assert!(
            e.contains("short.bin: 16 bytes, but 3 node ids take 24") && e.contains("'user'"),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(!d.join("out2").exists());
}
