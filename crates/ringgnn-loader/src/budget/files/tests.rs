//! The typed plan of files and cache on hand-made inputs: the two-type graph of
//! `tests/test_hetero_cache.py` (authors, papers, venues), whose figures are worked out there,
//! and a one-type graph made so that a feature file displaces its cached rows.

use std::io::Write;

use super::*;

/// Authors write papers (out-degrees 1 3 2 0), papers cite papers (2 0 1 3 1), papers are
/// published in venues, venues have papers; u32 ids: 24, 28, 12 and 12 bytes; offset indexes 84.
fn typed(fanouts: &[i64]) -> FilesAsked {
    let rel = |name: &str, edges: u64| {
        let parts: Vec<&str> = name.split(':').collect();
        let (src, dst) = (parts[0], parts[2]);
        RelationFile {
            name: name.into(),
            src: src.into(),
            dst: dst.into(),
            edges,
            held_bytes: 4 * edges,
            read_bytes: 4 * edges,
            fanouts: fanouts.to_vec(),
        }
    };
    FilesAsked {
        index: 84,
        nodes: vec![
            ("author".into(), 4),
            ("paper".into(), 5),
            ("venue".into(), 2),
        ],
        relations: vec![
            rel("author:writes:paper", 6),
            rel("paper:cites:paper", 7),
            rel("paper:published:venue", 3),
            rel("venue:has:paper", 3),
        ],
        backend: "auto".into(),
        ..FilesAsked::default()
    }
}

/// A loader of 2 paper seeds a batch, 5 a epoch, with both feature files (a page each; rows of
/// 4 and 16 bytes).
fn loader(room: u64) -> FilesAsked {
    let feature = |t: &str, row_bytes| FeatureFile {
        node_type: t.into(),
        bytes: 4096,
        row_bytes,
    };
    FilesAsked {
        budget: 2 * (room + 84),
        target: Some("paper".into()),
        batch_size: Some(2),
        seeds: Some(5),
        features: Some((
            "auto".into(),
            vec![feature("author", 4), feature("paper", 16)],
        )),
        ..typed(&[2])
    }
}

fn hits(t: &str, read: &[&str]) -> Result<Vec<u32>> {
    assert_eq!(read.len(), 4, "every relation with a fanout is read");
    Ok(match t {
        "author" => vec![1, 3, 2, 0],
        "paper" => vec![3, 1, 1, 4, 1],
        _ => unreachable!("only types with features are counted"),
    })
}

fn plan(asked: &FilesAsked) -> FilesPlan {
    plan_files(asked, &mut hits).unwrap()
}

fn held(p: &FilesPlan) -> Vec<&str> {
    p.relations
        .iter()
        .filter(|c| c.held)
        .map(|c| c.name.as_str())
        .collect()
}

fn cached(p: &FilesPlan) -> Vec<(&str, Vec<u64>)> {
    p.cache
        .iter()
        .flat_map(|c| c.ids.iter().map(|(t, ids)| (t.as_str(), ids.clone())))
        .collect()
}

fn why<'a>(choices: &'a [FileChoice], name: &str) -> &'a str {
    &choices.iter().find(|c| c.name == name).unwrap().why
}

#[test]
fn reads_worked_out_by_hand() {
    // Two paper seeds, one hop of fanout 2: a page per frontier node, at most each file; average
    // in-degrees writes 6/5, cites 7/5, has 3/5; published (into venues) is not read.
    let a = typed(&[2]);
    let (reads, rows) = expected_reads(&a.nodes, &a.relations, Some("paper"), Some(2)).unwrap();
    let reads: Vec<f64> = reads.into_iter().map(|(_, v)| v).collect();
    assert_eq!(reads, [24.0, 28.0, 0.0, 12.0]);
    let rows: Vec<f64> = rows.into_iter().map(|(_, v)| v).collect();
    let want = [2.0 * 1.2, 2.0 + 2.0 * 1.4, 2.0 * 0.6];
    assert!(
        rows.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12),
        "{rows:?}"
    );
    // Dense: every relation's whole file at each hop.
    let a = typed(&[2, 2]);
    let (reads, _) = expected_reads(&a.nodes, &a.relations, None, None).unwrap();
    assert_eq!(
        reads.iter().map(|(_, v)| *v).collect::<Vec<_>>(),
        [48.0, 56.0, 24.0, 24.0]
    );
    let err = expected_reads(&a.nodes, &a.relations, Some("journal"), Some(2)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node type 'journal' is not one of the dataset's"
    );
}

#[test]
fn ties_take_the_larger_file_then_the_key() {
    // A sampler alone, two hops, dense: every relation saves two reads of itself per byte.
    let mut a = typed(&[2, 2]);
    a.budget = 2 * (52 + 84);
    let p = plan(&a);
    assert_eq!(held(&p), ["author:writes:paper", "paper:cites:paper"]);
    assert_eq!(
        why(&p.relations, "venue:has:paper"),
        "does not fit the 0 B left"
    );
    assert_eq!(
        (p.room, p.batch_bytes, p.batches, p.cache.is_none()),
        (52, 136, 1, true)
    );
    // Equal size and value (published and has, 12 bytes each): the key decides.
    a.budget = 2 * (52 + 12 + 84);
    assert_eq!(
        held(&plan(&a)),
        [
            "author:writes:paper",
            "paper:cites:paper",
            "paper:published:venue"
        ]
    );
    a.budget = 2 * (76 + 84);
    assert_eq!(held(&plan(&a)).len(), 4);
    // Never read: never held, whatever the room.
    a.relations[2].fanouts = vec![0, 0];
    a.budget = 2 * (1000 + 84);
    let p = plan(&a);
    assert_eq!(
        held(&p),
        [
            "author:writes:paper",
            "paper:cites:paper",
            "venue:has:paper"
        ]
    );
    assert_eq!(
        why(&p.relations, "paper:published:venue"),
        "never read (fanout 0 at every hop it could be read)"
    );
}

#[test]
fn the_room_goes_to_cache_groups_and_files_by_value_per_byte() {
    // Room 100: the cache's ranking a1 a2 p3 p0 a0 (84 bytes), then (p1 p2 p4) does not fit the
    // 16 left; the authors' file is then worth nothing more, the papers' 0.9 per byte; has (12
    // bytes) fits.
    let p = plan(&loader(100));
    assert_eq!(p.batches, 3);
    assert_eq!(
        cached(&p),
        [("author", vec![0, 1, 2]), ("paper", vec![0, 3])]
    );
    assert_eq!(p.cache.as_ref().unwrap().total(), 84);
    assert_eq!(held(&p), ["venue:has:paper"]);
    assert_eq!(
        why(&p.features, "author"),
        "its sampled rows are all in the cache"
    );
    assert_eq!(why(&p.features, "paper"), "does not fit the 52 B left");
    assert!((p.cache_saved - (2048.0 * 6.0 + 1228.8 * 7.0)).abs() < 1e-9);
    // Room 208: every row with hits cached (156 bytes), then cites and writes.
    let p = plan(&loader(208));
    assert_eq!(p.cache.as_ref().unwrap().total(), 156);
    assert_eq!(held(&p), ["author:writes:paper", "paper:cites:paper"]);
    // Everything fits: no rows counted, no cache.
    let p = plan_files(&loader(2 * 4096 + 76), &mut |_, _| {
        panic!("nothing to count")
    })
    .unwrap();
    assert!(p.cache.is_none() && p.notes.is_empty());
    assert_eq!(
        held(&p),
        [
            "author:writes:paper",
            "paper:cites:paper",
            "venue:has:paper"
        ]
    );
    assert!(p
        .features
        .iter()
        .all(|c| c.held && c.why == "fits the room left"));
}

#[test]
fn an_explicit_cache_is_taken_first() {
    let mut a = loader(76);
    a.cache = Some(48);
    let p = plan(&a);
    assert_eq!(cached(&p), [("author", vec![1, 2]), ("paper", vec![3])]);
    assert_eq!(held(&p), ["paper:cites:paper"]);
    assert_eq!(
        why(&p.relations, "author:writes:paper"),
        "does not fit the 0 B left"
    );
    // No cache: nothing counted, the files take the room.
    let mut a = loader(1 << 20);
    a.cache = Some(0);
    let p = plan_files(&a, &mut |_, _| panic!("nothing to count")).unwrap();
    assert!(p.cache.is_none() && p.features.iter().all(|c| c.held));
    // Feature files on disk as asked: the room left goes to the cache.
    a.cache = None;
    a.features.as_mut().unwrap().0 = "pread".into();
    let p = plan(&a);
    assert_eq!(
        (p.feature_disk_backend.as_str(), why(&p.features, "paper")),
        ("pread", "feature_backend='pread' asked")
    );
    assert_eq!(
        cached(&p),
        [("author", vec![0, 1, 2]), ("paper", vec![0, 1, 2, 3, 4])]
    );
}

#[test]
fn a_budget_too_small_and_a_cache_too_large_are_refused() {
    let mut a = loader(76);
    a.cache = Some(1000);
    let err = plan_files(&a, &mut hits).unwrap_err().to_string();
    assert_eq!(
        err,
        "cache 1,000 bytes: the memory plan has 76 bytes of room for files and cache (half of what \
         memory=320 leaves beside the process's 0 bytes and the offset indexes' 84); give a smaller \
         cache or a larger memory"
    );
    let mut a = loader(40);
    a.backend = "memory".into();
    let err = plan_files(&a, &mut hits).unwrap_err().to_string();
    assert_eq!(
        err,
        "memory 248 bytes: the process holds 0, the batches half of what is left, the offset indexes 84 \
         and the files asked in memory 76: more than the budget; give a larger --memory (or a smaller \
         --batch-size), or read files from disk (backend auto)"
    );
    let mut a = loader(100);
    a.budget = 1000 + 84 + 100;
    a.batch_bytes = Some(2000);
    let err = plan_files(&a, &mut hits).unwrap_err().to_string();
    assert!(
        err.contains("the batches 2,000 at their peak (measured)"),
        "{err}"
    );
    // Measured batches take their bytes; the rest is room.
    a.batch_bytes = Some(1000);
    let p = plan(&a);
    assert_eq!(
        (p.room, p.batch_bytes, p.cache.unwrap().total()),
        (100, 1000, 84)
    );
}

/// One type of ten nodes with features (rows of 8 bytes, 16 with the cache's id; the file 80
/// bytes, saving its 80 bytes read a batch) and one relation (152 bytes held with its times,
/// saving 76 read: half as much per byte as the file): node 0 is a hub (10 hits), the nine
/// others 1 each.
fn hub(room: u64) -> FilesAsked {
    FilesAsked {
        budget: 2 * room,
        nodes: vec![("p".into(), 10)],
        relations: vec![RelationFile {
            name: "p:r:p".into(),
            src: "p".into(),
            dst: "p".into(),
            edges: 19,
            held_bytes: 152,
            read_bytes: 76,
            fanouts: vec![1],
        }],
        target: Some("p".into()),
        batch_size: Some(2),
        backend: "auto".into(),
        features: Some((
            "auto".into(),
            vec![FeatureFile {
                node_type: "p".into(),
                bytes: 80,
                row_bytes: 8,
            }],
        )),
        ..FilesAsked::default()
    }
}

fn hub_hits(_: &str, _: &[&str]) -> Result<Vec<u32>> {
    Ok(vec![10, 1, 1, 1, 1, 1, 1, 1, 1, 1])
}

#[test]
fn a_feature_file_displaces_its_cached_rows() {
    // The hub's row is worth 10/19 of the file's saving in 16 bytes (more per byte than the
    // file): cached first. The file, net of it, is worth less per byte and goes back; the other
    // rows are worth less still, so the file comes up again at its net value and, held, releases
    // the hub's row.
    let p = plan_files(&hub(100), &mut hub_hits).unwrap();
    assert!(p.features[0].held);
    assert_eq!(
        p.features[0].why,
        "fits the room left (worth more than its 16 B of cached rows, released)"
    );
    assert!(p.cache.is_none());
    assert_eq!(
        p.notes,
        ["no cache: every byte of room went to files worth more per byte"]
    );
    assert_eq!(p.relations[0].why, "does not fit the 20 B left");
    // One byte short of the file with the hub's row released: the row stays, and three of the
    // others fill what is left (63 bytes), smaller ids first.
    let p = plan_files(&hub(79), &mut hub_hits).unwrap();
    assert!(!p.features[0].held);
    assert_eq!(p.features[0].why, "does not fit the 79 B left");
    assert_eq!(p.relations[0].why, "does not fit the 63 B left");
    assert_eq!(cached(&p), [("p", vec![0, 1, 2, 3])]);
    let saved = p.features[0].saved;
    assert!((p.cache_saved - saved * 13.0 / 19.0).abs() < 1e-9);
}

#[test]
fn cache_rows_rank_across_types_by_hits_per_byte() {
    // Costs: papers 24 bytes, authors 12. a1 3/12, then a2 2/12 and p3 4/24 (equal: author
    // first by name), p0 3/24, a0 1/12, p1 p2 p4 1/24; a3 never.
    let (a, p) = (vec![1, 3, 2, 0], vec![3, 1, 1, 4, 1]);
    let types = [
        TypeHits {
            node_type: "paper",
            hits: &p,
            row_bytes: 16,
        },
        TypeHits {
            node_type: "author",
            hits: &a,
            row_bytes: 4,
        },
    ];
    let g: Vec<(String, u32, u64)> = ranked_groups(&types)
        .into_iter()
        .map(|g| (g.node_type, g.hits, g.rows))
        .collect();
    let want = [
        ("author", 3, 1),
        ("author", 2, 1),
        ("paper", 4, 1),
        ("paper", 3, 1),
        ("author", 1, 1),
        ("paper", 1, 3),
    ];
    assert_eq!(g, want.map(|(t, h, r)| (t.to_string(), h, r)));
    let rows = |budget| {
        let c = choose_rows(&types, budget);
        assert!(c.total() <= budget);
        assert_eq!(c.budget, budget);
        c.ids
    };
    let of = |a: &[u64], p: &[u64]| {
        vec![
            ("author".to_string(), a.to_vec()),
            ("paper".to_string(), p.to_vec()),
        ]
    };
    assert_eq!(rows(11), of(&[], &[]));
    assert_eq!(rows(12), of(&[1], &[]));
    assert_eq!(rows(47), of(&[1, 2], &[])); // p3 does not fit: the prefix ends
    assert_eq!(rows(48), of(&[1, 2], &[3]));
    assert_eq!(rows(84), of(&[0, 1, 2], &[0, 3]));
    assert_eq!(rows(84 + 24), of(&[0, 1, 2], &[0, 1, 3])); // ties: smaller ids first
    assert_eq!(rows(1 << 30), of(&[0, 1, 2], &[0, 1, 2, 3, 4]));
}

#[test]
fn hits_are_counted_from_the_files_in_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::File::create(&path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
        path
    };
    let narrow: Vec<u8> = [2u32, 0, 1, 3, 3, 4, 0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let wide: Vec<u8> = [4u64, 4].iter().flat_map(|v| v.to_le_bytes()).collect();
    let files = [
        NeighborFile {
            path: write("a", &narrow),
            width: 4,
            entries: 7,
        },
        NeighborFile {
            path: write("b", &wide),
            width: 8,
            entries: 2,
        },
    ];
    for chunk in [1, 2, 3, 1 << 18] {
        assert_eq!(
            source_hits("paper", 5, &files, chunk).unwrap(),
            [2, 1, 1, 2, 3]
        );
    }
    let short = [NeighborFile {
        entries: 8,
        ..files[0].clone()
    }];
    let err = source_hits("paper", 5, &short, 2).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}: ends before entry 8; run `ringgnn verify` on the dataset",
            files[0].path.display()
        )
    );
    let err = source_hits("paper", 4, &files, 3).unwrap_err();
    assert!(
        matches!(err, Error::Store(ringgnn_store::Error::Corrupt(_))),
        "{err}"
    );
    assert!(err.to_string().ends_with(
        "entry 4 is not a node of type 'paper' (4 nodes); run `ringgnn verify` on the dataset"
    ));
    let gone = [NeighborFile {
        path: dir.path().join("gone"),
        width: 4,
        entries: 1,
    }];
    assert!(matches!(
        source_hits("paper", 4, &gone, 3),
        Err(Error::Store(ringgnn_store::Error::Io { .. }))
    ));
}

#[test]
fn figures_are_written_as_the_plan_shows_them() {
    assert_eq!(py_bytes(0.0), "0 B");
    assert_eq!(py_bytes(1023.0), "1023 B");
    assert_eq!(py_bytes(1024.0), "1.0 KiB");
    assert_eq!(py_bytes(1280.0), "1.2 KiB"); // 1.25: half to even, as Python
    assert_eq!(py_bytes(1048575.0), "1024.0 KiB");
    assert_eq!(py_bytes(3.0 * (1u64 << 40) as f64 * 2048.0), "6144.0 TiB");
    assert_eq!(commas(0), "0");
    assert_eq!(commas(999), "999");
    assert_eq!(commas(1000), "1,000");
    assert_eq!(commas(-1234567), "-1,234,567");
}
