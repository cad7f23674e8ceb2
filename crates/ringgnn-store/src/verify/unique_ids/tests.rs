//! The check that original ids are unique: exact messages on tiny datasets, hash collisions of
//! different strings never reported, heterogeneous types checked each on its own, the external
//! sort against random ids with tiny buffers, and its temporary files gone afterwards.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::super::runs::Sizes;
use super::super::{verify, verify_with, VerifyOptions, VerifyReport};
use super::{hash_bytes, HashFn, IdCheck};
use crate::convert::{convert, ConvertOptions, GraphOptions};
use crate::hetero::build;
use crate::hetero::tests::{buys_spec, node_with_ids as node};
use crate::manifest::NodeIdDtype;
use crate::node_ids::tests::without_unique_check;
use crate::node_ids::NodeIdsInput;
use crate::{Error, NoProgress, Result};

/// The original ids of a dataset being built: integers or strings.
enum Ids<'a> {
    I64(&'a [i64]),
    U64(&'a [u64]),
    Str(&'a [&'a [u8]]),
}

impl Ids<'_> {
    fn len(&self) -> usize {
        match self {
            Ids::I64(v) => v.len(),
            Ids::U64(v) => v.len(),
            Ids::Str(v) => v.len(),
        }
    }

    /// Write the importer's files (named after `name` in `dir`).
    fn input(&self, dir: &Path, name: &str) -> NodeIdsInput {
        let words = |v: &mut dyn Iterator<Item = u64>| -> Vec<u8> {
            v.flat_map(|x| x.to_le_bytes()).collect()
        };
        let ids = dir.join(format!("{name}.ids"));
        let (dtype, data, bytes) = match self {
            Ids::I64(v) => (
                NodeIdDtype::I64,
                words(&mut v.iter().map(|&x| x as u64)),
                None,
            ),
            Ids::U64(v) => (NodeIdDtype::U64, words(&mut v.iter().copied()), None),
            Ids::Str(v) => {
                let mut offsets = vec![0u64];
                for s in v.iter() {
                    offsets.push(offsets.last().unwrap() + s.len() as u64);
                }
                let path = dir.join(format!("{name}.bytes"));
                std::fs::write(&path, v.concat()).unwrap();
                (
                    NodeIdDtype::Str,
                    words(&mut offsets.into_iter()),
                    Some(path),
                )
            }
        };
        std::fs::write(&ids, data).unwrap();
        NodeIdsInput { dtype, ids, bytes }
    }
}

/// A dataset of `ids.len()` nodes (a path through them) with these original ids, at `dir/ds`.
fn dataset(dir: &Path, ids: &Ids<'_>) -> PathBuf {
    let n = ids.len() as u64;
    let edges = dir.join("e.tsv");
    let text: String = (1..n).map(|v| format!("{}\t{v}\n", v - 1)).collect();
    std::fs::write(&edges, if n < 2 { "0\t0\n".into() } else { text }).unwrap();
    let out = dir.join("ds");
    let graph = GraphOptions {
        num_nodes: Some(n),
        ..Default::default()
    };
    let mut opts = ConvertOptions::new(edges, out.clone(), graph);
    opts.node_ids = Some(ids.input(dir, "nodes"));
    opts.overwrite = true;
    // builds refuse repeated ids; verify must find them in a dataset that has them anyway
    without_unique_check(|| convert(&opts, &NoProgress)).unwrap();
    out
}

/// Verify with these sizes and hash, runs under `spill`.
fn check(ds: &Path, sizes: Sizes, hash: HashFn, spill: &Path) -> Result<VerifyReport> {
    let how = IdCheck {
        sizes,
        spill_dir: spill,
        hash,
    };
    verify_with(ds, &how, &NoProgress)
}

const ROOMY: Sizes = Sizes {
    run_records: 1 << 16,
    io_bytes: 1 << 16,
};
/// Runs of 2 records, merged two at a time (the fewest a merge takes), a page per buffer.
const TINY: Sizes = Sizes {
    run_records: 2,
    io_bytes: 4096,
};

/// The message of a duplicate, whatever the budget.
fn corrupt(r: Result<VerifyReport>) -> String {
    match r {
        Err(Error::Corrupt(m)) => m,
        other => panic!("expected Error::Corrupt, got {other:?}"),
    }
}

fn advice() -> &'static str {
    "each original id must name one node, or lookups by original id (predict --nodes, an \
     importer's joins) are ambiguous. The importer that wrote this dataset should have refused \
     the duplicate: remove it from the input and import it again"
}

fn ids_file(ds: &Path) -> String {
    let m = crate::Manifest::read(ds).unwrap();
    ds.join(&m.files["node_ids"].path).display().to_string()
}

#[test]
fn a_duplicate_integer_id_is_named_with_both_nodes() {
    let t = tempfile::tempdir().unwrap();
    // -1 and 3 both occur twice: the smallest id is reported (keys sort as the i64s do)
    let ds = dataset(t.path(), &Ids::I64(&[3, -1, 5_000_000_000, 3, -1]));
    for sizes in [ROOMY, TINY] {
        let e = corrupt(check(&ds, sizes, hash_bytes, t.path()));
        assert_eq!(
            e,
            format!(
                "{}: nodes 1 and 4 both have the original id -1; {}",
                ids_file(&ds),
                advice()
            )
        );
    }
    let ds = dataset(t.path(), &Ids::U64(&[u64::MAX, 7, 2, u64::MAX]));
    let e = corrupt(verify(&ds, &VerifyOptions::test(), &NoProgress));
    assert_eq!(
        e,
        format!(
            "{}: nodes 0 and 3 both have the original id 18446744073709551615; {}",
            ids_file(&ds),
            advice()
        )
    );
    // the same bits as i64 and u64 are different ids from before: all distinct passes
    let ds = dataset(t.path(), &Ids::I64(&[-1, 1, i64::MIN, i64::MAX, 0]));
    let r = verify(&ds, &VerifyOptions::test(), &NoProgress).unwrap();
    assert_eq!(r.spilled_bytes, 0, "five ids fit in memory");
}

#[test]
fn a_duplicate_string_id_is_shown_quoted_and_cut() {
    let t = tempfile::tempdir().unwrap();
    let ds = dataset(t.path(), &Ids::Str(&[b"b", b"", b"cd", b"b", b"cd"]));
    let e = corrupt(verify(&ds, &VerifyOptions::test(), &NoProgress));
    // "b" and "cd" both repeat; which hash is smaller decides, the same in every run
    let (i, j, id) = if hash_bytes(b"b") < hash_bytes(b"cd") {
        (0, 3, "\"b\"")
    } else {
        (2, 4, "\"cd\"")
    };
    assert_eq!(
        e,
        format!(
            "{}: nodes {i} and {j} both have the original id {id}; {}",
            ids_file(&ds),
            advice()
        )
    );
    // an empty id twice; a long id with a newline twice (escaped, cut after 64 characters)
    let ds = dataset(t.path(), &Ids::Str(&[b"x", b"", b"y", b""]));
    let e = corrupt(verify(&ds, &VerifyOptions::test(), &NoProgress));
    assert!(
        e.contains(": nodes 1 and 3 both have the original id \"\"; each"),
        "{e}"
    );
    let long = format!("a\n{}", "é".repeat(100));
    let ds = dataset(
        t.path(),
        &Ids::Str(&[b"x", long.as_bytes(), long.as_bytes()]),
    );
    let e = corrupt(verify(&ds, &VerifyOptions::test(), &NoProgress));
    let shown = format!(
        "\"a\\n{}\"... (202 bytes)",
        "é".repeat(crate::EXCERPT_CHARS - 2)
    );
    assert!(
        e.contains(&format!(
            ": nodes 1 and 2 both have the original id {shown}; each"
        )),
        "{e}"
    );
}

/// A hash that collides all the time: strings of the same length.
fn by_length(b: &[u8]) -> u64 {
    b.len() as u64
}

#[test]
fn colliding_hashes_of_different_strings_are_not_duplicates() {
    let t = tempfile::tempdir().unwrap();
    let ds = dataset(t.path(), &Ids::Str(&[b"ab", b"cd", b"x", b"ef", b"", b"y"]));
    for sizes in [ROOMY, TINY] {
        check(&ds, sizes, by_length, t.path()).unwrap();
        check(&ds, sizes, |_| 0, t.path()).unwrap();
    }
    // within a run of equal hashes, the repeat is found past a different string
    let ds = dataset(
        t.path(),
        &Ids::Str(&[b"ab", b"cd", b"x", b"ef", b"cd", b"ab"]),
    );
    for sizes in [ROOMY, TINY] {
        for hash in [by_length as HashFn, |_| 0] {
            let e = corrupt(check(&ds, sizes, hash, t.path()));
            assert!(
                e.contains(": nodes 1 and 4 both have the original id \"cd\"; each"),
                "{e}"
            );
        }
    }
}

/// Users and items, each with its own ids; `user:buys:item` edges 0->0, 1->1.
fn hetero(dir: &Path, users: &Ids<'_>, items: &Ids<'_>) -> PathBuf {
    let out = dir.join("het");
    let spec = buys_spec(
        dir,
        out.clone(),
        vec![
            node("user", users.len() as u64, Some(users.input(dir, "u"))),
            node("item", items.len() as u64, Some(items.input(dir, "i"))),
            node("shop", 2, None),
        ],
    );
    without_unique_check(|| build(&spec, &NoProgress)).unwrap();
    out
}

#[test]
fn heterogeneous_datasets_are_checked_per_type() {
    let t = tempfile::tempdir().unwrap();
    // the same ids in two types are two different nodes: fine
    let het = hetero(t.path(), &Ids::I64(&[1, 2, 3]), &Ids::Str(&[b"1", b"2"]));
    verify(&het, &VerifyOptions::test(), &NoProgress).unwrap();
    let het = hetero(t.path(), &Ids::U64(&[1, 2, 3]), &Ids::U64(&[3, 2]));
    verify(&het, &VerifyOptions::test(), &NoProgress).unwrap();
    // a repeat within one type is named with the type and its file
    let het = hetero(t.path(), &Ids::U64(&[1, 2, 3]), &Ids::Str(&[b"p", b"p"]));
    let file = |t: &str| {
        let m = crate::hetero::HeteroManifest::read(&het).unwrap();
        het.join(&m.files[&format!("node.{t}.node_ids")].path)
            .display()
            .to_string()
    };
    let e = corrupt(verify(&het, &VerifyOptions::test(), &NoProgress));
    assert_eq!(
        e,
        format!(
            "{}: node/item: nodes 0 and 1 both have the original id \"p\"; {}",
            file("item"),
            advice()
        )
    );
    let het = hetero(t.path(), &Ids::I64(&[4, 9, 4]), &Ids::Str(&[b"p", b"q"]));
    let e = corrupt(verify(&het, &VerifyOptions::test(), &NoProgress));
    assert_eq!(
        e,
        format!(
            "{}: node/user: nodes 0 and 2 both have the original id 4; {}",
            file("user"),
            advice()
        )
    );
}

/// Entries of `dir` (the temporary directory of the runs must be gone).
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn runs_are_removed_after_success_and_after_an_error() {
    let t = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let ids: Vec<u64> = (0..3000).map(|i| i * 7919 % 3001).collect();
    let ds = dataset(t.path(), &Ids::U64(&ids));
    // Runs of 1000 ids take 16000 bytes, room for 3 page buffers: a merge reads 2 runs.
    let mid = Sizes {
        run_records: 1000,
        io_bytes: 4096,
    };
    assert_eq!(mid.fan_in(), 2);
    let r = check(&ds, mid, hash_bytes, spill.path()).unwrap();
    // 3 runs of 16000 bytes (4 pages each); the first two merged into one of 32000 (8 pages),
    // then merged with the third for the comparison
    assert_eq!(r.spilled_bytes, 3 * 16384 + 32768);
    assert_eq!(entries(spill.path()), Vec::<String>::new());
    let mut dup = ids.clone();
    dup[2999] = dup[17];
    let ds = dataset(t.path(), &Ids::U64(&dup));
    let e = corrupt(check(&ds, mid, hash_bytes, spill.path()));
    assert!(
        e.contains(&format!(
            ": nodes 17 and 2999 both have the original id {}; each",
            ids[17]
        )),
        "{e}"
    );
    assert_eq!(entries(spill.path()), Vec::<String>::new());
    // a directory that cannot be written is an error naming it, and leaves nothing
    let gone = spill.path().join("gone");
    match check(&ds, mid, hash_bytes, &gone) {
        Err(Error::Io { path, .. }) => assert!(path.starts_with(&gone), "{path:?}"),
        other => panic!("{other:?}"),
    }
    let opts = VerifyOptions {
        memory: 1 << 30,
        spill_dir: Some(gone.clone()),
    };
    match verify(&ds, &opts, &NoProgress) {
        Err(Error::Input(m)) => assert_eq!(
            m,
            format!(
                "{}: the directory for the temporary files (--spill-dir) does not exist; create it first",
                gone.display()
            )
        ),
        other => panic!("{other:?}"),
    }
    let opts = VerifyOptions {
        memory: super::super::MIN_MEMORY - 1,
        spill_dir: None,
    };
    match verify(&ds, &opts, &NoProgress) {
        Err(Error::Input(m)) => assert!(
            m.contains("is too small; verify needs at least 112M"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(entries(spill.path()), Vec::<String>::new());
}

#[test]
fn the_budget_decides_runs_and_merge_width() {
    let s = Sizes::for_budget(16 << 20);
    assert_eq!(
        (s.run_records, s.io_bytes, s.fan_in()),
        (1 << 20, 256 << 10, 63)
    );
    let s = Sizes::for_budget(928 << 20);
    assert_eq!(
        (s.run_records, s.io_bytes, s.fan_in()),
        (58 << 20, 4 << 20, 231)
    );
    let s = Sizes::for_budget(1 << 20);
    assert_eq!(
        (s.run_records, s.io_bytes, s.fan_in()),
        (1 << 16, 16 << 10, 63)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Distinct random ids pass whatever the buffers; one repeat is found at its two nodes,
    /// the same as with the ids in memory.
    #[test]
    fn random_ids_with_small_buffers(
        seed in any::<u64>(),
        n in 2usize..2500,
        run_records in 2usize..2000,
        pages in 1usize..3,
        strings in any::<bool>(),
        pick in any::<(u64, u64)>(),
    ) {
        let t = tempfile::tempdir().unwrap();
        let mut rng = crate::rng::stream(seed, 0, 0);
        let mut ids: Vec<u64> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while ids.len() < n {
            // a small range for strings, so that by_length's buckets are crowded
            let x = if strings {
                crate::rng::below(&mut rng, 4 * n as u64)
            } else {
                rand_xoshiro::rand_core::Rng::next_u64(&mut rng)
            };
            if seen.insert(x) {
                ids.push(x);
            }
        }
        let sizes = Sizes { run_records, io_bytes: pages * 4096 };
        let text: Vec<Vec<u8>> = ids.iter().map(|x| x.to_string().into_bytes()).collect();
        let refs: Vec<&[u8]> = text.iter().map(Vec::as_slice).collect();
        let make = |ids: &[u64], refs: &[&[u8]]| if strings {
            dataset(t.path(), &Ids::Str(refs))
        } else {
            dataset(t.path(), &Ids::U64(ids))
        };
        let hash = if strings { by_length as HashFn } else { hash_bytes };
        let spill = tempfile::tempdir().unwrap();
        let ds = make(&ids, &refs);
        let r = check(&ds, sizes, hash, spill.path()).unwrap();
        prop_assert_eq!(r.spilled_bytes > 0, n > run_records);
        let (i, j) = ((pick.0 % n as u64) as usize, (pick.1 % n as u64) as usize);
        prop_assume!(i != j);
        let (i, j) = (i.min(j), i.max(j));
        let mut refs = refs;
        ids[j] = ids[i];
        refs[j] = refs[i];
        let ds = make(&ids, &refs);
        let e = corrupt(check(&ds, sizes, hash, spill.path()));
        let id = if strings { format!("\"{}\"", ids[i]) } else { ids[i].to_string() };
        let want = format!(": nodes {i} and {j} both have the original id {id}; each");
        prop_assert!(e.contains(&want), "{} lacks {}", e, want);
        prop_assert_eq!(corrupt(check(&ds, ROOMY, hash, spill.path())), e);
        prop_assert_eq!(entries(spill.path()), Vec::<String>::new());
    }
}

/// Interrupts (as Ctrl-C does) at the first progress of the id check, once runs are on disk;
/// keeps the stage and what the spill directory held then.
struct CtrlC {
    spill: PathBuf,
    seen: std::sync::Mutex<(String, Vec<String>)>,
}

impl crate::Progress for CtrlC {
    fn stage(&self, name: &str, _: Option<u64>, _: &str) {
        self.seen.lock().unwrap().0 = name.into();
    }
    fn advance(&self, _: u64) -> Result<()> {
        let mut seen = self.seen.lock().unwrap();
        if !seen.0.contains("original ids") {
            return Ok(());
        }
        seen.1 = entries(&self.spill);
        Err(Error::Interrupted)
    }
}

#[test]
fn an_interrupt_leaves_no_runs_behind() {
    let t = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let ids: Vec<i64> = (0..100).rev().collect();
    let ds = dataset(t.path(), &Ids::I64(&ids));
    let how = IdCheck {
        sizes: TINY,
        spill_dir: spill.path(),
        hash: hash_bytes,
    };
    let ctrl_c = CtrlC {
        spill: spill.path().to_path_buf(),
        seen: Default::default(),
    };
    assert!(matches!(
        verify_with(&ds, &how, &ctrl_c),
        Err(Error::Interrupted)
    ));
    let (stage, during) = ctrl_c.seen.into_inner().unwrap();
    assert_eq!(stage, "verify original ids unique");
    // interrupted with 49 runs written (the 50th was still in memory) in its temporary directory
    assert_eq!(during.len(), 1, "{during:?}");
    assert!(
        during[0].starts_with(".ringgnn-verify.ringgnn-tmp-"),
        "{during:?}"
    );
    assert_eq!(entries(spill.path()), Vec::<String>::new());
}
