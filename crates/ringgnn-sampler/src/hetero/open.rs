//! [`TypedGraph::open`]: a heterogeneous dataset opened once for every sampler over it (its
//! node types, and each relation's offset index and neighbor file, held in memory or read from
//! disk as the caller places it), and [`TypedGraph::sampler`]: a [`HeteroSampler`] over it with
//! its own read backends. The one place a typed sampler is opened; the server and the Python
//! binding both take it from here. A homogeneous dataset opens as its one-type case: node type
//! `node`, relation `node:to:node` (the names the Python side gives it). A dataset's own edge and
//! node times (docs/FORMAT.md, "Times") are attached when it is opened (unless opened without
//! them, [`TypedGraph::open_with_times`]); others may be attached by file ([`TypedGraph::set_edge_times`], [`TypedGraph::set_node_times`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ringgnn_io::{open_backend, BackendKind, CoalesceOptions, PageCache};
use ringgnn_store::hetero::{split_relation, AnyManifest, Part, ONE_RELATION, ONE_TYPE};
use ringgnn_store::manifest::{IndexDtype, TimeRange};
use ringgnn_store::Dataset;

use super::temporal::check_file;
use super::{EdgeTimes, HeteroRelation, HeteroSampler, TimeKeys};
use crate::neighbors::{DiskNeighbors, Indices, NeighborSource};
use crate::{Error, Fanout, Offsets, Result};

/// One relation `SRC:REL:DST` as every sampler over the graph shares it.
pub struct SharedRelation {
    pub name: String,
    /// Its source and destination types (indices into [`TypedGraph::types`]).
    pub src: usize,
    pub dst: usize,
    pub indptr: Offsets,
    /// The largest in-degree (what one node may draw with `Fanout::All`).
    pub max_degree: u64,
    /// The neighbor file, when held in memory.
    pub memory: Option<Arc<Indices>>,
    pub file: PathBuf,
    pub dtype: IndexDtype,
    /// Hot pages of the neighbor file read from disk, shared by every sampler
    /// ([`TypedGraph::share_page_cache`]).
    pub pages: Option<Arc<PageCache>>,
    /// Its edge-time file, and its times when held in memory.
    pub times: Option<(PathBuf, Option<Arc<[i64]>>)>,
    /// The directory of the dataset whose own file `times` is (an error found reading it
    /// sends to `ringgnn verify` it); `None` for a file the caller attached.
    pub times_of: Option<PathBuf>,
    /// The range of its edge times, when the dataset records it (where a search from disk
    /// looks first: [`EdgeTimes::with_range`]).
    pub time_range: Option<TimeRange>,
    /// Its time keys file and their bounds, where its times are read from disk and the dataset
    /// has keys (`edge_time_keys.bin`): the search from disk reads them instead of the times
    /// ([`TimeKeys`]).
    pub time_keys: Option<(PathBuf, Arc<[i64]>)>,
}

impl SharedRelation {
    pub fn num_edges(&self) -> u64 {
        self.indptr.last().unwrap_or(0)
    }
}

/// Fanouts given by relation name (every relation once, in any order) put in the order of
/// `names` (a typed graph's or engine's relations): an unknown name or a relation left out is
/// an input error naming it.
pub fn fanouts_in_order(
    names: &[String],
    given: Vec<(String, Vec<Fanout>)>,
) -> Result<Vec<Vec<Fanout>>> {
    let mut out: Vec<Option<Vec<Fanout>>> = vec![None; names.len()];
    for (r, hops) in given {
        let Some(i) = names.iter().position(|x| *x == r) else {
            return Err(Error::Input(format!(
                "fanouts: unknown relation '{r}' (the dataset has: {})",
                names.join(", ")
            )));
        };
        out[i] = Some(hops);
    }
    out.into_iter()
        .zip(names)
        .map(|(f, r)| {
            f.ok_or_else(|| {
                Error::Input(format!(
                    "fanouts has no entry for relation {r}; give every relation (0 skips it at a hop)"
                ))
            })
        })
        .collect()
}

/// A heterogeneous dataset opened for sampling; see the module docs.
pub struct TypedGraph {
    /// Node types and their counts, in the manifest's order.
    pub types: Vec<String>,
    pub counts: Vec<u64>,
    /// Relations in the manifest's order.
    pub relations: Vec<SharedRelation>,
    /// How relations not in memory are read (`None`: every one is in memory).
    pub kind: Option<BackendKind>,
    pub direct: bool,
    /// Per node type, its node times (in memory), if it has them.
    pub node_times: Vec<Option<Arc<[i64]>>>,
}

impl TypedGraph {
    /// Open the dataset in `dir` (a homogeneous one as its one-type case): every relation's
    /// offset index, and its neighbor file loaded when `kind` is `None` or it is in
    /// `memory_relations` (else read with `kind` by each sampler). A name in
    /// `memory_relations` that is not a relation is refused.
    pub fn open(
        dir: &Path,
        kind: Option<BackendKind>,
        direct: bool,
        memory_relations: &[String],
    ) -> Result<Self> {
        Self::open_with_times(dir, kind, direct, memory_relations, true)
    }

    /// [`Self::open`], attaching the dataset's own edge and node times only when `times`: a
    /// caller that samples without times opens none of their files (at R-MAT 23 the edge times
    /// held with the neighbor file are 1 GB).
    pub fn open_with_times(
        dir: &Path,
        kind: Option<BackendKind>,
        direct: bool,
        memory_relations: &[String],
        times: bool,
    ) -> Result<Self> {
        let mut homogeneous = None;
        // Types with their counts, and per relation (name, source, destination, its files).
        let (types, counts, parts): (Vec<String>, Vec<u64>, Vec<_>) = match AnyManifest::read(dir)?
        {
            AnyManifest::Homogeneous(m) => {
                let ds = Dataset::open(dir)?;
                homogeneous = Some(Dataset::open(dir)?);
                (
                    vec![ONE_TYPE.into()],
                    vec![m.num_nodes],
                    vec![(ONE_RELATION.to_string(), 0, 0, ds)],
                )
            }
            AnyManifest::Heterogeneous(m) => {
                let types: Vec<String> = m.node_types.keys().cloned().collect();
                let index = |t: &str| types.iter().position(|x| x == t).expect("by the manifest");
                let mut parts = Vec::with_capacity(m.relations.len());
                for r in m.relations.keys() {
                    let (s, _, d) = split_relation(r)?;
                    let ds = Dataset::open_part(dir, &Part::Relation(r.clone()))?;
                    parts.push((r.clone(), index(s), index(d), ds));
                }
                let counts = types.iter().map(|t| m.node_types[t].num_nodes).collect();
                (types, counts, parts)
            }
        };
        for r in memory_relations {
            if !parts.iter().any(|p| p.0 == *r) {
                return Err(Error::Input(format!(
                    "memory_relations: unknown relation '{r}' (the dataset has: {})",
                    parts
                        .iter()
                        .map(|p| p.0.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let mut relations = Vec::with_capacity(parts.len());
        let mut edge_times = Vec::new();
        for (r, src, dst, ds) in parts {
            if let Some(p) = ds.edge_times_path().filter(|_| times) {
                ds.check_times()?;
                let keys = ds.edge_time_keys_path();
                edge_times.push((r.clone(), p, ds.edge_time_range(), keys));
            }
            let indptr = Offsets::load(&ds)?;
            let file = ds.path_of("indices")?;
            let dtype = ds.manifest().graph.indices_dtype;
            let memory = if kind.is_none() || memory_relations.contains(&r) {
                Some(Arc::new(Indices::load(
                    &file,
                    dtype,
                    ds.manifest().num_edges,
                )?))
            } else {
                None
            };
            relations.push(SharedRelation {
                name: r,
                src,
                dst,
                max_degree: indptr.degrees().max().unwrap_or(0),
                indptr,
                memory,
                file,
                dtype,
                pages: None,
                times: None,
                times_of: None,
                time_range: None,
                time_keys: None,
            });
        }
        // The dataset's own times: each relation's edge times, each type's node times.
        let node_times = match &homogeneous {
            _ if !times => vec![None; types.len()],
            Some(ds) => vec![ds.node_times()?.map(Arc::from)],
            None => types
                .iter()
                .map(|t| {
                    let ds = Dataset::open_part(dir, &Part::Node(t.clone()))?;
                    Ok(ds.node_times()?.map(Arc::from))
                })
                .collect::<Result<Vec<_>>>()?,
        };
        let mut graph = TypedGraph {
            node_times,
            types,
            counts,
            relations,
            kind,
            direct,
        };
        for (r, p, range, keys) in edge_times {
            graph.attach_edge_times(&r, &p, Some(dir))?;
            if let Some(k) = keys {
                graph.set_edge_time_keys(&r, &k)?;
            }
            let rel = graph.relations.iter_mut().find(|x| x.name == r);
            rel.expect("set above").time_range = range;
        }
        Ok(graph)
    }

    /// Give relation `relation` the edge times in the file `path` (int64 little-endian, one per
    /// entry of its neighbor file), loaded into memory when its neighbor file is, else read by
    /// each sampler with the graph's backend. The file's length is checked here.
    pub fn set_edge_times(&mut self, relation: &str, path: &Path) -> Result<()> {
        self.attach_edge_times(relation, path, None)
    }

    /// [`Self::set_edge_times`] of the dataset `dataset`'s own file when `Some` (its errors
    /// send to `ringgnn verify`), else of a file the caller gives.
    fn attach_edge_times(
        &mut self,
        relation: &str,
        path: &Path,
        dataset: Option<&Path>,
    ) -> Result<()> {
        let names = || {
            self.relations
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
        };
        let Some(i) = self.relations.iter().position(|r| r.name == relation) else {
            return Err(Error::Input(format!(
                "edge times: unknown relation '{relation}' (the dataset has: {})",
                names().join(", ")
            )));
        };
        let r = &mut self.relations[i];
        let memory = match r.memory {
            Some(_) => Some(EdgeTimes::load_of(path, r.num_edges(), dataset)?),
            None => {
                // Checked now, not first by a sampler: its length, and that it opens.
                check_file(path, r.num_edges(), true, dataset)?;
                std::fs::File::open(path).map_err(|source| Error::Io {
                    path: path.to_path_buf(),
                    source,
                })?;
                None
            }
        };
        r.times = Some((path.to_path_buf(), memory));
        r.times_of = dataset.map(Path::to_path_buf);
        r.time_range = None;
        r.time_keys = None;
        Ok(())
    }

    /// Give relation `relation` the time keys of its edge times in the file `path` (an
    /// `edge_time_keys.bin` derived from them, docs/FORMAT.md "Times"): where its times are read
    /// from disk, each sampler's search reads the keys, then only the times they leave
    /// undecided (the same samples); times held in memory are searched there, without keys. The
    /// file's length and bounds are checked here. Times attached later drop the keys.
    pub fn set_edge_time_keys(&mut self, relation: &str, path: &Path) -> Result<()> {
        let Some(r) = self.relations.iter_mut().find(|r| r.name == relation) else {
            return Err(Error::Input(format!(
                "time keys: unknown relation '{relation}'"
            )));
        };
        match &r.times {
            None => Err(Error::Input(format!(
                "time keys for relation '{relation}', which has no edge times: attach its \
                 times first"
            ))),
            Some((_, Some(_))) => Ok(()),
            Some((_, None)) => {
                TimeKeys::check_file(path, r.num_edges())?;
                r.time_keys = Some((path.to_path_buf(), TimeKeys::bounds(path)?));
                Ok(())
            }
        }
    }

    /// Give node type `node_type` its node times (one per node, in memory).
    pub fn set_node_times(&mut self, node_type: &str, times: Arc<[i64]>) -> Result<()> {
        let Some(t) = self.types.iter().position(|x| x == node_type) else {
            return Err(Error::Input(format!(
                "node times: unknown node type '{node_type}' (the dataset has: {})",
                self.types.join(", ")
            )));
        };
        if times.len() as u64 != self.counts[t] {
            return Err(Error::Input(format!(
                "node type {node_type}: {} node times for {} nodes; give one time per node",
                times.len(),
                self.counts[t]
            )));
        }
        self.node_times[t] = Some(times);
        Ok(())
    }

    /// Give the relations read from disk `bytes` of hot pages, an even share each (each its own
    /// [`PageCache`], which every sampler over the graph reads through).
    pub fn share_page_cache(&mut self, bytes: u64) {
        let on_disk = self.relations.iter().filter(|r| r.memory.is_none()).count() as u64;
        for r in self.relations.iter_mut().filter(|r| r.memory.is_none()) {
            r.pages = PageCache::new(bytes / on_disk).map(Arc::new);
        }
    }

    /// Bytes held: offset indexes, the neighbor files and edge times in memory, the bounds of
    /// time keys, node times.
    pub fn bytes(&self) -> u64 {
        let times = |t: &Option<Arc<[i64]>>| t.as_ref().map_or(0, |t| 8 * t.len() as u64);
        let rels: u64 = self
            .relations
            .iter()
            .map(|r| {
                r.indptr.bytes()
                    + r.memory
                        .as_ref()
                        .map_or(0, |m| m.len() as u64 * r.dtype.size())
                    + r.times.as_ref().map_or(0, |(_, t)| times(t))
                    + r.time_keys.as_ref().map_or(0, |(_, b)| 8 * b.len() as u64)
            })
            .sum();
        rels + self.node_times.iter().map(times).sum::<u64>()
    }

    /// A sampler with `fanouts` (one list per relation, in the graph's order) and `replace`,
    /// reading the relations not in memory with `disk` (the graph's backend when `None`)
    /// through their hot pages, if any; with the name of how it reads ("memory", "pread",
    /// "uring", "uring-direct") and why a backend fell back, if one did.
    pub fn sampler(
        &self,
        fanouts: Vec<Vec<Fanout>>,
        replace: bool,
        disk: Option<BackendKind>,
    ) -> Result<(HeteroSampler, String, Option<String>)> {
        if fanouts.len() != self.relations.len() {
            return Err(Error::Input(format!(
                "{} fanout lists for {} relations: give one per relation",
                fanouts.len(),
                self.relations.len()
            )));
        }
        let disk = disk.or(self.kind);
        // A sampler reads one relation at a time, so its disk relations split one read buffer
        // of the homogeneous sampler's size (8 MiB, what the memory plans count per sampler)
        // instead of holding one each: 6 relations on disk held 48 MiB per thread. An edge-time
        // file on disk takes a share too.
        let on_disk: usize = self
            .relations
            .iter()
            .filter(|r| r.memory.is_none())
            .map(|r| 1 + usize::from(r.times.is_some()))
            .sum();
        let coalesce = {
            let d = CoalesceOptions::default();
            let share = (d.buffer / on_disk.max(1)) / ringgnn_io::ALIGN * ringgnn_io::ALIGN;
            CoalesceOptions {
                buffer: share.max(d.run_bytes()),
                ..d
            }
        };
        let (mut rels, mut fallback, mut name) = (Vec::new(), None, String::from("memory"));
        let mut keys = Vec::new();
        for (r, fan) in self.relations.iter().zip(fanouts) {
            let source = match (&r.memory, disk) {
                (Some(ix), _) => NeighborSource::Memory(ix.clone()),
                (None, kind) => {
                    let kind = kind.expect("a relation not in memory has a disk backend");
                    let (reader, why) =
                        open_backend(kind, &r.file, self.direct).map_err(|source| Error::Io {
                            path: r.file.clone(),
                            source,
                        })?;
                    fallback = fallback.or(why);
                    let d = DiskNeighbors::new(reader, &r.file, r.dtype, coalesce)
                        .with_cache(r.pages.clone())
                        .reopening_file(self.direct)?;
                    NeighborSource::Disk(d)
                }
            };
            // One name for the sampler: the disk backend's when any relation is read from disk.
            if name == "memory" || source.name() != "memory" {
                name = source.name().to_string();
            }
            let times = match &r.times {
                None => None,
                Some((_, Some(t))) => Some(EdgeTimes::Memory(t.clone())),
                Some((path, None)) => {
                    let kind = disk.expect("a relation not in memory has a disk backend");
                    // With keys, the search reads them in the time file's share of the buffer,
                    // and the times only where the keys leave a run undecided (mostly a page).
                    let mut share = coalesce;
                    if let Some((p, bounds)) = &r.time_keys {
                        let direct = (kind, self.direct);
                        let (k, why) =
                            TimeKeys::open(p, r.num_edges(), bounds.clone(), direct, coalesce)?;
                        fallback = fallback.or(why);
                        keys.push((rels.len(), k));
                        share.buffer = share.run_bytes();
                    }
                    // Its threads' readers too read the file opened now.
                    let (t, why) = EdgeTimes::open_of(
                        path,
                        r.num_edges(),
                        r.times_of.as_deref(),
                        (kind, self.direct),
                        share,
                    )?;
                    fallback = fallback.or(why);
                    Some(t.with_range(r.time_range))
                }
            };
            rels.push(HeteroRelation {
                src: r.src,
                dst: r.dst,
                indptr: r.indptr.clone(),
                source,
                fanouts: fan,
                times,
            });
        }
        if self.direct && name == "uring" {
            name = "uring-direct".into();
        }
        let mut s = HeteroSampler::new(self.counts.clone(), rels, replace)?;
        s.set_node_times(self.node_times.clone())?;
        for (r, k) in keys {
            s.set_time_keys(r, k)?;
        }
        Ok((s, name, fallback))
    }
}
