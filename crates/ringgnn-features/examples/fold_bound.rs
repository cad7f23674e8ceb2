//! The bare memory pattern of layer-wise inference's fold, timed alone: the least time an edge
//! can take on this machine whatever the fold's bookkeeping (`docs/benchmarks.md`, "What bounds
//! a wide layer"). Each thread owns `acc_mb / threads` MB of f32 accumulator rows (`width` wide)
//! and folds `edges` edges into them, each adding a row of a shared `rows_mb` MB piece (the
//! aggregation's piece of source rows) into an accumulator row, prefetching the two rows of the
//! edge `ahead` further on (as `aggregate.rs` does). The tasks are made before the clock starts.
//!
//! `order`: `sorted` visits a piece's destinations in increasing order with random gaps, one in
//! `gap` on average (what the fold does: it walks a block's destinations in order, and a
//! destination has an edge in few pieces), `random` in no order. A source row is random in the
//! piece either way.
//!
//! ```text
//! GLIBC_TUNABLES=glibc.malloc.hugetlb=1 cargo run --release -p ringgnn-features --example fold_bound -- \
//!     --threads 1,2 --acc-mb 3400 --rows-mb 16 --width 128 --edges 40000000 --gap 35 --order sorted
//! ```
//! (`glibc.malloc.hugetlb=1` gives the large buffers transparent huge pages, as numpy's do.)
//! Prints, per thread count, the nanoseconds an edge takes a thread and the wall nanoseconds an
//! edge (all threads together), and the memory traffic that is (a row read, an accumulator row
//! read and written back).

use std::time::Instant;

use ringgnn_features::aggregate::prefetch;
use ringgnn_features::Fold;

struct Args {
    threads: Vec<usize>,
    acc_mb: usize,
    rows_mb: usize,
    width: usize,
    edges: usize,
    gap: usize,
    sorted: bool,
    ahead: usize,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        threads: vec![1, 2],
        acc_mb: 3400,
        rows_mb: 16,
        width: 128,
        edges: 40_000_000,
        gap: 35,
        sorted: true,
        ahead: 8,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = || {
            value
                .parse::<usize>()
                .map_err(|_| format!("{flag}: not a count: {value}"))
        };
        match flag.as_str() {
            "--threads" => {
                a.threads = value
                    .split(',')
                    .map(|t| t.parse().map_err(|_| format!("--threads: {t}")))
                    .collect::<Result<_, _>>()?
            }
            "--acc-mb" => a.acc_mb = num()?,
            "--rows-mb" => a.rows_mb = num()?,
            "--width" => a.width = num()?,
            "--edges" => a.edges = num()?,
            "--gap" => a.gap = num()?.max(1),
            "--ahead" => a.ahead = num()?,
            "--order" => {
                a.sorted = match value.as_str() {
                    "sorted" => true,
                    "random" => false,
                    o => return Err(format!("--order: sorted or random, not {o}")),
                }
            }
            f => return Err(format!("unknown flag {f}")),
        }
    }
    Ok(a)
}

/// xorshift64*: the tasks need no more than that.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `edges` tasks (accumulator row, source row) of one thread.
fn tasks(a: &Args, acc_rows: usize, src_rows: usize, seed: u64) -> Vec<(u32, u32)> {
    let mut rng = Rng(seed | 1);
    let mut out = Vec::with_capacity(a.edges);
    let mut i = 0usize;
    while out.len() < a.edges {
        let d = if a.sorted {
            i += 1 + (rng.next() % (2 * a.gap as u64 - 1)) as usize;
            if i >= acc_rows {
                i = (rng.next() % a.gap as u64) as usize; // the next piece starts over
            }
            i
        } else {
            (rng.next() % acc_rows as u64) as usize
        };
        out.push((d as u32, (rng.next() % src_rows as u64) as u32));
    }
    out
}

/// The fold's kernel and prefetch ([`Fold::Sum`], [`prefetch`]) without its bookkeeping.
fn fold(acc: &mut [f32], rows: &[f32], w: usize, tasks: &[(u32, u32)], ahead: usize) {
    for (n, &(i, k)) in tasks.iter().enumerate() {
        if ahead > 0 {
            if let Some(&(i2, k2)) = tasks.get(n + ahead) {
                prefetch(rows[k2 as usize * w..].as_ptr() as usize, 4 * w);
                prefetch(acc[i2 as usize * w..].as_ptr() as usize, 4 * w);
            }
        }
        let (i, k) = (i as usize, k as usize);
        Fold::Sum.edge(
            &mut acc[i * w..(i + 1) * w],
            &rows[k * w..(k + 1) * w],
            0,
            0,
            0,
        );
    }
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fold_bound: {e}");
            std::process::exit(2);
        }
    };
    let w = a.width;
    let src_rows = (a.rows_mb << 20) / (4 * w);
    let rows: Vec<f32> = (0..src_rows * w).map(|v| (v % 7) as f32).collect();
    for &t in &a.threads {
        let acc_rows = (a.acc_mb << 20) / (4 * w) / t;
        let mut accs: Vec<Vec<f32>> = (0..t).map(|_| vec![1f32; acc_rows * w]).collect();
        let work: Vec<Vec<(u32, u32)>> = (0..t)
            .map(|j| tasks(&a, acc_rows, src_rows, 0x9E37_79B9 + j as u64))
            .collect();
        let start = Instant::now();
        std::thread::scope(|s| {
            for (acc, tasks) in accs.iter_mut().zip(&work) {
                let rows = &rows;
                s.spawn(move || fold(acc, rows, w, tasks, a.ahead));
            }
        });
        let secs = start.elapsed().as_secs_f64();
        let check: f64 = accs
            .iter()
            .map(|x| x[..w].iter().map(|&v| v as f64).sum::<f64>())
            .sum();
        let total = (a.edges * t) as f64;
        println!(
            "threads {t}: {:.1} ns an edge a thread, {:.1} wall ns an edge, {:.1} GB/s moved \
             ({} edges a thread, accumulators {} MB, pieces {} MB, {} order, ahead {}; check {check})",
            secs * 1e9 / a.edges as f64,
            secs * 1e9 / total,
            total * 12.0 * w as f64 / secs / 1e9,
            a.edges,
            a.acc_mb,
            a.rows_mb,
            if a.sorted { "sorted" } else { "random" },
            a.ahead,
        );
    }
}
