//! The search that cuts a list at a seed's time, from disk (`hetero/temporal.rs`): it reads the
//! page where the cut would be if the times were spread evenly over the dataset's range
//! (interpolation), so a list of evenly spread times costs one page of times; the range only
//! chooses pages, so any range given (right, wrong, none) cuts where the times in memory do.
//! Lists side by side that cover their pages densely are read whole, each page once.

use std::path::Path;
use std::sync::Arc;

use ringgnn_io::{open_backend, BackendKind, CoalesceOptions};
use ringgnn_sampler::{
    EdgeTimes, Fanout, HeteroRelation, HeteroRequest, HeteroSample, HeteroSampler, Indices,
    NeighborSource,
};
use ringgnn_store::manifest::{IndexDtype, TimeRange};

/// Entries of the long list: 100 pages of times.
const LONG: u64 = 51_200;

/// Two destination nodes: node 0 with a list of [`LONG`] entries whose times are `time(i)`
/// (ascending), sources alternating 0 and 1; node 1 with three entries at times 0, 5, 9.
fn lists(time: impl Fn(u64) -> i64) -> (Vec<u64>, Vec<u64>, Vec<i64>) {
    let mut indices: Vec<u64> = (0..LONG).map(|i| i % 2).collect();
    let mut times: Vec<i64> = (0..LONG).map(time).collect();
    indices.extend([1, 0, 1]);
    times.extend([0, 5, 9]);
    (vec![0, LONG, LONG + 3], indices, times)
}

/// A sampler of one hop of `fanout` over the lists, in memory (`range` None and `disk` false)
/// or read from files in `dir` with pread, the times with `range` as their range.
fn sampler(
    (indptr, indices, times): &(Vec<u64>, Vec<u64>, Vec<i64>),
    fanout: Fanout,
    disk: Option<(&Path, Option<TimeRange>)>,
) -> HeteroSampler {
    let (source, times) = match disk {
        None => (
            NeighborSource::Memory(Arc::new(Indices::U64(indices.clone()))),
            EdgeTimes::Memory(times.clone().into()),
        ),
        Some((dir, range)) => {
            let write = |name: &str, mut bytes: Vec<u8>| {
                bytes.resize(bytes.len().div_ceil(4096) * 4096, 0);
                let path = dir.join(name);
                std::fs::write(&path, bytes).unwrap();
                path
            };
            let ix = write(
                "ix.bin",
                indices
                    .iter()
                    .flat_map(|&x| (x as u32).to_le_bytes())
                    .collect(),
            );
            let t = write(
                "t.bin",
                times.iter().flat_map(|&x| x.to_le_bytes()).collect(),
            );
            let opts = CoalesceOptions::default();
            let (reader, _) = open_backend(BackendKind::Pread, &ix, false).unwrap();
            let source = NeighborSource::disk(reader, &ix, IndexDtype::U32, opts);
            let n = times.len() as u64;
            let (t, _) = EdgeTimes::open(&t, n, BackendKind::Pread, false, opts).unwrap();
            (source, t.with_range(range))
        }
    };
    let rel = HeteroRelation {
        src: 0,
        dst: 0,
        indptr: indptr.clone().into(),
        source,
        fanouts: vec![fanout],
        times: Some(times),
    };
    HeteroSampler::new(vec![2], vec![rel], false).unwrap()
}

/// Seeds 0 and 1, each at `time`, sampled by `s`.
fn at(s: &mut HeteroSampler, time: i64) -> HeteroSample {
    let times = [time, time + 1];
    let req = HeteroRequest {
        seeds: &[(0, &[0, 1])],
        batch: 3,
        times: Some(&[&times]),
    };
    s.sample_many(&[req], 11, 0, true).unwrap().pop().unwrap()
}

#[test]
fn any_range_cuts_where_the_times_in_memory_do() {
    let range = |min, max| Some(TimeRange { min, max });
    let ranges = [
        None,
        range(0, LONG as i64),
        range(1_000_000_000, 1_000_000_005),
        range(-5, -1),
        range(i64::MIN, i64::MAX),
        range(7, 7),
        range(9, 3),
    ];
    // Evenly spread, every time twice, and bunched at the end (where a guess misses).
    let shapes: [fn(u64) -> i64; 3] = [|i| i as i64, |i| (i / 2) as i64, |i| (i * i / LONG) as i64];
    let dir = tempfile::tempdir().unwrap();
    for (k, shape) in shapes.into_iter().enumerate() {
        let g = lists(shape);
        for fanout in [Fanout::Count(5), Fanout::All] {
            let mut memory = sampler(&g, fanout, None);
            let limits = [
                -1, 0, 1, 511, 512, 4_000, 25_599, 30_000, 51_198, 51_199, 99_999,
            ];
            let want: Vec<HeteroSample> = limits.iter().map(|&t| at(&mut memory, t)).collect();
            for range in ranges {
                let mut disk = sampler(&g, fanout, Some((dir.path(), range)));
                for (&t, w) in limits.iter().zip(&want) {
                    assert_eq!(
                        &at(&mut disk, t),
                        w,
                        "shape {k}, {fanout:?}, at {t}, {range:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn evenly_spread_times_cost_one_page_with_their_range() {
    let g = lists(|i| i as i64);
    let dir = tempfile::tempdir().unwrap();
    let seed_at = |s: &mut HeteroSampler, time: i64| {
        let req = HeteroRequest {
            seeds: &[(0, &[0])],
            batch: 0,
            times: Some(&[&[time]]),
        };
        let out = s.sample_many(&[req], 1, 0, true).unwrap().pop().unwrap();
        let edges = &out.edge.as_ref().unwrap()[0];
        assert!(edges.len() == 1 && edges[0] <= time as u64, "{edges:?}");
        s.io_stats().bytes
    };
    let range = Some(TimeRange {
        min: 0,
        max: LONG as i64 - 1,
    });
    let mut s = sampler(&g, Fanout::Count(1), Some((dir.path(), range)));
    // One page of times (the one holding entry 30,000) and the drawn neighbor's page.
    assert_eq!(seed_at(&mut s, 30_000), 2 * 4096);
    // Without its range the search reads the middle page (entries 25,600 to 26,111, all
    // eligible), then the middle of the rest (38,400 on, all newer), then the page of the cut,
    // interpolated between the two.
    let mut s = sampler(&g, Fanout::Count(1), Some((dir.path(), None)));
    assert_eq!(seed_at(&mut s, 30_000), 4 * 4096);
}

/// Lists side by side in the time file are read whole, each page once, in one round, where
/// they cover their pages densely; a long list apart from them is still probed a page at a
/// time; the cuts are those of the times in memory either way. Nodes 0 to 7: lists of 768
/// entries (1.5 pages each, 12 pages in all, times `0..768`); nodes 8 to 15: 4,096 entries
/// never searched (8 pages); node 16: [`LONG`] entries of evenly spread times; node 17: 3
/// entries.
#[test]
fn dense_lists_are_read_whole_once_and_sparse_ones_probed() {
    let mut indptr = vec![0u64];
    let mut times: Vec<i64> = Vec::new();
    let mut push = |list: &mut dyn Iterator<Item = i64>| {
        times.extend(list);
        indptr.push(times.len() as u64);
    };
    for _ in 0..8 {
        push(&mut (0..768));
    }
    for _ in 8..16 {
        push(&mut (0..512));
    }
    push(&mut (0..LONG as i64));
    push(&mut [0, 5, 9].into_iter());
    let n = indptr.len() as u64 - 1;
    let indices: Vec<u64> = (0..times.len() as u64).map(|i| i % n).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.bin");
    let mut bytes: Vec<u8> = times.iter().flat_map(|&x| x.to_le_bytes()).collect();
    bytes.resize(bytes.len().div_ceil(4096) * 4096, 0);
    std::fs::write(&path, bytes).unwrap();
    // Neighbors in memory: what is read from disk is times only.
    let even = Some(TimeRange {
        min: 0,
        max: LONG as i64 - 1,
    });
    // In memory (`disk` false) or from disk with `range`.
    let make = |disk: bool, range: Option<TimeRange>| {
        let t = match disk {
            false => EdgeTimes::Memory(times.clone().into()),
            true => {
                let opts = CoalesceOptions::default();
                let (t, _) =
                    EdgeTimes::open(&path, times.len() as u64, BackendKind::Pread, false, opts)
                        .unwrap();
                t.with_range(range)
            }
        };
        let rel = HeteroRelation {
            src: 0,
            dst: 0,
            indptr: indptr.clone().into(),
            source: NeighborSource::Memory(Arc::new(Indices::U64(indices.clone()))),
            fanouts: vec![Fanout::All],
            times: Some(t),
        };
        HeteroSampler::new(vec![n], vec![rel], false).unwrap()
    };
    // Nodes 0 to 7 at `dense_at` on (a different cut each), and with `long` nodes 16 at
    // `long_at` and 17 at 5.
    let sample = |s: &mut HeteroSampler, dense_at: i64, long: Option<i64>| {
        let mut seeds: Vec<u64> = (0..8).collect();
        let mut at: Vec<i64> = (0..8).map(|v| dense_at + 97 * v).collect();
        if let Some(long_at) = long {
            seeds.extend([16, 17]);
            at.extend([long_at, 5]);
        }
        let req = HeteroRequest {
            seeds: &[(0, &seeds)],
            batch: 0,
            times: Some(&[&at]),
        };
        let out = s.sample_many(&[req], 1, 0, true).unwrap().pop().unwrap();
        (out, s.io_stats().bytes)
    };
    let mut memory = make(false, None);
    for (dense_at, long_at) in [
        (-1, 30_000),
        (0, 0),
        (100, 51_199),
        (300, 25_600),
        (700, -5),
    ] {
        for long in [None, Some(long_at)] {
            let (want, _) = sample(&mut memory, dense_at, long);
            for range in [even, None] {
                let (got, bytes) = sample(&mut make(true, range), dense_at, long);
                assert_eq!(got, want, "at {dense_at}, {long:?}, {range:?}");
                // The 12 pages of nodes 0 to 7 once, in one round, whatever the range.
                if long.is_none() {
                    assert_eq!(bytes, 12 * 4096, "at {dense_at}, {range:?}");
                }
            }
        }
    }
    // With nodes 16 and 17: their times evenly spread over the range, node 16's cut costs one
    // page, node 17's its page; without the range node 16 is bisected page by page.
    assert_eq!(
        sample(&mut make(true, even), 100, Some(30_000)).1,
        14 * 4096
    );
    assert_eq!(
        sample(&mut make(true, None), 100, Some(30_000)).1,
        16 * 4096
    );
}
