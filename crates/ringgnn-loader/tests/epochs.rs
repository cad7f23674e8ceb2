//! Sampling epochs on the worker pipeline: results independent of thread count and backend,
//! batches in order, a shard of an epoch equal to the same batches of the whole epoch, bounded
//! prefetch, workers joined on early drop, errors surfacing in order, the calling-thread
//! `sample` (concurrent callers included), and the plan's backend choice.

mod common;

use std::path::Path;

use common::{graph, nz, sampling, seeds, N};
use ringgnn_io::probe_uring;
use ringgnn_loader::{BackendChoice, Batch, BatchLoader, EpochOptions, Error};

fn epoch_opts(bs: usize, epoch: u64) -> EpochOptions {
    EpochOptions::new(nz(bs), epoch)
}

fn run_epoch(path: &Path, o: ringgnn_loader::LoaderOptions, epoch: u64) -> Vec<Batch> {
    let l = BatchLoader::open(path, o, None).unwrap();
    let it = l
        .sample_epoch(
            &seeds((0..1000).collect::<Vec<_>>(), N),
            &epoch_opts(64, epoch),
        )
        .unwrap();
    assert_eq!(it.len(), 16);
    let out: Vec<Batch> = it.map(|b| b.unwrap()).collect();
    assert_eq!(l.live_workers(), 0);
    out
}

#[test]
fn threads_and_backends_give_identical_epochs() {
    let (_d, path) = graph();
    let want = run_epoch(&path, sampling(BackendChoice::Memory, 1), 3);
    for (i, b) in want.iter().enumerate() {
        assert_eq!(b.index, i as u64, "batches come in order");
        assert!(b.sample.row.len() > b.seeds.len(), "dense enough to sample");
    }
    let mut backends = vec![
        BackendChoice::Memory,
        BackendChoice::Pread,
        BackendChoice::Auto,
    ];
    if probe_uring().is_ok() {
        backends.push(BackendChoice::Uring);
    }
    for backend in backends {
        for threads in [1, 2, 4] {
            let got = run_epoch(&path, sampling(backend, threads), 3);
            assert!(got == want, "{backend:?} with {threads} threads differs");
        }
    }
    // Direct I/O reads the same bytes (or falls back to buffered where refused).
    let mut o = sampling(BackendChoice::Pread, 2);
    o.direct = true;
    assert!(run_epoch(&path, o, 3) == want);
    // Each batch is exactly what `sample` gives for the same (epoch, batch) and seeds.
    let l = BatchLoader::open(&path, sampling(BackendChoice::Pread, 1), None).unwrap();
    for b in &want {
        assert_eq!(
            l.sample(&seeds(b.seeds.clone(), N), 3, b.index).unwrap(),
            b.sample
        );
    }
    let st = l.io_stats();
    assert!(
        st.reads > 0 && st.bytes >= st.reads * 4096 && st.batches > 0,
        "{st:?}"
    );
}

#[test]
fn a_shard_of_an_epoch_gives_the_same_batches_as_the_whole_epoch() {
    let (_d, path) = graph();
    let all = seeds((0..1000).collect::<Vec<_>>(), N);
    let l = BatchLoader::open(&path, sampling(BackendChoice::Pread, 2), None).unwrap();
    let whole: Vec<Batch> = l
        .sample_epoch(&all, &epoch_opts(64, 5))
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    // Two ranks, each taking every other global batch index, and an arbitrary selection, on
    // other loaders (other thread counts, another backend).
    for (threads, backend) in [(1, BackendChoice::Memory), (3, BackendChoice::Pread)] {
        let other = BatchLoader::open(&path, sampling(backend, threads), None).unwrap();
        for shard in [
            vec![0, 2, 4, 6, 8, 10, 12, 14],
            vec![1, 3, 5, 7, 9, 11, 13, 15],
            vec![15, 0, 7],
        ] {
            let mut o = epoch_opts(64, 5);
            o.batches = Some(shard.clone());
            let got: Vec<Batch> = other
                .sample_epoch(&all, &o)
                .unwrap()
                .map(|b| b.unwrap())
                .collect();
            let want: Vec<&Batch> = shard.iter().map(|&i| &whole[i as usize]).collect();
            assert_eq!(got.iter().collect::<Vec<_>>(), want, "{shard:?}");
        }
    }
    let mut o = epoch_opts(64, 5);
    o.batches = Some(vec![3, 16]);
    let e = l.sample_epoch(&all, &o).err().unwrap().to_string();
    assert!(
        e.contains("batch 16 is not a batch of this epoch: it has 16 batches"),
        "{e}"
    );
}

#[test]
fn drop_last_short_batches_and_empty_epochs() {
    let (_d, path) = graph();
    let l = BatchLoader::open(&path, sampling(BackendChoice::Pread, 3), None).unwrap();
    let sizes = |n: u64, drop_last| -> Vec<usize> {
        let mut o = epoch_opts(100, 0);
        o.shuffle = false;
        o.drop_last = drop_last;
        let it = l
            .sample_epoch(&seeds((0..n).collect::<Vec<_>>(), N), &o)
            .unwrap();
        it.map(|b| b.unwrap().seeds.len()).collect()
    };
    assert_eq!(sizes(250, false), vec![100, 100, 50]);
    assert_eq!(sizes(250, true), vec![100, 100]);
    assert_eq!(sizes(99, true), Vec::<usize>::new());
    assert_eq!(sizes(0, false), Vec::<usize>::new());
    assert_eq!(l.live_workers(), 0);
}

#[test]
fn early_drop_stops_and_joins_the_workers() {
    let (_d, path) = graph();
    let mut o = sampling(BackendChoice::Pread, 4);
    o.prefetch = Some(nz(2));
    let l = BatchLoader::open(&path, o, None).unwrap();
    let mut it = l
        .sample_epoch(&seeds((0..N).collect::<Vec<_>>(), N), &epoch_opts(10, 0))
        .unwrap();
    assert_eq!(it.len(), 300);
    it.next().unwrap().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(l.live_workers() > 0, "workers wait for the consumer");
    assert!(it.peak_queued() <= 2);
    drop(it);
    assert_eq!(l.live_workers(), 0, "drop joined every worker");
}

#[test]
fn backpressure_bounds_finished_unconsumed_batches() {
    let (_d, path) = graph();
    for prefetch in [1, 3] {
        let mut o = sampling(BackendChoice::Memory, 4);
        o.prefetch = Some(nz(prefetch));
        let l = BatchLoader::open(&path, o, None).unwrap();
        assert_eq!(l.plan().prefetch, prefetch as u64);
        let mut it = l
            .sample_epoch(&seeds((0..N).collect::<Vec<_>>(), N), &epoch_opts(50, 1))
            .unwrap();
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
    let l = BatchLoader::open(&path, sampling(BackendChoice::Pread, 2), None).unwrap();
    // Damage the neighbor file after the loader opened it: workers open it when they start.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path.join("indices.bin"))
        .unwrap();
    f.set_len(0).unwrap();
    let mut o = epoch_opts(50, 0);
    o.shuffle = false;
    let mut it = l
        .sample_epoch(&seeds((0..500).collect::<Vec<_>>(), N), &o)
        .unwrap();
    match it.next() {
        Some(Err(Error::Sampler(ringgnn_sampler::Error::Io { source, .. }))) => {
            assert_eq!(source.kind(), std::io::ErrorKind::UnexpectedEof, "{source}")
        }
        other => panic!("expected a read error, got {other:?}"),
    }
    assert!(it.next().is_none());
    assert_eq!(l.live_workers(), 0);
    // The same error on the calling thread.
    assert!(matches!(
        l.sample(&seeds(vec![7], N), 0, 0),
        Err(Error::Sampler(ringgnn_sampler::Error::Io { .. }))
    ));
}

#[test]
fn concurrent_calls_on_the_calling_threads_sample_in_parallel_and_agree() {
    let (_d, path) = graph();
    let l = BatchLoader::open(&path, sampling(BackendChoice::Pread, 2), None).unwrap();
    let batch = |b: u64| seeds((b * 20..b * 20 + 20).collect::<Vec<_>>(), N);
    let want: Vec<_> = (0..12)
        .map(|b| l.sample(&batch(b), 1, b).unwrap())
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (l, want, batch) = (&l, &want, &batch);
                s.spawn(move || {
                    for b in (t..12).step_by(4) {
                        assert_eq!(l.sample(&batch(b as u64), 1, b as u64).unwrap(), want[b]);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}

#[test]
fn auto_takes_the_neighbor_file_only_when_the_whole_plan_fits() {
    let (_d, path) = graph();
    let file = (30_000 + 2000) * 4;
    let big = BatchLoader::open(&path, sampling(BackendChoice::Auto, 2), None).unwrap();
    assert_eq!(
        (big.backend_name(), big.fallback_reason()),
        ("memory", None)
    );
    let p = big.plan();
    assert!(
        p.neighbors_in_memory && p.neighbor_file == file && p.total() <= p.budget,
        "{p}"
    );

    // On this small graph the neighbor file (125 KiB) costs less than a disk reader's buffer
    // (8 MiB per thread), so whenever a disk plan fits, the memory plan fits too. With the
    // memory backend asked for explicitly and a budget too small for it: refused, naming the
    // parts. (tests/regressions.rs covers a graph whose file is larger than the buffers.)
    let mut o = sampling(BackendChoice::Memory, 2);
    o.memory = Some(p.total() - p.slack);
    // (The default prefetch would fall back to one batch ahead per thread and fit.)
    let ahead = BatchLoader::open(&path, o.clone(), None).unwrap().plan();
    assert_eq!((ahead.prefetch, p.prefetch), (2, 4), "{ahead}");
    o.prefetch = Some(nz(4));
    // Four ahead with both threads does not fit: one worker samples, and the note says so.
    let one = BatchLoader::open(&path, o.clone(), None).unwrap().plan();
    assert_eq!((one.prefetch, one.workers), (4, 1), "{one}");
    assert!(
        one.note.as_deref().unwrap_or("").contains("1 worker"),
        "{one:?}"
    );
    o.memory = Some(one.sampler + one.neighbor_file);
    let e = BatchLoader::open(&path, o.clone(), None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("is too small with the neighbor file in memory"),
        "{e}"
    );
    assert!(e.contains("neighbor file 125.0 KiB"), "{e}");
    // Nothing fits: the error names every part.
    o.backend = BackendChoice::Auto;
    o.memory = Some(1000);
    let e = BatchLoader::open(&path, o, None).err().unwrap().to_string();
    assert!(
        e.contains("memory=1000 B is too small") && e.contains("sampler"),
        "{e}"
    );
}

#[test]
fn the_plan_follows_threads_prefetch_and_batch() {
    let (_d, path) = graph();
    let plan = |threads, prefetch: usize, batch| {
        let mut o = sampling(BackendChoice::Pread, threads);
        o.prefetch = Some(nz(prefetch));
        o.batch_size = nz(batch);
        BatchLoader::open(&path, o, None).unwrap().plan()
    };
    let (a, b, c, d) = (
        plan(1, 1, 64),
        plan(2, 1, 64),
        plan(1, 2, 64),
        plan(1, 1, 512),
    );
    let thread = b.sampler - a.sampler;
    let queued = c.sampler - a.sampler;
    assert!(thread > queued && queued > 0, "{thread} {queued}");
    assert!(thread > 8 << 20, "a disk reader's buffer per thread");
    assert!(d.sampler > a.sampler);
    // A larger batch than planned is accepted while the plan still fits, and the plan grows.
    let l = BatchLoader::open(&path, sampling(BackendChoice::Pread, 1), None).unwrap();
    let before = l.plan().sampler;
    let all = seeds((0..N).collect::<Vec<_>>(), N);
    assert_eq!(
        l.sample_epoch(&all, &epoch_opts(3000, 0)).unwrap().count(),
        1
    );
    assert!(l.plan().sampler > before);
    // ... and refused when it does not.
    let mut o = sampling(BackendChoice::Pread, 1);
    o.batch_size = nz(8);
    let small = BatchLoader::open(&path, o.clone(), None).unwrap().plan();
    o.memory = Some((small.total() - small.slack) * 32 / 31 + 64);
    let l = BatchLoader::open(&path, o, None).unwrap();
    let e = l
        .sample_epoch(&all, &epoch_opts(3000, 0))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("too small for batches this large"), "{e}");
}
