//! Typed graphs with edge times for the temporal tests (`temporal.rs`, `compact.rs`,
//! `threads.rs`): each relation's lists sorted by (time, source id) as the format keeps them, its
//! files written page-padded as a disk source reads them, and random ones of a given [`Shape`].

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

/// Edge times for the seven-node fixture's 8 edges, written to `dir/edge_times.bin`: the times
/// and the file.
pub fn fixture_times(dir: &Path) -> (Vec<i64>, PathBuf) {
    let times: Vec<i64> = vec![4, 1, 7, 7, 2, 9, 0, 5];
    let bytes = times.iter().flat_map(|x| x.to_le_bytes()).collect();
    let path = write_padded(dir, "edge_times.bin", bytes);
    (times, path)
}

/// Which node types of a [`random_graph`] have node times (each in `0..span`).
#[derive(Clone, Copy)]
pub enum NodeTimes {
    None,
    All {
        span: u64,
    },
    /// Each type with probability `1 / one_in`.
    OneIn {
        one_in: u64,
        span: u64,
    },
}

/// What a [`random_graph`] looks like: up to `max_nodes` nodes a type; each list a hub of
/// `hub.0 + below(hub.1)` entries with probability `1 / hub_one_in`, else of `below(short)`;
/// edge times in `0..100`; drawn from the random stream `stream` of the seed.
#[derive(Clone, Copy)]
pub struct Shape {
    pub stream: (u64, u64),
    pub max_nodes: u64,
    pub hub_one_in: u64,
    pub hub: (u64, u64),
    pub short: u64,
    pub node_times: NodeTimes,
}

/// A random typed graph of `types` node types and `rels` relations between random pairs of
/// them, of shape `shape`.
pub fn random_graph(seed: u64, types: usize, rels: usize, shape: Shape) -> Graph {
    let mut rng = ringgnn_store::rng::stream(seed, shape.stream.0, shape.stream.1);
    let mut below = |n: u64| ringgnn_store::rng::below(&mut rng, n);
    let num_nodes: Vec<u64> = (0..types).map(|_| 1 + below(shape.max_nodes)).collect();
    let rels = (0..rels)
        .map(|_| {
            let (src, dst) = (below(types as u64) as usize, below(types as u64) as usize);
            let lists: Vec<Vec<(u64, i64)>> = (0..num_nodes[dst])
                .map(|_| {
                    let d = match below(shape.hub_one_in) {
                        0 => shape.hub.0 + below(shape.hub.1),
                        _ => below(shape.short),
                    };
                    (0..d)
                        .map(|_| (below(num_nodes[src]), below(100) as i64))
                        .collect()
                })
                .collect();
            Rel::new(src, dst, &lists)
        })
        .collect();
    let node_times = num_nodes
        .iter()
        .map(|&n| {
            let span = match shape.node_times {
                NodeTimes::None => return None,
                NodeTimes::All { span } => span,
                NodeTimes::OneIn { one_in, span } => match below(one_in) {
                    0 => span,
                    _ => return None,
                },
            };
            Some((0..n).map(|_| below(span) as i64).collect())
        })
        .collect();
    Graph {
        num_nodes,
        rels,
        node_times,
    }
}
