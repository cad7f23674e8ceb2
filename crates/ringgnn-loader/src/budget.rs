//! The one owner of the memory budget: every in-memory decision of ringgnn's sampling and
//! loading (the neighbor file, the feature file, the hot-row cache, the read buffers and
//! workspaces, the batches ahead of the consumer) is made here, once, from one set of upper
//! bounds ([`Needs`]) and the caller's choices ([`Asked`]). The sampler and the feature reader
//! are then opened with what the plan decided; nothing below second-guesses it.
//!
//! The caller gives one figure (`--memory`, the whole process) and the memory it needs for
//! itself (`reserve`: the Python runtime, PyTorch, the model's activations). Every part is sized
//! from an upper bound (or a probe's measure with its margin), never from a guess:
//!
//! 1. **Fixed**: a slack of 1/32 of the budget (never handed out), the reserve, the offset index,
//!    per worker thread the sampler's workspaces and sample (and its 8 MiB read buffer when the
//!    neighbor file is read from disk), the sampled batches that may wait in the pipeline's
//!    window, and with features the labels (2 bytes per node up to 32767 classes), each worker's
//!    gather workspace (its read buffer and 48 bytes per node of the largest batch) and the batch
//!    buffers: `prefetch + hold` feature matrices of the largest batch with their labels and
//!    sample arrays (`prefetch` gathered ahead, `hold` held by the consumer: 2 for a plain `for`
//!    loop, which keeps the previous batch while fetching the next; 1 for a loop that releases
//!    it first).
//! 2. **The neighbor file in memory**: always for backend `memory` (an error if it does not fit);
//!    for `auto`, in memory or on disk, as the plans' costs decide.
//! 3. **The whole feature file in memory**: always for `memory`; for `auto` when it fits what is
//!    left and costs less; then no cache is needed.
//! 4. **The hot-row cache** gets the rest, up to `cache` if the caller set one (and never more
//!    than caching every row costs); with hyperbatches and no `cache` set, it and the hyperbatch
//!    share split the rest as the costs decide.
//! 5. **Hot neighbor pages** ([`ringgnn_io::PageCache`]), only when the neighbor file is read
//!    from disk one batch at a time: `neighbor_cache` bytes if the caller set them (taken before
//!    the hot-row cache), never more than the file (plus bookkeeping). `None` shares: it gets what
//!    is left, split evenly with the hot-row cache when both are wanted and neither was sized.
//!    Training asks for `Some(0)` (its reads are shared by hyperbatches instead); the serving
//!    engine, whose single-node requests reread hub lists all the time, for `None`.
//!
//! Of every plan that fits (each placement allowed, the default batches ahead or one, the cache
//! splits), [`MemoryPlan::compute`] keeps the one of least expected read time per epoch
//! ([`cost`]): so `auto` opens whenever any explicit backend opens, and no plan's total ever
//! exceeds the budget (both are tested). If nothing fits, the error lists every part and what to
//! change. The page cache is not in the plan: with `O_DIRECT` the kernel caches nothing; with
//! buffered reads its cache is reclaimable, and `memcap` (which counts it) shows in
//! `docs/benchmarks.md` ("Measurements behind design choices") that runs stay within their cap.

use std::fmt;
use std::num::NonZeroUsize;

use crate::options::{BackendChoice, Hyperbatch};

pub use cost::{Cost, HitCurve, Workload};

/// Share of the budget kept free for what no bound covers: the allocator's fragmentation and
/// the kernel's file pages (shared libraries, metadata) that a cgroup limit also counts.
pub const SLACK: (u64, u64) = (1, 32);

/// Share of the available memory the default budget lets the process grow by: the other half
/// is left to the rest of the machine.
pub const DEFAULT_SHARE: (u64, u64) = (1, 2);

/// Share of the room under a memory cgroup the default budget lets the process grow by: a
/// container's or `memcap`'s limit is set for the job it runs, so the default takes most of it,
/// keeping an eighth for what else runs in it (a shell, a second process) and page cache, and
/// at least [`KERNEL_FLOOR`].
pub const CGROUP_SHARE: (u64, u64) = (7, 8);

/// Bytes of a memory cgroup's room the default budget always leaves free: what the cgroup
/// charges besides the process's own allocations, which no plan part covers. The page cache
/// that buffered reads fill (io_uring's buffered reads and `pread` bring every page they read,
/// and the device's readahead, into the cache, charged to the reader's cgroup, and these pages
/// must be there at once while reclaim works: per reading thread its 8 MiB read buffer and up
/// to 8 MiB of readahead on this machine's disk), io_uring's rings and kernel workers, page
/// tables, and the library code the process keeps touching (16 MiB without PyTorch, measured
/// for `_options.CODE_BYTES_NO_TORCH`). Measured (issue 34): under a 200 MiB v1 cgroup,
/// `sample` of R-MAT 21 from disk (2 threads, buffered io_uring, a cold file) with the 7/8
/// share alone planned 178.5 MiB, ran at 178 MiB anonymous + 20 MiB of page cache and was
/// OOM-killed after 1.5 to 2.5 minutes, 3 runs of 3; with 30, 40 or 50 MiB left (`--memory`
/// 170M, 160M, 150M) it was not, nor with this floor (151.7 MiB planned).
pub const KERNEL_FLOOR: u64 = 48 << 20;

/// Bytes of a gather worker's scratch per node of the largest batch: the sorted `(id,
/// position)` pairs (16), the missing ids and their positions (16) and repeated ids (16).
pub const GATHER_SCRATCH_PER_NODE: u64 = 48;

/// Bytes per batch of a hyperbatch that staging adds: a write buffer
/// (`ringgnn_features::staging::WRITE_BUFFER`, 256 KiB) and its cold row ids (8 bytes per
/// node, counted by the caller). Staging also takes its read buffers ([`STAGING_BUFFERS`]):
/// all from the hyperbatch share.
pub const STAGING_PER_BATCH: u64 = 256 << 10;

/// Bytes of a loading driver's staging read buffers, reserved from its part of the hyperbatch
/// share: a chunk of the feature file (`staging::PASS_CHUNK`) and a read wave of the staging
/// file (`ringgnn_features::staging::READ_WAVE`).
pub const STAGING_BUFFERS: u64 = 16 << 20;

/// The margin on sample sizes measured on probe batches ([`Needs::measured`]) for the parts
/// of batch-by-batch sampling (each worker's batch state, the samples in the window and with
/// the consumer): as much as hyperbatch drivers put on what they measure
/// ([`crate::stages::HyperFit::margin`]). Batches of one size differ little (the probe's seeds
/// are random, as an epoch's are); the margin of 2 it replaced held a 200k-node SBM at
/// fanouts 20,15,10 at one batch ahead where one per thread fits, leaving a sampling thread idle.
pub const MEASURED_MARGIN: (u64, u64) = (3, 2);

/// The margin on measured sample sizes for the per-batch parts of a hyperbatch plan (the
/// calling thread's sampler, the consumer's samples): 2, as on the probe's sizes of the
/// hyperbatches' first jobs ([`crate::stages::HyperFit::margin`]); 1.5 brought the tight-cap
/// case (R-MAT 21 under 160M) to 159.8 of its 160 MiB (docs/benchmarks.md, "Measurements
/// behind design choices"). The share gets what is left, and its own
/// sizing (`HyperFit`, the plan's prediction and the drivers alike) has its own margins.
pub const MEASURED_MARGIN_HYPER: (u64, u64) = (2, 1);

/// The largest batch a plan is made for when the caller gives none (sampling with
/// `NeighborSampler`): the paper's and PyG's usual 1024. A larger batch later is accepted when
/// the plan, redone for it, still fits ([`MemoryPlan::refit`]).
pub const DEFAULT_PLAN_BATCH: usize = 1024;

/// Batches of `per_batch` bytes each (a batch's measured or bounded state with its margin) that
/// fit in `room` bytes beside `fixed` (0 where `fixed` alone exceeds it): the one rule by which
/// hyperbatch sizes follow from a share, for homogeneous drivers
/// ([`crate::stages::HyperFit`]) and typed loaders ([`typed::choose`]) alike.
pub fn batches_fitting(room: u64, fixed: u64, per_batch: f64) -> usize {
    (room.saturating_sub(fixed) as f64 / per_batch.max(1.0)) as usize
}

/// What the caller asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    /// The whole budget, in bytes.
    pub budget: u64,
    /// Bytes the caller needs besides the loader, taken off first.
    pub reserve: u64,
    /// How neighbor lists are read.
    pub neighbors: BackendChoice,
    /// How feature rows are read (ignored without features).
    pub features: BackendChoice,
    /// Hot-row cache size; `None`: whatever is left.
    pub cache: Option<u64>,
    /// Batches the workers may hold ahead of the consumer; `None`: one per thread with
    /// features (1 if that crowds the cache), two per thread for samples alone (one per
    /// thread, or 1, where that is what fits or costs less: a window smaller than the threads
    /// idles some of them, a cost, see [`cost`]).
    pub prefetch: Option<NonZeroUsize>,
    /// Batches the consumer holds while it asks for the next one.
    pub hold: NonZeroUsize,
    /// Batches sampled together when the neighbor file is read from disk.
    pub hyperbatch: Hyperbatch,
    /// Bytes of hot neighbor-file pages; `None`: a share of what is left (see the module docs).
    pub neighbor_cache: Option<u64>,
}

/// Upper bounds on what each part costs, from the dataset and the largest batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    pub threads: u64,
    /// The offset index in memory ([`ringgnn_sampler::Offsets::bytes`]: 4 bytes per node where
    /// it can be).
    pub offset_index: u64,
    /// The neighbor file's entries.
    pub neighbor_file: u64,
    /// The coalescing read buffer of one disk reader (sampler or gatherer).
    pub read_buffer: u64,
    /// Seeds of the largest batch.
    pub batch_seeds: u64,
    /// One sampler's workspaces while it builds the largest sample (output excluded).
    pub sampler_workspace: u64,
    /// Bytes of the largest sample.
    pub sample_bytes: u64,
    /// With features: what gathering needs.
    pub features: Option<FeatureNeeds>,
    /// The sample sizes are the largest of probe batches (the plan puts its margin on them:
    /// [`MEASURED_MARGIN`], [`MEASURED_MARGIN_HYPER`]), measured because their upper bounds do
    /// not fit the budget, or left a cheaper plan out (see [`crate::BatchLoader::open`]).
    pub measured: bool,
    /// What an epoch does, for choosing between plans by their cost ([`cost`]).
    pub work: Workload,
}

/// The feature side of [`Needs`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureNeeds {
    /// Labels held in memory.
    pub labels: u64,
    /// Nodes of the largest batch, values per row.
    pub batch_nodes: u64,
    pub dim: u64,
    /// The feature file's payload, and what caching every row would cost.
    pub file: u64,
    pub full_cache: u64,
}

/// Where a file's bytes are read from, as the plan decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Memory,
    Disk,
}

/// Whether plans with the neighbor file at `place` split what is left between the hot-row
/// cache and the hyperbatch share by cost: hyperbatches, features on disk possible, and no
/// cache size asked (an asked size is served first).
fn shares_apply(asked: &Asked, needs: &Needs, place: Placement) -> bool {
    place == Placement::Disk
        && asked.hyperbatch != Hyperbatch::PER_BATCH
        && needs.features.is_some()
        && asked.cache.is_none()
        && asked.features != BackendChoice::Memory
}

/// How the budget is split; every field is bytes unless named otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryPlan {
    pub budget: u64,
    /// `budget * SLACK`: never handed out.
    pub slack: u64,
    pub reserve: u64,
    /// Offset index, per-thread sampler workspaces and read buffers, sampled batches waiting.
    pub sampler: u64,
    pub neighbor_file: u64,
    pub labels: u64,
    pub gather: u64,
    pub buffers: u64,
    pub features: u64,
    pub cache: u64,
    /// Hot pages of the neighbor file (0 unless it is read from disk).
    pub neighbor_cache: u64,
    /// Batches the workers may hold ahead of the consumer (gathered ones with features).
    pub prefetch: u64,
    /// Sampled batches the pipeline's window holds at most (`prefetch`, plus one per thread
    /// with features: a worker samples its next batch while waiting for its turn to gather).
    pub window: u64,
    pub hold: u64,
    pub neighbors_in_memory: bool,
    pub features_in_memory: bool,
    pub with_features: bool,
    /// The sampler's share comes from batches measured on a probe, not from upper bounds.
    pub measured: bool,
    /// The state of the batches of a hyperbatch in flight (and of the previous one's samples
    /// still with the consumer): 0 in per-batch mode.
    pub hyperbatch: u64,
    /// Batches per hyperbatch: 1 in per-batch mode (also whenever the neighbor file is in
    /// memory: there are no reads to share), the size asked for, or 0 for `auto` (the largest
    /// that `hyperbatch` holds, measured as batches are sampled).
    pub hyperbatch_size: u64,
    /// Why the cache is smaller than asked, or why fewer workers sample than threads were
    /// asked for, for one log line.
    pub note: Option<String>,
    /// Threads that sample (and gather) batch by batch: the threads asked for, or fewer when
    /// each one's batch state does not fit (then 1; see [`MemoryPlan::compute`]).
    pub workers: u64,
    /// Expected seconds of reads per epoch ([`cost::estimate`]), in milliseconds.
    pub cost_ms: u64,
    /// Why this plan was chosen: its cost and what the alternatives would have cost.
    pub why: String,
    /// A cheaper placement did not fit by upper bounds: the caller may measure batches on a
    /// probe and plan again (see [`crate::BatchLoader::open`]).
    pub bounded_out: bool,
}

impl MemoryPlan {
    /// Everything the plan accounts for.
    pub fn total(&self) -> u64 {
        self.slack
            + self.reserve
            + self.sampler
            + self.neighbor_file
            + self.labels
            + self.gather
            + self.buffers
            + self.features
            + self.cache
            + self.neighbor_cache
            + self.hyperbatch
    }

    /// Split `asked.budget` for `needs`: of every plan that fits (the neighbor file and the
    /// feature file in memory or on disk, as `asked` allows; the default batches ahead or one;
    /// with hyperbatches and no cache size asked, the hot-row cache against the hyperbatch
    /// share), the one of least expected read time per epoch ([`cost::estimate`]); on equal
    /// cost, files in memory first, then the plan that puts more of the budget to use. When no
    /// plan fits batch by batch with one worker per thread, fewer workers sample (each holds a
    /// batch's state), down to one. The error names every part, and says when hyperbatches
    /// would fit where batch-by-batch sampling does not.
    pub fn compute(asked: &Asked, needs: &Needs) -> Result<Self, String> {
        let placements: &[Placement] = match asked.neighbors {
            BackendChoice::Auto => &[Placement::Memory, Placement::Disk],
            BackendChoice::Memory => &[Placement::Memory],
            BackendChoice::Uring | BackendChoice::Pread => &[Placement::Disk],
        };
        let threads = needs.threads.max(1);
        let default_ahead = if needs.features.is_some() {
            threads
        } else {
            2 * threads
        };
        // The default batches ahead, one per thread (samples alone: the window is what keeps
        // the threads busy, see [`cost`]) and one, each weighed by its cost.
        let aheads: Vec<u64> = match asked.prefetch {
            Some(p) => vec![p.get() as u64],
            None => {
                let mut a = vec![default_ahead, threads, 1];
                a.dedup();
                a
            }
        };
        // With hyperbatches, features on disk and no cache size asked: the cache's share of
        // what is left, each weighed by its cost (the first is the old even split).
        const SHARES: [(u64, u64); 10] = [
            (1, 2),
            (0, 1),
            (1, 16),
            (1, 8),
            (1, 4),
            (3, 8),
            (5, 8),
            (3, 4),
            (7, 8),
            (1, 1),
        ];
        let mut fits: Vec<(MemoryPlan, cost::Cost)> = Vec::new();
        let mut err = String::new();
        let mut refused_memory = false;
        for workers in [threads, 1] {
            for &place in placements {
                for &ahead in &aheads {
                    for &share in &SHARES {
                        match Self::with_prefetch(asked, needs, place, ahead, share, workers) {
                            Ok(p) => {
                                let c = cost::estimate(&p, needs);
                                fits.push((p, c));
                            }
                            Err(e) => {
                                refused_memory |= place == Placement::Memory;
                                if err.is_empty() || place == Placement::Disk {
                                    err = e;
                                }
                            }
                        }
                        if !shares_apply(asked, needs, place) {
                            break;
                        }
                    }
                }
            }
            // Fewer workers only for batch-by-batch plans that fit no other way.
            if !fits.is_empty() || threads == 1 {
                break;
            }
        }
        let rank =
            |p: &MemoryPlan| (!p.neighbors_in_memory as u8) * 2 + (!p.features_in_memory as u8);
        let Some(best) = fits
            .iter()
            .enumerate()
            .min_by(|(i, (p, c)), (j, (q, d))| {
                c.total()
                    .partial_cmp(&d.total())
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(rank(p).cmp(&rank(q)))
                    .then(q.total().cmp(&p.total()))
                    .then(i.cmp(j))
            })
            .map(|(i, _)| i)
        else {
            return Err(Self::refusal(asked, needs, err));
        };
        let (mut plan, c) = fits[best].clone();
        plan.cost_ms = (c.total() * 1000.0).round() as u64;
        plan.bounded_out = !needs.measured && refused_memory && !plan.neighbors_in_memory;
        plan.why = Self::explain(&plan, &c, &fits);
        if plan.workers < threads {
            let why = format!(
                "{} worker sampling batch by batch instead of the {threads} threads asked: each \
                 holds a whole batch's state and {threads} do not fit memory={} (raise memory, \
                 or use hyperbatches, which hold one)",
                plan.workers,
                bytes(asked.budget)
            );
            plan.note = Some(match plan.note.take() {
                Some(n) => format!("{n}; {why}"),
                None => why,
            });
        }
        Ok(plan)
    }

    /// The least budget with which [`Self::compute`] finds a plan for `needs`, `asked`'s other
    /// choices kept: the smallest fixed part over the placements it allows, with one worker and
    /// one batch ahead (or the batches ahead asked), the feature file where `asked` keeps it in
    /// memory, and the slack on top.
    pub fn least(asked: &Asked, needs: &Needs) -> u64 {
        let placements: &[Placement] = match asked.neighbors {
            BackendChoice::Auto => &[Placement::Memory, Placement::Disk],
            BackendChoice::Memory => &[Placement::Memory],
            BackendChoice::Uring | BackendChoice::Pread => &[Placement::Disk],
        };
        let ahead = asked.prefetch.map_or(1, |p| p.get() as u64);
        let bare = Asked {
            budget: 0,
            ..asked.clone()
        };
        let file = match (&needs.features, asked.features) {
            (Some(f), BackendChoice::Memory) => f.file,
            _ => 0,
        };
        let fixed = placements
            .iter()
            .map(|&place| Self::fixed(&bare, needs, place, ahead, 1).total())
            .min()
            .unwrap_or(0)
            .saturating_add(file);
        if fixed >= u64::MAX / 2 {
            return u64::MAX;
        }
        // The least b with b - b * SLACK >= fixed.
        let mut b = fixed.saturating_mul(SLACK.1) / (SLACK.1 - SLACK.0);
        while b > 0 && (b - 1) - (b - 1) / SLACK.1 * SLACK.0 >= fixed {
            b -= 1;
        }
        while b - b / SLACK.1 * SLACK.0 < fixed {
            b += 1;
        }
        b
    }

    /// The error when nothing fits: `err` (the last refusal), and whether hyperbatches would
    /// fit where batch-by-batch sampling from disk does not.
    fn refusal(asked: &Asked, needs: &Needs, err: String) -> String {
        let per_batch_disk = asked.hyperbatch == Hyperbatch::PER_BATCH
            && !matches!(asked.neighbors, BackendChoice::Memory);
        if per_batch_disk {
            let hyper = Asked {
                hyperbatch: Hyperbatch::Auto,
                ..asked.clone()
            };
            if Self::compute(&hyper, needs).is_ok() {
                return format!(
                    "{err}. Hyperbatches fit this budget: batch by batch, each sampling thread \
                     holds a whole batch's state, while a hyperbatch holds one for all threads; \
                     use hyperbatch auto (--hyperbatch auto)"
                );
            }
        }
        err
    }

    /// "chosen for ...: ...; instead ... would cost ..." for [`MemoryPlan::why`]: the chosen
    /// plan's estimate and the cheapest plan of each other placement, and with a cache split
    /// against the hyperbatch share, the best and worst splits.
    fn explain(plan: &MemoryPlan, c: &cost::Cost, fits: &[(MemoryPlan, cost::Cost)]) -> String {
        let place = |p: &MemoryPlan| {
            format!(
                "neighbor file {}{}",
                if p.neighbors_in_memory {
                    "in memory"
                } else {
                    "on disk"
                },
                if !p.with_features {
                    ""
                } else if p.features_in_memory {
                    ", feature file in memory"
                } else {
                    ", feature file on disk"
                }
            )
        };
        let costed = format!(
            "expected cost per epoch {:.1} s (reads, idle sampling threads): {}",
            c.total(),
            c.describe()
        );
        let mut s = costed.clone();
        let mut others: Vec<(String, f64)> = Vec::new();
        for (p, d) in fits {
            let k = place(p);
            if k == place(plan) {
                continue;
            }
            match others.iter_mut().find(|(o, _)| *o == k) {
                Some((_, t)) if *t <= d.total() => {}
                Some((_, t)) => *t = d.total(),
                None => others.push((k, d.total())),
            }
        }
        for (k, t) in others {
            s += &format!("; {k} would cost {t:.1} s");
        }
        // The same placement with other batches ahead: the cheapest of each.
        let mut aheads: Vec<(u64, &cost::Cost)> = Vec::new();
        for (p, d) in fits {
            if place(p) != place(plan) || p.prefetch == plan.prefetch {
                continue;
            }
            match aheads.iter_mut().find(|(a, _)| *a == p.prefetch) {
                Some((_, e)) if e.total() <= d.total() => {}
                Some((_, e)) => *e = d,
                None => aheads.push((p.prefetch, d)),
            }
        }
        for (a, d) in aheads {
            s += &format!(
                "; {a} batch{} ahead would cost {:.1} s",
                if a == 1 { "" } else { "es" },
                d.total()
            );
            if d.idle > 0.0 {
                let (busy, threads) = d.busy;
                s += &format!(" ({} of {threads} sampling threads idle)", threads - busy);
            }
        }
        let splits: Vec<&(MemoryPlan, cost::Cost)> = fits
            .iter()
            .filter(|(p, _)| {
                place(p) == place(plan)
                    && p.prefetch == plan.prefetch
                    && p.hyperbatch > 0
                    && p.cache > 0
            })
            .collect();
        if plan.hyperbatch > 0 && plan.with_features && !plan.features_in_memory && splits.len() > 1
        {
            let most_cache = splits.iter().max_by_key(|(p, _)| p.cache).map(|x| &x.1);
            let least_cache = splits.iter().min_by_key(|(p, _)| p.cache).map(|x| &x.1);
            if let (Some(a), Some(b)) = (most_cache, least_cache) {
                s += &format!(
                    "; the largest cache would cost {:.1} s ({}), the smallest {:.1} s ({})",
                    a.total(),
                    a.describe(),
                    b.total(),
                    b.describe()
                );
            }
        }
        if s == costed {
            // Nothing else fits these options: a cost chose nothing (and an epoch may mean
            // nothing to the caller, a sampler asked batch by batch).
            return format!(
                "elimination: the only plan these options allow within the budget ({}, {} \
                 batch{} ahead)",
                place(plan),
                plan.prefetch,
                if plan.prefetch == 1 { "" } else { "es" }
            );
        }
        s
    }

    /// The plan with the neighbor file placed as `neighbors`, `ahead` batches ahead, `workers`
    /// threads sampling batch by batch, and with hyperbatches, features on disk and no cache
    /// size asked, `share` of what is left for the cache (the hyperbatch share gets the rest).
    fn with_prefetch(
        asked: &Asked,
        needs: &Needs,
        neighbors: Placement,
        ahead: u64,
        share: (u64, u64),
        workers: u64,
    ) -> Result<Self, String> {
        let mut p = Self::fixed(asked, needs, neighbors, ahead, workers);
        let fixed = p.total();
        if fixed > asked.budget {
            let what = if neighbors == Placement::Memory {
                "the neighbor file in memory"
            } else {
                "the neighbor file read from disk"
            };
            return Err(format!(
                "memory={} is too small with {what}: it needs at least {} ({}); raise memory, \
                 or lower batch_size, fanouts, threads or prefetch",
                bytes(asked.budget),
                bytes(fixed),
                p.parts()
            ));
        }
        let left = asked.budget - fixed;
        let hyper = neighbors == Placement::Disk && asked.hyperbatch != Hyperbatch::PER_BATCH;
        p.hyperbatch_size = match (hyper, asked.hyperbatch) {
            (false, _) => 1,
            (true, Hyperbatch::Auto) => 0,
            (true, Hyperbatch::Size(n)) => n.get() as u64,
        };
        // Hot neighbor pages: only for per-batch disk reads; never more than the whole file.
        let pages_want = if neighbors == Placement::Disk && !hyper {
            let file = needs.neighbor_file.div_ceil(ringgnn_io::ALIGN as u64)
                * ringgnn_io::PageCache::BYTES_PER_PAGE;
            asked.neighbor_cache.unwrap_or(u64::MAX).min(file)
        } else {
            0
        };
        let Some(f) = &needs.features else {
            // Samples alone: the hot pages, then the hyperbatch state, get what is left.
            p.neighbor_cache = pages_want.min(left);
            if hyper {
                p.hyperbatch = left;
            }
            return Ok(p);
        };
        let load = match asked.features {
            BackendChoice::Memory if f.file > left => {
                return Err(format!(
                    "memory={}: the feature file ({}) does not fit next to the loader's other \
                     parts ({}); raise memory or read features from disk (backend auto, uring \
                     or pread)",
                    bytes(asked.budget),
                    bytes(f.file),
                    p.parts()
                ))
            }
            BackendChoice::Memory => true,
            BackendChoice::Auto => f.file <= left,
            BackendChoice::Uring | BackendChoice::Pread => false,
        };
        if load {
            p.features = f.file;
            p.features_in_memory = true;
            p.neighbor_cache = pages_want.min(left - f.file);
            if hyper {
                p.hyperbatch = left - f.file;
            }
            return Ok(p);
        }
        let want = asked.cache.unwrap_or(u64::MAX).min(f.full_cache);
        // Hot pages asked for by size come first; shared ones split what is left evenly with
        // a hot-row cache not sized either, and otherwise get what it leaves.
        let pages_first = match asked.neighbor_cache {
            Some(_) => pages_want.min(left),
            None if asked.cache.is_none() && pages_want > 0 => pages_want.min(left / 2),
            None => 0,
        };
        let left_rows = left - pages_first;
        // With hyperbatches and no cache size asked for, the cache and the hyperbatch state
        // share what is left; a cache asked for is served first.
        let room = if hyper && asked.cache.is_none() {
            left_rows / share.1 * share.0 + left_rows % share.1 * share.0 / share.1
        } else {
            left_rows
        };
        p.cache = want.min(room);
        p.neighbor_cache = match asked.neighbor_cache {
            None => pages_want.min(left - p.cache),
            Some(_) => pages_first,
        };
        if hyper {
            p.hyperbatch = left - p.cache;
        }
        if p.cache < want && asked.cache.is_some() {
            p.note = Some(format!(
                "the hot-row cache gets {} of the {} asked: that is what memory={} leaves after {}",
                bytes(p.cache),
                bytes(want),
                bytes(asked.budget),
                p.parts()
            ));
        }
        Ok(p)
    }

    /// Every part but the feature file and the cache.
    fn fixed(asked: &Asked, needs: &Needs, neighbors: Placement, ahead: u64, workers: u64) -> Self {
        let threads = needs.threads.max(1);
        let hold = asked.hold.get() as u64;
        let disk = neighbors == Placement::Disk;
        // With hyperbatches, one worker drives the epoch: its batch states are the hyperbatch
        // share (below), and its threads keep only a read buffer each; one per-batch sampler
        // remains for samples taken on the calling thread.
        let hyper = disk && asked.hyperbatch != Hyperbatch::PER_BATCH;
        // Measured sizes with their margin; upper bounds as they are.
        let (m0, m1) = match (needs.measured, hyper) {
            (false, _) => (1, 1),
            (true, false) => MEASURED_MARGIN,
            (true, true) => MEASURED_MARGIN_HYPER,
        };
        let margin = |x: u64| x.saturating_mul(m0) / m1;
        let sample_bytes = margin(needs.sample_bytes);
        let state = margin(needs.sampler_workspace).saturating_add(sample_bytes);
        let buffer = if disk { needs.read_buffer } else { 0 };
        let per_thread = if hyper {
            buffer
        } else {
            state.saturating_add(buffer)
        };
        let queued = sample_bytes.saturating_add(needs.batch_seeds.saturating_mul(8));
        let mut p = MemoryPlan {
            budget: asked.budget,
            slack: asked.budget / SLACK.1 * SLACK.0,
            reserve: asked.reserve,
            prefetch: ahead,
            hold,
            neighbors_in_memory: !disk,
            neighbor_file: if disk { 0 } else { needs.neighbor_file },
            with_features: needs.features.is_some(),
            measured: needs.measured,
            ..Default::default()
        };
        // Batch by batch, `workers` threads sample, each with a batch's state; with
        // hyperbatches every thread reads for the one driver, and one worker gathers.
        let workers = workers.clamp(1, threads);
        p.workers = if hyper { threads } else { workers };
        let base = needs
            .offset_index
            .saturating_add(per_thread.saturating_mul(if hyper { threads } else { workers }))
            .saturating_add(if hyper { state } else { 0 });
        let workers = if hyper { 1 } else { workers };
        match &needs.features {
            None => {
                p.window = ahead;
                // Samples in the window (with hyperbatches: the hyperbatch share) and those the
                // consumer holds.
                let waiting = if hyper { hold } else { ahead + hold };
                p.sampler = base.saturating_add(queued.saturating_mul(waiting));
            }
            Some(f) => {
                p.window = ahead + workers;
                let waiting = if hyper { hold } else { p.window };
                p.sampler = base.saturating_add(queued.saturating_mul(waiting));
                p.labels = f.labels;
                p.gather = workers.saturating_mul(
                    needs
                        .read_buffer
                        .saturating_add(f.batch_nodes.saturating_mul(GATHER_SCRATCH_PER_NODE)),
                );
                let slot = f
                    .batch_nodes
                    .saturating_mul(f.dim)
                    .saturating_mul(4)
                    .saturating_add(f.batch_nodes.saturating_mul(8))
                    .saturating_add(sample_bytes.saturating_mul(2));
                p.buffers = (ahead + hold).saturating_mul(slot);
            }
        }
        p
    }

    /// This plan redone for larger batches (`needs`), everything already placed kept where it
    /// is (the neighbor file, the feature file, the cache); an error if it no longer fits.
    pub fn refit(&self, needs: &Needs) -> Result<Self, String> {
        let asked = Asked {
            budget: self.budget,
            reserve: self.reserve,
            neighbors: BackendChoice::Auto,
            features: BackendChoice::Auto,
            cache: Some(self.cache),
            prefetch: NonZeroUsize::new(self.prefetch as usize),
            hold: NonZeroUsize::new(self.hold as usize).unwrap_or(NonZeroUsize::MIN),
            hyperbatch: Hyperbatch::PER_BATCH,
            neighbor_cache: Some(self.neighbor_cache),
        };
        let placement = if self.neighbors_in_memory {
            Placement::Memory
        } else {
            Placement::Disk
        };
        let mut p = Self::fixed(&asked, needs, placement, self.prefetch, self.workers);
        p.features = self.features;
        p.features_in_memory = self.features_in_memory;
        p.cache = self.cache;
        p.neighbor_cache = self.neighbor_cache;
        p.hyperbatch_size = self.hyperbatch_size;
        p.cost_ms = self.cost_ms;
        p.why = self.why.clone();
        p.note = self.note.clone();
        // The hyperbatch state is sized as batches are sampled: it takes what is left.
        if self.hyperbatch > 0 {
            p.hyperbatch = self.budget.saturating_sub(p.total());
        }
        if p.total() > self.budget {
            return Err(format!(
                "memory={} is too small for batches this large: they need {} ({}); raise \
                 memory, or open with the largest batch size you will use so that the cache is \
                 sized for it",
                bytes(self.budget),
                bytes(p.total()),
                p.parts()
            ));
        }
        Ok(p)
    }

    /// "slack 1.0 MiB, caller's reserve ..., ..." for messages.
    pub fn parts(&self) -> String {
        let mut s = format!(
            "slack {}, caller's reserve {}, sampler {}{}",
            bytes(self.slack),
            bytes(self.reserve),
            bytes(self.sampler),
            if self.measured {
                " (batch sizes measured)"
            } else {
                ""
            }
        );
        if self.with_features {
            s += &format!(
                ", labels {}, gather workspaces {}, batch buffers {} ({} ahead)",
                bytes(self.labels),
                bytes(self.gather),
                bytes(self.buffers),
                self.prefetch
            );
        } else {
            s += &format!(" ({} batches ahead)", self.prefetch);
        }
        if self.neighbors_in_memory {
            s += &format!(", neighbor file {}", bytes(self.neighbor_file));
        }
        if self.features_in_memory {
            s += &format!(", feature file {}", bytes(self.features));
        }
        if self.cache > 0 {
            s += &format!(", hot-row cache {}", bytes(self.cache));
        }
        if self.neighbor_cache > 0 {
            s += &format!(", hot neighbor pages {}", bytes(self.neighbor_cache));
        }
        if self.hyperbatch > 0 {
            let h = match self.hyperbatch_size {
                0 => "auto".to_string(),
                n => n.to_string(),
            };
            s += &format!(
                ", hyperbatch state {} ({h} batches)",
                bytes(self.hyperbatch)
            );
        }
        s
    }
}

impl fmt::Display for MemoryPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "budget {}: {}", bytes(self.budget), self.parts())?;
        if !self.why.is_empty() {
            write!(f, "; chosen by {}", self.why)?;
        }
        Ok(())
    }
}

/// The default budget: what a process may grow by when the caller gives no budget, and the
/// memory cgroup that bounds it, if one does (for the refusal's message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DefaultBudget {
    /// Bytes the process may grow by.
    pub growth: u64,
    /// The room of the memory cgroup that bounds `growth` (`None`: the machine's available
    /// memory does).
    pub cgroup: Option<Room>,
}

/// The default budget: the smaller of [`DEFAULT_SHARE`] of the machine's available memory and
/// [`CGROUP_SHARE`] of the room under every memory cgroup above this process (v1 or v2,
/// `memory.high` too: see `budget/cgroup.rs`), never the room's last [`KERNEL_FLOOR`]; `None`
/// when neither can be read. Every command's default comes from here (the loader's,
/// the server's, and through `_core.default_budget` the Python plans').
pub fn default_budget() -> Option<DefaultBudget> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let host = meminfo.as_deref().and_then(mem_available);
    default_from(host, cgroup::cgroup_room())
}

/// [`default_budget`] from the machine's available memory and a cgroup's room.
pub(crate) fn default_from(host: Option<u64>, cgroup: Option<Room>) -> Option<DefaultBudget> {
    let h = host.map(|a| a / DEFAULT_SHARE.1 * DEFAULT_SHARE.0);
    let c = cgroup.map(|r| cgroup_growth(r.left));
    match (h, c) {
        (Some(h), Some(c)) if h < c => Some(DefaultBudget {
            growth: h,
            cgroup: None,
        }),
        (_, Some(c)) => Some(DefaultBudget { growth: c, cgroup }),
        (h, None) => h.map(|growth| DefaultBudget {
            growth,
            cgroup: None,
        }),
    }
}

/// What the default lets a process grow by under a cgroup with `left` bytes of room:
/// [`CGROUP_SHARE`] of it, and never into the last [`KERNEL_FLOOR`].
fn cgroup_growth(left: u64) -> u64 {
    (left / CGROUP_SHARE.1 * CGROUP_SHARE.0).min(left.saturating_sub(KERNEL_FLOOR))
}

impl DefaultBudget {
    /// The least cgroup limit under which the default gives `processes` processes that hold
    /// `held` each a budget of `least` (the room this cgroup's other usage takes stays taken);
    /// rounded up to a MiB. `None` without a cgroup.
    pub fn least_limit(&self, least: u64, held: u64, processes: u64) -> Option<u64> {
        let room = self.cgroup?;
        let growth = least.saturating_sub(held).saturating_mul(processes.max(1));
        // The smallest room whose growth (`cgroup_growth`) reaches `growth`.
        let left = growth
            .div_ceil(CGROUP_SHARE.0)
            .saturating_mul(CGROUP_SHARE.1)
            .max(growth.saturating_add(KERNEL_FLOOR));
        let other = room.limit.saturating_sub(room.left);
        Some(other.saturating_add(left).div_ceil(1 << 20) << 20)
    }

    /// The refusal of a default `budget` (what the process holds, `held`, plus its share of
    /// this default) that is below the `least` a run needs, when a cgroup bounds it: names the
    /// cgroup's limit, the least budget and the least limit, and says what to do. `None` when
    /// no cgroup bounds the default or `budget` is not below `least` (the plan's own error
    /// says what is wrong then).
    pub fn refusal(&self, budget: u64, least: u64, held: u64, processes: u64) -> Option<String> {
        let room = self.cgroup.filter(|_| least > budget)?;
        let limit = self.least_limit(least, held, processes)?;
        Some(format!(
            "the memory cgroup's limit of {} is too small for this run: it needs a budget of at \
             least {}, and the default there is {} (what the process holds, {}, plus at most {} \
             of the cgroup's room, keeping {} of it for the kernel's page cache and buffers); \
             raise the cgroup's limit to at least {}, or give memory (--memory) of at least {} \
             under a limit that leaves {} more",
            bytes(room.limit),
            bytes(least),
            bytes(budget),
            bytes(held),
            share_text(),
            bytes(KERNEL_FLOOR),
            bytes(limit),
            bytes(least),
            bytes(KERNEL_FLOOR)
        ))
    }
}

/// "7/8" for messages.
fn share_text() -> String {
    format!("{}/{}", CGROUP_SHARE.0, CGROUP_SHARE.1)
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
pub(crate) fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `n` bytes for people: "512 B", "3.2 MiB", "1.50 GiB".
pub fn bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let x = n as f64;
    if x < K {
        format!("{n} B")
    } else if x < K * K {
        format!("{:.1} KiB", x / K)
    } else if x < K * K * K {
        format!("{:.1} MiB", x / K / K)
    } else {
        format!("{:.2} GiB", x / K / K / K)
    }
}

mod cgroup;
pub mod cost;
pub mod files;
pub mod typed;

pub use cgroup::Room;

#[cfg(test)]
mod tests;
