//! [`OffsetIndex`]: a dataset's offset index and the facts about its graph a memory plan needs
//! before anything else is loaded. Apart from [`crate::Graph`] so that what reads it to plan
//! (the hot-page preload, [`crate::hot_pages`]) does not depend on the graph that uses the plan.

use std::path::PathBuf;
use std::sync::Arc;

use ringgnn_store::manifest::IndexDtype;
use ringgnn_store::Dataset;

use crate::bounds::{sample_bound, SampleBound};
use crate::{Result, SampleOptions};

/// The offset index of a dataset (`V + 1` offsets into the neighbor file) and the facts about
/// the graph a memory plan needs before anything else is loaded.
#[derive(Clone, Debug)]
pub struct OffsetIndex {
    pub(crate) indptr: Arc<[u64]>,
    pub(crate) max_degree: u64,
    pub(crate) num_edges: u64,
    pub(crate) dtype: IndexDtype,
    pub(crate) indices_path: PathBuf,
}

impl OffsetIndex {
    /// Load the offset index of `ds`.
    pub fn load(ds: &Dataset) -> Result<Self> {
        let indptr: Arc<[u64]> = ds.load_indptr()?.into();
        let max_degree = indptr
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .max()
            .unwrap_or(0);
        let m = ds.manifest();
        Ok(OffsetIndex {
            indptr,
            max_degree,
            num_edges: m.num_edges,
            dtype: m.graph.indices_dtype,
            indices_path: ds.path_of("indices")?,
        })
    }

    pub fn indptr(&self) -> &Arc<[u64]> {
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
        self.indptr.len() as u64 * 8
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
