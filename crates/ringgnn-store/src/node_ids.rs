//! The original ids of a dataset's nodes (`node_ids.bin`, `node_id_bytes.bin`; `docs/FORMAT.md`
//! "Original node ids"): written by `convert` from files an importer prepared (ringgnn's table
//! importer assigns the dense ids and writes the originals in dense order), copied in blocks.
//! Before anything is built they are checked to be unique ([`check_unique`]) by the same external
//! sort as `verify`'s, within the build's `--memory`, spilling into the build's temporary
//! directory: a repeated id is refused with the input file and the two nodes, and since the
//! dataset is built in a temporary place, nothing is left behind.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::manifest::{NodeIdDtype, NodeIdInfo};
use crate::progress::Progress;
use crate::verify::runs::Sizes;
use crate::verify::unique_ids::{find_repeat, hash_bytes, IdCheck, IdFiles, Repeat, AMBIGUOUS};
use crate::writer::Staging;
use crate::{input_err, Error, IoContext, Result};

pub const NODE_IDS_FILE: &str = "node_ids.bin";
pub const NODE_ID_BYTES_FILE: &str = "node_id_bytes.bin";

/// Bytes copied per read.
const BLOCK: usize = 1 << 20;

/// Files holding the original ids, raw little-endian without a header: `ids` is i64 or u64
/// `[V]`, or for strings u64 offsets `[V + 1]` into `bytes` (UTF-8, concatenated).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIdsInput {
    pub dtype: NodeIdDtype,
    pub ids: PathBuf,
    /// The UTF-8 bytes of string ids (`Str` only).
    pub bytes: Option<PathBuf>,
}

impl NodeIdsInput {
    /// Check the files' sizes against `num_nodes` before anything is built.
    pub fn check(&self, num_nodes: Option<u64>) -> Result<()> {
        let len = std::fs::metadata(&self.ids).at(&self.ids)?.len();
        let want = NodeIdInfo {
            dtype: self.dtype,
            bytes: 0,
        };
        if let Some(n) = num_nodes {
            if len != want.ids_payload(n) {
                return input_err!(
                    "{}: {len} bytes, but {n} node ids take {}; the original ids must list every node once",
                    self.ids.display(),
                    want.ids_payload(n)
                );
            }
        }
        match (self.dtype, &self.bytes) {
            (NodeIdDtype::Str, None) => {
                input_err!("string node ids need the file of their bytes")
            }
            (NodeIdDtype::I64 | NodeIdDtype::U64, Some(p)) => {
                input_err!("{}: integer node ids have no bytes file", p.display())
            }
            _ => Ok(()),
        }
    }
}

/// Refuse the build if two nodes of `input` have the same original id. `memory` is the build's
/// `--memory` (the check runs while the build holds nothing else, so it gets all of it but the
/// builder's fixed part); the sort's runs, if any, go to a temporary directory in `spill_parent`
/// (the build's own temporary directory), removed when the check ends however it ends. Returns
/// the bytes the sort wrote there.
pub fn check_unique(
    input: &NodeIdsInput,
    memory: u64,
    spill_parent: &Path,
    progress: &dyn Progress,
) -> Result<u64> {
    #[cfg(test)]
    if tests::SKIP_UNIQUE.with(|s| s.get()) {
        return Ok(0);
    }
    crate::budget::check_memory(memory)?;
    let len = std::fs::metadata(&input.ids).at(&input.ids)?.len();
    let words = len / 8;
    let strings = input.dtype == NodeIdDtype::Str;
    if len % 8 != 0 || (strings && words == 0) {
        return input_err!(
            "{}: {len} bytes is not a whole number of 8-byte {}",
            input.ids.display(),
            if strings {
                "offsets (V + 1 of them)"
            } else {
                "ids"
            }
        );
    }
    let files = IdFiles {
        dtype: input.dtype,
        ids: &input.ids,
        bytes: input.bytes.as_deref(),
        num_nodes: if strings { words - 1 } else { words },
    };
    let how = IdCheck {
        sizes: Sizes::for_budget(memory.saturating_sub(crate::budget::OVERHEAD)),
        spill_dir: spill_parent,
        hash: hash_bytes,
    };
    match find_repeat(&files, &how, "original ids unique", progress)? {
        (None, spilled) => Ok(spilled),
        (Some(Repeat { first, second, id }), _) => Err(Error::Input(format!(
            "{}{}: nodes {first} and {second} (entries {first} and {second} of the file, counted \
             from 0) both have the original id {id}; {AMBIGUOUS}: remove the repeat from the \
             input (or give one of the two nodes another id) and build again",
            input.ids.display(),
            match &input.bytes {
                Some(b) => format!(" (offsets into {})", b.display()),
                None => String::new(),
            },
        ))),
    }
}

/// Copy the original ids into the dataset being built; `num_nodes` is the built graph's.
pub fn attach_node_ids(
    staging: &mut Staging,
    input: &NodeIdsInput,
    num_nodes: u64,
) -> Result<NodeIdInfo> {
    input.check(Some(num_nodes))?;
    let bytes = match &input.bytes {
        Some(p) => {
            let len = std::fs::metadata(p).at(p)?.len();
            copy(staging, "node_id_bytes", NODE_ID_BYTES_FILE, p)?;
            len
        }
        None => 0,
    };
    copy(staging, "node_ids", NODE_IDS_FILE, &input.ids)?;
    Ok(NodeIdInfo {
        dtype: input.dtype,
        bytes,
    })
}

fn copy(staging: &mut Staging, key: &str, name: &str, from: &Path) -> Result<()> {
    let mut w = staging.writer(name)?;
    let mut f = File::open(from).at(from)?;
    let mut buf = vec![0u8; BLOCK];
    loop {
        let n = f.read(&mut buf).at(from)?;
        if n == 0 {
            break;
        }
        w.write(&buf[..n])?;
    }
    staging.add(key, w.finish()?);
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
