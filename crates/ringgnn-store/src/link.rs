//! Edge splits for link prediction (format version 2, `docs/FORMAT.md` "Edge splits"):
//! `convert --link-split val=0.05,test=0.1` holds out a random part of the edges while the CSC is
//! written, so the training graph never contains a held-out pair, and stores every split's pairs;
//! then [`attach_negatives`] draws the fixed evaluation negatives of each held-out split.
//! `--link-split val=val.npy,test=test.npy` holds out the listed pairs instead ([`given`]), and
//! `--link-split-time val=T1,test=T2` (a graph with edge times) the edge events after T1 and T2,
//! each split's events sorted by (time, src, dst) out of core on the way ([`holdout`]).
//!
//! The decision for a pair is a hash of (seed, pair), not a draw from a sequence: the builder
//! meets the two directions of an undirected pair (and the copies of a parallel edge) at
//! different times, and a pure function of the pair sends them all the same way with no memory
//! of earlier decisions, whatever the budget and the thread count. The price is that a split's
//! size is binomial (each distinct pair is held out independently with probability f), not
//! exactly `floor(f * pairs)` as PyG's `RandomLinkSplit` makes it.

//!
//! This module holds what a split is asked for ([`LinkSplitOptions`]), its checks and its file
//! names; the builder's side, deciding each pair while the CSC is written, is [`holdout`]'s
//! ([`LinkPlan`], [`Holdout`]); drawing or copying the negatives afterwards is [`negatives`]'s.
//! Both read this module, never the other way round.

mod given;
mod holdout;
mod negatives;

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use given::GivenPairs;
pub use holdout::{HeldOut, Holdout, LinkPlan};
pub use negatives::{attach_negatives, read_pairs};

use crate::manifest::TRAIN;
use crate::options::check_split_name;
use crate::{input_err, Error, Result};

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
    /// Held-out split name -> time, ascending (`--link-split-time val=T1,test=T2`): an edge
    /// event goes to the last split whose time is below its own, else stays in the graph as a
    /// `train` event. Needs edge times.
    Times(Vec<(String, i64)>),
}

impl LinkSplitSpec {
    /// The option that asks for this kind of split, for messages.
    pub fn option(&self) -> &'static str {
        match self {
            LinkSplitSpec::Times(_) => "--link-split-time",
            _ => "--link-split",
        }
    }

    /// The split names in the order given.
    fn names(&self) -> Vec<&String> {
        match self {
            LinkSplitSpec::Fractions(v) => v.iter().map(|(n, _)| n).collect(),
            LinkSplitSpec::Files(v) => v.iter().map(|(n, _)| n).collect(),
            LinkSplitSpec::Times(v) => v.iter().map(|(n, _)| n).collect(),
        }
    }
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
            LinkSplitSpec::Times(v) => serde_json::json!({
                "times": v.iter().map(|(n, t)| (n.clone(), *t)).collect::<BTreeMap<_, _>>(),
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
/// The file of a split's event times (a split by time).
pub fn times_file(name: &str) -> String {
    format!("edge_split_times_{name}.bin")
}

/// Check names, fractions and that listed files exist, before the build, so a typo fails in a
/// second.
pub fn check_link_spec(opts: &LinkSplitOptions) -> Result<()> {
    let names: Vec<&str> = opts.spec.names().into_iter().map(String::as_str).collect();
    let option = opts.spec.option();
    if names.is_empty() {
        if let LinkSplitSpec::Times(_) = opts.spec {
            return input_err!(
                "--link-split-time names no split; give the times after which edges are held out, e.g. val=T1,test=T2"
            );
        }
        return input_err!(
            "--link-split names no split; give the held-out fractions, e.g. val=0.05,test=0.1, or edge lists, e.g. val=val.npy,test=test.npy"
        );
    }
    for (i, name) in names.iter().enumerate() {
        check_split_name(name, option)?;
        if names[..i].contains(name) {
            return input_err!("{option} names '{name}' twice; name each split once");
        }
    }
    match &opts.spec {
        LinkSplitSpec::Times(v) => check_times(v),
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

fn check_times(v: &[(String, i64)]) -> Result<()> {
    for (name, t) in v {
        if name == TRAIN {
            return input_err!(
                "--link-split-time train={t}: the training edges are the ones up to the first time; give only the held-out splits' times, e.g. val=T1,test=T2"
            );
        }
    }
    for w in v.windows(2) {
        let ((a, ta), (b, tb)) = (&w[0], &w[1]);
        if ta > tb {
            return input_err!(
                "--link-split-time {a}={ta},{b}={tb}: the times must not decrease ({a} holds the edges after {ta} up to the next split's time); give {b} a time of at least {ta}"
            );
        }
    }
    Ok(())
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
    let names = opts.spec.names();
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
