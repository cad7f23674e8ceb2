//! With io_uring forced unavailable, `auto` falls back to `pread` with the reason, `uring` is
//! refused with it, and epochs still give the same batches. Its own binary (its own process):
//! it sets an environment variable.

mod common;

use common::build;
use ringgnn_io::DISABLE_ENV;
use ringgnn_sampler::{BackendChoice, Batch, Error, SamplerConfig, SamplerPool};

#[test]
fn disabled_uring_falls_back_to_pread_with_the_reason() {
    let edges: Vec<_> = (0..400u64).map(|i| (i % 37, (i * 7) % 50)).collect();
    let (dir, _ds) = build(&edges, Some(50), false);
    let path = dir.path().join("ds");
    let cfg = |backend| SamplerConfig {
        fanouts: vec![4, 2],
        backend,
        threads: 2,
        memory: Some(1000),
        ..Default::default()
    };
    std::env::set_var(DISABLE_ENV, "1");
    let pool = SamplerPool::open(&path, cfg(BackendChoice::Auto)).unwrap();
    let reason = "disabled by RINGGNN_DISABLE_URING";
    assert_eq!(
        (pool.backend_name(), pool.fallback_reason()),
        ("pread", Some(reason))
    );
    let epoch = |p: &SamplerPool| -> Vec<Batch> {
        let it = p.epoch((0..50).collect(), 8, true, 2, false).unwrap();
        it.map(|b| b.unwrap()).collect()
    };
    let got = epoch(&pool);
    assert_eq!(got.len(), 7);
    assert!(pool.io_stats().reads > 0);
    let e = SamplerPool::open(&path, cfg(BackendChoice::Uring))
        .err()
        .unwrap();
    assert!(
        matches!(&e, Error::Input(m) if m.contains(reason) && m.contains("pread")),
        "{e}"
    );
    let mem = SamplerPool::open(
        &path,
        SamplerConfig {
            memory: None,
            ..cfg(BackendChoice::Memory)
        },
    );
    assert!(
        epoch(&mem.unwrap()) == got,
        "same batches from memory and the fallback"
    );
}
