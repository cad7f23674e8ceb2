//! A typed graph read from disk opens its files when its sampler is made: the readers its
//! threads open later read the same files through duplicates of those descriptors, so a file
//! removed after the sampler was made does not fail a hop mid-epoch, and a file missing when the
//! graph is opened fails there, naming it; a time file of the wrong size says what to do.

use std::path::{Path, PathBuf};

use ringgnn_io::BackendKind;
use ringgnn_sampler::{Fanout, TypedGraph};

mod common;
use common::timed::{fixture_times, write_padded};

/// A copy of the homogeneous fixture `tests/fixtures/v2-tiny` (7 nodes, 8 edges) in `dir`.
fn fixture_copy(dir: &Path) -> PathBuf {
    copy_of("v2-tiny", dir)
}

/// A copy of the fixture `tests/fixtures/NAME` in `dir`.
fn copy_of(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name);
    let out = dir.join("ds");
    std::fs::create_dir(&out).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), out.join(e.file_name())).unwrap();
    }
    out
}

#[test]
fn readers_opened_by_threads_later_read_the_files_the_sampler_was_made_with() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = fixture_copy(tmp.path());
    let (_, path) = fixture_times(tmp.path());
    let mut g = TypedGraph::open(&dir, Some(BackendKind::Pread), false, &[]).unwrap();
    g.set_edge_times("node:to:node", &path).unwrap();
    let fan = vec![vec![Fanout::Count(2), Fanout::All]];
    let (mut one, _, _) = g.sampler(fan.clone(), false, None).unwrap();
    let want = common::sample_seven_at(&mut one, 6);
    let (mut s, name, _) = g.sampler(fan, false, None).unwrap();
    assert_eq!(name, "pread");
    s.set_threads(4);
    // Gone by name once the sampler is made; its threads open their readers at the first hop.
    std::fs::remove_file(dir.join("indices.bin")).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(common::sample_seven_at(&mut s, 6), want);
}

#[test]
fn a_file_missing_when_the_graph_opens_is_named_there() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = fixture_copy(tmp.path());
    std::fs::remove_file(dir.join("indices.bin")).unwrap();
    let e = TypedGraph::open(&dir, Some(BackendKind::Pread), false, &[])
        .err()
        .expect("a missing neighbor file")
        .to_string();
    assert!(e.contains("indices.bin"), "{e}");
    // An edge-time file attached to a graph read from disk is opened when attached.
    std::fs::create_dir(tmp.path().join("again")).unwrap();
    let dir = fixture_copy(&tmp.path().join("again"));
    let mut g = TypedGraph::open(&dir, Some(BackendKind::Pread), false, &[]).unwrap();
    let e = g
        .set_edge_times("node:to:node", &tmp.path().join("none.bin"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("none.bin"), "{e}");
}

#[test]
fn a_time_file_of_the_wrong_size_names_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    // The dataset's own edge times (`v3-times-tiny`, 5 edges), damaged after the graph opened:
    // the sampler that opens them sends to `ringgnn verify` the dataset.
    let dir = copy_of("v3-times-tiny", tmp.path());
    let g = TypedGraph::open(&dir, Some(BackendKind::Pread), false, &[]).unwrap();
    let times = dir.join("edge_times.bin");
    std::fs::write(&times, vec![0u8; 8192]).unwrap();
    let e = g
        .sampler(vec![vec![Fanout::Count(2)]], false, None)
        .err()
        .expect("a damaged time file")
        .to_string();
    let verify = format!(
        "the dataset is damaged: run `ringgnn verify {}`",
        dir.display()
    );
    assert!(
        e.contains("edge_times.bin: 8192 bytes of edge times"),
        "{e}"
    );
    assert!(e.contains(&verify), "{e}");
    // A file attached by the caller: named as the one given, nothing to verify.
    std::fs::create_dir(tmp.path().join("again")).unwrap();
    let dir = fixture_copy(&tmp.path().join("again"));
    let mut g = TypedGraph::open(&dir, Some(BackendKind::Pread), false, &[]).unwrap();
    let short = write_padded(tmp.path(), "short.bin", vec![0; 8 * 600]);
    let e = g
        .set_edge_times("node:to:node", &short)
        .unwrap_err()
        .to_string();
    let given = format!(
        "the file given ({}) is not this relation's edge times",
        short.display()
    );
    assert!(e.contains(&given), "{e}");
    assert!(!e.contains("ringgnn verify"), "{e}");
    // Damaged after it was attached: the same words when a sampler opens it.
    let path = write_padded(tmp.path(), "times.bin", vec![0; 8 * 8]);
    g.set_edge_times("node:to:node", &path).unwrap();
    std::fs::write(&path, vec![0u8; 8192]).unwrap();
    let e = g
        .sampler(vec![vec![Fanout::Count(2)]], false, None)
        .err()
        .expect("a damaged time file")
        .to_string();
    let given = format!(
        "the file given ({}) is not this relation's edge times",
        path.display()
    );
    assert!(e.contains(&given), "{e}");
}
