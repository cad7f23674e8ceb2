//! Edge times through the builder: each list ordered by (time, source), whatever the budget and
//! the workers, exactly as an in-memory sort orders it; the times' count checked against the
//! edges'; `--undirected` gives the reverse edge the same time, dropped self-loops drop theirs.

use super::*;
use crate::npy::write_npy;
use crate::options::{TimeInput, TimeOptions};
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

/// Each node's in-edges as (time, source).
type Lists = Vec<Vec<(i64, u64)>>;

/// Build `edges` at `times`; the dataset's lists and its summary.
fn build_timed(
    edges: &[(u64, u64)],
    times: &[i64],
    o: &GraphOptions,
    sizes: Sizes,
) -> Result<(Lists, GraphSummary, tempfile::TempDir)> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mut staging = Staging::create(&out, false, &crate::NoProgress).unwrap();
    let mut src = VecSource::new(edges.to_vec());
    let mut timed = Timed::new(
        &mut src,
        Box::new(VecTimes(times.to_vec(), 0)),
        "the input".into(),
    );
    let g = build_with(&mut timed, o, None, &mut staging, &NoProgress, sizes)?;
    let m = crate::convert::assemble(&g, None, None, Default::default(), serde_json::Value::Null);
    staging.commit(m).unwrap();
    let ds = Dataset::open(&out).unwrap();
    check_keys(&ds, g.num_edges);
    let lists = (0..g.num_nodes)
        .map(|v| {
            let t = if g.edge_times.is_some() {
                ds.edge_times(v).unwrap()
            } else {
                vec![]
            };
            t.into_iter().zip(ds.neighbors(v).unwrap()).collect()
        })
        .collect();
    Ok((lists, g, dir))
}

/// A dataset with edge times has `edge_time_keys.bin`, whose every key is `key_of` its entry's
/// time and whose first bound is the smallest time; one without has none.
fn check_keys(ds: &Dataset, num_edges: u64) {
    use crate::time_keys::{key_of, read_bounds, HEADER_BYTES};
    let Some(times) = ds.edge_times_path() else {
        assert_eq!(ds.edge_time_keys_path(), None);
        return;
    };
    let path = ds
        .edge_time_keys_path()
        .expect("a keys file beside the times");
    assert!(path.ends_with("edge_time_keys.bin"), "{}", path.display());
    let bounds = read_bounds(&path).unwrap();
    let raw = std::fs::read(&path).unwrap();
    let raw_t = std::fs::read(times).unwrap();
    let n = num_edges as usize;
    let h = HEADER_BYTES as usize;
    let t: Vec<i64> = raw_t[..8 * n]
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let keys: Vec<u16> = raw[h..h + 2 * n]
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(Some(bounds[0]), t.iter().copied().min());
    for (i, (&t, &k)) in t.iter().zip(&keys).enumerate() {
        assert_eq!(Some(k), key_of(&bounds, t), "entry {i}, time {t}");
    }
}

/// The lists the spec defines, by an in-memory sort.
fn reference_timed(edges: &[(u64, u64)], times: &[i64], o: &GraphOptions) -> Lists {
    let n = o
        .num_nodes
        .unwrap_or_else(|| edges.iter().map(|&(a, b)| a.max(b) + 1).max().unwrap_or(0));
    let mut lists = vec![Vec::new(); n as usize];
    for (&(s, d), &t) in edges.iter().zip(times) {
        if s == d && o.self_loops == SelfLoops::Drop {
            continue;
        }
        lists[d as usize].push((t, s));
        if o.undirected && s != d {
            lists[s as usize].push((t, d));
        }
    }
    for l in &mut lists {
        l.sort_unstable();
        if o.dedup {
            l.dedup();
        }
    }
    lists
}

#[test]
fn lists_are_ordered_by_time_then_source() {
    // 4 edges into node 1 at times 5, 3, 3, 9 from sources 2, 7, 0, 1, and one into node 0.
    let e = [(2, 1), (7, 1), (0, 1), (1, 1), (3, 0)];
    let t = [5, 3, 3, 9, -4];
    let (lists, g, dir) = build_timed(&e, &t, &opts(false, false, false, None), roomy()).unwrap();
    assert_eq!(lists[1], [(3, 0), (3, 7), (5, 2), (9, 1)]);
    assert_eq!(lists[0], [(-4, 3)]);
    assert_eq!(g.edge_times, Some(TimeRange { min: -4, max: 9 }));
    // The bytes: indices then edge_times, entry for entry.
    let raw = std::fs::read(dir.path().join("ds/edge_times.bin")).unwrap();
    let times: Vec<i64> = raw[..40]
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(times, [-4, 3, 3, 5, 9]);
    assert_eq!(raw.len(), 4096);
    let m = crate::Manifest::read(&dir.path().join("ds")).unwrap();
    assert_eq!(m.version, 3);
    assert!(m.files.contains_key("edge_times"));
}

#[test]
fn undirected_dedup_and_self_loops_with_times() {
    // 0-1 at 4 twice (one copy kept by --dedup), 0-1 at 2 (kept: another time), a loop at 7.
    let e = [(0, 1), (0, 1), (1, 0), (2, 2)];
    let t = [4, 4, 2, 7];
    let o = opts(true, true, true, None);
    let (lists, g, _d) = build_timed(&e, &t, &o, roomy()).unwrap();
    assert_eq!(lists[0], [(2, 1), (4, 1)]);
    assert_eq!(lists[1], [(2, 0), (4, 0)]);
    assert!(lists[2].is_empty());
    assert_eq!(g.edge_times, Some(TimeRange { min: 2, max: 4 }));
    // Only a dropped self-loop: no edges, so no times.
    let (_, g, dir) =
        build_timed(&[(2, 2)], &[1], &opts(false, true, false, Some(3)), roomy()).unwrap();
    assert_eq!((g.num_edges, g.edge_times), (0, None));
    assert!(!dir.path().join("ds/edge_times.bin").exists());
    assert_eq!(
        crate::Manifest::read(&dir.path().join("ds"))
            .unwrap()
            .version,
        2
    );
}

#[test]
fn times_of_the_wrong_count_name_both_counts() {
    let e = [(0, 1), (1, 2), (2, 0)];
    let o = opts(false, false, false, None);
    let few = build_timed(&e, &[1, 2], &o, roomy())
        .unwrap_err()
        .to_string();
    assert!(
        few.contains("--edge-time t.npy has 2 times but the input has 3 edges"),
        "{few}"
    );
    let many = build_timed(&e, &[1, 2, 3, 4], &o, roomy())
        .unwrap_err()
        .to_string();
    assert!(
        many.contains("has 4 times but the input has 3 edges"),
        "{many}"
    );
    // Across many chunks too (chunk of 3 edges, 7 of them).
    let e: Vec<(u64, u64)> = (0..20).map(|i| (i, (i + 1) % 20)).collect();
    let msg = build_timed(&e, &[0; 19], &o, tiny(1))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("has 19 times but the input has 20 edges"),
        "{msg}"
    );
}

#[test]
fn link_splits_with_times_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.npy");
    write_npy(&path, "<i8", &[1], false, &[0u8; 8]).unwrap();
    let o = GraphOptions {
        times: TimeOptions {
            edges: Some(TimeInput::File(path)),
            nodes: None,
        },
        ..opts(false, false, false, None)
    };
    let plan = crate::link::LinkPlan::Fractions {
        fractions: vec![("val".into(), 0.5)],
        seed: 0,
    };
    let mut staging = Staging::create(&dir.path().join("ds"), false, &crate::NoProgress).unwrap();
    let mut src = VecSource::new(vec![(0, 1)]);
    let e = build_graph_split(&mut src, &o, Some(&plan), &mut staging, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--link-split and --edge-time cannot be combined: a graph with edge times is split by time (--link-split-time val=T1,test=T2)"),
        "{e}"
    );
}

#[test]
fn times_need_ids_below_2_32() {
    let r = build_timed(
        &[(0, 1 << 33)],
        &[0],
        &opts(false, false, false, None),
        roomy(),
    );
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("edge times need node ids below 2^32"), "{msg}");
}

#[test]
fn times_from_an_npy_file_through_build_graph() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.npy");
    let t: [i32; 3] = [30, -1, 30]; // int32 is widened
    write_npy(&path, "<i4", &[3], false, bytemuck::cast_slice(&t)).unwrap();
    let o = GraphOptions {
        times: TimeOptions {
            edges: Some(TimeInput::File(path)),
            nodes: None,
        },
        ..opts(false, false, false, None)
    };
    let out = dir.path().join("ds");
    let mut staging = Staging::create(&out, false, &crate::NoProgress).unwrap();
    let mut src = VecSource::new(vec![(5, 0), (1, 0), (2, 0)]);
    let g = build_graph(&mut src, &o, &mut staging, &NoProgress).unwrap();
    assert_eq!(g.edge_times, Some(TimeRange { min: -1, max: 30 }));
    let m = crate::convert::assemble(&g, None, None, Default::default(), serde_json::Value::Null);
    staging.commit(m).unwrap();
    let ds = Dataset::open(&out).unwrap();
    assert_eq!(ds.neighbors(0).unwrap(), [1, 2, 5]);
    assert_eq!(ds.edge_times(0).unwrap(), [-1, 30, 30]);
    assert!(ds.has_edge(5, 0).unwrap() && !ds.has_edge(3, 0).unwrap());
    assert_eq!(ds.edge_times_path(), Some(out.join("edge_times.bin")));
    assert_eq!(
        ds.edge_time_keys_path(),
        Some(out.join("edge_time_keys.bin"))
    );
    assert_eq!(ds.node_times_path(), None);
    check_keys(&ds, 3);
    // Times -1, 30, 30 (the sample is all three): a third of the buckets start at -1, the rest
    // at 30.
    let bounds = crate::time_keys::read_bounds(&out.join("edge_time_keys.bin")).unwrap();
    assert_eq!((bounds[0], bounds[21845], bounds[21846]), (-1, -1, 30));
    assert_eq!(bounds[65535], 30);
}

#[test]
fn a_build_stopped_while_deriving_keys_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.npy");
    write_npy(
        &path,
        "<i8",
        &[3],
        false,
        bytemuck::cast_slice(&[3i64, 1, 2]),
    )
    .unwrap();
    let o = GraphOptions {
        times: TimeOptions {
            edges: Some(TimeInput::File(path)),
            nodes: None,
        },
        ..opts(false, false, false, None)
    };
    let out = dir.path().join("ds");
    let progress = CancelAt("time keys", Default::default());
    let mut staging = Staging::create(&out, false, &progress).unwrap();
    let mut src = VecSource::new(vec![(5, 0), (1, 0), (2, 0)]);
    let r = build_graph(&mut src, &o, &mut staging, &progress);
    assert!(matches!(r, Err(Error::Interrupted)), "{r:?}");
    let left: Vec<String> = std::fs::read_dir(staging.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("edge_time_keys"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    drop(staging);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "only t.npy: {left:?}");
    assert!(!out.exists());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn timed_builds_match_an_in_memory_sort(
        edges in prop::collection::vec((0u64..30, 0u64..30, -3i64..4), 1..250),
        hub in prop::option::of(0u64..30),
        undirected: bool, drop: bool, dedup: bool,
        workers in 1usize..3,
    ) {
        let mut edges = edges;
        if let Some(h) = hub {
            // More in-edges than the tiny budget's group: re-partitioned, with repeated keys.
            edges.extend((0..60).map(|i| (i % 7, h, (i % 3) as i64)));
        }
        let (pairs, times): (Vec<(u64, u64)>, Vec<i64>) =
            edges.iter().map(|&(s, d, t)| ((s, d), t)).unzip();
        let o = opts(undirected, drop, dedup, None);
        let want = reference_timed(&pairs, &times, &o);
        let (a, _, _d1) = build_timed(&pairs, &times, &o, tiny(workers)).unwrap();
        let (b, _, _d2) = build_timed(&pairs, &times, &o, roomy()).unwrap();
        prop_assert_eq!(&a, &want);
        prop_assert_eq!(&b, &want);
    }
}
