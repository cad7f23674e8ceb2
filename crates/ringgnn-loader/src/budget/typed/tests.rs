//! The typed loader's sizes by hand: bytes, the fallbacks and their warning, and time.

use super::*;

const MB: u64 = 1_000_000;

/// Two drivers (batches that gather rows), no finished sample counted apart.
fn needs(per_batch: u64, rows: u64, buffers: u64, held: u64) -> TypedNeeds {
    TypedNeeds {
        per_batch,
        rows,
        buffers,
        held,
        drivers: 2,
        ..TypedNeeds::default()
    }
}

/// 2 threads, `prefetch` not given, 40 batches.
fn auto(share: u64, n: &TypedNeeds) -> TypedSizes {
    choose(None, false, share, n, 2, None, 40)
}

fn shape(s: &TypedSizes) -> (usize, usize, usize, bool) {
    (s.hyperbatch, s.prefetch, s.workers, s.staging)
}

/// Whether the workers are drivers and the threads each samples with.
fn driven(s: &TypedSizes) -> (bool, usize) {
    (s.shared, s.threads)
}

fn hpw(s: &TypedSizes) -> [usize; 3] {
    [s.hyperbatch, s.prefetch, s.workers]
}

#[test]
fn a_size_given_or_neighbor_files_in_memory() {
    let big = needs(1_000_000_000, 0, 0, 0);
    // From disk, the drivers sample a hyperbatch given with every thread; one batch at a time,
    // each thread samples its own.
    assert_eq!(
        choose(Some(5), false, 0, &big, 2, None, 40),
        TypedSizes::driven(5, 2, 2, 2, "5 (as given)".into())
    );
    assert_eq!(
        choose(Some(1), false, 0, &big, 3, None, 40),
        TypedSizes::new(1, 2, 3, "1 (as given)".into())
    );
    let one = needs(1, 0, 0, 0);
    assert_eq!(choose(Some(99), true, 0, &one, 2, None, 40).hyperbatch, 40);
    assert_eq!(
        choose(None, true, 1_000_000_000_000, &one, 2, None, 40),
        TypedSizes::new(
            1,
            2,
            2,
            "1 (auto: every neighbor file is in memory, nothing to share)".into()
        )
    );
    // 2 threads: jobs of H, 2 in flight (3 for H = 1) plus the one being handed out.
    let in_flight: Vec<usize> = [1, 2, 3].iter().map(|&h| jobs_in_flight(h, 2, 2)).collect();
    assert_eq!(in_flight, [3, 2, 2]);
    assert_eq!(TypedSizes::new(3, 2, 2, String::new()).window(), 6);
    // Drivers: a hyperbatch each.
    assert_eq!(TypedSizes::driven(3, 2, 2, 4, String::new()).window(), 6);
    assert_eq!(TypedSizes::driven(5, 2, 1, 2, String::new()).window(), 5);
    // Capped so that every thread has a job: 40 batches, 2 threads.
    assert_eq!(auto(1_000_000_000_000_000, &one).hyperbatch, 20);
}

#[test]
fn auto_by_bytes() {
    // Rows of 5 MB a batch (3 held: 2 ahead and the consumer's), 2 MB of read buffers a driver,
    // 1 MB of labels: 20 MB whatever H; 2 drivers hold H sampled batches of 4 MB each:
    // 20 + 2 * H * 4 <= 100 gives H = 10.
    let measured = needs(4 * MB, 5 * MB, 2 * MB, MB);
    assert_eq!(
        auto(100 * MB, &measured),
        TypedSizes::driven(
            10,
            2,
            2,
            2,
            "10 (auto: 2 hyperbatches at a time read from disk (one gathers its rows while the \
             next is sampled), each sampled with 2 threads, 3.8 MiB per sampled batch (measured \
             on 3 probe batches, x1.5) and 19.1 MiB whatever H (rows gathered for the next 2 \
             and the consumer's, read buffers, labels); 95.4 MiB held fit in the batches' 95.4 \
             MiB)"
                .into()
        )
    );
    // Staging's buffers (16 MB a worker) and row ids (1 MB a batch): 3 * 5 + 2 * (2 + 16) + 1 =
    // 52 MB whatever H, 2 * H * 5 more: H = 4 fits 100 MB, and the rows are staged.
    let staging = TypedNeeds {
        staging_per_batch: MB,
        staging_buffers: 16 * MB,
        ..measured
    };
    let s = auto(100 * MB, &staging);
    assert_eq!(shape(&s), (4, 2, 2, true));
    assert_eq!(driven(&s), (true, 2));
    assert!(s.why.ends_with(
        "; rows staged where a pass over a feature file pays (its buffers and row ids counted)"
    ));
    // In 65 MB staging leaves room for one batch at a time only: dropped, H = 5 without it.
    let s = auto(65 * MB, &staging);
    assert_eq!(shape(&s), (5, 2, 2, false));
    assert_eq!(driven(&s), (true, 2));
    assert!(s
        .why
        .ends_with("; rows not staged: with staging's buffers only one batch at a time would fit"));
    // One batch at a time needs 28 MB with 2 ahead; with 1 ahead 23 MB (2 * 5 + 2 * 2 + 1 + 2 * 4).
    // Not even two batches a hyperbatch fit the drivers: each thread samples a batch at a time.
    let s = auto(25 * MB, &measured);
    assert_eq!(hpw(&s), [1, 1, 2]);
    assert_eq!(driven(&s), (false, 1));
    assert!(s.why.ends_with(
        "; 1 batch ahead instead of 2: with them even one batch at a time would exceed the \
         batches' memory"
    ));
    assert_eq!(s.warning, None);
    // Two ahead asked: one worker instead (3 * 5 + 2 + 1 + 4 = 22 MB).
    let s = choose(None, false, 25 * MB, &measured, 2, Some(2), 40);
    assert_eq!(hpw(&s), [1, 2, 1]);
    assert!(s.why.starts_with("1 (auto: 1 threads") && s.why.contains("; 1 worker instead of 2: "));
    // Not enough for 1 ahead and 1 worker (2 * 5 + 2 + 1 + 4 = 17 MB): as asked, one at a time,
    // with a warning naming every part.
    let s = auto(10 * MB, &measured);
    assert_eq!(hpw(&s), [1, 2, 2]);
    assert!(s
        .why
        .contains("26.7 MiB held exceed, even one batch at a time, the batches' 9.5 MiB"));
    assert_eq!(
        s.warning.as_deref(),
        Some(
            "the memory budget is too small for these batches: the plan leaves the batches 9.5 \
             MiB, and even one batch at a time, with 1 ahead and 1 worker, needs 16.2 MiB: 2 \
             batches' rows (4.8 MiB each, measured on 3 probe batches), a sampled batch (3.8 \
             MiB), read buffers (1.9 MiB) and labels (976.6 KiB); they run as asked, one batch \
             at a time, beyond the budget: give a larger memory budget (--memory), a smaller \
             batch size or smaller fanouts"
        )
    );
}

/// With the probe's times, `auto` takes the configuration predicted fastest among those that
/// fit: here a pass shared by 7 batches on one worker beats each batch's own reads on two.
#[test]
fn auto_by_time() {
    let t = Times {
        sample: 0.1,
        read: 1.0,
        scan: 1.0,
        back: 0.05,
    };
    // By hand: read-bound on 2 workers, max(1.0, (0.1 + 1.0) / 2) = 1.0 a batch whatever H;
    // staged in hyperbatches of 7 on one worker, 1 / 7 + 0.05 of reads and 0.1 of sampling,
    // 0.2929 a batch, after a first hyperbatch of 7 read batch by batch (1.1 each): 40 batches
    // average 0.4341.
    assert_eq!(t.per_batch(5, 2, false, 40), 1.0);
    let want = (7.0 * 1.1 + 33.0 * (1.0 / 7.0 + 0.15)) / 40.0;
    assert!((t.per_batch(7, 1, true, 40) - want).abs() < 1e-12);
    // A pass dearer than the batch's own reads is not taken (the loader chooses per hyperbatch).
    assert_eq!(t.per_batch(1, 2, true, 40), 1.0);
    assert_eq!(t.per_batch(1, 2, false, 40), 1.0);
    let measured = TypedNeeds {
        staging_per_batch: MB,
        staging_buffers: 16 * MB,
        times: t,
        ..needs(4 * MB, 5 * MB, 2 * MB, MB)
    };
    // In 65 MB: unstaged, 2 ahead and 2 drivers fit H = 5 (20 + 2 * 4 H); staged, 2 drivers fit
    // only H = 1 (52 + 2 * 5 H, 47 + 2 * 5 H with 1 ahead), one driver with 1 ahead H = 7
    // (10 + 18 + 1 + 5 H).
    let s = auto(65 * MB, &measured);
    assert_eq!(shape(&s), (7, 1, 1, true));
    assert_eq!(driven(&s), (true, 2));
    assert!(s
        .why
        .starts_with("7 (auto: one hyperbatch at a time read from disk, sampled with 2 threads"));
    assert!(s.why.ends_with(
        "; rows staged where a pass over a feature file pays and 1 batch ahead and 1 worker: the \
         fastest that fits, predicted 0.43 s a batch (rows read 1.00 s a batch, a pass 1.00 s, \
         sampling 0.10 s, estimated on the probe batches), against 1.00 s for the largest H \
         unstaged (5 on 2 drivers)"
    ));
    // Where sampling dominates, two workers unstaged win (max(0.1, 1.1 / 2) = 0.55 a batch,
    // where one worker staged takes at least the 1.0 of its sampling): the choice without times.
    let t = Times {
        sample: 1.0,
        read: 0.1,
        scan: 1.0,
        back: 0.05,
    };
    let sampling = TypedNeeds {
        times: t,
        ..measured
    };
    let s = auto(65 * MB, &sampling);
    assert_eq!(shape(&s), (5, 2, 2, false));
    assert!(s.why.ends_with(
        "; rows not staged: the fastest that fits, predicted 0.55 s a batch (rows read 0.10 s a \
         batch, a pass 1.00 s, sampling 1.00 s, estimated on the probe batches)"
    ));
    // Without staging's buffers (nothing may be staged) or without estimates, times are not used.
    let unstaged = TypedNeeds {
        staging_buffers: 0,
        ..sampling
    };
    let untimed = TypedNeeds {
        times: Times::default(),
        ..unstaged
    };
    assert_eq!(auto(65 * MB, &unstaged), auto(65 * MB, &untimed));
    let no_reads = TypedNeeds {
        times: Times {
            sample: 1.0,
            ..Times::default()
        },
        ..measured
    };
    let no_times = TypedNeeds {
        times: Times::default(),
        ..measured
    };
    assert_eq!(auto(65 * MB, &no_reads), auto(65 * MB, &no_times));
}

#[test]
fn measured_from_probe_batches() {
    let probe = |state, batch, sample, scratch, rows, staging, times: [f64; 4]| ProbeBytes {
        state,
        batch,
        sample,
        scratch,
        readers: 3 << 20,
        rows,
        staging,
        sample_s: times[0],
        read_s: times[1],
        pass_s: times[2],
        back_s: times[3],
        ..ProbeBytes::default()
    };
    let probes = [
        probe(100, 50, 80, 30, 1000, 7, [0.2, 1.0, 3.0, 0.1]),
        probe(100, 70, 90, 30, 1200, 9, [0.4, 2.0, 3.0, 0.3]),
    ];
    let n = TypedNeeds::measured(&probes, 13 << 20, 8000, 16 << 20);
    // The largest of each, times 1.5 (1.1 for rows; the threads' read buffers as they are); a
    // gathered batch and a worker hold a finished sample besides.
    assert_eq!(n.per_batch, 255);
    assert_eq!(n.rows, 1320 + 135);
    assert_eq!(n.buffers, (13 << 20) + (3 << 20) + 45 + 135);
    assert_eq!((n.sample, n.drivers), (135, 0));
    assert_eq!(n.with_drivers(2).drivers, 2);
    assert_eq!(
        (n.held, n.staging_per_batch, n.staging_buffers),
        (8000, 13, 16 << 20)
    );
    // The probe's times: means per batch, the one pass as measured.
    let t = n.times;
    for (got, want) in [(t.sample, 0.3), (t.read, 1.5), (t.scan, 3.0), (t.back, 0.2)] {
        assert!((got - want).abs() < 1e-12, "{got} != {want}");
    }
    assert_eq!(
        TypedNeeds::measured(&[], 5, 6, 7),
        TypedNeeds {
            buffers: 5,
            held: 6,
            staging_buffers: 7,
            ..TypedNeeds::default()
        }
    );
    assert_eq!(Times::measured(&[]), Times::default());
}

/// The drivers hold the share: one (batches without rows to gather) holds twice the batches two
/// do, each further sampling thread with a finished sample it may spill; where not even one
/// batch at a time fits a driver, a worker samples it alone.
#[test]
fn drivers_hold_the_hyperbatches() {
    let one = TypedNeeds {
        sample: MB,
        drivers: 1,
        ..needs(4 * MB, 5 * MB, 2 * MB, MB)
    };
    // 3 * 5 + (2 + 1) + 1 = 19 MB whatever H (a driver's buffers and the second thread's
    // sample), 19 + 4 H <= 100: H = 20.
    let s = auto(100 * MB, &one);
    assert_eq!((hpw(&s), driven(&s)), ([20, 2, 1], (true, 2)));
    assert_eq!(s.window(), 20);
    assert!(s.why.starts_with(
        "20 (auto: one hyperbatch at a time read from disk, sampled with 2 threads, 3.8 MiB per \
         sampled batch"
    ));
    // Two drivers: 15 + 2 * 3 + 1 = 22 MB, 22 + 8 H <= 100: H = 9.
    let two = TypedNeeds { drivers: 2, ..one };
    assert_eq!(hpw(&auto(100 * MB, &two)), [9, 2, 2]);
    // At most every batch on one driver, half of them each on two.
    let huge = 1_000_000 * MB;
    assert_eq!(auto(huge, &one).hyperbatch, 40);
    assert_eq!(auto(huge, &two).hyperbatch, 20);
    // 22 MB: 2 ahead do not fit a driver (23 MB for one batch), 1 ahead fits 2 (14 + 4 H).
    let s = auto(22 * MB, &one);
    assert_eq!((hpw(&s), driven(&s)), ([2, 1, 1], (true, 2)));
    // 17 MB: a driver needs 18 MB for one batch with 1 ahead, a worker of one thread 17.
    let s = auto(17 * MB, &one);
    assert_eq!((hpw(&s), driven(&s)), ([1, 1, 1], (false, 1)));
    assert_eq!(s.warning, None);
    // The drivers never exceed the share, whatever it is.
    for share in (10..400).map(|m| m * MB / 4) {
        for n in [&one, &two] {
            let s = auto(share, n);
            if !s.shared {
                assert_eq!(s.hyperbatch, 1);
                continue;
            }
            let (h, p, d) = (s.hyperbatch as u64, s.prefetch as u64, s.workers as u64);
            let buffers = n.buffers + n.sample;
            let total = (p + 1) * n.rows + d * (buffers + h * n.per_batch) + n.held;
            assert!(h >= 2 && total <= share, "{share}: {s:?}");
        }
    }
}
