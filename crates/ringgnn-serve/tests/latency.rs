//! The latency histogram: four buckets per octave, percentiles land in the right bucket.

use std::time::Duration;

use proptest::prelude::*;
use ringgnn_serve::latency::{bucket, lower_us, Histogram, BUCKETS};

#[test]
fn four_buckets_per_octave() {
    assert_eq!(bucket(0), 0);
    assert_eq!(bucket(1), 0);
    // 2 = 2^1: octave 1, quarter 0; 3 = 1.5 * 2: quarter 2.
    assert_eq!((bucket(2), bucket(3)), (4, 6));
    assert_eq!(
        (bucket(1024), bucket(1279), bucket(1280), bucket(2047)),
        (40, 40, 41, 43)
    );
    assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    assert_eq!(
        (lower_us(40), lower_us(41), lower_us(43)),
        (1024.0, 1280.0, 1792.0)
    );
}

proptest! {
    #[test]
    fn a_value_lies_in_its_bucket(us in 2u64..(1 << 34)) {
        let k = bucket(us);
        prop_assert!(lower_us(k) <= us as f64, "{us} below bucket {k}");
        prop_assert!((us as f64) < lower_us(k + 1), "{us} above bucket {k}");
        prop_assert!(lower_us(k + 1) / lower_us(k) <= 1.26);
    }
}

#[test]
fn percentiles_of_a_known_distribution() {
    let h = Histogram::default();
    assert_eq!(h.snapshot().percentile_us(50.0), None);
    // 90 requests of 1 ms, 9 of 10 ms, 1 of 100 ms.
    for _ in 0..90 {
        h.record(Duration::from_millis(1));
    }
    let first = h.snapshot();
    for _ in 0..9 {
        h.record(Duration::from_millis(10));
    }
    h.record(Duration::from_millis(100));
    let s = h.snapshot();
    assert_eq!(s.count(), 100);
    let near = |got: Option<f64>, want: f64| {
        let g = got.unwrap();
        assert!(g <= want && g > want / 1.26, "{g} for {want}");
    };
    near(s.percentile_us(50.0), 1000.0);
    near(s.percentile_us(90.0), 1000.0);
    near(s.percentile_us(91.0), 10_000.0);
    near(s.percentile_us(99.0), 10_000.0);
    near(s.percentile_us(100.0), 100_000.0);
    // Only what came after the first snapshot.
    let later = s.since(&first);
    assert_eq!(later.count(), 10);
    near(later.percentile_us(50.0), 10_000.0);
}
