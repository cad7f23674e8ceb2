//! Link splits by time through the builder: each event decided by its time alone, held-out
//! events out of the graph, every split's events sorted by (time, src, dst) through the external
//! sort (runs on disk and merges of several passes under the tests' 64 KiB per split), exactly as
//! an in-memory reference says, whatever the builder's budget and workers.

use super::*;
use std::collections::BTreeMap;

use crate::link::LinkPlan;
use crate::manifest::TRAIN;
use crate::times::{TimeSource, Timed};

/// Times from a vector.
struct VecTimes(Vec<i64>, usize);

impl TimeSource for VecTimes {
    fn fill(&mut self, out: &mut Vec<i64>, n: usize) -> Result<usize> {
        let k = n.min(self.0.len() - self.1);
        out.extend_from_slice(&self.0[self.1..self.1 + k]);
        self.1 += k;
        Ok(k)
    }
    fn rewind(&mut self) -> Result<()> {
        self.1 = 0;
        Ok(())
    }
    fn count(&self) -> Option<u64> {
        Some(self.0.len() as u64)
    }
    fn name(&self) -> String {
        "--edge-time t.npy".into()
    }
}

/// Split name -> its events (src, dst, time) in stored order.
type Splits = BTreeMap<String, Vec<(u64, u64, i64)>>;
/// Each node's in-edges as (time, source).
type Lists = Vec<Vec<(i64, u64)>>;

fn i64s(path: &std::path::Path, n: usize) -> Vec<i64> {
    std::fs::read(path).unwrap()[..8 * n]
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Build `edges` at `times` split at `at`; the splits and the graph's lists, read from the
/// staging.
fn build_split(
    edges: &[(u64, u64)],
    times: &[i64],
    at: &[(&str, i64)],
    undirected: bool,
    sizes: Sizes,
) -> Result<(Splits, Lists)> {
    let dir = tempfile::tempdir().unwrap();
    let mut staging = Staging::create(&dir.path().join("ds"), false, &NoProgress).unwrap();
    let mut src = VecSource::new(edges.to_vec());
    let mut timed = Timed::new(&mut src, Box::new(VecTimes(times.to_vec(), 0)), "in".into());
    let plan = LinkPlan::Times(at.iter().map(|&(n, t)| (n.to_string(), t)).collect());
    let o = opts(undirected, false, false, None);
    let g = build_with(
        &mut timed,
        &o,
        Some(&plan),
        &mut staging,
        &NoProgress,
        sizes,
    )?;
    let held = g.held_out.expect("a split");
    assert!(held.times);
    let mut splits = Splits::new();
    for (name, _, n) in &held.splits {
        let p = crate::link::read_pairs(&staging.file_path(&format!("edge_split_{name}.bin")), *n)
            .unwrap();
        let t = i64s(
            &staging.file_path(&format!("edge_split_times_{name}.bin")),
            *n as usize,
        );
        assert!(staging
            .files()
            .contains_key(&format!("edge_split_times.{name}")));
        let events = p.into_iter().zip(t).map(|((s, d), t)| (s, d, t)).collect();
        splits.insert(name.clone(), events);
    }
    let indptr = i64s(&staging.file_path(INDPTR_FILE), g.num_nodes as usize + 1);
    let idx: Vec<u64> = std::fs::read(staging.file_path(INDICES_FILE)).unwrap()
        [..4 * g.num_edges as usize]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()) as u64)
        .collect();
    let et = i64s(
        &staging.file_path(crate::times::EDGE_TIMES_FILE),
        g.num_edges as usize,
    );
    let lists = indptr
        .windows(2)
        .map(|w| {
            (w[0] as usize..w[1] as usize)
                .map(|i| (et[i], idx[i]))
                .collect()
        })
        .collect();
    Ok((splits, lists))
}

/// What the spec says: each distinct event (once as (min, max) when undirected) in the split
/// its time picks, by (time, src, dst); the graph every event up to the first time, and every
/// self loop.
fn reference(
    edges: &[(u64, u64)],
    times: &[i64],
    at: &[(&str, i64)],
    undirected: bool,
) -> (Splits, Lists) {
    let n = edges.iter().map(|&(a, b)| a.max(b) + 1).max().unwrap_or(0);
    let mut splits: Splits = at.iter().map(|(s, _)| (s.to_string(), vec![])).collect();
    splits.insert(TRAIN.into(), vec![]);
    let mut lists = vec![Vec::new(); n as usize];
    for (&(s, d), &t) in edges.iter().zip(times) {
        let split = at.iter().rposition(|&(_, b)| t > b);
        if s == d || split.is_none() {
            lists[d as usize].push((t, s));
            if undirected && s != d {
                lists[s as usize].push((t, d));
            }
        }
        if s == d {
            continue;
        }
        let name = split.map_or(TRAIN, |i| at[i].0);
        let (a, b) = if undirected {
            (s.min(d), s.max(d))
        } else {
            (s, d)
        };
        splits.get_mut(name).unwrap().push((a, b, t));
    }
    for v in splits.values_mut() {
        v.sort_unstable_by_key(|&(s, d, t)| (t, s, d));
        v.dedup();
    }
    for l in &mut lists {
        l.sort_unstable();
    }
    (splits, lists)
}

#[test]
fn events_split_by_time_worked_by_hand() {
    // (src, dst, time); val=5, test=7.
    let ev = [
        (0, 1, 1),
        (1, 2, 2),
        (2, 3, 5),
        (0, 1, 6),
        (3, 0, 7),
        (1, 1, 8),
        (2, 0, 9),
        (0, 2, 9),
        (4, 0, 3),
        (0, 1, 6),
    ];
    let e: Vec<(u64, u64)> = ev.iter().map(|&(s, d, _)| (s, d)).collect();
    let t: Vec<i64> = ev.iter().map(|&(_, _, t)| t).collect();
    let at = [("val", 5), ("test", 7)];
    for sizes in [tiny(1), tiny(2), roomy()] {
        let (splits, lists) = build_split(&e, &t, &at, false, sizes).unwrap();
        assert_eq!(
            splits["train"],
            [(0, 1, 1), (1, 2, 2), (4, 0, 3), (2, 3, 5)]
        );
        assert_eq!(splits["val"], [(0, 1, 6), (3, 0, 7)]);
        assert_eq!(splits["test"], [(0, 2, 9), (2, 0, 9)]);
        assert_eq!(
            lists,
            vec![
                vec![(3, 4)],
                vec![(1, 0), (8, 1)],
                vec![(2, 1)],
                vec![(5, 2)],
                vec![]
            ]
        );
        let (splits, lists) = build_split(&e, &t, &at, true, sizes).unwrap();
        assert_eq!(
            splits["train"],
            [(0, 1, 1), (1, 2, 2), (0, 4, 3), (2, 3, 5)]
        );
        assert_eq!(splits["val"], [(0, 1, 6), (0, 3, 7)]);
        assert_eq!(splits["test"], [(0, 2, 9)]);
        assert_eq!(lists[0], [(1, 1), (3, 4)]);
        assert_eq!(lists[1], [(1, 0), (2, 2), (8, 1)]);
    }
}

#[test]
fn large_splits_spill_and_merge_as_the_reference_says() {
    // 70K events: train's (about 49K) take 12 runs of 4096, val's and test's a few each.
    let mut r = crate::rng::stream(5, 6, 7);
    let n = 500;
    let e: Vec<(u64, u64)> = (0..70_000)
        .map(|_| (crate::rng::below(&mut r, n), crate::rng::below(&mut r, n)))
        .collect();
    let t: Vec<i64> = (0..e.len())
        .map(|_| crate::rng::below(&mut r, 1000) as i64 - 300)
        .collect();
    let at = [("val", 400), ("test", 550)];
    let mid = Sizes {
        chunk: 1024,
        pass1_bytes: 1 << 16,
        group_bytes: 1 << 15,
        workers: 2,
    };
    for undirected in [false, true] {
        let want = reference(&e, &t, &at, undirected);
        for sizes in [mid, roomy()] {
            assert_eq!(build_split(&e, &t, &at, undirected, sizes).unwrap(), want);
        }
    }
}

#[test]
fn a_train_split_beyond_one_merge_pass_merges_in_several() {
    // 15 runs of 4096 a merge: 80K train events are 20 runs, two passes.
    let n = 1 << 12;
    let e: Vec<(u64, u64)> = (0..80_000u64).map(|i| (i % n, (i * 7 + 1) % n)).collect();
    let t: Vec<i64> = (0..e.len() as i64).map(|i| (i * 7919) % 100_000).collect();
    let at = [("val", 99_990)];
    let want = reference(&e, &t, &at, false);
    assert_eq!(build_split(&e, &t, &at, false, roomy()).unwrap(), want);
}

#[test]
fn a_split_by_time_needs_times_and_times_need_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut staging = Staging::create(&dir.path().join("ds"), false, &NoProgress).unwrap();
    let plan = LinkPlan::Times(vec![("val".into(), 1)]);
    let mut src = VecSource::new(vec![(0, 1)]);
    let o = opts(false, false, false, None);
    let e = build_graph_split(&mut src, &o, Some(&plan), &mut staging, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--link-split-time needs edge times: give --edge-time T.npy"),
        "{e}"
    );
}
