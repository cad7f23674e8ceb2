//! Replacing an existing output (`--overwrite`): which folders may be replaced, and what of them
//! is kept.
//!
//! Only an empty directory or a ringgnn dataset (a directory whose `manifest.json` says
//! `"format": "ringgnn-dataset"`) is ever replaced; anything else is refused. A dataset owns
//! `manifest.json` and the files its manifest lists; every other entry of its folder (the user's
//! `notes.txt`, a `sub/` folder, a symlink) is *foreign* and is kept: [`carry`] hard-links it into
//! the staging directory before the swap (a folder is recreated there, with its permissions, and
//! its contents linked, recursively). So at every moment each foreign file is reachable under
//! its own name in the folder named `out`: before the swap in the old dataset, after it in the
//! new one; a run killed at any point loses none of them (the staging directory or the old
//! dataset, which a later run reclaims, holds only extra links). ringgnn temporaries inside the
//! folder are not carried: they go with the old dataset. A foreign entry that cannot be linked
//! (another file system mounted inside the folder, one without hard links) or whose name the new
//! dataset uses is refused, naming it, before anything is replaced. (What appears in the folder
//! between [`carry`] and the swap, a few system calls, is not kept.)

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::manifest::{FORMAT_NAME, MANIFEST_FILE};
use crate::temp::parse_name;
use crate::{input_err, Error, IoContext, Result};

/// Check that `out` may be written: it does not exist, or `overwrite` is given and it is an
/// empty directory or a ringgnn dataset. Returns the dataset's foreign entries (names inside
/// `out`), which replacing it must keep (see [`carry`]).
pub fn check(out: &Path, overwrite: bool) -> Result<Vec<OsString>> {
    // A symlink is there even when what it names is not: a dangling one is refused below.
    if fs::symlink_metadata(out).is_err() {
        return Ok(Vec::new());
    }
    if !overwrite {
        return Err(Error::Exists(out.to_path_buf()));
    }
    if !out.is_dir() {
        return not_a_dataset(out);
    }
    let names = fs::read_dir(out)
        .and_then(|entries| {
            entries
                .map(|e| e.map(|e| e.file_name()))
                .collect::<io::Result<Vec<OsString>>>()
        })
        .at(out)?;
    if names.is_empty() {
        return Ok(names);
    }
    let Some(owned) = owned(out)? else {
        return not_a_dataset(out);
    };
    Ok(names
        .into_iter()
        .filter(|n| !owned.contains(n) && n.to_str().and_then(parse_name).is_none())
        .collect())
}

fn not_a_dataset<T>(out: &Path) -> Result<T> {
    input_err!(
        "{}: refusing to overwrite, it is not a ringgnn dataset or an empty directory; choose another output path",
        out.display()
    )
}

/// The names the dataset at `out` owns (`manifest.json` and its manifest's files), or `None`
/// when `out` holds no ringgnn manifest.
fn owned(out: &Path) -> Result<Option<HashSet<OsString>>> {
    let path = out.join(MANIFEST_FILE);
    let Ok(text) = fs::read_to_string(&path) else {
        return Ok(None);
    };
    if !text.contains(FORMAT_NAME) {
        return Ok(None);
    }
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Error::Input(format!(
            "{}: a damaged ringgnn manifest ({e}), so which files of {} are the dataset's is unknown; \
             remove the dataset yourself or choose another output path",
            path.display(),
            out.display()
        ))
    })?;
    if json.get("format").and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
        return Ok(None);
    }
    let mut names = HashSet::from([OsString::from(MANIFEST_FILE)]);
    if let Some(files) = json.get("files").and_then(|f| f.as_object()) {
        names.extend(
            files
                .values()
                .filter_map(|e| e.get("path").and_then(|p| p.as_str()))
                .map(OsString::from),
        );
    }
    Ok(Some(names))
}

/// Hard-link the `foreign` entries of `out` (from [`check`]) into `staging`, the new dataset's
/// directory before the swap; then sync it, so the links are on disk before the old dataset is
/// removed.
pub fn carry(out: &Path, staging: &Path, foreign: &[OsString]) -> Result<()> {
    for name in foreign {
        let (from, to) = (out.join(name), staging.join(name));
        if fs::symlink_metadata(&to).is_ok() {
            return input_err!(
                "{}: not part of the dataset it replaces, so --overwrite keeps it, but the new dataset has a \
                 file of that name; move it out of {} and run again",
                from.display(),
                out.display()
            );
        }
        link_tree(&from, &to).map_err(|(path, e)| {
            Error::Input(format!(
                "{}: not part of the dataset it replaces, so --overwrite keeps it, but it cannot be linked \
                 into the new dataset ({e}); move it out of {} and run again",
                path.display(),
                out.display()
            ))
        })?;
    }
    if !foreign.is_empty() {
        fs::File::open(staging)
            .and_then(|d| d.sync_all())
            .at(staging)?;
    }
    Ok(())
}

/// `from` hard-linked as `to`; a directory recreated with its permissions, its entries linked.
/// On failure, the path that failed.
fn link_tree(from: &Path, to: &Path) -> Result<(), (PathBuf, io::Error)> {
    fn failed(p: &Path) -> impl FnOnce(io::Error) -> (PathBuf, io::Error) + '_ {
        move |e| (p.to_path_buf(), e)
    }
    let meta = fs::symlink_metadata(from).map_err(failed(from))?;
    if !meta.is_dir() {
        // Linux's linkat without AT_SYMLINK_FOLLOW: a symlink is linked itself, not its target.
        return fs::hard_link(from, to).map_err(failed(from));
    }
    fs::create_dir(to).map_err(failed(to))?;
    for entry in fs::read_dir(from).map_err(failed(from))? {
        let entry = entry.map_err(failed(from))?;
        link_tree(&entry.path(), &to.join(entry.file_name()))?;
    }
    // Last: a read-only folder would refuse the links made into it.
    fs::set_permissions(to, meta.permissions()).map_err(failed(to))
}

#[cfg(test)]
mod tests;
