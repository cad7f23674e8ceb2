//! The pool and its epochs: results independent of thread count and backend, batches in order,
//! a reproducible shuffle, bounded prefetch, worker threads joined on early drop, errors from a
//! worker surfacing in order, and the `auto` backend choice.

mod common;

use std::path::Path;

use common::build;
use ringgnn_io::probe_uring;
use ringgnn_sampler::{BackendChoice, Batch, Error, SamplerConfig, SamplerPool};
use ringgnn_store::{rng, Dataset};
use tempfile::TempDir;

const N: u64 = 3000;

/// A random graph of N nodes and 30000 edges (a few hubs among them).
fn graph() -> (TempDir, std::path::PathBuf) {
    let mut r = rng::stream(9, 9, 9);
    let mut edges: Vec<_> = (0..30_000)
        .map(|_| (rng::below(&mut r, N), rng::below(&mut r, N)))
        .collect();
    edges.extend((0..2000).map(|i| (i, 7)));
    let (dir, _ds) = build(&edges, Some(N), false);
    let path = dir.path().join("ds");
    (dir, path)
}

fn cfg(backend: BackendChoice, threads: usize) -> SamplerConfig {
    SamplerConfig {
        fanouts: vec![5, 3],
        backend,
        threads,
        seed: 42,
        with_edge_ids: true,
        prefetch: 2 * threads,
        ..Default::default()
    }
}

fn run_epoch(path: &Path, c: SamplerConfig, epoch: u64) -> Vec<Batch> {
    let pool = SamplerPool::open(path, c).unwrap();
    let seeds: Vec<u64> = (0..1000).collect();
    let it = pool.epoch(seeds, 64, true, epoch, false).unwrap();
    assert_eq!(it.len(), 16);
    let out: Vec<Batch> = it.map(|b| b.unwrap()).collect();
    assert_eq!(pool.live_workers(), 0);
    out
}

#[test]
fn threads_and_backends_give_identical_epochs() {
    let (_d, path) = graph();
    let want = run_epoch(&path, cfg(BackendChoice::Memory, 1), 3);
    assert_eq!(want.len(), 16);
    for (i, b) in want.iter().enumerate() {
        assert_eq!(b.index, i as u64, "batches come in order");
        assert!(
            b.sample.row.len() > b.seeds.len(),
            "the graph is dense enough to sample"
        );
    }
    let mut backends = vec![BackendChoice::Memory, BackendChoice::Pread];
    match probe_uring() {
        Ok(()) => backends.push(BackendChoice::Uring),
        Err(why) => eprintln!("skipping the uring backend: {why}"),
    }
    for backend in backends {
        for threads in [1, 2, 4] {
            let got = run_epoch(&path, cfg(backend, threads), 3);
            assert!(got == want, "{backend:?} with {threads} threads differs");
        }
    }
    // Direct I/O reads the same bytes (or falls back to buffered where refused).
    let mut c = cfg(BackendChoice::Pread, 2);
    c.direct = true;
    assert!(run_epoch(&path, c, 3) == want);
    // Each batch is exactly what `sample` gives for the same (epoch, batch) and seeds.
    let pool = SamplerPool::open(&path, cfg(BackendChoice::Pread, 1)).unwrap();
    for b in &want {
        assert_eq!(pool.sample(&b.seeds, 3, b.index).unwrap(), b.sample);
    }
    let st = pool.io_stats();
    assert!(
        st.reads > 0 && st.bytes >= st.reads * 4096 && st.batches > 0,
        "{st:?}"
    );
}

#[test]
fn shuffle_is_a_reproducible_permutation_per_epoch() {
    let (_d, path) = graph();
    let pool = SamplerPool::open(&path, cfg(BackendChoice::Memory, 2)).unwrap();
    let seeds: Vec<u64> = (100..1100).collect();
    let order = |shuffle, epoch| -> Vec<u64> {
        let it = pool
            .epoch(seeds.clone(), 100, shuffle, epoch, false)
            .unwrap();
        it.flat_map(|b| b.unwrap().seeds).collect()
    };
    assert_eq!(order(false, 0), seeds, "no shuffle: the given order");
    let (e0, e1) = (order(true, 0), order(true, 1));
    let mut sorted = e0.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, seeds, "a permutation");
    assert_ne!(e0, seeds);
    assert_ne!(e0, e1, "epochs shuffle differently");
    assert_eq!(order(true, 0), e0, "the same epoch shuffles the same");
    let other = SamplerPool::open(
        &path,
        SamplerConfig {
            seed: 43,
            ..cfg(BackendChoice::Memory, 2)
        },
    );
    let it = other
        .unwrap()
        .epoch(seeds.clone(), 100, true, 0, false)
        .unwrap();
    assert_ne!(it.flat_map(|b| b.unwrap().seeds).collect::<Vec<_>>(), e0);
}

#[test]
fn drop_last_and_short_batches() {
    let (_d, path) = graph();
    let pool = SamplerPool::open(&path, cfg(BackendChoice::Pread, 3)).unwrap();
    let seeds: Vec<u64> = (0..250).collect();
    let sizes = |drop_last| -> Vec<usize> {
        let it = pool.epoch(seeds.clone(), 100, false, 0, drop_last).unwrap();
        it.map(|b| b.unwrap().seeds.len()).collect()
    };
    assert_eq!(sizes(false), vec![100, 100, 50]);
    assert_eq!(sizes(true), vec![100, 100]);
    let it = pool
        .epoch(seeds[..99].to_vec(), 100, false, 0, true)
        .unwrap();
    assert!(it.is_empty());
    assert_eq!(it.count(), 0);
    let it = pool.epoch(vec![], 10, true, 0, false).unwrap();
    assert_eq!(it.len(), 0);
}

#[test]
fn early_drop_stops_and_joins_the_workers() {
    let (_d, path) = graph();
    let mut c = cfg(BackendChoice::Pread, 4);
    c.prefetch = 2;
    let pool = SamplerPool::open(&path, c).unwrap();
    let seeds: Vec<u64> = (0..N).collect();
    let mut it = pool.epoch(seeds, 10, true, 0, false).unwrap();
    assert_eq!(it.len(), 300);
    it.next().unwrap().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(pool.live_workers() > 0, "workers wait for the consumer");
    assert!(it.peak_queued() <= 2);
    drop(it);
    assert_eq!(pool.live_workers(), 0, "drop joined every worker");
}

#[test]
fn backpressure_bounds_finished_unconsumed_batches() {
    let (_d, path) = graph();
    for prefetch in [1, 3] {
        let mut c = cfg(BackendChoice::Memory, 4);
        c.prefetch = prefetch;
        let pool = SamplerPool::open(&path, c).unwrap();
        let mut it = pool.epoch((0..N).collect(), 50, true, 1, false).unwrap();
        let mut n = 0;
        while let Some(b) = it.next() {
            b.unwrap();
            n += 1;
            // A slow consumer: the workers run ahead until the window is full.
            std::thread::sleep(std::time::Duration::from_millis(2));
            assert!(
                it.peak_queued() <= prefetch,
                "{} > {prefetch}",
                it.peak_queued()
            );
        }
        assert_eq!(n, 60);
        assert_eq!(
            it.peak_queued(),
            prefetch,
            "the window fills up with a slow consumer"
        );
    }
}

#[test]
fn a_worker_error_surfaces_in_order_then_the_epoch_ends() {
    let (_d, path) = graph();
    let pool = SamplerPool::open(&path, cfg(BackendChoice::Pread, 2)).unwrap();
    // Damage the neighbor file after the pool checked it: workers open it lazily.
    let indices = Dataset::open(&path).unwrap().path_of("indices").unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(indices)
        .unwrap();
    f.set_len(0).unwrap();
    let mut it = pool.epoch((0..500).collect(), 50, false, 0, false).unwrap();
    match it.next() {
        Some(Err(Error::Io { source, .. })) => {
            assert_eq!(source.kind(), std::io::ErrorKind::UnexpectedEof, "{source}")
        }
        other => panic!("expected a read error, got {other:?}"),
    }
    assert!(it.next().is_none());
    assert_eq!(pool.live_workers(), 0);
    // The same error on the calling thread.
    assert!(matches!(pool.sample(&[7], 0, 0), Err(Error::Io { .. })));
}

#[test]
fn bad_arguments_are_clear_errors() {
    let (_d, path) = graph();
    let pool = SamplerPool::open(&path, cfg(BackendChoice::Memory, 2)).unwrap();
    let e = pool.epoch(vec![1, N], 10, true, 0, false).err().unwrap();
    assert!(
        matches!(
            e,
            Error::Seed {
                id: N,
                num_nodes: N
            }
        ),
        "{e}"
    );
    assert!(matches!(
        pool.sample(&[N + 5], 0, 0),
        Err(Error::Seed { .. })
    ));
    assert!(matches!(
        pool.epoch(vec![1], 0, true, 0, false),
        Err(Error::Input(_))
    ));
    for c in [
        SamplerConfig {
            threads: 0,
            ..cfg(BackendChoice::Memory, 1)
        },
        SamplerConfig {
            prefetch: 0,
            ..cfg(BackendChoice::Memory, 1)
        },
    ] {
        assert!(matches!(SamplerPool::open(&path, c), Err(Error::Input(_))));
    }
    let c = SamplerConfig {
        fanouts: vec![3, 0],
        ..cfg(BackendChoice::Memory, 1)
    };
    assert!(matches!(
        SamplerPool::open(&path, c),
        Err(Error::Fanout { hop: 1, value: 0 })
    ));
    let e = "mmap".parse::<BackendChoice>().unwrap_err().to_string();
    assert!(e.contains("\"pread\""), "{e}");
    assert_eq!(
        "uring".parse::<BackendChoice>().unwrap(),
        BackendChoice::Uring
    );
}

#[test]
fn auto_picks_memory_when_it_fits_the_budget() {
    let (_d, path) = graph();
    let big = SamplerConfig {
        memory: Some(1 << 40),
        ..cfg(BackendChoice::Auto, 2)
    };
    let pool = SamplerPool::open(&path, big).unwrap();
    assert_eq!(
        (pool.backend_name(), pool.fallback_reason()),
        ("memory", None)
    );
    let file = Dataset::open(&path).unwrap().num_edges() * 4;
    assert!(pool.memory_estimate() > (N + 1) * 8 + file);

    let tiny = SamplerConfig {
        memory: Some(1000),
        ..cfg(BackendChoice::Auto, 2)
    };
    let pool = SamplerPool::open(&path, tiny).unwrap();
    match probe_uring() {
        Ok(()) => assert_eq!(
            (pool.backend_name(), pool.fallback_reason()),
            ("uring", None)
        ),
        Err(why) => {
            assert_eq!(
                (pool.backend_name(), pool.fallback_reason()),
                ("pread", Some(&*why))
            )
        }
    }
    // The disk estimate leaves the neighbor file out.
    let disk = pool.memory_estimate();
    let mem = SamplerPool::open(&path, cfg(BackendChoice::Memory, 2)).unwrap();
    assert_eq!(mem.memory_estimate() - file, disk - 2 * (8 << 20));

    // Memory asked for explicitly: allowed without a budget, refused with one too small.
    let e = SamplerPool::open(
        &path,
        SamplerConfig {
            memory: Some(1000),
            ..cfg(BackendChoice::Memory, 2)
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("memory=1000") && e.contains(&format!("neighbor file {file}")),
        "{e}"
    );
    let p = SamplerPool::open(&path, cfg(BackendChoice::Pread, 2)).unwrap();
    assert_eq!((p.backend_name(), p.fallback_reason()), ("pread", None));
}

#[test]
fn the_estimate_follows_threads_prefetch_and_batch() {
    let (_d, path) = graph();
    let est = |threads, prefetch| {
        let c = SamplerConfig {
            threads,
            prefetch,
            ..cfg(BackendChoice::Pread, 1)
        };
        SamplerPool::open(&path, c).unwrap()
    };
    let (a, b, c) = (est(1, 1), est(2, 1), est(1, 2));
    let thread = b.memory_estimate() - a.memory_estimate();
    let queued = c.memory_estimate() - a.memory_estimate();
    assert!(thread > queued && queued > 0, "{thread} {queued}");
    assert!(a.memory_estimate_for(2048) > a.memory_estimate());
    assert_eq!(a.memory_estimate_for(0), (N + 1) * 8 + (8 << 20));
}

/// A second stage that takes its time and tags each batch.
struct Slow(std::time::Duration);

impl ringgnn_sampler::BatchWork for Slow {
    type State = usize;
    type Output = (u64, usize);
    type Error = Error;
    fn start(&self, _: &std::sync::Arc<std::sync::atomic::AtomicBool>) -> Result<usize, Error> {
        Ok(0)
    }
    fn finish(
        &self,
        done: &mut usize,
        b: Batch,
        _: std::time::Duration,
        turn: &ringgnn_sampler::Turn<'_>,
    ) -> Result<(u64, usize), Error> {
        assert!(turn.wait(1), "not stopped");
        std::thread::sleep(self.0);
        *done += 1;
        Ok((b.index, *done))
    }
}

#[test]
fn a_second_stage_runs_on_the_workers_and_next_within_times_out() {
    use ringgnn_sampler::Next;
    use std::sync::Arc;
    use std::time::Duration;

    let (_d, path) = graph();
    let pool = SamplerPool::open(&path, cfg(BackendChoice::Memory, 2)).unwrap();
    let seeds: Vec<u64> = (0..256).collect();
    let work = Arc::new(Slow(Duration::from_millis(300)));
    let mut it = pool
        .epoch_with(work.clone(), seeds.clone(), 64, false, 0, false)
        .unwrap();
    assert!(matches!(
        it.next_within(Duration::from_millis(10)),
        Next::NotYet
    ));
    let mut got = Vec::new();
    loop {
        match it.next_within(Duration::from_secs(30)) {
            Next::Item(r) => got.push(r.unwrap().0),
            Next::End => break,
            Next::NotYet => panic!("a batch took more than 30 s"),
        }
    }
    assert_eq!(got, vec![0, 1, 2, 3]);
    assert!(matches!(
        it.next_within(Duration::from_millis(1)),
        Next::End
    ));
    assert_eq!(pool.live_workers(), 0);
    // Dropped while workers sleep in the second stage: joined, nothing hangs.
    let mut it = pool.epoch_with(work, seeds, 16, false, 0, false).unwrap();
    it.next().unwrap().unwrap();
    drop(it);
    assert_eq!(pool.live_workers(), 0);
}
