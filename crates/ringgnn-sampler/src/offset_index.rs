//! The in-memory offset index. [`Offsets`]: a graph's `V + 1` offsets into its neighbor file,
//! held in 4 bytes per entry where it can be; [`OffsetIndex`]: those offsets and the facts about
//! the graph a memory plan needs before anything else is loaded. Apart from [`crate::Graph`] so
//! that what reads it to plan (the hot-page preload, [`crate::hot_pages`]) does not depend on
//! the graph that uses the plan.
//!
//! Layout of [`Offsets`] (exact: every entry is the file's):
//! - **narrow**: every offset fits `u32` (a relation of fewer than 2^32 edges): one `u32` each;
//! - **blocked**: otherwise `u32` deltas and one `u64` base per block of `1 << BLOCK_SHIFT`
//!   (65,536) entries: entry `i` is `base[i >> 16] + delta[i]`, the base being the block's
//!   first offset;
//! - **wide**: `u64` offsets, only where one block spans 2^32 edges or more (65,536 nodes
//!   averaging 65,536 in-edges), or where the offsets do not ascend (a corrupt file, kept as
//!   read so that the check names its entries).
//!
//! [`Offsets::bytes_for`] is what a plan counts before loading: exact unless the index is wide.

use std::path::PathBuf;
use std::sync::Arc;

use ringgnn_store::manifest::IndexDtype;
use ringgnn_store::Dataset;

use crate::bounds::{sample_bound, SampleBound};
use crate::{Result, SampleOptions};

/// Entries per block of a blocked index: `1 << BLOCK_SHIFT`.
pub const BLOCK_SHIFT: u32 = 16;

/// Offsets read from the file per piece while loading (8 MiB of `u64`).
const LOAD_CHUNK: usize = 1 << 20;

/// A graph's offset index: `len()` offsets into its neighbor file, node `v`'s neighbors at
/// `range(v)`. Cloning shares the entries.
#[derive(Clone, Debug)]
pub struct Offsets {
    entries: Entries,
}

#[derive(Clone, Debug)]
enum Entries {
    Narrow(Arc<[u32]>),
    Blocked {
        deltas: Arc<[u32]>,
        bases: Arc<[u64]>,
        shift: u32,
    },
    Wide(Arc<[u64]>),
}

impl Offsets {
    /// Load the offset index of `ds`, reading its file in pieces: the whole `u64` array is
    /// never in memory unless the index is wide.
    pub fn load(ds: &Dataset) -> Result<Self> {
        let mut b = Builder::new(ds.num_nodes() as usize + 1, BLOCK_SHIFT);
        ds.read_indptr_chunks(LOAD_CHUNK, |c| b.extend(c))?;
        Ok(b.finish())
    }

    /// The offsets `values`, in blocks of `1 << shift` entries when they do not fit `u32`
    /// (tests force the blocked layout with a small block).
    pub fn with_block_shift(values: &[u64], shift: u32) -> Self {
        let mut b = Builder::new(values.len(), shift);
        b.extend(values);
        b.finish()
    }

    /// Bytes of the index of `entries` offsets ending at `edges`, as [`Self::bytes`] counts
    /// them (exact unless the index turns out wide: then `8 * entries`).
    pub fn bytes_for(entries: u64, edges: u64) -> u64 {
        if edges <= u32::MAX as u64 {
            4 * entries
        } else {
            4 * entries + 8 * entries.div_ceil(1 << BLOCK_SHIFT)
        }
    }

    /// Offset `i` (`i < len()`).
    #[inline]
    pub fn get(&self, i: usize) -> u64 {
        match &self.entries {
            Entries::Narrow(d) => d[i] as u64,
            Entries::Blocked {
                deltas,
                bases,
                shift,
            } => bases[i >> shift] + deltas[i] as u64,
            Entries::Wide(w) => w[i],
        }
    }

    /// Node `v`'s neighbor range `(start, end)` in the neighbor file.
    #[inline]
    pub fn range(&self, v: usize) -> (u64, u64) {
        (self.get(v), self.get(v + 1))
    }

    /// Node `v`'s degree (`end - start`, 0 where the offsets do not ascend).
    #[inline]
    pub fn degree(&self, v: usize) -> u64 {
        let (s, e) = self.range(v);
        e.saturating_sub(s)
    }

    pub fn len(&self) -> usize {
        match &self.entries {
            Entries::Narrow(d) | Entries::Blocked { deltas: d, .. } => d.len(),
            Entries::Wide(w) => w.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The last offset (the edge count of a well-formed index).
    pub fn last(&self) -> Option<u64> {
        self.len().checked_sub(1).map(|i| self.get(i))
    }

    /// The offsets in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The `len() - 1` degrees in order (as [`Self::degree`]).
    pub fn degrees(&self) -> impl ExactSizeIterator<Item = u64> + Clone + '_ {
        (0..self.len().saturating_sub(1)).map(|v| self.degree(v))
    }

    /// The offsets as `u64` (a copy).
    pub fn to_vec(&self) -> Vec<u64> {
        self.iter().collect()
    }

    /// Bytes the index holds in memory.
    pub fn bytes(&self) -> u64 {
        match &self.entries {
            Entries::Narrow(d) => 4 * d.len() as u64,
            Entries::Blocked { deltas, bases, .. } => {
                4 * deltas.len() as u64 + 8 * bases.len() as u64
            }
            Entries::Wide(w) => 8 * w.len() as u64,
        }
    }

    /// "narrow", "blocked" or "wide" (see the module docs).
    pub fn layout(&self) -> &'static str {
        match &self.entries {
            Entries::Narrow(_) => "narrow",
            Entries::Blocked { .. } => "blocked",
            Entries::Wide(_) => "wide",
        }
    }
}

impl From<Vec<u64>> for Offsets {
    fn from(v: Vec<u64>) -> Self {
        Offsets::with_block_shift(&v, BLOCK_SHIFT)
    }
}

impl From<&[u64]> for Offsets {
    fn from(v: &[u64]) -> Self {
        Offsets::with_block_shift(v, BLOCK_SHIFT)
    }
}

impl From<Arc<[u64]>> for Offsets {
    fn from(v: Arc<[u64]>) -> Self {
        Offsets::with_block_shift(&v, BLOCK_SHIFT)
    }
}

/// Builds [`Offsets`] of a known length from offsets given in pieces: blocked as they come (a
/// base at each block's first entry), made narrow in place at the end when every offset fits
/// `u32`, and wide from the first entry a block cannot hold. The entries are allocated once,
/// at their final size, and never copied.
struct Builder {
    shift: u32,
    deltas: Arc<[u32]>,
    bases: Vec<u64>,
    wide: Option<Arc<[u64]>>,
    count: usize,
    filled: usize,
    prev: u64,
}

/// `n` zeros, allocated once where they will stay.
fn zeros<T: Copy + Default>(n: usize) -> Arc<[T]> {
    std::iter::repeat_n(T::default(), n).collect()
}

impl Builder {
    fn new(count: usize, shift: u32) -> Self {
        Builder {
            shift,
            deltas: zeros(count),
            bases: Vec::new(),
            wide: None,
            count,
            filled: 0,
            prev: 0,
        }
    }

    fn extend(&mut self, values: &[u64]) {
        let (i0, mask) = (self.filled, (1usize << self.shift) - 1);
        assert!(
            i0 + values.len() <= self.count,
            "more offsets than the index holds"
        );
        self.filled += values.len();
        if let Some(w) = &mut self.wide {
            Arc::get_mut(w).expect("not shared yet")[i0..i0 + values.len()].copy_from_slice(values);
            return;
        }
        let deltas = Arc::get_mut(&mut self.deltas).expect("not shared yet");
        for (k, &x) in values.iter().enumerate() {
            let i = i0 + k;
            if i & mask == 0 {
                self.bases.push(x);
            }
            let base = self.bases[i >> self.shift];
            match u32::try_from(x.wrapping_sub(base)) {
                Ok(d) if x >= base && x >= self.prev => {
                    deltas[i] = d;
                    self.prev = x;
                }
                _ => {
                    self.widen(i);
                    self.filled = i;
                    return self.extend(&values[k..]);
                }
            }
        }
    }

    /// Keep every offset as `u64` from entry `i` on, the `i` before it converted.
    fn widen(&mut self, i: usize) {
        let mut w = zeros::<u64>(self.count);
        let out = Arc::get_mut(&mut w).expect("just made");
        for (k, &d) in self.deltas[..i].iter().enumerate() {
            out[k] = self.bases[k >> self.shift] + d as u64;
        }
        self.deltas = zeros(0);
        self.bases = Vec::new();
        self.wide = Some(w);
    }

    fn finish(mut self) -> Offsets {
        assert_eq!(
            self.filled, self.count,
            "fewer offsets than the index holds"
        );
        let entries = match self.wide {
            Some(w) => Entries::Wide(w),
            None if self.prev <= u32::MAX as u64 => {
                let d = Arc::get_mut(&mut self.deltas).expect("not shared yet");
                for (i, x) in d.iter_mut().enumerate() {
                    // Fits: every offset is at most the last, which fits u32.
                    *x += self.bases[i >> self.shift] as u32;
                }
                Entries::Narrow(self.deltas)
            }
            None => Entries::Blocked {
                deltas: self.deltas,
                bases: self.bases.into(),
                shift: self.shift,
            },
        };
        Offsets { entries }
    }
}

/// The offset index of a dataset (`V + 1` offsets into the neighbor file) and the facts about
/// the graph a memory plan needs before anything else is loaded.
#[derive(Clone, Debug)]
pub struct OffsetIndex {
    pub(crate) indptr: Offsets,
    pub(crate) max_degree: u64,
    pub(crate) num_edges: u64,
    pub(crate) dtype: IndexDtype,
    pub(crate) indices_path: PathBuf,
}

impl OffsetIndex {
    /// Load the offset index of `ds`.
    pub fn load(ds: &Dataset) -> Result<Self> {
        let indptr = Offsets::load(ds)?;
        let max_degree = indptr.degrees().max().unwrap_or(0);
        let m = ds.manifest();
        Ok(OffsetIndex {
            indptr,
            max_degree,
            num_edges: m.num_edges,
            dtype: m.graph.indices_dtype,
            indices_path: ds.path_of("indices")?,
        })
    }

    pub fn indptr(&self) -> &Offsets {
        &self.indptr
    }

    /// The width of the neighbor file's entries.
    pub fn dtype(&self) -> IndexDtype {
        self.dtype
    }

    pub fn indices_path(&self) -> &std::path::Path {
        &self.indices_path
    }

    pub fn num_nodes(&self) -> u64 {
        self.indptr.len() as u64 - 1
    }

    pub fn num_edges(&self) -> u64 {
        self.num_edges
    }

    pub fn max_degree(&self) -> u64 {
        self.max_degree
    }

    /// Bytes of the offset index in memory.
    pub fn bytes(&self) -> u64 {
        self.indptr.bytes()
    }

    /// Bytes of the neighbor file's entries (what holding it in memory costs).
    pub fn neighbor_file_bytes(&self) -> u64 {
        self.num_edges.saturating_mul(self.dtype.size())
    }

    /// Upper bounds on one sample of `batch` seeds with `opts` (see [`sample_bound`]).
    pub fn bound(&self, batch: u64, opts: &SampleOptions) -> SampleBound {
        sample_bound(
            batch,
            &opts.fanouts,
            opts.replace,
            self.max_degree,
            self.num_nodes(),
            self.num_edges,
        )
    }
}
