use super::*;
use crate::input::EdgeSource;
use crate::manifest::FeatureInfo;
use crate::{Dataset, NoProgress};

fn collect(src: &mut dyn EdgeSource, max: usize) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    while src.fill(&mut out, max).unwrap() > 0 {}
    out
}

fn edge_stream(
    n: u64,
    c: u64,
    seed: u64,
    total: u64,
    threads: usize,
) -> (Vec<u32>, ChunkedSource<Model>) {
    let classes = draw_classes(n, c, seed);
    let model = Model::new(&classes, c, seed);
    (
        classes,
        ChunkedSource::new(model, total, EDGE_CHUNK, true, threads),
    )
}

#[test]
fn classes_are_exactly_balanced_and_shuffled() {
    let cls = draw_classes(1003, 10, 4);
    let mut count = [0u32; 10];
    cls.iter().for_each(|&k| count[k as usize] += 1);
    assert!(count.iter().all(|&x| x == 100 || x == 101), "{count:?}");
    assert!(
        cls.windows(2).filter(|w| w[1] == (w[0] + 1) % 10).count() < 300,
        "not shuffled"
    );
    assert_eq!(cls, draw_classes(1003, 10, 4));
    assert_ne!(cls, draw_classes(1003, 10, 5));
}

#[test]
fn alias_tables_draw_in_proportion() {
    let w = [1.0, 0.0, 3.0, 0.5, 5.5];
    let (mut p, mut a) = ([0u32; 5], [0u32; 5]);
    build_alias(&w, &mut p, &mut a);
    let mut r = rng::stream(1, 1, 1);
    let n = 200_000;
    let mut count = [0f64; 5];
    (0..n).for_each(|_| count[alias_pick(&p, &a, r.next_u64())] += 1.0);
    for j in 0..5 {
        let q = w[j] / 10.0;
        let sd = (q * (1.0 - q) / n as f64).sqrt();
        assert!(
            (count[j] / n as f64 - q).abs() <= 5.0 * sd,
            "slot {j}: {count:?}"
        );
    }
}

#[test]
fn split_sizes_are_exact_and_drawn_uniformly() {
    let f = |v: &[f64]| v.iter().map(|&x| ("s".to_string(), x)).collect::<Vec<_>>();
    assert_eq!(split_sizes(&f(&[0.6, 0.2, 0.2]), 1000), [600, 200, 200]);
    assert_eq!(split_sizes(&f(&[1.0 / 3.0; 3]), 10), [3, 4, 3]);
    assert_eq!(split_sizes(&f(&[0.5, 0.0]), 7), [4, 0]);
    let sizes = [500, 300, 100];
    let s = draw_splits(&sizes, 1000, 9);
    let mut seen = vec![false; 1000];
    for (ids, &size) in s.iter().zip(&sizes) {
        assert_eq!(ids.len() as u64, size);
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        ids.iter().for_each(|&i| {
            assert!(!seen[i as usize]);
            seen[i as usize] = true;
        });
    }
    // Uniform: the first half of the ids holds about half of each split.
    let low = s[0].iter().filter(|&&i| i < 500).count();
    assert!((200..300).contains(&low), "{low}");
    assert_eq!(s, draw_splits(&sizes, 1000, 9));
    assert_ne!(s, draw_splits(&sizes, 1000, 10));
}

#[test]
fn edge_stream_ignores_fill_size_and_threads() {
    let total = 2 * EDGE_CHUNK + 77;
    let big = collect(&mut edge_stream(5000, 7, 3, total, 1).1, 1 << 20);
    assert_eq!(big.len() as u64, total);
    assert_eq!(collect(&mut edge_stream(5000, 7, 3, total, 1).1, 1), big);
    assert_eq!(collect(&mut edge_stream(5000, 7, 3, total, 3).1, 1000), big);
    assert_ne!(
        collect(&mut edge_stream(5000, 7, 4, total, 1).1, 1 << 20),
        big
    );
    let mut s = edge_stream(5000, 7, 3, total, 2).1;
    let mut out = Vec::new();
    s.fill(&mut out, 5).unwrap();
    assert!(s.rewind().unwrap());
    assert_eq!(collect(&mut s, 4096), big);
}

#[test]
fn edges_are_homophilous_and_degrees_skewed() {
    let (n, c) = (20_000u64, 5u64);
    let total = 100_000;
    let (classes, mut s) = edge_stream(n, c, 11, total, 2);
    let edges = collect(&mut s, 1 << 16);
    let same = edges
        .iter()
        .filter(|&&(u, v)| classes[u as usize] == classes[v as usize])
        .count() as f64;
    // Expected: P_IN + (1 - P_IN) * sum_k (Theta_k / Theta)^2.
    let theta = draw_theta(n, 11);
    let mut tk = vec![0f64; c as usize];
    theta
        .iter()
        .zip(&classes)
        .for_each(|(t, &k)| tk[k as usize] += t);
    let tot: f64 = tk.iter().sum();
    let p = P_IN + (1.0 - P_IN) * tk.iter().map(|x| (x / tot).powi(2)).sum::<f64>();
    let sd = (p * (1.0 - p) / total as f64).sqrt();
    assert!(
        (same / total as f64 - p).abs() < 5.0 * sd,
        "{} vs {p}",
        same / total as f64
    );
    // Degrees follow theta: the biggest hubs have tens of times the mean degree.
    let mut deg = vec![0u32; n as usize];
    edges.iter().for_each(|&(u, v)| {
        deg[u as usize] += 1;
        deg[v as usize] += 1;
    });
    let mean = 2.0 * total as f64 / n as f64;
    let max = *deg.iter().max().unwrap() as f64;
    assert!(max > 20.0 * mean, "max {max} mean {mean}");
    let low = deg.iter().filter(|&&d| (d as f64) < mean).count() as f64 / n as f64;
    assert!(
        low > 0.5,
        "a power law puts most nodes below the mean, got {low}"
    );
}

/// Nearest-true-mean accuracy of `x = delta u_y + z` on fresh samples.
fn ncm_accuracy(m: &ClassMeans, c: usize, samples: usize) -> f64 {
    let mut r = rng::stream(77, 0, 0);
    let mut z = vec![0f64; m.dim];
    let mut right = 0;
    for s in 0..samples {
        let y = s % c;
        fill_gauss(&mut r, &mut z);
        let x: Vec<f64> = z
            .iter()
            .zip(m.row(y))
            .map(|(z, u)| m.delta * u + z)
            .collect();
        let dist = |k: usize| {
            x.iter()
                .zip(m.row(k))
                .map(|(a, u)| (a - m.delta * u).powi(2))
                .sum::<f64>()
        };
        let best = (0..c).min_by(|&a, &b| dist(a).total_cmp(&dist(b))).unwrap();
        right += (best == y) as usize;
    }
    right as f64 / samples as f64
}

#[test]
fn feature_signal_is_calibrated() {
    for (c, d) in [(10u64, 32u64), (2, 8), (12, 4)] {
        let m = ClassMeans::new(c, d, 5);
        let orth = d >= c;
        for k in 0..c as usize {
            assert!((dot(m.row(k), m.row(k)) - 1.0).abs() < 1e-9);
            if orth && k > 0 {
                assert!(dot(m.row(k), m.row(0)).abs() < 1e-9);
            }
        }
        let target = 1.0 / c as f64 + FEATURE_SIGNAL * (1.0 - 1.0 / c as f64);
        let acc = ncm_accuracy(&m, c as usize, 20_000);
        assert!(
            (acc - target).abs() < 0.025,
            "C={c} D={d}: accuracy {acc}, target {target}"
        );
    }
}

fn opts(dir: &std::path::Path, name: &str, seed: u64) -> SbmOptions {
    SbmOptions {
        out: dir.join(name),
        nodes: 3000,
        classes: 5,
        avg_degree: 10.0,
        feature_dim: 16,
        feature_dtype: FeatureDtype::F32,
        seed,
        split: vec![
            ("train".into(), 0.6),
            ("val".into(), 0.2),
            ("test".into(), 0.2),
        ],
        graph: GraphOptions {
            threads: 2,
            ..GraphOptions::default()
        },
        overwrite: false,
    }
}

#[test]
fn bad_options_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let o = |f: &dyn Fn(&mut SbmOptions)| {
        let mut o = opts(dir.path(), "x", 1);
        f(&mut o);
        generate_sbm(&o, &NoProgress).unwrap_err().to_string()
    };
    assert!(o(&|o| o.nodes = 1).contains("--nodes"));
    assert!(o(&|o| o.classes = 1).contains("--classes"));
    assert!(o(&|o| o.classes = 3001).contains("--classes"));
    assert!(o(&|o| o.avg_degree = 0.0).contains("--avg-degree"));
    assert!(o(&|o| o.avg_degree = f64::NAN).contains("--avg-degree"));
    assert!(o(&|o| o.feature_dim = 0).contains("--feature-dim"));
    assert!(o(&|o| o.split[0].1 = 1.5).contains("between 0 and 1"));
    assert!(o(&|o| o.split[0].1 = 0.7).contains("sum to"));
    assert!(o(&|o| o.split[1].0 = "train".into()).contains("twice"));
    assert!(o(&|o| o.split[1].0 = "../x".into()).contains("letters"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

fn read_features(ds: &Dataset) -> (FeatureInfo, Vec<f32>) {
    let info = ds.manifest().features.clone().unwrap();
    let bytes = std::fs::read(ds.path_of("features").unwrap()).unwrap();
    let mut x = Vec::new();
    for i in 0..ds.num_nodes() {
        let off = info.row_offset(i) as usize;
        let row = &bytes[off..off + info.row_bytes as usize];
        x.extend(
            row.chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap())),
        );
    }
    (info, x)
}

/// Train nearest-class-mean on `train`, return its accuracy on `test`.
fn ncm(x: &[f64], d: usize, labels: &[i64], c: usize, train: &[i64], test: &[i64]) -> f64 {
    let mut mean = vec![0f64; c * d];
    let mut count = vec![0f64; c];
    for &i in train {
        let k = labels[i as usize] as usize;
        count[k] += 1.0;
        (0..d).for_each(|j| mean[k * d + j] += x[i as usize * d + j]);
    }
    (0..c * d).for_each(|j| mean[j] /= count[j / d]);
    let right = test
        .iter()
        .filter(|&&i| {
            let row = &x[i as usize * d..(i as usize + 1) * d];
            let dist = |k: usize| {
                row.iter()
                    .zip(&mean[k * d..])
                    .map(|(a, b)| (a - b).powi(2))
                    .sum::<f64>()
            };
            let best = (0..c).min_by(|&a, &b| dist(a).total_cmp(&dist(b))).unwrap();
            best as i64 == labels[i as usize]
        })
        .count();
    right as f64 / test.len() as f64
}

#[test]
fn dataset_is_complete_reproducible_and_rewards_neighbor_averaging() {
    let dir = tempfile::tempdir().unwrap();
    let m = generate_sbm(&opts(dir.path(), "a", 7), &NoProgress).unwrap();
    assert_eq!(m.num_nodes, 3000);
    assert_eq!(
        m.labels,
        Some(LabelInfo {
            num_classes: 5,
            num_labeled: 3000
        })
    );
    assert_eq!(
        m.splits,
        BTreeMap::from([
            ("train".into(), 1800),
            ("val".into(), 600),
            ("test".into(), 600)
        ])
    );
    // Undirected: twice the generated edges, less the few self loops.
    assert!(
        m.num_edges.is_multiple_of(2) && m.num_edges <= 30_000 && m.num_edges > 29_000,
        "{}",
        m.num_edges
    );

    // Same seed, other thread count: identical files. Other seed: different ones.
    let mut o = opts(dir.path(), "b", 7);
    o.graph.threads = 1;
    assert_eq!(generate_sbm(&o, &NoProgress).unwrap().files, m.files);
    let other = generate_sbm(&opts(dir.path(), "c", 8), &NoProgress).unwrap();
    for key in ["indices", "features", "labels", "split.train"] {
        assert_ne!(other.files[key], m.files[key], "{key}");
    }

    let ds = Dataset::open(&dir.path().join("a")).unwrap();
    let labels = ds.labels().unwrap().unwrap();
    let (train, test) = (ds.split("train").unwrap(), ds.split("test").unwrap());
    let (info, x) = read_features(&ds);
    let d = info.dim as usize;
    let x: Vec<f64> = x.into_iter().map(f64::from).collect();
    // Mean over the node and its in-neighbors, as a GCN layer would see it.
    let mut agg = x.clone();
    let mut same = 0usize;
    for v in 0..3000usize {
        let nb = ds.neighbors(v as u64).unwrap();
        for &u in &nb {
            same += (labels[u as usize] == labels[v]) as usize;
            (0..d).for_each(|j| agg[v * d + j] += x[u as usize * d + j]);
        }
        (0..d).for_each(|j| agg[v * d + j] /= (nb.len() + 1) as f64);
    }
    let homophily = same as f64 / m.num_edges as f64;
    assert!(
        (homophily - (P_IN + (1.0 - P_IN) / 5.0)).abs() < 0.02,
        "{homophily}"
    );
    let raw = ncm(&x, d, &labels, 5, &train, &test);
    let smooth = ncm(&agg, d, &labels, 5, &train, &test);
    let target = 0.2 + FEATURE_SIGNAL * 0.8;
    assert!(
        (raw - target).abs() < 0.07,
        "raw features: {raw}, calibrated for {target}"
    );
    assert!(
        smooth > 0.8 && smooth > raw + 0.2,
        "raw {raw}, neighbor-averaged {smooth}"
    );
}
