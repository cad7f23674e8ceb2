//! Issue 8's failure: with the memory budget split by two owners, `auto` refused budgets that an
//! explicit disk backend accepted (a 200k-node, 4M-edge sbm, fanouts 10,5, batches of 4096, no
//! cache, one thread: every budget from 128 to 134 MiB). With one plan, `auto` opens whenever
//! any explicit backend does, at every budget, and no plan exceeds its budget.

mod common;

use common::{fan, nz};
use ringgnn_loader::{BackendChoice, BatchLoader, FeatureOptions, LoaderOptions};
use ringgnn_sampler::{Graph, NeighborAccess, OffsetIndex, SampleOptions, Seeds};
use ringgnn_store::generate::sbm::{generate_sbm, SbmOptions};
use ringgnn_store::manifest::FeatureDtype;
use ringgnn_store::{rng, Dataset, GraphOptions, NoProgress};

fn options(backend: BackendChoice, memory: u64) -> LoaderOptions {
    LoaderOptions {
        sample: SampleOptions {
            fanouts: fan(&[10, 5]),
            ..Default::default()
        },
        backend,
        threads: nz(1),
        memory: Some(memory),
        reserve: 0,
        features: Some(FeatureOptions {
            backend,
            cache: Some(0),
            cache_policy: "degree".parse().unwrap(),
            staging_dir: None,
            staging_cap: None,
        }),
        batch_size: nz(4096),
        ..Default::default()
    }
}

/// The 200k-node, 4M-edge sbm of both regressions, in `dir`.
fn sbm_200k(dir: &std::path::Path) -> std::path::PathBuf {
    let opts = SbmOptions {
        out: dir.join("ds"),
        nodes: 200_000,
        classes: 8,
        avg_degree: 20.0,
        feature_dim: 12,
        feature_dtype: FeatureDtype::F32,
        seed: 0,
        split: vec![("train".into(), 0.5)],
        graph: GraphOptions::default(),
        overwrite: false,
    };
    generate_sbm(&opts, &NoProgress).unwrap();
    dir.join("ds")
}

#[test]
fn auto_never_refuses_a_budget_an_explicit_backend_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let path = sbm_200k(dir.path());
    let mut opened = [0usize; 4];
    let choices = [
        BackendChoice::Auto,
        BackendChoice::Memory,
        BackendChoice::Pread,
        BackendChoice::Uring,
    ];
    for mib in (120..=150).step_by(2) {
        let budget = mib << 20;
        let mut ok = [false; 4];
        for (i, &b) in choices.iter().enumerate() {
            if b == BackendChoice::Uring && ringgnn_io::probe_uring().is_err() {
                continue;
            }
            match BatchLoader::open(&path, options(b, budget), None) {
                Ok(l) => {
                    let p = l.plan();
                    assert!(p.total() <= budget, "{b:?} at {mib} MiB: {p}");
                    ok[i] = true;
                    opened[i] += 1;
                }
                Err(e) => {
                    let m = e.to_string();
                    assert!(m.contains("too small") || m.contains("does not fit"), "{m}");
                }
            }
        }
        assert!(
            ok[0] || !ok[1..].iter().any(|&x| x),
            "at {mib} MiB an explicit backend opens but auto does not: {ok:?}"
        );
    }
    // The range covers budgets where only disk plans fit, and where memory fits too.
    assert!(opened[2] > opened[1] && opened[1] > 0, "{opened:?}");
}

/// Issue 20, case 1: sampling that sbm (a 15 MiB neighbor file) at fanouts 20,15,10 in batches
/// of 1024 with hyperbatches under 300 MiB (32 MiB of it the caller's, as `ringgnn sample` has).
/// The upper bounds of a batch put the file in memory out of reach, so the plan read it from disk
/// in hyperbatches (256x the file in an epoch). The plan now sees that a cheaper placement was
/// ruled out by the bounds alone, measures probe batches, and holds the file in memory; and
/// with at least one batch ahead per thread (one ahead, at twice the largest probe batch, left
/// one of the two threads idle: epochs 1.6-1.9x those of 600 MiB), while the batches of an
/// epoch still fit what the plan holds for them.
#[test]
fn a_small_neighbor_file_goes_to_memory_once_batches_are_measured() {
    let dir = tempfile::tempdir().unwrap();
    let path = sbm_200k(dir.path());
    let o = LoaderOptions {
        sample: SampleOptions {
            fanouts: fan(&[20, 15, 10]),
            ..Default::default()
        },
        threads: nz(2),
        memory: Some(300 << 20),
        reserve: 32 << 20,
        batch_size: nz(1024),
        hyperbatch: ringgnn_loader::Hyperbatch::Auto,
        features: None,
        ..Default::default()
    };
    let l = BatchLoader::open(&path, o.clone(), None).unwrap();
    let p = l.plan();
    assert!(p.neighbors_in_memory && p.measured, "{p}");
    assert!(p.total() <= 300 << 20, "{p}");
    assert!(p.why.contains("neighbor file on disk would cost"), "{p}");
    assert!(
        p.window >= 2 && p.workers == 2,
        "no sampling thread idles: {p}"
    );
    assert_eq!(p.cost_ms, 0, "nothing read, no thread idle: {p}");

    // What the plan holds for sampling (the offset index, each worker's batch state, the
    // samples in the window and with the consumer) covers the largest of 32 batches of random
    // seeds, as an epoch's are.
    let ds = Dataset::open(&path).unwrap();
    let index = OffsetIndex::load(&ds).unwrap();
    let index_bytes = index.bytes();
    let n = index.num_nodes();
    let graph = Graph::open(index, NeighborAccess::Memory).unwrap();
    let mut s = graph.sampler(&o.sample).unwrap();
    let mut r = rng::stream(0, 0x7465_7374, 0);
    let (mut state, mut output) = (0u64, 0u64);
    for b in 0..32 {
        let ids: Vec<u64> = (0..1024).map(|_| rng::below(&mut r, n)).collect();
        let seeds = Seeds::new(ids, n).unwrap();
        s.sample(&graph, seeds.as_slice(), 0, b).unwrap();
        let bytes = s.last_batch_bytes();
        state = state.max(bytes.total);
        output = output.max(bytes.output);
    }
    let held = index_bytes + p.workers * state + (p.window + p.hold) * (output + 8 * 1024);
    assert!(
        held <= p.sampler,
        "batches hold {held} (state {state}, sample {output}), the plan {}: {p}",
        p.sampler
    );
    // With the file on disk by request, the same budget runs hyperbatches at a cost.
    let mut disk = o;
    disk.backend = BackendChoice::Pread;
    let d = BatchLoader::open(&path, disk, None).unwrap().plan();
    assert!(!d.neighbors_in_memory && d.cost_ms > 0, "{d}");
}
