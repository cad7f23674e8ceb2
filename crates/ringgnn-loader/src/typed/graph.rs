//! [`TypedGraph`]: the relations of a heterogeneous dataset as every sampler of a process
//! shares them (each offset index loaded once, the neighbor files the placement holds in memory
//! loaded once), and the per-thread [`HeteroSampler`] made from it (its disk relations' read
//! backends are its own).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ringgnn_io::{open_backend, BackendKind, CoalesceOptions};
use ringgnn_sampler::{Fanout, HeteroRelation, HeteroSampler, Indices, NeighborSource};
use ringgnn_store::hetero::{split_relation, HeteroManifest, Part};
use ringgnn_store::manifest::IndexDtype;
use ringgnn_store::Dataset;

use crate::{Error, Result};

/// One relation of a [`TypedGraph`].
struct SharedRelation {
    name: String,
    src: usize,
    dst: usize,
    indptr: Arc<[u64]>,
    /// The neighbor file, when it is held in memory.
    memory: Option<Arc<Indices>>,
    file: PathBuf,
    dtype: IndexDtype,
}

/// A heterogeneous dataset's relations, opened once per process (see the module docs).
pub struct TypedGraph {
    path: PathBuf,
    types: Vec<String>,
    counts: Vec<u64>,
    relations: Vec<SharedRelation>,
    /// How relations not in memory are read; `None`: every neighbor file is in memory.
    kind: Option<BackendKind>,
    direct: bool,
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
    /// with `direct`).
    pub fn open(
        path: &Path,
        kind: Option<BackendKind>,
        direct: bool,
        memory_relations: &[String],
    ) -> Result<Self> {
        let m = HeteroManifest::read(path)?;
        let types: Vec<String> = m.node_types.keys().cloned().collect();
        if let Some(r) = memory_relations
            .iter()
            .find(|r| !m.relations.contains_key(*r))
        {
            return Err(Error::Input(format!(
                "memory_relations: unknown relation '{r}' (the dataset has: {})",
                m.relations.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        let index = |t: &str| {
            types
                .iter()
                .position(|x| x == t)
                .expect("checked by the manifest")
        };
        let mut relations = Vec::new();
        for r in m.relations.keys() {
            let (s, _, d) = split_relation(r)?;
            let ds = Dataset::open_part(path, &Part::Relation(r.clone()))?;
            let indptr: Arc<[u64]> = ds.load_indptr()?.into();
            let file = ds.path_of("indices")?;
            let dtype = ds.manifest().graph.indices_dtype;
            let memory = if kind.is_none() || memory_relations.contains(r) {
                Some(Arc::new(Indices::load(
                    &file,
                    dtype,
                    ds.manifest().num_edges,
                )?))
            } else {
                None
            };
            relations.push(SharedRelation {
                name: r.clone(),
                src: index(s),
                dst: index(d),
                indptr,
                memory,
                file,
                dtype,
            });
        }
        let counts = types.iter().map(|t| m.node_types[t].num_nodes).collect();
        Ok(TypedGraph {
            path: path.to_path_buf(),
            types,
            counts,
            relations,
            kind,
            direct,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Node type names, in the order of the samplers' type indices.
    pub fn types(&self) -> &[String] {
        &self.types
    }

    /// Node count of each type.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Relation names `SRC:REL:DST`, in the order of the samplers' relation indices.
    pub fn relations(&self) -> Vec<String> {
        self.relations.iter().map(|r| r.name.clone()).collect()
    }

    /// Whether every neighbor file is held in memory.
    pub fn in_memory(&self) -> bool {
        self.relations.iter().all(|r| r.memory.is_some())
    }

    /// Bytes held: offset indexes and the neighbor files in memory.
    pub fn bytes(&self) -> u64 {
        self.relations
            .iter()
            .map(|r| {
                8 * r.indptr.len() as u64
                    + r.memory
                        .as_ref()
                        .map_or(0, |m| m.len() as u64 * r.dtype.size())
            })
            .sum()
    }

    /// A sampler over this graph with `fanouts` for every relation (by name); `disk`, when
    /// given, reads the relations not in memory instead of the graph's backend.
    pub fn sampler(
        &self,
        fanouts: &[(String, Vec<Fanout>)],
        replace: bool,
        disk: Option<BackendKind>,
    ) -> Result<OpenedSampler> {
        let disk = disk.or(self.kind);
        let mut given: BTreeMap<&str, &Vec<Fanout>> = BTreeMap::new();
        for (r, f) in fanouts {
            if !self.relations.iter().any(|x| x.name == *r) {
                return Err(Error::Input(format!(
                    "fanouts: unknown relation '{r}' (the dataset has: {})",
                    self.relations().join(", ")
                )));
            }
            given.insert(r, f);
        }
        // A sampler reads one relation at a time, so its disk relations split one read buffer
        // of the homogeneous sampler's size (8 MiB, what the memory plans count per sampler)
        // instead of holding one each: 6 relations on disk held 48 MiB per thread.
        let on_disk = self.relations.iter().filter(|r| r.memory.is_none()).count();
        let coalesce = {
            let d = CoalesceOptions::default();
            let share = (d.buffer / on_disk.max(1)) / ringgnn_io::ALIGN * ringgnn_io::ALIGN;
            CoalesceOptions {
                buffer: share.max(d.run_bytes()),
                ..d
            }
        };
        let (mut rels, mut fallback, mut name) = (Vec::new(), None, String::from("memory"));
        for r in &self.relations {
            let Some(fan) = given.remove(r.name.as_str()) else {
                return Err(Error::Input(format!(
                    "fanouts has no entry for relation {}; give every relation (0 skips it at a hop)",
                    r.name
                )));
            };
            let source = match (&r.memory, disk) {
                (Some(ix), _) => NeighborSource::Memory(ix.clone()),
                (None, kind) => {
                    let kind = kind.expect("a relation not in memory has a disk backend");
                    let (reader, why) = open_backend(kind, &r.file, self.direct)
                        .map_err(|e| ringgnn_store::Error::io(&r.file, e))?;
                    fallback = fallback.or(why);
                    NeighborSource::disk(reader, &r.file, r.dtype, coalesce)
                }
            };
            // One name for the sampler: the disk backend's when any relation is read from disk.
            if name == "memory" || source.name() != "memory" {
                name = source.name().to_string();
            }
            rels.push(HeteroRelation {
                src: r.src,
                dst: r.dst,
                indptr: r.indptr.clone(),
                source,
                fanouts: fan.clone(),
            });
        }
        let sampler = HeteroSampler::new(self.counts.clone(), rels, replace)?;
        if self.direct && name == "uring" {
            name = "uring-direct".into();
        }
        Ok(OpenedSampler {
            sampler,
            backend: name,
            fallback,
        })
    }
}
