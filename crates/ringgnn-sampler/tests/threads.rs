//! A [`HeteroSampler`] hyperbatch sampled by several threads ([`HeteroSampler::set_threads`]):
//! a property test that every sample is the one thread's, on random typed graphs with and
//! without seed times, from memory and from disk, with the samples handed out in batch order;
//! a damaged neighbor entry found on a helper thread is the one thread's error, after the same
//! samples; a cancelled read ends the call; every thread's workspaces are counted.

use std::fs::File;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use proptest::prelude::*;
use ringgnn_io::{BackendKind, CoalesceOptions, PageCache, PreadBatch, ReadBatch};
use ringgnn_sampler::{
    DiskNeighbors, EdgeTimes, Error, Fanout, HeteroRelation, HeteroRequest, HeteroSample,
    HeteroSampler, Indices, NeighborSource, Reopen, TemporalStrategy,
};
use ringgnn_store::manifest::IndexDtype;

mod common;
use common::timed::{self, write_padded, Graph, NodeTimes, Shape};

/// A random typed graph with edge times: up to 3 types of up to 80 nodes, mostly short lists and
/// a few of several pages of times (searched over several rounds from disk), node times on
/// some types.
fn random_graph(seed: u64, types: usize, rels: usize) -> Graph {
    let node_times = NodeTimes::OneIn {
        one_in: 3,
        span: 80,
    };
    let shape = Shape {
        stream: (40, 1),
        max_nodes: 80,
        hub_one_in: 16,
        hub: (600, 1200),
        short: 14,
        node_times,
    };
    timed::random_graph(seed, types, rels, shape)
}

/// A sampler of `g` with `threads` threads: its neighbor files and edge times in memory, or
/// (page-padded, written in `dir`) read with pread.
fn sampler(
    g: &Graph,
    fanouts: &[Fanout],
    (strategy, replace): (TemporalStrategy, bool),
    disk: Option<&Path>,
    threads: usize,
) -> HeteroSampler {
    let rels = (g.rels.iter().enumerate())
        .map(|(i, r)| {
            let (source, times) = match disk {
                None => (
                    NeighborSource::Memory(Arc::new(Indices::U64(r.indices.clone()))),
                    EdgeTimes::Memory(r.times.clone().into()),
                ),
                Some(dir) => {
                    let ix = r.indices.iter().flat_map(|&x| (x as u32).to_le_bytes());
                    let ix = write_padded(dir, &format!("rel{i}.bin"), ix.collect());
                    let t = r.times.iter().flat_map(|&x| x.to_le_bytes());
                    let t = write_padded(dir, &format!("rel{i}_times.bin"), t.collect());
                    let reader = Box::new(PreadBatch::new(File::open(&ix).unwrap()));
                    let opts = CoalesceOptions::default();
                    // Another pread of the file for each thread of a narrow fetch.
                    let file = ix.clone();
                    let reopen: Reopen = Arc::new(move || {
                        Ok(Box::new(PreadBatch::new(File::open(&file)?)) as Box<dyn ReadBatch>)
                    });
                    let d = DiskNeighbors::new(reader, &ix, IndexDtype::U32, opts);
                    let source = NeighborSource::Disk(d.with_reopen(reopen));
                    let n = r.times.len() as u64;
                    let (times, _) = EdgeTimes::open(&t, n, BackendKind::Pread, false, opts)
                        .expect("the time file just written");
                    (source, times)
                }
            };
            HeteroRelation {
                src: r.src,
                dst: r.dst,
                indptr: r.indptr.clone().into(),
                source,
                fanouts: fanouts.to_vec(),
                times: Some(times),
            }
        })
        .collect();
    let mut s = HeteroSampler::new(g.num_nodes.clone(), rels, replace).unwrap();
    s.set_temporal_strategy(strategy);
    let nt = g.node_times.iter().map(|t| t.clone().map(Arc::from));
    s.set_node_times(nt.collect()).unwrap();
    s.set_threads(threads);
    s
}

/// A batch: per seed list its type, ids and (if the batch is at seed times) their times.
type Batch = (Vec<(usize, Vec<u64>)>, Option<Vec<Vec<i64>>>);

/// `h` random batches over `g`: each of one to three seed lists of random types, at random
/// times (spread below and beyond the edges' times) or without times.
fn random_batches(g: &Graph, seed: u64, h: usize) -> Vec<Batch> {
    let mut rng = ringgnn_store::rng::stream(seed, 40, 2);
    let mut below = |n: u64| ringgnn_store::rng::below(&mut rng, n);
    let types = g.num_nodes.len() as u64;
    (0..h)
        .map(|_| {
            let timed = below(3) != 0;
            let lists: Vec<(usize, Vec<u64>)> = (0..1 + below(3))
                .map(|_| {
                    let t = below(types) as usize;
                    let n = below(12);
                    (t, (0..n).map(|_| below(g.num_nodes[t])).collect())
                })
                .collect();
            let times = timed.then(|| {
                (lists.iter())
                    .map(|(_, ids)| ids.iter().map(|_| below(120) as i64).collect())
                    .collect()
            });
            (lists, times)
        })
        .collect()
}

/// Sample `batches` as one hyperbatch with `sample_each`, checking that the samples come in
/// batch order.
fn sample_each(
    s: &mut HeteroSampler,
    batches: &[Batch],
    seed: u64,
    with_edge_ids: bool,
) -> Result<Vec<HeteroSample>, Error> {
    let lists: Vec<Vec<(usize, &[u64])>> = (batches.iter())
        .map(|b| b.0.iter().map(|(t, v)| (*t, v.as_slice())).collect())
        .collect();
    let times: Vec<Option<Vec<&[i64]>>> = (batches.iter())
        .map(|b| b.1.as_ref().map(|t| t.iter().map(Vec::as_slice).collect()))
        .collect();
    let requests: Vec<HeteroRequest> = (lists.iter().zip(&times).enumerate())
        .map(|(b, (seeds, times))| HeteroRequest {
            seeds,
            batch: 7 * b as u64 + 2,
            times: times.as_deref(),
        })
        .collect();
    let mut outs = vec![];
    s.sample_each(&requests, seed, 3, with_edge_ids, &mut |b, out| {
        assert_eq!(b, outs.len(), "samples are handed out in batch order");
        outs.push(out);
        Ok(())
    })?;
    Ok(outs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random typed graphs and hyperbatches (batches with and without seed times mixed),
    /// fanouts, strategies, with and without edge ids: with 2 to 4 threads, from memory and
    /// from disk (in many small chunks with 3), every sample is the one thread's, and again on a second call (the threads'
    /// workspaces reused) of part of the hyperbatch.
    #[test]
    fn threads_sample_as_one_thread(
        seed: u64,
        types in 1usize..4,
        rels in 1usize..4,
        h in 1usize..8,
        hops in 1usize..4,
        fanout in prop_oneof![Just(Fanout::All), (0u64..5).prop_map(Fanout::Count)],
        last: bool,
        replace: bool,
        with_edge_ids: bool,
    ) {
        let g = random_graph(seed, types, rels);
        let batches = random_batches(&g, seed, h);
        let fanouts = vec![fanout; hops];
        let strategy = match last {
            true => TemporalStrategy::Last,
            false => TemporalStrategy::Uniform,
        };
        let dir = tempfile::tempdir().unwrap();
        for disk in [None, Some(dir.path())] {
            let how = (strategy, replace);
            let mut one = sampler(&g, &fanouts, how, disk, 1);
            let want = sample_each(&mut one, &batches, seed, with_edge_ids).unwrap();
            for threads in 2..=4 {
                let mut s = sampler(&g, &fanouts, how, disk, threads);
                prop_assert_eq!(s.threads(), threads);
                if threads == 3 {
                    // Each batch's positions bucketed into many chunks of 64 entries, read in
                    // groups of at most 100 (from disk; the samples are the same).
                    s.set_fetch_groups(64, 100);
                }
                if threads != 3 {
                    // The search of edge times from disk in slices of 3 lists, each on the
                    // next thread free, each with its own reader of the times (in memory, the
                    // same search as without).
                    s.set_cut_slice(3);
                }
                let got = sample_each(&mut s, &batches, seed, with_edge_ids).unwrap();
                prop_assert_eq!(&got, &want, "{} threads, disk {}", threads, disk.is_some());
                let got = sample_each(&mut s, &batches[h / 2..], seed, with_edge_ids).unwrap();
                // A batch's sample depends on its index in the epoch, which moved with it.
                let moved = sample_each(&mut one, &batches[h / 2..], seed, with_edge_ids).unwrap();
                prop_assert_eq!(got, moved, "{} threads, again", threads);
            }
        }
    }
}

/// Node type 0 of 4 nodes, node `v`'s in-list `[v, (v + 1) % 4]` (of type 0), with node 3's
/// second entry `damaged` (9 is not a node: the file is damaged); each hop takes every edge.
fn ring(hops: usize, damaged: u64) -> HeteroSampler {
    let indices = vec![0, 1, 1, 2, 2, 3, 3, damaged];
    let rel = HeteroRelation {
        src: 0,
        dst: 0,
        indptr: vec![0, 2, 4, 6, 8].into(),
        source: NeighborSource::Memory(Arc::new(Indices::U64(indices))),
        fanouts: vec![Fanout::All; hops],
        times: None,
    };
    HeteroSampler::new(vec![4], vec![rel], false).unwrap()
}

#[test]
fn a_damaged_entry_found_on_a_helper_thread_is_the_one_threads_error() {
    // Batch b seeds node b: only batch 3 reaches the damaged entry at hop 0; with two hops,
    // batch 2 reaches it at hop 1 too (through node 3).
    let seeds: Vec<[(usize, &[u64]); 1]> = vec![
        [(0, &[0][..])],
        [(0, &[1][..])],
        [(0, &[2][..])],
        [(0, &[3][..])],
    ];
    let requests: Vec<HeteroRequest> = (seeds.iter().enumerate())
        .map(|(b, s)| HeteroRequest {
            seeds: s,
            batch: b as u64,
            times: None,
        })
        .collect();
    for hops in [1, 2] {
        // With edge ids the entries are checked as each batch is relabelled: on the thread
        // that relabels it (batch 3 on the fourth of four threads).
        let run = |threads: usize| {
            let mut s = ring(hops, 9);
            s.set_threads(threads);
            let mut handed = vec![];
            let err = s
                .sample_each(&requests, 1, 0, true, &mut |b, _| {
                    handed.push(b);
                    Ok(())
                })
                .unwrap_err();
            // The sampler still samples what is not damaged.
            let fine = s.sample(0, &[0, 1], 1, 0, 0, true).unwrap();
            (err, handed, fine)
        };
        let (err, handed, fine) = run(1);
        assert!(matches!(err, Error::Corrupt(_)), "{err:?}");
        let at = "entry 7 of the neighbor file of relation 0 is 9, but its source type 0 has 4";
        assert!(err.to_string().starts_with(at), "{err}");
        // One hop: the batches before the damaged one are handed out first; two: none is.
        assert_eq!(handed, if hops == 1 { vec![0, 1, 2] } else { vec![] });
        for threads in 2..=4 {
            let (e, h, f) = run(threads);
            assert!(matches!(e, Error::Corrupt(_)), "{e:?}");
            assert_eq!(e.to_string(), err.to_string(), "{threads} threads");
            assert_eq!(h, handed, "{threads} threads");
            assert_eq!(f, fine);
        }
    }
}

/// [`ring`]'s graph with node 3's list long: 1024 entries 3 and the last `damaged` (at
/// entry 1031, in the file's second page); in memory, or read from disk (32-bit entries,
/// page-padded in `dir`) through a read buffer of `pages` pages, with a page cache or not.
fn long_ring(damaged: u64, disk: Option<(&Path, usize, bool)>) -> HeteroSampler {
    let mut indices = vec![3u32; 1032];
    indices[..6].copy_from_slice(&[0, 1, 1, 2, 2, 3]);
    indices[1031] = damaged as u32;
    let source = match disk {
        None => {
            let ix = indices.iter().map(|&x| x as u64).collect();
            NeighborSource::Memory(Arc::new(Indices::U64(ix)))
        }
        Some((dir, pages, cache)) => {
            let bytes = indices.iter().flat_map(|x| x.to_le_bytes()).collect();
            let path = write_padded(dir, "ring.bin", bytes);
            let opts = CoalesceOptions {
                max_run: 4096,
                buffer: pages * 4096,
            };
            let reader = Box::new(PreadBatch::new(File::open(&path).unwrap()));
            let page_cache = Arc::new(PageCache::new(PageCache::BYTES_PER_PAGE * 64).unwrap());
            let d = DiskNeighbors::new(reader, &path, IndexDtype::U32, opts);
            NeighborSource::Disk(d.with_cache(cache.then_some(page_cache)))
        }
    };
    let rel = HeteroRelation {
        src: 0,
        dst: 0,
        indptr: vec![0, 2, 4, 6, 1032].into(),
        source,
        fanouts: vec![Fanout::All],
        times: None,
    };
    let mut s = HeteroSampler::new(vec![4], vec![rel], false).unwrap();
    // One chunk of the file's 2 pages: wider than a buffer of one page.
    s.set_fetch_groups(2048, 1 << 12);
    s
}

#[test]
fn a_damaged_entry_fetched_through_a_copy_is_the_same_error() {
    // Seed 3 reaches entry 1031, damaged: the same error in memory and from disk, whether the
    // 32-bit fetch reads the positions where they lie (a buffer of both pages, no cache) or
    // through its 64-bit copy (a page cache; a span of 2 pages through a buffer of 1).
    let at = "entry 1031 of the neighbor file of relation 0 is 9, but its source type 0 has 4";
    let want = long_ring(9, None).sample(0, &[2, 3], 1, 0, 0, false);
    let want = want.unwrap_err().to_string();
    assert!(want.starts_with(at), "{want}");
    let fine = long_ring(0, None)
        .sample(0, &[2, 3], 1, 0, 0, false)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (pages, cache) in [(2, false), (2, true), (1, false)] {
        let disk = Some((dir.path(), pages, cache));
        let err = long_ring(9, disk).sample(0, &[2, 3], 1, 0, 0, false);
        let err = err.unwrap_err();
        assert!(matches!(err, Error::Corrupt(_)), "{err:?}");
        assert_eq!(err.to_string(), want, "{pages} pages, cache {cache}");
        // Undamaged, the sample read in memory.
        let got = long_ring(0, disk).sample(0, &[2, 3], 1, 0, 0, false);
        assert_eq!(got.unwrap(), fine, "{pages} pages, cache {cache}");
    }
}

#[test]
fn time_readers_of_further_threads_read_the_file_opened_not_its_name() {
    // Each relation's time file (opened by `EdgeTimes::open`) renamed once the sampler is made,
    // and other times put at its name: the readers of the threads after the first, opened at
    // the first search, read the file opened, so the samples are those of one thread.
    let g = random_graph(17, 2, 3);
    let batches = random_batches(&g, 17, 6);
    assert!(
        batches.iter().any(|b| b.1.is_some()),
        "some batches at seed times"
    );
    let how = (TemporalStrategy::Uniform, false);
    let fanouts = [Fanout::Count(3); 2];
    let one = tempfile::tempdir().unwrap();
    let want = {
        let mut s = sampler(&g, &fanouts, how, Some(one.path()), 1);
        sample_each(&mut s, &batches, 9, false).unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut s = sampler(&g, &fanouts, how, Some(dir.path()), 3);
    s.set_cut_slice(2);
    for (i, r) in g.rels.iter().enumerate() {
        let path = dir.path().join(format!("rel{i}_times.bin"));
        std::fs::rename(&path, dir.path().join(format!("old{i}.bin"))).unwrap();
        let other = r.times.iter().flat_map(|&x| (1000 - x).to_le_bytes());
        write_padded(dir.path(), &format!("rel{i}_times.bin"), other.collect());
    }
    assert_eq!(sample_each(&mut s, &batches, 9, false).unwrap(), want);
}

#[test]
fn a_cancelled_read_ends_a_call_on_several_threads() {
    let g = random_graph(5, 2, 3);
    let batches = random_batches(&g, 5, 6);
    let dir = tempfile::tempdir().unwrap();
    let how = (TemporalStrategy::Uniform, false);
    let mut s = sampler(&g, &[Fanout::Count(3); 2], how, Some(dir.path()), 3);
    let want = sample_each(&mut s, &batches, 1, false).unwrap();
    let reads = s.io_stats().reads;
    assert!(reads > 0);
    s.set_cancel(Arc::new(AtomicBool::new(true)));
    match sample_each(&mut s, &batches, 1, false) {
        Err(Error::Io { source, .. }) => assert_eq!(source.kind(), ErrorKind::Interrupted),
        other => panic!("expected an interrupted read, got {other:?}"),
    }
    assert_eq!(s.io_stats().reads, reads);
    s.set_cancel(Arc::new(AtomicBool::new(false)));
    assert_eq!(sample_each(&mut s, &batches, 1, false).unwrap(), want);
}

#[test]
fn every_threads_workspaces_are_counted() {
    let g = random_graph(11, 2, 3);
    // Eight batches of the same seeds taking every edge, so that every thread relabels
    // batches of one sample.
    let one: Batch = (vec![(0, (0..g.num_nodes[0]).step_by(3).collect())], None);
    let batches = vec![one; 8];
    let how = (TemporalStrategy::Uniform, false);
    let fanouts = [Fanout::All; 2];
    let measure = |threads: usize| {
        let mut s = sampler(&g, &fanouts, how, None, threads);
        let outs = sample_each(&mut s, &batches, 3, false).unwrap();
        (s.held_bytes(), s.scratch_bytes(), s.map_bytes(), outs)
    };
    let (held, scratch, maps, outs) = measure(1);
    assert!(maps > 0);
    for threads in [2, 4] {
        let (h, s, m, o) = measure(threads);
        assert_eq!(o, outs);
        // Each thread's maps, sized for the batches it relabelled (all alike).
        assert_eq!(m, threads as u64 * maps, "{threads} threads");
        assert!(h >= held + (threads as u64 - 1) * maps, "{threads} threads");
        // What grows with the threads is what does not grow with the hyperbatch: a batch's
        // share of the rest is the same.
        assert_eq!(h - s, held - scratch, "{threads} threads");
    }
    // No thread is one.
    let mut s = sampler(&g, &fanouts, how, None, 0);
    assert_eq!(s.threads(), 1);
    assert!(outs.windows(2).all(|w| w[0] == w[1]));
    s.set_threads(3);
    assert_eq!(s.threads(), 3);
    s.set_threads(1);
    assert_eq!(s.threads(), 1);
}

#[test]
fn each_thread_reads_from_disk_with_its_own_reader_counted() {
    let g = random_graph(13, 2, 3);
    let batches = random_batches(&g, 13, 8);
    let how = (TemporalStrategy::Uniform, false);
    let fanouts = [Fanout::Count(4); 2];
    let dir = tempfile::tempdir().unwrap();
    let measure = |threads: usize, per_chunk: Option<u64>| {
        let mut s = sampler(&g, &fanouts, how, Some(dir.path()), threads);
        if let Some(c) = per_chunk {
            // Chunks of whole pages; the search of edge times in slices of 3 lists, a slice
            // a thread at once.
            s.set_fetch_groups(c, 100);
            s.set_cut_slice(3);
        }
        let outs = sample_each(&mut s, &batches, 5, false).unwrap();
        let io = s.io_stats();
        let fixed = s.thread_buffer_bytes();
        (
            s.held_bytes(),
            s.scratch_bytes() - fixed,
            s.map_bytes(),
            io,
            outs,
            fixed,
        )
    };
    let opts = CoalesceOptions::default();
    let buffer = opts.buffer.max(opts.run_bytes()) as u64;
    let rels = g.rels.len() as u64;
    for per_chunk in [None, Some(1024)] {
        let (held, scratch, maps, io, outs, fixed) = measure(1, per_chunk);
        assert!(io.bytes > 0);
        // One thread opens no reader of its own.
        assert_eq!(fixed, 0);
        for threads in [2, 3] {
            let (h, s, m, i, o, f) = measure(threads, per_chunk);
            assert_eq!(o, outs, "{threads} threads");
            // Chunks of whole pages, each read by one thread: the same pages read.
            assert_eq!(i.bytes, io.bytes, "{threads} threads, chunks {per_chunk:?}");
            // Besides each thread's maps, each relation's reader of its neighbor file for each
            // thread after the first, with its read buffer (and of its times, where a batch is
            // at seed times).
            // Their read buffers, and those of the readers of the time files where a batch is
            // at seed times, are `thread_buffer_bytes`: whole buffers, one or two a relation.
            let readers = (threads as u64 - 1) * rels;
            assert_eq!(f % buffer, 0, "{threads} threads");
            assert!(f >= readers * buffer, "{threads} threads");
            assert!(f <= 2 * readers * buffer, "{threads} threads");
            assert!(s - scratch >= m - maps, "{threads} threads");
            assert_eq!(h - s - f, held - scratch, "{threads} threads");
        }
    }
}
