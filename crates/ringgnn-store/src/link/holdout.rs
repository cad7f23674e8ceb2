//! The builder's side of a link split: a [`LinkPlan`] (the split checked, any listed pairs
//! read) and the [`Holdout`] the CSC emitter asks, edge by edge, whether the edge stays in the
//! training graph, writing every split's distinct pairs as it meets them ([`HeldOut`]).
//!
//! A split by time decides an edge by its time alone. Its events meet the emitter in CSC order
//! (dst, time, src) but are stored by (time, src, dst), so they go through an external sort
//! ([`Sorter`]: in memory up to [`TIME_SORT_BYTES`], else runs on disk) and are written when the
//! graph is done. One sort serves every split: sorted by time, the events come split by split
//! (`train`, then the held-out splits in the order of their times), so the files are cut from
//! one stream and the split costs one sort's memory, whatever the number of splits.

use std::sync::Arc;

use super::{
    check_link_spec, pairs_file, times_file, GivenPairs, LinkSplitOptions, LinkSplitSpec, CHUNK,
};
use crate::manifest::{FileEntry, TRAIN};
use crate::progress::Progress;
use crate::rng::mix64;
use crate::times::{from_key, to_key};
use crate::verify::runs::{Sizes, SortName, Sorter};
use crate::writer::{BinWriter, Staging};
use crate::Result;

/// Memory of the sort of a split's events (a split by time): 8 MiB holds 512K events before
/// they spill to disk in sorted runs, and merges 63 runs of them in one pass. Tests take 64 KiB
/// (4096 events a run, 15 runs a merge), so that small graphs spill and merge in several passes.
pub(crate) const TIME_SORT_BYTES: u64 = if cfg!(test) { 64 << 10 } else { 8 << 20 };

/// The sort of the split's events: (time key, src << 32 | dst), sorted as (time, src, dst) (a
/// timed build has ids below 2^32).
const EVENTS: SortName = SortName {
    label: "ringgnn-split-sort",
    what: "the edge split's events",
    unit: "edges",
};

/// `purpose` of the hash that assigns pairs to splits (ASCII "lsplit").
const SPLIT_HASH: u64 = 0x6c_73_70_6c_69_74;

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
    /// By the edge's time, see [`LinkSplitSpec::Times`].
    Times(Vec<(String, i64)>),
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
            LinkSplitSpec::Times(v) => LinkPlan::Times(v.clone()),
        })
    }

    /// Whether the split is by time (it needs edge times, and only it takes them).
    pub fn by_time(&self) -> bool {
        match self {
            LinkPlan::Times(_) => true,
            LinkPlan::Relation { inner, .. } => inner.by_time(),
            _ => false,
        }
    }

    /// Bytes the build holds for the split besides its sort buffers: the split files' write
    /// buffers and, for listed pairs, their keys.
    pub fn memory(&self) -> u64 {
        match self {
            LinkPlan::Fractions { fractions, .. } => Holdout::memory(fractions.len()),
            LinkPlan::Given(g) => Holdout::memory(g.names.len() - 1) + g.memory(),
            LinkPlan::Times(_) => TIME_SORT_BYTES,
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
            LinkSplitSpec::Times(v) => LinkPlan::Times(v.clone()),
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
            LinkPlan::Fractions { .. } | LinkPlan::Times(_) => None,
        }
    }
}

/// Decides, per edge, whether it stays in the training graph, and writes every split's distinct
/// pairs as the CSC emitter meets them (in (dst, src) order). Owned by the emitter.
pub struct Holdout {
    undirected: bool,
    /// Held-out split names, then `train` (the last writer).
    names: Vec<String>,
    decide: Decide,
    writers: Vec<PairWriter>,
    /// A split by time: every split's events, sorted on the way (in place of `writers`).
    events: Option<Sorter>,
    /// The last key seen, so that the copies of a parallel edge (or of an event) count once.
    last: Option<(u64, u64, i64)>,
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
    /// Split `i` takes the events with time above `bounds[i]` and not above `bounds[i + 1]`;
    /// events up to `bounds[0]` are `train`'s.
    Times { bounds: Vec<i64> },
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
    /// A split by time: every split has its events' times (`edge_split_times.NAME`).
    pub times: bool,
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
            LinkPlan::Times(v) => {
                let mut names: Vec<String> = v.iter().map(|(n, _)| n.clone()).collect();
                names.push(TRAIN.into());
                let bounds = v.iter().map(|&(_, t)| t).collect();
                (names, Decide::Times { bounds })
            }
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
        let timed = matches!(decide, Decide::Times { .. });
        let events = if timed && !mirror {
            let sizes = Sizes::for_budget(TIME_SORT_BYTES);
            Some(Sorter::new(sizes, 1 << 16, &staging.scratch()?, EVENTS))
        } else {
            None
        };
        let writers = names
            .iter()
            .filter(|_| !mirror && !timed)
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
            events,
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
    fn split_of(&mut self, src: u64, dst: u64, time: i64) -> Result<Option<(usize, bool)>> {
        let train = self.names.len() - 1;
        match &mut self.decide {
            Decide::Times { bounds } => Ok(Some((
                split_at(bounds, time),
                !self.undirected || src < dst,
            ))),
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

    /// Whether edge `src -> dst` at `time` (0 in a graph without times) stays in the training
    /// graph; records the pair (the event, in a split by time) in its split the first time it is
    /// met (keys arrive sorted, so copies are adjacent). Self loops always stay and belong to
    /// no split.
    pub fn keep(&mut self, dst: u64, src: u64, time: i64) -> Result<bool> {
        if src == dst && !self.bipartite {
            return Ok(true);
        }
        let split = self.split_of(src, dst, time)?;
        let new = self.last != Some((dst, src, time));
        self.last = Some((dst, src, time));
        // An undirected pair is met twice (once per direction): record it once, in the
        // direction `split_of` says (min, max), or as listed for a split of given negatives).
        if let Some((i, writes)) = split.filter(|_| !self.mirror) {
            if new && writes {
                match &mut self.events {
                    Some(s) => s.push((to_key(time), (src << 32) | dst))?,
                    None => self.writers[i].push(src, dst)?,
                }
            }
        }
        let train = self.names.len() - 1;
        Ok(!matches!(split, Some((i, _)) if i != train))
    }

    /// Check that every listed pair was met, flush and close every split file, and register them
    /// in the staging.
    pub fn finish(self, staging: &mut Staging, progress: &dyn Progress) -> Result<HeldOut> {
        if self.mirror {
            return Ok(HeldOut {
                splits: Vec::new(),
                times: false,
            });
        }
        if let (Some(events), Decide::Times { bounds }) = (self.events, &self.decide) {
            return finish_times(self.names, bounds, events, staging, progress);
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
        Ok(HeldOut {
            splits,
            times: false,
        })
    }
}

/// The split of an event at `time` (its index in `names`, `train` last): the last whose bound
/// is below `time`, else `train`.
fn split_at(bounds: &[i64], time: i64) -> usize {
    bounds
        .iter()
        .rposition(|&t| time > t)
        .unwrap_or(bounds.len())
}

/// Write each split's events, sorted by (time, src, dst): the pairs to `edge_split.NAME`, their
/// times to `edge_split_times.NAME`. The sorted stream holds `train`'s events, then each held-out
/// split's in turn (`bounds` ascend): each split's files are written and closed before the next
/// one's are opened.
fn finish_times(
    names: Vec<String>,
    bounds: &[i64],
    events: Sorter,
    staging: &mut Staging,
    progress: &dyn Progress,
) -> Result<HeldOut> {
    let train = names.len() - 1;
    let order: Vec<usize> = std::iter::once(train).chain(0..train).collect();
    let mut written: Vec<Option<(FileEntry, FileEntry, u64)>> = vec![None; names.len()];
    let mut at = 0;
    let mut files = SplitFiles::open(staging, &names[order[0]])?;
    events.finish("write the edge splits", progress, &mut |(t, ends)| {
        let time = from_key(t);
        while order[at] != split_at(bounds, time) {
            let next = SplitFiles::open(staging, &names[order[at + 1]])?;
            written[order[at]] = Some(std::mem::replace(&mut files, next).finish()?);
            at += 1;
        }
        files.push(ends >> 32, ends & 0xFFFF_FFFF, time)
    })?;
    // The splits after the last event are empty.
    written[order[at]] = Some(files.finish()?);
    for &i in &order[at + 1..] {
        written[i] = Some(SplitFiles::open(staging, &names[i])?.finish()?);
    }
    let mut splits = Vec::new();
    for (name, w) in names.into_iter().zip(written) {
        let (pairs, times, count) = w.expect("every split is written");
        staging.add(&format!("edge_split.{name}"), pairs.clone());
        staging.add(&format!("edge_split_times.{name}"), times);
        splits.push((name, pairs, count));
    }
    Ok(HeldOut {
        splits,
        times: true,
    })
}

/// The files of one split by time being written: its pairs and their times.
struct SplitFiles {
    pairs: PairWriter,
    times: BinWriter,
    tbuf: Vec<i64>,
}

impl SplitFiles {
    fn open(staging: &Staging, name: &str) -> Result<Self> {
        Ok(SplitFiles {
            pairs: PairWriter {
                w: staging.writer(&pairs_file(name))?,
                buf: Vec::with_capacity(2 * CHUNK),
                pairs: 0,
            },
            times: staging.writer(&times_file(name))?,
            tbuf: Vec::with_capacity(CHUNK),
        })
    }

    fn push(&mut self, src: u64, dst: u64, time: i64) -> Result<bool> {
        self.pairs.push(src, dst)?;
        self.tbuf.push(time);
        if self.tbuf.len() == CHUNK {
            self.times.write_i64s(&self.tbuf)?;
            self.tbuf.clear();
        }
        Ok(false)
    }

    /// Flush and close both files: (pairs file, times file, pairs).
    fn finish(mut self) -> Result<(FileEntry, FileEntry, u64)> {
        self.pairs.w.write_i64s(&self.pairs.buf)?;
        self.times.write_i64s(&self.tbuf)?;
        Ok((
            self.pairs.w.finish()?,
            self.times.finish()?,
            self.pairs.pairs,
        ))
    }
}
