//! Shared helpers of the loader's tests: datasets (a random graph from an edge list, a labeled
//! sbm with features), options, seeds.
#![allow(dead_code)]

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use ringgnn_io::probe_uring;
use ringgnn_loader::{BackendChoice, CachePolicy, FeatureOptions, Hyperbatch, LoaderOptions};
use ringgnn_sampler::{Fanout, SampleOptions, Seeds};
use ringgnn_store::generate::sbm::{generate_sbm, SbmOptions};
use ringgnn_store::manifest::FeatureDtype;
use ringgnn_store::{convert, rng, ConvertOptions, Dataset, GraphOptions, NoProgress};
use tempfile::TempDir;

pub fn nz(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

pub fn fan(values: &[i64]) -> Vec<Fanout> {
    Fanout::parse_all(values).unwrap()
}

/// A dataset of the directed edges `src -> dst`, built by `convert`; its path.
pub fn build(edges: &[(u64, u64)], num_nodes: Option<u64>) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("edges.txt");
    let text: String = edges.iter().map(|(u, v)| format!("{u} {v}\n")).collect();
    std::fs::write(&input, text).unwrap();
    let graph = GraphOptions {
        num_nodes,
        memory: 128 << 20,
        ..Default::default()
    };
    let opts = ConvertOptions::new(input, dir.path().join("ds"), graph);
    convert(&opts, &NoProgress).unwrap();
    let path = dir.path().join("ds");
    (dir, path)
}

pub const N: u64 = 3000;

/// A random graph of N nodes and 32000 edges (a hub among them).
pub fn graph() -> (TempDir, PathBuf) {
    let mut r = rng::stream(9, 9, 9);
    let mut edges: Vec<_> = (0..30_000)
        .map(|_| (rng::below(&mut r, N), rng::below(&mut r, N)))
        .collect();
    edges.extend((0..2000).map(|i| (i, 7)));
    build(&edges, Some(N))
}

/// A labeled sbm of `nodes` nodes with 12 features, train/val splits; `dir/ds` is the dataset.
pub fn sbm(nodes: u64, dtype: FeatureDtype) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let opts = SbmOptions {
        out: dir.path().join("ds"),
        nodes,
        classes: 4,
        avg_degree: 6.0,
        feature_dim: 12,
        feature_dtype: dtype,
        seed: 5,
        split: vec![("train".into(), 0.5), ("val".into(), 0.25)],
        graph: GraphOptions::default(),
        overwrite: false,
    };
    generate_sbm(&opts, &NoProgress).unwrap();
    dir
}

/// Sampling only, one batch at a time: fanouts 5,3, seed 42, edge ids, a 1 GiB budget.
pub fn sampling(backend: BackendChoice, threads: usize) -> LoaderOptions {
    LoaderOptions {
        sample: SampleOptions {
            fanouts: fan(&[5, 3]),
            replace: false,
            seed: 42,
            with_edge_ids: true,
        },
        backend,
        threads: nz(threads),
        memory: Some(1 << 30),
        features: None,
        hyperbatch: Hyperbatch::PER_BATCH,
        ..Default::default()
    }
}

/// Loading, one batch at a time: fanouts 4,3, seed 11, 2 threads, batches of 64, a 256 MiB
/// budget.
pub fn loading(backend: BackendChoice, cache: Option<u64>, policy: CachePolicy) -> LoaderOptions {
    LoaderOptions {
        sample: SampleOptions {
            fanouts: fan(&[4, 3]),
            seed: 11,
            ..Default::default()
        },
        backend,
        threads: nz(2),
        memory: Some(256 << 20),
        features: Some(FeatureOptions {
            backend,
            cache,
            cache_policy: policy,
            staging_dir: None,
            staging_cap: None,
        }),
        batch_size: nz(64),
        hyperbatch: Hyperbatch::PER_BATCH,
        ..Default::default()
    }
}

pub fn seeds(ids: impl Into<Vec<u64>>, n: u64) -> Seeds {
    Seeds::new(ids.into(), n).unwrap()
}

pub fn train_seeds(dir: &Path) -> Seeds {
    let ds = Dataset::open(dir).unwrap();
    let ids: Vec<u64> = ds
        .split("train")
        .unwrap()
        .into_iter()
        .map(|s| s as u64)
        .collect();
    Seeds::new(ids, ds.num_nodes()).unwrap()
}

/// Every backend this machine can run.
pub fn backends() -> Vec<BackendChoice> {
    let mut b = vec![
        BackendChoice::Memory,
        BackendChoice::Pread,
        BackendChoice::Auto,
    ];
    match probe_uring() {
        Ok(()) => b.push(BackendChoice::Uring),
        Err(why) => eprintln!("skipping the uring backend: {why}"),
    }
    b
}
