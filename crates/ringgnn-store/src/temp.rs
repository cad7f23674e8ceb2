//! Temporaries that a killed run cannot leak: the one protocol for every staging directory and
//! every file written under a temporary name and renamed into place, in Rust and in Python
//! (`ringgnn._core.Temporary`, `python/ringgnn/_files.py`).
//!
//! - **Name.** A temporary lives beside what it becomes, named `.{label}.ringgnn-tmp-{pid}-{nonce}`
//!   ([`MARKER`]): `label` is the final name (or a purpose, `ringgnn-infer`), `pid` the writer's
//!   process id, `nonce` hex digits that make the name unique. Only names of exactly this form are
//!   ever touched by [`reclaim`]; anything else in the directory is not ours.
//! - **Lock.** The writer holds an exclusive `flock` on the temporary (its directory or file,
//!   opened read-only) for as long as it exists: [`Temp`] takes it at creation and drops it
//!   after the temporary was removed or renamed into place. The kernel releases it when the
//!   process dies, however it dies, so a free lock means the writer is gone.
//! - **Reclaim.** Every [`Temp::create`] first calls [`reclaim`] on the directory it writes to:
//!   each temporary there whose lock can be taken without waiting is removed (while holding that
//!   lock, so two reclaimers never race) and reported ([`Reclaimed`]); the front end prints one
//!   line per removal.
//! - **The window between creating and locking.** A temporary exists for a few system calls
//!   before its writer has locked it. A reclaimer that finds one unlocked therefore also asks
//!   whether the writer could still be in that window: when the process in the name is alive
//!   (`/proc/PID` exists) and the temporary is younger than [`GRACE`], it is left alone. The
//!   window is microseconds, so a live writer is always past it within the grace period; a
//!   killed writer's temporary is removed at once (its pid is dead), and one whose pid was reused
//!   by another process a minute later. Where the filesystem refuses `flock`, nothing is locked
//!   and nothing is reclaimed (a free lock cannot be told from no lock).

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{Error, IoContext, Result};

/// What marks a name as a ringgnn temporary: `.{label}` + `MARKER` + `{pid}-{nonce}`.
pub const MARKER: &str = ".ringgnn-tmp-";

/// How long an unlocked temporary of a live process is presumed to be in the window between
/// its creation and its lock (which takes microseconds: a minute covers a stalled machine).
pub const GRACE: Duration = Duration::from_secs(60);

/// The longest label kept in a name (file names are at most 255 bytes).
const MAX_LABEL: usize = 160;

/// A directory or a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
}

/// A stale temporary that [`reclaim`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reclaimed {
    pub path: PathBuf,
    /// Bytes of the files it held (what the disk got back).
    pub bytes: u64,
}

impl fmt::Display for Reclaimed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "removed a stale temporary left by a killed run: {} ({})",
            self.path.display(),
            human_bytes(self.bytes)
        )
    }
}

/// A temporary directory or file, locked by this process while it lives. Dropped, it is
/// removed (unless [`Temp::commit`] renamed it into place, or this is a forked child's copy),
/// and then unlocked.
#[derive(Debug)]
pub struct Temp {
    path: PathBuf,
    kind: Kind,
    /// The open file (or directory) that holds the lock; `None` where `flock` is refused.
    _lock: Option<File>,
    reclaimed: Vec<Reclaimed>,
    done: bool,
    /// The process that made it: a forked child that drops its copy (at its exit) must not
    /// remove its parent's temporary.
    owner: u32,
}

impl Temp {
    /// Reclaim the stale temporaries in `parent`, then make a new, locked temporary there for
    /// `label` (the final name, or what the temporary is for).
    pub fn create(parent: &Path, label: &str, kind: Kind) -> Result<Temp> {
        let reclaimed = reclaim(parent);
        let label = clean_label(label);
        let mut attempt = 0;
        let path = loop {
            let path = parent.join(temp_name(&label));
            let made = match kind {
                Kind::Dir => fs::create_dir(&path),
                Kind::File => OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map(drop),
            };
            match made {
                Ok(()) => break path,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => {
                    attempt += 1
                }
                Err(e) => return Err(Error::io(&path, e)),
            }
        };
        let lock = lock(&path);
        Ok(Temp {
            path,
            kind,
            _lock: lock,
            reclaimed,
            done: false,
            owner: std::process::id(),
        })
    }

    /// Take over `existing` (a directory or file this process is about to replace): lock it and
    /// rename it to a temporary name beside it, so that if the process dies while removing it,
    /// a later run reclaims what is left.
    pub fn adopt(existing: &Path, label: &str) -> Result<Temp> {
        let parent = match existing.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let kind = if fs::symlink_metadata(existing).at(existing)?.is_dir() {
            Kind::Dir
        } else {
            Kind::File
        };
        let lock = lock(existing);
        let path = parent.join(temp_name(&clean_label(label)));
        fs::rename(existing, &path).at(existing)?;
        Ok(Temp {
            path,
            kind,
            _lock: lock,
            reclaimed: Vec::new(),
            done: false,
            owner: std::process::id(),
        })
    }

    /// Where the temporary is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stale temporaries that were removed before this one was made.
    pub fn reclaimed(&self) -> &[Reclaimed] {
        &self.reclaimed
    }

    /// Rename the temporary to `to` (replacing a file there, or an empty directory), then
    /// release its lock.
    pub fn commit(mut self, to: &Path) -> Result<()> {
        fs::rename(&self.path, to).at(to)?;
        self.done = true;
        Ok(())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.done && self.owner == std::process::id() {
            // Removed before the lock (a field) is released: nobody else ever sees it unlocked.
            let _ = remove(&self.path, self.kind == Kind::Dir);
        }
    }
}

/// Remove the stale temporaries in `parent`: those of [`MARKER`] names whose lock is free (and
/// whose writer is not in the window before its lock, see the module's docs). Never fails:
/// what cannot be read, locked or removed is left alone.
pub fn reclaim(parent: &Path) -> Vec<Reclaimed> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(parent) else {
        return removed;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(parse_name) else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !(meta.is_dir() || meta.is_file()) {
            continue;
        }
        if pid_alive(pid) && younger_than(&meta, GRACE) {
            continue;
        }
        let Ok(f) = File::open(&path) else { continue };
        if f.try_lock().is_err() {
            continue; // a live writer holds it (or the filesystem has no locks)
        }
        let bytes = size_of(&path);
        if remove(&path, meta.is_dir()).is_ok() {
            removed.push(Reclaimed { path, bytes });
        }
        drop(f);
    }
    removed
}

/// The pid in a temporary's name, or `None` when the name is not one of ours.
pub fn parse_name(name: &str) -> Option<u32> {
    let at = name.rfind(MARKER)?;
    if at == 0 || !name.starts_with('.') {
        return None;
    }
    let (pid, nonce) = name[at + MARKER.len()..].split_once('-')?;
    let digits = |s: &str, hex: bool| {
        !s.is_empty()
            && s.bytes().all(|b| {
                if hex {
                    b.is_ascii_hexdigit()
                } else {
                    b.is_ascii_digit()
                }
            })
    };
    if !digits(pid, false) || !digits(nonce, true) {
        return None;
    }
    pid.parse().ok()
}

fn temp_name(label: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(
        ".{label}{MARKER}{}-{:x}",
        std::process::id(),
        nanos.wrapping_add(n)
    )
}

/// The label as it can appear in a file name: no separators, at most [`MAX_LABEL`] bytes.
fn clean_label(label: &str) -> String {
    let mut s: String = label
        .chars()
        .map(|c| if c == '/' || c == '\0' { '_' } else { c })
        .collect();
    if s.len() > MAX_LABEL {
        let mut cut = MAX_LABEL;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// Lock `path` (opened read-only; works for directories) for as long as the returned file is
/// open. `None` where the filesystem refuses `flock`.
fn lock(path: &Path) -> Option<File> {
    let f = File::open(path).ok()?;
    f.try_lock().ok()?;
    Some(f)
}

fn remove(path: &Path, dir: bool) -> std::io::Result<()> {
    if dir {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}

/// Whether process `pid` may be alive: `/proc/PID` exists, or there is no `/proc` to tell.
fn pid_alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}

fn younger_than(meta: &fs::Metadata, age: Duration) -> bool {
    match meta.modified().map(|m| SystemTime::now().duration_since(m)) {
        Ok(Ok(elapsed)) => elapsed < age,
        // In the future (clock skew) or unknown: presume young.
        _ => true,
    }
}

/// Bytes of the files under `path` (not following links).
fn size_of(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    fs::read_dir(path)
        .map(|entries| entries.flatten().map(|e| size_of(&e.path())).sum())
        .unwrap_or(0)
}

/// 512 B, 4.0 KiB, 1.1 GiB.
pub fn human_bytes(n: u64) -> String {
    let mut x = n as f64;
    for unit in ["B", "KiB", "MiB", "GiB"] {
        if x < 1024.0 {
            return if unit == "B" {
                format!("{n} B")
            } else {
                format!("{x:.1} {unit}")
            };
        }
        x /= 1024.0;
    }
    format!("{x:.1} TiB")
}

#[cfg(test)]
mod tests;
