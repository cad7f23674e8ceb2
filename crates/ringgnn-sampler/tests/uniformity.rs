//! Statistical tests: every neighbor of a node is drawn with equal probability. The checker is
//! a Pearson chi-square test at significance 0.001 with fixed seeds (so the outcome is fixed,
//! not flaky), and it is shown to reject deliberately biased draws fed to it the same way.

mod common;

use common::{build, fan, SampleIds};
use ringgnn_sampler::{NeighborSampler, NeighborSource};
use ringgnn_store::rng::{self, Rng};

const DEGREE: u64 = 50;
const FANOUT: u64 = 5;
const BATCHES: u64 = 20_000;
/// The 0.999 quantile of the chi-square distribution with DEGREE - 1 = 49 degrees of freedom.
const CRITICAL_49: f64 = 85.351;

/// Pearson's statistic for `counts` against the uniform distribution, rescaled so that it
/// follows chi-square(n - 1) for both designs: `k` draws per trial with replacement are a
/// multinomial sample; `k` distinct draws (without replacement) have inclusion counts with the
/// smaller variance `p (1 - p)` per trial, which the factor `(n - 1) / (n - k)` undoes.
fn chi_square(counts: &[u64], k: u64, replace: bool) -> f64 {
    let n = counts.len() as f64;
    let total: u64 = counts.iter().sum();
    let expected = total as f64 / n;
    let stat: f64 = counts
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum();
    if replace {
        stat
    } else {
        stat * (n - 1.0) / (n - k as f64)
    }
}

fn is_uniform(counts: &[u64], k: u64, replace: bool) -> bool {
    chi_square(counts, k, replace) < CRITICAL_49
}

/// How often each of the DEGREE in-neighbors of a hub is drawn over BATCHES batches.
fn sampler_counts(replace: bool) -> Vec<u64> {
    let edges: Vec<_> = (1..=DEGREE).map(|i| (i, 0)).collect();
    let (_d, ds) = build(&edges, None, false);
    let backend = NeighborSource::memory(&ds).unwrap();
    let mut s = NeighborSampler::open(&ds, &fan(&[FANOUT as i64]), replace, backend).unwrap();
    let mut counts = vec![0u64; DEGREE as usize];
    for batch in 0..BATCHES {
        let out = s.sample_ids(&[0], 2024, 0, batch, true).unwrap();
        for &e in out.edge.as_ref().unwrap() {
            counts[e as usize] += 1;
        }
    }
    counts
}

/// Counts from a stand-alone draw function, `BATCHES` trials of FANOUT draws.
fn draw_counts(mut draw: impl FnMut(&mut Rng) -> Vec<u64>) -> Vec<u64> {
    let mut r = rng::stream(2024, 7, 0);
    let mut counts = vec![0u64; DEGREE as usize];
    for _ in 0..BATCHES {
        for p in draw(&mut r) {
            counts[p as usize] += 1;
        }
    }
    counts
}

#[test]
fn without_replacement_every_neighbor_equally_likely() {
    let counts = sampler_counts(false);
    assert_eq!(counts.iter().sum::<u64>(), BATCHES * FANOUT);
    let stat = chi_square(&counts, FANOUT, false);
    assert!(
        stat < CRITICAL_49,
        "chi-square {stat:.1} >= {CRITICAL_49}: {counts:?}"
    );
}

#[test]
fn with_replacement_every_neighbor_equally_likely() {
    let counts = sampler_counts(true);
    assert_eq!(counts.iter().sum::<u64>(), BATCHES * FANOUT);
    let stat = chi_square(&counts, FANOUT, true);
    assert!(
        stat < CRITICAL_49,
        "chi-square {stat:.1} >= {CRITICAL_49}: {counts:?}"
    );
}

/// Offsets reduced modulo the degree from a wider range: the low 14 offsets get twice the
/// weight (the classic modulo bias).
#[test]
fn checker_rejects_modulo_bias_towards_low_offsets() {
    let counts = draw_counts(|r| (0..FANOUT).map(|_| rng::below(r, 64) % DEGREE).collect());
    assert!(!is_uniform(&counts, FANOUT, true), "{counts:?}");
}

/// A subtler bias: one draw in a hundred is replaced by offset 0 (offset 0 is drawn 1.5x as
/// often as it should be).
#[test]
fn checker_rejects_a_slight_preference_for_offset_zero() {
    let counts = draw_counts(|r| {
        (0..FANOUT)
            .map(|_| {
                if rng::below(r, 100) == 0 {
                    0
                } else {
                    rng::below(r, DEGREE)
                }
            })
            .collect()
    });
    assert!(!is_uniform(&counts, FANOUT, true), "{counts:?}");
}

/// Floyd's algorithm with the classic off-by-one (`below(j)` instead of `below(j + 1)`): still
/// k distinct offsets, but the top offsets are drawn too rarely.
#[test]
fn checker_rejects_floyd_off_by_one() {
    let counts = draw_counts(|r| {
        let mut s: Vec<u64> = vec![];
        for j in DEGREE - FANOUT..DEGREE {
            let t = rng::below(r, j);
            s.push(if s.contains(&t) { j } else { t });
        }
        s
    });
    assert!(!is_uniform(&counts, FANOUT, false), "{counts:?}");
}
