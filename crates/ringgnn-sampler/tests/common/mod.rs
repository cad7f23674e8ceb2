//! Shared test helpers: tiny datasets built with the real `convert` from a text edge list, and
//! one sampler per backend over them.
#![allow(dead_code)]

use ringgnn_sampler::{Backend, CoalesceOptions, NeighborSampler, SampledSubgraph};
use ringgnn_store::{convert, ConvertOptions, Dataset, GraphOptions, NoProgress};
use tempfile::TempDir;

/// A dataset of the directed edges `src -> dst`, built by `convert` in a fresh tempdir.
pub fn build(edges: &[(u64, u64)], num_nodes: Option<u64>, undirected: bool) -> (TempDir, Dataset) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("edges.txt");
    let text: String = edges.iter().map(|(u, v)| format!("{u} {v}\n")).collect();
    std::fs::write(&input, text).unwrap();
    let opts = ConvertOptions {
        input,
        out: dir.path().join("ds"),
        format: None,
        graph: GraphOptions {
            undirected,
            num_nodes,
            memory: 128 << 20,
            ..Default::default()
        },
        features: None,
        feature_dtype: None,
        labels: None,
        split: None,
        seed: 0,
        overwrite: false,
    };
    convert(&opts, &NoProgress).unwrap();
    let ds = Dataset::open(&dir.path().join("ds")).unwrap();
    (dir, ds)
}

/// Coalescing settings worth comparing: the default, and the smallest possible (one page per
/// request, one page of buffer, so every hop takes many read batches).
pub fn coalesce_variants() -> [CoalesceOptions; 2] {
    [
        CoalesceOptions::default(),
        CoalesceOptions {
            max_run: 4096,
            buffer: 4096,
        },
    ]
}

/// One sampler per backend: memory, pread with default coalescing, pread with tiny runs.
pub fn samplers(ds: &Dataset, fanouts: &[i64], replace: bool) -> Vec<NeighborSampler> {
    let mut backends = vec![Backend::memory(ds).unwrap()];
    for opts in coalesce_variants() {
        backends.push(Backend::pread(ds, opts).unwrap());
    }
    backends
        .into_iter()
        .map(|b| NeighborSampler::open(ds, fanouts, replace, b).unwrap())
        .collect()
}

/// Sample with every backend, check they agree, return the common result.
pub fn sample_all(
    ds: &Dataset,
    fanouts: &[i64],
    replace: bool,
    seeds: &[u64],
    seed: u64,
) -> SampledSubgraph {
    let mut outs = samplers(ds, fanouts, replace)
        .into_iter()
        .map(|mut s| s.sample(seeds, seed, 0, 0, true).unwrap());
    let first = outs.next().unwrap();
    for other in outs {
        assert_eq!(first, other, "backends disagree");
    }
    first
}

/// The in-memory CSC of a dataset, for checking samples against.
pub fn csc(ds: &Dataset) -> (Vec<u64>, Vec<Vec<u64>>) {
    let indptr = ds.load_indptr().unwrap();
    let nbrs = (0..ds.num_nodes())
        .map(|v| ds.neighbors(v).unwrap())
        .collect();
    (indptr, nbrs)
}
