//! One memory budget for the whole loader, split between its parts.
//!
//! The caller gives one figure (`--memory`) and the memory it needs for itself (`reserve`: the
//! Python runtime, PyTorch and the model's activations). The loader's parts are sized in this
//! order, each from an upper bound, never from a guess:
//!
//! 1. **Fixed**: the offset index and the sampler's per-thread workspaces and sample queue
//!    ([`SamplerPool::memory_estimate_for`](ringgnn_sampler::SamplerPool::memory_estimate_for)),
//!    the labels (2 bytes per node up to 32767 classes), each worker's gather workspace (its
//!    coalescing read buffer, 8 MiB, and 48 bytes per node of the largest batch), and the batch
//!    buffers: `prefetch + hold` feature matrices of the largest batch (`prefetch` gathered
//!    ahead, and the `hold` the consumer has: 2 for a plain `for` loop, which keeps the previous
//!    batch while fetching the next; 1 for a loop that releases it first), with their labels
//!    and sample arrays. A slack of 1/32 of the budget is never handed out.
//! 2. **The neighbor file in memory**, when the sampler backend is `auto` and it fits what is
//!    left (sampling from memory is the largest single speed-up and its size is known).
//! 3. **The whole feature file in memory**, when the feature backend is `auto` (or `memory`)
//!    and it fits what is left: then no cache is needed.
//! 4. **The hot-row cache** gets the rest, up to `cache` if the caller set one (and never more
//!    than the feature file). If `prefetch` was not set and the default (one batch per thread)
//!    leaves the cache less than it asked, one batch ahead is used instead.
//!
//! If the fixed part alone exceeds the budget, opening fails with the figures and what to
//! change. Nothing here depends on the operating system's accounting: the plan is checked
//! against `memcap` (RSS plus page cache) in `docs/benchmarks.md`.

use std::fmt;

/// Share of the budget kept free for what no bound covers: the allocator's fragmentation and
/// the kernel's file pages (shared libraries, metadata) that a cgroup limit also counts.
pub const SLACK: (u64, u64) = (1, 32);

/// Bytes of a gather worker's scratch per node of the largest batch: the sorted `(id,
/// position)` pairs (16), the missing ids and their positions (16) and repeated ids (16).
pub const GATHER_SCRATCH_PER_NODE: u64 = 48;

/// What the plan is computed from.
#[derive(Clone, Debug, Default)]
pub struct PlanInput {
    pub budget: u64,
    pub reserve: u64,
    /// The sampler pool's estimate without the neighbor file, and the neighbor file's size.
    pub sampler: u64,
    pub neighbor_file: u64,
    /// Whether the neighbor file may be loaded (backend `auto`), or must be (`memory`).
    pub neighbors_may_load: bool,
    pub neighbors_must_load: bool,
    pub labels: u64,
    pub threads: u64,
    /// The coalescing read buffer of one gather worker.
    pub read_buffer: u64,
    /// Upper bounds for one batch: nodes, and the bytes of its sample arrays.
    pub batch_nodes: u64,
    pub batch_sample_bytes: u64,
    pub dim: u64,
    /// The feature file's payload and what caching all of it would cost.
    pub features: u64,
    pub full_cache: u64,
    pub features_may_load: bool,
    pub features_must_load: bool,
    /// The cache asked for (`None`: whatever is left).
    pub cache: Option<u64>,
    /// Gathered batches ahead asked for (`None`: one per thread, or 1 if that crowds the cache).
    pub prefetch: Option<u64>,
    /// Batches the consumer holds while it asks for the next one: 2 for a plain `for batch in
    /// loader` (the previous batch is still bound to the loop variable), 1 for a loop that
    /// releases each batch before asking for the next.
    pub hold: u64,
}

/// How the budget is split; every field is bytes unless named otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryPlan {
    pub budget: u64,
    /// `budget * SLACK`: never handed out.
    pub slack: u64,
    pub reserve: u64,
    pub sampler: u64,
    pub neighbor_file: u64,
    pub labels: u64,
    pub gather: u64,
    pub buffers: u64,
    pub features: u64,
    pub cache: u64,
    /// Gathered batches the workers may hold ahead of the consumer.
    pub prefetch: u64,
    pub neighbors_in_memory: bool,
    pub features_in_memory: bool,
    /// Why the cache is smaller than asked, for one log line.
    pub note: Option<String>,
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
    }

    /// Split `i.budget`; an error names every part when the fixed ones do not fit.
    pub fn compute(i: &PlanInput) -> Result<Self, String> {
        let default_ahead = i.threads.max(1);
        let first = match (
            Self::with_prefetch(i, i.prefetch.unwrap_or(default_ahead)),
            i.prefetch,
        ) {
            (Ok(p), _) => p,
            // The default depth does not fit: one batch ahead may.
            (Err(_), None) if default_ahead > 1 => return Self::with_prefetch(i, 1),
            (Err(e), _) => return Err(e),
        };
        if i.prefetch.is_none() && default_ahead > 1 && !first.features_in_memory {
            let want = i.cache.unwrap_or(u64::MAX).min(i.full_cache);
            if first.cache < want {
                if let Ok(one) = Self::with_prefetch(i, 1) {
                    if one.cache > first.cache {
                        return Ok(one);
                    }
                }
            }
        }
        Ok(first)
    }

    fn with_prefetch(i: &PlanInput, ahead: u64) -> Result<Self, String> {
        if ahead == 0 {
            return Err("prefetch must be at least 1 (gathered batches ahead of training)".into());
        }
        let x = i.batch_nodes.saturating_mul(i.dim).saturating_mul(4);
        let slot = x
            .saturating_add(i.batch_nodes.saturating_mul(8))
            .saturating_add(i.batch_sample_bytes.saturating_mul(2));
        let mut p = MemoryPlan {
            budget: i.budget,
            slack: i.budget / SLACK.1 * SLACK.0,
            reserve: i.reserve,
            sampler: i.sampler,
            labels: i.labels,
            gather: i.threads.saturating_mul(
                i.read_buffer
                    .saturating_add(i.batch_nodes.saturating_mul(GATHER_SCRATCH_PER_NODE)),
            ),
            buffers: (ahead + i.hold.max(1)).saturating_mul(slot),
            prefetch: ahead,
            ..Default::default()
        };
        let fixed = p.total();
        if fixed > i.budget {
            return Err(format!(
                "memory={} is too small for the loader: it needs at least {} ({}); raise memory, \
                 or lower batch_size, fanouts, threads or prefetch",
                bytes(i.budget),
                bytes(fixed),
                p.parts()
            ));
        }
        let mut left = i.budget - fixed;
        if take_whole(
            &p,
            "neighbor",
            i.neighbor_file,
            i.neighbors_must_load,
            i.neighbors_may_load,
            left,
        )? {
            p.neighbor_file = i.neighbor_file;
            p.neighbors_in_memory = true;
            left -= i.neighbor_file;
        }
        if take_whole(
            &p,
            "feature",
            i.features,
            i.features_must_load,
            i.features_may_load,
            left,
        )? {
            p.features = i.features;
            p.features_in_memory = true;
            return Ok(p);
        }
        let want = i.cache.unwrap_or(u64::MAX).min(i.full_cache);
        p.cache = want.min(left);
        if p.cache < want && i.cache.is_some() {
            p.note = Some(format!(
                "the hot-row cache gets {} of the {} asked: that is what memory={} leaves after {}",
                bytes(p.cache),
                bytes(want),
                bytes(i.budget),
                p.parts()
            ));
        }
        Ok(p)
    }

    /// "reserve 1.0 GiB, sampler ..., ..." for messages.
    pub fn parts(&self) -> String {
        let mut s = format!(
            "slack {}, caller's reserve {}, sampler {}, labels {}, gather workspaces {}, batch \
             buffers {} ({} ahead)",
            bytes(self.slack),
            bytes(self.reserve),
            bytes(self.sampler),
            bytes(self.labels),
            bytes(self.gather),
            bytes(self.buffers),
            self.prefetch
        );
        if self.neighbors_in_memory {
            s += &format!(", neighbor file {}", bytes(self.neighbor_file));
        }
        if self.features_in_memory {
            s += &format!(", feature file {}", bytes(self.features));
        }
        if self.cache > 0 {
            s += &format!(", hot-row cache {}", bytes(self.cache));
        }
        s
    }
}

impl fmt::Display for MemoryPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "budget {}: {}", bytes(self.budget), self.parts())
    }
}

/// Whether a whole file of `size` bytes goes into memory with `left` bytes to spare: always if
/// `must` (an error if it does not fit), if it fits when `may`.
fn take_whole(
    p: &MemoryPlan,
    name: &str,
    size: u64,
    must: bool,
    may: bool,
    left: u64,
) -> Result<bool, String> {
    if must && size > left {
        return Err(format!(
            "memory={}: the {name} file ({}) does not fit next to the loader's other parts ({}); \
             raise memory or use a disk backend",
            bytes(p.budget),
            bytes(size),
            p.parts()
        ));
    }
    Ok(must || (may && size <= left))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Budgets of 1032 and 2064 leave 1000 and 2000 after the slack (1/32).
    fn input() -> PlanInput {
        PlanInput {
            budget: 1032,
            reserve: 100,
            sampler: 100,
            neighbor_file: 300,
            neighbors_may_load: true,
            labels: 10,
            threads: 2,
            read_buffer: 5,
            batch_nodes: 1,
            batch_sample_bytes: 0,
            dim: 10,
            features: 800,
            full_cache: 900,
            features_may_load: true,
            hold: 2,
            ..Default::default()
        }
    }

    #[test]
    fn parts_are_taken_in_order_and_the_cache_gets_the_rest() {
        // gather = 2 * (5 + 48) = 106; one slot = 40 + 8 = 48, 4 slots = 192 (2 ahead).
        let p = MemoryPlan::compute(&PlanInput {
            prefetch: Some(2),
            ..input()
        })
        .unwrap();
        assert_eq!((p.gather, p.buffers, p.prefetch), (106, 192, 2));
        assert!(p.neighbors_in_memory, "300 fits in 1000 - 508");
        assert!(!p.features_in_memory, "800 does not fit in the 192 left");
        assert_eq!(p.cache, 192);
        assert_eq!(p.total(), 1032);
    }

    #[test]
    fn the_default_prefetch_drops_to_one_when_that_grows_the_cache() {
        let p = MemoryPlan::compute(&input()).unwrap();
        // With 2 ahead: 1000 - 100 - 100 - 10 - 106 - 192 - 300 = 192; with 1 ahead: 240.
        assert_eq!((p.prefetch, p.buffers, p.cache), (1, 144, 240));
        assert_eq!(p.total(), 1032);
        let fixed = MemoryPlan::compute(&PlanInput {
            prefetch: Some(2),
            ..input()
        })
        .unwrap();
        assert_eq!(
            (fixed.prefetch, fixed.cache),
            (2, 192),
            "an explicit prefetch is kept"
        );
    }

    #[test]
    fn an_explicit_cache_is_a_ceiling_and_shrinking_it_is_explained() {
        let small = MemoryPlan::compute(&PlanInput {
            cache: Some(50),
            ..input()
        })
        .unwrap();
        assert_eq!(
            (small.cache, small.prefetch),
            (50, 2),
            "50 fits with 2 ahead"
        );
        assert!(small.note.is_none());
        let big = MemoryPlan::compute(&PlanInput {
            cache: Some(500),
            ..input()
        })
        .unwrap();
        assert_eq!(big.cache, 240);
        assert!(big
            .note
            .as_deref()
            .unwrap()
            .contains("gets 240 B of the 500 B asked"));
    }

    #[test]
    fn whole_features_in_memory_when_they_fit() {
        let p = MemoryPlan::compute(&PlanInput {
            budget: 2064,
            ..input()
        })
        .unwrap();
        assert!(p.neighbors_in_memory && p.features_in_memory);
        assert_eq!((p.features, p.cache), (800, 0));
        let disk = MemoryPlan::compute(&PlanInput {
            budget: 2064,
            features_may_load: false,
            neighbors_may_load: false,
            ..input()
        })
        .unwrap();
        assert!(!disk.neighbors_in_memory && !disk.features_in_memory);
        assert_eq!(
            disk.cache, 900,
            "never more than caching the whole file costs"
        );
    }

    #[test]
    fn hold_counts_the_consumers_batches_and_the_default_prefetch_falls_back_to_one() {
        let one = MemoryPlan::compute(&PlanInput {
            hold: 1,
            prefetch: Some(2),
            ..input()
        })
        .unwrap();
        assert_eq!(one.buffers, 3 * 48);
        // 2 ahead needs 1000 - 508 + ... : with a budget where only 1 ahead fits, the default
        // takes 1 instead of failing.
        let p = MemoryPlan::compute(&PlanInput {
            budget: 500,
            neighbors_may_load: false,
            ..input()
        })
        .unwrap();
        assert_eq!(p.prefetch, 1);
        assert!(MemoryPlan::compute(&PlanInput {
            budget: 500,
            prefetch: Some(2),
            ..input()
        })
        .is_err());
    }

    #[test]
    fn too_small_a_budget_names_every_part() {
        let e = MemoryPlan::compute(&PlanInput {
            budget: 300,
            ..input()
        })
        .unwrap_err();
        assert!(e.contains("memory=300 B is too small"), "{e}");
        assert!(
            e.contains("caller's reserve 100 B") && e.contains("batch buffers"),
            "{e}"
        );
        let e = MemoryPlan::compute(&PlanInput {
            features_must_load: true,
            neighbors_may_load: false,
            ..input()
        })
        .unwrap_err();
        assert!(e.contains("the feature file (800 B) does not fit"), "{e}");
    }
}
