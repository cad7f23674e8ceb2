//! Hyperbatch epochs: every batch equals the per-batch epoch's, with and without features, for
//! every backend, thread count and hyperbatch size (1, 2, 7, the whole epoch, auto); `auto`
//! grows the hyperbatch from what it measures; shards, early exit and read errors behave as in
//! per-batch mode; spilled samples (read back from the spill file) are the same batches.

mod common;

use common::{backends, graph, loading, nz, sampling, sbm, seeds, train_seeds, N};
use ringgnn_loader::{
    BackendChoice, Batch, BatchLoader, CachePolicy, EpochOptions, Error, Hyperbatch, LoadedBatch,
    LoaderOptions, Spill,
};
use ringgnn_store::manifest::FeatureDtype;

fn sizes() -> Vec<Hyperbatch> {
    let mut v: Vec<Hyperbatch> = [1, 2, 7, 1000]
        .iter()
        .map(|&n| Hyperbatch::Size(nz(n)))
        .collect();
    v.push(Hyperbatch::Auto);
    v
}

fn samples(o: LoaderOptions, e: &EpochOptions) -> (Vec<Batch>, BatchLoader) {
    let (_d, path) = graph();
    let l = BatchLoader::open(&path, o, None).unwrap();
    let all = seeds((0..1500).collect::<Vec<_>>(), N);
    let got = l
        .sample_epoch(&all, e)
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    assert_eq!(l.live_workers(), 0);
    (got, l)
}

#[test]
fn hyperbatch_epochs_equal_per_batch_epochs() {
    let e = EpochOptions::new(nz(64), 4);
    let (want, _) = samples(sampling(BackendChoice::Memory, 1), &e);
    assert_eq!(want.len(), 24);
    for backend in backends() {
        for threads in [1, 2, 3] {
            for h in sizes() {
                let mut o = sampling(backend, threads);
                o.hyperbatch = h;
                let (got, l) = samples(o, &e);
                assert!(got == want, "{backend:?}, {threads} threads, {h:?}");
                let t = l.graph().hyper_totals();
                let shared = l.plan().hyperbatch_size != 1;
                assert_eq!(t.batches, if shared { 24 } else { 0 }, "{backend:?} {h:?}");
                if shared && h != Hyperbatch::PER_BATCH {
                    assert!(t.hyperbatches < 24, "{backend:?} {h:?}: {t:?}");
                    assert!(t.sequential_bytes + t.random_bytes > 0);
                }
            }
        }
    }
}

#[test]
fn auto_grows_the_hyperbatch_from_what_it_measures_and_fits_the_budget() {
    let (_d, path) = graph();
    let all = seeds((0..N).collect::<Vec<_>>(), N);
    let e = EpochOptions::new(nz(16), 0);
    // A budget whose hyperbatch share holds a handful of batches by the bound, far more by
    // what they really take.
    let mut o = sampling(BackendChoice::Pread, 2);
    o.hyperbatch = Hyperbatch::Auto;
    o.batch_size = nz(16);
    o.memory = Some(64 << 20);
    let l = BatchLoader::open(&path, o, None).unwrap();
    let p = l.plan();
    assert_eq!(p.hyperbatch_size, 0);
    assert!(p.hyperbatch > 20 << 20 && p.total() <= 64 << 20, "{p}");
    let n = l.sample_epoch(&all, &e).unwrap().count();
    let t = l.graph().hyper_totals();
    assert_eq!((n as u64, t.batches), (188, 188));
    assert!(t.hyperbatches <= 3, "{t:?}");
    // Per batch on the same data reads every page many times over.
    let mut o = sampling(BackendChoice::Pread, 2);
    o.batch_size = nz(16);
    let per_batch = BatchLoader::open(&path, o, None).unwrap();
    assert_eq!(per_batch.sample_epoch(&all, &e).unwrap().count(), 188);
    assert!(per_batch.io_stats().bytes > 4 * l.io_stats().bytes);
}

/// "hyperbatches of H[ after a first of F], P in all" of a plan's text: (F, H, P), F = H when
/// not printed.
fn printed_hyperbatches(why: &str) -> (u64, u64, u64) {
    let number = |after: &str| -> Option<u64> {
        let at = why.find(after)? + after.len();
        let rest = &why[at..];
        rest[..rest.find(|c: char| !c.is_ascii_digit())?]
            .parse()
            .ok()
    };
    let h = number("hyperbatches of ").expect(why);
    let first = number(&format!("hyperbatches of {h} after a first of ")).unwrap_or(h);
    let at = why.find(" in all").expect(why);
    let p = why[..at].rsplit(' ').next().unwrap().parse().unwrap();
    (first, h, p)
}

/// The plan's cost predicts an epoch's hyperbatches by the drivers' own rule and margins
/// (`HyperFit::epoch_jobs`, from the same probe or bounds) and cuts the epoch as the loader
/// does: the jobs it prints are those the loader runs until it has measured batches of its own
/// (then it re-sizes them by the same rule, from what it measured). Checked on both sides of
/// the probe: all neighbors at each hop (a hub of 2000 in-edges) make the bounds of a batch of
/// 64 far too large for 20 MiB (measured on the probe), not for 32 MiB.
#[test]
fn the_plan_prints_the_hyperbatches_the_loader_runs() {
    let (_d, path) = graph();
    let all = seeds((0..N).collect::<Vec<_>>(), N);
    let open = |memory: u64, h: Hyperbatch| {
        let mut o = sampling(BackendChoice::Pread, 2);
        o.sample.fanouts = common::fan(&[-1, -1]);
        o.hyperbatch = h;
        o.batch_size = nz(64);
        o.memory = Some(memory);
        BatchLoader::open(&path, o, None).unwrap()
    };
    // Runs the epoch's batches `0..n` (or all); (hyperbatches, batches) it sampled.
    let run = |l: &BatchLoader, n: Option<u64>| {
        let mut e = EpochOptions::new(nz(64), 0);
        e.batches = n.map(|n| (0..n).collect());
        let got = l.sample_epoch(&all, &e).unwrap().count();
        let t = l.graph().hyper_totals();
        assert_eq!(t.batches, got as u64);
        (t.hyperbatches, t.batches)
    };
    for (memory, measured) in [(20 << 20, true), (32 << 20, false)] {
        let p = open(memory, Hyperbatch::Auto).plan();
        assert_eq!((p.measured, p.hyperbatch_size), (measured, 0), "{p}");
        let (first, h, passes) = printed_hyperbatches(&p.why);
        assert!(first > 1 && h > 1 && passes > 2, "{p}");
        // 47 batches: an even first job of at most what the share holds before any batch is
        // measured, then even jobs of H at most.
        assert!(
            first + (passes - 2) * h < 47 && first + (passes - 1) * h >= 47,
            "{p}"
        );
        // The loader's first job is the plan's: F batches, one hyperbatch.
        assert_eq!(
            run(&open(memory, Hyperbatch::Auto), Some(first)),
            (1, first),
            "{p}"
        );
    }
    // A size asked for, within what the bounds fit: the plan's jobs (15 of 3, then 2) are those
    // the loader runs for the whole epoch. (One too large for the share is cut where a spilling
    // hyperbatch's last hops do not fit: no plan can print that.)
    let l = open(32 << 20, Hyperbatch::Size(nz(3)));
    assert_eq!(printed_hyperbatches(&l.plan().why), (3, 3, 16));
    assert_eq!(run(&l, None), (16, 47));
}

#[test]
fn shards_early_exit_and_errors_behave_as_per_batch() {
    let (_d, path) = graph();
    let all = seeds((0..1500).collect::<Vec<_>>(), N);
    let mut o = sampling(BackendChoice::Pread, 2);
    o.hyperbatch = Hyperbatch::Size(nz(5));
    let l = BatchLoader::open(&path, o, None).unwrap();
    let whole: Vec<Batch> = l
        .sample_epoch(&all, &EpochOptions::new(nz(64), 1))
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    let mut e = EpochOptions::new(nz(64), 1);
    e.batches = Some(vec![23, 1, 7, 8]);
    let got: Vec<Batch> = l
        .sample_epoch(&all, &e)
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    assert!(got.iter().zip([23, 1, 7, 8]).all(|(g, i)| *g == whole[i]));
    for _ in 0..3 {
        let mut it = l.sample_epoch(&all, &EpochOptions::new(nz(8), 2)).unwrap();
        it.next().unwrap().unwrap();
        drop(it);
        assert_eq!(l.live_workers(), 0);
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(path.join("indices.bin"))
        .unwrap()
        .set_len(4096)
        .unwrap();
    let r: Vec<_> = l
        .sample_epoch(&all, &EpochOptions::new(nz(64), 1))
        .unwrap()
        .collect();
    match r.last() {
        Some(Err(Error::Sampler(ringgnn_sampler::Error::Io { path, .. }))) => {
            assert!(path.ends_with("indices.bin"))
        }
        other => panic!("expected a read error naming the file, got {other:?}"),
    }
    assert_eq!(l.live_workers(), 0);
}

#[test]
fn loaded_hyperbatches_equal_per_batch_loading() {
    let tmp = sbm(3000, FeatureDtype::F32);
    let dir = tmp.path().join("ds");
    let seeds = train_seeds(&dir);
    let e = EpochOptions::new(nz(64), 3);
    let staged = std::cell::Cell::new(0);
    let run = |o: LoaderOptions| -> Vec<LoadedBatch> {
        let l = BatchLoader::open(&dir, o, Some(&seeds)).unwrap();
        let v: Vec<LoadedBatch> = l.epoch(&seeds, &e).unwrap().map(|b| b.unwrap()).collect();
        assert_eq!(l.live_workers(), 0);
        let s = l.stats();
        staged.set(staged.get() + s.staged_hyperbatches);
        if s.staged_hyperbatches > 0 {
            assert!(
                s.staging_pass_bytes > 0 && s.staging_written_bytes > 0,
                "{s:?}"
            );
            assert!(s.est_staged_seconds > 0.0 && s.est_per_batch_seconds > 0.0);
        }
        v
    };
    let want = run(loading(BackendChoice::Memory, None, CachePolicy::Degree));
    for h in sizes() {
        for (cache, cap) in [
            (Some(0), None),
            (Some(20_000), None),
            (None, None),
            (Some(0), Some(0)),
        ] {
            let mut o = loading(
                BackendChoice::Pread,
                cache,
                CachePolicy::Presample { batches: 4 },
            );
            o.hyperbatch = h;
            o.features.as_mut().unwrap().staging_cap = cap;
            let got = run(o);
            assert_eq!(got.len(), want.len());
            for (a, b) in got.iter().zip(&want) {
                assert_eq!(
                    (a.index, &a.seeds, &a.sample, &a.x, &a.y),
                    (b.index, &b.seeds, &b.sample, &b.x, &b.y),
                    "{h:?} cache {cache:?} staging cap {cap:?}"
                );
            }
        }
    }
    assert!(staged.get() > 0, "the cost model staged some hyperbatches");
}

/// Loading drivers that spill their samples (keeping only each batch's cold row ids for
/// staging) give the per-batch epoch's batches and rows, whatever the hyperbatch size, the
/// spill policy, the threads and the cache; every hyperbatch is counted once as staged or not,
/// and the first of the epoch is never staged (it is trained while the second is).
#[test]
fn spilled_loading_hyperbatches_equal_per_batch_loading() {
    let tmp = sbm(3000, FeatureDtype::F32);
    let dir = tmp.path().join("ds");
    let seeds = train_seeds(&dir);
    let e = EpochOptions::new(nz(64), 3);
    let spill_dir = tempfile::tempdir().unwrap();
    let want: Vec<LoadedBatch> = {
        let o = loading(BackendChoice::Memory, None, CachePolicy::Degree);
        let l = BatchLoader::open(&dir, o, Some(&seeds)).unwrap();
        l.epoch(&seeds, &e).unwrap().map(|b| b.unwrap()).collect()
    };
    assert_eq!(want.len(), 24);
    // Hyperbatches staged with their samples kept and spilled.
    let (mut staged, mut staged_spilled) = (0, 0);
    for threads in [1, 2, 3] {
        for h in sizes() {
            for spill in [Spill::On, Spill::Off, Spill::Auto] {
                for cache in [Some(0), Some(20_000)] {
                    // By degree: look-ahead sampling would add its batches to the totals.
                    let mut o = loading(BackendChoice::Pread, cache, CachePolicy::Degree);
                    o.threads = nz(threads);
                    o.hyperbatch = h;
                    o.spill = spill;
                    o.spill_dir = Some(spill_dir.path().to_path_buf());
                    let l = BatchLoader::open(&dir, o, Some(&seeds)).unwrap();
                    let got: Vec<LoadedBatch> =
                        l.epoch(&seeds, &e).unwrap().map(|b| b.unwrap()).collect();
                    let case =
                        format!("{threads} threads, {h:?}, spill {spill:?}, cache {cache:?}");
                    assert_eq!(l.live_workers(), 0, "{case}");
                    assert_eq!(got.len(), want.len(), "{case}");
                    for (a, b) in got.iter().zip(&want) {
                        assert_eq!(
                            (a.index, &a.seeds, &a.sample, &a.x, &a.y),
                            (b.index, &b.seeds, &b.sample, &b.x, &b.y),
                            "{case}"
                        );
                    }
                    let t = l.graph().hyper_totals();
                    let s = l.stats();
                    if h == Hyperbatch::PER_BATCH {
                        assert_eq!((t.spilled_bytes, s.staged_hyperbatches), (0, 0), "{case}");
                        continue;
                    }
                    assert_eq!(t.batches, 24, "{case}");
                    match spill {
                        // Every sample went through the spill file, in whole pages.
                        Spill::On => assert!(t.spilled_bytes >= 24 * 4096, "{case}: {t:?}"),
                        Spill::Off => assert_eq!(t.spilled_bytes, 0, "{case}"),
                        Spill::Auto => {}
                    }
                    assert_eq!(
                        s.staged_hyperbatches + s.unstaged_hyperbatches,
                        t.hyperbatches,
                        "{case}: each hyperbatch is staged or not, once: {s:?}"
                    );
                    assert!(
                        s.staged_hyperbatches < t.hyperbatches,
                        "{case}: the first is gathered batch by batch: {s:?}"
                    );
                    if h == Hyperbatch::Auto {
                        assert!(t.hyperbatches >= 2, "{case}: two at least: {t:?}");
                    }
                    staged += s.staged_hyperbatches;
                    if spill == Spill::On {
                        staged_spilled += s.staged_hyperbatches;
                    }
                    // Spill and staging files are unlinked at once.
                    assert_eq!(std::fs::read_dir(spill_dir.path()).unwrap().count(), 0);
                }
            }
        }
    }
    assert!(
        staged > staged_spilled && staged_spilled > 0,
        "the cost model staged kept and spilled hyperbatches: {staged} {staged_spilled}"
    );
}

/// A budget whose plan leaves the hyperbatch state about `share` bytes with options `o`: the
/// plan's fixed parts (found from a larger budget) and `share`, with the 1/32 slack on top.
fn leaving(path: &std::path::Path, o: &LoaderOptions, share: u64) -> u64 {
    let big = BatchLoader::open(path, o.clone(), None).unwrap().plan();
    let fixed = big.total() - big.hyperbatch - big.slack;
    (fixed + share) * 32 / 31 + 32
}

#[test]
fn a_share_too_small_for_a_hyperbatch_still_gives_identical_batches() {
    let e = EpochOptions::new(nz(64), 4);
    let (want, _) = samples(sampling(BackendChoice::Memory, 1), &e);
    // A budget that leaves the hyperbatch state about 16 KiB, less than one batch takes.
    let (_d, path) = graph();
    let mut o = sampling(BackendChoice::Pread, 2);
    o.hyperbatch = Hyperbatch::Auto;
    o.memory = Some(leaving(&path, &o, 16 << 10));
    let (got, l) = samples(o, &e);
    let p = l.plan();
    assert!(p.hyperbatch > 0 && p.hyperbatch < 32 << 10, "{p}");
    assert!(got == want);
    let t = l.graph().hyper_totals();
    assert_eq!(
        (t.batches, t.hyperbatches),
        (24, 24),
        "one batch at a time: {t:?}"
    );
}

#[test]
fn spilling_under_a_share_too_small_for_kept_samples_gives_identical_batches() {
    let e = EpochOptions::new(nz(64), 4);
    let (want, _) = samples(sampling(BackendChoice::Memory, 1), &e);
    // A budget whose share is a few spill buffers and batch states: sized for spilled samples
    // (`on`), the hyperbatches hold what they can and every batch is still the same.
    let (_d, path) = graph();
    let mut o = sampling(BackendChoice::Pread, 2);
    o.hyperbatch = Hyperbatch::Auto;
    o.spill = Spill::On;
    o.memory = Some(leaving(&path, &o, 5 << 20));
    let (got, l) = samples(o.clone(), &e);
    assert!(got == want);
    let t = l.graph().hyper_totals();
    assert_eq!(t.batches, 24);
    assert!(t.spilled_bytes > 0, "{t:?}");
    // Stopped early, mid-hyperbatch: no worker is left, and the next epoch is whole.
    let all = seeds((0..1500).collect::<Vec<_>>(), N);
    let l = BatchLoader::open(&path, o, None).unwrap();
    for _ in 0..3 {
        let mut it = l.sample_epoch(&all, &e).unwrap();
        it.next().unwrap().unwrap();
        drop(it);
        assert_eq!(l.live_workers(), 0);
    }
    let again: Vec<Batch> = l
        .sample_epoch(&all, &e)
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    assert!(again == want);
}

/// A whole epoch asked for as one spilling hyperbatch, under a share that holds a few batches:
/// the sampler admits the last hops that fit, the driver samples the rest next, and every batch
/// is still the same, in order.
#[test]
fn batches_left_out_of_a_last_hop_are_sampled_next_and_identical() {
    let e = EpochOptions::new(nz(64), 4);
    let (want, _) = samples(sampling(BackendChoice::Memory, 1), &e);
    let (_d, path) = graph();
    let mut o = sampling(BackendChoice::Pread, 2);
    o.hyperbatch = Hyperbatch::Size(nz(24));
    o.spill = Spill::On;
    o.memory = Some(leaving(&path, &o, 8 << 20));
    let (got, l) = samples(o, &e);
    assert!(got == want);
    let t = l.graph().hyper_totals();
    assert_eq!(t.batches, 24);
    assert!(t.hyperbatches > 1, "{t:?}");
}

#[test]
fn spilled_hyperbatches_equal_per_batch_epochs() {
    let e = EpochOptions::new(nz(64), 4);
    let (want, _) = samples(sampling(BackendChoice::Memory, 1), &e);
    let dir = tempfile::tempdir().unwrap();
    for threads in [1, 2, 3] {
        for h in sizes() {
            let mut o = sampling(BackendChoice::Pread, threads);
            o.hyperbatch = h;
            o.spill = Spill::On;
            o.spill_dir = Some(dir.path().to_path_buf());
            let (got, l) = samples(o, &e);
            assert!(got == want, "{threads} threads, {h:?}");
            let t = l.graph().hyper_totals();
            if h == Hyperbatch::PER_BATCH {
                assert_eq!(t.spilled_bytes, 0, "per batch: nothing to spill");
            } else {
                // Every sample went through the spill file, in whole pages.
                assert_eq!(t.batches, 24, "{h:?}");
                assert!(t.spilled_bytes >= 24 * 4096, "{h:?}: {t:?}");
                assert_eq!(t.spilled_bytes % 4096, 0);
            }
            // Unlinked at once: nothing is left in the directory.
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }
    // Kept (off), nothing is spilled.
    let mut o = sampling(BackendChoice::Pread, 2);
    o.hyperbatch = Hyperbatch::Size(nz(7));
    o.spill = Spill::Off;
    let (got, l) = samples(o, &e);
    assert!(got == want);
    assert_eq!(l.graph().hyper_totals().spilled_bytes, 0);
}

#[test]
fn a_spill_directory_that_cannot_be_written_is_named_in_the_error() {
    let mut o = sampling(BackendChoice::Pread, 2);
    o.hyperbatch = Hyperbatch::Size(nz(4));
    o.spill = Spill::On;
    o.spill_dir = Some("/nonexistent/ringgnn-spill".into());
    let (_d, path) = graph();
    let l = BatchLoader::open(&path, o, None).unwrap();
    let all = seeds((0..1500).collect::<Vec<_>>(), N);
    let r: Vec<_> = l
        .sample_epoch(&all, &EpochOptions::new(nz(64), 1))
        .unwrap()
        .collect();
    match r.last() {
        Some(Err(e)) => {
            let m = e.to_string();
            assert!(
                m.contains("/nonexistent/ringgnn-spill") && m.contains("spill"),
                "{m}"
            );
        }
        other => panic!("expected an error naming the directory, got {other:?}"),
    }
    assert_eq!(l.live_workers(), 0);
}
