//! [`Histogram`]: the engine's latencies, lock-free, in quarter-octave buckets of microseconds.
//!
//! Bucket `k` splits octave `o = k / 4` in four equal parts: it counts latencies in
//! `[2^o (1 + q/4), 2^o (1 + (q+1)/4))` microseconds, `q = k % 4` (bucket 0 also takes everything
//! below 2 us, the last everything above about 9 hours). A percentile read from it (the bucket's
//! lower edge) is at most 20% below the true value. The counts are cumulative since the engine opened; a reader
//! that wants one period subtracts two snapshots ([`LatencyCounts::since`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets: four per octave, from 1 us to 2^35 us.
pub const BUCKETS: usize = 140;

/// Bucket of a latency of `us` microseconds.
pub fn bucket(us: u64) -> usize {
    if us <= 1 {
        return 0;
    }
    let octave = 63 - us.leading_zeros() as usize; // floor(log2 us)
                                                   // The two bits below the leading one give the quarter.
    let quarter = if octave >= 2 {
        ((us >> (octave - 2)) & 3) as usize
    } else {
        ((us << (2 - octave)) & 3) as usize
    };
    (octave * 4 + quarter).min(BUCKETS - 1)
}

/// Lower edge of bucket `k`, in microseconds (as [`bucket`] assigns them).
pub fn lower_us(k: usize) -> f64 {
    let (octave, quarter) = (k / 4, k % 4);
    (1u64 << octave) as f64 * (1.0 + quarter as f64 / 4.0)
}

/// Counts per bucket, shared by threads.
pub struct Histogram([AtomicU64; BUCKETS]);

impl Default for Histogram {
    fn default() -> Self {
        Histogram(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl Histogram {
    pub fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.0[bucket(us)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> LatencyCounts {
        LatencyCounts(self.0.iter().map(|a| a.load(Ordering::Relaxed)).collect())
    }
}

/// A snapshot of a [`Histogram`]: counts per bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencyCounts(pub Vec<u64>);

impl LatencyCounts {
    /// What was recorded between `earlier` and this snapshot.
    pub fn since(&self, earlier: &LatencyCounts) -> LatencyCounts {
        LatencyCounts(
            self.0
                .iter()
                .enumerate()
                .map(|(k, &c)| c - earlier.0.get(k).copied().unwrap_or(0))
                .collect(),
        )
    }

    pub fn count(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The `p`-th percentile (0 < p <= 100): the lower edge of the bucket it falls in, in
    /// microseconds; `None` without samples.
    pub fn percentile_us(&self, p: f64) -> Option<f64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((p / 100.0) * n as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (k, &c) in self.0.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(lower_us(k));
            }
        }
        Some(lower_us(BUCKETS - 1))
    }
}
