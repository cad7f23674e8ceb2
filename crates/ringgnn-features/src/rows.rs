//! Where feature rows come from: the layout of `features.bin` ([`FeatureFile`]) and the two
//! sources of its bytes ([`RowSource`]): a copy of the file in memory, or page-aligned reads
//! coalesced by [`ringgnn_io::coalesce_pages`] through a [`ReadBatch`] backend into one reused
//! [`AlignedBuf`], so the same requests work with `O_DIRECT`. Also the dtype conversion to f32.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
use half::{bf16, f16};
pub use ringgnn_io::ReadCount;
use ringgnn_io::{open_backend, BackendKind, CoalesceOptions, PageReader, ReadBatch, ALIGN};
use ringgnn_store::manifest::{FeatureDtype, FeatureInfo};
use ringgnn_store::Dataset;

use crate::{Error, Result};

/// The feature file of a dataset and its row layout (`docs/FORMAT.md`, "Features").
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureFile {
    pub path: PathBuf,
    pub info: FeatureInfo,
    pub num_nodes: u64,
}

impl FeatureFile {
    /// The features of `ds`, or [`Error::NoFeatures`].
    pub fn of(ds: &Dataset) -> Result<Self> {
        let Some(info) = ds.manifest().features.clone() else {
            return Err(Error::NoFeatures {
                dir: ds.dir().to_path_buf(),
            });
        };
        Ok(FeatureFile {
            path: ds.path_of("features")?,
            info,
            num_nodes: ds.num_nodes(),
        })
    }

    /// Values per row.
    pub fn dim(&self) -> usize {
        self.info.dim as usize
    }

    /// Bytes of one stored row.
    pub fn row_bytes(&self) -> usize {
        self.info.row_bytes as usize
    }

    /// `Ok` if `id` is a row of the file, else [`Error::NodeOutOfRange`] naming it.
    pub fn check_id(&self, id: u64) -> Result<()> {
        if id < self.num_nodes {
            Ok(())
        } else {
            Err(Error::NodeOutOfRange {
                id,
                num_nodes: self.num_nodes,
            })
        }
    }

    /// The meaningful bytes of the file (rows and the padding between them), as in memory.
    pub fn load(&self) -> Result<Arc<Vec<u8>>> {
        let io = |source| Error::Io {
            path: self.path.clone(),
            source,
        };
        let n = usize::try_from(self.info.payload_bytes(self.num_nodes)).map_err(|_| {
            Error::Input(format!(
                "{}: the features do not fit in memory on this machine; read them from disk",
                self.path.display()
            ))
        })?;
        let mut bytes = vec![0u8; n];
        File::open(&self.path)
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(io)?;
        Ok(Arc::new(bytes))
    }
}

/// The bytes of feature rows, from memory or from disk.
pub enum RowSource {
    /// The whole payload of `features.bin`, shared read-only by every gatherer that holds it.
    Memory(Arc<Vec<u8>>),
    /// Coalesced page reads through a [`ReadBatch`] backend.
    Disk(PageReader),
}

impl RowSource {
    /// A copy of `file` in memory.
    pub fn memory(file: &FeatureFile) -> Result<Self> {
        Ok(RowSource::Memory(file.load()?))
    }

    /// Reads of `file` through `reader`. The buffer holds `opts.buffer` bytes, grown to one run
    /// and to the pages one row can touch (a row larger than a page spans up to
    /// `ceil(row_bytes / 4096) + 1` pages).
    pub fn disk(file: &FeatureFile, reader: Box<dyn ReadBatch>, opts: CoalesceOptions) -> Self {
        let row_pages = if file.row_bytes() <= ALIGN {
            1
        } else {
            file.row_bytes().div_ceil(ALIGN) + 1
        };
        RowSource::Disk(PageReader::new(reader, opts, row_pages * ALIGN))
    }

    /// Open `file` with the backend `kind` (`O_DIRECT` if `direct` and the filesystem allows
    /// it). Also returns why `Auto` fell back to pread, for the caller's one log line.
    pub fn open(
        file: &FeatureFile,
        kind: BackendKind,
        direct: bool,
        opts: CoalesceOptions,
    ) -> Result<(Self, Option<String>)> {
        let (reader, why) = open_backend(kind, &file.path, direct).map_err(|source| Error::Io {
            path: file.path.clone(),
            source,
        })?;
        Ok((Self::disk(file, reader, opts), why))
    }

    /// Stop disk reads between waves once `flag` is set (see [`PageReader::set_cancel`]); the
    /// memory source has no waves to stop.
    pub fn set_cancel(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        if let RowSource::Disk(d) = self {
            d.set_cancel(flag);
        }
    }

    /// "memory", or the name of the read backend ("pread", "uring", ...).
    pub fn name(&self) -> &'static str {
        match self {
            RowSource::Memory(_) => "memory",
            RowSource::Disk(d) => d.reader().name(),
        }
    }

    /// Call `f(k, row)` with the stored bytes of row `ids[k]`, for every `k`. `ids` must be
    /// ascending and below `file.num_nodes` (checked by the callers, which sort anyway).
    pub fn for_each_row(
        &mut self,
        file: &FeatureFile,
        ids: &[u64],
        mut f: impl FnMut(usize, &[u8]),
    ) -> Result<ReadCount> {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids must be ascending");
        let rb = file.row_bytes();
        let mut count = ReadCount::default();
        match self {
            RowSource::Memory(bytes) => {
                for (k, &id) in ids.iter().enumerate() {
                    let at = file.info.row_offset(id) as usize;
                    f(k, &bytes[at..at + rb]);
                }
            }
            RowSource::Disk(d) => {
                let range = |k: usize| (file.info.row_offset(ids[k]), rb);
                count = d
                    .read_ranges(ids.len(), range, f)
                    .map_err(|source| Error::Io {
                        path: file.path.clone(),
                        source,
                    })?;
            }
        }
        Ok(count)
    }
}

/// Widen one stored row (`out.len()` values, little-endian `dtype`) to f32.
pub fn decode_row(dtype: FeatureDtype, row: &[u8], out: &mut [f32]) {
    debug_assert_eq!(row.len(), out.len() * dtype.size() as usize);
    // Fast path: on little-endian hosts the stored bytes are already native values whenever
    // they are aligned (always for rows in the AlignedBuf, whose rows start at multiples of
    // the value size); f16 then widens with the F16C instructions where the CPU has them.
    #[cfg(target_endian = "little")]
    match dtype {
        FeatureDtype::F32 => {
            if let Ok(v) = bytemuck::try_cast_slice::<u8, f32>(row) {
                return out.copy_from_slice(v);
            }
        }
        FeatureDtype::F16 => {
            if let Ok(v) = bytemuck::try_cast_slice::<u8, u16>(row) {
                return v.reinterpret_cast::<f16>().convert_to_f32_slice(out);
            }
        }
        FeatureDtype::Bf16 => {
            if let Ok(v) = bytemuck::try_cast_slice::<u8, u16>(row) {
                return v.reinterpret_cast::<bf16>().convert_to_f32_slice(out);
            }
        }
    }
    decode_row_bytewise(dtype, row, out)
}

/// [`decode_row`] one value at a time, for any alignment and byte order.
fn decode_row_bytewise(dtype: FeatureDtype, row: &[u8], out: &mut [f32]) {
    match dtype {
        FeatureDtype::F32 => {
            for (o, b) in out.iter_mut().zip(row.chunks_exact(4)) {
                *o = f32::from_le_bytes(b.try_into().unwrap());
            }
        }
        FeatureDtype::F16 => {
            for (o, b) in out.iter_mut().zip(row.chunks_exact(2)) {
                *o = f16::from_le_bytes(b.try_into().unwrap()).to_f32();
            }
        }
        FeatureDtype::Bf16 => {
            for (o, b) in out.iter_mut().zip(row.chunks_exact(2)) {
                *o = bf16::from_le_bytes(b.try_into().unwrap()).to_f32();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_rows_decode_like_aligned_ones() {
        let vals = [1.5f32, -2.25, 1e-3, 65504.0, f32::INFINITY];
        for dtype in [FeatureDtype::F32, FeatureDtype::F16, FeatureDtype::Bf16] {
            let mut bytes = vec![0u8; 1];
            for &x in &vals {
                match dtype {
                    FeatureDtype::F32 => bytes.extend(x.to_le_bytes()),
                    FeatureDtype::F16 => bytes.extend(f16::from_f32(x).to_le_bytes()),
                    FeatureDtype::Bf16 => bytes.extend(bf16::from_f32(x).to_le_bytes()),
                }
            }
            // A u64 copy is 8-byte aligned; offset 1 of the original is not even 2-aligned.
            let n = bytes.len() - 1;
            let mut words = vec![0u64; n.div_ceil(8)];
            bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..n].copy_from_slice(&bytes[1..]);
            let aligned = &bytemuck::cast_slice::<u64, u8>(&words)[..n];
            let (mut a, mut b, mut c) = ([0f32; 5], [0f32; 5], [0f32; 5]);
            decode_row(dtype, aligned, &mut a);
            decode_row(dtype, &bytes[1..], &mut b);
            decode_row_bytewise(dtype, aligned, &mut c);
            assert_eq!(a, b, "{dtype:?}");
            assert_eq!(a, c, "{dtype:?}");
            assert_eq!(a[0], 1.5, "{dtype:?}");
        }
    }
}
