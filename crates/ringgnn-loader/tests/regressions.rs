//! Issue 8's failure: with the memory budget split by two owners, `auto` refused budgets that an
//! explicit disk backend accepted (a 200k-node, 4M-edge sbm, fanouts 10,5, batches of 4096, no
//! cache, one thread: every budget from 128 to 134 MiB). With one plan, `auto` opens whenever
//! any explicit backend does, at every budget, and no plan exceeds its budget.

mod common;

use common::{fan, nz};
use ringgnn_loader::{BackendChoice, BatchLoader, FeatureOptions, LoaderOptions};
use ringgnn_sampler::SampleOptions;
use ringgnn_store::generate::sbm::{generate_sbm, SbmOptions};
use ringgnn_store::manifest::FeatureDtype;
use ringgnn_store::{GraphOptions, NoProgress};

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

#[test]
fn auto_never_refuses_a_budget_an_explicit_backend_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SbmOptions {
        out: dir.path().join("ds"),
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
    let path = dir.path().join("ds");
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
