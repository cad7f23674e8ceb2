//! Writing a dataset atomically: everything is built in a hidden staging directory next to the
//! output and renamed into place only when complete, so an error, a full disk or Ctrl-C never
//! leaves a half-written dataset behind. The staging directory is a locked temporary
//! ([`crate::temp`]): one that a killed build leaves behind is removed by the next command that
//! writes beside it. The files it hands out ([`BinWriter`]) stop with `Error::Interrupted` within
//! a few megabytes once the build's [`Cancel`] flag is raised, and [`Staging::check_room`]
//! refuses, before writing, what would not fit ([`crate::space`]).

use std::fs::{self, File};
use std::io::Write;

use ringgnn_io::{AlignedBuf, DirectFile};
use std::path::{Path, PathBuf};

use crate::manifest::{pad_to_page, FileEntry, Manifest, MANIFEST_FILE, PAGE};
use crate::progress::{Cancel, Progress};
use crate::replace;
use crate::space::Need;
use crate::temp::{Kind, Temp};
use crate::{Error, IoContext, Result};

/// A dataset under construction.
pub struct Staging {
    out: PathBuf,
    /// The staging directory, locked while it lives and removed on drop unless committed.
    tmp: Temp,
    overwrite: bool,
    files: std::collections::BTreeMap<String, FileEntry>,
    /// (key prefix, file-name prefix) of the part being written (see [`Staging::set_part`]).
    part: (String, String),
    /// The build's cancellation, checked by every writer it hands out.
    cancel: Cancel,
}

impl Staging {
    /// Start building the dataset that will live at `out`. An existing `out` is refused unless
    /// `overwrite`; even then only an empty directory or a ringgnn dataset is ever replaced, and
    /// what its folder holds besides the dataset is kept ([`crate::replace`]).
    /// Stale temporaries of killed runs beside `out` are removed first, each reported to
    /// `progress` ([`Progress::note`]).
    pub fn create(out: &Path, overwrite: bool, progress: &dyn Progress) -> Result<Self> {
        replace::check(out, overwrite)?;
        let name = out
            .file_name()
            .ok_or_else(|| {
                Error::Input(format!("{}: output must name a directory", out.display()))
            })?
            .to_string_lossy()
            .into_owned();
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !parent.is_dir() {
            return Err(Error::Input(format!(
                "{}: the parent directory does not exist; create it first",
                parent.display()
            )));
        }
        let tmp = Temp::create(&parent, &name, Kind::Dir)?;
        for r in tmp.reclaimed() {
            progress.note(&r.to_string());
        }
        Ok(Staging {
            out: out.to_path_buf(),
            tmp,
            overwrite,
            files: Default::default(),
            part: Default::default(),
            cancel: progress.cancel(),
        })
    }

    /// Refuse, before writing, a build whose next files `need` more than the free space of the
    /// file system the dataset is written to (the message names the output).
    pub fn check_room(&self, need: &Need) -> Result<()> {
        need.check(self.dir(), &self.out)
    }

    /// The staging directory (removed on drop unless committed).
    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// A scratch directory inside the staging directory for spill files; removed at commit.
    pub fn scratch(&self) -> Result<PathBuf> {
        let p = self.dir().join("_scratch");
        if !p.exists() {
            fs::create_dir(&p).at(&p)?;
        }
        Ok(p)
    }

    /// Open the binary file for logical name `key` (see FORMAT.md), written as `file_name`
    /// (after the current part's file-name prefix).
    pub fn writer(&self, file_name: &str) -> Result<BinWriter> {
        Ok(BinWriter::create(self.file_path(file_name))?.cancelled_by(self.cancel.clone()))
    }

    /// Where [`Self::writer`] puts `file_name` (after the current part's file-name prefix).
    pub fn file_path(&self, file_name: &str) -> PathBuf {
        self.dir().join(format!("{}{file_name}", self.part.1))
    }

    /// Record a finished file under its logical name (after the current part's key prefix).
    pub fn add(&mut self, key: &str, entry: FileEntry) {
        self.files.insert(format!("{}{key}", self.part.0), entry);
    }

    /// Write the files of one part of a heterogeneous dataset (a node type or a relation):
    /// until the next call, [`Self::add`] prefixes keys with `key_prefix` (`node.paper.`) and
    /// [`Self::writer`] file names with `file_prefix` (`type0_`), so the writers of a
    /// homogeneous dataset's files write a part's unchanged. Empty prefixes: the whole dataset.
    pub fn set_part(&mut self, key_prefix: &str, file_prefix: &str) {
        self.part = (key_prefix.to_string(), file_prefix.to_string());
    }

    /// The files recorded so far, by logical name.
    pub fn files(&self) -> &std::collections::BTreeMap<String, FileEntry> {
        &self.files
    }

    /// Replace a recorded file (after rewriting it), keeping its logical name.
    pub fn replace(&mut self, key: &str, entry: FileEntry) {
        self.files.insert(key.to_string(), entry);
    }

    /// Write the manifest (its `files` come from [`Staging::add`]) and move the dataset into place.
    pub fn commit(mut self, mut manifest: Manifest) -> Result<PathBuf> {
        manifest.files = self.take_files();
        let json = manifest.to_json();
        self.commit_json(&json)
    }

    /// The files recorded so far, taken out for a manifest (see [`Self::commit_json`]).
    pub fn take_files(&mut self) -> std::collections::BTreeMap<String, FileEntry> {
        std::mem::take(&mut self.files)
    }

    /// [`Self::commit`] with a manifest already serialized (a heterogeneous one, whose `files`
    /// the caller took with [`Self::take_files`]).
    pub fn commit_json(self, json: &str) -> Result<PathBuf> {
        let scratch = self.dir().join("_scratch");
        if scratch.exists() {
            fs::remove_dir_all(&scratch).at(&scratch)?;
        }
        let mpath = self.dir().join(MANIFEST_FILE);
        {
            let mut f = File::create(&mpath).at(&mpath)?;
            f.write_all(json.as_bytes()).at(&mpath)?;
            f.sync_all().at(&mpath)?;
        }
        // Re-check: something may have appeared at `out` while we were building.
        let foreign = replace::check(&self.out, self.overwrite)?;
        replace::carry(&self.out, self.dir(), &foreign)?;
        if self.out.exists() {
            // The old dataset becomes a locked temporary itself: removed when dropped, and
            // reclaimed by a later run if this one dies while removing it.
            let label = format!(
                "{}.old",
                self.out.file_name().unwrap_or_default().to_string_lossy()
            );
            let old = Temp::adopt(&self.out, &label)?;
            if let Err(e) = self.tmp.commit(&self.out) {
                let _ = old.commit(&self.out); // put the old dataset back
                return Err(e);
            }
        } else {
            self.tmp.commit(&self.out)?;
        }
        if let Some(parent) = self.out.parent() {
            // Make the rename durable; failure here loses nothing, so it is not an error.
            if let Ok(d) = File::open(if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            }) {
                let _ = d.sync_all();
            }
        }
        Ok(self.out)
    }
}

/// A binary dataset file: buffered, checksummed as written, zero-padded to a page multiple.
/// Written with O_DIRECT where the filesystem allows: the page padding of the format makes
/// every write page-aligned, and skipping the page cache saves the kernel copy (the biggest
/// CPU cost of a build) and keeps cache memory out of the build's footprint.
pub struct BinWriter {
    path: PathBuf,
    file: DirectFile,
    buf: AlignedBuf,
    /// File offset where `buf` starts.
    flushed: u64,
    crc: u32,
    bytes: u64,
    /// Checked at each write of the buffer: a build asked to stop stops within [`WRITE_BUF`].
    cancel: Cancel,
}

const WRITE_BUF: usize = 4 << 20;

impl BinWriter {
    pub fn create(path: PathBuf) -> Result<Self> {
        let file = DirectFile::create(&path).at(&path)?;
        Ok(BinWriter {
            path,
            file,
            buf: AlignedBuf::new(WRITE_BUF),
            flushed: 0,
            crc: 0,
            bytes: 0,
            cancel: Cancel::default(),
        })
    }

    /// Make [`BinWriter::write`] fail with `Error::Interrupted` once `cancel` is raised.
    pub fn cancelled_by(mut self, cancel: Cancel) -> Self {
        self.cancel = cancel;
        self
    }

    pub fn write(&mut self, mut data: &[u8]) -> Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, data);
        self.bytes += data.len() as u64;
        while !data.is_empty() {
            let at = self.buf.len();
            let n = data.len().min(self.buf.capacity() - at);
            self.buf.set_len(at + n);
            self.buf[at..].copy_from_slice(&data[..n]);
            data = &data[n..];
            if self.buf.len() == self.buf.capacity() {
                self.drain()?;
            }
        }
        Ok(())
    }

    /// Write out the buffer (its length is a multiple of the page size except at `finish`,
    /// which pads first).
    fn drain(&mut self) -> Result<()> {
        self.cancel.check()?;
        self.file
            .write_all_at(&self.buf, self.flushed)
            .at(&self.path)?;
        self.flushed += self.buf.len() as u64;
        self.buf.set_len(0);
        Ok(())
    }
    /// Write `n` zero bytes.
    pub fn zeros(&mut self, mut n: u64) -> Result<()> {
        const Z: [u8; 4096] = [0; 4096];
        while n > 0 {
            let k = n.min(Z.len() as u64) as usize;
            self.write(&Z[..k])?;
            n -= k as u64;
        }
        Ok(())
    }

    pub fn write_u32s(&mut self, v: &[u32]) -> Result<()> {
        write_le(self, v, |x, b: &mut [u8; 4]| *b = x.to_le_bytes())
    }
    pub fn write_u64s(&mut self, v: &[u64]) -> Result<()> {
        write_le(self, v, |x, b: &mut [u8; 8]| *b = x.to_le_bytes())
    }
    pub fn write_i64s(&mut self, v: &[i64]) -> Result<()> {
        write_le(self, v, |x, b: &mut [u8; 8]| *b = x.to_le_bytes())
    }

    /// Bytes written so far (the payload, before padding).
    pub fn position(&self) -> u64 {
        self.bytes
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Pad to a page multiple, flush, sync, and describe the file for the manifest.
    pub fn finish(mut self) -> Result<FileEntry> {
        let payload = self.bytes;
        self.zeros(pad_to_page(payload) - payload)?;
        debug_assert_eq!(self.bytes % PAGE, 0);
        self.drain()?;
        self.file.file().sync_data().at(&self.path)?;
        Ok(FileEntry {
            path: self
                .path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            bytes: self.bytes,
            payload_bytes: payload,
            crc32c: format!("{:08x}", self.crc),
        })
    }
}

/// Encode `v` little-endian into `w` (a plain byte view on little-endian machines).
fn write_le<T: bytemuck::Pod, const N: usize>(
    w: &mut BinWriter,
    v: &[T],
    enc: impl Fn(T, &mut [u8; N]),
) -> Result<()> {
    if cfg!(target_endian = "little") {
        return w.write(bytemuck::cast_slice(v));
    }
    let mut buf = [0u8; 8192];
    for chunk in v.chunks(8192 / N) {
        let mut o = 0;
        for &x in chunk {
            let b: &mut [u8; N] = (&mut buf[o..o + N]).try_into().unwrap();
            enc(x, b);
            o += N;
        }
        w.write(&buf[..o])?;
    }
    Ok(())
}
