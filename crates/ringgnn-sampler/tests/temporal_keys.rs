//! The search from disk over a relation's time keys (`edge_time_keys.bin`): 2 bytes an entry, the
//! entries of a seed time's own bucket (a run of each list) left undecided and read in the
//! times. Every sample is the one over the times and the one in memory, whatever the bounds:
//! quantiles of the file (few undecided entries), coarse ones (long undecided runs, across pages
//! of times), all equal (every entry undecided); seed times before every time, after every time,
//! equal to bounds, between; lists longer than a page of keys, many equal times, short lists
//! side by side (the dense path). A list the keys settle reads no time at all; a bad keys file
//! is a clear error.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ringgnn_io::{open_backend, BackendKind, CoalesceOptions};
use ringgnn_sampler::{
    EdgeTimes, Error, Fanout, HeteroRelation, HeteroRequest, HeteroSample, HeteroSampler, Indices,
    NeighborSource, TemporalStrategy, TimeKeys,
};
use ringgnn_store::manifest::{IndexDtype, TimeRange};
use ringgnn_store::time_keys::{key_of, BUCKETS};

use Fanout::{All, Count};

mod common;
use common::timed::{write_padded, Rel};

const SMALL: CoalesceOptions = CoalesceOptions {
    max_run: 4096,
    buffer: 4096,
};

/// How the times are read: in memory, from disk, or from disk over keys with these bounds.
#[derive(Clone, Copy, Debug)]
enum How<'a> {
    Memory,
    Disk(CoalesceOptions),
    Keys(&'a [i64], CoalesceOptions),
}

/// A keys file for `times` with `bounds` (every time at least `bounds[0]`), written in `dir`.
fn write_keys(dir: &Path, name: &str, times: &[i64], bounds: &[i64]) -> PathBuf {
    assert_eq!(bounds.len(), BUCKETS);
    let mut bytes: Vec<u8> = bounds.iter().flat_map(|b| b.to_le_bytes()).collect();
    for &t in times {
        bytes.extend(
            key_of(bounds, t)
                .expect("a time below the bounds")
                .to_le_bytes(),
        );
    }
    write_padded(dir, name, bytes)
}

/// A one-type sampler of `rel` with `fanouts`, its times read as `how` says (files in `dir`).
fn sampler(
    rel: &Rel,
    nodes: u64,
    fanouts: &[Fanout],
    strategy: TemporalStrategy,
    how: How<'_>,
    dir: &Path,
) -> HeteroSampler {
    let n = rel.times.len() as u64;
    let (source, times, keys) = match how {
        How::Memory => (
            NeighborSource::Memory(Arc::new(Indices::U64(rel.indices.clone()))),
            EdgeTimes::Memory(rel.times.clone().into()),
            None,
        ),
        How::Disk(opts) | How::Keys(_, opts) => {
            let ix = rel.indices.iter().flat_map(|&x| (x as u32).to_le_bytes());
            let ix = write_padded(dir, "ix.bin", ix.collect());
            let t = rel.times.iter().flat_map(|&x| x.to_le_bytes());
            let t = write_padded(dir, "times.bin", t.collect());
            let (reader, _) = open_backend(BackendKind::Pread, &ix, false).unwrap();
            let source = NeighborSource::disk(reader, &ix, IndexDtype::U32, opts);
            let (times, _) = EdgeTimes::open(&t, n, BackendKind::Pread, false, opts).unwrap();
            let keys = match how {
                How::Keys(bounds, _) => {
                    let k = write_keys(dir, "keys.bin", &rel.times, bounds);
                    let b = TimeKeys::bounds(&k).unwrap();
                    assert_eq!(&*b, bounds);
                    let pread = (BackendKind::Pread, false);
                    Some(TimeKeys::open(&k, n, b, pread, opts).unwrap().0)
                }
                _ => None,
            };
            (source, times.with_range(TimeRange::of(&rel.times)), keys)
        }
    };
    let r = HeteroRelation {
        src: 0,
        dst: 0,
        indptr: rel.indptr.clone().into(),
        source,
        fanouts: fanouts.to_vec(),
        times: Some(times),
    };
    let mut s = HeteroSampler::new(vec![nodes], vec![r], false).unwrap();
    s.set_temporal_strategy(strategy);
    if let Some(k) = keys {
        s.set_time_keys(0, k).unwrap();
    }
    s
}

/// A hyperbatch: per time of `times`, a batch of every node at that time, and one batch of
/// every node at all the times in turn.
fn sample_at(s: &mut HeteroSampler, nodes: u64, times: &[i64]) -> Vec<HeteroSample> {
    let ids: Vec<u64> = (0..nodes).collect();
    let each: Vec<Vec<i64>> = times.iter().map(|&t| vec![t; ids.len()]).collect();
    let mixed: Vec<i64> = (0..nodes as usize)
        .map(|i| times[i % times.len()])
        .collect();
    let seeds = [(0usize, ids.as_slice())];
    let lists: Vec<[&[i64]; 1]> = (each.iter().chain([&mixed]))
        .map(|t| [t.as_slice()])
        .collect();
    let requests: Vec<HeteroRequest> = (lists.iter().enumerate())
        .map(|(i, t)| HeteroRequest {
            seeds: &seeds,
            batch: i as u64,
            times: Some(t),
        })
        .collect();
    s.sample_many(&requests, 5, 0, true).unwrap()
}

/// Lists of every kind, `(source, time)` per entry with times in `0..1000`: 6,000 entries (three
/// pages of keys) evenly spread, 3,000 in ten distinct times (long runs of ties), 700 all at
/// time 500, 300 short lists side by side (0 to 5 entries: the dense path), an empty one.
fn lists() -> (u64, Rel) {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rand = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let n = 320u64;
    let mut lists: Vec<Vec<(u64, i64)>> = vec![
        (0..6000).map(|i| (rand(n), (i / 6) as i64)).collect(),
        (0..3000)
            .map(|_| (rand(n), 100 * rand(10) as i64))
            .collect(),
        (0..700).map(|_| (rand(n), 500)).collect(),
        vec![],
    ];
    while (lists.len() as u64) < n {
        let len = rand(6);
        lists.push((0..len).map(|_| (rand(n), rand(1000) as i64)).collect());
    }
    (n, Rel::new(0, 0, &lists))
}

/// Bounds from `values` (ascending, the first at most every time): `BUCKETS` of them, each value
/// taking an equal share.
fn coarse(values: &[i64]) -> Vec<i64> {
    (0..BUCKETS)
        .map(|j| values[j * values.len() / BUCKETS])
        .collect()
}

/// Quantile bounds of `times`, as the store derives them.
fn derived(times: &[i64], dir: &Path) -> Vec<i64> {
    let t = write_padded(
        dir,
        "derive_from.bin",
        times.iter().flat_map(|x| x.to_le_bytes()).collect(),
    );
    let k = dir.join("derived_keys.bin");
    ringgnn_store::time_keys::derive(&t, times.len() as u64, &k).unwrap();
    TimeKeys::bounds(&k).unwrap().to_vec()
}

#[test]
fn samples_over_keys_are_the_samples_over_times_whatever_the_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let (n, rel) = lists();
    let bounds = [
        derived(&rel.times, dir.path()),
        // Few distinct bounds: runs of hundreds to thousands of entries, across pages.
        coarse(&[0, 300, 301, 700]),
        // Every entry in the last bucket: the whole list undecided.
        vec![0; BUCKETS],
        // A bucket per time of 0..1000 and empty ones above, bounds below some times.
        coarse(&(0..1000).collect::<Vec<i64>>()),
        // The first bound below every time.
        coarse(&[-1_000_000, 250, 500, 501, 999]),
    ];
    // Before every time, equal to bounds and to tied times, between, the last, after every one.
    let times = [
        i64::MIN,
        -1,
        0,
        1,
        100,
        250,
        299,
        300,
        301,
        499,
        500,
        501,
        777,
        999,
        1000,
        i64::MAX,
    ];
    for (strategy, fanouts) in [
        (TemporalStrategy::Uniform, vec![All]),
        (TemporalStrategy::Uniform, vec![Count(3), Count(2)]),
        (TemporalStrategy::Last, vec![Count(4), All]),
    ] {
        let mut s = sampler(&rel, n, &fanouts, strategy, How::Memory, dir.path());
        let want = sample_at(&mut s, n, &times);
        // The first hop with every eligible edge is each list's exact count.
        if fanouts == [All] {
            for (t, out) in times.iter().zip(&want) {
                let count: usize = (0..n as usize)
                    .map(|v| {
                        let (lo, hi) = (rel.indptr[v] as usize, rel.indptr[v + 1] as usize);
                        rel.times[lo..hi].partition_point(|&x| x <= *t)
                    })
                    .sum();
                assert_eq!(out.row[0].len(), count, "at {t}");
            }
        }
        for opts in [CoalesceOptions::default(), SMALL] {
            let mut s = sampler(&rel, n, &fanouts, strategy, How::Disk(opts), dir.path());
            assert_eq!(sample_at(&mut s, n, &times), want, "over times, {opts:?}");
            for (k, b) in bounds.iter().enumerate() {
                // Slices of one block of frontier reads and less, and of one and a part
                // (the frontier's keys are read 64 lists at a time).
                for slice in [usize::MAX, 7, 100] {
                    let how = How::Keys(b, opts);
                    let mut s = sampler(&rel, n, &fanouts, strategy, how, dir.path());
                    s.set_cut_slice(slice);
                    let got = sample_at(&mut s, n, &times);
                    assert_eq!(
                        got, want,
                        "bounds {k}, {opts:?}, slice {slice}, {strategy:?}"
                    );
                }
            }
        }
        // On several threads, each with its readers of the keys and the times.
        let how = How::Keys(&bounds[1], SMALL);
        let mut s = sampler(&rel, n, &fanouts, strategy, how, dir.path());
        s.set_threads(3);
        s.set_cut_slice(16);
        assert_eq!(sample_at(&mut s, n, &times), want, "3 threads");
    }
}

/// With keys, a list whose seed time's bucket holds none of its entries is cut by the keys alone:
/// times even, buckets one per time unit, seeds at odd times; the times file may then hold
/// anything, it is never read. A seed at an even time reads it (a run of one entry undecided),
/// and a file of wrong times then gives another sample.
#[test]
fn lists_the_keys_settle_read_no_time() {
    let dir = tempfile::tempdir().unwrap();
    let (n, mut rel) = lists();
    rel.times.iter_mut().for_each(|t| *t *= 2);
    let bounds: Vec<i64> = (0..BUCKETS as i64).collect();
    let odd = [-1, 1, 201, 999, 1001, 1999, 2001];
    let fan = [All, Count(3)];
    let uniform = TemporalStrategy::Uniform;
    let mut s = sampler(&rel, n, &fan, uniform, How::Memory, dir.path());
    let (want, want_even) = (sample_at(&mut s, n, &odd), sample_at(&mut s, n, &[600]));
    // Keys of the true times, then the times file overwritten with later ones.
    let mut s = sampler(
        &rel,
        n,
        &fan,
        uniform,
        How::Keys(&bounds, SMALL),
        dir.path(),
    );
    let wrong: Vec<u8> = (rel.times.iter())
        .flat_map(|&t| (t + 1_000_000).to_le_bytes())
        .collect();
    std::fs::write(dir.path().join("times.bin"), {
        let mut w = wrong;
        w.resize(w.len().div_ceil(4096) * 4096, 0);
        w
    })
    .unwrap();
    assert_eq!(sample_at(&mut s, n, &odd), want);
    assert_ne!(sample_at(&mut s, n, &[600]), want_even);
}

#[test]
fn bad_keys_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (n, rel) = lists();
    let edges = rel.times.len() as u64;
    let bounds = coarse(&[0, 500]);
    let k = write_keys(dir.path(), "keys.bin", &rel.times, &bounds);
    let b = TimeKeys::bounds(&k).unwrap();
    let pread = (BackendKind::Pread, false);
    // A keys file for another number of edges.
    let opts = CoalesceOptions::default();
    let e = TimeKeys::open(&k, edges + 5000, b.clone(), pread, opts)
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(matches!(e, Error::Corrupt(_)), "{e:?}");
    assert!(
        msg.contains("keys.bin") && msg.contains("time keys"),
        "{msg}"
    );
    assert!(msg.contains("ringgnn verify"), "{msg}");
    // Bounds out of order.
    let mut bytes = std::fs::read(&k).unwrap();
    bytes[..8].copy_from_slice(&1000i64.to_le_bytes());
    let bad = dir.path().join("bad.bin");
    std::fs::write(&bad, &bytes).unwrap();
    let e = TimeKeys::bounds(&bad).err().unwrap().to_string();
    assert!(e.contains("bad.bin"), "{e}");
    // Keys for a relation whose times are in memory, or a relation it does not have.
    let (keys, _) = TimeKeys::open(&k, edges, b.clone(), pread, opts).unwrap();
    let uniform = TemporalStrategy::Uniform;
    let mut s = sampler(&rel, n, &[All], uniform, How::Memory, dir.path());
    let e = s.set_time_keys(0, keys).unwrap_err().to_string();
    assert!(e.contains("no edge times read from disk"), "{e}");
    let (keys, _) = TimeKeys::open(&k, edges, b, pread, opts).unwrap();
    let e = s.set_time_keys(3, keys).unwrap_err().to_string();
    assert!(e.contains("relation 3"), "{e}");
}
