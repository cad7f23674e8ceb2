//! Shared test helpers: datasets with features built by the real `convert` from an edge list
//! and a features `.npy`, the values every dtype should read back as, and one gatherer per
//! source (memory, pread, io_uring where this machine has it; buffered and `O_DIRECT`).
#![allow(dead_code)]

use std::sync::{Arc, Once};

use half::{bf16, f16};
use ringgnn_features::{FeatureGatherer, HotRowCache};
use ringgnn_io::{probe_uring, BackendKind, CoalesceOptions};
use ringgnn_store::manifest::FeatureDtype;
use ringgnn_store::npy::write_npy;
use ringgnn_store::{convert, ConvertOptions, Dataset, GraphOptions, NoProgress};
use tempfile::TempDir;

pub const DTYPES: [FeatureDtype; 3] = [FeatureDtype::F32, FeatureDtype::F16, FeatureDtype::Bf16];

/// splitmix64: seeded values for features and ids.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `v * dim` distinct-looking f32 values (not exactly representable in f16/bf16, so rounding
/// is exercised), seeded.
pub fn values(v: u64, dim: usize, seed: u64) -> Vec<f32> {
    let mut r = Rng::new(seed);
    (0..v as usize * dim)
        .map(|_| (r.below(2_000_001) as f32 - 1_000_000.0) / 1789.0)
        .collect()
}

/// What a value stored as `dtype` reads back as.
pub fn stored(x: f32, dtype: FeatureDtype) -> f32 {
    match dtype {
        FeatureDtype::F32 => x,
        FeatureDtype::F16 => f16::from_f32(x).to_f32(),
        FeatureDtype::Bf16 => bf16::from_f32(x).to_f32(),
    }
}

/// The expected output of gathering `ids`: rows of `vals` (dim `dim`) as stored in `dtype`.
pub fn expected(vals: &[f32], dim: usize, dtype: FeatureDtype, ids: &[u64]) -> Vec<f32> {
    ids.iter()
        .flat_map(|&id| &vals[id as usize * dim..(id as usize + 1) * dim])
        .map(|&x| stored(x, dtype))
        .collect()
}

/// A dataset of `edges` over `v` nodes with features `vals` (`[v, dim]` f32) stored as `dtype`.
pub fn build(
    edges: &[(u64, u64)],
    v: u64,
    vals: &[f32],
    dim: usize,
    dtype: FeatureDtype,
) -> (TempDir, Dataset) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("edges.txt");
    let text: String = edges.iter().map(|(a, b)| format!("{a} {b}\n")).collect();
    std::fs::write(&input, text).unwrap();
    let feats = dir.path().join("x.npy");
    let bytes: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
    write_npy(&feats, "<f4", &[v, dim as u64], false, &bytes).unwrap();
    let opts = ConvertOptions {
        input,
        out: dir.path().join("ds"),
        format: None,
        graph: GraphOptions {
            num_nodes: Some(v),
            memory: 128 << 20,
            ..Default::default()
        },
        features: Some(feats),
        feature_dtype: Some(dtype),
        labels: None,
        split: None,
        link_split: None,
        seed: 0,
        overwrite: false,
        node_ids: None,
        excerpts: Default::default(),
    };
    convert(&opts, &NoProgress).unwrap();
    let ds = Dataset::open(&dir.path().join("ds")).unwrap();
    (dir, ds)
}

/// A ring over `v` nodes plus a few seeded chords (so in-degrees differ).
pub fn graph(v: u64, seed: u64) -> Vec<(u64, u64)> {
    let mut r = Rng::new(seed);
    let mut e: Vec<_> = (0..v).map(|i| (i, (i + 1) % v)).collect();
    e.extend((0..v / 2).map(|_| (r.below(v), r.below(v))));
    e
}

/// The smallest coalescing settings: one page per request and per read batch, so a gather
/// takes many waves.
pub const TINY: CoalesceOptions = CoalesceOptions {
    max_run: 4096,
    buffer: 4096,
};

/// One gatherer per source: memory; pread and io_uring, buffered and `O_DIRECT`, with default
/// and tiny coalescing. io_uring is skipped, with a message, where this machine lacks it.
pub fn gatherers(ds: &Dataset) -> Vec<(String, FeatureGatherer)> {
    let mut out = vec![("memory".to_string(), FeatureGatherer::memory(ds).unwrap())];
    let mut kinds = vec![BackendKind::Pread];
    match probe_uring() {
        Ok(()) => kinds.push(BackendKind::Uring),
        Err(why) => {
            static ONCE: Once = Once::new();
            ONCE.call_once(|| eprintln!("skipping the io_uring backend: {why}"));
        }
    }
    for kind in kinds {
        for direct in [false, true] {
            for opts in [CoalesceOptions::default(), TINY] {
                let (g, _) = FeatureGatherer::open(ds, kind, direct, opts).unwrap();
                let name = format!("{kind:?} direct={direct} max_run={}", opts.max_run);
                out.push((name, g));
            }
        }
    }
    out
}

/// Caches worth comparing: none, budget 0, a few rows, more than the whole file.
pub fn caches(ds: &Dataset) -> Vec<(String, Option<Arc<HotRowCache>>)> {
    let file_bytes = ds.manifest().files["features"].bytes;
    let row = ds.manifest().features.as_ref().unwrap().row_bytes;
    let mut out = vec![("no cache".to_string(), None)];
    for budget in [0, 5 * (row + 8), 2 * file_bytes + 4096] {
        let c = HotRowCache::build_by_degree(ds, budget).unwrap();
        out.push((format!("cache of {budget} bytes"), Some(Arc::new(c))));
    }
    out
}
