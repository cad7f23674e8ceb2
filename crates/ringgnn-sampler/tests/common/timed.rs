//! Typed graphs with edge times for the temporal tests (`temporal.rs`, `compact.rs`): each
//! relation's lists sorted by (time, source id) as the format keeps them, and its files written
//! page-padded as a disk source reads them.

use std::path::{Path, PathBuf};

/// One relation: its offsets, entries and, per entry, its time.
pub struct Rel {
    pub src: usize,
    pub dst: usize,
    pub indptr: Vec<u64>,
    pub indices: Vec<u64>,
    pub times: Vec<i64>,
}

impl Rel {
    /// From per destination node its `(source, time)` entries, sorted here by (time, source).
    pub fn new(src: usize, dst: usize, lists: &[Vec<(u64, i64)>]) -> Self {
        let (mut indptr, mut indices, mut times) = (vec![0], vec![], vec![]);
        for l in lists {
            let mut l = l.clone();
            l.sort_by_key(|&(s, t)| (t, s));
            indices.extend(l.iter().map(|e| e.0));
            times.extend(l.iter().map(|e| e.1));
            indptr.push(indices.len() as u64);
        }
        Rel {
            src,
            dst,
            indptr,
            indices,
            times,
        }
    }
}

/// A typed graph: node counts per type, relations, node times per type (if any).
pub struct Graph {
    pub num_nodes: Vec<u64>,
    pub rels: Vec<Rel>,
    pub node_times: Vec<Option<Vec<i64>>>,
}

/// `bytes` written to `dir/name`, zero-padded to a whole page as the format's files are.
pub fn write_padded(dir: &Path, name: &str, mut bytes: Vec<u8>) -> PathBuf {
    let path = dir.join(name);
    bytes.resize(bytes.len().div_ceil(4096) * 4096, 0);
    std::fs::write(&path, bytes).unwrap();
    path
}
