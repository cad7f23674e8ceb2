use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::progress::NoProgress;
use crate::writer::Staging;
use crate::Error;

/// A dataset at `out` whose manifest lists `files` (each written with `content`), built and
/// committed through [`Staging`] as every build is.
fn build(out: &Path, overwrite: bool, files: &[&str], content: &str) -> crate::Result<()> {
    let staging = Staging::create(out, overwrite, &NoProgress)?;
    for f in files {
        fs::write(staging.dir().join(f), content).unwrap();
    }
    let entries: Vec<String> = files
        .iter()
        .map(|f| format!("\"{f}\": {{\"path\": \"{f}\", \"bytes\": 0, \"payload_bytes\": 0, \"crc32c\": \"00000000\"}}"))
        .collect();
    let json = format!(
        "{{\"format\": \"ringgnn-dataset\", \"version\": 2, \"files\": {{{}}}}}",
        entries.join(", ")
    );
    staging.commit_json(&json).map(drop)
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn overwrite_replaces_what_the_dataset_owns_and_keeps_the_rest() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("ds");
    build(&out, false, &["indptr.bin", "labels.bin"], "old").unwrap();
    fs::write(out.join("notes.txt"), "mine").unwrap();
    fs::create_dir_all(out.join("sub/deeper")).unwrap();
    fs::write(out.join("sub/deeper/raw.csv"), "1,2").unwrap();
    fs::create_dir(out.join("locked")).unwrap();
    fs::write(out.join("locked/a"), "a").unwrap();
    fs::set_permissions(out.join("locked"), fs::Permissions::from_mode(0o555)).unwrap();
    std::os::unix::fs::symlink("../elsewhere", out.join("link")).unwrap();
    let inode = fs::metadata(out.join("notes.txt")).unwrap().ino();
    // A temporary of a killed writer inside the folder is not the user's: it goes.
    fs::write(out.join(".x.npy.ringgnn-tmp-999999999-1"), "stale").unwrap();

    build(&out, true, &["indptr.bin", "indices.bin"], "new").unwrap();

    assert_eq!(
        names(&out),
        [
            "indices.bin",
            "indptr.bin",
            "link",
            "locked",
            "manifest.json",
            "notes.txt",
            "sub"
        ]
    );
    assert_eq!(fs::read_to_string(out.join("indptr.bin")).unwrap(), "new");
    assert_eq!(fs::read_to_string(out.join("notes.txt")).unwrap(), "mine");
    assert_eq!(
        fs::metadata(out.join("notes.txt")).unwrap().ino(),
        inode,
        "the same file, not a copy"
    );
    assert_eq!(
        fs::read_to_string(out.join("sub/deeper/raw.csv")).unwrap(),
        "1,2"
    );
    assert_eq!(fs::read_to_string(out.join("locked/a")).unwrap(), "a");
    let mode = fs::metadata(out.join("locked"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o555);
    assert_eq!(
        fs::read_link(out.join("link")).unwrap(),
        Path::new("../elsewhere")
    );
    assert_eq!(names(t.path()), ["ds"], "no temporaries left");
    fs::set_permissions(out.join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_folder_that_is_not_a_dataset_is_refused_untouched_and_an_empty_one_replaced() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("precious");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("thesis.tex"), "years").unwrap();
    fs::write(
        out.join("manifest.json"),
        "{\"format\": \"something else\"}",
    )
    .unwrap();
    let e = build(&out, true, &["indptr.bin"], "new").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: refusing to overwrite, it is not a ringgnn dataset or an empty directory; choose another output path",
            out.display()
        )
    );
    assert_eq!(names(&out), ["manifest.json", "thesis.tex"]);
    let e = build(&out, false, &["indptr.bin"], "new").unwrap_err();
    assert!(matches!(e, Error::Exists(_)), "{e}");

    let file = t.path().join("file");
    fs::write(&file, "x").unwrap();
    assert!(build(&file, true, &[], "")
        .unwrap_err()
        .to_string()
        .contains("refusing to overwrite"));

    let dangling = t.path().join("dangling");
    std::os::unix::fs::symlink("nowhere", &dangling).unwrap();
    assert!(matches!(
        build(&dangling, false, &[], "").unwrap_err(),
        Error::Exists(_)
    ));
    assert!(build(&dangling, true, &[], "")
        .unwrap_err()
        .to_string()
        .contains("refusing to overwrite"));
    assert_eq!(fs::read_link(&dangling).unwrap(), Path::new("nowhere"));

    let empty = t.path().join("empty");
    fs::create_dir(&empty).unwrap();
    build(&empty, true, &["indptr.bin"], "new").unwrap();
    assert_eq!(names(&empty), ["indptr.bin", "manifest.json"]);
    assert_eq!(names(t.path()), ["dangling", "empty", "file", "precious"]);
}

#[test]
fn a_foreign_file_named_like_a_new_dataset_file_is_refused_before_anything_is_replaced() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("ds");
    build(&out, false, &["indptr.bin"], "old").unwrap();
    fs::write(out.join("labels.bin"), "mine").unwrap();
    let e = build(&out, true, &["indptr.bin", "labels.bin"], "new").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: not part of the dataset it replaces, so --overwrite keeps it, but the new dataset has a file of \
             that name; move it out of {} and run again",
            out.join("labels.bin").display(),
            out.display()
        )
    );
    assert_eq!(fs::read_to_string(out.join("indptr.bin")).unwrap(), "old");
    assert_eq!(fs::read_to_string(out.join("labels.bin")).unwrap(), "mine");
    assert_eq!(names(t.path()), ["ds"], "the staging directory is gone");
}

#[test]
fn a_damaged_manifest_is_refused_before_any_work() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("ds");
    fs::create_dir(&out).unwrap();
    fs::write(
        out.join("manifest.json"),
        "{\"format\": \"ringgnn-dataset\", \"files\": {",
    )
    .unwrap();
    fs::write(out.join("notes.txt"), "mine").unwrap();
    let e = Staging::create(&out, true, &NoProgress).err().unwrap();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "{}: a damaged ringgnn manifest (",
            out.join("manifest.json").display()
        )),
        "{text}"
    );
    assert!(
        text.ends_with("remove the dataset yourself or choose another output path"),
        "{text}"
    );
    assert_eq!(names(&out), ["manifest.json", "notes.txt"]);
    assert_eq!(names(t.path()), ["ds"]);
}
