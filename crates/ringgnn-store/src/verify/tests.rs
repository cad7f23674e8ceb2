use super::*;
use crate::attach::tests::Record;
use crate::builder::{GraphSummary, INDICES_FILE, INDPTR_FILE};
use crate::convert::assemble;
use crate::manifest::{DegreeStats, FeatureDtype, IndexDtype, LabelInfo};
use crate::node_files::{split_file, FeatureWriter, LABELS_FILE};
use crate::rng;
use crate::writer::Staging;
use crate::NoProgress;

struct Graph {
    indptr: Vec<u64>,
    indices: Vec<u32>,
}

/// In-degree statistics computed the obvious way, independently of `Indptr`.
fn stats(indptr: &[u64]) -> DegreeStats {
    let mut d: Vec<u64> = indptr.windows(2).map(|w| w[1] - w[0]).collect();
    if d.is_empty() {
        return DegreeStats::default();
    }
    d.sort();
    DegreeStats {
        min: d[0],
        max: *d.last().unwrap(),
        mean: *indptr.last().unwrap() as f64 / d.len() as f64,
        median: d[(d.len() - 1) / 2],
        zero: d.iter().filter(|&&x| x == 0).count() as u64,
    }
}

/// Write a dataset by hand: the graph, 1000-wide f32 features (one row per page, so pages
/// have an inner gap), labels and the given splits.
fn build(out: &Path, g: &Graph, labels: &[i64], splits: &[(&str, &[i64])]) -> PathBuf {
    let v = g.indptr.len() as u64 - 1;
    let mut s = Staging::create(out, true, &crate::NoProgress).unwrap();
    let mut w = s.writer(INDPTR_FILE).unwrap();
    w.write_u64s(&g.indptr).unwrap();
    s.add("indptr", w.finish().unwrap());
    let mut w = s.writer(INDICES_FILE).unwrap();
    w.write_u32s(&g.indices).unwrap();
    s.add("indices", w.finish().unwrap());
    let mut fw = FeatureWriter::new(&s, 1000, FeatureDtype::F32).unwrap();
    for i in 0..v {
        fw.push_row(&vec![i as f32 + 0.5; 1000]).unwrap();
    }
    let (features, e) = fw.finish().unwrap();
    s.add("features", e);
    crate::node_files::write_i64_file(&mut s, "labels", LABELS_FILE, labels).unwrap();
    let mut sizes = BTreeMap::new();
    for (name, ids) in splits {
        crate::node_files::write_i64_file(&mut s, &format!("split.{name}"), &split_file(name), ids)
            .unwrap();
        sizes.insert(name.to_string(), ids.len() as u64);
    }
    let graph = GraphSummary {
        num_nodes: v,
        num_edges: g.indices.len() as u64,
        indices_dtype: IndexDtype::U32,
        degree: stats(&g.indptr),
        held_out: None,
        edge_times: None,
    };
    let labels = LabelInfo {
        num_classes: (labels.iter().max().copied().unwrap_or(-1) + 1) as u64,
        num_labeled: labels.iter().filter(|&&l| l >= 0).count() as u64,
    };
    s.commit(assemble(
        &graph,
        Some(features),
        Some(labels),
        sizes,
        Default::default(),
    ))
    .unwrap()
}

/// 3 nodes, edges 0->1, 2->1, 1->2 (the example of FORMAT.md).
fn tiny(dir: &tempfile::TempDir) -> PathBuf {
    let g = Graph {
        indptr: vec![0, 0, 2, 3],
        indices: vec![0, 2, 1],
    };
    build(
        &dir.path().join("ds"),
        &g,
        &[1, -1, 0],
        &[("train", &[0, 2]), ("test", &[1])],
    )
}

fn err(ds: &Path) -> String {
    match verify(ds, &VerifyOptions::test(), &NoProgress) {
        Err(Error::Corrupt(m)) => m,
        other => panic!("expected Error::Corrupt, got {other:?}"),
    }
}

fn edit_manifest(ds: &Path, f: impl FnOnce(&mut Manifest)) {
    let mut m = Manifest::read(ds).unwrap();
    f(&mut m);
    std::fs::write(ds.join(MANIFEST_FILE), m.to_json()).unwrap();
}

/// Overwrite bytes of `file` at `at`; with `fix_crc` record the new checksum, so that only
/// the structure is wrong.
fn poke(ds: &Path, file: &str, at: u64, bytes: &[u8], fix_crc: bool) {
    let p = ds.join(file);
    let mut b = std::fs::read(&p).unwrap();
    b[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
    std::fs::write(&p, &b).unwrap();
    if fix_crc {
        edit_manifest(ds, |m| {
            for e in m.files.values_mut().filter(|e| e.path == file) {
                e.crc32c = format!("{:08x}", crc32c::crc32c(&b));
            }
        });
    }
}

#[test]
fn a_good_dataset_passes() {
    let dir = tempfile::tempdir().unwrap();
    let ds = tiny(&dir);
    let rec = Record::default();
    let r = verify(&ds, &VerifyOptions::test(), &rec).unwrap();
    let total: u64 = Manifest::read(&ds)
        .unwrap()
        .files
        .values()
        .map(|f| f.bytes)
        .sum();
    assert_eq!((r.files_checked, r.bytes_checked), (6, total));
    assert_eq!(total, 4096 * 5 + 3 * 4096);
    let rec = rec.get();
    assert_eq!(
        rec.stages,
        vec![("verify".to_string(), Some(total), "B".to_string())]
    );
    assert_eq!(rec.done, total);
}

#[test]
fn random_graphs_pass_and_their_degree_stats_match() {
    for seed in 0..12u64 {
        let mut r = rng::stream(seed, 0, 0);
        let v = rng::below(&mut r, 2000);
        let mut indptr = vec![0u64];
        let mut indices = Vec::new();
        for _ in 0..v {
            // Mostly small degrees, a few hubs beyond the dense histogram.
            let d = match rng::below(&mut r, 10) {
                0 => rng::below(&mut r, 200),
                _ => rng::below(&mut r, 6),
            };
            let mut nb: Vec<u32> = (0..d).map(|_| rng::below(&mut r, v) as u32).collect();
            nb.sort();
            indices.extend(nb);
            indptr.push(indices.len() as u64);
        }
        let labels: Vec<i64> = (0..v).map(|i| (i as i64 % 5) - 1).collect();
        let dir = tempfile::tempdir().unwrap();
        let ds = build(
            &dir.path().join("ds"),
            &Graph { indptr, indices },
            &labels,
            &[("all", &[])],
        );
        verify(&ds, &VerifyOptions::test(), &NoProgress)
            .unwrap_or_else(|e| panic!("seed {seed}, {v} nodes: {e}"));
    }
}

#[test]
fn damaged_bytes_fail_the_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let ds = tiny(&dir);
    poke(&ds, INDICES_FILE, 2000, &[1], false); // in the padding
    let e = err(&ds);
    assert!(
        e.contains("indices.bin: checksum mismatch")
            && e.contains("first inconsistency: byte 2000 is 0x01"),
        "{e}"
    );
    assert!(e.ends_with(ADVICE), "{e}");
    let ds = tiny(&dir);
    poke(&ds, FEATURES_FILE_NAME, 5, &[0xff], false); // a feature value: only the checksum can tell
    let e = err(&ds);
    assert!(
        e.contains("features.bin: checksum mismatch") && !e.contains("first inconsistency"),
        "{e}"
    );
}

const FEATURES_FILE_NAME: &str = crate::node_files::FEATURES_FILE;

#[test]
fn wrong_sizes_and_missing_files_fail() {
    let dir = tempfile::tempdir().unwrap();
    let ds = tiny(&dir);
    let p = ds.join(FEATURES_FILE_NAME);
    std::fs::write(&p, &std::fs::read(&p).unwrap()[..4096]).unwrap();
    let e = err(&ds);
    assert!(e.contains("features.bin: 4096 bytes on disk but the manifest records 12288 (files.features.bytes)"), "{e}");
    let ds = tiny(&dir);
    std::fs::remove_file(ds.join("split_test.bin")).unwrap();
    assert!(
        err(&ds).contains("split_test.bin: missing (the manifest lists it as files.split.test)")
    );
    let ds = tiny(&dir);
    edit_manifest(&ds, |m| {
        m.files.get_mut("labels").unwrap().payload_bytes = 16
    });
    assert!(err(&ds).contains(
        "labels.bin: files.labels.payload_bytes is 16 but the counts in the manifest give 24"
    ));
    let ds = tiny(&dir);
    edit_manifest(&ds, |m| m.num_edges = 4);
    assert!(err(&ds).contains("indptr.bin: entry 3 (the last) is 3 but num_edges is 4"));
    let ds = tiny(&dir);
    edit_manifest(&ds, |m| {
        m.files.get_mut("indices").unwrap().payload_bytes = 16
    });
    assert!(err(&ds).contains(
        "indices.bin: files.indices.payload_bytes is 16 but the counts in the manifest give 12"
    ));
    let ds = tiny(&dir);
    edit_manifest(&ds, |m| {
        m.files.get_mut("indptr").unwrap().crc32c = "xyz".into()
    });
    assert!(err(&ds).contains("files.indptr.crc32c 'xyz' is not 8 hex digits"));
    let ds = tiny(&dir);
    edit_manifest(&ds, |m| {
        let e = m.files["labels"].clone();
        m.files.insert("extra".into(), e);
    });
    assert!(err(&ds).contains("manifest.json: files.extra is not a file of format version 2"));
    let ds = tiny(&dir);
    edit_manifest(&ds, |m| m.features.as_mut().unwrap().rows_per_page = 2);
    assert!(err(&ds).contains("features.row_bytes 4000 and rows_per_page 2 do not follow"));
}

fn u64le(x: u64) -> [u8; 8] {
    x.to_le_bytes()
}

#[test]
fn bad_indptr_fails_with_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let ds = tiny(&dir);
    poke(&ds, INDPTR_FILE, 8, &u64le(3), true); // [0, 3, 2, 3]
    let e = err(&ds);
    assert!(
        e.contains("indptr.bin: entry 2 is 2 but entry 1 is 3; indptr must never decrease"),
        "{e}"
    );
    let ds = tiny(&dir);
    poke(&ds, INDPTR_FILE, 0, &u64le(1), true);
    assert!(err(&ds).contains("indptr.bin: entry 0 is 1 but indptr must start at 0"));
    let ds = tiny(&dir);
    poke(&ds, INDPTR_FILE, 24, &u64le(2), true);
    assert!(err(&ds).contains("indptr.bin: entry 3 (the last) is 2 but num_edges is 3"));
    let ds = tiny(&dir);
    poke(&ds, INDPTR_FILE, 16, &u64le(7), true);
    assert!(err(&ds).contains("indptr.bin: entry 2 is 7 but num_edges is 3"));
}

#[test]
fn bad_indices_fail_with_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let ds = tiny(&dir);
    poke(&ds, INDICES_FILE, 4, &99u32.to_le_bytes(), true);
    let e = err(&ds);
    assert!(
        e.contains("indices.bin: entry 1 is 99 but num_nodes is 3") && e.ends_with(ADVICE),
        "{e}"
    );
    let ds = tiny(&dir);
    poke(&ds, INDICES_FILE, 0, &[2, 0, 0, 0, 0, 0, 0, 0], true); // node 1: [2, 0]
    let e = err(&ds);
    assert!(
        e.contains("indices.bin: entry 1 is 0, smaller than the entry before it (2)")
            && e.contains("node 1 (entries 0..2)"),
        "{e}"
    );
    // A smaller id at the start of the next node's list is fine: [0, 2 | 1].
    let ds = tiny(&dir);
    verify(&ds, &VerifyOptions::test(), &NoProgress).unwrap();
    // Order across a read-block boundary (2048 u32 entries per block in tests): node 1 has
    // 3000 in-neighbors 0, 0, 1, 1, ...; entry 2048 made smaller than entry 2047.
    let g = Graph {
        indptr: vec![0, 0, 3000, 3000],
        indices: (0..3000).map(|i| i / 1000).collect(),
    };
    let ds = build(&dir.path().join("big"), &g, &[0, 0, 0], &[]);
    verify(&ds, &VerifyOptions::test(), &NoProgress).unwrap();
    poke(&ds, INDICES_FILE, 2048 * 4, &[0, 0, 0, 0], true);
    let e = err(&ds);
    assert!(
        e.contains("entry 2048 is 0, smaller than the entry before it (2)")
            && e.contains("node 1 (entries 0..3000)"),
        "{e}"
    );
}

#[test]
fn bad_labels_and_splits_fail() {
    let dir = tempfile::tempdir().unwrap();
    let ds = tiny(&dir);
    poke(&ds, LABELS_FILE, 0, &5i64.to_le_bytes(), true);
    assert!(err(&ds).contains("labels.bin: entry 0 is 5 but labels must be -1 or in [0, 2)"));
    let ds = tiny(&dir);
    poke(&ds, LABELS_FILE, 8, &(-2i64).to_le_bytes(), true);
    assert!(err(&ds).contains("labels.bin: entry 1 is -2"));
    let ds = tiny(&dir);
    edit_manifest(&ds, |m| m.labels.as_mut().unwrap().num_labeled = 3);
    assert!(err(&ds)
        .contains("labels.bin: 2 nodes are labeled but the manifest's labels.num_labeled is 3"));
    let ds = tiny(&dir);
    edit_manifest(&ds, |m| m.labels.as_mut().unwrap().num_classes = 4);
    assert!(err(&ds).contains("the largest label is 1 but the manifest's labels.num_classes is 4"));
    let ds = tiny(&dir);
    poke(&ds, "split_train.bin", 8, &3i64.to_le_bytes(), true);
    assert!(err(&ds).contains("split_train.bin: entry 1 is 3 but node ids must be in [0, 3)"));
    let ds = tiny(&dir);
    poke(&ds, "split_train.bin", 8, &0i64.to_le_bytes(), true);
    assert!(err(&ds).contains("split_train.bin: entry 1 is node 0, which appears earlier"));
}

/// A split's check keeps one bit per node within the budget's room (the sort's), or refuses.
#[test]
fn a_split_check_that_does_not_fit_the_budget_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let v = 1000u64;
    let g = Graph {
        indptr: (0..=v).map(|i| i.saturating_sub(1)).collect(),
        indices: (0..v as u32 - 1).collect(),
    };
    let ds = build(
        &dir.path().join("ds"),
        &g,
        &vec![0; 1000],
        &[("train", &[999, 0])],
    );
    let run = |run_records| {
        let how = IdCheck {
            sizes: runs::Sizes {
                run_records,
                io_bytes: 4096,
            },
            spill_dir: dir.path(),
            hash: unique_ids::hash_bytes,
        };
        verify_with(&ds, &how, &NoProgress)
    };
    // 1000 bits are 125 bytes: room for 8 records (128 bytes) holds them, 7 (112) does not
    run(8).unwrap();
    match run(7) {
        Err(Error::Input(m)) => assert_eq!(
            m,
            format!(
                "{}: checking it takes one bit per node (125 bytes for 1000 nodes), more than --memory leaves beyond verify's own 96 MiB; raise --memory to at least 97M",
                ds.join("split_train.bin").display()
            )
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn nonzero_padding_fails() {
    let dir = tempfile::tempdir().unwrap();
    let ds = tiny(&dir);
    poke(&ds, INDPTR_FILE, 100, &[7], true);
    let e = err(&ds);
    assert!(
        e.contains(
            "indptr.bin: byte 100 is 0x07, but the padding after the 32-byte payload must be zero"
        ),
        "{e}"
    );
    // Inside the payload of features: the gap after the one 4000-byte row of page 1.
    let ds = tiny(&dir);
    poke(&ds, FEATURES_FILE_NAME, 4096 + 4001, &[1], true);
    let e = err(&ds);
    assert!(e.contains("features.bin: byte 8097 is 0x01, but the padding after the 1 rows of page 1 must be zero"), "{e}");
    // After the last row (in the file padding).
    let ds = tiny(&dir);
    poke(&ds, FEATURES_FILE_NAME, 3 * 4096 - 1, &[1], true);
    assert!(err(&ds).contains(
        "features.bin: byte 12287 is 0x01, but the padding after the 12192-byte payload"
    ));
}

#[test]
fn wrong_degree_stats_fail() {
    let dir = tempfile::tempdir().unwrap();
    for (field, f) in [
        (
            "degree.min is 1 but the in-degrees in indptr give 0",
            (|d: &mut DegreeStats| d.min = 1) as fn(&mut DegreeStats),
        ),
        ("degree.max is 5 but the in-degrees in indptr give 2", |d| {
            d.max = 5
        }),
        (
            "degree.median is 0 but the in-degrees in indptr give 1",
            |d| d.median = 0,
        ),
        (
            "degree.zero is 2 but the in-degrees in indptr give 1",
            |d| d.zero = 2,
        ),
        (
            "degree.mean is 1.5 but the in-degrees in indptr give 1",
            |d| d.mean = 1.5,
        ),
    ] {
        let ds = tiny(&dir);
        edit_manifest(&ds, |m| f(&mut m.degree));
        let e = err(&ds);
        assert!(
            e.contains("indptr.bin: the manifest's") && e.contains(field),
            "{e}"
        );
    }
}

/// Datasets made by `convert` (with features, labels and fraction splits) and by both
/// generators pass, and a flipped edge in them is caught.
#[test]
fn built_and_generated_datasets_pass() {
    use crate::convert::{convert, ConvertOptions, GraphOptions, SplitSpec};
    let dir = tempfile::tempdir().unwrap();
    let edges = dir.path().join("e.tsv");
    let mut r = rng::stream(5, 0, 0);
    let text: String = (0..5000)
        .map(|_| format!("{}\t{}\n", rng::below(&mut r, 700), rng::below(&mut r, 700)))
        .collect();
    std::fs::write(&edges, text).unwrap();
    let x: Vec<u8> = (0..700 * 3)
        .flat_map(|k| (k as f32).to_le_bytes())
        .collect();
    let y: Vec<u8> = (0..700i64)
        .flat_map(|v| (v % 4 - 1).to_le_bytes())
        .collect();
    crate::npy::write_npy(&dir.path().join("x.npy"), "<f4", &[700, 3], false, &x).unwrap();
    crate::npy::write_npy(&dir.path().join("y.npy"), "<i8", &[700], false, &y).unwrap();
    let graph = GraphOptions {
        undirected: true,
        num_nodes: Some(700),
        ..Default::default()
    };
    let opts = ConvertOptions {
        features: Some(dir.path().join("x.npy")),
        labels: Some(dir.path().join("y.npy")),
        split: Some(SplitSpec::Fractions(vec![
            ("train".into(), 0.6),
            ("test".into(), 0.4),
        ])),
        seed: 3,
        ..ConvertOptions::new(edges, dir.path().join("conv"), graph)
    };
    convert(&opts, &NoProgress).unwrap();
    let sbm = crate::generate::SbmOptions {
        out: dir.path().join("sbm"),
        nodes: 500,
        classes: 4,
        avg_degree: 6.0,
        feature_dim: 8,
        feature_dtype: FeatureDtype::Bf16,
        seed: 1,
        split: vec![("train".into(), 0.5), ("val".into(), 0.25)],
        graph: GraphOptions::default(),
        overwrite: false,
    };
    crate::generate::generate_sbm(&sbm, &NoProgress).unwrap();
    let rmat = crate::generate::RmatOptions {
        out: dir.path().join("rmat"),
        scale: 9,
        edge_factor: 8,
        seed: 1,
        graph: GraphOptions::default(),
        overwrite: false,
    };
    crate::generate::generate_rmat(&rmat, &NoProgress).unwrap();
    for name in ["conv", "sbm", "rmat"] {
        let ds = dir.path().join(name);
        let r = verify(&ds, &VerifyOptions::test(), &NoProgress)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(r.files_checked >= 2);
        poke(&ds, INDICES_FILE, 0, &[0xff, 0xff], false);
        assert!(
            err(&ds).contains("indices.bin: checksum mismatch"),
            "{name}"
        );
    }
}

#[test]
fn empty_graph_passes() {
    let dir = tempfile::tempdir().unwrap();
    let ds = build(
        &dir.path().join("e"),
        &Graph {
            indptr: vec![0],
            indices: vec![],
        },
        &[],
        &[],
    );
    verify(&ds, &VerifyOptions::test(), &NoProgress).unwrap();
}

#[test]
fn original_node_ids_are_stored_and_checked() {
    use crate::convert::{convert, ConvertOptions, GraphOptions};
    let dir = tempfile::tempdir().unwrap();
    let edges = dir.path().join("e.tsv");
    std::fs::write(&edges, "0\t1\n2\t1\n").unwrap();
    // string ids "b", "", "cd": offsets 0, 1, 1, 3 over the bytes "bcd"
    let ids = dir.path().join("ids.bin");
    let bytes = dir.path().join("bytes.bin");
    let offsets: Vec<u8> = [0u64, 1, 1, 3]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(&ids, &offsets).unwrap();
    std::fs::write(&bytes, b"bcd").unwrap();
    let mut opts = ConvertOptions::new(
        edges.clone(),
        dir.path().join("ds"),
        GraphOptions::default(),
    );
    opts.node_ids = Some(crate::node_ids::NodeIdsInput {
        dtype: NodeIdDtype::Str,
        ids: ids.clone(),
        bytes: Some(bytes),
    });
    let m = convert(&opts, &NoProgress).unwrap();
    let info = m.node_ids.clone().unwrap();
    assert_eq!((info.dtype, info.bytes), (NodeIdDtype::Str, 3));
    assert_eq!(m.files["node_ids"].payload_bytes, 32);
    let ds = dir.path().join("ds");
    verify(&ds, &VerifyOptions::test(), &NoProgress).unwrap();
    // offsets that decrease are found, with a valid checksum
    let file = m.files["node_ids"].path.clone();
    poke(&ds, &file, 16, &u64le(0), true);
    assert!(err(&ds).contains("offset 2 is 0"), "{}", err(&ds));
    // a size that does not match the node count is refused before anything is built
    opts.out = dir.path().join("ds2");
    std::fs::write(&ids, [0u8; 8]).unwrap();
    match convert(&opts, &NoProgress) {
        Err(Error::Input(m)) => assert!(m.contains("8 bytes, but 3 node ids take 32"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(!dir.path().join("ds2").exists());
}
