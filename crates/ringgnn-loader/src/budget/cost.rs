//! What a plan costs: the expected seconds of reads per epoch (the device's time and the CPU the
//! reads take from training), so that [`super::MemoryPlan::compute`] chooses between plans that
//! fit by what they will cost, not in a fixed order.
//!
//! The model, per epoch of `B` batches of `hops` hops:
//!
//! - **Neighbor file in memory**: nothing. **From disk**, in passes of `H` batches (`H = 1` per
//!   batch; with hyperbatches the size asked for, or for `auto` the jobs the drivers will cut
//!   the epoch into for this share: [`crate::stages::HyperFit::epoch_jobs`], the drivers' own
//!   rule and margins, balanced, a short first with loading drivers), each hop of a pass the
//!   cheaper of its sampled edges
//!   read as random pages and the whole file read sequentially (what
//!   [`ringgnn_io::BlockReader`] chooses per block).
//! - **Feature file in memory**: nothing. **From disk**: per batch, the rows the hot-row cache
//!   misses (its hit rate from the degree curve, [`HitCurve`]: the cache holds the rows of the
//!   highest in-degree) read as random pages; with hyperbatches of `H > 1`, the first pass of an
//!   epoch so, and every later one the cheaper of that and one sequential staging pass over the
//!   file plus the staged rows written and read back ([`stage_rows`], the rule
//!   [`crate::staging`] applies per hyperbatch).
//! - A random request costs `1 / random_iops` of the device plus [`CPU_PER_REQUEST`]; a byte
//!   read sequentially `1 / seq_bytes_per_s` plus [`CPU_PER_BYTE`] (the copy): the CPU part is
//!   what the reads take from training on the same cores.
//! - **Idle sampling threads**: batch by batch, a worker starts a batch only when it is within
//!   the pipeline's window of the consumer, so a window smaller than the threads (samples alone
//!   with fewer batches ahead than threads, or fewer workers than threads) leaves threads idle:
//!   an epoch's sampling, [`CPU_PER_SAMPLED_EDGE`] per sampled edge, runs on `busy` threads
//!   instead of all, costing `B * edges * CPU_PER_SAMPLED_EDGE * (1 / busy - 1 / threads)`.
//!   Hyperbatch drivers use every thread whatever the window: nothing.
//!
//! Every figure is an estimate for choosing, never a bound: the sampled edges and rows of a
//! batch are measured on probe batches when the loader had to probe, else their upper bounds.

use super::{MemoryPlan, Needs};

/// CPU seconds one random read request takes (submission, completion, the copy of its page).
pub const CPU_PER_REQUEST: f64 = 5e-6;
/// CPU seconds per byte read sequentially (copied out of the read buffer).
pub const CPU_PER_BYTE: f64 = 1.0 / 4e9;

/// CPU seconds one sampled edge takes batch by batch (draw, read from memory, dedup, relabel,
/// hand to the consumer): about 30 ns on this project's machines (issue 20's first case, a
/// 200k-node SBM at fanouts 20,15,10: 118 batches of 821k edges in 3.3 s on one thread at a
/// time). For the cost of the threads a small window idles.
pub const CPU_PER_SAMPLED_EDGE: f64 = 3e-8;

const PAGE: f64 = 4096.0;

/// The rule whether a loading driver stages a hyperbatch's cold rows: the staging module's
/// (`stages.rs` applies it per hyperbatch, this model per epoch).
pub use crate::staging::stage_rows;

/// What an epoch does, for the cost of a plan. All zeros (the default) means unknown: each part
/// is then costed at its smallest plausible figure (one pass over a file on disk, the largest
/// batch's rows), so plans still compare.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workload {
    /// Batches of an epoch.
    pub batches: u64,
    pub hops: u64,
    /// Sampled edges and distinct nodes (feature rows) of one batch: measured or bounds.
    pub batch_edges: u64,
    pub batch_rows: u64,
    /// Bytes of one feature row on disk.
    pub row_bytes: u64,
    /// How the loader's drivers size hyperbatches from the share (with `auto`): the plan's
    /// prediction is theirs, the same rule with the same margin.
    pub hyper: crate::stages::HyperFit,
    /// Hit rate of the hot-row cache by rows cached.
    pub hits: HitCurve,
    /// The device: random 4 KiB reads per second, sequential bytes per second (0: the defaults
    /// of [`ringgnn_io::ReadModel`]).
    pub random_iops: u64,
    pub seq_bytes_per_s: u64,
}

/// The share of row accesses a cache of the `n` rows of highest in-degree serves, `n` to hit
/// rate; a node is reached as a sampled neighbor about as often as its degree. Built from the
/// offset index in one pass (degrees bucketed by powers of two), interpolated within a bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HitCurve {
    /// `(rows, accesses)` at each bucket's end, hottest bucket first, cumulative.
    points: Vec<(u64, u64)>,
}

impl HitCurve {
    /// From the in-degrees of the offset index ([`ringgnn_sampler::Offsets::degrees`]).
    pub fn from_degrees(degrees: impl Iterator<Item = u64>) -> Self {
        let mut count = [0u64; 65];
        let mut sum = [0u64; 65];
        for d in degrees {
            // Every node is at least a seed now and then: count it as degree 1.
            let d = d.max(1);
            let b = 64 - d.leading_zeros() as usize;
            count[b] += 1;
            sum[b] += d;
        }
        let mut points = Vec::new();
        let (mut rows, mut acc) = (0u64, 0u64);
        for b in (0..65).rev() {
            if count[b] > 0 {
                rows += count[b];
                acc += sum[b];
                points.push((rows, acc));
            }
        }
        HitCurve { points }
    }

    /// `rows` rows of one degree: a cache's hit rate is its share of the rows (tests of plans
    /// for graphs too large to build an offset index for).
    #[cfg(test)]
    pub(crate) fn even(rows: u64) -> Self {
        HitCurve {
            points: vec![(rows, rows)],
        }
    }

    /// The share of accesses `rows` cached rows serve; `None` when the curve is empty.
    pub fn hit(&self, rows: u64) -> Option<f64> {
        let &(all_rows, total) = self.points.last()?;
        if rows >= all_rows || total == 0 {
            return Some(1.0);
        }
        let (mut r0, mut a0) = (0u64, 0u64);
        for &(r, a) in &self.points {
            if rows <= r {
                let f = (rows - r0) as f64 / (r - r0).max(1) as f64;
                return Some((a0 as f64 + f * (a - a0) as f64) / total as f64);
            }
            (r0, a0) = (r, a);
        }
        Some(1.0)
    }
}

/// The estimate of one plan, seconds per epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    pub neighbors: f64,
    pub features: f64,
    /// Batches per pass over the neighbor file (1: per batch; 0: in memory), and in the
    /// epoch's first pass.
    pub batches_per_pass: u64,
    pub first_pass: u64,
    /// Passes over the neighbor file an epoch makes (its hyperbatches; batches one at a time).
    pub passes: u64,
    /// Hit rate of the hot-row cache (with features on disk).
    pub hit: Option<f64>,
    /// Hyperbatches of an epoch whose rows are staged (every one but the first, or none).
    pub staged_passes: u64,
    /// Seconds the epoch's sampling takes longer because threads idle: a window (batches
    /// ahead) smaller than the threads, or fewer workers than threads, batch by batch.
    pub idle: f64,
    /// Threads that sample at once batch by batch, and the threads asked for (equal: none
    /// idle).
    pub busy: (u64, u64),
}

impl Cost {
    pub fn total(&self) -> f64 {
        self.neighbors + self.features + self.idle
    }

    /// "neighbors 1.2 s (hyperbatches of 14), features 30.1 s (cache hit 37%)", and ", 1 of 2
    /// sampling threads idle 1.6 s" when the window idles threads.
    pub fn describe(&self) -> String {
        let mut s = self.describe_reads();
        if self.idle > 0.0 {
            let (busy, threads) = self.busy;
            s += &format!(
                ", {} of {threads} sampling threads idle {:.1} s",
                threads - busy,
                self.idle
            );
        }
        s
    }

    fn describe_reads(&self) -> String {
        let n = match self.batches_per_pass {
            0 => "in memory".to_string(),
            1 => format!("{:.1} s (batch by batch)", self.neighbors),
            h if self.first_pass > 0 && self.first_pass != h => format!(
                "{:.1} s (hyperbatches of {h} after a first of {}, {} in all)",
                self.neighbors, self.first_pass, self.passes
            ),
            h => format!(
                "{:.1} s (hyperbatches of {h}, {} in all)",
                self.neighbors, self.passes
            ),
        };
        let staged = match self.staged_passes {
            0 => String::new(),
            k => format!(
                "; rows of {k} hyperbatch{} staged: each pass runs while the previous \
                 hyperbatch trains, the first hyperbatch read batch by batch",
                if k == 1 { "" } else { "es" }
            ),
        };
        match self.hit {
            Some(h) => format!(
                "neighbors {n}, features {:.1} s (cache hit {:.0}%{staged})",
                self.features,
                100.0 * h
            ),
            None if self.features > 0.0 => {
                format!("neighbors {n}, features {:.1} s", self.features)
            }
            None => format!("neighbors {n}"),
        }
    }
}

/// Seconds of `requests` random reads of `pages` pages in all, and of `bytes` read sequentially.
struct Device {
    iops: f64,
    seq: f64,
}

impl Device {
    fn of(w: &Workload) -> Self {
        let m = ringgnn_io::ReadModel::default();
        Device {
            iops: if w.random_iops > 0 {
                w.random_iops as f64
            } else {
                m.random_iops
            },
            seq: if w.seq_bytes_per_s > 0 {
                w.seq_bytes_per_s as f64
            } else {
                m.seq_bytes_per_s
            },
        }
    }

    fn random(&self, requests: f64, pages: f64) -> f64 {
        let page = PAGE / self.seq;
        let request = (1.0 / self.iops - page).max(0.0);
        requests * (request + CPU_PER_REQUEST) + pages * (page + PAGE * CPU_PER_BYTE)
    }

    fn sequential(&self, bytes: f64) -> f64 {
        bytes * (1.0 / self.seq + CPU_PER_BYTE)
    }
}

/// The cost of `p` for `needs`.
pub fn estimate(p: &MemoryPlan, needs: &Needs) -> Cost {
    let w = &needs.work;
    let dev = Device::of(w);
    let batches = w.batches.max(1);
    let hops = w.hops.max(1) as f64;
    // The batches of each pass of an epoch, as the loader's epochs make them (`EpochJobs`): a
    // size asked for, unbalanced; sized by the share, as the drivers size them
    // ([`crate::stages::HyperFit::epoch_jobs`]): balanced, and with loading drivers that may
    // stage, a short first pass (`EpochJobs::with_short_first`): it is trained while the
    // second is staged.
    let passes: Vec<usize> = if p.neighbors_in_memory || p.hyperbatch_size == 1 {
        Vec::new()
    } else if p.hyperbatch_size > 0 {
        crate::epoch::job_sizes(batches as usize, p.hyperbatch_size as usize, false, false)
    } else {
        let short = p.with_features && !p.features_in_memory;
        w.hyper.epoch_jobs(p.hyperbatch, batches as usize, short)
    };
    let passes: Vec<u64> = passes.into_iter().map(|n| n as u64).collect();
    // Batches in the epoch's first pass and in the next (the largest of the later ones).
    let (first, h) = match passes.as_slice() {
        [] => (1, 1),
        [one] => (*one, *one),
        [one, two, ..] => (*one, *two),
    };
    let neighbors = if p.neighbors_in_memory {
        0.0
    } else {
        let whole = dev.sequential(needs.neighbor_file as f64);
        let pass = |n: u64| {
            let hop = if w.batch_edges == 0 {
                whole
            } else {
                let edges = (n * w.batch_edges) as f64 / hops;
                dev.random(edges, edges).min(whole)
            };
            hops * hop
        };
        if passes.is_empty() {
            batches as f64 * pass(1)
        } else {
            passes.iter().map(|&n| pass(n)).sum()
        }
    };
    let mut staged_passes = 0;
    let (features, hit) = match &needs.features {
        Some(f) if p.with_features && !p.features_in_memory => {
            let row_bytes = if w.row_bytes > 0 {
                w.row_bytes
            } else {
                f.dim * 4
            };
            let rows = if w.batch_rows > 0 {
                w.batch_rows
            } else {
                f.batch_nodes
            };
            let cached =
                p.cache / (row_bytes + ringgnn_features::cache::INDEX_BYTES_PER_ROW).max(1);
            let hit = w
                .hits
                .hit(cached)
                .unwrap_or_else(|| (p.cache as f64 / f.full_cache.max(1) as f64).min(1.0));
            let cold = rows as f64 * (1.0 - hit);
            let pages = (row_bytes as f64 / PAGE).ceil().max(1.0);
            let per_batch = dev.random(cold, cold * pages);
            // The first pass batch by batch (see `stage_rows`), then each the cheaper way.
            let mut cost = if passes.is_empty() {
                batches as f64 * per_batch
            } else {
                first as f64 * per_batch
            };
            for &n in passes.iter().skip(1) {
                let staged = n as f64 * cold * row_bytes as f64;
                let by_batch = n as f64 * per_batch;
                let pass = dev.sequential(f.file as f64 + 2.0 * staged);
                if stage_rows(false, by_batch, pass) {
                    staged_passes += 1;
                }
                cost += by_batch.min(pass);
            }
            (cost, Some(hit))
        }
        _ => (0.0, None),
    };
    // Batch by batch, `min(window, workers)` threads sample at once; hyperbatch drivers use
    // every thread.
    let threads = needs.threads.max(1);
    let busy = if h == 1 {
        p.window.min(p.workers).clamp(1, threads)
    } else {
        threads
    };
    let idle = if busy < threads {
        let sampling = batches as f64 * w.batch_edges as f64 * CPU_PER_SAMPLED_EDGE;
        sampling * (1.0 / busy as f64 - 1.0 / threads as f64)
    } else {
        0.0
    };
    Cost {
        neighbors,
        features,
        batches_per_pass: if p.neighbors_in_memory { 0 } else { h },
        first_pass: if p.neighbors_in_memory { 0 } else { first },
        passes: if p.neighbors_in_memory {
            0
        } else if passes.is_empty() {
            batches
        } else {
            passes.len() as u64
        },
        hit,
        staged_passes,
        idle,
        busy: (busy, threads),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hit_curve_favours_hubs_and_ends_at_one() {
        // Degrees 100, 1, 1, 1, 1: one row serves 100 of 104 accesses.
        let indptr = [0u64, 100, 101, 102, 103, 104];
        let c = HitCurve::from_degrees(indptr.windows(2).map(|w| w[1] - w[0]));
        assert_eq!(c.hit(0), Some(0.0));
        assert!((c.hit(1).unwrap() - 100.0 / 104.0).abs() < 1e-9);
        assert_eq!(c.hit(5), Some(1.0));
        assert_eq!(c.hit(50), Some(1.0));
        // Within a bucket, in proportion: two of the four degree-1 rows.
        assert!((c.hit(3).unwrap() - 102.0 / 104.0).abs() < 1e-9);
        assert_eq!(HitCurve::default().hit(3), None);
    }

    #[test]
    fn a_window_smaller_than_the_threads_costs_their_idle_time() {
        let needs = Needs {
            threads: 4,
            work: Workload {
                batches: 100,
                hops: 2,
                batch_edges: 1_000_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let plan = |window, workers| MemoryPlan {
            neighbors_in_memory: true,
            hyperbatch_size: 1,
            window,
            workers,
            ..Default::default()
        };
        // An epoch's sampling: 100 batches of 1M edges, 3 s of CPU; on 4 threads 0.75 s.
        let all = 100.0 * 1e6 * CPU_PER_SAMPLED_EDGE;
        for (window, workers, busy) in [(1, 4, 1), (2, 4, 2), (4, 4, 4), (8, 4, 4), (8, 1, 1)] {
            let c = estimate(&plan(window, workers), &needs);
            assert_eq!(c.busy, (busy, 4));
            let want = all / busy as f64 - all / 4.0;
            assert!((c.idle - want).abs() < 1e-9, "{window}/{workers}: {c:?}");
            assert_eq!(c.total(), c.idle);
        }
        assert!(estimate(&plan(1, 4), &needs)
            .describe()
            .contains(", 3 of 4 sampling threads idle "));
        // Hyperbatch drivers use every thread whatever the window.
        let mut hyper = plan(1, 4);
        hyper.neighbors_in_memory = false;
        hyper.hyperbatch_size = 10;
        assert_eq!(estimate(&hyper, &needs).idle, 0.0);
        // An unknown workload costs nothing idle: the plans compare by their reads.
        let unknown = Needs {
            threads: 4,
            ..Default::default()
        };
        assert_eq!(estimate(&plan(1, 4), &unknown).idle, 0.0);
    }

    #[test]
    fn rows_are_staged_from_the_second_hyperbatch_on_when_the_pass_is_cheaper() {
        // The rule: never the first hyperbatch; later ones at par, the cheaper wins.
        assert!(!stage_rows(true, 10.0, 1.0));
        assert!(stage_rows(false, 10.0, 9.9));
        assert!(!stage_rows(false, 10.0, 10.0) && !stage_rows(false, 5.0, 9.0));
        // 12 batches of 100k cold rows (no cache) from a 512 MB feature file: a pass (the file
        // and 4 x 100k rows written and read back) is cheaper than 4 batches of random reads.
        let needs = |file: u64| Needs {
            threads: 2,
            neighbor_file: 1 << 30,
            features: Some(super::super::FeatureNeeds {
                batch_nodes: 100_000,
                dim: 128,
                file,
                full_cache: 100 * file,
                ..Default::default()
            }),
            work: Workload {
                batches: 12,
                hops: 1,
                batch_edges: 100_000,
                batch_rows: 100_000,
                row_bytes: 512,
                hyper: crate::stages::HyperFit {
                    drivers: 2,
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        };
        let plan = |h| MemoryPlan {
            with_features: true,
            hyperbatch_size: h,
            window: 2,
            workers: 2,
            ..Default::default()
        };
        let n = needs(512 << 20);
        let by_batch = estimate(&plan(1), &n).features / 3.0;
        let dev = Device::of(&n.work);
        let pass = dev.sequential((512u64 << 20) as f64 + 2.0 * 4.0 * 100_000.0 * 512.0);
        assert!(pass < by_batch, "{pass} {by_batch}");
        // Three hyperbatches of 4: the first read batch by batch, the other two staged.
        let c = estimate(&plan(4), &n);
        assert_eq!(c.staged_passes, 2);
        assert!((c.features - (by_batch + 2.0 * pass)).abs() < 1e-9, "{c:?}");
        assert!(c.describe().contains(
            "rows of 2 hyperbatches staged: each pass runs while the previous hyperbatch trains"
        ));
        // One hyperbatch for the epoch: nothing to overlap its pass with, nothing staged.
        let c = estimate(&plan(12), &n);
        assert_eq!(c.staged_passes, 0);
        assert!((c.features - 3.0 * by_batch).abs() < 1e-9);
        // A file so large that a pass costs more than the batches' reads: never staged.
        let c = estimate(&plan(4), &needs(64 << 30));
        assert_eq!(c.staged_passes, 0);
        // Sized by the share (auto), loading drivers make the first hyperbatch one batch, so
        // it trains while the second, of the other 11, is staged.
        let mut auto = plan(0);
        auto.hyperbatch = 1 << 40;
        let mut n = needs(512 << 20);
        n.work.hyper.first.batch = 1 << 20;
        let c = estimate(&auto, &n);
        assert_eq!(
            (c.first_pass, c.batches_per_pass, c.passes, c.staged_passes),
            (1, 11, 2, 1)
        );
        let pass11 = dev.sequential((512u64 << 20) as f64 + 2.0 * 11.0 * 100_000.0 * 512.0);
        assert!(
            (c.features - (by_batch / 4.0 + pass11)).abs() < 1e-9,
            "{c:?}"
        );
        assert!(c
            .describe()
            .contains("hyperbatches of 11 after a first of 1, 2 in all"));
    }

    #[test]
    fn random_reads_cost_more_per_page_than_sequential_ones() {
        let d = Device::of(&Workload::default());
        let pages = 1000.0;
        // 92k random pages/s against 1.1 GB/s: about 3x per page on the device alone.
        assert!(d.random(pages, pages) > 3.0 * d.sequential(pages * PAGE));
        assert!(d.random(pages, pages) < 5.0 * d.sequential(pages * PAGE));
    }
}
