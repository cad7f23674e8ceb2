//! Hyperbatches: for random graphs, seeds, fanouts (with and without replacement, -1), chunk and
//! block sizes, thread counts and hyperbatch sizes, every batch equals its per-batch sample
//! exactly; and each page of the neighbor file is read at most once per hop per hyperbatch.

mod common;

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::sync::{Arc, Mutex};

use common::{build, fan, random_with_hub, SampleIds};
use proptest::prelude::*;
use ringgnn_io::{BlockReader, IoStats, PreadBatch, ReadBatch, ReadModel, ReadReq, ALIGN};
use ringgnn_sampler::{
    HyperBatch, HyperSampler, NeighborSampler, NeighborSource, SampleOptions, SampledSubgraph,
    Seeds, SpillFile, SPILL_BUFFER,
};
use ringgnn_store::{rng, Dataset};

/// Pread, recording every request.
struct Recording {
    inner: PreadBatch,
    log: Arc<Mutex<Vec<ReadReq>>>,
}

impl ReadBatch for Recording {
    fn read_batch(&mut self, reqs: &[ReadReq], buf: &mut [u8]) -> io::Result<()> {
        self.log.lock().unwrap().extend_from_slice(reqs);
        self.inner.read_batch(reqs, buf)
    }
    fn stats(&self) -> IoStats {
        self.inner.stats()
    }
    fn name(&self) -> &'static str {
        "recording"
    }
}

fn hyper(
    ds: &Dataset,
    opts: &SampleOptions,
    chunk_pages: usize,
    block_pages: usize,
    threads: usize,
) -> (HyperSampler, Arc<Mutex<Vec<ReadReq>>>) {
    let path = ds.path_of("indices").unwrap();
    let log = Arc::new(Mutex::new(vec![]));
    let model = ReadModel {
        block: block_pages * ALIGN,
        ..Default::default()
    };
    let width = ds.manifest().graph.indices_dtype.size();
    let bytes = ds.num_edges() * width;
    let readers = (0..threads)
        .map(|_| {
            let rec = Recording {
                inner: PreadBatch::new(File::open(&path).unwrap()),
                log: log.clone(),
            };
            BlockReader::new(Box::new(rec), model, chunk_pages * ALIGN, bytes)
        })
        .collect();
    let indptr: Arc<[u64]> = ds.load_indptr().unwrap().into();
    let h = HyperSampler::new(indptr, opts.clone(), readers, path, width);
    (h, log)
}

/// Random edges and a hub (node 3, 3000 in-edges), so that some lists span several pages and
/// chunks.
fn graph(n: u64, e: usize, graph_seed: u64) -> Vec<(u64, u64)> {
    random_with_hub(n, e, graph_seed, 1, 3, 3000)
}

/// `count` batches of `size` seeds: seed `i` of batch `b` is `(i * step + b * shift) % n`.
fn strided(count: u64, size: u64, step: u64, shift: u64, n: u64) -> Vec<Seeds> {
    (0..count)
        .map(|b| {
            let ids: Vec<u64> = (0..size).map(|i| (i * step + b * shift) % n).collect();
            Seeds::new(ids, n).unwrap()
        })
        .collect()
}

/// The batches of a hyperbatch of `epoch`, numbered from 0.
fn hyper_jobs(batches: &[Seeds], epoch: u64) -> Vec<HyperBatch<'_>> {
    batches
        .iter()
        .enumerate()
        .map(|(b, s)| HyperBatch {
            seeds: s.as_slice(),
            epoch,
            batch: b as u64,
        })
        .collect()
}

/// `jobs` sampled as one hyperbatch with their samples kept (16-page chunks, 4-page blocks, 2
/// threads): the sampler, and the samples expanded.
fn kept_samples(
    ds: &Dataset,
    opts: &SampleOptions,
    jobs: &[HyperBatch<'_>],
) -> (HyperSampler, Vec<SampledSubgraph>) {
    let (mut kept, _) = hyper(ds, opts, 16, 4, 2);
    let want = kept
        .sample(jobs)
        .unwrap()
        .into_iter()
        .map(|c| c.expand())
        .collect();
    (kept, want)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn every_batch_equals_its_per_batch_sample(
        graph_seed in 0u64..1000,
        fanouts in prop::collection::vec(prop_oneof![Just(-1i64), 1i64..12], 1..4),
        replace: bool,
        seed in 0u64..100,
        epoch in 0u64..3,
        h in prop_oneof![Just(1usize), Just(2), Just(7), Just(12)],
        chunk_pages in prop_oneof![Just(1usize), Just(2), Just(16)],
        block_pages in prop_oneof![Just(1usize), Just(4)],
        threads in 1usize..4,
        edge_ids: bool,
    ) {
        let n = 3000;
        let (_d, ds) = build(&graph(n, 40_000, graph_seed), Some(n), false);
        let opts = SampleOptions { fanouts: fan(&fanouts), replace, seed, with_edge_ids: edge_ids };
        let mut reference =
            NeighborSampler::open(&ds, &opts.fanouts, replace, NeighborSource::memory(&ds).unwrap())
                .unwrap();
        let mut r = rng::stream(seed, 2, epoch);
        let batches: Vec<Seeds> = (0..h)
            .map(|_| {
                let ids: Vec<u64> = (0..1 + rng::below(&mut r, 40)).map(|_| rng::below(&mut r, n)).collect();
                Seeds::new(ids, n).unwrap()
            })
            .collect();
        let want: Vec<SampledSubgraph> = batches
            .iter()
            .enumerate()
            .map(|(b, s)| reference.sample_ids(s.ids(), seed, epoch, 10 + b as u64, edge_ids).unwrap())
            .collect();
        let (hs, log) = hyper(&ds, &opts, chunk_pages, block_pages, threads);
        prop_assert!(hs.narrow_positions());
        // Positions in 64 bits on odd graph seeds (the path of graphs of more than 2^32 edges).
        let mut hs = if graph_seed % 2 == 1 { hs.with_wide_positions() } else { hs };
        let jobs: Vec<HyperBatch> = batches
            .iter()
            .enumerate()
            .map(|(b, s)| HyperBatch { seeds: s.as_slice(), epoch, batch: 10 + b as u64 })
            .collect();
        let got: Vec<SampledSubgraph> = hs.sample(&jobs).unwrap().into_iter().map(|c| c.expand()).collect();
        prop_assert_eq!(&got, &want);
        // Each page read at most once per hop: at most hops reads of any page.
        let reqs = std::mem::take(&mut *log.lock().unwrap());
        let mut per_page = std::collections::HashMap::new();
        for q in reqs.iter() {
            for p in q.offset / 4096..(q.offset + q.len as u64) / 4096 {
                *per_page.entry(p).or_insert(0) += 1;
            }
        }
        prop_assert!(per_page.values().all(|&c| c <= fanouts.len()), "{:?}", per_page);
        // A second hyperbatch on the same sampler (reused workspaces) gives the same again.
        let again: Vec<SampledSubgraph> = hs.sample(&jobs).unwrap().into_iter().map(|c| c.expand()).collect();
        prop_assert_eq!(&again, &want);
        // Spilled (each sample written as its last hop ends), then read back in batch order:
        // the same samples again, on the same reused states.
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillFile::create(dir.path()).unwrap();
        let recs = hs.sample_spilled(&jobs, &spill, None).unwrap();
        let mut buf = ringgnn_io::AlignedBuf::new(SPILL_BUFFER);
        let spilled: Vec<SampledSubgraph> =
            recs.iter().map(|&r| spill.read(r, &mut buf).unwrap().expand()).collect();
        prop_assert_eq!(&spilled, &want);
        // Keeping part of each sample (a loader keeps its cold row ids): what `keep` made of
        // each batch's node list comes back with it, and the spilled samples are the same.
        let mut spill = spill;
        spill.rewind();
        let keep = |nodes: &[u64]| -> ringgnn_sampler::Result<Vec<u64>> {
            Ok(nodes.iter().copied().filter(|v| v % 3 == 0).collect())
        };
        let recs = hs.sample_spilled_keeping(&jobs, &spill, None, &keep).unwrap();
        prop_assert_eq!(recs.len(), want.len());
        for ((r, kept), w) in recs.iter().zip(&want) {
            let kept_want: Vec<u64> = w.node.iter().copied().filter(|v| v % 3 == 0).collect();
            prop_assert_eq!(kept, &kept_want);
            prop_assert_eq!(&spill.read(*r, &mut buf).unwrap().expand(), w);
        }
        // An error in `keep` is the sampler's error, not a wrong batch.
        spill.rewind();
        let fail = |_: &[u64]| -> ringgnn_sampler::Result<Vec<u64>> {
            Err(ringgnn_sampler::Error::Input("no room to keep".into()))
        };
        let e = hs.sample_spilled_keeping(&jobs, &spill, None, &fail).unwrap_err();
        prop_assert!(e.to_string().contains("no room to keep"));
    }
}

#[test]
fn pages_are_read_once_per_hop_for_all_the_batches() {
    let n = 20_000;
    let (_d, ds) = build(&graph(n, 200_000, 7), Some(n), false);
    let opts = SampleOptions {
        fanouts: fan(&[10, 5]),
        ..Default::default()
    };
    let batches = strided(8, 300, 61, 7, n);
    let jobs = hyper_jobs(&batches, 0);
    let (mut hs, log) = hyper(&ds, &opts, 64, 16, 2);
    hs.sample(&jobs).unwrap();
    let reqs = log.lock().unwrap();
    let pages: Vec<u64> = reqs
        .iter()
        .flat_map(|q| q.offset / 4096..(q.offset + q.len as u64) / 4096)
        .collect();
    let distinct: HashSet<u64> = pages.iter().copied().collect();
    assert!(
        pages.len() <= 2 * distinct.len(),
        "two hops: at most two reads of a page"
    );
    // Per-batch sampling of the same 8 batches reads far more: each batch reads on its own.
    let mut one = NeighborSampler::open(
        &ds,
        &opts.fanouts,
        false,
        NeighborSource::pread(&ds, Default::default()).unwrap(),
    )
    .unwrap();
    for (b, s) in batches.iter().enumerate() {
        one.sample_ids(s.ids(), 0, 0, b as u64, false).unwrap();
    }
    let per_batch = one.io_stats().bytes;
    let shared = hs.counts().pages * 4096;
    assert!(
        per_batch > 2 * shared,
        "per batch {per_batch} B, hyperbatch {shared} B"
    );
    let c = hs.counts();
    assert_eq!(c.sequential_bytes + c.random_bytes, c.pages * 4096);
    let p = hs.peaks();
    assert!(p.batch > 0 && hs.state_bytes() >= p.batch);
    // Kept, a batch holds its positions and its whole sample; spilled, at most its state before
    // the last hop's relabelling.
    assert!(p.sample > 0 && p.resident < p.batch && p.batch <= p.resident + p.sample);
}

/// Spilled samples leave the batch states without them: the hyperbatch holds what its batches
/// need to be sampled, and the samples, read back one at a time, equal the kept ones; the spill
/// file counts what went through it, and is gone from its directory at once.
#[test]
fn spilled_samples_are_not_held_and_read_back_equal() {
    let n = 20_000;
    let (_d, ds) = build(&graph(n, 200_000, 9), Some(n), false);
    let opts = SampleOptions {
        fanouts: fan(&[10, 5, 3]),
        with_edge_ids: true,
        ..Default::default()
    };
    let batches = strided(6, 200, 37, 11, n);
    let jobs = hyper_jobs(&batches, 1);
    let (kept, want) = kept_samples(&ds, &opts, &jobs);
    let dir = tempfile::tempdir().unwrap();
    let mut spill = SpillFile::create(dir.path()).unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let (mut hs, _) = hyper(&ds, &opts, 16, 4, 2);
    let mut buf = ringgnn_io::AlignedBuf::new(SPILL_BUFFER);
    for round in 0..2 {
        spill.rewind();
        let recs = hs.sample_spilled(&jobs, &spill, None).unwrap();
        let p = hs.peaks();
        // No sample stays in the states: at most the largest state before the last relabel each.
        assert!(
            hs.state_bytes() <= jobs.len() as u64 * p.resident,
            "round {round}"
        );
        let got: Vec<SampledSubgraph> = recs
            .iter()
            .map(|&r| spill.read(r, &mut buf).unwrap().expand())
            .collect();
        assert_eq!(got, want, "round {round}");
        let (w, r) = spill.traffic();
        let bytes: u64 = recs.iter().map(|r| r.bytes().div_ceil(4096) * 4096).sum();
        assert_eq!((w, r), ((round + 1) * bytes, (round + 1) * bytes));
    }
    // The kept sampler's states hold the samples until taken; its peaks agree on the sample.
    assert_eq!(kept.peaks().sample, hs.peaks().sample);
}

/// What the per-batch sampler estimates a batch holds in a hyperbatch (the memory plan's probe
/// sizes the first hyperbatch by it, times 2) is at least half of what the hyperbatch sampler
/// measures for that batch alone, kept and spilled, and at most 10% above it (the estimate
/// counts a piece per node; nodes next to each other in draw order and in one chunk share one).
#[test]
fn the_per_batch_estimate_of_a_hyperbatch_state_is_close_to_it() {
    let n = 20_000;
    let (_d, ds) = build(&graph(n, 200_000, 5), Some(n), false);
    for fanouts in [&[10i64, 5, 3][..], &[25, 10], &[2, 2, 2], &[-1, 4]] {
        let opts = SampleOptions {
            fanouts: fan(fanouts),
            ..Default::default()
        };
        let mut per_batch = NeighborSampler::open(
            &ds,
            &opts.fanouts,
            false,
            NeighborSource::memory(&ds).unwrap(),
        )
        .unwrap();
        for (b, seeds) in strided(4, 300, 53, 7, n).iter().enumerate() {
            per_batch
                .sample_ids(seeds.ids(), opts.seed, 0, b as u64, false)
                .unwrap();
            let est = per_batch.last_batch_bytes();
            let (mut hs, _) = hyper(&ds, &opts, 16, 4, 1);
            let job = HyperBatch {
                seeds: seeds.as_slice(),
                epoch: 0,
                batch: b as u64,
            };
            hs.sample(&[job]).unwrap();
            let p = hs.peaks();
            for (what, e, m) in [
                ("spilled", est.hyper_resident, p.resident),
                ("kept", est.hyper_state, p.batch),
            ] {
                assert!(
                    10 * e <= 11 * m && m <= 2 * e,
                    "{fanouts:?} batch {b}, {what}: estimated {e}, measured {m}"
                );
            }
        }
    }
}

/// With a limit, a spilling hyperbatch finishes only the batches whose last hop fits: the
/// first ones, one at least. The states and the threads' workspaces stay within the limit; the
/// batches left out, sampled in a later call, equal their per-batch samples.
#[test]
fn a_limit_admits_the_first_batches_whose_last_hop_fits() {
    let n = 20_000;
    let (_d, ds) = build(&graph(n, 200_000, 4), Some(n), false);
    let opts = SampleOptions {
        fanouts: fan(&[10, 5, 3]),
        ..Default::default()
    };
    let batches = strided(8, 200, 41, 13, n);
    let jobs = hyper_jobs(&batches, 0);
    let (_, want) = kept_samples(&ds, &opts, &jobs);
    let dir = tempfile::tempdir().unwrap();
    let mut spill = SpillFile::create(dir.path()).unwrap();
    let mut buf = ringgnn_io::AlignedBuf::new(SPILL_BUFFER);
    // What all 8 take, measured without a limit.
    let (mut free, _) = hyper(&ds, &opts, 16, 4, 2);
    free.sample_spilled(&jobs, &spill, None).unwrap();
    let all = free.state_bytes() + free.scratch_bytes();
    // Twice that fits all 8 (the bounds are above what the batches take); half, not; one
    // byte, one batch per call.
    for (limit, most, calls_wanted) in [(2 * all, 8, 1..=1), (all / 2, 7, 2..=8), (1, 1, 8..=8)] {
        let (mut hs, _) = hyper(&ds, &opts, 16, 4, 2);
        let mut got = vec![];
        let mut at = 0;
        let mut calls = 0;
        while at < jobs.len() {
            spill.rewind();
            let recs = hs.sample_spilled(&jobs[at..], &spill, Some(limit)).unwrap();
            assert!(
                !recs.is_empty() && recs.len() <= most,
                "limit {limit}: {}",
                recs.len()
            );
            if recs.len() > 1 {
                let held = hs.state_bytes() + hs.scratch_bytes();
                assert!(held <= limit, "limit {limit}: {held} held");
            }
            got.extend(
                recs.iter()
                    .map(|&r| spill.read(r, &mut buf).unwrap().expand()),
            );
            at += recs.len();
            calls += 1;
        }
        assert_eq!(got, want, "limit {limit}");
        assert!(
            calls_wanted.contains(&calls),
            "limit {limit}: {calls} calls"
        );
    }
}

/// An entry of the neighbor file that is not a node id is reported with its position, as the
/// per-batch sampler reports it, never used.
#[test]
fn a_bad_entry_is_reported_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("indices");
    // Node 0's list is [1, 7] in a graph of 2 nodes: entry 1 is bad.
    let mut entries: Vec<u8> = [1u32, 7].iter().flat_map(|x| x.to_le_bytes()).collect();
    // Padded to a whole page, as dataset files are.
    entries.resize(ALIGN, 0);
    std::fs::write(&path, &entries).unwrap();
    let reader = BlockReader::new(
        Box::new(PreadBatch::new(File::open(&path).unwrap())),
        ReadModel::default(),
        ALIGN,
        8,
    );
    let opts = SampleOptions {
        fanouts: fan(&[-1]),
        ..Default::default()
    };
    let indptr: Arc<[u64]> = vec![0u64, 2, 2].into();
    let mut hs = HyperSampler::new(indptr, opts, vec![reader], path, 4);
    let seeds = Seeds::new(vec![0u64], 2).unwrap();
    let err = hs
        .sample(&[HyperBatch {
            seeds: seeds.as_slice(),
            epoch: 0,
            batch: 0,
        }])
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("entry 1 of the neighbor file is 7"),
        "{err}"
    );
}
