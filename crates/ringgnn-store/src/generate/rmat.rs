//! Graph500 R-MAT generator (a=0.57, b=0.19, c=0.19, d=0.05), ids permuted so hubs are scattered.
//!
//! Also home of [`ChunkedSource`], the edge stream both generators share: edges come in
//! fixed-size chunks, chunk `i` drawn from its own rng stream, so the output depends only on the
//! seed, never on the thread count or on how the builder asks for edges.

use std::path::PathBuf;

use rand_xoshiro::rand_core::Rng as _;

use super::chunked::{ChunkGen, ChunkedSource};
use crate::api::{assemble, GraphOptions};
use crate::build::build_graph;
use crate::progress::Progress;
use crate::rng;
use crate::writer::Staging;
use crate::{Manifest, Result};

#[derive(Clone, Debug)]
pub struct RmatOptions {
    pub out: PathBuf,
    /// 2^scale nodes.
    pub scale: u32,
    /// edge_factor * 2^scale generated edges (before --undirected doubling, self-loop drop, dedup).
    pub edge_factor: u64,
    pub seed: u64,
    /// undirected / self_loops / dedup / memory / threads as for convert; num_nodes is ignored (2^scale).
    pub graph: GraphOptions,
    pub overwrite: bool,
}

/// Largest supported scale: 2^40 nodes already need 8 TiB of `indptr`.
pub const MAX_SCALE: u32 = 40;

/// `ringgnn generate rmat`: 2^scale nodes, edge_factor * 2^scale R-MAT edges.
pub fn generate_rmat(opts: &RmatOptions, progress: &dyn Progress) -> Result<Manifest> {
    let total = check(opts)?;
    let mut staging = Staging::create(&opts.out, opts.overwrite)?;
    let graph_opts = GraphOptions {
        num_nodes: Some(1u64 << opts.scale),
        ..opts.graph.clone()
    };
    let gen = Rmat::new(opts.scale, opts.seed);
    let mut source =
        ChunkedSource::new(gen, total, RMAT_CHUNK, opts.scale <= 32, opts.graph.threads);
    let graph = build_graph(&mut source, &graph_opts, &mut staging, progress)?;
    let source = serde_json::json!({
        "command": "generate",
        "generator": "rmat",
        "scale": opts.scale,
        "edge_factor": opts.edge_factor,
        "a": A, "b": B, "c": C, "d": 1.0 - A - B - C,
        "generated_edges": total,
        "seed": opts.seed,
        "undirected": opts.graph.undirected,
        "self_loops": format!("{:?}", opts.graph.self_loops).to_lowercase(),
        "dedup": opts.graph.dedup,
    });
    let manifest = assemble(&graph, None, None, Default::default(), source);
    // The committed manifest, with the `files` the staging filled in.
    Manifest::read(&staging.commit(manifest)?)
}

/// Validate the options; returns the number of edges to generate.
fn check(opts: &RmatOptions) -> Result<u64> {
    if !(1..=MAX_SCALE).contains(&opts.scale) {
        return crate::input_err!(
            "--scale {} is out of range: use 1 to {MAX_SCALE} (2^scale nodes)",
            opts.scale
        );
    }
    if opts.edge_factor < 1 {
        return crate::input_err!(
            "--edge-factor must be at least 1 (edges per node), got {}",
            opts.edge_factor
        );
    }
    match opts.edge_factor.checked_mul(1u64 << opts.scale) {
        Some(e) if e < (1u64 << 48) => Ok(e),
        _ => crate::input_err!(
            "--edge-factor {} at --scale {} asks for more than 2^48 edges; lower one of them",
            opts.edge_factor,
            opts.scale
        ),
    }
}

/// Graph500 quadrant probabilities (d = 1 - a - b - c = 0.05).
pub const A: f64 = 0.57;
pub const B: f64 = 0.19;
pub const C: f64 = 0.19;

/// Quadrant thresholds on a 16-bit draw `x`: quadrant a if `x < T_A`, b below `T_AB`, c below
/// `T_ABC`, else d. The quantization error (< 2^-17 per probability) is far below sampling noise.
const T_A: u32 = 37356; // round(0.57 * 65536)
const T_AB: u32 = 49807; // round(0.76 * 65536)
const T_ABC: u32 = 62259; // round(0.95 * 65536)

/// Quadrant of a 16-bit draw as `2 * src_bit + dst_bit`: a=(0,0), b=(0,1), c=(1,0), d=(1,1).
/// src is set from c on, dst in b and d, which is the parity of the thresholds passed.
const fn quadrant(x: u32) -> u8 {
    let (a, ab, abc) = ((x >= T_A) as u8, (x >= T_AB) as u8, (x >= T_ABC) as u8);
    (ab << 1) | (a ^ ab ^ abc)
}

/// The draw is made 12 bits at a time: the quadrant of the 16-bit draws `y << 4 ..= y << 4 | 15`,
/// or [`UNDECIDED`] for the 3 of 4096 values of `y` whose range holds a threshold (then 4 more
/// bits decide). Same distribution as a 16-bit draw per level, five levels per u64, and a 4 KiB
/// table that stays in L1.
const UNDECIDED: u8 = 4;
static QUADRANT_OF_12_BITS: [u8; 4096] = {
    let mut t = [0u8; 4096];
    let mut y = 0;
    while y < 4096 {
        let (lo, hi) = (quadrant((y as u32) << 4), quadrant(((y as u32) << 4) | 15));
        t[y] = if lo == hi { lo } else { UNDECIDED };
        y += 1;
    }
    t
};

/// Bits 0, 2, 4, ... of `x`, packed: de-interleaves the 2-bit quadrant codes.
#[inline]
fn even_bits(mut x: u64) -> u64 {
    x &= 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x >> 4)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x >> 8)) & 0x0000_ffff_0000_ffff;
    (x | (x >> 16)) & 0x0000_0000_ffff_ffff
}

/// Rng purposes of this module (see [`rng::stream`]).
const PURPOSE_EDGES: u64 = 0x726d_6174_0001; // "rmat" 1
const PURPOSE_PERMUTE: u64 = 0x726d_6174_0002;

/// Edges per rng stream. Part of the output's definition: changing it changes every dataset.
pub const RMAT_CHUNK: u64 = 1 << 14;

/// The R-MAT edge generator for one (scale, seed).
#[derive(Clone, Debug)]
pub struct Rmat {
    scale: u32,
    seed: u64,
    perm: Permutation,
}

impl Rmat {
    pub fn new(scale: u32, seed: u64) -> Self {
        Rmat {
            scale,
            seed,
            perm: Permutation::new(scale, seed),
        }
    }

    /// Chunk `index` before the id permutation: level 0 picks the most significant bit.
    pub fn raw_chunk(&self, index: u64, out: &mut [(u64, u64)]) {
        let mut r = rng::stream(self.seed, PURPOSE_EDGES, index);
        let mut spare = Spare::default();
        let high = self.scale.saturating_sub(32);
        let low = self.scale - high;
        for e in out.iter_mut() {
            let mut code = levels(high, &mut r, &mut spare);
            let (mut src, mut dst) = (even_bits(code >> 1) << 32, even_bits(code) << 32);
            code = levels(low, &mut r, &mut spare);
            src |= even_bits(code >> 1);
            dst |= even_bits(code);
            *e = (src, dst);
        }
    }
}

/// Random nibbles for the rare undecided levels, 16 per u64 of the same stream.
#[derive(Default)]
struct Spare {
    word: u64,
    left: u32,
}

/// The quadrant codes of `n <= 32` levels, the first in the highest bits.
#[inline(always)]
fn levels(n: u32, r: &mut rng::Rng, spare: &mut Spare) -> u64 {
    let mut code = 0u64;
    let mut left = n;
    while left > 0 {
        let k = left.min(5);
        let mut w = r.next_u64();
        for _ in 0..k {
            let y = (w & 0xfff) as u32;
            w >>= 12;
            let mut q = QUADRANT_OF_12_BITS[y as usize];
            if q == UNDECIDED {
                if spare.left == 0 {
                    *spare = Spare {
                        word: r.next_u64(),
                        left: 16,
                    };
                }
                q = quadrant((y << 4) | (spare.word & 15) as u32);
                spare.word >>= 4;
                spare.left -= 1;
            }
            code = (code << 2) | q as u64;
        }
        left -= k;
    }
    code
}

impl ChunkGen for Rmat {
    fn chunk(&self, index: u64, out: &mut [(u64, u64)]) {
        self.raw_chunk(index, out);
        for e in out.iter_mut() {
            *e = (self.perm.apply(e.0), self.perm.apply(e.1));
        }
    }
}

/// A seeded bijection on `[0, 2^bits)`: rounds of xor-key, multiply-by-odd and xorshift, all
/// modulo 2^bits. Multiplication spreads low bits upward and the shift spreads high bits down,
/// so the R-MAT hubs (ids with many zero bits) land all over the id range. Cheap enough to
/// apply to every endpoint.
#[derive(Clone, Debug)]
pub struct Permutation {
    mask: u64,
    shift: u32,
    keys: [(u64, u64); 3],
}

impl Permutation {
    pub fn new(bits: u32, seed: u64) -> Self {
        assert!((1..=64).contains(&bits));
        let mut r = rng::stream(seed, PURPOSE_PERMUTE, bits as u64);
        let keys = [0; 3].map(|_| (r.next_u64(), r.next_u64() | 1));
        Permutation {
            mask: if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            },
            shift: bits.div_ceil(2),
            keys,
        }
    }

    #[inline]
    pub fn apply(&self, mut x: u64) -> u64 {
        for &(xor, mul) in &self.keys {
            x = ((x ^ xor).wrapping_mul(mul)) & self.mask;
            x ^= x >> self.shift;
        }
        x
    }
}

#[cfg(test)]
mod tests {
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
}
