//! The builds' check that original ids are unique: exact messages for integer and string
//! repeats through `convert` and the heterogeneous build, nothing left behind (neither the output
//! nor the build's temporaries, the sort's runs included), types checked each on its own.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use super::NodeIdsInput;
use crate::convert::{convert, ConvertOptions, GraphOptions};
use crate::hetero::build;
use crate::hetero::tests::{buys_spec, node_with_ids};
use crate::manifest::NodeIdDtype;
use crate::{Error, NoProgress};

thread_local! {
    /// Set by `verify`'s tests, which build the datasets with repeated ids that builds refuse.
    pub(crate) static SKIP_UNIQUE: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` with the builds' check of unique ids off (on this thread only).
pub(crate) fn without_unique_check<T>(f: impl FnOnce() -> T) -> T {
    SKIP_UNIQUE.with(|s| s.set(true));
    let r = f();
    SKIP_UNIQUE.with(|s| s.set(false));
    r
}

fn words(v: impl Iterator<Item = u64>) -> Vec<u8> {
    v.flat_map(u64::to_le_bytes).collect()
}

fn int_ids(dir: &Path, name: &str, ids: &[i64]) -> NodeIdsInput {
    let path = dir.join(format!("{name}.ids"));
    std::fs::write(&path, words(ids.iter().map(|&x| x as u64))).unwrap();
    NodeIdsInput {
        dtype: NodeIdDtype::I64,
        ids: path,
        bytes: None,
    }
}

fn str_ids(dir: &Path, name: &str, ids: &[&str]) -> NodeIdsInput {
    let mut offsets = vec![0u64];
    for s in ids {
        offsets.push(offsets.last().unwrap() + s.len() as u64);
    }
    let (path, bytes) = (
        dir.join(format!("{name}.ids")),
        dir.join(format!("{name}.bytes")),
    );
    std::fs::write(&path, words(offsets.into_iter())).unwrap();
    std::fs::write(&bytes, ids.concat()).unwrap();
    NodeIdsInput {
        dtype: NodeIdDtype::Str,
        ids: path,
        bytes: Some(bytes),
    }
}

/// `convert` of a path through `n` nodes with these ids into `dir/out/ds`, at `memory`.
fn convert_path(dir: &Path, n: u64, ids: NodeIdsInput, memory: u64) -> crate::Result<PathBuf> {
    let edges = dir.join("e.tsv");
    let text: String = (1..n).map(|v| format!("{}\t{v}\n", v - 1)).collect();
    std::fs::write(&edges, text).unwrap();
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let graph = GraphOptions {
        memory,
        ..Default::default()
    };
    let mut opts = ConvertOptions::new(edges, out.join("ds"), graph);
    opts.node_ids = Some(ids);
    convert(&opts, &NoProgress)?;
    Ok(out.join("ds"))
}

fn input_err<T: std::fmt::Debug>(r: crate::Result<T>) -> String {
    match r {
        Err(Error::Input(m)) => m,
        other => panic!("expected Error::Input, got {other:?}"),
    }
}

fn advice() -> &'static str {
    "each original id must name one node, or lookups by original id (predict --nodes, an \
     importer's joins) are ambiguous: remove the repeat from the input (or give one of the two \
     nodes another id) and build again"
}

/// What `dir` holds (the build's temporaries would show here).
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn convert_refuses_a_repeated_integer_id_and_leaves_nothing() {
    let t = tempfile::tempdir().unwrap();
    // 7 and -2 both repeat: the smallest id is named, with its two nodes
    let ids = int_ids(t.path(), "n", &[7, -2, 5_000_000_000, 7, -2]);
    let e = input_err(convert_path(t.path(), 5, ids.clone(), 1 << 30));
    assert_eq!(
        e,
        format!(
            "{}: nodes 1 and 4 (entries 1 and 4 of the file, counted from 0) both have the \
             original id -2; {}",
            ids.ids.display(),
            advice()
        )
    );
    assert_eq!(entries(&t.path().join("out")), Vec::<String>::new());
    // distinct ids build, and verify passes
    let ids = int_ids(t.path(), "n", &[7, -2, 5_000_000_000, 8, i64::MIN]);
    let ds = convert_path(t.path(), 5, ids, 1 << 30).unwrap();
    crate::verify::verify(&ds, &crate::verify::VerifyOptions::test(), &NoProgress).unwrap();
    std::fs::remove_dir_all(&ds).unwrap();
    // u64: the same bits as i64 -1 twice
    let path = t.path().join("u.ids");
    std::fs::write(&path, words([u64::MAX, 3, u64::MAX].into_iter())).unwrap();
    let ids = NodeIdsInput {
        dtype: NodeIdDtype::U64,
        ids: path,
        bytes: None,
    };
    let e = input_err(convert_path(t.path(), 3, ids, 1 << 30));
    assert!(
        e.contains(": nodes 0 and 2 (entries 0 and 2 of the file, counted from 0) both have the original id 18446744073709551615; each"),
        "{e}"
    );
}

#[test]
fn convert_refuses_a_repeated_string_id_naming_both_files() {
    let t = tempfile::tempdir().unwrap();
    let ids = str_ids(t.path(), "n", &["a", "tab\there", "", "tab\there"]);
    let e = input_err(convert_path(t.path(), 4, ids.clone(), 1 << 30));
    assert_eq!(
        e,
        format!(
            "{} (offsets into {}): nodes 1 and 3 (entries 1 and 3 of the file, counted from 0) \
             both have the original id \"tab\\there\"; {}",
            ids.ids.display(),
            ids.bytes.as_ref().unwrap().display(),
            advice()
        )
    );
    assert_eq!(entries(&t.path().join("out")), Vec::<String>::new());
    // offsets that decrease, or pass the bytes, are refused before they size a read
    let path = t.path().join("bad.ids");
    std::fs::write(&path, words([0u64, 2, 1, 3].into_iter())).unwrap();
    let bad = NodeIdsInput {
        ids: path.clone(),
        ..ids.clone()
    };
    let e = input_err(convert_path(t.path(), 3, bad.clone(), 1 << 30));
    assert_eq!(
        e,
        format!(
            "{}: offset 2 is 1, after offset 1 (2), but offsets must not decrease nor pass the \
             17 bytes of {}",
            path.display(),
            ids.bytes.as_ref().unwrap().display()
        )
    );
    std::fs::write(&path, words([0u64, 2, 1 << 60, 3].into_iter())).unwrap();
    let e = input_err(convert_path(t.path(), 3, bad, 1 << 30));
    assert!(
        e.contains(": offset 2 is 1152921504606846976, after offset 1 (2)"),
        "{e}"
    );
    assert_eq!(entries(&t.path().join("out")), Vec::<String>::new());
}

/// 1.1M ids take 17.6 MB to sort, more than --memory 128M leaves beyond the builder's 112 MiB.
const N_BIG: usize = 1_100_000;

#[test]
fn ids_beyond_the_budget_are_sorted_in_the_spill_directory_and_removed() {
    let t = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let mut ids: Vec<i64> = (0..N_BIG as i64).map(|i| i * 7919 % 1_100_009).collect();
    let input = int_ids(t.path(), "n", &ids);
    // runs of 1Mi ids (16 MiB) and the other 51424 (823 KB, padded to a page), merged at once
    let spilled = super::check_unique(&input, 128 << 20, spill.path(), &NoProgress).unwrap();
    assert_eq!(
        spilled,
        (16 << 20) + (N_BIG as u64 - (1 << 20)) * 16 / 4096 * 4096 + 4096
    );
    assert_eq!(entries(spill.path()), Vec::<String>::new());
    // a repeat is found on disk the same, and the build leaves nothing, its runs included
    ids[N_BIG - 1] = ids[17];
    let input = int_ids(t.path(), "n", &ids);
    let e = input_err(super::check_unique(
        &input,
        128 << 20,
        spill.path(),
        &NoProgress,
    ));
    assert!(
        e.starts_with(&format!(
            "{}: nodes 17 and {} (entries 17 and {} of the file, counted from 0) both have the original id {}; ",
            input.ids.display(),
            N_BIG - 1,
            N_BIG - 1,
            ids[17]
        )),
        "{e}"
    );
    assert_eq!(entries(spill.path()), Vec::<String>::new());
    let e = input_err(convert_path(t.path(), 3, input, 128 << 20));
    assert!(e.contains(&format!("nodes 17 and {}", N_BIG - 1)), "{e}");
    assert_eq!(entries(&t.path().join("out")), Vec::<String>::new());
    // a budget the builder refuses is refused before the ids are sorted
    let e = input_err(super::check_unique(
        &int_ids(t.path(), "n", &[1, 1]),
        (128 << 20) - 1,
        spill.path(),
        &NoProgress,
    ));
    assert_eq!(
        e,
        "--memory 134217727 bytes is too small; the builder needs at least 128M"
    );
}

/// Users and items with their ids, `user:buys:item` edges 0->0, 1->1, built at `dir/out/het`.
fn hetero(dir: &Path, users: NodeIdsInput, items: NodeIdsInput) -> crate::Result<PathBuf> {
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let spec = buys_spec(
        dir,
        out.join("het"),
        vec![
            node_with_ids("user", 3, Some(users)),
            node_with_ids("item", 2, Some(items)),
        ],
    );
    build(&spec, &NoProgress)?;
    Ok(out.join("het"))
}

#[test]
fn a_heterogeneous_build_refuses_a_repeat_within_a_type_not_across() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path();
    // the same ids in two types are different nodes
    let het = hetero(p, int_ids(p, "u", &[1, 2, 3]), int_ids(p, "i", &[2, 1])).unwrap();
    crate::verify::verify(&het, &crate::verify::VerifyOptions::test(), &NoProgress).unwrap();
    std::fs::remove_dir_all(&het).unwrap();
    let items = str_ids(p, "i", &["é", "é"]);
    let e = input_err(hetero(p, int_ids(p, "u", &[1, 2, 3]), items.clone()));
    assert_eq!(
        e,
        format!(
            "node type 'item': {} (offsets into {}): nodes 0 and 1 (entries 0 and 1 of the file, \
             counted from 0) both have the original id \"é\"; {}",
            items.ids.display(),
            items.bytes.as_ref().unwrap().display(),
            advice()
        )
    );
    assert_eq!(entries(&p.join("out")), Vec::<String>::new());
    let users = int_ids(p, "u", &[4, 9, 4]);
    let e = input_err(hetero(p, users.clone(), str_ids(p, "i", &["4", "9"])));
    assert_eq!(
        e,
        format!(
            "node type 'user': {}: nodes 0 and 2 (entries 0 and 2 of the file, counted from 0) \
             both have the original id 4; {}",
            users.ids.display(),
            advice()
        )
    );
    assert_eq!(entries(&p.join("out")), Vec::<String>::new());
}

/// Ctrl-C at the second tick of the id check (after its last push, so the first run is on
/// disk), seeing what the output's directory and the build's staging directory hold then.
struct CtrlC {
    out: PathBuf,
    seen: std::sync::Mutex<(String, u32, Vec<String>)>,
}

impl crate::Progress for CtrlC {
    fn stage(&self, name: &str, _: Option<u64>, _: &str) {
        self.seen.lock().unwrap().0 = name.into();
    }
    fn advance(&self, _: u64) -> crate::Result<()> {
        let mut seen = self.seen.lock().unwrap();
        if seen.0 != "original ids unique" {
            return Ok(());
        }
        seen.1 += 1;
        if seen.1 < 2 {
            return Ok(());
        }
        for staging in entries(&self.out) {
            let inner = entries(&self.out.join(&staging));
            seen.2.push(format!("{staging}/{}", inner.join(",")));
        }
        Err(Error::Interrupted)
    }
}

#[test]
fn an_interrupt_during_the_check_leaves_nothing() {
    let t = tempfile::tempdir().unwrap();
    let ids: Vec<i64> = (0..N_BIG as i64).rev().collect();
    let input = int_ids(t.path(), "n", &ids);
    let edges = t.path().join("e.tsv");
    std::fs::write(&edges, "0\t1\n").unwrap();
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let graph = GraphOptions {
        memory: 128 << 20,
        ..Default::default()
    };
    let mut opts = ConvertOptions::new(edges, out.join("ds"), graph);
    opts.node_ids = Some(input);
    let ctrl_c = CtrlC {
        out: out.clone(),
        seen: Default::default(),
    };
    assert!(matches!(convert(&opts, &ctrl_c), Err(Error::Interrupted)));
    // then: the build's staging directory beside the output, the sort's runs inside it
    let (_, ticks, during) = ctrl_c.seen.into_inner().unwrap();
    assert_eq!((ticks, during.len()), (2, 1), "{during:?}");
    assert!(
        during[0].starts_with(".ds.") && during[0].contains("/.ringgnn-verify.ringgnn-tmp-"),
        "{during:?}"
    );
    // after: nothing
    assert_eq!(entries(&out), Vec::<String>::new());
}
