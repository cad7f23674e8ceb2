//! With io_uring forced unavailable, `auto` falls back to `pread` with the reason, `uring` is
//! refused with it, and epochs still give the same batches. Its own binary (its own process):
//! it sets an environment variable.

mod common;

use common::{loading, nz, sbm, train_seeds};
use ringgnn_io::{BackendKind, DISABLE_ENV};
use ringgnn_loader::{BackendChoice, BatchLoader, CachePolicy, EpochOptions, Error, LoadedBatch};
use ringgnn_store::manifest::FeatureDtype;

#[test]
fn disabled_uring_falls_back_to_pread_with_the_reason() {
    std::env::set_var(DISABLE_ENV, "1");
    let reason = "disabled by RINGGNN_DISABLE_URING";
    assert_eq!(
        BackendChoice::Auto.disk_kind().unwrap(),
        (BackendKind::Pread, Some(reason.to_string()))
    );
    let tmp = sbm(3000, FeatureDtype::F32);
    let dir = tmp.path().join("ds");
    let e = BatchLoader::open(
        &dir,
        loading(BackendChoice::Uring, None, CachePolicy::Degree),
        None,
    )
    .err()
    .unwrap();
    assert!(
        matches!(&e, Error::Input(m) if m.contains(reason) && m.contains("pread")),
        "{e}"
    );
    // A budget that leaves the feature file (144 KB) on disk: auto reads it with pread.
    let mut o = loading(BackendChoice::Auto, Some(0), CachePolicy::Degree);
    o.features.as_mut().unwrap().backend = BackendChoice::Pread;
    let roomy = BatchLoader::open(&dir, o, None).unwrap().plan();
    let mut o = loading(BackendChoice::Auto, Some(0), CachePolicy::Degree);
    o.memory = Some((roomy.total() - roomy.slack - roomy.cache + 50_000) * 32 / 31);
    o.prefetch = Some(nz(roomy.prefetch as usize));
    let l = BatchLoader::open(&dir, o, None).unwrap();
    assert!(!l.plan().features_in_memory, "{}", l.plan());
    assert_eq!(
        (l.feature_backend(), l.fallback_reason()),
        ("pread", Some(reason))
    );
    let epoch = |l: &BatchLoader| -> Vec<LoadedBatch> {
        let it = l
            .epoch(&train_seeds(&dir), &EpochOptions::new(nz(64), 2))
            .unwrap();
        it.map(|b| b.unwrap()).collect()
    };
    let got = epoch(&l);
    assert!(l.stats().gather.bytes_read > 0);
    let mem = BatchLoader::open(
        &dir,
        loading(BackendChoice::Memory, None, CachePolicy::Degree),
        None,
    )
    .unwrap();
    assert_eq!(mem.feature_backend(), "memory");
    let want = epoch(&mem);
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(
            (a.index, &a.sample, &a.x, &a.y),
            (b.index, &b.sample, &b.x, &b.y)
        );
    }
}
