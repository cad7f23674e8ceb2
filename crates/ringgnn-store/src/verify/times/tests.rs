//! `verify` on datasets with times: a built one passes (its lists are not ascending by source),
//! and each kind of damage fails with the file or field named.

use std::path::{Path, PathBuf};

use crate::manifest::{Manifest, TimeRange, MANIFEST_FILE};
use crate::npy::write_npy;
use crate::options::{GraphOptions, TimeInput, TimeOptions};
use crate::verify::{verify, VerifyOptions};
use crate::{convert, ConvertOptions, Error, NoProgress};

/// Edges into node 1 at times 5, 3, 3, 9 from 2, 7, 0, 1 (stored (3,0),(3,7),(5,2),(9,1)), one
/// into node 0 at -4; node times 10..18.
fn build(dir: &Path) -> PathBuf {
    let edges = dir.join("e.txt");
    std::fs::write(&edges, "2 1\n7 1\n0 1\n1 1\n3 0\n").unwrap();
    let (et, nt) = (dir.join("et.npy"), dir.join("nt.npy"));
    let t: [i64; 5] = [5, 3, 3, 9, -4];
    write_npy(&et, "<i8", &[5], false, bytemuck::cast_slice(&t)).unwrap();
    let n: Vec<i64> = (10..18).collect();
    write_npy(&nt, "<i8", &[8], false, bytemuck::cast_slice(&n)).unwrap();
    let graph = GraphOptions {
        times: TimeOptions {
            edges: Some(TimeInput::File(et)),
            nodes: Some(TimeInput::File(nt)),
        },
        ..Default::default()
    };
    let out = dir.join("ds");
    let m = convert(&ConvertOptions::new(edges, out.clone(), graph), &NoProgress).unwrap();
    assert_eq!(m.version, 3);
    assert_eq!(m.edge_times, Some(TimeRange { min: -4, max: 9 }));
    assert_eq!(m.node_times, Some(TimeRange { min: 10, max: 17 }));
    out
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

/// Overwrite 8 bytes of `file` at entry `i` with `x`, recording the new checksum.
fn poke(ds: &Path, file: &str, i: usize, x: i64) {
    let p = ds.join(file);
    let mut b = std::fs::read(&p).unwrap();
    b[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    edit_manifest(ds, |m| {
        for e in m.files.values_mut().filter(|e| e.path == file) {
            e.crc32c = format!("{:08x}", crc32c::crc32c(&b));
        }
    });
}

#[test]
fn a_dataset_with_times_passes() {
    let dir = tempfile::tempdir().unwrap();
    let ds = build(dir.path());
    let r = verify(&ds, &VerifyOptions::test(), &NoProgress).unwrap();
    assert_eq!(r.files_checked, 5);
}

#[test]
fn times_out_of_order_fail_with_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let ds = build(dir.path());
    // Entry 3, (time 5, source 2), becomes (3, 2): before entry 2's (3, 7).
    poke(&ds, "edge_times.bin", 3, 3);
    let e = err(&ds);
    assert!(
        e.contains("edge_times.bin")
            && e.contains("entry 3 is time 3 with source 2, before entry 2's time 3 with source 7")
            && e.contains("node 1 (entries 1..5) must be ordered by time, then source"),
        "{e}"
    );
}

#[test]
fn time_ranges_must_match_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let ds = build(dir.path());
    edit_manifest(&ds, |m| m.edge_times = Some(TimeRange { min: -4, max: 10 }));
    let e = err(&ds);
    assert!(
        e.contains("edge_times.bin")
            && e.contains("the times range from -4 to 9, but the manifest records edge_times.min -4 and edge_times.max 10"),
        "{e}"
    );
    let d1 = tempfile::tempdir().unwrap();
    let ds = build(d1.path());
    edit_manifest(&ds, |m| m.node_times = Some(TimeRange { min: 0, max: 17 }));
    let e = err(&ds);
    assert!(
        e.contains("node_times.bin") && e.contains("node_times.min 0 and node_times.max 17"),
        "{e}"
    );
}

#[test]
fn sizes_and_fields_of_times_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let ds = build(dir.path());
    edit_manifest(&ds, |m| {
        m.files.get_mut("edge_times").unwrap().payload_bytes = 32;
    });
    let e = err(&ds);
    assert!(
        e.contains("files.edge_times.payload_bytes is 32 but the counts in the manifest give 40"),
        "{e}"
    );
    let d2 = tempfile::tempdir().unwrap();
    let ds = build(d2.path());
    edit_manifest(&ds, |m| m.version = 2);
    let e = Manifest::read(&ds).unwrap_err().to_string();
    assert!(
        e.contains("edge_times and node_times are fields of format version 3, but the manifest says version 2"),
        "{e}"
    );
    let d9 = tempfile::tempdir().unwrap();
    let ds = build(d9.path());
    edit_manifest(&ds, |m| m.version = 4);
    let e = Manifest::read(&ds).unwrap_err().to_string();
    assert!(
        e.contains("format version 4 is newer than this ringgnn reads (up to 3); upgrade ringgnn"),
        "{e}"
    );
    let d3 = tempfile::tempdir().unwrap();
    let ds = build(d3.path());
    edit_manifest(&ds, |m| m.node_times = None);
    let e = Manifest::read(&ds).unwrap_err().to_string();
    assert!(
        e.contains("'node_times' and files.node_times must be both present or both absent"),
        "{e}"
    );
    let d4 = tempfile::tempdir().unwrap();
    let ds = build(d4.path());
    std::fs::remove_file(ds.join("edge_times.bin")).unwrap();
    let e = err(&ds);
    assert!(e.contains("edge_times.bin: missing"), "{e}");
}

#[test]
fn a_heterogeneous_dataset_with_times() {
    use crate::hetero::tests::{buys_spec, node_with_ids};
    use crate::hetero::{build_with_times, HeteroManifest, HeteroTimes, Part};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let types = vec![
        node_with_ids("user", 2, None),
        node_with_ids("item", 3, None),
    ];
    let mut spec = buys_spec(dir.path(), out.clone(), types); // 0->0, 1->1
    spec.add_reverse = true;
    std::fs::write(&spec.relations[0].input, "0,0\n1,0\n1,2\n").unwrap();
    let (et, nt) = (dir.path().join("et.npy"), dir.path().join("nt.npy"));
    write_npy(&et, "<i8", &[3], false, bytemuck::cast_slice(&[7i64, 2, 5])).unwrap();
    write_npy(
        &nt,
        "<i4",
        &[3],
        false,
        bytemuck::cast_slice(&[4i32, -1, 6]),
    )
    .unwrap();
    let times = HeteroTimes {
        edges: [("user:buys:item".to_string(), et.clone())].into(),
        nodes: [("item".to_string(), nt)].into(),
    };
    let m = build_with_times(&spec, &times, &NoProgress).unwrap();
    assert_eq!(m.version, 3);
    assert_eq!(
        m.relations["user:buys:item"].edge_times,
        Some(TimeRange { min: 2, max: 7 })
    );
    assert_eq!(
        m.node_types["item"].node_times,
        Some(TimeRange { min: -1, max: 6 })
    );
    assert_eq!(m.node_types["user"].node_times, None);
    assert!(m.files.contains_key("relation.user:buys:item.edge_times"));
    assert_eq!(m.files["node.item.node_times"].path, "type0_node_times.bin");
    // Item 0's in-edges by time: (2, user 1), (7, user 0); the reverse keeps each edge's time.
    let part = |r: &str| crate::Dataset::open_part(&out, &Part::Relation(r.into())).unwrap();
    let buys = part("user:buys:item");
    assert_eq!(buys.neighbors(0).unwrap(), [1, 0]);
    assert_eq!(buys.edge_times(0).unwrap(), [2, 7]);
    let rev = part("item:rev_buys:user");
    assert_eq!(rev.neighbors(1).unwrap(), [0, 2]);
    assert_eq!(rev.edge_times(1).unwrap(), [2, 5]);
    assert!(rev.edge_times_path().is_some());
    assert!(rev.edge_time_keys_path().is_some());
    assert!(buys.edge_time_keys_path().is_some());
    assert!(m
        .files
        .contains_key("relation.user:buys:item.edge_time_keys"));
    assert!(m
        .files
        .contains_key("relation.item:rev_buys:user.edge_time_keys"));
    let item = crate::Dataset::open_part(&out, &Part::Node("item".into())).unwrap();
    assert_eq!(item.node_times().unwrap(), Some(vec![4, -1, 6]));
    verify(&out, &VerifyOptions::test(), &NoProgress).unwrap();
    HeteroManifest::read(&out).unwrap();
    // A name the build lacks, a wrong length.
    let bad = HeteroTimes {
        edges: [("user:sells:item".to_string(), et)].into(),
        nodes: Default::default(),
    };
    let e = build_with_times(&spec, &bad, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("'user:sells:item', which is not a relation of the build"),
        "{e}"
    );
    let short = dir.path().join("short.npy");
    write_npy(&short, "<i8", &[2], false, bytemuck::cast_slice(&[1i64, 2])).unwrap();
    let bad = HeteroTimes {
        edges: [("user:buys:item".to_string(), short)].into(),
        nodes: Default::default(),
    };
    let e = build_with_times(&spec, &bad, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("relation ") && e.contains("has 2 times but the input has 3 edges"),
        "{e}"
    );
}

/// Overwrite entry `i`'s 2-byte key in `edge_time_keys.bin`, recording the new checksum.
fn poke_key(ds: &Path, i: usize, k: u16) {
    let p = ds.join("edge_time_keys.bin");
    let mut b = std::fs::read(&p).unwrap();
    let at = crate::time_keys::key_offset(i as u64) as usize;
    b[at..at + 2].copy_from_slice(&k.to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    edit_manifest(ds, |m| {
        m.files.get_mut("edge_time_keys").unwrap().crc32c = format!("{:08x}", crc32c::crc32c(&b));
    });
}

#[test]
fn time_keys_are_written_and_checked_entry_by_entry() {
    let dir = tempfile::tempdir().unwrap();
    let ds = build(dir.path());
    // Times by entry: -4 (node 0), then 3, 3, 5, 9 (node 1); all five are the sample, so
    // B[j] = sorted[j * 5 / 65536] and a time's key is the last bucket its value starts.
    let raw = std::fs::read(ds.join("edge_time_keys.bin")).unwrap();
    let keys: Vec<u16> = (0..5)
        .map(|i| {
            let at = crate::time_keys::key_offset(i) as usize;
            u16::from_le_bytes([raw[at], raw[at + 1]])
        })
        .collect();
    assert_eq!(keys, [13107, 39321, 39321, 52428, 65535]);
    let m = Manifest::read(&ds).unwrap();
    let f = &m.files["edge_time_keys"];
    assert_eq!(f.path, "edge_time_keys.bin");
    assert_eq!(f.payload_bytes, 524288 + 10);
    assert_eq!(f.bytes, 524288 + 4096);

    poke_key(&ds, 2, 39322);
    let e = err(&ds);
    assert!(
        e.contains("edge_time_keys.bin: ")
            && e.contains("entry 2 has key 39322, but its time 3 in ")
            && e.contains("edge_times.bin is in bucket 39321"),
        "{e}"
    );
}

#[test]
fn time_key_bounds_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let ds = build(dir.path());
    poke(&ds, "edge_time_keys.bin", 300, -100);
    let e = err(&ds);
    assert!(
        e.contains("edge_time_keys.bin: ")
            && e.contains("time key bound 300 is -100, below bound 299's -4: the bounds must be non-decreasing"),
        "{e}"
    );
    let err_bounds = crate::time_keys::read_bounds(&ds.join("edge_time_keys.bin"))
        .unwrap_err()
        .to_string();
    assert!(
        err_bounds
            .contains("edge_time_keys.bin: time key bound 300 (-100) is below bound 299 (-4)")
            && err_bounds.contains("ringgnn verify"),
        "{err_bounds}"
    );

    // The first bound below every time: keys still decide, but it is not the smallest time.
    let d2 = tempfile::tempdir().unwrap();
    let ds = build(d2.path());
    poke(&ds, "edge_time_keys.bin", 0, -5);
    let e = err(&ds);
    assert!(
        e.contains("edge_time_keys.bin: ")
            && e.contains("time key bound 0 is -5, but the smallest edge time is -4"),
        "{e}"
    );

    // A time below the first bound has no key.
    let d3 = tempfile::tempdir().unwrap();
    let ds = build(d3.path());
    poke(&ds, "edge_times.bin", 0, -10);
    edit_manifest(&ds, |m| m.edge_times = Some(TimeRange { min: -10, max: 9 }));
    let e = err(&ds);
    assert!(
        e.contains("edge_time_keys.bin: ")
            && e.contains("entry 0 has key 13107, but its time -10 in ")
            && e.contains("edge_times.bin is below the first bound -4"),
        "{e}"
    );
}

#[test]
fn time_key_sizes_and_fields_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let ds = build(dir.path());
    let p = ds.join("edge_time_keys.bin");
    let b = std::fs::read(&p).unwrap();
    std::fs::write(&p, &b[..524288]).unwrap();
    let e = err(&ds);
    assert!(
        e.contains("edge_time_keys.bin: 524288 bytes on disk but the manifest records 528384 (files.edge_time_keys.bytes)"),
        "{e}"
    );
    // Opening names the file too; with the manifest edited to match, so does the size check
    // of a reader of times.
    let e = crate::Dataset::open(&ds)
        .err()
        .expect("a short file")
        .to_string();
    assert!(
        e.contains("edge_time_keys.bin: 524288 bytes on disk but the manifest (files.edge_time_keys) records 528384")
            && e.contains("ringgnn verify"),
        "{e}"
    );
    edit_manifest(&ds, |m| {
        m.files.get_mut("edge_time_keys").unwrap().bytes = 524288;
    });
    let e = crate::Dataset::open(&ds)
        .and_then(|d| d.check_times())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("edge_time_keys.bin: 524288 bytes, but the time keys of 5 edges (a 524288-byte header, then one u16 per edge) need 524298 bytes")
            && e.contains("ringgnn verify"),
        "{e}"
    );
    std::fs::write(&p, &b[..4096]).unwrap();
    let e = crate::time_keys::read_bounds(&p).unwrap_err().to_string();
    assert!(
        e.contains("edge_time_keys.bin: 4096 bytes, shorter than the 524288-byte bounds header"),
        "{e}"
    );

    let d2 = tempfile::tempdir().unwrap();
    let ds = build(d2.path());
    edit_manifest(&ds, |m| {
        m.files.get_mut("edge_time_keys").unwrap().payload_bytes = 524288;
    });
    let e = err(&ds);
    assert!(
        e.contains("files.edge_time_keys.payload_bytes is 524288 but the counts in the manifest give 524298"),
        "{e}"
    );

    let d3 = tempfile::tempdir().unwrap();
    let ds = build(d3.path());
    edit_manifest(&ds, |m| {
        m.files.remove("edge_times");
        m.edge_times = None;
    });
    let e = Manifest::read(&ds).unwrap_err().to_string();
    assert!(
        e.contains("files.edge_time_keys needs files.edge_times, the times it is derived from"),
        "{e}"
    );
}

#[test]
fn a_dataset_built_before_time_keys_still_opens_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let ds = build(dir.path());
    std::fs::remove_file(ds.join("edge_time_keys.bin")).unwrap();
    edit_manifest(&ds, |m| {
        m.files.remove("edge_time_keys");
    });
    let r = verify(&ds, &VerifyOptions::test(), &NoProgress).unwrap();
    assert_eq!(r.files_checked, 4);
    let d = crate::Dataset::open(&ds).unwrap();
    assert_eq!(d.edge_time_keys_path(), None);
    assert_eq!(d.edge_times(1).unwrap(), [3, 3, 5, 9]);
}
