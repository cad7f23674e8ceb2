//! Negative (src, dst) pairs shared by every positive of a held-out edge split (OGB's
//! `edge_neg` of ogbl-collab, -ppa and -ddi, whose evaluator ranks each positive against all of
//! them): `edge_shared_negatives.NAME`, i64 `[m, 2]`, stored as the input gives them
//! (`docs/FORMAT.md` "Edge splits"). Only `convert`'s homogeneous build writes them.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::PathBuf;

use crate::link::{shared_negatives_file, LinkSplitOptions, LinkSplitSpec};
use crate::manifest::{EdgeSplitInfo, TRAIN};
use crate::writer::Staging;
use crate::{input_err, Error, IoContext, Result};

/// Pairs copied per block (16 bytes each: 1 MiB).
const CHUNK: usize = 1 << 16;

/// Refuse, before the build, shared negatives for a split that is not held out, or a file that
/// is missing or not an int64 C-order `(m >= 1, 2)` array.
pub fn check(opts: &LinkSplitOptions) -> Result<()> {
    for (name, path) in &opts.shared_negatives {
        let held = match &opts.spec {
            LinkSplitSpec::Fractions(v) => v.iter().any(|(n, _)| n == name),
            LinkSplitSpec::Files(v) => v.iter().any(|(n, _)| n == name),
            LinkSplitSpec::Times(v) => v.iter().any(|(n, _)| n == name),
        };
        if !held || name == TRAIN {
            return input_err!(
                "shared negatives {} are given for edge split '{name}', which is not a held-out split",
                path.display()
            );
        }
        Error::must_exist(
            path,
            format!("shared negatives of edge split {name} not found"),
        )?;
        rows(path, name)?;
    }
    Ok(())
}

/// The number of pairs of a shared-negatives `.npy` file, its header checked.
fn rows(path: &std::path::Path, name: &str) -> Result<(u64, u64)> {
    let h = crate::npy::read_header(path)?;
    h.expect_dtype(&["int64"], "shared negatives")?;
    match h.shape[..] {
        [m, 2] if m >= 1 && !h.fortran_order => Ok((m, h.data_offset)),
        _ => input_err!(
            "{}: shared negatives of edge split {name} must be a C-order int64 array of shape (m >= 1, 2), one (src, dst) pair per row; found shape {:?}",
            path.display(),
            h.shape
        ),
    }
}

/// Store each split's shared negatives from its file, ids checked to be below `num_nodes`, and
/// record their number in `splits`.
pub fn attach(
    staging: &mut Staging,
    splits: &mut BTreeMap<String, EdgeSplitInfo>,
    given: &[(String, PathBuf)],
    num_nodes: u64,
) -> Result<()> {
    for (name, path) in given {
        let (m, offset) = rows(path, name)?;
        let info = splits.get_mut(name).ok_or_else(|| {
            Error::Input(format!(
                "shared negatives {} are given for edge split '{name}', which the build did not make",
                path.display()
            ))
        })?;
        let mut reader = BufReader::with_capacity(1 << 20, File::open(path).at(path)?);
        std::io::copy(&mut (&mut reader).take(offset), &mut std::io::sink()).at(path)?;
        let mut w = staging.writer(&shared_negatives_file(name))?;
        let mut buf = vec![0u8; 16 * CHUNK.min(m as usize)];
        let mut at = 0u64;
        while at < m {
            let n = ((m - at) as usize).min(CHUNK);
            reader.read_exact(&mut buf[..16 * n]).at(path)?;
            for (j, c) in buf[..16 * n].chunks_exact(8).enumerate() {
                let x = i64::from_le_bytes(c.try_into().unwrap());
                if x < 0 || x as u64 >= num_nodes {
                    let e = 2 * at + j as u64;
                    return input_err!(
                        "{}: shared negative pair {} of edge split {name} has {} {x}, but node ids are in [0, {num_nodes})",
                        path.display(),
                        e / 2,
                        if e.is_multiple_of(2) { "source" } else { "destination" }
                    );
                }
            }
            w.write(&buf[..16 * n])?;
            at += n as u64;
        }
        staging.add(&format!("edge_shared_negatives.{name}"), w.finish()?);
        info.shared_negatives = m;
    }
    Ok(())
}
