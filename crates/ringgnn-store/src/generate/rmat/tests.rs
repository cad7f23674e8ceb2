use super::*;
use crate::input::EdgeSource;
use crate::{Dataset, NoProgress};

fn collect(src: &mut dyn EdgeSource, max: usize) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    while src.fill(&mut out, max).unwrap() > 0 {}
    out
}

fn stream(scale: u32, seed: u64, total: u64, threads: usize) -> ChunkedSource<Rmat> {
    ChunkedSource::new(Rmat::new(scale, seed), total, RMAT_CHUNK, true, threads)
}

#[test]
fn stream_ignores_fill_size_and_threads() {
    let total = 3 * RMAT_CHUNK + 123;
    let big = collect(&mut stream(12, 5, total, 1), 1 << 20);
    assert_eq!(big.len() as u64, total);
    assert_eq!(collect(&mut stream(12, 5, total, 1), 1), big);
    assert_eq!(collect(&mut stream(12, 5, total, 3), 777), big);
    assert_eq!(collect(&mut stream(12, 5, total, 4), 1 << 20), big);
    assert_ne!(collect(&mut stream(12, 6, total, 1), 1 << 20), big);
}

#[test]
fn position_counts_edges_handed_out() {
    let mut s = stream(4, 1, 100, 2);
    let mut out = Vec::new();
    assert_eq!(s.fill(&mut out, 30).unwrap(), 30);
    assert_eq!(s.position(), (30, Some(100)));
    assert_eq!(s.fill(&mut out, 1000).unwrap(), 70);
    assert_eq!(s.fill(&mut out, 1000).unwrap(), 0);
    assert_eq!(s.position(), (100, Some(100)));
    assert_eq!(s.unit(), "edges");
}

#[test]
fn dropping_a_half_read_source_stops_its_workers() {
    let mut s = stream(20, 1, 100 * RMAT_CHUNK, 4);
    let mut out = Vec::new();
    s.fill(&mut out, 10).unwrap();
    drop(s); // joins the workers; hangs if they kept waiting to send
}

#[test]
fn first_level_quadrants_follow_a_b_c_d() {
    let g = Rmat::new(10, 42);
    let n = 6 * RMAT_CHUNK as usize; // ~100k edges
    let mut edges = vec![(0, 0); n];
    for (i, c) in edges.chunks_mut(RMAT_CHUNK as usize).enumerate() {
        g.raw_chunk(i as u64, c);
    }
    let mut q = [0f64; 4];
    for &(s, d) in &edges {
        assert!(s < 1 << 10 && d < 1 << 10);
        q[((s >> 9) * 2 + (d >> 9)) as usize] += 1.0;
    }
    let expect = [A, B, C, 1.0 - A - B - C];
    for k in 0..4 {
        let p = expect[k];
        let sd = (p * (1.0 - p) / n as f64).sqrt();
        let got = q[k] / n as f64;
        assert!((got - p).abs() < 5.0 * sd, "quadrant {k}: {got} vs {p}");
    }
    // Every level is drawn the same way: check the last one too.
    let low_a = edges
        .iter()
        .filter(|&&(s, d)| s & 1 == 0 && d & 1 == 0)
        .count() as f64
        / n as f64;
    assert!((low_a - A).abs() < 0.01, "{low_a}");
}

#[test]
fn table_agrees_with_the_16_bit_thresholds() {
    let mut undecided = 0;
    for y in 0..4096u32 {
        let q = QUADRANT_OF_12_BITS[y as usize];
        if q == UNDECIDED {
            undecided += 1;
        } else {
            assert!((0..16).all(|lo| quadrant((y << 4) | lo) == q), "y = {y}");
        }
    }
    assert_eq!(undecided, 3);
    let count = |q: u8| (0..65536).filter(|&x| quadrant(x) == q).count() as u32;
    assert_eq!(
        [count(0), count(1), count(2), count(3)],
        [T_A, T_AB - T_A, T_ABC - T_AB, 65536 - T_ABC]
    );
}

#[test]
fn scales_above_32_use_wide_ids() {
    let g = Rmat::new(36, 1);
    let mut edges = vec![(0, 0); 4096];
    g.chunk(0, &mut edges);
    assert!(edges.iter().all(|&(s, d)| s < 1 << 36 && d < 1 << 36));
    assert!(edges.iter().filter(|&&(s, _)| s >= 1 << 32).count() > 2048);
    g.raw_chunk(0, &mut edges);
    let top = edges
        .iter()
        .filter(|&&(s, d)| s >> 35 == 0 && d >> 35 == 0)
        .count() as f64;
    assert!((top / 4096.0 - A).abs() < 0.04, "{top}");
}

#[test]
fn permutation_is_a_bijection() {
    for bits in 1..=16 {
        for seed in [0, 1, 99] {
            let p = Permutation::new(bits, seed);
            let mut seen = vec![false; 1 << bits];
            for x in 0..1u64 << bits {
                let y = p.apply(x) as usize;
                assert!(!seen[y], "bits {bits} seed {seed}: {x} collides");
                seen[y] = true;
            }
        }
    }
    // Keyed by the seed, and not the identity.
    let (p, q) = (Permutation::new(20, 1), Permutation::new(20, 2));
    assert!((0..100).any(|x| p.apply(x) != q.apply(x)));
    assert!((0..100).filter(|&x| p.apply(x) == x).count() < 5);
}

#[test]
fn hubs_are_scattered() {
    // Unpermuted, node 0 is the biggest hub; after permutation the top hubs are spread out.
    let total = 4 * RMAT_CHUNK;
    let edges = collect(&mut stream(14, 3, total, 1), 1 << 20);
    assert!(edges.iter().all(|&(s, d)| s < 1 << 14 && d < 1 << 14));
    let mut deg = vec![0u32; 1 << 14];
    edges.iter().for_each(|&(s, _)| deg[s as usize] += 1);
    let mut ids: Vec<usize> = (0..deg.len()).collect();
    ids.sort_by_key(|&i| std::cmp::Reverse(deg[i]));
    let top = &ids[..16];
    assert!(
        deg[top[0]] as f64 > 20.0 * total as f64 / (1 << 14) as f64,
        "no hub: {}",
        deg[top[0]]
    );
    let below_16th = top.iter().filter(|&&i| i < (1 << 14) / 16).count();
    assert!(below_16th < 8, "hubs cluster at low ids: {top:?}");
}

fn opts(dir: &std::path::Path, name: &str, seed: u64) -> RmatOptions {
    RmatOptions {
        out: dir.join(name),
        scale: 10,
        edge_factor: 8,
        seed,
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
    for (scale, ef, what) in [
        (0, 8, "--scale"),
        (41, 8, "--scale"),
        (10, 0, "--edge-factor"),
        (40, 1 << 20, "2^48"),
    ] {
        let o = RmatOptions {
            scale,
            edge_factor: ef,
            ..opts(dir.path(), "x", 1)
        };
        let e = generate_rmat(&o, &NoProgress).unwrap_err().to_string();
        assert!(e.contains(what), "{e}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn dataset_has_all_nodes_and_edges_and_is_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let m1 = generate_rmat(&opts(dir.path(), "a", 7), &NoProgress).unwrap();
    assert_eq!(m1.num_nodes, 1 << 10);
    assert_eq!(m1.num_edges, 8 << 10);
    assert_eq!(m1.source["generator"], "rmat");
    let ds = Dataset::open(&dir.path().join("a")).unwrap();
    let indptr = ds.load_indptr().unwrap();
    assert_eq!(indptr.len(), (1 << 10) + 1);
    assert_eq!(*indptr.last().unwrap(), 8 << 10);
    // Same seed (any thread count): the same files; another seed: different ones.
    let mut o = opts(dir.path(), "b", 7);
    o.graph.threads = 1;
    let m2 = generate_rmat(&o, &NoProgress).unwrap();
    assert_eq!(m1.files, m2.files);
    let m3 = generate_rmat(&opts(dir.path(), "c", 8), &NoProgress).unwrap();
    assert_ne!(m1.files["indices"], m3.files["indices"]);
}

#[test]
fn undirected_adds_reverses_and_self_loops_drop() {
    let dir = tempfile::tempdir().unwrap();
    let loops = collect(&mut stream(10, 7, 8 << 10, 1), 1 << 20)
        .iter()
        .filter(|e| e.0 == e.1)
        .count() as u64;
    assert!(loops > 0);
    // A self loop is its own reverse: undirected adds it once.
    let mut o = opts(dir.path(), "u", 7);
    o.graph.undirected = true;
    let m = generate_rmat(&o, &NoProgress).unwrap();
    assert_eq!(m.num_edges, (16 << 10) - loops);
    let mut o = opts(dir.path(), "s", 7);
    o.graph.self_loops = crate::SelfLoops::Drop;
    let m = generate_rmat(&o, &NoProgress).unwrap();
    assert_eq!(m.num_edges, (8 << 10) - loops);
}
