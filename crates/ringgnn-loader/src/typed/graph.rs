//! [`TypedGraph`]: the relations of a heterogeneous dataset as every sampler of a process
//! shares them, and the per-thread [`HeteroSampler`] made from it (its disk relations' read
//! backends are its own). Opening and the samplers are `ringgnn_sampler::TypedGraph`'s (the one
//! place a typed graph is opened, which the server uses too); this adds the dataset's path and
//! fanouts given by relation name.

use std::path::{Path, PathBuf};

use ringgnn_io::BackendKind;
use ringgnn_sampler::{Fanout, HeteroSampler};

use crate::{Error, Result};

/// A heterogeneous dataset's relations, opened once per process (see the module docs).
pub struct TypedGraph {
    path: PathBuf,
    inner: ringgnn_sampler::TypedGraph,
}

/// A sampler made by [`TypedGraph::sampler`], with its backend's name ("memory", "uring",
/// "uring-direct" or "pread") and why `Auto` fell back to pread.
pub struct OpenedSampler {
    pub sampler: HeteroSampler,
    pub backend: String,
    pub fallback: Option<String>,
}

impl TypedGraph {
    /// Open the relations of the dataset at `path`: `kind` None loads every neighbor file, else
    /// the files of `memory_relations` are loaded and the others read with `kind` (`O_DIRECT`
    /// with `direct`). With `times`, the dataset's edge and node times are attached (loaded with
    /// the neighbor files held); without, none of their files is opened: batches are then
    /// sampled without times.
    pub fn open(
        path: &Path,
        kind: Option<BackendKind>,
        direct: bool,
        memory_relations: &[String],
        times: bool,
    ) -> Result<Self> {
        let inner = ringgnn_sampler::TypedGraph::open_with_times(
            path,
            kind,
            direct,
            memory_relations,
            times,
        )?;
        Ok(TypedGraph {
            path: path.to_path_buf(),
            inner,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Node type names, in the order of the samplers' type indices.
    pub fn types(&self) -> &[String] {
        &self.inner.types
    }

    /// Node count of each type.
    pub fn counts(&self) -> &[u64] {
        &self.inner.counts
    }

    /// Relation names `SRC:REL:DST`, in the order of the samplers' relation indices.
    pub fn relations(&self) -> Vec<String> {
        self.inner
            .relations
            .iter()
            .map(|r| r.name.clone())
            .collect()
    }

    /// Whether every neighbor file is held in memory.
    pub fn in_memory(&self) -> bool {
        self.inner.relations.iter().all(|r| r.memory.is_some())
    }

    /// Bytes held: offset indexes, the neighbor files in memory, and the times attached and
    /// held (edge times with their neighbor file, node times).
    pub fn bytes(&self) -> u64 {
        self.inner.bytes()
    }

    /// A sampler over this graph with `fanouts` for every relation (by name); `disk`, when
    /// given, reads the relations not in memory instead of the graph's backend.
    pub fn sampler(
        &self,
        fanouts: &[(String, Vec<Fanout>)],
        replace: bool,
        disk: Option<BackendKind>,
    ) -> Result<OpenedSampler> {
        // Only an input error can come of it: it stays one of this crate's (`Error::Input`).
        let ordered = ringgnn_sampler::fanouts_in_order(&self.relations(), fanouts.to_vec())
            .map_err(|e| Error::Input(e.to_string()))?;
        let (sampler, backend, fallback) = self.inner.sampler(ordered, replace, disk)?;
        Ok(OpenedSampler {
            sampler,
            backend,
            fallback,
        })
    }
}
