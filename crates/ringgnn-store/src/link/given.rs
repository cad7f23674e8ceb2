//! Edge splits given as lists (`convert --link-split val=val.npy,test=test.npy`): every listed
//! pair is read and checked before the build, then kept in memory as CSC sort keys, sorted, so
//! that the emitter's [`Holdout`](super::Holdout) finds them with a merge join as the sorted
//! edges stream past (one comparison per edge, no hash set, no second pass over the graph).
//!
//! Each pair costs 24 bytes (48 with `--undirected`, which keys both directions); the builder
//! takes them out of its `--memory` budget.

use std::path::PathBuf;

use crate::input::{self, InputFormat};
use crate::manifest::TRAIN;
use crate::{input_err, Error, Excerpts, Result};

/// Pairs read per call to the edge reader.
const CHUNK: usize = 1 << 16;

/// One listed pair as the CSC emitter meets it: the key `(dst, src)` and its split's index;
/// `reversed`: the key of the other direction of an undirected pair (not as listed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct GivenKey {
    pub dst: u64,
    pub src: u64,
    pub split: u32,
    pub reversed: bool,
}

/// The pairs of every listed split, sorted by CSC key.
#[derive(Debug)]
pub struct GivenPairs {
    /// Held-out split names in the order given, then `train` (listed or not).
    pub(super) names: Vec<String>,
    /// The file of each split in `names` (`None`: `train` was not listed).
    pub(super) files: Vec<Option<PathBuf>>,
    pub(super) keys: Vec<GivenKey>,
    pub(super) undirected: bool,
    /// Per split of `names`: with `undirected`, its pairs are stored as listed rather than as
    /// `(min, max)` (a split whose negatives are given: they replace the listed `dst`).
    pub(super) oriented: Vec<bool>,
    max_id: u64,
    /// Listed held-out pairs the input lacks are stored anyway (see
    /// [`LinkSplitOptions::absent_ok`](super::LinkSplitOptions::absent_ok)).
    pub(super) absent_ok: bool,
}

impl GivenPairs {
    /// Read and check the lists; `num_nodes` is `--num-nodes` when given (ids are checked
    /// against the graph's node count again once the build knows it: [`GivenPairs::check_range`]).
    pub fn load(
        files: &[(String, PathBuf)],
        undirected: bool,
        num_nodes: Option<u64>,
    ) -> Result<Self> {
        Self::load_with(files, undirected, num_nodes, false)
    }

    /// [`GivenPairs::load`]; `bipartite`: the pairs join two node types, so `(i, i)` is no self
    /// loop.
    pub fn load_with(
        files: &[(String, PathBuf)],
        undirected: bool,
        num_nodes: Option<u64>,
        bipartite: bool,
    ) -> Result<Self> {
        let mut order: Vec<&(String, PathBuf)> = files.iter().filter(|(n, _)| n != TRAIN).collect();
        order.extend(files.iter().filter(|(n, _)| n == TRAIN));
        let mut names: Vec<String> = order.iter().map(|(n, _)| n.clone()).collect();
        let mut paths: Vec<Option<PathBuf>> = order.iter().map(|(_, p)| Some(p.clone())).collect();
        if names.last().map(String::as_str) != Some(TRAIN) {
            names.push(TRAIN.into());
            paths.push(None);
        }
        let mut keys = Vec::new();
        let mut max_id = 0;
        let mut chunk = Vec::with_capacity(CHUNK);
        for (i, (name, path)) in order.iter().enumerate() {
            let label = format!("{name}={}", path.display());
            // The reader's messages name the file already.
            let prefix = |e: Error| match e {
                Error::Input(m) => Error::Input(format!("--link-split {name}: {m}")),
                e => e,
            };
            let mut source = input::open(path, Some(InputFormat::Npy), num_nodes, Excerpts::Quote)
                .map_err(prefix)?;
            let mut at = 0u64;
            loop {
                chunk.clear();
                if source.fill(&mut chunk, CHUNK).map_err(prefix)? == 0 {
                    break;
                }
                for &(src, dst) in &chunk {
                    if src == dst && !bipartite {
                        return input_err!(
                            "--link-split {label}: pair {at} is the self loop ({src}, {dst}); self loops are never held out nor link-prediction pairs, drop them"
                        );
                    }
                    max_id = max_id.max(src).max(dst);
                    keys.push(GivenKey {
                        dst,
                        src,
                        split: i as u32,
                        reversed: false,
                    });
                    if undirected {
                        keys.push(GivenKey {
                            dst: src,
                            src: dst,
                            split: i as u32,
                            reversed: true,
                        });
                    }
                    at += 1;
                }
            }
        }
        keys.sort_unstable();
        let given = GivenPairs {
            oriented: vec![false; names.len()],
            names,
            files: paths,
            keys,
            undirected,
            max_id,
            absent_ok: false,
        };
        given.check_distinct()?;
        Ok(given)
    }

    /// No pair listed twice, in one split or in two.
    fn check_distinct(&self) -> Result<()> {
        for w in self.keys.windows(2) {
            if (w[0].dst, w[0].src) != (w[1].dst, w[1].src) {
                continue;
            }
            let (src, dst) = self.pair(&w[0]);
            let (a, b) = (self.label(w[0].split), self.label(w[1].split));
            if a == b {
                let hint = if self.undirected {
                    format!(" (with --undirected, ({src}, {dst}) and ({dst}, {src}) are one pair)")
                } else {
                    String::new()
                };
                return input_err!(
                    "--link-split {a}: the pair ({src}, {dst}) is listed more than once{hint}; list each pair once"
                );
            }
            return input_err!(
                "--link-split: the pair ({src}, {dst}) is in both {a} and {b}; a pair belongs to one split"
            );
        }
        Ok(())
    }

    /// Every listed id must be a node of the graph.
    pub fn check_range(&self, num_nodes: u64) -> Result<()> {
        if self.max_id < num_nodes {
            return Ok(());
        }
        let k = self
            .keys
            .iter()
            .find(|k| k.src.max(k.dst) >= num_nodes)
            .expect("max_id is one of the keys");
        let (src, dst) = self.pair(k);
        input_err!(
            "--link-split {}: the pair ({src}, {dst}) has node id {}, but the graph has {num_nodes} nodes (ids 0 to {}); a listed pair must be an edge of the input",
            self.label(k.split),
            src.max(dst),
            num_nodes.saturating_sub(1)
        )
    }

    /// Every listed pair is (a node of `sources`, a node of `targets`): a relation's ends have
    /// their own counts (checked before the build of a heterogeneous dataset).
    pub fn check_ends(&self, sources: u64, targets: u64) -> Result<()> {
        let Some(k) = self
            .keys
            .iter()
            .find(|k| k.src >= sources || k.dst >= targets)
        else {
            return Ok(());
        };
        let (src, dst) = self.pair(k);
        let (end, id, n) = if src >= sources {
            ("source", src, sources)
        } else {
            ("destination", dst, targets)
        };
        input_err!(
            "--link-split {}: the pair ({src}, {dst}) has {end} id {id}, but its node type has {n} nodes (ids 0 to {}); a listed pair must be an edge of the relation",
            self.label(k.split),
            n.saturating_sub(1)
        )
    }

    /// The same pairs keyed in the CSC order of the reverse graph (each key's ends swapped):
    /// what the reverse relation's emitter meets.
    pub(super) fn swapped(&self) -> GivenPairs {
        let mut keys: Vec<GivenKey> = self
            .keys
            .iter()
            .map(|k| GivenKey {
                dst: k.src,
                src: k.dst,
                split: k.split,
                reversed: k.reversed,
            })
            .collect();
        keys.sort_unstable();
        GivenPairs {
            oriented: self.oriented.clone(),
            names: self.names.clone(),
            files: self.files.clone(),
            keys,
            undirected: self.undirected,
            max_id: self.max_id,
            absent_ok: self.absent_ok,
        }
    }

    /// Bytes the keys hold in memory.
    pub fn memory(&self) -> u64 {
        (self.keys.capacity() * std::mem::size_of::<GivenKey>()) as u64
    }

    /// Whether the `train` split is listed (else it is every pair left in the graph).
    pub fn train_listed(&self) -> bool {
        self.files.last().is_some_and(Option::is_some)
    }

    /// Whether the emitter writes the pair of key `k` when it meets it: always when directed;
    /// when undirected, once per pair: the listed direction for an `oriented` split, else
    /// `(min, max)`.
    pub(super) fn writes(&self, k: &GivenKey) -> bool {
        !self.undirected
            || if self.oriented[k.split as usize] {
                !k.reversed
            } else {
                k.src < k.dst
            }
    }

    /// The pair of `k` as written in split files: `(src, dst)`, or `(min, max)` when undirected.
    pub(super) fn pair(&self, k: &GivenKey) -> (u64, u64) {
        if self.undirected {
            (k.src.min(k.dst), k.src.max(k.dst))
        } else {
            (k.src, k.dst)
        }
    }

    /// `NAME=FILE` of split `i`, as the user wrote it.
    pub(super) fn label(&self, i: u32) -> String {
        let i = i as usize;
        match &self.files[i] {
            Some(p) => format!("{}={}", self.names[i], p.display()),
            None => self.names[i].clone(),
        }
    }

    /// The error for a listed pair that the input does not have.
    pub(super) fn not_in_graph(&self, k: &GivenKey) -> Error {
        let (src, dst) = self.pair(k);
        let what = if self.names[k.split as usize] == TRAIN {
            "training edge"
        } else {
            "held-out edge"
        };
        let hint = if self.undirected {
            ""
        } else {
            " (without --undirected, (u, v) and (v, u) are different edges)"
        };
        Error::Input(format!(
            "{what} ({src}, {dst}) of {} is not in the graph: every listed pair must be an edge of the input{hint}",
            self.label(k.split)
        ))
    }
}
