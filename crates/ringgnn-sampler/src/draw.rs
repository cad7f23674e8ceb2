//! Drawing neighbor *positions* before anything is read, as RingSampler does: a node's
//! neighbors are identified by their offsets inside its range `[indptr[v], indptr[v+1])`, so
//! only the drawn entries ever need to be fetched. Also owns the per-batch random stream.
//!
//! Reproducibility rests on two rules: the generator of a batch is derived from
//! `(seed, epoch, batch)` only ([`batch_rng`]), and it is consumed in a fixed order (hop by
//! hop, in frontier order, one [`Drawer::draw`] per node). Nothing about the I/O backend or
//! the thread running the batch can change which positions are drawn.

use std::collections::HashSet;

use ringgnn_store::rng::{self, Rng};

use crate::Fanout;

/// The `purpose` of [`rng::stream`] for sampling ("sample" in ASCII), so that sampling never
/// shares a stream with split drawing or the generators under the same user seed.
const SAMPLE_PURPOSE: u64 = 0x73_61_6d_70_6c_65;

/// Mixed into the hop of [`relation_rng`] ("hetero" in ASCII), so that its streams are not
/// those of a homogeneous batch under the same seed.
const HETERO: u64 = 0x68_65_74_65_72_6f;

/// Up to this many draws, Floyd's algorithm checks membership by scanning the positions drawn
/// so far: for the usual fanouts (5 to 25) a scan of a few cache lines beats hashing.
const SCAN_LIMIT: u64 = 32;

/// The random stream of mini-batch `batch` of epoch `epoch` under the user's `seed`.
pub fn batch_rng(seed: u64, epoch: u64, batch: u64) -> Rng {
    // mix64 is a bijection, so distinct (seed, epoch) pairs with the same epoch never collide.
    rng::stream(rng::mix64(seed ^ rng::mix64(epoch)), SAMPLE_PURPOSE, batch)
}

/// The random stream of relation `relation` at hop `hop` (0-based: hop 0 draws for the seeds)
/// of mini-batch `batch` of epoch `epoch` under the user's `seed`, for
/// [`crate::HeteroSampler`]: exactly
///
/// ```text
/// batch_rng(mix64(mix64(seed ^ mix64(relation)) ^ mix64(hop ^ HETERO)), epoch, batch)
/// ```
///
/// with `mix64` the SplitMix64 finalizer of `ringgnn_store::rng` and `HETERO` the ASCII bytes
/// of "hetero" (`0x6865_7465_726f`). Every (relation, hop) has its own stream, so what one
/// relation draws never depends on what another drew, nor on whether it was sampled at all.
/// Part of the reproducibility contract: changing it changes every heterogeneous sample.
pub fn relation_rng(seed: u64, epoch: u64, batch: u64, relation: usize, hop: usize) -> Rng {
    let s = rng::mix64(
        rng::mix64(seed ^ rng::mix64(relation as u64)) ^ rng::mix64(hop as u64 ^ HETERO),
    );
    batch_rng(s, epoch, batch)
}

/// Per-node position drawing with a reusable workspace (O(fanout) memory, never O(degree)).
#[derive(Default)]
pub struct Drawer {
    seen: HashSet<u64>,
}

impl Drawer {
    /// How many offsets [`Self::draw`] appends for a node of `degree`.
    pub fn count(degree: u64, fanout: Fanout, replace: bool) -> u64 {
        match fanout {
            _ if degree == 0 => 0,
            Fanout::All => degree,
            Fanout::Count(k) if replace => k,
            Fanout::Count(k) => k.min(degree),
        }
    }

    /// Append to `out` the offsets (in `[0, degree)`) drawn for one node, ascending.
    ///
    /// - `Fanout::All`, or no replacement with `degree <= k`: every offset `0..degree`, in
    ///   order; no randomness is consumed.
    /// - Without replacement, `degree > k`: `k` distinct offsets, every `k`-subset equally
    ///   likely (Floyd's algorithm: exactly `k` draws).
    /// - With replacement, `degree > 0`: `k` independent uniform offsets (`k` draws), sorted;
    ///   sorting a sample of exchangeable draws does not change its distribution.
    pub fn draw(
        &mut self,
        rng: &mut Rng,
        degree: u64,
        fanout: Fanout,
        replace: bool,
        out: &mut Vec<u64>,
    ) {
        let start = out.len();
        let k = match fanout {
            Fanout::All => degree,
            Fanout::Count(k) => k,
        };
        if degree == 0 {
            return;
        }
        if matches!(fanout, Fanout::All) || (!replace && degree <= k) {
            out.extend(0..degree);
            return;
        }
        if replace {
            out.extend((0..k).map(|_| rng::below(rng, degree)));
        } else {
            floyd(rng, degree, k, out, &mut self.seen);
        }
        out[start..].sort_unstable();
    }
}

/// Floyd's algorithm: append `k < n` distinct uniform values of `[0, n)` to `out`.
fn floyd(rng: &mut Rng, n: u64, k: u64, out: &mut Vec<u64>, seen: &mut HashSet<u64>) {
    let start = out.len();
    let small = k <= SCAN_LIMIT;
    seen.clear();
    for j in n - k..n {
        let t = rng::below(rng, j + 1);
        let taken = if small {
            out[start..].contains(&t)
        } else {
            !seen.insert(t)
        };
        // When t was taken already, j is new for sure: every earlier value is below j.
        let pick = if taken { j } else { t };
        if taken && !small {
            seen.insert(j);
        }
        out.push(pick);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(seed: u64, degree: u64, fanout: Fanout, replace: bool) -> Vec<u64> {
        let mut out = vec![];
        Drawer::default().draw(
            &mut batch_rng(seed, 0, 0),
            degree,
            fanout,
            replace,
            &mut out,
        );
        out
    }

    #[test]
    fn all_and_small_degrees_keep_every_offset_in_order() {
        assert_eq!(draw(1, 4, Fanout::All, false), vec![0, 1, 2, 3]);
        assert_eq!(draw(1, 4, Fanout::All, true), vec![0, 1, 2, 3]);
        assert_eq!(draw(1, 4, Fanout::Count(4), false), vec![0, 1, 2, 3]);
        assert_eq!(draw(1, 3, Fanout::Count(9), false), vec![0, 1, 2]);
        assert_eq!(draw(1, 0, Fanout::Count(9), true), Vec::<u64>::new());
        assert_eq!(draw(1, 0, Fanout::All, false), Vec::<u64>::new());
    }

    #[test]
    fn count_is_the_number_drawn() {
        for degree in [0, 1, 2, 5, 9, 10, 11, 40, 1000] {
            for fanout in [Fanout::All, Fanout::Count(1), Fanout::Count(10)] {
                for replace in [false, true] {
                    assert_eq!(
                        Drawer::count(degree, fanout, replace),
                        draw(7, degree, fanout, replace).len() as u64,
                        "degree {degree}, {fanout:?}, replace {replace}"
                    );
                }
            }
        }
    }

    #[test]
    fn without_replacement_is_distinct_sorted_and_in_range() {
        // Both membership paths: scanning (k <= 32) and hashing (k > 32).
        for (n, k) in [(10, 9), (1000, 5), (100, 33), (100_000, 500), (2, 1)] {
            for seed in 0..20 {
                let d = draw(seed, n, Fanout::Count(k), false);
                assert_eq!(d.len() as u64, k);
                assert!(d.windows(2).all(|w| w[0] < w[1]), "{d:?}");
                assert!(d.iter().all(|&x| x < n));
            }
        }
    }

    #[test]
    fn with_replacement_draws_exactly_k() {
        let d = draw(3, 1, Fanout::Count(5), true);
        assert_eq!(d, vec![0; 5]);
        let d = draw(3, 7, Fanout::Count(50), true);
        assert_eq!(d.len(), 50);
        assert!(d.windows(2).all(|w| w[0] <= w[1]) && d.iter().all(|&x| x < 7));
        // 50 draws out of 7 values without any repeat would be impossible: repeats happen.
        assert!(d.windows(2).any(|w| w[0] == w[1]));
    }

    #[test]
    fn streams_depend_on_seed_epoch_and_batch() {
        let take = |s, e, b| {
            let mut out = vec![];
            Drawer::default().draw(
                &mut batch_rng(s, e, b),
                1 << 40,
                Fanout::Count(4),
                false,
                &mut out,
            );
            out
        };
        assert_eq!(take(1, 2, 3), take(1, 2, 3));
        assert_ne!(take(1, 2, 3), take(0, 2, 3));
        assert_ne!(take(1, 2, 3), take(1, 3, 3));
        assert_ne!(take(1, 2, 3), take(1, 2, 4));
        assert_ne!(take(1, 0, 1), take(1, 1, 0));
    }

    #[test]
    fn relation_streams_are_the_documented_derivation_and_all_differ() {
        let first = |mut r: Rng| rng::below(&mut r, u64::MAX);
        let mix = rng::mix64;
        for (s, e, b, r, k) in [(0, 0, 0, 0, 0), (7, 1, 2, 3, 1), (u64::MAX, 5, 9, 1, 0)] {
            let derived = mix(mix(s ^ mix(r as u64)) ^ mix(k as u64 ^ 0x6865_7465_726f));
            assert_eq!(
                first(relation_rng(s, e, b, r, k)),
                first(batch_rng(derived, e, b))
            );
        }
        // Pinned: a change here changes every heterogeneous sample ever drawn.
        assert_eq!(
            first(relation_rng(1, 2, 3, 4, 5)),
            2_592_798_457_295_758_705
        );
        let mut seen = HashSet::new();
        for r in 0..8 {
            for k in 0..4 {
                assert!(seen.insert(first(relation_rng(1, 2, 3, r, k))), "{r} {k}");
            }
        }
        assert!(!seen.contains(&first(batch_rng(1, 2, 3))));
    }
}
