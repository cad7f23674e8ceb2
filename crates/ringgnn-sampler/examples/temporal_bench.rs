//! Time-respecting sampling against plain sampling of the same seeds, side by side in one run,
//! on a generated R-MAT graph with uniformly random edge times (each list sorted by time, then
//! source), seed times uniform over the time range:
//!
//! - the typed sampler ([`HeteroSampler`], one type, one relation) with and without seed
//!   times, in memory and reading neighbor and time files with pread (warm page cache), in
//!   hyperbatches;
//! - the homogeneous samplers on the same graph and seeds without times: the per-batch
//!   [`NeighborSampler`] in memory and the [`HyperSampler`] (pread, one thread).
//!
//! Rounds alternate the order of the runs. Times are the CPU seconds of the sampling thread,
//! which a busy machine inflates far less than wall-clock seconds (`WALL=1`: wall-clock).
//! Usage:
//!
//! ```text
//! cargo run --release -p ringgnn-sampler --example temporal_bench -- \
//!     [SCALE=20] [EDGE_FACTOR=16] [BATCHES=64] [BATCH_SIZE=1024] [HYPER=8] [ROUNDS=2]
//! ```

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use ringgnn_io::{BlockReader, CoalesceOptions, PreadBatch, ReadModel};
use ringgnn_sampler::{
    EdgeTimes, Fanout, HeteroRelation, HeteroRequest, HeteroSampler, HyperBatch, HyperSampler,
    Indices, NeighborSampler, NeighborSource, SampleOptions, Seeds,
};
use ringgnn_store::manifest::{IndexDtype, TimeRange};
use ringgnn_store::rng;

const FANOUTS: [Fanout; 3] = [Fanout::Count(20), Fanout::Count(15), Fanout::Count(10)];
/// Edge and seed times are uniform over `[0, TIME_RANGE)`.
const TIME_RANGE: u64 = 1 << 31;

/// The CSC of an R-MAT graph (a, b, c = 0.57, 0.19, 0.19) of `2^scale` nodes and `edge_factor`
/// edges per node, with uniform edge times, each list sorted by (time, source).
fn rmat(scale: u32, edge_factor: u64) -> (Vec<u64>, Vec<u32>, Vec<i64>) {
    let n = 1u64 << scale;
    let m = n * edge_factor;
    let mut r = rng::stream(42, 7, 0);
    let mut edges: Vec<(u32, i64, u32)> = Vec::with_capacity(m as usize);
    for _ in 0..m {
        let (mut src, mut dst) = (0u64, 0u64);
        for _ in 0..scale {
            let x = rng::below(&mut r, 100);
            let (s, d) = match x {
                0..57 => (0, 0),
                57..76 => (0, 1),
                76..95 => (1, 0),
                _ => (1, 1),
            };
            src = src << 1 | s;
            dst = dst << 1 | d;
        }
        let t = rng::below(&mut r, TIME_RANGE) as i64;
        edges.push((dst as u32, t, src as u32));
    }
    edges.sort_unstable();
    let mut indptr = vec![0u64; n as usize + 1];
    for &(d, _, _) in &edges {
        indptr[d as usize + 1] += 1;
    }
    for v in 0..n as usize {
        indptr[v + 1] += indptr[v];
    }
    let indices = edges.iter().map(|e| e.2).collect();
    let times = edges.iter().map(|e| e.1).collect();
    (indptr, indices, times)
}

fn write_padded(path: &Path, mut bytes: Vec<u8>) {
    bytes.resize(bytes.len().div_ceil(4096) * 4096, 0);
    std::fs::write(path, bytes).unwrap();
}

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map_or(default, |a| a.parse().expect("integer arguments"))
}

/// CPU seconds this thread has used (user and system), from `/proc/thread-self/stat`.
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("a Linux /proc");
    // The fields after the command name (which may hold spaces, so split after its ')').
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 11 and 12 after the name; in ticks of
    // 1/100 s (USER_HZ).
    (f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()) as f64 / 100.0
}

/// CPU seconds a closure takes on this thread (the time a busy machine does not inflate);
/// `WALL=1`: wall-clock seconds.
fn secs(f: impl FnOnce()) -> f64 {
    let (t, c) = (Instant::now(), cpu_secs());
    f();
    match std::env::var_os("WALL") {
        Some(_) => t.elapsed().as_secs_f64(),
        None => cpu_secs() - c,
    }
}

fn main() {
    let (scale, ef) = (arg(1, 20) as u32, arg(2, 16));
    let (batches, bs, hyper, rounds) = (arg(3, 64), arg(4, 1024), arg(5, 8), arg(6, 2));
    let t = Instant::now();
    let (indptr, indices, times) = rmat(scale, ef);
    let n = 1u64 << scale;
    let m = indices.len() as u64;
    eprintln!(
        "R-MAT {scale}: {n} nodes, {m} edges in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let dir = tempfile::tempdir_in(".").unwrap();
    let (ix_path, t_path) = (dir.path().join("indices.bin"), dir.path().join("times.bin"));
    write_padded(
        &ix_path,
        indices.iter().flat_map(|x| x.to_le_bytes()).collect(),
    );
    write_padded(
        &t_path,
        times.iter().flat_map(|x| x.to_le_bytes()).collect(),
    );
    let ix = Arc::new(Indices::U32(indices));
    // Loaded as a dataset's times are.
    let times = EdgeTimes::load(&t_path, m).unwrap();

    let mut r = rng::stream(43, 7, 1);
    let seeds: Vec<Vec<u64>> = (0..batches)
        .map(|_| (0..bs).map(|_| rng::below(&mut r, n)).collect())
        .collect();
    let seed_times: Vec<Vec<i64>> = (0..batches)
        .map(|_| {
            (0..bs)
                .map(|_| rng::below(&mut r, TIME_RANGE) as i64)
                .collect()
        })
        .collect();

    let typed = |disk: bool| {
        let (source, t) = if disk {
            let f = File::open(&ix_path).unwrap();
            let opts = CoalesceOptions::default();
            let source = NeighborSource::disk(
                Box::new(PreadBatch::new(f)),
                &ix_path,
                IndexDtype::U32,
                opts,
            );
            let kind = ringgnn_io::BackendKind::Pread;
            (
                source,
                // The range a dataset's manifest records, where the search looks first.
                EdgeTimes::open(&t_path, m, kind, false, opts)
                    .unwrap()
                    .0
                    .with_range(TimeRange::of(&times)),
            )
        } else {
            (
                NeighborSource::Memory(ix.clone()),
                EdgeTimes::Memory(times.clone()),
            )
        };
        let rel = HeteroRelation {
            src: 0,
            dst: 0,
            indptr: indptr.clone().into(),
            source,
            fanouts: FANOUTS.to_vec(),
            times: Some(t),
        };
        HeteroSampler::new(vec![n], vec![rel], false).unwrap()
    };
    // What one run of every batch gives: seconds, nodes and edges sampled, bytes read.
    type Run = (f64, usize, usize, u64);
    // Every batch through the typed sampler `s`, `hyper` at a time, at the seed times or not.
    let run_typed = |s: &mut HeteroSampler, temporal: bool| -> Run {
        let (mut nodes, mut edges, before) = (0, 0, s.io_stats().bytes);
        let seeds_of: Vec<[(usize, &[u64]); 1]> =
            seeds.iter().map(|v| [(0, v.as_slice())]).collect();
        let times_of: Vec<[&[i64]; 1]> = seed_times.iter().map(|v| [v.as_slice()]).collect();
        let took = secs(|| {
            for (c, chunk) in seeds_of.chunks(hyper as usize).enumerate() {
                let batch = |i: usize| c * hyper as usize + i;
                let reqs: Vec<HeteroRequest> = (chunk.iter().enumerate())
                    .map(|(i, s)| HeteroRequest {
                        seeds: s,
                        batch: batch(i) as u64,
                        times: temporal.then_some(&times_of[batch(i)][..]),
                    })
                    .collect();
                for o in s.sample_many(&reqs, 1, 0, false).unwrap() {
                    (nodes, edges) = (nodes + o.node[0].len(), edges + o.row[0].len());
                }
            }
        });
        (took, nodes, edges, s.io_stats().bytes - before)
    };
    let seed_sets: Vec<Seeds> = (seeds.iter())
        .map(|v| Seeds::new(v.clone(), n).unwrap())
        .collect();
    let homogeneous = || -> Run {
        let source = NeighborSource::Memory(ix.clone());
        let mut s = NeighborSampler::new(indptr.clone(), &FANOUTS, false, source).unwrap();
        let (mut nodes, mut edges) = (0, 0);
        let took = secs(|| {
            for (b, sd) in seed_sets.iter().enumerate() {
                let o = s.sample(sd.as_slice(), 1, 0, b as u64, false).unwrap();
                (nodes, edges) = (nodes + o.node.len(), edges + o.row.len());
            }
        });
        (took, nodes, edges, 0)
    };
    let hyper_run = || -> Run {
        let f = File::open(&ix_path).unwrap();
        let len = f.metadata().unwrap().len();
        let chunk = CoalesceOptions::default().buffer;
        let reader = BlockReader::new(
            Box::new(PreadBatch::new(f)),
            ReadModel::default(),
            chunk,
            len,
        );
        let opts = SampleOptions {
            fanouts: FANOUTS.to_vec(),
            replace: false,
            seed: 1,
            with_edge_ids: false,
        };
        let mut s = HyperSampler::new(indptr.clone(), opts, vec![reader], ix_path.clone(), 4);
        let (mut nodes, mut edges) = (0, 0);
        let took = secs(|| {
            for (c, chunk) in seed_sets.chunks(hyper as usize).enumerate() {
                let hb: Vec<HyperBatch> = (chunk.iter().enumerate())
                    .map(|(i, sd)| HyperBatch {
                        seeds: sd.as_slice(),
                        epoch: 0,
                        batch: (c * hyper as usize + i) as u64,
                    })
                    .collect();
                for o in s.sample(&hb).unwrap() {
                    (nodes, edges) = (nodes + o.node().len(), edges + o.num_edges());
                }
            }
        });
        let c = s.counts();
        (took, nodes, edges, c.sequential_bytes + c.random_bytes)
    };
    let mut rows: Vec<(String, Vec<f64>, Run)> = Vec::new();
    let mut record = |name: String, run: Run| match rows.iter_mut().find(|r| r.0 == name) {
        Some(r) => r.1.push(run.0),
        None => rows.push((name, vec![run.0], run)),
    };
    for round in 0..rounds {
        for disk in [false, true] {
            let mut s = typed(disk);
            let place = if disk { "pread" } else { "memory" };
            let order = if round % 2 == 1 {
                [true, false]
            } else {
                [false, true]
            };
            for temporal in order {
                let what = if temporal { "temporal" } else { "plain" };
                record(
                    format!("typed one-type, {place}, {what}"),
                    run_typed(&mut s, temporal),
                );
            }
        }
        record("homogeneous NeighborSampler, memory".into(), homogeneous());
        record("homogeneous HyperSampler, pread".into(), hyper_run());
    }
    println!("{batches} batches of {bs} seeds, fanouts 20,15,10, hyperbatches of {hyper}");
    println!(
        "{:<38} {:>10} {:>10} {:>10} {:>14} {:>8}",
        "run", "seconds", "nodes", "edges", "bytes read", "ns/node"
    );
    let best = |name: &str| {
        let r = rows
            .iter()
            .find(|r| r.0 == name)
            .expect("a run of that name");
        r.1.iter().copied().fold(f64::MAX, f64::min)
    };
    for (name, all, (_, nodes, edges, bytes)) in &rows {
        let s: Vec<String> = all.iter().map(|x| format!("{x:.2}")).collect();
        let per_node = best(name) * 1e9 / *nodes as f64;
        println!(
            "{name:<38} {:>10} {nodes:>10} {edges:>10} {bytes:>14} {per_node:>8.0}",
            s.join("/")
        );
    }
    let ratios = [
        (
            "temporal / plain, memory",
            "memory, temporal",
            "memory, plain",
        ),
        ("temporal / plain, pread", "pread, temporal", "pread, plain"),
    ];
    for (what, a, b) in ratios {
        let (a, b) = (
            format!("typed one-type, {a}"),
            format!("typed one-type, {b}"),
        );
        println!("{what}: {:.2}", best(&a) / best(&b));
    }
    let plain = "typed one-type, memory, plain";
    for other in [
        "homogeneous NeighborSampler, memory",
        "homogeneous HyperSampler, pread",
    ] {
        println!("{plain} / {other}: {:.2}", best(plain) / best(other));
    }
}
