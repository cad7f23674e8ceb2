//! `verify`'s check that each original node id occurs once (`docs/FORMAT.md`, "Original node
//! ids"): two nodes with the same original id make every lookup by original id ambiguous
//! (`predict --nodes`, an importer's joins).
//!
//! The ids are streamed once as `(key, node)` records into the external sort of [`super::runs`],
//! which keeps them within the budget whatever `V` (sorted in memory when they fit, else in runs
//! on disk and merged), and the sorted stream is scanned for equal neighbours. The key of an
//! integer id is the id itself (an i64 with its sign bit flipped, so keys sort as the ids do); the
//! key of a string id is a 64-bit hash of its bytes, and records with equal hashes are compared
//! byte for byte (read back from the files), so a hash collision of two different strings is
//! never reported. The problem reported is the smallest duplicated key, with its two smallest
//! nodes: the same whatever the budget.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::runs::{Record, Sizes, SortName, Sorter};
use crate::hetero::Part;
use crate::manifest::{Manifest, NodeIdDtype};
use crate::progress::Progress;
use crate::rng::mix64;
use crate::{Error, IoContext, Result, EXCERPT_CHARS};

/// Hash of a string id's bytes (tests pass a tiny one to make collisions).
pub(crate) type HashFn = fn(&[u8]) -> u64;

/// Why a repeated id is refused, in `verify`'s message and the builds' ([`crate::node_ids`]).
pub(crate) const AMBIGUOUS: &str = "each original id must name one node, or lookups by original \
     id (predict --nodes, an importer's joins) are ambiguous";

/// The sort of the original ids.
const IDS: SortName = SortName {
    label: "ringgnn-verify",
    what: "the original ids",
    unit: "ids",
};

/// Bytes per read of the id files.
const READ_BLOCK: usize = 1 << 20;

/// How the check runs: the sizes its budget allows, where runs go, how strings are hashed.
pub(crate) struct IdCheck<'a> {
    pub sizes: Sizes,
    pub spill_dir: &'a Path,
    pub hash: HashFn,
}

/// The hash of string ids: SplitMix64's `mix64` chained over the length and then each 8-byte
/// little-endian word (the last one zero-filled; the length up front keeps that unambiguous).
pub fn hash_bytes(b: &[u8]) -> u64 {
    b.chunks(8).fold(mix64(b.len() as u64), |h, c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        mix64(h ^ u64::from_le_bytes(w))
    })
}

/// Check that the original ids of `m` (a dataset, or a node type's view) are unique; returns
/// the bytes the sort wrote to disk.
pub(super) fn check(
    dir: &Path,
    m: &Manifest,
    part: Option<&Part>,
    how: &IdCheck<'_>,
    progress: &dyn Progress,
) -> Result<u64> {
    let Some(info) = &m.node_ids else {
        return Ok(0);
    };
    let ids_path = dir.join(&m.file("node_ids")?.path);
    let bytes_path = match info.dtype {
        NodeIdDtype::Str => Some(dir.join(&m.file("node_id_bytes")?.path)),
        _ => None,
    };
    let stage = part.map_or(String::new(), |p| format!("{p} "));
    let ids = IdFiles {
        dtype: info.dtype,
        ids: &ids_path,
        bytes: bytes_path.as_deref(),
        num_nodes: m.num_nodes,
    };
    let stage = format!("verify {stage}original ids unique");
    let (repeat, spilled) = find_repeat(&ids, how, &stage, progress)?;
    match repeat {
        None => Ok(spilled),
        Some(Repeat {
            first: i,
            second: j,
            id,
        }) => Err(Error::Corrupt(format!(
            "{}: {}nodes {i} and {j} both have the original id {id}; {AMBIGUOUS}. The importer \
             that wrote this dataset should have refused the duplicate: remove it from the input \
             and import it again",
            ids_path.display(),
            part.map_or(String::new(), |p| format!("{p}: ")),
        ))),
    }
}

/// The files of `num_nodes` original ids as `docs/FORMAT.md` lays them out (a dataset's, or
/// the files a build is given, which have the same layout).
pub(crate) struct IdFiles<'a> {
    pub dtype: NodeIdDtype,
    pub ids: &'a Path,
    /// The UTF-8 bytes of string ids (`Str` only).
    pub bytes: Option<&'a Path>,
    pub num_nodes: u64,
}

/// An original id that names two nodes: the smallest repeated key's two smallest nodes, and
/// the id as a message shows it. The same whatever the budget.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Repeat {
    pub first: u64,
    pub second: u64,
    pub id: String,
}

/// The one check that original ids are unique, for `verify` and for the builds that write
/// them: the repeat found (if any) and the bytes the sort wrote to disk. `stage` names the
/// progress stage.
pub(crate) fn find_repeat(
    files: &IdFiles<'_>,
    how: &IdCheck<'_>,
    stage: &str,
    progress: &dyn Progress,
) -> Result<(Option<Repeat>, u64)> {
    let v = files.num_nodes;
    progress.stage(stage, Some(v), "ids");
    let mut sorter = Sorter::new(how.sizes, v, how.spill_dir, IDS);
    let mut ids = Words::open(files.ids)?;
    let strings = match files.dtype {
        NodeIdDtype::I64 | NodeIdDtype::U64 => {
            let flip = if files.dtype == NodeIdDtype::I64 {
                1 << 63
            } else {
                0
            };
            for node in 0..v {
                sorter.push((ids.next()? ^ flip, node))?;
                tick(node, progress)?;
            }
            None
        }
        NodeIdDtype::Str => {
            let bytes_path = files.bytes.ok_or_else(|| {
                Error::Input("string node ids need the file of their bytes".into())
            })?;
            let file = File::open(bytes_path).at(bytes_path)?;
            let total = file.metadata().at(bytes_path)?.len();
            let mut bytes = std::io::BufReader::with_capacity(READ_BLOCK, file);
            let (mut start, mut s) = (ids.next()?, Vec::new());
            for node in 0..v {
                let end = ids.next()?;
                // A build's input is unchecked: bad offsets are refused before they size a read.
                if end < start || end > total {
                    return Err(Error::Input(format!(
                        "{}: offset {} is {end}, after offset {node} ({start}), but offsets must \
                         not decrease nor pass the {total} bytes of {}",
                        files.ids.display(),
                        node + 1,
                        bytes_path.display()
                    )));
                }
                s.resize((end - start) as usize, 0);
                bytes.read_exact(&mut s).at(bytes_path)?;
                sorter.push(((how.hash)(&s), node))?;
                start = end;
                tick(node, progress)?;
            }
            Some(Strings::open(
                files.ids.to_path_buf(),
                bytes_path.to_path_buf(),
            )?)
        }
    };
    progress.advance(v % (1 << 20))?;
    let mut found = None;
    let mut prev: Option<Record> = None;
    // String ids: the nodes of the current run of equal hashes whose strings differ, with them.
    let mut distinct: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut each = |(key, node): Record| -> Result<bool> {
        let same = prev.filter(|&(k, _)| k == key);
        prev = Some((key, node));
        let Some((_, first)) = same else {
            distinct.clear();
            return Ok(false);
        };
        let Some(strings) = &strings else {
            found = Some((first, node, show_int(key, files.dtype)));
            return Ok(true);
        };
        if distinct.is_empty() {
            distinct.push((first, strings.get(first)?));
        }
        let s = strings.get(node)?;
        if let Some((i, _)) = distinct.iter().find(|(_, t)| *t == s) {
            found = Some((*i, node, show_str(&s)));
            return Ok(true);
        }
        distinct.push((node, s));
        Ok(false)
    };
    let spilled = sorter.finish("compare the sorted original ids", progress, &mut each)?;
    let repeat = found.map(|(first, second, id)| Repeat { first, second, id });
    Ok((repeat, spilled))
}

fn tick(node: u64, progress: &dyn Progress) -> Result<()> {
    if (node + 1).is_multiple_of(1 << 20) {
        progress.advance(1 << 20)?;
    }
    Ok(())
}

fn show_int(key: u64, dtype: NodeIdDtype) -> String {
    match dtype {
        NodeIdDtype::I64 => ((key ^ (1 << 63)) as i64).to_string(),
        _ => key.to_string(),
    }
}

/// A string id as a quoted, escaped string, cut after [`EXCERPT_CHARS`] characters.
fn show_str(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let cut: String = s.chars().take(EXCERPT_CHARS).collect();
    if cut.len() < s.len() {
        format!("{cut:?}... ({} bytes)", b.len())
    } else {
        format!("{s:?}")
    }
}

/// Little-endian u64s read front to back in large blocks.
struct Words {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    pos: usize,
}

impl Words {
    fn open(path: &Path) -> Result<Self> {
        Ok(Words {
            file: File::open(path).at(path)?,
            path: path.to_path_buf(),
            buf: Vec::new(),
            pos: 0,
        })
    }

    /// The next word; the payload was checked to hold as many as the manifest says.
    fn next(&mut self) -> Result<u64> {
        if self.pos == self.buf.len() {
            self.buf.resize(READ_BLOCK, 0);
            let n = crate::input::read_full(&mut self.file, &mut self.buf).at(&self.path)?;
            if n < 8 {
                return Err(Error::io(
                    &self.path,
                    std::io::ErrorKind::UnexpectedEof.into(),
                ));
            }
            self.buf.truncate(n / 8 * 8);
            self.pos = 0;
        }
        let w = u64::from_le_bytes(self.buf[self.pos..self.pos + 8].try_into().unwrap());
        self.pos += 8;
        Ok(w)
    }
}

/// Random access to string ids, to compare those whose hashes are equal.
struct Strings {
    offsets_path: PathBuf,
    offsets: File,
    bytes_path: PathBuf,
    bytes: File,
}

impl Strings {
    fn open(offsets_path: PathBuf, bytes_path: PathBuf) -> Result<Self> {
        Ok(Strings {
            offsets: File::open(&offsets_path).at(&offsets_path)?,
            offsets_path,
            bytes: File::open(&bytes_path).at(&bytes_path)?,
            bytes_path,
        })
    }

    fn get(&self, node: u64) -> Result<Vec<u8>> {
        let mut o = [0u8; 16];
        self.offsets
            .read_exact_at(&mut o, node * 8)
            .at(&self.offsets_path)?;
        let start = u64::from_le_bytes(o[..8].try_into().unwrap());
        let end = u64::from_le_bytes(o[8..].try_into().unwrap());
        let mut s = vec![0u8; (end - start) as usize];
        self.bytes
            .read_exact_at(&mut s, start)
            .at(&self.bytes_path)?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests;
