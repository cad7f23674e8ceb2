//! The original ids of a dataset's nodes (`node_ids.bin`, `node_id_bytes.bin`; `docs/FORMAT.md`
//! "Original node ids"): written by `convert` from files an importer prepared (ringgnn's table
//! importer assigns the dense ids and writes the originals in dense order), copied in blocks.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::manifest::{NodeIdDtype, NodeIdInfo};
use crate::writer::Staging;
use crate::{input_err, IoContext, Result};

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
