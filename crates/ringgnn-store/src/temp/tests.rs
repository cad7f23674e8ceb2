use std::fs;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::*;
use crate::progress::Progress;

/// A pid that no process has: above the kernel's largest (`pid_max` is at most 2^22).
const DEAD_PID: u32 = 999_999_999;

/// Make `path` look older than the grace period.
fn age(path: &Path) {
    let old = SystemTime::now() - GRACE - Duration::from_secs(5);
    File::open(path).unwrap().set_modified(old).unwrap();
}

/// A temporary left by a dead process: a directory holding `bytes` bytes.
fn stale_dir(parent: &Path, label: &str, bytes: usize) -> PathBuf {
    let p = parent.join(format!(".{label}{MARKER}{DEAD_PID}-abc123"));
    fs::create_dir(&p).unwrap();
    fs::write(p.join("indices.bin"), vec![7u8; bytes]).unwrap();
    p
}

#[test]
fn names_are_ours_only_in_the_exact_form() {
    assert_eq!(parse_name(".ds.ringgnn-tmp-123-abc"), Some(123));
    assert_eq!(parse_name(".a.b.ringgnn-tmp-7-0f"), Some(7));
    for other in [
        "ds.ringgnn-tmp-1-a",      // not hidden
        ".ringgnn-tmp-1-a",        // no label
        ".ds.ringgnn-tmp-1-zz",    // nonce not hex
        ".ds.ringgnn-tmp-x-a",     // pid not a number
        ".ds.ringgnn-tmp-1-a.npy", // a suffix
        ".ds.ringgnn-tmp-1",       // no nonce
        ".ds.tmp-123-0000abcd",    // the old staging name
        ".ringgnn-infer-k2j3h",    // tempfile.mkdtemp's
        "data",
    ] {
        assert_eq!(parse_name(other), None, "{other}");
    }
    let t = tempfile::tempdir().unwrap();
    let tmp = Temp::create(t.path(), "out.npy", Kind::File).unwrap();
    let name = tmp.path().file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with(".out.npy.ringgnn-tmp-"), "{name}");
    assert_eq!(parse_name(name), Some(std::process::id()));
}

#[test]
fn an_unlocked_temporary_of_a_dead_writer_is_removed_and_reported() {
    let t = tempfile::tempdir().unwrap();
    let stale = stale_dir(t.path(), "ds", 5000);
    let file = t.path().join(format!(".m.json{MARKER}{DEAD_PID}-1"));
    fs::write(&file, b"{}").unwrap();
    let mut got = reclaim(t.path());
    got.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(
        got,
        vec![
            Reclaimed {
                path: stale.clone(),
                bytes: 5000
            },
            Reclaimed {
                path: file.clone(),
                bytes: 2
            },
        ]
    );
    assert!(!stale.exists() && !file.exists());
    assert_eq!(
        got[0].to_string(),
        format!(
            "removed a stale temporary left by a killed run: {} (4.9 KiB)",
            stale.display()
        )
    );
    assert!(reclaim(t.path()).is_empty());
}

#[test]
fn a_locked_temporary_of_a_live_writer_is_never_removed() {
    let t = tempfile::tempdir().unwrap();
    let dir = Temp::create(t.path(), "ds", Kind::Dir).unwrap();
    let file = Temp::create(t.path(), "last.pt", Kind::File).unwrap();
    fs::write(dir.path().join("x"), b"data").unwrap();
    // Older than the grace period: only the lock protects them now.
    age(dir.path());
    age(file.path());
    assert!(reclaim(t.path()).is_empty());
    assert!(dir.path().join("x").exists() && file.path().exists());
    // The same holds for a temporary locked by someone else with a pid that is dead here (a
    // writer in another pid namespace): the lock decides.
    let foreign = stale_dir(t.path(), "other", 10);
    let holder = File::open(&foreign).unwrap();
    holder.lock().unwrap();
    assert!(reclaim(t.path()).is_empty());
    drop(holder);
    assert_eq!(reclaim(t.path()).len(), 1);
    assert!(dir.path().exists() && file.path().exists());
}

#[test]
fn a_new_temporary_of_a_live_process_is_left_alone_until_the_grace_period_ends() {
    // Created but not yet locked (the window a writer is in for a few system calls).
    let t = tempfile::tempdir().unwrap();
    let p = t
        .path()
        .join(format!(".ds{MARKER}{}-5", std::process::id()));
    fs::create_dir(&p).unwrap();
    assert!(reclaim(t.path()).is_empty());
    assert!(p.exists());
    age(&p);
    assert_eq!(reclaim(t.path()).len(), 1);
    assert!(!p.exists());
}

#[test]
fn names_that_are_not_ours_are_never_touched() {
    let t = tempfile::tempdir().unwrap();
    let others = [
        ".ds.tmp-999999999-0000abcd",
        ".ringgnn-infer-abc",
        "ds.ringgnn-tmp-999999999-a",
        ".ds.ringgnn-tmp-999999999-a.npy",
        "plain",
    ];
    for name in others {
        fs::create_dir(t.path().join(name)).unwrap();
        age(&t.path().join(name));
    }
    // A link with our name form is not followed, and not removed.
    let target = t.path().join("target");
    fs::create_dir(&target).unwrap();
    let link = t.path().join(format!(".l{MARKER}{DEAD_PID}-a"));
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert!(reclaim(t.path()).is_empty());
    for name in others {
        assert!(t.path().join(name).exists(), "{name}");
    }
    assert!(link.exists() && target.exists());
    // A directory that cannot be read reclaims nothing, and says nothing.
    assert!(reclaim(&t.path().join("missing")).is_empty());
}

#[test]
fn drop_removes_and_commit_renames_into_place() {
    let t = tempfile::tempdir().unwrap();
    let gone = Temp::create(t.path(), "a", Kind::Dir).unwrap();
    let p = gone.path().to_path_buf();
    fs::write(p.join("f"), b"x").unwrap();
    drop(gone);
    assert!(!p.exists());

    let out = t.path().join("metrics.json");
    fs::write(&out, b"old").unwrap();
    let tmp = Temp::create(t.path(), "metrics.json", Kind::File).unwrap();
    fs::write(tmp.path(), b"new").unwrap();
    tmp.commit(&out).unwrap();
    assert_eq!(fs::read(&out).unwrap(), b"new");
    assert_eq!(fs::read_dir(t.path()).unwrap().count(), 1);
    // The lock went with the temporary: the committed file can be locked again.
    File::open(&out).unwrap().try_lock().unwrap();
}

#[test]
fn adopt_moves_an_existing_directory_aside_under_a_lock() {
    let t = tempfile::tempdir().unwrap();
    let ds = t.path().join("ds");
    fs::create_dir(&ds).unwrap();
    fs::write(ds.join("f"), b"x").unwrap();
    let old = Temp::adopt(&ds, "ds.old").unwrap();
    assert!(!ds.exists() && old.path().join("f").exists());
    age(old.path());
    assert!(reclaim(t.path()).is_empty(), "locked while adopted");
    let p = old.path().to_path_buf();
    drop(old);
    assert!(!p.exists());
}

#[derive(Default)]
struct Notes(Mutex<Vec<String>>);

impl Progress for Notes {
    fn stage(&self, _: &str, _: Option<u64>, _: &str) {}
    fn advance(&self, _: u64) -> crate::Result<()> {
        Ok(())
    }
    fn note(&self, line: &str) {
        self.0.lock().unwrap().push(line.to_string());
    }
}

#[test]
fn staging_reclaims_beside_its_output_and_says_so() {
    let t = tempfile::tempdir().unwrap();
    let stale = stale_dir(t.path(), "ds", 100);
    let notes = Notes::default();
    let staging = crate::writer::Staging::create(&t.path().join("ds"), false, &notes).unwrap();
    assert!(!stale.exists());
    let lines = notes.0.lock().unwrap().clone();
    assert_eq!(lines.len(), 1);
    assert!(lines[0].contains(&stale.display().to_string()) && lines[0].contains("100 B"));
    // The staging directory is locked: old or not, another run leaves it alone.
    age(staging.dir());
    assert!(reclaim(t.path()).is_empty());
    let dir = staging.dir().to_path_buf();
    drop(staging);
    assert!(!dir.exists());
}

#[test]
fn sizes_are_human() {
    assert_eq!(human_bytes(0), "0 B");
    assert_eq!(human_bytes(1023), "1023 B");
    assert_eq!(human_bytes(1536), "1.5 KiB");
    assert_eq!(human_bytes(1_181_116_006), "1.1 GiB");
}
