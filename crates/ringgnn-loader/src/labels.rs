//! Labels held in memory in the narrowest integer type that fits the classes: 2 bytes per node
//! for up to 32767 classes, where the file stores 8.

use ringgnn_store::Dataset;

use crate::Result;

/// One label per node (`-1` = unlabeled).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Labels {
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

impl Labels {
    /// Bytes per node for `num_classes` classes.
    pub fn bytes_per_node(num_classes: u64) -> u64 {
        if num_classes <= i16::MAX as u64 {
            2
        } else if num_classes <= i32::MAX as u64 {
            4
        } else {
            8
        }
    }

    /// The labels of `ds`, or `None` when it has none.
    pub fn load(ds: &Dataset) -> Result<Option<Self>> {
        let Some(info) = &ds.manifest().labels else {
            return Ok(None);
        };
        let Some(all) = ds.labels()? else {
            return Ok(None);
        };
        // The verifier guarantees every label is -1 or below num_classes, so narrowing is exact.
        Ok(Some(match Self::bytes_per_node(info.num_classes) {
            2 => Labels::I16(all.into_iter().map(|l| l as i16).collect()),
            4 => Labels::I32(all.into_iter().map(|l| l as i32).collect()),
            _ => Labels::I64(all),
        }))
    }

    pub fn len(&self) -> usize {
        match self {
            Labels::I16(v) => v.len(),
            Labels::I32(v) => v.len(),
            Labels::I64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Memory held.
    pub fn bytes(&self) -> u64 {
        match self {
            Labels::I16(v) => v.len() as u64 * 2,
            Labels::I32(v) => v.len() as u64 * 4,
            Labels::I64(v) => v.len() as u64 * 8,
        }
    }

    /// The labels of `ids` (each below [`Self::len`]) as i64, written to `out`.
    pub fn gather_into(&self, ids: &[u64], out: &mut Vec<i64>) {
        out.clear();
        match self {
            Labels::I16(v) => out.extend(ids.iter().map(|&i| i64::from(v[i as usize]))),
            Labels::I32(v) => out.extend(ids.iter().map(|&i| i64::from(v[i as usize]))),
            Labels::I64(v) => out.extend(ids.iter().map(|&i| v[i as usize])),
        }
    }
}
