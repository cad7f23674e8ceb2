use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;
use crate::manifest::pad_to_page;

fn write_times(dir: &Path, times: &[i64]) -> PathBuf {
    let p = dir.join("edge_times.bin");
    let mut raw: Vec<u8> = times.iter().flat_map(|t| t.to_le_bytes()).collect();
    raw.resize(pad_to_page(raw.len() as u64) as usize, 0);
    fs::write(&p, raw).unwrap();
    p
}

/// The bounds and keys of a keys file, read plainly (not through the module).
fn read_all(path: &Path, num_edges: usize) -> (Vec<i64>, Vec<u16>) {
    let raw = fs::read(path).unwrap();
    assert_eq!(
        raw.len() as u64,
        pad_to_page(payload_bytes(num_edges as u64))
    );
    assert!(raw[payload_bytes(num_edges as u64) as usize..]
        .iter()
        .all(|&b| b == 0));
    let h = HEADER_BYTES as usize;
    let bounds = raw[..h]
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let keys = raw[h..h + 2 * num_edges]
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (bounds, keys)
}

fn leftovers(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "edge_times.bin")
        .collect();
    names.sort();
    names
}

#[test]
fn key_of_by_hand() {
    let b = [-10, 0, 0, 5, 9];
    assert_eq!(key_of(&b, -11), None);
    assert_eq!(key_of(&b, i64::MIN), None);
    assert_eq!(key_of(&b, -10), Some(0));
    assert_eq!(key_of(&b, -1), Some(0));
    // Equal bounds: the largest of them.
    assert_eq!(key_of(&b, 0), Some(2));
    assert_eq!(key_of(&b, 4), Some(2));
    assert_eq!(key_of(&b, 5), Some(3));
    assert_eq!(key_of(&b, 9), Some(4));
    assert_eq!(key_of(&b, i64::MAX), Some(4));
    assert_eq!(key_of(&[], 3), None);
}

#[test]
fn undecided_by_hand() {
    let keys = [0, 2, 2, 2, 3, 7];
    assert_eq!(undecided(&keys, None), 0..0);
    assert_eq!(undecided(&keys, Some(0)), 0..1);
    assert_eq!(undecided(&keys, Some(1)), 1..1);
    assert_eq!(undecided(&keys, Some(2)), 1..4);
    assert_eq!(undecided(&keys, Some(7)), 5..6);
    assert_eq!(undecided(&keys, Some(9)), 6..6);
    assert_eq!(undecided(&[], Some(4)), 0..0);
}

#[test]
fn bounds_from_by_hand() {
    let b = bounds_from(&[1, 2, 3, 4]);
    assert_eq!(b.len(), BUCKETS);
    // B[j] = sample[j * 4 / 65536]: a quarter of the buckets each.
    assert_eq!(&b[..2], &[1, 1]);
    assert_eq!(b[16383], 1);
    assert_eq!(b[16384], 2);
    assert_eq!(b[32768], 3);
    assert_eq!(b[49151], 3);
    assert_eq!(b[49152], 4);
    assert_eq!(b[65535], 4);
    assert_eq!(bounds_from(&[]), vec![0; BUCKETS]);
    assert_eq!(bounds_from(&[-7]), vec![-7; BUCKETS]);
}

/// Two neighbor lists of five entries, each sorted by time, with ties and negative times.
#[test]
fn ten_edges_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let big = 1i64 << 40;
    let times = [-5, 3, 3, 100, big, -5, 0, 3, 7, 100];
    let tp = write_times(dir.path(), &times);
    let out = dir.path().join(EDGE_TIME_KEYS_FILE);
    let entry = derive_entry(&tp, 10, &out).unwrap();
    assert_eq!(entry.path, EDGE_TIME_KEYS_FILE);
    assert_eq!(entry.payload_bytes, HEADER_BYTES + 20);
    assert_eq!(entry.bytes, HEADER_BYTES + 4096);
    let raw = fs::read(&out).unwrap();
    assert_eq!(entry.crc32c, format!("{:08x}", crc32c::crc32c(&raw)));

    let (bounds, keys) = read_all(&out, 10);
    // Sorted sample (all 10): [-5, -5, 0, 3, 3, 3, 7, 100, 100, 2^40]; B[j] = s[j*10/65536],
    // so the value of s[m] first appears at bucket ceil(m * 6553.6).
    assert_eq!(bounds[0], -5);
    assert_eq!(bounds[13107], -5);
    assert_eq!(bounds[13108], 0);
    assert_eq!(bounds[19660], 0);
    assert_eq!(bounds[19661], 3);
    assert_eq!(bounds[39321], 3);
    assert_eq!(bounds[39322], 7);
    assert_eq!(bounds[45875], 7);
    assert_eq!(bounds[45876], 100);
    assert_eq!(bounds[58982], 100);
    assert_eq!(bounds[58983], big);
    assert_eq!(bounds[65535], big);
    // A time's key: the last bucket whose bound is that time.
    assert_eq!(
        keys,
        [13107, 39321, 39321, 58982, 65535, 13107, 19660, 39321, 45875, 58982]
    );
    assert_eq!(read_bounds(&out).unwrap(), bounds);
    assert_eq!(leftovers(dir.path()), [EDGE_TIME_KEYS_FILE]);

    // Seed time 3 in the first list: keys < 39321 count (1), then the run of 3s is undecided.
    let run = undecided(&keys[..5], key_of(&bounds, 3));
    assert_eq!(run, 1..3);
    // Seed time 50: key 45875, the bucket of 7; the second list's 7 is undecided, its 100
    // decided (> 50).
    let run = undecided(&keys[5..], key_of(&bounds, 50));
    assert_eq!(run, 3..4);
    assert_eq!(key_of(&bounds, -6), None);
}

#[test]
fn one_distinct_time() {
    let dir = tempfile::tempdir().unwrap();
    let tp = write_times(dir.path(), &[42; 7]);
    let out = dir.path().join(EDGE_TIME_KEYS_FILE);
    derive(&tp, 7, &out).unwrap();
    let (bounds, keys) = read_all(&out, 7);
    assert_eq!(bounds, vec![42; BUCKETS]);
    assert_eq!(keys, [65535; 7]);
    assert_eq!(key_of(&bounds, 41), None);
    assert_eq!(undecided(&keys, key_of(&bounds, 42)), 0..7);
}

#[test]
fn no_entries() {
    let dir = tempfile::tempdir().unwrap();
    let tp = write_times(dir.path(), &[]);
    let out = dir.path().join(EDGE_TIME_KEYS_FILE);
    let entry = derive_entry(&tp, 0, &out).unwrap();
    assert_eq!(entry.payload_bytes, HEADER_BYTES);
    assert_eq!(entry.bytes, HEADER_BYTES);
    let (bounds, keys) = read_all(&out, 0);
    assert_eq!(bounds, vec![0; BUCKETS]);
    assert!(keys.is_empty());
}

/// More entries than the sample holds: the sample (every 2nd entry) misses the minimum, which
/// still becomes `B[0]`, so every entry has a key.
#[test]
fn sampled_bounds_keep_the_minimum() {
    let n = MAX_SAMPLE as usize + 5;
    let mut times: Vec<i64> = (0..n as i64).map(|i| i / 3).collect();
    times[1] = -1000;
    let dir = tempfile::tempdir().unwrap();
    let tp = write_times(dir.path(), &times);
    let out = dir.path().join(EDGE_TIME_KEYS_FILE);
    derive(&tp, n as u64, &out).unwrap();
    let (bounds, keys) = read_all(&out, n);
    assert_eq!(bounds[0], -1000);
    assert!(bounds[1] >= 0);
    assert!(bounds.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(keys[1], 0);
    for (i, (&t, &k)) in times.iter().zip(&keys).enumerate() {
        assert_eq!(Some(k), key_of(&bounds, t), "entry {i}");
    }
}

#[test]
fn short_times_file_fails_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tp = dir.path().join("edge_times.bin");
    fs::write(&tp, [0u8; 24]).unwrap();
    let out = dir.path().join(EDGE_TIME_KEYS_FILE);
    let err = derive(&tp, 4, &out).unwrap_err().to_string();
    assert!(err.contains("edge_times.bin"), "{err}");
    assert!(err.contains("shorter than its 4 edge times"), "{err}");
    assert!(err.contains("ringgnn verify"), "{err}");
    assert!(leftovers(dir.path()).is_empty());

    let err = derive(&dir.path().join("missing.bin"), 4, &out).unwrap_err();
    assert!(err.to_string().contains("missing.bin"), "{err}");
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn read_bounds_failures() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(EDGE_TIME_KEYS_FILE);
    fs::write(&p, vec![0u8; HEADER_BYTES as usize - 8]).unwrap();
    let err = read_bounds(&p).unwrap_err().to_string();
    assert!(err.contains(EDGE_TIME_KEYS_FILE), "{err}");
    assert!(
        err.contains("shorter than the 524288-byte bounds header"),
        "{err}"
    );
    assert!(err.contains("ringgnn verify"), "{err}");

    let mut bounds: Vec<i64> = (0..BUCKETS as i64).collect();
    bounds[300] = 5;
    let raw: Vec<u8> = bounds.iter().flat_map(|t| t.to_le_bytes()).collect();
    fs::write(&p, raw).unwrap();
    let err = read_bounds(&p).unwrap_err().to_string();
    assert!(err.contains(EDGE_TIME_KEYS_FILE), "{err}");
    assert!(
        err.contains("bound 300 (5) is below bound 299 (299)"),
        "{err}"
    );
    assert!(err.contains("ringgnn verify"), "{err}");

    let err = read_bounds(&dir.path().join("nope.bin")).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
}

/// The count of a sorted list's entries with time `<= t` from keys alone, plus the undecided
/// run's exact times.
fn count_by_keys(bounds: &[i64], times: &[i64], t: i64) -> usize {
    let keys: Vec<u16> = times.iter().map(|&x| key_of(bounds, x).unwrap()).collect();
    let run = undecided(&keys, key_of(bounds, t));
    run.start + times[run].iter().filter(|&&x| x <= t).count()
}

proptest! {
    /// Any non-decreasing bounds whose first is at most the smallest time.
    #[test]
    fn keys_count_exactly(
        mut times in prop::collection::vec(-50i64..50, 0..40),
        mut extra in prop::collection::vec(-60i64..60, 0..20),
        t in -70i64..70,
    ) {
        times.sort_unstable();
        extra.push(times.first().copied().unwrap_or(0));
        extra.sort_unstable();
        let exact = times.partition_point(|&x| x <= t);
        prop_assert_eq!(count_by_keys(&extra, &times, t), exact);
    }

    /// Full-size quantile bounds of a sample (every k-th time), the first lowered to the minimum.
    #[test]
    fn sampled_bounds_count_exactly(
        mut times in prop::collection::vec(any::<i64>(), 1..200),
        stride in 1usize..10,
        seeds in prop::collection::vec(any::<i64>(), 1..10),
    ) {
        let mut sample: Vec<i64> = times.iter().step_by(stride).copied().collect();
        sample.sort_unstable();
        times.sort_unstable();
        let mut bounds = bounds_from(&sample);
        bounds[0] = times[0];
        for t in seeds.into_iter().chain(times.iter().copied()) {
            let exact = times.partition_point(|&x| x <= t);
            prop_assert_eq!(count_by_keys(&bounds, &times, t), exact);
        }
    }
}

#[test]
fn key_index_by_hand() {
    let b = [-10, 0, 0, 5, 9];
    let idx = KeyIndex::new(&b);
    for t in [i64::MIN, -11, -10, -1, 0, 4, 5, 8, 9, 10, i64::MAX] {
        assert_eq!(idx.key(t), key_of(&b, t), "t {t}");
    }
    // The widest span: cells of 2^48 times each.
    let b = [i64::MIN, -1, 0, 1, i64::MAX];
    let idx = KeyIndex::new(&b);
    for t in [
        i64::MIN,
        i64::MIN + 1,
        -2,
        -1,
        0,
        1,
        2,
        i64::MAX - 1,
        i64::MAX,
    ] {
        assert_eq!(idx.key(t), key_of(&b, t), "t {t}");
    }
    assert_eq!(KeyIndex::new(&[]).key(0), None);
    let one = KeyIndex::new(&[7; BUCKETS]);
    assert_eq!(
        (one.key(6), one.key(7), one.key(8)),
        (None, Some(65535), Some(65535))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// The index answers as `key_of`, for bounds of any span, with runs of equal bounds.
    #[test]
    fn key_index_matches_key_of(
        mut bounds in prop::collection::vec(any::<i64>(), 1..300),
        small in prop::collection::vec(-1000i64..1000, 1..300),
        times in prop::collection::vec(any::<i64>(), 0..50),
        near in prop::collection::vec(-1100i64..1100, 0..50),
        full: bool,
    ) {
        for (b, ts) in [(&mut bounds, &times), (&mut small.clone(), &near)] {
            b.sort_unstable();
            let b = if full { bounds_from(b) } else { b.clone() };
            let idx = KeyIndex::new(&b);
            for &t in ts.iter().chain(&b) {
                prop_assert_eq!(idx.key(t), key_of(&b, t));
                prop_assert_eq!(idx.key(t.saturating_add(1)), key_of(&b, t.saturating_add(1)));
                prop_assert_eq!(idx.key(t.saturating_sub(1)), key_of(&b, t.saturating_sub(1)));
            }
        }
    }
}
