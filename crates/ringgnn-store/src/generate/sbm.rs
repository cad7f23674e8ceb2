//! Degree-corrected planted-partition graph with power-law degrees, noisy class-signal features,
//! labels and splits: a dataset on which a GNN clearly beats an MLP. The model is documented in
//! `docs/generators.md`; the constants below are its parameters.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rand_xoshiro::rand_core::Rng as _;

use super::chunked::{ChunkGen, ChunkedSource};
use crate::builder::{build_graph_split, spill_bytes};
use crate::convert::{add_node_times, assemble};
use crate::link::LinkSplitOptions;
use crate::manifest::{FeatureDtype, LabelInfo};
use crate::node_files::{split_file, write_i64_file, FeatureWriter, LABELS_FILE};
use crate::options::{GraphOptions, SelfLoops};
use crate::progress::Progress;
use crate::rng::{self, Rng};
use crate::space::Need;
use crate::writer::Staging;
use crate::{Manifest, Result};

#[derive(Clone, Debug)]
pub struct SbmOptions {
    pub out: PathBuf,
    pub nodes: u64,
    pub classes: u64,
    /// Mean in-degree of the stored (directed, both directions) graph.
    pub avg_degree: f64,
    pub feature_dim: u64,
    pub feature_dtype: FeatureDtype,
    pub seed: u64,
    /// Fractions of nodes for train/val/test (each in [0,1], summing to <= 1).
    pub split: Vec<(String, f64)>,
    /// memory / threads are used; the graph is always undirected, self loops dropped.
    pub graph: GraphOptions,
    pub overwrite: bool,
}

/// Probability that an edge's second endpoint is drawn from the first endpoint's class (else
/// from all nodes). Edge homophily is then `P_IN + (1 - P_IN) / C`.
pub const P_IN: f64 = 0.8;
/// Exponent of the power law of the degree weights: `P(theta > x) = x^-(GAMMA-1)`, `x >= 1`.
pub const GAMMA: f64 = 2.5;
/// How informative one node's features are: the nearest-class-mean classifier on them is right
/// with probability `1/C + FEATURE_SIGNAL * (1 - 1/C)` (half-way from chance to perfect, so an
/// MLP lands near 50% with 10 classes while neighbor averaging lifts a GNN far above).
pub const FEATURE_SIGNAL: f64 = 0.45;

// Rng purposes (see `rng::stream`).
const PURPOSE_CLASSES: u64 = 0x0073_626d_0001; // "sbm" 1
const PURPOSE_THETA: u64 = 0x0073_626d_0002;
const PURPOSE_EDGES: u64 = 0x0073_626d_0003;
const PURPOSE_MEANS: u64 = 0x0073_626d_0004;
const PURPOSE_CALIBRATE: u64 = 0x0073_626d_0005;
const PURPOSE_FEATURES: u64 = 0x0073_626d_0006;
const PURPOSE_SPLIT: u64 = 0x0073_626d_0007;

/// Undirected edges per rng stream, and feature rows per rng stream. Part of the output's
/// definition: changing either changes every dataset.
pub const EDGE_CHUNK: u64 = 1 << 14;
pub const ROW_CHUNK: u64 = 256;

/// `ringgnn generate sbm`: graph, features, labels and splits.
pub fn generate_sbm(opts: &SbmOptions, progress: &dyn Progress) -> Result<Manifest> {
    generate_sbm_split(opts, None, progress)
}

/// [`generate_sbm`], holding out the link split `link` from the graph as `convert` does
/// (`--link-split`, `--link-split-time`, `--link-negatives`; both directions of a pair go).
pub fn generate_sbm_split(
    opts: &SbmOptions,
    link: Option<&LinkSplitOptions>,
    progress: &dyn Progress,
) -> Result<Manifest> {
    let edges = check(opts)?;
    let graph_opts = GraphOptions {
        undirected: true,
        self_loops: SelfLoops::Drop,
        num_nodes: Some(opts.nodes),
        ..opts.graph.clone()
    };
    let plan = super::plan(link, opts.seed, &graph_opts)?;
    let sizes = split_sizes(&opts.split, opts.nodes);
    let mut staging = Staging::create(&opts.out, opts.overwrite, progress)?;
    let (n, c) = (opts.nodes, opts.classes);
    let keys = edges.saturating_mul(2); // undirected
    let mut need = Need::new();
    need.graph("the graph", n, keys)
        .add(
            "the sort's spill",
            spill_bytes(n, keys, opts.graph.times.edges.is_some()),
        )
        .nodes(
            "the graph",
            n,
            Some(opts.feature_dim.saturating_mul(opts.feature_dtype.size())),
            true,
        )
        .rows("the splits", sizes.iter().sum(), 8);
    staging.check_room(&need)?;

    let classes = draw_classes(n, c, opts.seed);
    let model = Model::new(&classes, c, opts.seed);
    let mut source = ChunkedSource::new(model, edges, EDGE_CHUNK, true, opts.graph.threads);
    let graph = build_graph_split(
        &mut source,
        &graph_opts,
        plan.as_ref(),
        &mut staging,
        progress,
    )?;
    drop(source); // the sampling tables

    let means = ClassMeans::new(c, opts.feature_dim, opts.seed);
    let features = write_features(&mut staging, &means, &classes, opts, progress)?;

    let labels: Vec<i64> = classes.iter().map(|&k| k as i64).collect();
    write_i64_file(&mut staging, "labels", LABELS_FILE, &labels)?;
    drop(labels);
    let label_info = LabelInfo {
        num_classes: c,
        num_labeled: n,
    };

    let mut splits = BTreeMap::new();
    for ((name, _), ids) in opts.split.iter().zip(draw_splits(&sizes, n, opts.seed)) {
        write_i64_file(
            &mut staging,
            &format!("split.{name}"),
            &split_file(name),
            &ids,
        )?;
        splits.insert(name.clone(), ids.len() as u64);
    }

    let source = serde_json::json!({
        "command": "generate",
        "generator": "sbm",
        "nodes": n,
        "classes": c,
        "avg_degree": opts.avg_degree,
        "feature_dim": opts.feature_dim,
        "feature_dtype": opts.feature_dtype.name(),
        "seed": opts.seed,
        "split": opts.split.iter().map(|(k, f)| (k.clone(), serde_json::json!(f))).collect::<serde_json::Map<_, _>>(),
        "generated_edges": edges,
        "p_in": P_IN,
        "gamma": GAMMA,
        "theta_cap": theta_cap(n),
        "feature_signal": FEATURE_SIGNAL,
        "mean_norm": means.delta,
        "dedup": opts.graph.dedup,
    });
    let mut manifest = assemble(&graph, Some(features), Some(label_info), splits, source);
    add_node_times(&mut manifest, &mut staging, &opts.graph.times)?;
    let at = (opts.seed, opts.graph.memory);
    super::add_edge_splits(&mut manifest, &mut staging, &graph, link, at, progress)?;
    // The committed manifest, with the `files` the staging filled in.
    Manifest::read(&staging.commit(manifest)?)
}

/// Validate the options; returns the number of undirected edges to generate.
fn check(opts: &SbmOptions) -> Result<u64> {
    let (n, c) = (opts.nodes, opts.classes);
    if !(2..=1 << 32).contains(&n) {
        return crate::input_err!("--nodes {n} is out of range: use 2 to 2^32");
    }
    if c < 2 || c > n {
        return crate::input_err!("--classes {c} is out of range: use 2 to --nodes ({n})");
    }
    if !(opts.avg_degree.is_finite() && opts.avg_degree > 0.0) {
        return crate::input_err!(
            "--avg-degree must be a positive number, got {}",
            opts.avg_degree
        );
    }
    if opts.feature_dim < 1 || opts.feature_dim > 1 << 20 {
        return crate::input_err!(
            "--feature-dim {} is out of range: use 1 to 2^20",
            opts.feature_dim
        );
    }
    let mut total = 0.0;
    for (i, (name, f)) in opts.split.iter().enumerate() {
        if name.is_empty()
            || !name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
        {
            return crate::input_err!("--split: name '{name}' must be letters, digits, '_' or '-'");
        }
        if opts.split[..i].iter().any(|(other, _)| other == name) {
            return crate::input_err!("--split: '{name}' is given twice");
        }
        if !(0.0..=1.0).contains(f) {
            return crate::input_err!("--split: fraction {name}={f} must be between 0 and 1");
        }
        total += f;
    }
    if total > 1.0 + 1e-9 {
        return crate::input_err!("--split: fractions sum to {total}, more than 1; lower them");
    }
    let edges = (n as f64 * opts.avg_degree / 2.0).round();
    if edges >= (1u64 << 48) as f64 {
        return crate::input_err!(
            "--nodes {n} x --avg-degree {} asks for more than 2^48 edges",
            opts.avg_degree
        );
    }
    Ok(edges as u64)
}

/// Classes: exactly balanced (class k has `floor(N/C)` or `ceil(N/C)` nodes), in random order:
/// a seeded Fisher-Yates shuffle of `i mod C`.
pub fn draw_classes(n: u64, c: u64, seed: u64) -> Vec<u32> {
    let mut cls: Vec<u32> = (0..n).map(|i| (i % c) as u32).collect();
    let mut r = rng::stream(seed, PURPOSE_CLASSES, 0);
    for i in (1..cls.len()).rev() {
        let j = rng::below(&mut r, i as u64 + 1) as usize;
        cls.swap(i, j);
    }
    cls
}

/// Degree weights are capped at `sqrt(N)` (with minimum 1): the structural cutoff of
/// uncorrelated scale-free graphs, above which two hubs would be forced into multi-edges.
pub fn theta_cap(n: u64) -> f64 {
    (n as f64).sqrt().max(1.0)
}

/// Degree weights `theta_i = min(U^(-1/(GAMMA-1)), sqrt(N))`, U uniform in (0, 1].
pub fn draw_theta(n: u64, seed: u64) -> Vec<f64> {
    let mut r = rng::stream(seed, PURPOSE_THETA, 0);
    let cap = theta_cap(n);
    (0..n)
        .map(|_| {
            (1.0 - rng::unit_f64(&mut r))
                .powf(-1.0 / (GAMMA - 1.0))
                .min(cap)
        })
        .collect()
}

/// Walker/Vose alias tables for drawing in O(1): one over classes (weight = the class's total
/// theta) and one per class over its members (weight theta). Drawing a node from all nodes is
/// drawing a class, then a member: the same distribution, without a second N-sized table.
pub struct Model {
    seed: u64,
    class_prob: Vec<u32>,
    class_alias: Vec<u32>,
    /// Node ids grouped by class: class k owns `members[start[k]..start[k+1]]`.
    start: Vec<u64>,
    members: Vec<u32>,
    prob: Vec<u32>,
    alias: Vec<u32>,
    p_in: u64,
}

impl Model {
    pub fn new(classes: &[u32], c: u64, seed: u64) -> Self {
        let theta = draw_theta(classes.len() as u64, seed);
        let mut start = vec![0u64; c as usize + 1];
        classes.iter().for_each(|&k| start[k as usize + 1] += 1);
        for k in 0..c as usize {
            start[k + 1] += start[k];
        }
        let mut fill = start.clone();
        let mut members = vec![0u32; classes.len()];
        for (i, &k) in classes.iter().enumerate() {
            members[fill[k as usize] as usize] = i as u32;
            fill[k as usize] += 1;
        }
        let (mut prob, mut alias) = (vec![0u32; members.len()], vec![0u32; members.len()]);
        let mut class_weight = vec![0f64; c as usize];
        let mut w = Vec::new();
        for k in 0..c as usize {
            let (lo, hi) = (start[k] as usize, start[k + 1] as usize);
            w.clear();
            w.extend(members[lo..hi].iter().map(|&i| theta[i as usize]));
            class_weight[k] = w.iter().sum();
            build_alias(&w, &mut prob[lo..hi], &mut alias[lo..hi]);
        }
        let (mut class_prob, mut class_alias) = (vec![0u32; c as usize], vec![0u32; c as usize]);
        build_alias(&class_weight, &mut class_prob, &mut class_alias);
        Model {
            seed,
            class_prob,
            class_alias,
            start,
            members,
            prob,
            alias,
            p_in: (P_IN * 2f64.powi(64)) as u64,
        }
    }

    #[inline]
    fn member(&self, k: usize, r: &mut Rng) -> u64 {
        let (lo, hi) = (self.start[k] as usize, self.start[k + 1] as usize);
        let j = alias_pick(&self.prob[lo..hi], &self.alias[lo..hi], r.next_u64());
        self.members[lo + j] as u64
    }

    #[inline]
    fn class(&self, r: &mut Rng) -> usize {
        alias_pick(&self.class_prob, &self.class_alias, r.next_u64())
    }
}

impl ChunkGen for Model {
    fn chunk(&self, index: u64, out: &mut [(u64, u64)]) {
        let mut r = rng::stream(self.seed, PURPOSE_EDGES, index);
        for e in out.iter_mut() {
            let cu = self.class(&mut r);
            let u = self.member(cu, &mut r);
            let cv = if r.next_u64() < self.p_in {
                cu
            } else {
                self.class(&mut r)
            };
            *e = (u, self.member(cv, &mut r));
        }
    }
}

/// Draw from an alias table with one 64-bit word: the high half of `x * n` is the slot, the
/// low half is a uniform fraction independent of it, used as the coin.
#[inline]
fn alias_pick(prob: &[u32], alias: &[u32], x: u64) -> usize {
    let m = x as u128 * prob.len() as u128;
    let j = (m >> 64) as usize;
    let coin = ((m as u64) >> 32) as u32;
    if coin < prob[j] {
        j
    } else {
        alias[j] as usize
    }
}

/// Vose's alias method: slot j keeps itself with probability `prob[j] / 2^32`, else `alias[j]`.
fn build_alias(w: &[f64], prob: &mut [u32], alias: &mut [u32]) {
    let n = w.len();
    let total: f64 = w.iter().sum();
    let mut scaled: Vec<f64> = w.iter().map(|x| x * n as f64 / total).collect();
    let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&j| scaled[j] < 1.0);
    while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
        small.pop();
        prob[s] = (scaled[s] * 2f64.powi(32)) as u32;
        alias[s] = l as u32;
        scaled[l] -= 1.0 - scaled[s];
        if scaled[l] < 1.0 {
            large.pop();
            small.push(l);
        }
    }
    // Leftovers are 1 up to rounding: they keep themselves whatever the coin says.
    for j in small.into_iter().chain(large) {
        prob[j] = u32::MAX;
        alias[j] = j as u32;
    }
}

/// Standard normal pairs by Box-Muller.
fn fill_gauss(r: &mut Rng, out: &mut [f64]) {
    for pair in out.chunks_mut(2) {
        let u1 = 1.0 - rng::unit_f64(r); // (0, 1]
        let u2 = rng::unit_f64(r);
        let rad = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
        pair[0] = rad * c;
        if pair.len() > 1 {
            pair[1] = rad * s;
        }
    }
}

/// Class means `delta * u_k`: unit directions `u_k` (orthonormal when D >= C, else independent
/// random directions), with `delta` calibrated so that one node's features are exactly as
/// informative as [`FEATURE_SIGNAL`] says.
pub struct ClassMeans {
    pub dim: usize,
    /// C x D unit rows.
    pub dirs: Vec<f64>,
    pub delta: f64,
}

impl ClassMeans {
    pub fn new(c: u64, dim: u64, seed: u64) -> Self {
        let (c, d) = (c as usize, dim as usize);
        let mut r = rng::stream(seed, PURPOSE_MEANS, 0);
        let mut dirs = vec![0f64; c * d];
        let orthonormal = d >= c;
        for k in 0..c {
            let (done, row) = dirs.split_at_mut(k * d);
            let row = &mut row[..d];
            fill_gauss(&mut r, row);
            if orthonormal {
                // Modified Gram-Schmidt against the earlier rows.
                for prev in done.chunks(d) {
                    let p = dot(prev, row);
                    row.iter_mut().zip(prev).for_each(|(x, y)| *x -= p * y);
                }
            }
            let norm = dot(row, row).sqrt();
            row.iter_mut().for_each(|x| *x /= norm);
        }
        let mut m = ClassMeans {
            dim: d,
            dirs,
            delta: 0.0,
        };
        m.delta = m.calibrate(c, orthonormal, seed);
        m
    }

    pub fn row(&self, k: usize) -> &[f64] {
        &self.dirs[k * self.dim..(k + 1) * self.dim]
    }

    /// With `x = delta u_y + z`, z ~ N(0, I), the nearest mean is the right one iff
    /// `delta > t = max_{k != y} <z, u_k - u_y> / (1 - <u_y, u_k>)`. So the accuracy for a given
    /// delta is P(t < delta), and the delta for the target accuracy is a quantile of t,
    /// estimated from seeded samples.
    fn calibrate(&self, c: usize, orthonormal: bool, seed: u64) -> f64 {
        let target = 1.0 / c as f64 + FEATURE_SIGNAL * (1.0 - 1.0 / c as f64);
        let cost = c * if orthonormal { 1 } else { 2 * self.dim };
        let samples = ((1usize << 28) / cost).clamp(64, 20_000);
        let mut r = rng::stream(seed, PURPOSE_CALIBRATE, 0);
        let mut t = Vec::with_capacity(samples);
        let mut z = vec![0f64; if orthonormal { c } else { self.dim }];
        for _ in 0..samples {
            fill_gauss(&mut r, &mut z);
            if orthonormal {
                // <z, u_k> are then independent standard normals: sample them directly.
                let best = z[1..].iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
                t.push(best - z[0]);
            } else {
                let y = rng::below(&mut r, c as u64) as usize;
                let (uy, gy) = (self.row(y), dot(&z, self.row(y)));
                let best = (0..c)
                    .filter(|&k| k != y)
                    .map(|k| (dot(&z, self.row(k)) - gy) / (1.0 - dot(uy, self.row(k))))
                    .fold(f64::NEG_INFINITY, f64::max);
                t.push(best);
            }
        }
        t.sort_by(f64::total_cmp);
        let k = ((target * samples as f64).ceil() as usize).clamp(1, samples - 1);
        ((t[k - 1] + t[k]) / 2.0).max(0.0)
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Rows `x_i = delta u_{c_i} + z_i`, z_i ~ N(0, I): row chunk `j` (rows `j*ROW_CHUNK..`) from its
/// own rng stream, chunks made by `threads` workers and written in order.
fn write_features(
    staging: &mut Staging,
    means: &ClassMeans,
    classes: &[u32],
    opts: &SbmOptions,
    progress: &dyn Progress,
) -> Result<crate::manifest::FeatureInfo> {
    let d = means.dim;
    let n = classes.len() as u64;
    let mut w = FeatureWriter::new(staging, d as u64, opts.feature_dtype)?;
    progress.stage("features", Some(n), "rows");
    let threads = opts.graph.threads.max(1) as u64;
    let chunks = n.div_ceil(ROW_CHUNK);
    let make = |j: u64| -> Vec<f32> {
        let rows =
            (j * ROW_CHUNK..((j + 1) * ROW_CHUNK).min(n)).map(|i| classes[i as usize] as usize);
        let mut r = rng::stream(opts.seed, PURPOSE_FEATURES, j);
        let mut z = vec![0f64; d];
        let mut out = Vec::with_capacity(ROW_CHUNK as usize * d);
        for k in rows {
            fill_gauss(&mut r, &mut z);
            out.extend(
                z.iter()
                    .zip(means.row(k))
                    .map(|(z, u)| (means.delta * u + z) as f32),
            );
        }
        out
    };
    let mut j = 0;
    while j < chunks {
        let batch: Vec<Vec<f32>> = if threads == 1 {
            vec![make(j)]
        } else {
            let hi = (j + threads).min(chunks);
            std::thread::scope(|s| {
                let hs: Vec<_> = (j..hi).map(|k| s.spawn(move || make(k))).collect();
                hs.into_iter()
                    .map(|h| h.join().expect("feature thread panicked"))
                    .collect()
            })
        };
        for rows in batch {
            for row in rows.chunks(d) {
                w.push_row(row)?;
            }
            progress.advance((rows.len() / d) as u64)?;
            j += 1;
        }
    }
    let (info, entry) = w.finish()?;
    staging.add("features", entry);
    Ok(info)
}

/// Exact split sizes by cumulative rounding: split k gets `round(N * F_k) - round(N * F_{k-1})`
/// nodes, F_k the sum of the first k fractions, so the sizes never add up to more than N.
pub fn split_sizes(split: &[(String, f64)], n: u64) -> Vec<u64> {
    let mut cum = 0.0;
    let mut prev = 0u64;
    split
        .iter()
        .map(|(_, f)| {
            cum += f;
            let b = ((n as f64 * cum).round() as u64).min(n);
            let size = b - prev;
            prev = b;
            size
        })
        .collect()
}

/// A uniformly random partition with exact sizes, by selection sampling: node i joins split k
/// with probability (places left in k) / (nodes left). Ids come out ascending.
pub fn draw_splits(sizes: &[u64], n: u64, seed: u64) -> Vec<Vec<i64>> {
    let mut r = rng::stream(seed, PURPOSE_SPLIT, 0);
    let mut left: Vec<u64> = sizes.to_vec();
    let mut out: Vec<Vec<i64>> = sizes
        .iter()
        .map(|&s| Vec::with_capacity(s as usize))
        .collect();
    let mut any = left.iter().sum::<u64>();
    for i in 0..n {
        if any == 0 {
            break;
        }
        let mut x = rng::below(&mut r, n - i);
        for (k, l) in left.iter_mut().enumerate() {
            if x < *l {
                *l -= 1;
                any -= 1;
                out[k].push(i as i64);
                break;
            }
            x -= *l;
        }
    }
    out
}

#[cfg(test)]
mod tests;
