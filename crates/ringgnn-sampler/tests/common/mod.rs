//! Shared test helpers: tiny datasets built with the real `convert` from a text edge list, and
//! one sampler per backend over them.
#![allow(dead_code)]

pub mod timed;

use ringgnn_sampler::{
    CoalesceOptions, Fanout, NeighborSampler, NeighborSource, Result, SampledSubgraph, Seeds,
};
use ringgnn_store::{convert, rng, ConvertOptions, Dataset, GraphOptions, NoProgress};
use tempfile::TempDir;

/// Fanouts from PyG-style values (no hops allowed: seeds only).
pub fn fan(values: &[i64]) -> Vec<Fanout> {
    values
        .iter()
        .enumerate()
        .map(|(hop, &v)| Fanout::parse(hop, v).unwrap())
        .collect()
}

/// Sampling from plain ids, checked against the sampler's graph first.
pub trait SampleIds {
    fn sample_ids(
        &mut self,
        ids: &[u64],
        seed: u64,
        epoch: u64,
        batch: u64,
        edge_ids: bool,
    ) -> Result<SampledSubgraph>;
}

impl SampleIds for NeighborSampler {
    fn sample_ids(
        &mut self,
        ids: &[u64],
        seed: u64,
        epoch: u64,
        batch: u64,
        edge_ids: bool,
    ) -> Result<SampledSubgraph> {
        let seeds = Seeds::new(ids.to_vec(), self.num_nodes())?;
        self.sample(seeds.as_slice(), seed, epoch, batch, edge_ids)
    }
}

/// `e` uniform random edges on `n` nodes (random stream `(graph_seed, stream)`), plus `hub_in`
/// edges into node `hub` from nodes `0, 1, ...` (mod `n`): a list spanning several pages.
pub fn random_with_hub(
    n: u64,
    e: usize,
    graph_seed: u64,
    stream: u64,
    hub: u64,
    hub_in: u64,
) -> Vec<(u64, u64)> {
    let mut r = rng::stream(graph_seed, stream, stream);
    let mut edges: Vec<_> = (0..e)
        .map(|_| (rng::below(&mut r, n), rng::below(&mut r, n)))
        .collect();
    edges.extend((0..hub_in).map(|i| (i % n, hub)));
    edges
}

/// A dataset of the directed edges `src -> dst`, built by `convert` in a fresh tempdir.
pub fn build(edges: &[(u64, u64)], num_nodes: Option<u64>, undirected: bool) -> (TempDir, Dataset) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("edges.txt");
    let text: String = edges.iter().map(|(u, v)| format!("{u} {v}\n")).collect();
    std::fs::write(&input, text).unwrap();
    let graph = GraphOptions {
        undirected,
        num_nodes,
        memory: 128 << 20,
        ..Default::default()
    };
    let opts = ConvertOptions::new(input, dir.path().join("ds"), graph);
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
    let mut backends = vec![NeighborSource::memory(ds).unwrap()];
    for opts in coalesce_variants() {
        backends.push(NeighborSource::pread(ds, opts).unwrap());
    }
    backends
        .into_iter()
        .map(|b| NeighborSampler::open(ds, &fan(fanouts), replace, b).unwrap())
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
        .map(|mut s| s.sample_ids(seeds, seed, 0, 0, true).unwrap());
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

/// Nodes 0..7 of type 0 sampled at time `t` (batch 1 of epoch 0, seed 3, edge ids kept): the
/// seven-node fixture's one request at a time.
pub fn sample_seven_at(
    s: &mut ringgnn_sampler::HeteroSampler,
    t: i64,
) -> ringgnn_sampler::HeteroSample {
    let ids: Vec<u64> = (0..7).collect();
    let ts = vec![t; 7];
    let req = ringgnn_sampler::HeteroRequest {
        seeds: &[(0, &ids)],
        batch: 1,
        times: Some(&[&ts]),
    };
    s.sample_many(&[req], 3, 0, true).unwrap().pop().unwrap()
}
