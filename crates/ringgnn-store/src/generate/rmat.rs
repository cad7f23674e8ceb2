//! Graph500 R-MAT generator (a=0.57, b=0.19, c=0.19, d=0.05), ids permuted so hubs are scattered.
//!
//! Edges stream through [`ChunkedSource`] (in `chunked.rs`, shared with the SBM generator):
//! fixed-size chunks, chunk `i` drawn from its own rng stream, so the output depends only on the
//! seed, never on the thread count or on how the builder asks for edges.

use std::path::PathBuf;

use rand_xoshiro::rand_core::Rng as _;

use super::chunked::{ChunkGen, ChunkedSource};
use crate::builder::{build_graph_split, spill_bytes};
use crate::convert::{add_node_times, assemble};
use crate::link::LinkSplitOptions;
use crate::options::GraphOptions;
use crate::progress::Progress;
use crate::rng;
use crate::space::Need;
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
    generate_rmat_split(opts, None, progress)
}

/// [`generate_rmat`], holding out the link split `link` from the graph as `convert` does
/// (`--link-split`, `--link-split-time`, `--link-negatives`).
pub fn generate_rmat_split(
    opts: &RmatOptions,
    link: Option<&LinkSplitOptions>,
    progress: &dyn Progress,
) -> Result<Manifest> {
    let total = check(opts)?;
    let graph_opts = GraphOptions {
        num_nodes: Some(1u64 << opts.scale),
        ..opts.graph.clone()
    };
    let plan = super::plan(link, opts.seed, &graph_opts)?;
    let mut staging = Staging::create(&opts.out, opts.overwrite, progress)?;
    let (n, keys) = (
        1u64 << opts.scale,
        total.saturating_mul(if opts.graph.undirected { 2 } else { 1 }),
    );
    let mut need = Need::new();
    need.graph("the graph", n, keys).add(
        "the sort's spill",
        spill_bytes(n, keys, opts.graph.times.edges.is_some()),
    );
    staging.check_room(&need)?;
    let gen = Rmat::new(opts.scale, opts.seed);
    let mut source =
        ChunkedSource::new(gen, total, RMAT_CHUNK, opts.scale <= 32, opts.graph.threads);
    let graph = build_graph_split(
        &mut source,
        &graph_opts,
        plan.as_ref(),
        &mut staging,
        progress,
    )?;
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
    let mut manifest = assemble(&graph, None, None, Default::default(), source);
    add_node_times(&mut manifest, &mut staging, &opts.graph.times)?;
    let at = (opts.seed, opts.graph.memory);
    super::add_edge_splits(&mut manifest, &mut staging, &graph, link, at, progress)?;
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
mod tests;
