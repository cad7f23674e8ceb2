//! Writers for the per-node files: features (with the page padding rule of FORMAT.md), labels
//! and split id lists. Callers stream rows in node order; nothing is held in memory.

use half::{bf16, f16};

use crate::manifest::{FeatureDtype, FeatureInfo, FileEntry, PAGE};
use crate::writer::{BinWriter, Staging};
use crate::Result;

pub const FEATURES_FILE: &str = "features.bin";
pub const LABELS_FILE: &str = "labels.bin";

pub fn split_file(name: &str) -> String {
    format!("split_{name}.bin")
}

/// Streams feature rows into `features.bin`, converting to the storage dtype.
pub struct FeatureWriter {
    w: BinWriter,
    info: FeatureInfo,
    rows: u64,
    scratch: Vec<u8>,
}

impl FeatureWriter {
    pub fn new(staging: &Staging, dim: u64, dtype: FeatureDtype) -> Result<Self> {
        Ok(FeatureWriter {
            w: staging.writer(FEATURES_FILE)?,
            info: FeatureInfo::new(dim, dtype),
            rows: 0,
            scratch: Vec::new(),
        })
    }

    pub fn info(&self) -> &FeatureInfo {
        &self.info
    }

    /// Append one row of `dim` values.
    pub fn push_row(&mut self, row: &[f32]) -> Result<()> {
        debug_assert_eq!(row.len() as u64, self.info.dim);
        self.scratch.clear();
        match self.info.dtype {
            FeatureDtype::F32 => row
                .iter()
                .for_each(|x| self.scratch.extend_from_slice(&x.to_le_bytes())),
            FeatureDtype::F16 => row.iter().for_each(|x| {
                self.scratch
                    .extend_from_slice(&f16::from_f32(*x).to_le_bytes())
            }),
            FeatureDtype::Bf16 => row.iter().for_each(|x| {
                self.scratch
                    .extend_from_slice(&bf16::from_f32(*x).to_le_bytes())
            }),
        }
        self.push_encoded(row.len())
    }

    /// Append one row already encoded in the storage dtype (little-endian bytes).
    pub fn push_row_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        debug_assert_eq!(bytes.len() as u64, self.info.row_bytes);
        self.pad_before_row()?;
        self.w.write(bytes)?;
        self.rows += 1;
        Ok(())
    }

    fn push_encoded(&mut self, _n: usize) -> Result<()> {
        self.pad_before_row()?;
        let s = std::mem::take(&mut self.scratch);
        let r = self.w.write(&s);
        self.scratch = s;
        r?;
        self.rows += 1;
        Ok(())
    }

    fn pad_before_row(&mut self) -> Result<()> {
        let rpp = self.info.rows_per_page;
        if rpp > 0 && self.rows > 0 && self.rows.is_multiple_of(rpp) {
            let pos = self.w.position();
            self.w.zeros(pos.div_ceil(PAGE) * PAGE - pos)?;
        }
        debug_assert_eq!(self.w.position(), self.info.row_offset(self.rows));
        Ok(())
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn finish(self) -> Result<(FeatureInfo, FileEntry)> {
        debug_assert_eq!(self.w.position(), self.info.payload_bytes(self.rows));
        Ok((self.info, self.w.finish()?))
    }
}

/// Write `labels.bin` from an iterator-like producer and register it.
pub fn write_i64_file(staging: &mut Staging, key: &str, file: &str, values: &[i64]) -> Result<()> {
    let mut w = staging.writer(file)?;
    w.write_i64s(values)?;
    let e = w.finish()?;
    staging.add(key, e);
    Ok(())
}
