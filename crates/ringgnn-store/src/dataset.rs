//! Reading a dataset: the manifest, the in-memory offset index, and point reads of neighbor
//! lists, their edge times, labels and splits; where the time files are, for the samplers.
//! Opening checks that every file is present, readable, of the size the manifest records and
//! as large as the manifest's counts need; `verify` does the full (slow) check.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::hetero::{AnyManifest, Part, ONE_RELATION, ONE_TYPE};
use crate::manifest::{IndexDtype, Manifest, TimeRange};
use crate::{Error, IoContext, Result};

pub struct Dataset {
    dir: PathBuf,
    manifest: Manifest,
    /// The graph files; None in a view of a node type of a heterogeneous dataset (no graph).
    indptr: Option<File>,
    indices: Option<File>,
}

impl Dataset {
    /// Open the homogeneous dataset in `dir` (a heterogeneous one is refused with advice: open
    /// its parts with [`Self::open_part`]).
    pub fn open(dir: &Path) -> Result<Self> {
        Self::with_manifest(dir, Manifest::read(dir)?)
    }

    /// Open one part of the heterogeneous dataset in `dir` as a homogeneous dataset: a node type
    /// (features, labels, splits; no graph) or a relation (see [`crate::hetero`]). A homogeneous
    /// dataset is the one-type case: its node type [`ONE_TYPE`] and its relation
    /// [`ONE_RELATION`] are the dataset itself.
    pub fn open_part(dir: &Path, part: &Part) -> Result<Self> {
        match AnyManifest::read(dir)? {
            AnyManifest::Heterogeneous(m) => {
                let view = m.view(part)?;
                Self::with_manifest(dir, view)
            }
            AnyManifest::Homogeneous(m) => match part {
                Part::Node(t) if t == ONE_TYPE => Self::with_manifest(dir, m),
                Part::Relation(r) if r == ONE_RELATION => Self::with_manifest(dir, m),
                _ => crate::input_err!(
                    "{}: a homogeneous dataset has one node type, '{ONE_TYPE}', and one relation, \
                     '{ONE_RELATION}'; it has no {part}",
                    dir.display()
                ),
            },
        }
    }

    /// `dir`'s files as `manifest` lists them: each present and readable (opened once here, so
    /// that a reader opened later, by a sampler, a loader's thread or a server, does not meet a
    /// missing or unreadable file first), with its recorded size, and that size holding what the
    /// manifest's counts put in it ([`needed_bytes`]; the time files' only when they are read,
    /// [`Self::check_times`]).
    fn with_manifest(dir: &Path, manifest: Manifest) -> Result<Self> {
        for (key, f) in &manifest.files {
            let p = dir.join(&f.path);
            let meta = std::fs::metadata(&p).at(&p)?;
            if !meta.is_file() {
                return Err(Error::Corrupt(format!(
                    "{}: not a regular file (the manifest lists it as files.{key}); the dataset \
                     is damaged: run `ringgnn verify {}` and rebuild it",
                    p.display(),
                    dir.display()
                )));
            }
            let len = meta.len();
            if len != f.bytes {
                return Err(Error::Corrupt(format!(
                    "{}: {len} bytes on disk but the manifest (files.{key}) records {}; the \
                     dataset is damaged: run `ringgnn verify {}` and rebuild it",
                    p.display(),
                    f.bytes,
                    dir.display()
                )));
            }
            // Time files are checked where they are read (`check_times`): a run without times
            // opens a dataset whose time files are damaged.
            if !key.ends_with("times") {
                check_payload(&manifest, dir, key, len)?;
            }
            File::open(&p).at(&p)?;
        }
        let open = |key: &str| -> Result<Option<File>> {
            match manifest.files.get(key) {
                None => Ok(None),
                Some(f) => {
                    let p = dir.join(&f.path);
                    File::open(&p).at(&p).map(Some)
                }
            }
        };
        Ok(Dataset {
            indptr: open("indptr")?,
            indices: open("indices")?,
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    /// The graph file `key`, or an error saying this part has no graph.
    fn graph_file(&self, key: &str) -> Result<&File> {
        let f = if key == "indptr" {
            &self.indptr
        } else {
            &self.indices
        };
        f.as_ref().ok_or_else(|| {
            Error::Input(format!(
                "{}: this node type has no graph of its own; open one of the dataset's relations",
                self.dir.display()
            ))
        })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn num_nodes(&self) -> u64 {
        self.manifest.num_nodes
    }
    pub fn num_edges(&self) -> u64 {
        self.manifest.num_edges
    }
    pub fn path_of(&self, key: &str) -> Result<PathBuf> {
        Ok(self.dir.join(&self.manifest.file(key)?.path))
    }

    fn read_at(&self, file: &File, key: &str, buf: &mut [u8], off: u64) -> Result<()> {
        file.read_exact_at(buf, off)
            .map_err(|e| Error::io(self.dir.join(&self.manifest.files[key].path), e))
    }

    /// The range of node `v`'s neighbor list in `indices`.
    pub fn range(&self, v: u64) -> Result<(u64, u64)> {
        if v >= self.num_nodes() {
            return crate::input_err!(
                "node {v} is out of range: the dataset has {} nodes",
                self.num_nodes()
            );
        }
        let mut b = [0u8; 16];
        self.read_at(self.graph_file("indptr")?, "indptr", &mut b, v * 8)?;
        let lo = u64::from_le_bytes(b[..8].try_into().unwrap());
        let hi = u64::from_le_bytes(b[8..].try_into().unwrap());
        if lo > hi || hi > self.num_edges() {
            return Err(Error::Corrupt(format!(
                "indptr[{v}..{}] = [{lo}, {hi}] is not a valid range; run `ringgnn verify`",
                v + 1
            )));
        }
        Ok((lo, hi))
    }

    /// In-neighbors of `v` (sources of edges into v, duplicates kept), in stored order:
    /// ascending, or by (time, source) when the edges have times ([`Self::edge_times`]).
    pub fn neighbors(&self, v: u64) -> Result<Vec<u64>> {
        let (lo, hi) = self.range(v)?;
        let w = self.manifest.graph.indices_dtype.size();
        let mut b = vec![0u8; ((hi - lo) * w) as usize];
        self.read_at(self.graph_file("indices")?, "indices", &mut b, lo * w)?;
        Ok(match self.manifest.graph.indices_dtype {
            IndexDtype::U32 => b
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()) as u64)
                .collect(),
            IndexDtype::U64 => b
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        })
    }

    /// Whether `src -> dst` is an edge: a binary search in `dst`'s ascending neighbor list, one
    /// small read per step, so a hub's list is never loaded whole. A list ordered by time is not
    /// ascending by source: it is scanned, in pieces.
    pub fn has_edge(&self, src: u64, dst: u64) -> Result<bool> {
        let (mut lo, mut hi) = self.range(dst)?;
        let w = self.manifest.graph.indices_dtype.size();
        if self.manifest.edge_times.is_some() {
            const PIECE: u64 = 1 << 14;
            let mut b = vec![0u8; (PIECE * w) as usize];
            while lo < hi {
                let n = (hi - lo).min(PIECE);
                let b = &mut b[..(n * w) as usize];
                self.read_at(self.graph_file("indices")?, "indices", b, lo * w)?;
                if b.chunks_exact(w as usize).any(|c| {
                    let mut x = [0u8; 8];
                    x[..c.len()].copy_from_slice(c);
                    u64::from_le_bytes(x) == src
                }) {
                    return Ok(true);
                }
                lo += n;
            }
            return Ok(false);
        }
        let mut b = [0u8; 8];
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            self.read_at(
                self.graph_file("indices")?,
                "indices",
                &mut b[..w as usize],
                mid * w,
            )?;
            let x = u64::from_le_bytes(b);
            if x == src {
                return Ok(true);
            }
            if x < src {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(false)
    }

    /// The times of `v`'s in-edges, aligned with [`Self::neighbors`] (ascending); an error
    /// when the edges have no times.
    pub fn edge_times(&self, v: u64) -> Result<Vec<i64>> {
        let (lo, hi) = self.range(v)?;
        let p = self.edge_times_path().ok_or_else(|| {
            Error::Input(format!(
                "{}: the edges have no times (build the dataset with --edge-time)",
                self.dir.display()
            ))
        })?;
        let f = File::open(&p).at(&p)?;
        let mut t = vec![0i64; (hi - lo) as usize];
        f.read_exact_at(bytemuck::cast_slice_mut(&mut t), lo * 8)
            .at(&p)?;
        for x in &mut t {
            *x = i64::from_le(*x);
        }
        Ok(t)
    }

    /// An error unless the time files listed hold what the counts need (one int64 per edge,
    /// per node), naming the file, both sizes and `ringgnn verify`: what a reader of them checks
    /// first, so that a short file is not a bare "failed to fill whole buffer" at its first read.
    pub fn check_times(&self) -> Result<()> {
        for key in ["edge_times", "edge_time_keys", "node_times"] {
            if self.manifest.files.contains_key(key) {
                let p = self.path_of(key)?;
                let len = std::fs::metadata(&p).at(&p)?.len();
                check_payload(&self.manifest, &self.dir, key, len)?;
            }
        }
        Ok(())
    }

    /// `edge_times.bin` (int64, one per entry of `indices`), when the edges have times.
    pub fn edge_times_path(&self) -> Option<PathBuf> {
        self.time_file("edge_times")
    }

    /// `edge_time_keys.bin` ([`crate::time_keys`]), when the edges have times and the dataset
    /// was built with it (every build of this version; older ones have none, and a reader then
    /// searches `edge_times.bin` alone).
    pub fn edge_time_keys_path(&self) -> Option<PathBuf> {
        self.time_file("edge_time_keys")
    }

    /// `node_times.bin` (int64, one per node), when the nodes have times.
    pub fn node_times_path(&self) -> Option<PathBuf> {
        self.time_file("node_times")
    }

    /// The smallest and largest edge time, when the edges have times.
    pub fn edge_time_range(&self) -> Option<TimeRange> {
        self.manifest.edge_times
    }

    /// The smallest and largest node time, when the nodes have times.
    pub fn node_time_range(&self) -> Option<TimeRange> {
        self.manifest.node_times
    }

    /// Every node's time; None when the nodes have no times.
    pub fn node_times(&self) -> Result<Option<Vec<i64>>> {
        if self.manifest.node_times.is_none() {
            return Ok(None);
        }
        self.check_times()?;
        self.read_i64_like("node_times", self.num_nodes()).map(Some)
    }

    fn time_file(&self, key: &str) -> Option<PathBuf> {
        self.manifest.files.get(key).map(|f| self.dir.join(&f.path))
    }

    /// The whole offset index (V+1 u64): the only graph structure a sampler keeps in memory.
    pub fn load_indptr(&self) -> Result<Vec<u64>> {
        self.read_i64_like("indptr", self.num_nodes() + 1)
            .map(|v| v.into_iter().map(|x| x as u64).collect())
    }

    /// `indptr` read in pieces of at most `chunk` offsets, each passed to `each` in order, so
    /// that what keeps the index in another form never holds the whole `u64` array at once.
    pub fn read_indptr_chunks(&self, chunk: usize, mut each: impl FnMut(&[u64])) -> Result<()> {
        let p = self.path_of("indptr")?;
        let f = File::open(&p).at(&p)?;
        let count = self.num_nodes() + 1;
        let mut buf = vec![0u64; (chunk.max(1) as u64).min(count) as usize];
        let mut at = 0u64;
        while at < count {
            let n = (count - at).min(buf.len() as u64) as usize;
            f.read_exact_at(bytemuck::cast_slice_mut(&mut buf[..n]), at * 8)
                .at(&p)?;
            for x in &mut buf[..n] {
                *x = u64::from_le(*x);
            }
            each(&buf[..n]);
            at += n as u64;
        }
        Ok(())
    }

    /// Labels (-1 = unlabeled); None when the dataset has none.
    pub fn labels(&self) -> Result<Option<Vec<i64>>> {
        if self.manifest.labels.is_none() {
            return Ok(None);
        }
        self.read_i64_like("labels", self.num_nodes()).map(Some)
    }

    /// Node ids of split `name`.
    pub fn split(&self, name: &str) -> Result<Vec<i64>> {
        let Some(&n) = self.manifest.splits.get(name) else {
            let have: Vec<_> = self.manifest.splits.keys().cloned().collect();
            return crate::input_err!(
                "the dataset has no split '{name}'; it has: {}",
                if have.is_empty() {
                    "none".into()
                } else {
                    have.join(", ")
                }
            );
        };
        self.read_i64_like(&format!("split.{name}"), n)
    }

    /// The pairs of edge split `name`, (src, dst) interleaved (`2 * edges` values), and the
    /// number of fixed negatives per pair.
    pub fn edge_split(&self, name: &str) -> Result<(Vec<i64>, u64)> {
        let info = self.edge_split_info(name)?;
        Ok((
            self.read_i64_like(&format!("edge_split.{name}"), 2 * info.edges)?,
            info.negatives,
        ))
    }

    /// The fixed negatives of edge split `name`: `negatives` destinations per pair, row-major.
    pub fn edge_negatives(&self, name: &str) -> Result<(Vec<i64>, u64)> {
        let info = self.edge_split_info(name)?;
        if info.negatives == 0 {
            return crate::input_err!(
                "edge split '{name}' has no stored negatives (the training split never has; held-out splits have them unless built with --link-negatives 0)"
            );
        }
        Ok((
            self.read_i64_like(
                &format!("edge_negatives.{name}"),
                info.edges * info.negatives,
            )?,
            info.negatives,
        ))
    }

    fn edge_split_info(&self, name: &str) -> Result<crate::manifest::EdgeSplitInfo> {
        match self.manifest.edge_splits.get(name) {
            Some(info) => Ok(info.clone()),
            None => {
                let have: Vec<_> = self.manifest.edge_splits.keys().cloned().collect();
                crate::input_err!(
                    "the dataset has no edge split '{name}'; it has: {} (edge splits are made by ringgnn convert --link-split)",
                    if have.is_empty() {
                        "none".into()
                    } else {
                        have.join(", ")
                    }
                )
            }
        }
    }

    fn read_i64_like(&self, key: &str, count: u64) -> Result<Vec<i64>> {
        let p = self.path_of(key)?;
        let f = File::open(&p).at(&p)?;
        // Straight into the result: no second copy of the file's bytes (V can be large).
        let mut v = vec![0i64; count as usize];
        f.read_exact_at(bytemuck::cast_slice_mut(&mut v), 0)
            .at(&p)?;
        for x in &mut v {
            *x = i64::from_le(*x);
        }
        Ok(v)
    }
}

/// An error unless `len` bytes of the file `key` of the dataset in `dir` hold what the
/// manifest's counts put in it.
fn check_payload(manifest: &Manifest, dir: &Path, key: &str, len: u64) -> Result<()> {
    let Some((payload, what)) = needed_bytes(manifest, key) else {
        return Ok(());
    };
    if len < payload {
        return Err(Error::Corrupt(format!(
            "{}: {len} bytes, but {what} need {payload} bytes (padded to {}); the dataset is \
             damaged: run `ringgnn verify {}` and rebuild it",
            dir.join(&manifest.files[key].path).display(),
            crate::manifest::pad_to_page(payload),
            dir.display()
        )));
    }
    Ok(())
}

/// The payload the manifest's counts put in the file `key`, and what it holds in words, for the
/// files whose size the counts alone give (the graph, labels and times).
fn needed_bytes(m: &Manifest, key: &str) -> Option<(u64, String)> {
    let (v, e) = (m.num_nodes, m.num_edges);
    let times = |n: u64, of: &str| format!("{n} {of} times (one int64 per {of})");
    let what = match key {
        "indptr" => format!("the offsets of {v} nodes (V + 1 int64)"),
        "indices" => format!(
            "{e} neighbor entries ({} bytes each)",
            m.graph.indices_dtype.size()
        ),
        "labels" => format!("{v} labels (one int64 per node)"),
        "node_times" => times(v, "node"),
        "edge_times" => times(e, "edge"),
        "edge_time_keys" => format!(
            "the time keys of {e} edges (a {}-byte header, then one u16 per edge)",
            crate::time_keys::HEADER_BYTES
        ),
        _ => return None,
    };
    Some((crate::verify::payload_bytes(m, key)?, what))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of the fixture `tests/fixtures/v3-times-tiny` (8 nodes, 5 edges, both times) in
    /// `dir`, its manifest's entry `key` recording `bytes` and the file cut to them.
    fn cut_copy(dir: &Path, key: &str, bytes: u64) -> PathBuf {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/v3-times-tiny");
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
        let mut m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        m["files"][key]["bytes"] = bytes.into();
        std::fs::write(dir.join("manifest.json"), m.to_string()).unwrap();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join(format!("{key}.bin")))
            .unwrap();
        f.set_len(bytes).unwrap();
        dir.join(format!("{key}.bin"))
    }

    #[test]
    fn a_file_shorter_than_its_counts_is_refused_naming_both_sizes() {
        for (key, words) in [
            (
                "node_times",
                "8 node times (one int64 per node) need 64 bytes",
            ),
            (
                "edge_times",
                "5 edge times (one int64 per edge) need 40 bytes",
            ),
            (
                "indptr",
                "the offsets of 8 nodes (V + 1 int64) need 72 bytes",
            ),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let path = cut_copy(tmp.path(), key, 32);
            let want = format!(
                "{}: 32 bytes, but {words} (padded to 4096); the dataset is damaged: run \
                 `ringgnn verify {}` and rebuild it",
                path.display(),
                tmp.path().display()
            );
            // The graph when the dataset is opened; the times when they are read (a run
            // without times opens the dataset).
            let e = match key {
                "indptr" => Dataset::open(tmp.path()).err().expect("a short file"),
                _ => {
                    let ds = Dataset::open(tmp.path()).unwrap();
                    if key == "node_times" {
                        ds.node_times().unwrap_err();
                    }
                    ds.check_times().unwrap_err()
                }
            };
            assert!(matches!(e, Error::Corrupt(_)), "{e}");
            assert_eq!(e.to_string(), want);
        }
    }

    #[test]
    fn a_listed_file_that_is_not_a_regular_file_is_refused_without_opening_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = cut_copy(tmp.path(), "node_times", 4096);
        std::fs::remove_file(&path).unwrap();
        // (A FIFO there would block an open for reading until a writer came.)
        std::fs::create_dir(&path).unwrap();
        let e = Dataset::open(tmp.path())
            .err()
            .expect("a directory")
            .to_string();
        assert!(
            e.contains(
                "node_times.bin: not a regular file (the manifest lists it as files.node_times)"
            ),
            "{e}"
        );
        std::fs::remove_dir(&path).unwrap();
        let e = Dataset::open(tmp.path())
            .err()
            .expect("missing")
            .to_string();
        assert!(e.contains("node_times.bin"), "{e}");
    }
}
