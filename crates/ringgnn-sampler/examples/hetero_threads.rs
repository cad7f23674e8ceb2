//! One typed hyperbatch sampled with 1 thread and with N, alternating, in one run:
//! `HeteroSampler::sample_many` over a dataset's relations (in memory or read with pread), with
//! and without seed times.
//!
//! ```text
//! cargo run --release -p ringgnn-sampler --example hetero_threads -- \
//!     DATASET [--threads 2] [--batches 32] [--batch-size 1024] [--rounds 3] [--disk]
//! ```
//!
//! Seeds: `batches x batch-size` node ids of the first node type drawn from a fixed stream,
//! times uniform over [0, 1e6] (the range of `temporal_bench.py`'s graphs); fanouts 20,15,10.
//! Prints per configuration the wall and CPU seconds (this process, all threads) of each
//! round (`sample_each`, each sample dropped as it comes), the calling thread's CPU seconds (the
//! seeds, the wide fetch, the search's bookkeeping: what does not run on the threads) and
//! bytes read; then checks, untimed, that both give the same samples (a hash of each).

use std::path::PathBuf;
use std::time::Instant;

use ringgnn_io::BackendKind;
use ringgnn_sampler::{Fanout, HeteroRequest, HeteroSample, HeteroSampler, TypedGraph};
use ringgnn_store::rng;

/// User and system CPU seconds so far of this process (all threads), from `/proc/self/stat`,
/// and of the calling thread, from `/proc/thread-self/stat`.
fn cpu_seconds() -> (f64, f64) {
    (ticks("/proc/self/stat"), ticks("/proc/thread-self/stat"))
}

fn ticks(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).expect("a stat file");
    // Fields after the command name (which may hold spaces) close with ')'.
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("a dataset directory"));
    let (mut threads, mut batches, mut size, mut rounds, mut disk) = (2, 32, 1024, 3, false);
    while let Some(a) = args.next() {
        let mut num = || args.next().and_then(|v| v.parse().ok()).expect("a number");
        match a.as_str() {
            "--threads" => threads = num(),
            "--batches" => batches = num(),
            "--batch-size" => size = num(),
            "--rounds" => rounds = num(),
            "--disk" => disk = true,
            other => panic!("unknown argument {other}"),
        }
    }
    let kind = disk.then_some(BackendKind::Pread);
    let graph = TypedGraph::open(&dir, kind, false, &[]).expect("the dataset");
    let hops = [Fanout::Count(20), Fanout::Count(15), Fanout::Count(10)];
    let fanouts = vec![hops.to_vec(); graph.relations.len()];
    let n = graph.counts[0];
    let mut r = rng::stream(40, 1, 0);
    let ids: Vec<Vec<u64>> = (0..batches)
        .map(|_| (0..size).map(|_| rng::below(&mut r, n)).collect())
        .collect();
    let times: Vec<Vec<i64>> = (0..batches)
        .map(|_| {
            (0..size)
                .map(|_| rng::below(&mut r, 1_000_001) as i64)
                .collect()
        })
        .collect();
    let seeds: Vec<[(usize, &[u64]); 1]> = ids.iter().map(|v| [(0, v.as_slice())]).collect();
    let time_lists: Vec<[&[i64]; 1]> = times.iter().map(|t| [t.as_slice()]).collect();
    let requests = |timed: bool| -> Vec<HeteroRequest<'_>> {
        (seeds.iter().zip(&time_lists).enumerate())
            .map(|(b, (s, t))| HeteroRequest {
                seeds: s,
                batch: b as u64,
                times: timed.then_some(&t[..]),
            })
            .collect()
    };
    let open = |t: usize| -> HeteroSampler {
        let (mut s, _, _) = graph
            .sampler(fanouts.clone(), false, None)
            .expect("a sampler");
        s.set_threads(t);
        s
    };
    println!(
        "{} ({}), {batches} batches of {size}, fanouts 20,15,10",
        dir.display(),
        if disk { "pread" } else { "memory" }
    );
    println!("| sampling | threads | round | wall s | CPU s | calling thread CPU s | read MB |");
    println!("|---|---|---|---|---|---|---|");
    for timed in [false, true] {
        let reqs = requests(timed);
        let mut samplers = [open(1), open(threads)];
        for round in 0..rounds {
            for s in samplers.iter_mut() {
                let (cpu, read) = (cpu_seconds(), s.io_stats().bytes);
                let start = Instant::now();
                // Each sample dropped as it is handed out, as a loader spills it.
                s.sample_each(&reqs, 7, round as u64, false, &mut |_, out| {
                    drop(out);
                    Ok(())
                })
                .expect("samples");
                let wall = start.elapsed().as_secs_f64();
                let now = cpu_seconds();
                let (cpu, caller) = (now.0 - cpu.0, now.1 - cpu.1);
                let read = s.io_stats().bytes - read;
                println!(
                    "| {} | {} | {round} | {wall:.3} | {cpu:.2} | {caller:.2} | {:.1} |",
                    if timed { "temporal" } else { "typed" },
                    s.threads(),
                    read as f64 / 1e6
                );
            }
        }
        // Not timed: the samples of both, compared by a hash of each.
        let hashes = samplers.each_mut().map(|s| {
            let mut h = Vec::new();
            s.sample_each(&reqs, 7, 0, false, &mut |_, out| {
                h.push(digest(&out));
                Ok(())
            })
            .expect("samples");
            h
        });
        assert_eq!(hashes[0], hashes[1], "samples differ");
        println!("({} samples identical)", hashes[0].len());
    }
}

fn digest(s: &HeteroSample) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        &s.node,
        &s.row,
        &s.col,
        &s.num_sampled_nodes,
        &s.num_sampled_edges,
        &s.time,
    )
        .hash(&mut h);
    h.finish()
}
