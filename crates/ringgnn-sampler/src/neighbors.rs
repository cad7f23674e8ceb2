//! Where neighbor ids come from: the sources behind one [`NeighborSource::fetch`]. `Memory`
//! indexes the neighbor file loaded into RAM ([`Indices`]); `Disk` reads only the pages holding
//! the wanted entries ([`DiskNeighbors`], `neighbors/disk.rs`). Every source returns the same ids
//! for the same positions, so samples never depend on it. A fetch of 32-bit positions that
//! cannot read them where they lie goes through a 64-bit copy (`neighbors/copied.rs`), in memory
//! and from disk alike.

mod copied;
mod disk;

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

pub(crate) use copied::{fetch_copied, first_bad};
pub use disk::{DiskNeighbors, Reopen};
use ringgnn_io::{CoalesceOptions, IoStats, PreadBatch, ReadBatch};
use ringgnn_store::manifest::IndexDtype;
use ringgnn_store::Dataset;

use crate::{Error, Result};

/// The neighbor file held in memory, at its on-disk width.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Indices {
    U32(Vec<u32>),
    U64(Vec<u64>),
}

impl Indices {
    /// Load the first `num_edges` entries of the neighbor file `path`.
    pub fn load(path: &Path, dtype: IndexDtype, num_edges: u64) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut f = File::open(path).map_err(io)?;
        let n = usize::try_from(num_edges).map_err(|_| {
            Error::Corrupt(format!(
                "{num_edges} edges do not fit in memory on this machine"
            ))
        })?;
        // Read straight into the typed vector: no second copy of a file that may be gigabytes.
        Ok(match dtype {
            IndexDtype::U32 => {
                let mut v = vec![0u32; n];
                f.read_exact(bytemuck::cast_slice_mut(&mut v)).map_err(io)?;
                v.iter_mut().for_each(|x| *x = u32::from_le(*x));
                Indices::U32(v)
            }
            IndexDtype::U64 => {
                let mut v = vec![0u64; n];
                f.read_exact(bytemuck::cast_slice_mut(&mut v)).map_err(io)?;
                v.iter_mut().for_each(|x| *x = u64::from_le(*x));
                Indices::U64(v)
            }
        })
    }

    pub fn len(&self) -> usize {
        match self {
            Indices::U32(v) => v.len(),
            Indices::U64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, pos: u64) -> Option<u64> {
        let i = usize::try_from(pos).ok()?;
        match self {
            Indices::U32(v) => v.get(i).map(|&x| x as u64),
            Indices::U64(v) => v.get(i).copied(),
        }
    }
}

/// The error for edge position `p` beyond the `len` entries of a neighbor file in memory.
fn beyond(p: u64, len: usize) -> Error {
    Error::Corrupt(format!(
        "edge position {p} is beyond the {len} entries of the neighbor file; the offset index \
         does not match it, rebuild the dataset"
    ))
}

/// Where a sampler gets neighbor ids from.
pub enum NeighborSource {
    /// The whole neighbor file in RAM, shared (read-only) by every sampler that holds it.
    Memory(Arc<Indices>),
    /// Coalesced page reads through a [`ReadBatch`] (pread, io_uring, ...).
    Disk(DiskNeighbors),
}

impl NeighborSource {
    /// Load the neighbor file of `ds` into memory.
    pub fn memory(ds: &Dataset) -> Result<Self> {
        let m = ds.manifest();
        Indices::load(&ds.path_of("indices")?, m.graph.indices_dtype, m.num_edges)
            .map(|ix| NeighborSource::Memory(Arc::new(ix)))
    }

    /// Read the neighbor file of `ds` with buffered `pread`s.
    pub fn pread(ds: &Dataset, opts: CoalesceOptions) -> Result<Self> {
        let path = ds.path_of("indices")?;
        let file = File::open(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        Ok(Self::disk(
            Box::new(PreadBatch::new(file)),
            &path,
            ds.manifest().graph.indices_dtype,
            opts,
        ))
    }

    /// Read the neighbor file `path` (entries of `dtype`) through any [`ReadBatch`] backend,
    /// for example an io_uring one; `path` only names the file in errors.
    pub fn disk(
        reader: Box<dyn ReadBatch>,
        path: &Path,
        dtype: IndexDtype,
        opts: CoalesceOptions,
    ) -> Self {
        NeighborSource::Disk(DiskNeighbors::new(reader, path, dtype, opts))
    }

    /// Another reader of the same neighbor file for a thread of its own
    /// ([`DiskNeighbors::another`]): `None` in memory (every thread reads the one copy) or
    /// where the source cannot open one.
    pub fn another(&self) -> Option<Result<NeighborSource>> {
        match self {
            NeighborSource::Memory(_) => None,
            NeighborSource::Disk(d) => d.another().map(|r| r.map(NeighborSource::Disk)),
        }
    }

    /// Bytes of its read buffer (none in memory).
    pub fn buffer_bytes(&self) -> u64 {
        match self {
            NeighborSource::Memory(_) => 0,
            NeighborSource::Disk(d) => d.buffer_bytes(),
        }
    }

    /// "memory", or the name of the read backend ("pread", "uring", ...).
    pub fn name(&self) -> &'static str {
        match self {
            NeighborSource::Memory(_) => "memory",
            NeighborSource::Disk(d) => d.name(),
        }
    }

    /// `vals[i] = indices[vals[i]]` for every `i` (see [`DiskNeighbors::fetch_in_place`]), with
    /// the first entry (in position order) not below `below`, and its position, if any;
    /// `keys`: the sort's workspace, lent by the caller.
    pub fn fetch_in_place(
        &mut self,
        vals: &mut [u64],
        below: u64,
        keys: &mut Vec<u64>,
    ) -> Result<Option<(u64, u64)>> {
        match self {
            NeighborSource::Memory(ix) => {
                let mut bad: Option<(u64, u64)> = None;
                for v in vals.iter_mut() {
                    let p = *v;
                    *v = ix.get(p).ok_or_else(|| beyond(p, ix.len()))?;
                    if *v >= below && bad.is_none_or(|b| p < b.0) {
                        bad = Some((p, *v));
                    }
                }
                Ok(bad)
            }
            NeighborSource::Disk(d) => d.fetch_in_place(vals, below, keys),
        }
    }

    /// Bytes of its fetch's workspace (see [`DiskNeighbors::workspace_bytes`]; none in
    /// memory).
    pub fn workspace_bytes(&self) -> u64 {
        match self {
            NeighborSource::Memory(_) => 0,
            NeighborSource::Disk(d) => d.workspace_bytes(),
        }
    }

    /// Cumulative I/O counters (all zero for the memory source).
    pub fn stats(&self) -> IoStats {
        match self {
            NeighborSource::Memory(_) => IoStats::default(),
            NeighborSource::Disk(d) => d.stats(),
        }
    }

    /// Stop disk reads between waves once `flag` is set (the memory source has no waves).
    pub fn set_cancel(&mut self, flag: Arc<std::sync::atomic::AtomicBool>) {
        if let NeighborSource::Disk(d) = self {
            d.set_cancel(flag);
        }
    }

    /// `out[i] = indices[positions[i]]` for every `i`.
    pub fn fetch(&mut self, positions: &[u64], out: &mut [u64]) -> Result<()> {
        match self {
            NeighborSource::Memory(ix) => {
                for (o, &p) in out.iter_mut().zip(positions) {
                    *o = ix.get(p).ok_or_else(|| beyond(p, ix.len()))?;
                }
                Ok(())
            }
            NeighborSource::Disk(d) => d.fetch(positions, out),
        }
    }
}
