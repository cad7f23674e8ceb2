//! The request engine: answers equal the library's, from any number of threads, batched into
//! waves; limits, the bounded queue, deadlines, cancellation and closing.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringgnn_features::FeatureGatherer;
use ringgnn_loader::{BackendChoice, CachePolicy, FeatureOptions, LoaderOptions};
use ringgnn_sampler::{Fanout, NeighborSampler, NeighborSource, SampleOptions, Seeds};
use ringgnn_serve::{CancelToken, Engine, EngineOptions, SampleRequest, ServeError};
use ringgnn_store::generate::sbm::{generate_sbm, SbmOptions};
use ringgnn_store::manifest::FeatureDtype;
use ringgnn_store::{rng, Dataset, GraphOptions, NoProgress};
use tempfile::TempDir;

fn nz(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

fn fan(v: &[i64]) -> Vec<Fanout> {
    Fanout::parse_all(v).unwrap()
}

/// A labeled sbm of 2000 nodes with 12 features.
fn sbm(dtype: FeatureDtype) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let opts = SbmOptions {
        out: out.clone(),
        nodes: 2000,
        classes: 4,
        avg_degree: 8.0,
        feature_dim: 12,
        feature_dtype: dtype,
        seed: 3,
        split: vec![("train".into(), 0.5)],
        graph: GraphOptions::default(),
        overwrite: false,
    };
    generate_sbm(&opts, &NoProgress).unwrap();
    (dir, out)
}

fn options(backend: BackendChoice, threads: usize) -> EngineOptions {
    EngineOptions::new(LoaderOptions {
        sample: SampleOptions {
            fanouts: fan(&[10, 5]),
            seed: 7,
            ..Default::default()
        },
        backend,
        threads: nz(threads),
        memory: Some(256 << 20),
        features: Some(FeatureOptions {
            backend,
            cache: Some(16 << 10),
            cache_policy: CachePolicy::Degree,
            staging_dir: None,
            staging_cap: None,
        }),
        batch_size: nz(256),
        ..Default::default()
    })
}

fn req(ids: &[u64], n: u64, fanouts: &[i64], replace: bool, seed: u64) -> SampleRequest {
    SampleRequest {
        seeds: Seeds::new(ids.to_vec(), n).unwrap(),
        fanouts: fan(fanouts),
        replace,
        seed,
        with_edge_ids: false,
        times: None,
    }
}

/// What the library gives for the same request alone.
fn alone(dir: &Path, r: &SampleRequest) -> ringgnn_sampler::SampledSubgraph {
    let ds = Dataset::open(dir).unwrap();
    let mut s = NeighborSampler::open(
        &ds,
        &r.fanouts,
        r.replace,
        NeighborSource::memory(&ds).unwrap(),
    )
    .unwrap();
    s.sample(r.seeds.as_slice(), r.seed, 0, 0, r.with_edge_ids)
        .unwrap()
}

#[test]
fn concurrent_requests_get_their_own_answers_in_shared_waves() {
    let (_d, dir) = sbm(FeatureDtype::F32);
    for backend in [BackendChoice::Memory, BackendChoice::Pread] {
        let mut o = options(backend, 2);
        // A long window, so that the 8 threads' requests meet in waves.
        o.max_wait = Duration::from_millis(20);
        let e = Arc::new(Engine::open(&dir, o).unwrap());
        let n = e.num_nodes();
        let ds = Dataset::open(&dir).unwrap();
        let mut direct = FeatureGatherer::memory(&ds).unwrap();
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let (e, dir) = (e.clone(), dir.clone());
                let direct_rows = {
                    let ids: Vec<u64> = (0..5).map(|i| (t * 97 + i * 13) % n).collect();
                    let mut x = vec![0f32; ids.len() * 12];
                    direct.gather(&ids, &mut x).unwrap();
                    (ids, x)
                };
                s.spawn(move || {
                    let mut r = rng::stream(t, 1, 1);
                    for k in 0..6 {
                        let ids: Vec<u64> = (0..1 + k % 3).map(|_| rng::below(&mut r, n)).collect();
                        let fanouts: &[i64] = [&[10, 5][..], &[3], &[-1, 2]][k as usize % 3];
                        let q = req(&ids, n, fanouts, k % 2 == 1, t * 100 + k);
                        let want = alone(&dir, &q);
                        assert_eq!(e.sample(q, None, None).unwrap(), want);
                    }
                    let (ids, x) = direct_rows;
                    let rows = e
                        .features(&Seeds::new(ids, n).unwrap(), None, None)
                        .unwrap();
                    assert_eq!((rows.rows, rows.dim), (5, 12));
                    assert_eq!(rows.data, x);
                });
            }
        });
        let st = e.stats();
        assert_eq!((st.sample_requests, st.feature_requests), (48, 8));
        assert_eq!(st.wave_requests, 56, "{st:?}");
        assert_eq!(st.latency.count(), 56, "every answer's latency is recorded");
        assert!(
            st.waves < 56,
            "requests that arrive together share waves: {st:?}"
        );
        assert_eq!((st.busy, st.failed, st.queued), (0, 0, 0));
    }
}

#[test]
fn callers_leading_waves_hand_workers_on_and_none_is_lost() {
    // Many callers, 2 workers, no window: requests are served on the callers' threads, workers
    // pass from caller to caller; some give up (deadlines already near, cancels). Every answer
    // is right, every request is accounted for once, and closing finds both workers back.
    let (_d, dir) = sbm(FeatureDtype::F32);
    let mut o = options(BackendChoice::Pread, 2);
    o.max_wait = Duration::ZERO;
    o.queue = nz(1024);
    let e = Arc::new(Engine::open(&dir, o).unwrap());
    let n = e.num_nodes();
    let (answered, gave_up) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..12u64 {
            let (e, dir) = (e.clone(), dir.clone());
            let (answered, gave_up) = (&answered, &gave_up);
            s.spawn(move || {
                let ds = Dataset::open(&dir).unwrap();
                let src = NeighborSource::memory(&ds).unwrap();
                let mut mem = NeighborSampler::open(&ds, &fan(&[10, 5]), false, src).unwrap();
                let mut r = rng::stream(t, 7, 7);
                for k in 0..150u64 {
                    let ids = vec![rng::below(&mut r, n)];
                    let q = req(&ids, n, &[10, 5], false, t * 1000 + k);
                    let (deadline, token) = match k % 10 {
                        0 => (Some(Instant::now() + Duration::from_micros(50)), None),
                        1 => {
                            let c = CancelToken::default();
                            c.cancel();
                            (None, Some(c))
                        }
                        _ => (None, None),
                    };
                    match e.sample(q.clone(), deadline, token) {
                        Ok(got) => {
                            let want = mem.sample(q.seeds.as_slice(), q.seed, 0, 0, false).unwrap();
                            assert_eq!(got, want);
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(ServeError::DeadlineExceeded | ServeError::Cancelled) => {
                            assert!(k % 10 < 2, "request {k} of thread {t} was given up");
                            gave_up.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(other) => panic!("{other}"),
                    }
                }
            });
        }
    });
    let st = e.stats();
    let (a, g) = (answered.into_inner(), gave_up.into_inner());
    assert_eq!(a + g, 12 * 150);
    assert!(a >= 12 * 150 * 8 / 10, "{st:?}");
    assert_eq!(st.deadline_exceeded + st.cancelled, g, "{st:?}");
    assert_eq!(st.latency.count(), a, "answered requests only");
    assert_eq!((st.busy, st.failed, st.queued), (0, 0, 0));
    e.close();
}

#[test]
fn rows_come_back_in_the_stored_dtype_exactly() {
    let (_d, dir) = sbm(FeatureDtype::F16);
    let e = Engine::open(&dir, options(BackendChoice::Pread, 1)).unwrap();
    let ids = Seeds::new(vec![3u64, 3, 1999, 0], e.num_nodes()).unwrap();
    let rows = e.features(&ids, None, None).unwrap();
    let bytes = rows.to_stored(FeatureDtype::F16);
    assert_eq!(bytes.len(), 4 * 12 * 2);
    let back: Vec<f32> = bytes
        .chunks(2)
        .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
        .collect();
    assert_eq!(back, rows.data);
    // A node asked for twice gets its row twice.
    assert_eq!(rows.data[..12], rows.data[12..24]);
}

#[test]
fn requests_beyond_the_limits_are_refused_before_they_are_queued() {
    let (_d, dir) = sbm(FeatureDtype::F32);
    let mut o = options(BackendChoice::Memory, 1);
    o.limits.max_nodes = 10;
    o.limits.max_hops = 3;
    let e = Engine::open(&dir, o).unwrap();
    let n = e.num_nodes();
    fn msg<T>(r: ringgnn_serve::Result<T>) -> String {
        match r {
            Err(ServeError::Input(m)) => m,
            Err(other) => panic!("expected an input error, got {other:?}"),
            Ok(_) => panic!("expected an input error"),
        }
    }
    let m = msg(e.sample(req(&[1; 11], n, &[2], false, 0), None, None));
    assert!(m.contains("11 node ids") && m.contains("at most 10"), "{m}");
    let m = msg(e.sample(req(&[], n, &[2], false, 0), None, None));
    assert!(m.contains("no node ids"), "{m}");
    let m = msg(e.sample(req(&[1], n, &[2, 2, 2, 2], false, 0), None, None));
    assert!(m.contains("4 fanouts"), "{m}");
    let mut no_hops = req(&[1], n, &[2], false, 0);
    no_hops.fanouts.clear();
    let m = msg(e.sample(no_hops, None, None));
    assert!(m.contains("0 fanouts"), "{m}");
    // Larger, by its upper bound, than what the plan holds per worker (256 seeds at fanouts
    // 10,5: more than --max-nodes, but never less): only fanouts above the defaults get here.
    let m = msg(e.sample(req(&[1; 10], n, &[1000, 1000, 1000], true, 0), None, None));
    assert!(
        m.contains("may sample up to") && m.contains("fewer") && m.contains("--max-nodes"),
        "{m}"
    );
    let other = Seeds::new(vec![1u64], 5).unwrap();
    let m = msg(e.features(&other, None, None));
    assert!(m.contains("graph of 5 nodes"), "{m}");
    assert_eq!(e.stats().waves, 0);
    // The engine still serves.
    assert!(e.sample(req(&[1], n, &[2], false, 0), None, None).is_ok());
}

#[test]
fn a_full_queue_answers_busy_then_recovers() {
    let (_d, dir) = sbm(FeatureDtype::F32);
    let mut o = options(BackendChoice::Memory, 1);
    o.queue = nz(1);
    // The one worker holds the first request in its window for 300 ms.
    o.max_wait = Duration::from_millis(300);
    let e = Arc::new(Engine::open(&dir, o).unwrap());
    let n = e.num_nodes();
    let first = {
        let e = e.clone();
        std::thread::spawn(move || e.sample(req(&[1], n, &[2], false, 0), None, None))
    };
    std::thread::sleep(Duration::from_millis(50));
    match e.sample(req(&[2], n, &[2], false, 0), None, None) {
        Err(ServeError::Busy(1)) => {}
        other => panic!("expected busy, got {other:?}"),
    }
    assert!(first.join().unwrap().is_ok());
    assert!(e.sample(req(&[2], n, &[2], false, 0), None, None).is_ok());
    assert_eq!(e.stats().busy, 1);
}

#[test]
fn deadlines_and_cancellation_end_the_wait_and_skip_the_work() {
    let (_d, dir) = sbm(FeatureDtype::F32);
    let mut o = options(BackendChoice::Memory, 1);
    o.max_wait = Duration::from_millis(400);
    let e = Arc::new(Engine::open(&dir, o).unwrap());
    let n = e.num_nodes();
    // Already past.
    let past = Instant::now() - Duration::from_millis(1);
    assert!(matches!(
        e.sample(req(&[1], n, &[2], false, 0), Some(past), None),
        Err(ServeError::DeadlineExceeded)
    ));
    // Shorter than the window: the caller gives up at its deadline.
    let t0 = Instant::now();
    let soon = t0 + Duration::from_millis(60);
    assert!(matches!(
        e.sample(req(&[1], n, &[2], false, 0), Some(soon), None),
        Err(ServeError::DeadlineExceeded)
    ));
    let waited = t0.elapsed();
    assert!(waited < Duration::from_millis(300), "{waited:?}");
    // Cancelled by another thread while waiting.
    let token = CancelToken::default();
    let t = token.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        t.cancel();
    });
    let t0 = Instant::now();
    assert!(matches!(
        e.sample(req(&[1], n, &[2], false, 0), None, Some(token)),
        Err(ServeError::Cancelled)
    ));
    assert!(t0.elapsed() < Duration::from_millis(300));
    canceller.join().unwrap();
    // Neither was sampled: the worker skipped them.
    std::thread::sleep(Duration::from_millis(500));
    let st = e.stats();
    assert_eq!(
        (st.deadline_exceeded, st.cancelled, st.waves),
        (2, 1, 0),
        "{st:?}"
    );
}

#[test]
fn a_request_given_up_frees_its_queue_place_at_once() {
    let (_d, dir) = sbm(FeatureDtype::F32);
    let mut o = options(BackendChoice::Memory, 1);
    o.max_wait = Duration::from_millis(300);
    o.queue = nz(1);
    let e = Engine::open(&dir, o).unwrap();
    let n = e.num_nodes();
    for _ in 0..5 {
        // Its deadline passes while its wave still collects: its place is free right away, so
        // the next request is queued, not refused as busy.
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(matches!(
            e.sample(req(&[1], n, &[2], false, 0), Some(soon), None),
            Err(ServeError::DeadlineExceeded)
        ));
    }
    let r = req(&[2], n, &[2], false, 0);
    assert_eq!(e.sample(r.clone(), None, None).unwrap(), alone(&dir, &r));
    let st = e.stats();
    assert_eq!(
        (st.busy, st.deadline_exceeded, st.waves),
        (0, 5, 1),
        "{st:?}"
    );
}

#[test]
fn hot_neighbor_pages_answer_the_same_without_reading_again() {
    let (_d, dir) = sbm(FeatureDtype::F32);
    let mut o = options(BackendChoice::Pread, 2);
    o.loader.neighbor_cache = None;
    o.loader.features = None;
    let e = Engine::open(&dir, o).unwrap();
    assert!(e.plan().neighbor_cache > 0, "{}", e.plan());
    let n = e.num_nodes();
    let r = req(&[3, 17, 99], n, &[10, 5], false, 4);
    assert_eq!(e.sample(r.clone(), None, None).unwrap(), alone(&dir, &r));
    let (read, pages) = (
        e.loader().io_stats().bytes,
        e.loader().graph().page_cache_stats().unwrap(),
    );
    assert!(read > 0 && pages.misses > 0 && pages.pages > 0, "{pages:?}");
    // The same request again: every page is cached, nothing is read.
    assert_eq!(e.sample(r.clone(), None, None).unwrap(), alone(&dir, &r));
    let again = e.loader().graph().page_cache_stats().unwrap();
    assert_eq!(e.loader().io_stats().bytes, read);
    assert_eq!(again.misses, pages.misses);
    assert!(again.hits > pages.hits);
    // Training's default keeps none.
    let plain = Engine::open(&dir, options(BackendChoice::Pread, 1)).unwrap();
    assert!(plain.loader().graph().page_cache_stats().is_none());
}

#[test]
fn the_plan_reserves_the_queue() {
    let (_d, dir) = sbm(FeatureDtype::F32);
    let mut o = options(BackendChoice::Pread, 1);
    o.loader.reserve = 1000;
    o.queue = nz(8);
    o.limits.max_nodes = 100;
    let e = Engine::open(&dir, o).unwrap();
    // 8 requests of 100 ids, 16 bytes each, on top of the caller's reserve.
    assert_eq!(e.plan().reserve, 1000 + 8 * 100 * 16);
}

#[test]
fn a_wave_that_panics_answers_its_requests_and_the_others_go_on() {
    let (_d, dir) = sbm(FeatureDtype::F32);
    let mut o = options(BackendChoice::Pread, 2);
    o.max_wait = Duration::from_millis(50);
    let e = Arc::new(Engine::open(&dir, o).unwrap());
    let n = e.num_nodes();
    // A faulty request and a good one in the same wave: both get an error, nobody hangs.
    std::thread::scope(|s| {
        let bad = s.spawn(|| {
            e.sample(
                req(&[1], n, &[3], false, ringgnn_serve::FAULT_SEED),
                None,
                None,
            )
        });
        std::thread::sleep(Duration::from_millis(10));
        let good = s.spawn(|| e.sample(req(&[2], n, &[3], false, 5), None, None));
        for r in [bad.join().unwrap(), good.join().unwrap()] {
            assert!(
                matches!(r, Err(ServeError::Internal(ref m)) if m.contains("wave failed")),
                "{r:?}"
            );
        }
    });
    // One worker is lost; the other serves on.
    let r = req(&[3], n, &[3], false, 6);
    assert_eq!(e.sample(r.clone(), None, None).unwrap(), alone(&dir, &r));
    // The second fault takes the last worker: requests are refused, not left waiting.
    assert!(e
        .sample(
            req(&[1], n, &[3], false, ringgnn_serve::FAULT_SEED),
            None,
            None
        )
        .is_err());
    assert!(matches!(
        e.sample(req(&[2], n, &[3], false, 1), None, None),
        Err(ServeError::Internal(m)) if m.contains("every worker")
    ));
    e.close();
}

#[test]
fn closing_answers_what_is_queued_and_refuses_the_rest() {
    let (_d, dir) = sbm(FeatureDtype::F32);
    let mut o = options(BackendChoice::Memory, 1);
    o.max_wait = Duration::from_millis(200);
    let e = Arc::new(Engine::open(&dir, o).unwrap());
    let n = e.num_nodes();
    let waiting: Vec<_> = (0..3u64)
        .map(|i| {
            let e = e.clone();
            std::thread::spawn(move || e.sample(req(&[i], n, &[2], false, 0), None, None))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    e.close();
    for w in waiting {
        assert!(w.join().unwrap().is_ok());
    }
    assert!(matches!(
        e.sample(req(&[1], n, &[2], false, 0), None, None),
        Err(ServeError::ShuttingDown)
    ));
}

#[test]
fn a_sample_with_its_rows_equals_the_sample_and_a_gather() {
    let (_d, dir) = sbm(FeatureDtype::Bf16);
    let e = Engine::open(&dir, options(BackendChoice::Pread, 2)).unwrap();
    let n = e.num_nodes();
    let q = req(&[5, 9, 5], n, &[4, 3], false, 12);
    let ((s, time), rows) = e.sample_with_rows(q.clone(), None, None).unwrap();
    assert_eq!((s.clone(), time), (alone(&dir, &q), None));
    let ds = Dataset::open(&dir).unwrap();
    let mut x = vec![0f32; s.node.len() * 12];
    FeatureGatherer::memory(&ds)
        .unwrap()
        .gather(&s.node, &mut x)
        .unwrap();
    assert_eq!((rows.rows, rows.dim, rows.data), (s.node.len(), 12, x));
}

#[test]
fn a_request_larger_than_the_asked_batch_is_served_whole_as_a_plan_that_holds_it_would() {
    // Issue 20, case 5: a plan for waves of 4 seeds used to refuse a request of 60 ids (its
    // upper bound is above what 4 seeds may sample), though --max-nodes allowed 64. Issue 34,
    // item 11: the workers stay sized for waves of 4, and the request is served alone, in the
    // room held for one request of --max-nodes (here beside the plan: the hot pages of this
    // small file are too few to lend it), exactly as by an engine asked for waves of 64, and
    // as the library samples it alone.
    let (_d, dir) = sbm(FeatureDtype::F32);
    let engine = |batch: usize| {
        let mut o = options(BackendChoice::Pread, 2);
        o.loader.batch_size = nz(batch);
        o.limits.max_nodes = 64;
        Engine::open(&dir, o).unwrap()
    };
    let (small, whole) = (engine(4), engine(64));
    assert_eq!(small.loader().plan_batch_size(), 4);
    assert_eq!(whole.loader().plan_batch_size(), 64);
    let (room, lent) = small.large_room();
    assert!(room > 0 && !lent, "{room} {lent}");
    assert_eq!(
        whole.large_room(),
        (0, false),
        "waves of 64 hold every request"
    );
    assert_eq!(small.plan().reserve, whole.plan().reserve + room);
    let n = small.num_nodes();
    let ids: Vec<u64> = (0..60).map(|i| (i * 31 + 5) % n).collect();
    let ix = small.loader().graph().index();
    let at = |seeds: u64, f: &[i64]| {
        let o = SampleOptions {
            fanouts: fan(f),
            ..Default::default()
        };
        ix.bound(seeds, &o).edges
    };
    for (fanouts, seed) in [(&[10, 5][..], 5), (&[8, 4][..], 9)] {
        let q = req(&ids, n, fanouts, false, seed);
        assert!(
            at(60, fanouts) > at(4, &[10, 5]),
            "larger than 4 seeds' wave"
        );
        let got = small.sample(q.clone(), None, None).unwrap();
        assert_eq!(got, whole.sample(q.clone(), None, None).unwrap());
        assert_eq!(got, alone(&dir, &q));
        assert_eq!(got.num_sampled_nodes[0], 60);
        let (s, rows) = small.sample_with_rows(q.clone(), None, None).unwrap();
        let (ws, wrows) = whole.sample_with_rows(q, None, None).unwrap();
        assert_eq!((s, &rows), (ws, &wrows));
        assert_eq!(rows.rows, got.node.len());
    }
    // Rows of 64 ids, more than a wave of 4 seeds has nodes.
    let ids: Vec<u64> = (0..64).map(|i| i * 17 % n).collect();
    let seeds = Seeds::new(ids, n).unwrap();
    assert_eq!(
        small.features(&seeds, None, None).unwrap(),
        whole.features(&seeds, None, None).unwrap()
    );
    // One more id is over --max-nodes: refused, naming it.
    match small.sample(req(&[1; 65], n, &[10, 5], false, 0), None, None) {
        Err(ServeError::Input(m)) => {
            assert!(m.contains("at most 64 (the server's --max-nodes)"), "{m}")
        }
        other => panic!("expected an input error, got {other:?}"),
    }
    let st = small.stats();
    assert_eq!((st.busy, st.failed), (0, 0));
    for (e, text) in [
        (
            &small,
            "a larger request, up to 64 ids (--max-nodes), is sampled alone, one at a time",
        ),
        (
            &whole,
            "which holds any request of up to 64 ids (--max-nodes)",
        ),
    ] {
        let p = e.plan().to_string();
        assert!(p.contains(text) && !p.contains("per epoch"), "{p}");
    }
}

/// A graph large enough that its hot neighbor pages can lend the room of a request of 64 ids:
/// an sbm of 100,000 nodes of degree 10 (a 4 MB neighbor file; its one feature not served).
fn larger_sbm() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let opts = SbmOptions {
        out: out.clone(),
        nodes: 100_000,
        classes: 2,
        avg_degree: 10.0,
        feature_dim: 1,
        feature_dtype: FeatureDtype::F32,
        seed: 5,
        split: vec![],
        graph: GraphOptions::default(),
        overwrite: false,
    };
    generate_sbm(&opts, &NoProgress).unwrap();
    (dir, out)
}

fn served(backend: BackendChoice, batch: usize, max_nodes: usize) -> EngineOptions {
    let mut o = options(backend, 2);
    o.loader.features = None;
    o.loader.neighbor_cache = None;
    o.loader.batch_size = nz(batch);
    o.limits.max_nodes = max_nodes;
    o
}

#[test]
fn a_large_request_is_answered_alone_in_room_the_hot_pages_lend_exactly_as_one_wave() {
    // Workers sized for waves of 4 seeds; requests of up to 64 ids borrow their room from the
    // hot neighbor pages, one at a time, and give it back: the same answers as an engine whose
    // waves hold 64 seeds, and as the library alone, seeded, from many threads at once.
    let (_d, dir) = larger_sbm();
    let small = Engine::open(&dir, served(BackendChoice::Pread, 4, 64)).unwrap();
    let whole = Engine::open(&dir, served(BackendChoice::Pread, 64, 64)).unwrap();
    let (room, lent) = small.large_room();
    assert!(room > 0 && lent, "{room} {lent}: {}", small.plan());
    // The room is not taken off the plan: the hot pages keep all the budget gives them.
    let (sp, wp) = (small.plan(), whole.plan());
    assert_eq!(sp.reserve, wp.reserve);
    assert!(sp.sampler < wp.sampler, "{sp} / {wp}");
    let full = small.loader().graph().page_cache_stats().unwrap().capacity;
    assert!(full * 4096 > room, "{full} pages");
    let n = small.num_nodes();
    let request = |t: u64, i: u64| {
        let k = if i.is_multiple_of(2) {
            60
        } else {
            1 + (t + i) % 3
        };
        let ids: Vec<u64> = (0..k)
            .map(|j| (t * 7919 + i * 104_729 + j * 31) % n)
            .collect();
        req(&ids, n, &[10, 5], false, t * 100 + i)
    };
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (small, whole, dir) = (&small, &whole, &dir);
            s.spawn(move || {
                for i in 0..6u64 {
                    let q = request(t, i);
                    let got = small.sample(q.clone(), None, None).unwrap();
                    assert_eq!(got, alone(dir, &q), "thread {t}, request {i}");
                    assert_eq!(got, whole.sample(q.clone(), None, None).unwrap());
                    // Encoded within the room: the same bytes.
                    let bytes = small
                        .sample_then(q.clone(), None, None, |(s, time)| {
                            ringgnn_serve::wire::sample_reply(&s, q.seed, time.as_deref())
                        })
                        .unwrap();
                    assert_eq!(bytes, ringgnn_serve::wire::sample_reply(&got, q.seed, None));
                }
            });
        }
    });
    // Every slot is back, and the waves were within their limits.
    let pages = small.loader().graph().page_cache_stats().unwrap();
    assert_eq!(pages.capacity, full);
    let st = small.stats();
    assert_eq!((st.busy, st.failed, st.sample_requests), (0, 0, 4 * 6 * 2));
}

#[test]
fn the_default_plan_keeps_the_hot_page_share_of_waves_of_64() {
    // The default (waves of 64 seeds, --max-nodes 4096) sizes its workers as --max-nodes 64
    // does: the same sampler share and hot pages, only the queue's larger requests in the
    // reserve; the room for a request of 4096 ids is lent by the hot pages.
    let (_d, dir) = larger_sbm();
    let mut d = served(BackendChoice::Pread, 64, 4096);
    d.loader.batch_size = EngineOptions::DEFAULT_WAVE_SEEDS;
    d.limits = Default::default();
    d.loader.memory = Some(48 << 20);
    // One hop of 2: the room of 4096 seeds fits the 4 MB file's pages.
    d.loader.sample.fanouts = fan(&[2]);
    let mut m = d.clone();
    m.limits.max_nodes = 64;
    let (de, me) = (
        Engine::open(&dir, d).unwrap(),
        Engine::open(&dir, m).unwrap(),
    );
    let (dp, mp) = (de.plan(), me.plan());
    assert_eq!(dp.sampler, mp.sampler, "{dp} / {mp}");
    assert_eq!(dp.reserve, mp.reserve + 256 * (4096 - 64) * 16);
    assert_eq!(dp.neighbor_cache, mp.neighbor_cache, "{dp} / {mp}");
    assert!(de.large_room().1, "{dp}");
    let text = dp.to_string();
    assert!(
        text.contains("chosen by the server: each of its workers holds a wave of up to 64 seeds (--batch-size)")
            && text.contains("at fanouts [2]; a larger request, up to 4096 ids (--max-nodes), is sampled alone, one at a time, in ")
            && text.contains("that the hot neighbor pages lend it until it is answered")
            && !text.contains("per epoch"),
        "{text}"
    );
    // A request of 4096 ids is answered, as the library samples it.
    let n = de.num_nodes();
    let ids: Vec<u64> = (0..4096).map(|i| i * 24 % n).collect();
    let q = req(&ids, n, &[2], false, 11);
    assert_eq!(de.sample(q.clone(), None, None).unwrap(), alone(&dir, &q));
}

#[test]
fn a_budget_too_small_for_max_nodes_refuses_to_start_and_says_what_to_change() {
    // The neighbor file in memory (no measuring: the upper bounds are the plan). A budget that
    // holds the plan for requests of 1 id does not hold it for 2000: the engine does not open,
    // rather than refusing those requests later.
    let (_d, dir) = sbm(FeatureDtype::F32);
    let opts = |max_nodes: usize, memory: u64| {
        let mut o = options(BackendChoice::Memory, 1);
        o.loader.batch_size = nz(1);
        o.loader.memory = Some(memory);
        o.limits.max_nodes = max_nodes;
        o.queue = nz(1);
        o
    };
    let one = Engine::open(&dir, opts(1, 256 << 20)).unwrap().plan();
    let all = Engine::open(&dir, opts(2000, 256 << 20)).unwrap().plan();
    // What a plan needs, without its slack (1/32 of the budget) and the caches (the rest).
    let fixed = |p: &ringgnn_loader::MemoryPlan| p.total() - p.slack - p.cache - p.neighbor_cache;
    assert!(fixed(&all) > fixed(&one) + (1 << 20), "{one:?} {all:?}");
    // What the small plan needs with its slack, and a little more: enough for 1 id, not 2000.
    let budget = fixed(&one) * 33 / 31 + (64 << 10);
    assert!(budget < fixed(&all), "{one:?} {all:?}");
    assert!(Engine::open(&dir, opts(1, budget)).is_ok());
    match Engine::open(&dir, opts(2000, budget)) {
        Err(ServeError::Input(m)) => {
            for want in [
                "too small",
                "2000 node ids (--max-nodes)",
                "raise --memory",
                "lower --max-nodes",
            ] {
                assert!(m.contains(want), "{want:?} not in: {m}");
            }
        }
        Err(other) => panic!("expected an input error, got {other}"),
        Ok(_) => panic!("a plan for 2000 ids opened within {budget} bytes"),
    }
}

/// A labeled sbm of 2000 nodes with uniform edge and node times in [0, 1000).
fn timed_sbm() -> (TempDir, PathBuf) {
    use ringgnn_store::options::{TimeGen, TimeInput, TimeOptions};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let gen = |seed| {
        Some(TimeInput::Generated(TimeGen::Uniform {
            seed,
            lo: 0,
            hi: 1000,
        }))
    };
    let opts = SbmOptions {
        out: out.clone(),
        nodes: 2000,
        classes: 4,
        avg_degree: 8.0,
        feature_dim: 4,
        feature_dtype: FeatureDtype::F32,
        seed: 3,
        split: vec![("train".into(), 0.5)],
        graph: GraphOptions {
            times: TimeOptions {
                edges: gen(1),
                nodes: gen(2),
            },
            ..GraphOptions::default()
        },
        overwrite: false,
    };
    generate_sbm(&opts, &NoProgress).unwrap();
    (dir, out)
}

/// What the typed sampler over the graph's one-type case gives a request at times alone.
fn alone_at(dir: &Path, r: &SampleRequest, times: &[i64]) -> (Vec<u64>, Vec<u64>, Vec<i64>) {
    let g = ringgnn_sampler::TypedGraph::open(dir, None, false, &[]).unwrap();
    let (mut s, _, _) = g.sampler(vec![r.fanouts.clone()], r.replace, None).unwrap();
    let seeds = [(0usize, r.seeds.ids())];
    let t = [times];
    let req = ringgnn_sampler::HeteroRequest {
        seeds: &seeds,
        batch: 0,
        times: Some(&t),
    };
    let mut out = s.sample_many(&[req], r.seed, 0, false).unwrap();
    let o = out.remove(0);
    (
        o.node[0].clone(),
        o.row[0].clone(),
        o.time.unwrap()[0].clone(),
    )
}

#[test]
fn requests_at_times_are_the_typed_samplers_and_stay_apart_in_shared_waves() {
    use ringgnn_serve::RequestTimes;
    let (_d, dir) = timed_sbm();
    let n = 2000;
    for backend in [BackendChoice::Memory, BackendChoice::Pread] {
        let mut o = options(backend, 2);
        o.max_wait = Duration::from_millis(20);
        let e = Arc::new(Engine::open(&dir, o).unwrap());
        assert!(e.has_times());
        // One node at several times, and seeds at their own times, from 8 threads at once.
        let cases: Vec<(Vec<u64>, RequestTimes)> = vec![
            (vec![7], RequestTimes::At(100)),
            (vec![7], RequestTimes::At(900)),
            (vec![7, 7, 3], RequestTimes::PerSeed(vec![100, 900, 100])),
            (vec![5, 9], RequestTimes::At(-1)),
        ];
        std::thread::scope(|s| {
            for k in 0..8 {
                let (e, dir, cases) = (&e, &dir, &cases);
                s.spawn(move || {
                    let (ids, times) = &cases[k % cases.len()];
                    let mut q = req(ids, n, &[4, 3], false, 11);
                    q.times = Some(times.clone());
                    let (got, time) = e.sample_then(q.clone(), None, None, |x| x).unwrap();
                    let per = match times {
                        RequestTimes::At(t) => vec![*t; ids.len()],
                        RequestTimes::PerSeed(t) => t.clone(),
                    };
                    let (node, row, want_time) = alone_at(dir, &q, &per);
                    assert_eq!((got.node, got.row, time.unwrap()), (node, row, want_time));
                });
            }
        });
        // Before every edge and node: the seeds alone. Without times: the homogeneous sampler.
        let mut q = req(&[5, 9], n, &[4, 3], false, 11);
        q.times = Some(RequestTimes::At(-1));
        let s = e.sample(q, None, None).unwrap();
        assert_eq!((s.node, s.row.len()), (vec![5, 9], 0));
        let q = req(&[5, 9], n, &[4, 3], false, 11);
        assert_eq!(e.sample(q.clone(), None, None).unwrap(), alone(&dir, &q));
        let st = e.stats();
        assert!(st.wave_requests == 10 && st.waves <= 10, "{st:?}");
        // Refusals name the field.
        let mut q = req(&[5, 9], n, &[4, 3], false, 11);
        q.times = Some(RequestTimes::PerSeed(vec![1]));
        let m = e.sample(q, None, None).unwrap_err().to_string();
        assert!(m.contains("seed_times has 1 times for 2 node ids"), "{m}");
    }
    let (_p, plain) = sbm(FeatureDtype::F32);
    let e = Engine::open(&plain, options(BackendChoice::Memory, 1)).unwrap();
    assert!(!e.has_times());
    let mut q = req(&[1], n, &[2], false, 0);
    q.times = Some(RequestTimes::At(5));
    let m = e.sample(q, None, None).unwrap_err().to_string();
    assert!(
        m.starts_with("time: the dataset has no edge or node times"),
        "{m}"
    );
}

#[test]
fn edge_times_beside_a_neighbor_file_in_memory_are_read_from_disk_when_the_plan_has_no_room() {
    // The one-type graph the engine samples at times, with its edge times loaded or read with
    // pread (then searched over their time keys): the same samples.
    use ringgnn_sampler::{Graph, HeteroRequest, NeighborAccess, OffsetIndex};
    let (_d, dir) = timed_sbm();
    let ds = Dataset::open(&dir).unwrap();
    let g = Graph::open(OffsetIndex::load(&ds).unwrap(), NeighborAccess::Memory).unwrap();
    let path = ds.edge_times_path().unwrap();
    let keys = ds.edge_time_keys_path().unwrap();
    let node_times: Option<Arc<[i64]>> = ds.node_times().unwrap().map(Arc::from);
    let sample = |in_memory: bool| {
        let t = g
            .one_type(Some((&path, Some(&keys))), node_times.clone(), in_memory)
            .unwrap();
        let r = &t.relations[0];
        assert_eq!(r.times.as_ref().unwrap().1.is_some(), in_memory);
        assert_eq!(r.time_keys.is_some(), !in_memory);
        let (mut s, _, _) = t.sampler(vec![fan(&[5, 3])], false, None).unwrap();
        let seeds = [(0usize, &[1u64, 50, 700][..])];
        let times = [&[300i64, 600, 999][..]];
        let r = HeteroRequest {
            seeds: &seeds,
            batch: 0,
            times: Some(&times),
        };
        s.sample_many(&[r], 4, 0, true).unwrap()
    };
    assert_eq!(sample(true), sample(false));
}
