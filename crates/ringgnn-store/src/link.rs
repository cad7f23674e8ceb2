//! Edge splits for link prediction (format version 2, `docs/FORMAT.md` "Edge splits"):
//! `convert --link-split val=0.05,test=0.1` holds out a random part of the edges while the CSC is
//! written, so the training graph never contains a held-out pair, and stores every split's pairs;
//! then [`attach_negatives`] draws the fixed evaluation negatives of each held-out split.
//! `--link-split val=val.npy,test=test.npy` holds out the listed pairs instead ([`given`]).
//!
//! The decision for a pair is a hash of (seed, pair), not a draw from a sequence: the builder
//! meets the two directions of an undirected pair (and the copies of a parallel edge) at
//! different times, and a pure function of the pair sends them all the same way with no memory
//! of earlier decisions, whatever the budget and the thread count. The price is that a split's
//! size is binomial (each distinct pair is held out independently with probability f), not
//! exactly `floor(f * pairs)` as PyG's `RandomLinkSplit` makes it.

mod given;

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use given::GivenPairs;

use crate::manifest::{EdgeSplitInfo, FileEntry};
use crate::progress::Progress;
use crate::rng::{self, mix64};
use crate::writer::{BinWriter, Staging};
use crate::{input_err, Error, IoContext, Result};

/// Name of the split that holds the edges left in the training graph.
pub const TRAIN: &str = "train";
/// `purpose` of the hash that assigns pairs to splits (ASCII "lsplit").
const SPLIT_HASH: u64 = 0x6c_73_70_6c_69_74;
/// `purpose` of the streams that draw evaluation negatives (ASCII "lneg").
const NEG_STREAM: u64 = 0x6c_6e_65_67;
/// Slack so that fractions such as 0.1 + 0.2 are not refused as above 1.
const FRACTION_EPS: f64 = 1e-9;
/// Pairs per write of a split file.
const CHUNK: usize = 1 << 15;

/// How `--link-split` holds out edges.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkSplitSpec {
    /// Held-out split name -> fraction of the distinct pairs (self loops are never held out);
    /// what is left is the `train` split.
    Fractions(Vec<(String, f64)>),
    /// Split name -> `.npy` edge list ((2, n) or (n, 2), int32/int64/uint32/uint64). Every
    /// split but `train` is held out; `train`, when listed, is stored instead of every pair left
    /// in the graph, and each of its pairs must be one.
    Files(Vec<(String, PathBuf)>),
}

/// Everything `convert` needs for an edge split.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSplitOptions {
    pub spec: LinkSplitSpec,
    /// Fixed negatives stored per held-out pair (`--link-negatives`, 0 = none).
    pub negatives: u64,
    /// Split name -> `.npy` int64 `(n, K)` negatives to store as given instead of drawing them,
    /// row `i` for pair `i` of the split in the stored order (ascending `(dst, src)`); listed
    /// splits of a relation only (a GraphBolt task's negatives).
    pub given_negatives: Vec<(String, PathBuf)>,
    /// Split name -> `.npy` integer `(m, 2)` negative (src, dst) pairs shared by every pair of
    /// the held-out split (OGB's `edge_neg`), stored as given in `edge_shared_negatives.NAME`.
    pub shared_negatives: Vec<(String, PathBuf)>,
    /// Listed held-out pairs need not be edges of the input: one it lacks is stored all the
    /// same (a GraphBolt task's validation pairs may already be out of its graph).
    pub absent_ok: bool,
}

impl LinkSplitOptions {
    /// Hold out `spec`'s pairs with `negatives` drawn negatives each.
    pub fn new(spec: LinkSplitSpec, negatives: u64) -> Self {
        LinkSplitOptions {
            spec,
            negatives,
            given_negatives: Vec::new(),
            shared_negatives: Vec::new(),
            absent_ok: false,
        }
    }
}

/// A link split ready for the build: how the emitter decides each pair.
#[derive(Clone, Debug)]
pub enum LinkPlan {
    /// By a hash of (seed, pair), see [`LinkSplitSpec::Fractions`].
    Fractions {
        fractions: Vec<(String, f64)>,
        seed: u64,
    },
    /// The listed pairs, loaded and checked.
    Given(Arc<GivenPairs>),
    /// A relation of a heterogeneous dataset split by `inner`. When `bipartite` (its two ends
    /// are different node types) `(i, i)` is a pair like any other, not a self loop. When
    /// `mirror` it is the reverse `D:rev_R:S` of the split relation `S:R:D`: it drops every pair
    /// `inner` holds out, swapped, so that nothing leaks through the reverse, and records no
    /// split of its own; a listed pair the reverse lacks is not an error. See
    /// [`LinkPlan::relation`] and [`LinkPlan::mirror`].
    Relation {
        inner: Box<LinkPlan>,
        bipartite: bool,
        mirror: bool,
    },
}

impl LinkPlan {
    /// Check `opts` and read any listed pairs (before the build, so mistakes fail early).
    pub fn new(
        opts: &LinkSplitOptions,
        seed: u64,
        undirected: bool,
        num_nodes: Option<u64>,
    ) -> Result<Self> {
        check_link_spec(opts)?;
        Ok(match &opts.spec {
            LinkSplitSpec::Fractions(v) => LinkPlan::Fractions {
                fractions: v.clone(),
                seed,
            },
            LinkSplitSpec::Files(v) => {
                let mut g = GivenPairs::load(v, undirected, num_nodes)?;
                g.absent_ok = opts.absent_ok;
                // Given negatives replace a pair's listed destination: with --undirected its
                // pairs keep their listed direction (FORMAT.md, "Edge splits").
                for (name, _) in &opts.given_negatives {
                    if let Some(i) = g.names.iter().position(|n| n == name) {
                        g.oriented[i] = true;
                    }
                }
                LinkPlan::Given(Arc::new(g))
            }
        })
    }

    /// Bytes the build holds for the split besides its sort buffers: the split files' write
    /// buffers and, for listed pairs, their keys.
    pub fn memory(&self) -> u64 {
        match self {
            LinkPlan::Fractions { fractions, .. } => Holdout::memory(fractions.len()),
            LinkPlan::Given(g) => Holdout::memory(g.names.len() - 1) + g.memory(),
            LinkPlan::Relation {
                inner,
                mirror: true,
                ..
            } => match &**inner {
                LinkPlan::Given(g) => g.memory(),
                _ => 0,
            },
            LinkPlan::Relation { inner, .. } => inner.memory(),
        }
    }

    /// The plan of a relation's link split (a heterogeneous dataset; directed, `bipartite` when
    /// its ends are different node types): `opts` checked, listed pairs read.
    pub fn relation(opts: &LinkSplitOptions, seed: u64, bipartite: bool) -> Result<Self> {
        check_link_spec(opts)?;
        let inner = match &opts.spec {
            LinkSplitSpec::Fractions(v) => LinkPlan::Fractions {
                fractions: v.clone(),
                seed,
            },
            LinkSplitSpec::Files(v) => {
                let mut g = GivenPairs::load_with(v, false, None, bipartite)?;
                g.absent_ok = opts.absent_ok;
                LinkPlan::Given(Arc::new(g))
            }
        };
        Ok(LinkPlan::Relation {
            inner: Box::new(inner),
            bipartite,
            mirror: false,
        })
    }

    /// The plan of the reverse of a relation split by this one (see [`LinkPlan::Relation`]);
    /// listed pairs are keyed again in the reverse's CSC order.
    pub fn mirror(&self) -> LinkPlan {
        let (inner, bipartite) = match self {
            LinkPlan::Relation {
                inner, bipartite, ..
            } => (&**inner, *bipartite),
            other => (other, false),
        };
        let inner = match inner {
            LinkPlan::Given(g) => LinkPlan::Given(Arc::new(g.swapped())),
            other => other.clone(),
        };
        LinkPlan::Relation {
            inner: Box::new(inner),
            bipartite,
            mirror: true,
        }
    }

    /// The listed pairs, if the split is given as lists.
    pub fn given(&self) -> Option<&GivenPairs> {
        match self {
            LinkPlan::Given(g) => Some(g),
            LinkPlan::Relation { inner, .. } => inner.given(),
            LinkPlan::Fractions { .. } => None,
        }
    }
}

impl LinkSplitOptions {
    /// How the split was asked for, as `source.link_split` records it (FORMAT.md).
    pub fn describe(&self) -> serde_json::Value {
        match &self.spec {
            LinkSplitSpec::Fractions(v) => serde_json::json!({
                "fractions": v.iter().map(|(n, f)| (n.clone(), *f)).collect::<BTreeMap<_, _>>(),
                "negatives": self.negatives,
            }),
            LinkSplitSpec::Files(v) => serde_json::json!({
                "files": v
                    .iter()
                    .map(|(n, p)| (n.clone(), p.file_name().map(|s| s.to_string_lossy().into_owned())))
                    .collect::<BTreeMap<_, _>>(),
                "negatives": self.negatives,
            }),
        }
    }
}

/// The file name of an edge split's pairs and of its negatives.
pub fn pairs_file(name: &str) -> String {
    format!("edge_split_{name}.bin")
}
pub fn negatives_file(name: &str) -> String {
    format!("edge_negatives_{name}.bin")
}
pub fn shared_negatives_file(name: &str) -> String {
    format!("edge_shared_negatives_{name}.bin")
}

/// Check names, fractions and that listed files exist, before the build, so a typo fails in a
/// second.
pub fn check_link_spec(opts: &LinkSplitOptions) -> Result<()> {
    let names: Vec<&str> = match &opts.spec {
        LinkSplitSpec::Fractions(v) => v.iter().map(|(n, _)| n.as_str()).collect(),
        LinkSplitSpec::Files(v) => v.iter().map(|(n, _)| n.as_str()).collect(),
    };
    if names.is_empty() {
        return input_err!(
            "--link-split names no split; give the held-out fractions, e.g. val=0.05,test=0.1, or edge lists, e.g. val=val.npy,test=test.npy"
        );
    }
    for (i, name) in names.iter().enumerate() {
        crate::attach::check_split_name(name, "--link-split")?;
        if names[..i].contains(name) {
            return input_err!("--link-split names '{name}' twice; name each split once");
        }
    }
    match &opts.spec {
        LinkSplitSpec::Fractions(v) => check_fractions(v),
        LinkSplitSpec::Files(v) => {
            if names.iter().all(|&n| n == TRAIN) {
                return input_err!(
                    "--link-split lists only train, so nothing is held out; add the held-out edge lists, e.g. val=val.npy,test=test.npy"
                );
            }
            for (name, path) in v {
                Error::must_exist(path, format!("edge list of --link-split {name} not found"))?;
            }
            Ok(())
        }
    }
}

fn check_fractions(v: &[(String, f64)]) -> Result<()> {
    for (name, f) in v {
        if name == TRAIN {
            return input_err!(
                "--link-split train={f}: the training edges are the ones not held out; give only the held-out fractions, e.g. val=0.05,test=0.1"
            );
        }
        if !(*f > 0.0 && *f <= 1.0) {
            return input_err!("--link-split {name}={f}: a fraction must be above 0 and at most 1");
        }
    }
    let sum: f64 = v.iter().map(|(_, f)| f).sum();
    if sum >= 1.0 - FRACTION_EPS {
        return input_err!(
            "--link-split fractions add up to {sum}, which leaves no training edges; make them sum to less than 1"
        );
    }
    Ok(())
}

/// Whether a build with `opts` draws per-pair negatives for some held-out split: one that has
/// neither given nor shared negatives ([`attach_negatives`]).
pub fn draws_negatives(opts: &LinkSplitOptions) -> bool {
    let names: Vec<&String> = match &opts.spec {
        LinkSplitSpec::Fractions(v) => v.iter().map(|(n, _)| n).collect(),
        LinkSplitSpec::Files(v) => v.iter().map(|(n, _)| n).collect(),
    };
    let stored = |n: &String| {
        opts.given_negatives
            .iter()
            .chain(&opts.shared_negatives)
            .any(|(g, _)| g == n)
    };
    opts.negatives > 0 && names.into_iter().any(|n| n != TRAIN && !stored(n))
}

/// `k` distinct negatives other than the positive's destination need `k < num_nodes`.
pub fn check_negatives(k: u64, num_nodes: u64) -> Result<()> {
    if k >= num_nodes {
        return input_err!(
            "--link-negatives {k} is not below the number of nodes ({num_nodes}): each held-out edge needs {k} distinct nodes other than its own destination; lower it"
        );
    }
    Ok(())
}

/// Decides, per edge, whether it stays in the training graph, and writes every split's distinct
/// pairs as the CSC emitter meets them (in (dst, src) order). Owned by the emitter.
pub struct Holdout {
    undirected: bool,
    /// Held-out split names, then `train` (the last writer).
    names: Vec<String>,
    decide: Decide,
    writers: Vec<PairWriter>,
    /// The last key seen, so that the copies of a parallel edge count once.
    last: Option<(u64, u64)>,
    /// The reverse of a split relation ([`LinkPlan::Relation`]): decide each pair as its swap,
    /// record nothing, and let listed pairs be missing.
    mirror: bool,
    /// A relation between two node types: `(i, i)` is no self loop.
    bipartite: bool,
}

/// How a [`Holdout`] assigns a pair to a split.
enum Decide {
    /// Split `i` takes the pairs whose hash is below `bounds[i]` (and not below `bounds[i-1]`);
    /// the last entry is `train`, bound `u64::MAX` (inclusive).
    Hash { base: u64, bounds: Vec<u64> },
    /// A merge join with the listed keys: `at` is the first key not behind the stream, `met`
    /// whether the stream has reached it. Unlisted pairs go to `train` unless it is listed.
    Given {
        pairs: Arc<GivenPairs>,
        at: usize,
        met: bool,
    },
}

struct PairWriter {
    w: BinWriter,
    buf: Vec<i64>,
    pairs: u64,
}

impl PairWriter {
    fn push(&mut self, src: u64, dst: u64) -> Result<()> {
        self.buf.push(src as i64);
        self.buf.push(dst as i64);
        self.pairs += 1;
        if self.buf.len() >= 2 * CHUNK {
            self.w.write_i64s(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

/// What the build made of an edge split: per split name, its pairs file and count.
#[derive(Clone, Debug)]
pub struct HeldOut {
    pub splits: Vec<(String, FileEntry, u64)>,
}

impl Holdout {
    /// The holdout of `plan` for a graph of `num_nodes` nodes (listed ids are checked against it).
    pub fn new(
        plan: &LinkPlan,
        undirected: bool,
        num_nodes: u64,
        staging: &Staging,
    ) -> Result<Self> {
        let (mirror, bipartite, plan) = match plan {
            LinkPlan::Relation {
                inner,
                bipartite,
                mirror,
            } => (*mirror, *bipartite, &**inner),
            plan => (false, false, plan),
        };
        let (names, decide) = match plan {
            LinkPlan::Relation { .. } => unreachable!("relation plans never nest"),
            LinkPlan::Fractions { fractions, seed } => {
                let mut names = Vec::new();
                let mut bounds = Vec::new();
                let mut acc = 0.0f64;
                for (name, f) in fractions {
                    acc += f;
                    names.push(name.clone());
                    // 2^64 * acc, saturating: the hash is uniform on u64.
                    bounds.push((acc * 18_446_744_073_709_551_616.0).min(u64::MAX as f64) as u64);
                }
                names.push(TRAIN.into());
                bounds.push(u64::MAX);
                let base = mix64(seed ^ mix64(SPLIT_HASH));
                (names, Decide::Hash { base, bounds })
            }
            LinkPlan::Given(pairs) => {
                debug_assert_eq!(pairs.undirected, undirected);
                if !mirror {
                    pairs.check_range(num_nodes)?;
                }
                let decide = Decide::Given {
                    pairs: Arc::clone(pairs),
                    at: 0,
                    met: false,
                };
                (pairs.names.clone(), decide)
            }
        };
        let writers = names
            .iter()
            .filter(|_| !mirror)
            .map(|n| {
                Ok(PairWriter {
                    w: staging.writer(&pairs_file(n))?,
                    buf: Vec::with_capacity(2 * CHUNK),
                    pairs: 0,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Holdout {
            undirected,
            names,
            decide,
            writers,
            last: None,
            mirror,
            bipartite,
        })
    }

    /// Bytes this holds while the build runs (its write buffers).
    pub fn memory(splits: usize) -> u64 {
        (splits as u64 + 1) * ((4 << 20) + 16 * CHUNK as u64)
    }

    /// The split of the pair `src -> dst` (its index in `names`), or `None` for a pair that stays
    /// in the graph unrecorded (`train` is listed and does not list it). Undirected pairs hash
    /// their two ends in order, so both directions agree. Calls come in (dst, src) order.
    fn split_of(&mut self, src: u64, dst: u64) -> Result<Option<(usize, bool)>> {
        let train = self.names.len() - 1;
        match &mut self.decide {
            Decide::Hash { base, bounds } => {
                let (a, b) = if (self.undirected && src > dst) || self.mirror {
                    (dst, src)
                } else {
                    (src, dst)
                };
                let h = mix64(mix64(*base ^ a).wrapping_add(b));
                let i = bounds.iter().position(|&t| h < t).unwrap_or(train);
                Ok(Some((i, !self.undirected || src < dst)))
            }
            Decide::Given { pairs, at, met } => {
                let keys = &pairs.keys;
                while *at < keys.len() && (keys[*at].dst, keys[*at].src) < (dst, src) {
                    if !*met && !self.mirror {
                        let k = &keys[*at];
                        if !pairs.absent_ok || k.split as usize == train {
                            return Err(pairs.not_in_graph(k));
                        }
                        // Absent from the input, stored all the same, in its place (an
                        // undirected pair once, like a met one).
                        if pairs.writes(k) {
                            self.writers[k.split as usize].push(k.src, k.dst)?;
                        }
                    }
                    *at += 1;
                    *met = false;
                }
                if *at < keys.len() && (keys[*at].dst, keys[*at].src) == (dst, src) {
                    *met = true;
                    return Ok(Some((keys[*at].split as usize, pairs.writes(&keys[*at]))));
                }
                Ok((!pairs.train_listed()).then_some((train, !self.undirected || src < dst)))
            }
        }
    }

    /// Whether edge `src -> dst` stays in the training graph; records the pair in its split the
    /// first time it is met (keys arrive sorted, so copies are adjacent). Self loops always stay
    /// and belong to no split.
    pub fn keep(&mut self, dst: u64, src: u64) -> Result<bool> {
        if src == dst && !self.bipartite {
            return Ok(true);
        }
        let split = self.split_of(src, dst)?;
        let new = self.last != Some((dst, src));
        self.last = Some((dst, src));
        // An undirected pair is met twice (once per direction): record it once, in the
        // direction `split_of` says (min, max), or as listed for a split of given negatives).
        if let Some((i, writes)) = split.filter(|_| !self.mirror) {
            if new && writes {
                self.writers[i].push(src, dst)?;
            }
        }
        let train = self.names.len() - 1;
        Ok(!matches!(split, Some((i, _)) if i != train))
    }

    /// Check that every listed pair was met, flush and close every split file, and register them
    /// in the staging.
    pub fn finish(self, staging: &mut Staging) -> Result<HeldOut> {
        if self.mirror {
            return Ok(HeldOut { splits: Vec::new() });
        }
        let mut writers = self.writers;
        if let Decide::Given { pairs, at, met } = &self.decide {
            let unmet = if *met { at + 1 } else { *at };
            let train = self.names.len() - 1;
            for k in pairs.keys.get(unmet..).unwrap_or_default() {
                if !pairs.absent_ok || k.split as usize == train {
                    return Err(pairs.not_in_graph(k));
                }
                if pairs.writes(k) {
                    writers[k.split as usize].push(k.src, k.dst)?;
                }
            }
        }
        let mut splits = Vec::new();
        for (name, mut pw) in self.names.into_iter().zip(writers) {
            pw.w.write_i64s(&pw.buf)?;
            let entry = pw.w.finish()?;
            staging.add(&format!("edge_split.{name}"), entry.clone());
            splits.push((name, entry, pw.pairs));
        }
        Ok(HeldOut { splits })
    }
}

/// Draw `opts.negatives` distinct negative destinations in `[0, num_nodes)` other than `dst` for
/// every pair of each held-out split (not `train`), and write them as `edge_negatives.NAME`.
/// Pair `i` of split NAME draws from its own stream (seed, "lneg", hash(NAME) + i): the
/// negatives of a pair do not depend on the other splits or on how the file is read. A split
/// named in `opts.given_negatives` stores those as given instead; a split with shared negatives
/// (`opts.shared_negatives`, OGB's `edge_neg`) gets none per pair: its evaluation ranks every
/// positive against the shared ones, so per-pair negatives would be written and never read.
pub fn attach_negatives(
    staging: &mut Staging,
    held: &HeldOut,
    num_nodes: u64,
    opts: &LinkSplitOptions,
    seed: u64,
    progress: &dyn Progress,
) -> Result<BTreeMap<String, EdgeSplitInfo>> {
    let given = &opts.given_negatives;
    let mut out = BTreeMap::new();
    for (name, _, pairs) in &held.splits {
        if let Some((_, path)) = given.iter().find(|(n, _)| n == name) {
            let info = copy_negatives(staging, name, path, *pairs, num_nodes)?;
            out.insert(name.clone(), info);
            continue;
        }
        let shared = opts.shared_negatives.iter().any(|(n, _)| n == name);
        let k = opts.negatives;
        let negatives = if name == TRAIN || shared { 0 } else { k };
        out.insert(
            name.clone(),
            EdgeSplitInfo {
                edges: *pairs,
                negatives,
                given_negatives: false,
                shared_negatives: 0,
            },
        );
        if negatives == 0 {
            continue;
        }
        check_negatives(k, num_nodes)?;
        progress.stage(&format!("negatives {name}"), Some(*pairs), "edges");
        let path = staging.file_path(&pairs_file(name));
        let mut reader = BufReader::with_capacity(1 << 20, File::open(&path).at(&path)?);
        let mut w = staging.writer(&negatives_file(name))?;
        let name_hash = name.bytes().fold(0u64, |h, b| mix64(h ^ b as u64));
        let mut set = HashSet::with_capacity(2 * k as usize);
        let mut row = Vec::with_capacity(k as usize);
        let mut buf = Vec::with_capacity(CHUNK * k as usize);
        let mut pair = [0u8; 16];
        for i in 0..*pairs {
            reader.read_exact(&mut pair).at(&path)?;
            let dst = u64::from_le_bytes(pair[8..].try_into().unwrap());
            let mut r = rng::stream(seed, NEG_STREAM, name_hash.wrapping_add(i));
            distinct_except(&mut r, num_nodes, dst, k, &mut set, &mut row);
            buf.extend(row.iter().map(|&x| x as i64));
            if buf.len() >= CHUNK * k as usize {
                w.write_i64s(&buf)?;
                buf.clear();
                progress.advance(CHUNK as u64)?;
            }
        }
        w.write_i64s(&buf)?;
        staging.add(&format!("edge_negatives.{name}"), w.finish()?);
    }
    Ok(out)
}

/// Store split `name`'s negatives from `path` (`.npy` int64 `(pairs, K)`, C order), each id
/// checked to be below `num_nodes`.
fn copy_negatives(
    staging: &mut Staging,
    name: &str,
    path: &Path,
    pairs: u64,
    num_nodes: u64,
) -> Result<EdgeSplitInfo> {
    let h = crate::npy::read_header(path)?;
    h.expect_dtype(&["int64"], "negatives")?;
    let k = match h.shape[..] {
        [n, k] if n == pairs && k >= 1 && !h.fortran_order => k,
        _ => {
            return input_err!(
                "{}: negatives of edge split {name} must be a C-order array of shape ({pairs}, K >= 1), one row per stored pair; found shape {:?}",
                path.display(),
                h.shape
            )
        }
    };
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path).at(path)?);
    std::io::copy(&mut (&mut reader).take(h.data_offset), &mut std::io::sink()).at(path)?;
    let mut w = staging.writer(&negatives_file(name))?;
    let mut buf = vec![0u8; 8 * (CHUNK * k as usize).min((pairs * k) as usize).max(1)];
    let mut left = pairs * k;
    let mut at = 0u64;
    while left > 0 {
        let n = (left as usize).min(buf.len() / 8);
        reader.read_exact(&mut buf[..8 * n]).at(path)?;
        for (j, c) in buf[..8 * n].chunks_exact(8).enumerate() {
            let x = i64::from_le_bytes(c.try_into().unwrap());
            if x < 0 || x as u64 >= num_nodes {
                let e = at + j as u64;
                return input_err!(
                    "{}: negative {} of pair {} of edge split {name} is {x}, but node ids are in [0, {num_nodes})",
                    path.display(),
                    e % k,
                    e / k
                );
            }
        }
        w.write(&buf[..8 * n])?;
        left -= n as u64;
        at += n as u64;
    }
    staging.add(&format!("edge_negatives.{name}"), w.finish()?);
    Ok(EdgeSplitInfo {
        edges: pairs,
        negatives: k,
        given_negatives: true,
        shared_negatives: 0,
    })
}

/// `k` distinct values of `[0, n)` other than `except`, uniformly (Floyd's algorithm on the
/// `n - 1` others), in `row`.
fn distinct_except(
    r: &mut rng::Rng,
    n: u64,
    except: u64,
    k: u64,
    set: &mut HashSet<u64>,
    row: &mut Vec<u64>,
) {
    set.clear();
    row.clear();
    let m = n - 1;
    for j in (m - k)..m {
        let t = rng::below(r, j + 1);
        let pick = if set.insert(t) {
            t
        } else {
            set.insert(j);
            j
        };
        row.push(if pick >= except { pick + 1 } else { pick });
    }
}

/// The first `n` pairs of a split file read back as (src, dst) (for tests).
pub fn read_pairs(path: &Path, n: u64) -> Result<Vec<(u64, u64)>> {
    let bytes = std::fs::read(path).at(path)?;
    Ok(bytes[..(16 * n as usize).min(bytes.len())]
        .chunks_exact(16)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().unwrap()),
                u64::from_le_bytes(c[8..].try_into().unwrap()),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floyd_draws_distinct_values_other_than_the_positive() {
        let mut set = HashSet::new();
        let mut row = Vec::new();
        for seed in 0..200 {
            let mut r = rng::stream(seed, 1, 2);
            distinct_except(&mut r, 10, seed % 10, 9, &mut set, &mut row);
            let mut sorted = row.clone();
            sorted.sort();
            let want: Vec<u64> = (0..10).filter(|&x| x != seed % 10).collect();
            assert_eq!(sorted, want);
        }
    }

    #[test]
    fn floyd_is_uniform() {
        // 3 of the 5 nodes other than 2, in [0, 6): each of 0,1,3,4,5 appears in 3/5 of rows.
        let mut set = HashSet::new();
        let mut row = Vec::new();
        let mut counts = [0u32; 6];
        let mut r = rng::stream(9, 9, 9);
        let rows = 20000;
        for _ in 0..rows {
            distinct_except(&mut r, 6, 2, 3, &mut set, &mut row);
            for &x in &row {
                counts[x as usize] += 1;
            }
        }
        assert_eq!(counts[2], 0);
        // Each count is binomial(20000, 0.6): sd 69; allow 5 sd.
        for (x, &c) in counts.iter().enumerate().filter(|(x, _)| *x != 2) {
            assert!((c as f64 - 12000.0).abs() < 350.0, "node {x}: {c}");
        }
    }
}
