//! Time-respecting sampling for [`super::HeteroSampler`], PyG's temporal neighbor sampling with
//! `disjoint=True`: where the edge times of a relation come from ([`EdgeTimes`]), how a batch's
//! seeds are grouped by time ([`Groups`]), and the search that cuts every neighbor list of a hop
//! to the edges not newer than its seed's time ([`Cutter`]).
//!
//! A relation's edge times are int64, one per entry of its neighbor file, and within each
//! destination's list the entries are sorted by (time, source id): the edges with time `<= T` are
//! a prefix of the list, found by binary search over the times. Each frontier node's count of
//! eligible edges is all a hop keeps of the search, in the entry its count of draws takes next
//! ([`HeteroSampler::cut_to_times`]). On disk the search runs over a hop's frontier (every
//! batch's lists at once, 8 bytes a list held for their order, so that a page several batches
//! probe is read once) in slices of a bounded number of lists ([`SLICE`], taken in file order, so
//! its workspace does not grow with the hyperbatch), round by round, each round one coalesced read
//! of the pages the slice probes: a list whose times fit in one page is read whole in the first
//! round, a longer one a page at a time (never the whole list), the page where the cut would be if
//! the times were spread evenly between those known around it (interpolation search; the dataset's
//! time range before anything is read). Where a slice's lists lie densely side by side in the file
//! (their pages at most 1.5 times those their first probes read) they are read whole instead, each
//! page once in long sequential runs, and cut in memory in the first round ([`Search::mark_dense`]);
//! overlapping reads (a list several batches probe) are read once. On R-MAT with uniform times
//! nearly every list is cut in the first round; the guess only chooses pages, never the cut.
//! Where the relation has time keys (`edge_time_keys.bin`, 2 bytes an entry: [`TimeKeys`],
//! `temporal/keys.rs`), the same search runs over the keys instead, then over the times of only
//! the run of each list that its seed time's bucket leaves undecided: the same counts, a file
//! 4 times smaller read.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ringgnn_io::{collapse_huge_pages, open_backend, BackendKind, CoalesceOptions, IoStats, ALIGN};
use ringgnn_store::manifest::{pad_to_page, IndexDtype, TimeRange};

use super::relabel::View;
use super::{corrupt_entry, BatchState, HeteroRequest, HeteroSample, HeteroSampler, Ids, Scratch};
use crate::batch::local_id;
use crate::idmap::{with_table, GroupKeys, Lookup};
use crate::neighbors::DiskNeighbors;
use crate::{Error, Offsets, Result};

mod keys;
pub use keys::TimeKeys;

/// Which of a node's eligible edges (those not newer than its seed's time) are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TemporalStrategy {
    /// Uniformly, by the same draws (fanout, `replace`, random stream) as a non-temporal
    /// sample over a list of the eligible edges only.
    #[default]
    Uniform,
    /// The `min(k, c)` most recent of the `c` eligible edges (all of them for a fanout of -1),
    /// without randomness, whatever `replace`.
    Last,
}

/// Entries per page of a file read by `disk` (8 bytes for times, 2 for time keys).
fn per_page(disk: &DiskNeighbors) -> u64 {
    ALIGN as u64 / disk.width()
}

/// Where a relation's edge times are read from.
pub enum EdgeTimes {
    /// The whole time file in RAM, shared by every sampler that holds it.
    Memory(Arc<[i64]>),
    /// Page reads through a read backend (entries read as `u64`, reinterpreted as `i64`), with
    /// the range of the file's times when known ([`EdgeTimes::with_range`]): the search's
    /// first guess, never its result.
    Disk(DiskNeighbors, Option<TimeRange>),
}

/// An error unless the time file `path` holds one int64 per edge of `num_edges`: exactly, or
/// zero-padded to a whole page as every binary file of the format is (what a disk read needs:
/// reads are whole pages). `dataset`: the directory of the dataset whose own file it is (the
/// error says to verify it), or `None` for a file attached by the caller (the error names it
/// as the one given).
pub(super) fn check_file(
    path: &Path,
    num_edges: u64,
    on_disk: bool,
    dataset: Option<&Path>,
) -> Result<()> {
    let len = file_len(path)?;
    let payload = num_edges.saturating_mul(8);
    if len != pad_to_page(payload) && (on_disk || len != payload) {
        let what = match dataset {
            Some(dir) => format!(
                "the dataset is damaged: run `ringgnn verify {}` and rebuild it",
                dir.display()
            ),
            None => format!(
                "the file given ({}) is not this relation's edge times: attach a file of one \
                 int64 per entry of its neighbor file",
                path.display()
            ),
        };
        return Err(Error::Corrupt(format!(
            "{}: {len} bytes of edge times, but the relation has {num_edges} edges, so it needs \
             {payload} (one int64 per entry of its neighbor file) padded to {} bytes; {what}",
            path.display(),
            pad_to_page(payload)
        )));
    }
    Ok(())
}

/// The length of the file `path`, an I/O error naming it.
fn file_len(path: &Path) -> Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
}

impl EdgeTimes {
    /// Load the time file `path` (attached by the caller) of a relation of `num_edges` edges
    /// into memory.
    pub fn load(path: &Path, num_edges: u64) -> Result<Arc<[i64]>> {
        Self::load_of(path, num_edges, None)
    }

    /// [`Self::load`] of the time file of the dataset `dataset` when `Some` (its errors send to
    /// `ringgnn verify`), else of a file attached by the caller.
    pub fn load_of(path: &Path, num_edges: u64, dataset: Option<&Path>) -> Result<Arc<[i64]>> {
        check_file(path, num_edges, false, dataset)?;
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let n = usize::try_from(num_edges).map_err(|_| {
            Error::Corrupt(format!(
                "{num_edges} edge times do not fit in memory on this machine"
            ))
        })?;
        let mut v = vec![0i64; n];
        File::open(path)
            .and_then(|mut f| f.read_exact(bytemuck::cast_slice_mut(&mut v)))
            .map_err(io)?;
        v.iter_mut().for_each(|x| *x = i64::from_le(*x));
        // The search reads the file at random: on huge pages a read costs its cache miss
        // without a page walk.
        let v: Arc<[i64]> = v.into();
        collapse_huge_pages(&v);
        Ok(v)
    }

    /// Read the time file `path` (attached by the caller) of a relation of `num_edges` edges
    /// with `kind` (`O_DIRECT` when `direct`), with why the backend fell back, if it did. The
    /// readers its search opens for further threads read duplicates of a descriptor opened
    /// now ([`DiskNeighbors::reopening_file`]): a file renamed or removed since is never read
    /// by name.
    pub fn open(
        path: &Path,
        num_edges: u64,
        kind: BackendKind,
        direct: bool,
        coalesce: CoalesceOptions,
    ) -> Result<(Self, Option<String>)> {
        Self::open_of(path, num_edges, None, (kind, direct), coalesce)
    }

    /// [`Self::open`] of the time file of the dataset `dataset` when `Some` (its errors send to
    /// `ringgnn verify`), else of a file attached by the caller.
    pub fn open_of(
        path: &Path,
        num_edges: u64,
        dataset: Option<&Path>,
        (kind, direct): (BackendKind, bool),
        coalesce: CoalesceOptions,
    ) -> Result<(Self, Option<String>)> {
        check_file(path, num_edges, true, dataset)?;
        let (reader, why) = open_backend(kind, path, direct).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        // The search reads at most a page a run, for which the page planner needs a buffer of
        // two.
        let coalesce = CoalesceOptions {
            buffer: coalesce.buffer.max(2 * ALIGN),
            ..coalesce
        };
        let d =
            DiskNeighbors::new(reader, path, IndexDtype::U64, coalesce).reopening_file(direct)?;
        Ok((EdgeTimes::Disk(d, None), why))
    }

    /// Cumulative I/O counters (all zero in memory).
    pub fn stats(&self) -> IoStats {
        match self {
            EdgeTimes::Memory(_) => IoStats::default(),
            EdgeTimes::Disk(d, _) => d.stats(),
        }
    }

    /// Read from disk, take the range of the file's times (the dataset's manifest records it)
    /// as where the search looks first: a list's cut is guessed where its times, spread evenly
    /// over what is known of them, would put it. Only which pages are read depends on it: a
    /// wrong range costs reads, never a different cut.
    pub fn with_range(self, range: Option<TimeRange>) -> Self {
        match self {
            EdgeTimes::Disk(d, _) => EdgeTimes::Disk(d, range),
            memory => memory,
        }
    }

    /// Stop disk reads between waves once `flag` is set.
    pub fn set_cancel(&mut self, flag: Arc<std::sync::atomic::AtomicBool>) {
        if let EdgeTimes::Disk(d, _) = self {
            d.set_cancel(flag);
        }
    }
}

impl HeteroSampler {
    /// How requests with seed times draw among the eligible edges (uniformly by default).
    pub fn set_temporal_strategy(&mut self, strategy: TemporalStrategy) {
        self.strategy = strategy;
    }

    /// Node times per type (`None` for a type without), each one per node of its type: a
    /// neighbor newer than its seed's time is dropped (see the module docs of `hetero.rs`).
    pub fn set_node_times(&mut self, times: Vec<Option<Arc<[i64]>>>) -> Result<()> {
        if times.len() != self.num_nodes.len() {
            return Err(Error::Input(format!(
                "node times for {} node types, but the sampler has {}; give one entry per type \
                 (None for a type without times)",
                times.len(),
                self.num_nodes.len()
            )));
        }
        for (t, (nt, &n)) in times.iter().zip(&self.num_nodes).enumerate() {
            if let Some(nt) = nt.as_ref().filter(|nt| nt.len() as u64 != n) {
                return Err(Error::Input(format!(
                    "node type {t}: {} node times for {n} nodes; give one time per node",
                    nt.len()
                )));
            }
        }
        self.node_times = times;
        Ok(())
    }

    /// At a hop of relation `r`, whose edge times are read from disk, over the batches of
    /// `outs`, some at seed times: each frontier node of a batch at seed times gets its count of
    /// edges not newer than its seed's time in its entry of `drawn[r].counts` (one entry per
    /// frontier node, every batch's in turn, already there), for the hop's draws to cut its
    /// range by. The search runs over every batch's lists at once (in groups of
    /// [`Cutter::group`] batches), so that a page of times several batches probe is read once,
    /// holding 8 bytes a list, a slice of lists a thread, each with its own reader of the times
    /// ([`Cutter::cut_lists`]). (In memory each batch's lists
    /// are searched where it is drawn, [`cut_batch_in_memory`].)
    pub(super) fn cut_to_times(&mut self, r: usize, outs: &[HeteroSample]) -> Result<()> {
        let rel = &mut self.rels[r];
        let Some(EdgeTimes::Disk(disk, range)) = rel.times.as_mut() else {
            return Ok(());
        };
        // A reader of the times (and of the keys) per thread after the first, opened once and
        // kept (where the source can open more).
        let threads = self.scratch.len();
        let more = &mut self.time_readers[r];
        let mut keys = self.time_keys[r].as_mut().map(|k| KeyReaders {
            first: &mut k.disk,
            more: &mut self.key_readers[r],
            bounds: &k.bounds,
        });
        for (first, more) in std::iter::once((&*disk, &mut *more))
            .chain(keys.as_mut().map(|k| (&*k.first, &mut *k.more)))
        {
            while more.len() + 1 < threads {
                match first.another() {
                    Some(d) => more.push(d?),
                    None => break,
                }
            }
        }
        let (dst, n_dst, indptr) = (rel.dst, self.num_nodes[rel.dst], &rel.indptr);
        let states = &self.states[..outs.len()];
        let mut counts = &mut self.drawn[r].counts[..];
        let mut first = 0;
        while first < outs.len() {
            let batches = first..outs.len().min(first.saturating_add(self.cutter.group));
            first = batches.end;
            let (states, outs) = (&states[batches.clone()], &outs[batches]);
            let bounds = keys.as_ref().map(|k| k.bounds);
            let table = (std::mem::take(&mut self.cutter.groups), self.cutter.pack);
            let lists = Frontier::new(states, outs, (dst, n_dst), indptr, bounds, table);
            let (part, rest) = std::mem::take(&mut counts).split_at_mut(lists.len());
            counts = rest;
            let readers = (&mut *disk, &mut more[..], keys.as_mut());
            let done = (self.cutter).cut_lists(readers, *range, threads, &lists, part);
            self.cutter.groups = lists.groups;
            done?;
        }
        Ok(())
    }

    /// Search relation `r`'s edge times read from disk over its time `keys` (a reader of its
    /// `edge_time_keys.bin` and its bounds, [`TimeKeys::open`]): the same counts, reading the
    /// keys and only the times they leave undecided. An input error where `r` is not a
    /// relation, or its times are not read from disk.
    pub fn set_time_keys(&mut self, r: usize, keys: TimeKeys) -> Result<()> {
        match self.rels.get(r).map(|rel| &rel.times) {
            Some(Some(EdgeTimes::Disk(..))) => {}
            _ => {
                return Err(Error::Input(format!(
                    "time keys for relation {r}, which has no edge times read from disk (the \
                     sampler has {} relations)",
                    self.rels.len()
                )))
            }
        }
        self.key_readers[r].clear();
        self.time_keys[r] = Some(keys);
        Ok(())
    }

    /// Search edge times through the lists of at most `batches` batches of a hop at once: for
    /// tests. The samples are the same whatever the group.
    #[doc(hidden)]
    pub fn set_cut_group(&mut self, batches: usize) {
        self.cutter.group = batches.max(1);
    }

    /// Whether a list's sort key holds its node, index and seed-time group, where their widths
    /// fit (the default), or only its index and where its range starts, the rest looked up from
    /// the frontier: for tests of the lookup, which the small graphs of tests never need. The
    /// samples are the same either way.
    #[doc(hidden)]
    pub fn set_cut_packed(&mut self, packed: bool) {
        self.cutter.pack = packed;
    }
}

/// In memory, a batch at seed times' search: each of its `n` frontier nodes, whose list and
/// limit are `list(j)`, gets its count of eligible edges in `counts[j]`, and `ranges` its range
/// cut to them (`limits` the workspace), for its draws (on the thread that draws it).
pub(super) fn cut_batch_in_memory(
    t: &[i64],
    n: usize,
    list: impl Fn(usize) -> ((u64, u64), i64),
    (ranges, limits): (&mut Vec<(u64, u64)>, &mut Vec<i64>),
    counts: &mut [u32],
) -> Result<()> {
    ranges.clear();
    ranges.reserve_exact(n);
    limits.clear();
    limits.reserve_exact(n);
    for j in 0..n {
        let (range, limit) = list(j);
        ranges.push(range);
        limits.push(limit);
    }
    cut_in_memory(t, ranges, limits);
    for (c, &(lo, hi)) in counts.iter_mut().zip(ranges.iter()) {
        *c = u32::try_from(hi - lo).map_err(|_| Error::TooLarge)?;
    }
    Ok(())
}

/// Relabel the entries `at` of relation `r`'s draws at this hop (`v.drawn[r]`), of temporal
/// batch `st`: each into the group of the node it was drawn for ([`GroupKeys`]), an entry newer
/// than its group's time by its node time dropped with its edge (its `col` and `edge`, and the
/// hop's edge count, shrink).
pub(super) fn relabel_in_groups(
    v: &View<'_>,
    sc: &mut Scratch,
    r: usize,
    st: &BatchState,
    at: std::ops::Range<usize>,
    out: &mut HeteroSample,
) -> Result<()> {
    let rel = &v.rels[r];
    let (src, n_src, n_dst) = (rel.src, v.num_nodes[rel.src], v.num_nodes[rel.dst]);
    let (drawn, len) = (&v.drawn[r], at.len());
    let node_times = v.node_times[src].as_deref();
    let c0 = out.col[r].len() - len;
    // The source type's nodes (pushed to) and, of another type, the destination's (read).
    let (node, dst_nodes) = match src.cmp(&rel.dst) {
        std::cmp::Ordering::Equal => (&mut out.node[src], None),
        std::cmp::Ordering::Less => {
            let (lo, hi) = out.node.split_at_mut(rel.dst);
            (&mut lo[src], Some(&hi[0]))
        }
        std::cmp::Ordering::Greater => {
            let (lo, hi) = out.node.split_at_mut(src);
            (&mut hi[0], Some(&lo[rel.dst]))
        }
    };
    let (row, col) = (&mut out.row[r], &mut out.col[r]);
    let mut edge = out.edge.as_mut().map(|e| &mut e[r]);
    let times = &st.groups.times;
    let group = |l: u64| {
        let key = match dst_nodes {
            Some(d) => d[l as usize],
            None => node[l as usize],
        };
        GroupKeys::split(key, n_dst).0
    };
    // Each group's table sized for its draws at once, just before they come.
    sc.maps[src].count_in_groups(col[c0..].iter().map(|&l| group(l)));
    let mut kept = c0;
    let mut last = u64::MAX;
    with_table!(sc.maps[src], t => for (i, (u, p)) in drawn.pairs(at.clone()).enumerate() {
        if u >= n_src {
            return Err(corrupt_entry(r, p, u, src, n_src));
        }
        // The group of the frontier node it was drawn for (`col` is compacted behind `i`).
        let l = col[c0 + i] as usize;
        let (g, _) = GroupKeys::split(match dst_nodes {
            Some(d) => d[l],
            None => node[l],
        }, n_dst);
        if g != last {
            t.prepare_group(g);
            last = g;
        }
        if node_times.is_some_and(|nt| nt[u as usize] > times[g as usize]) {
            continue;
        }
        row.push(local_id(t, node, GroupKeys::key(g, n_src, u))? as u64);
        col[kept] = col[c0 + i];
        kept += 1;
        if let Some(e) = &mut edge {
            e.push(p);
        }
    });
    col.truncate(kept);
    *out.num_sampled_edges[r]
        .last_mut()
        .expect("pushed by the draws") = kept - c0;
    Ok(())
}

/// The node of frontier entry `key` of a type of `n` nodes: its group's key split off in a batch
/// at seed times (`on`).
#[inline(always)]
pub(super) fn node_of(key: u64, on: bool, n: u64) -> u64 {
    match on {
        true => GroupKeys::split(key, n).1,
        false => key,
    }
}

/// A list to cut, `((lo, hi), limit)`: the range of its entries and the latest eligible time
/// (`i64::MAX`: every entry eligible, nothing searched).
type List = ((u64, u64), i64);

/// The lists [`Cutter::cut_lists`] searches: list `i` of `0..len()`, walked in order with their
/// sort keys ([`Self::walk`], where the lists to search are found), then made again from their
/// sort keys ([`Self::each`], where a slice's probes are made).
trait Lists: Sync {
    fn len(&self) -> usize;
    /// `f(at, list(at), key)` for the list `at` of each sort key of `slice` (keys of
    /// [`Self::walk`]), in order, with `key` the time key of its limit where the lists were made
    /// with the relation's key bounds (else `None`).
    fn each(&self, slice: &[u64], f: impl FnMut(u32, List, Option<u16>));
    /// `f(i, list(i), sort)` for each list `i` of `at` that may be searched (a list not walked
    /// keeps its count: not at seed times), `sort` its sort key: below `u64::MAX`, and in the
    /// order of where the lists' ranges start in the file (exactly in a file of up to 2^32
    /// entries), lists of one node by index.
    fn walk(&self, at: Range<usize>, f: impl FnMut(usize, List, u64) -> Result<()>) -> Result<()>;
}

/// How a list's sort key ([`Lists::walk`]) is laid out.
#[derive(Clone, Copy, Debug)]
enum SortKey {
    /// Its node above its index above its seed-time group (the group's place in
    /// [`Frontier::groups`]), `index` and `group` bits wide: the list made from its key alone
    /// (its node's range from the offsets, read in order of the nodes), where the three fit 63
    /// bits (R-MAT 23's hop 2: 23 + 22 + 17).
    Packed { index: u32, group: u32 },
    /// Where its range starts, shifted right by `shift` to fit 32 bits, above its index (32
    /// bits): its node and group looked up from its batch's frontier (a read at random).
    ByRange { shift: u32 },
}

/// Bits to write any value up to `x`.
fn width(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// A group of batches' frontier lists of relation `r` at a hop, every batch's in turn: list `i`
/// is frontier node `i - starts[b]` of batch `b` of the group, searched in a batch at seed times.
struct Frontier<'a> {
    states: &'a [BatchState],
    outs: &'a [HeteroSample],
    /// Where each batch's lists start, then the count of them all.
    starts: Vec<usize>,
    dst: usize,
    n_dst: u64,
    indptr: &'a Offsets,
    /// Every batch's seed times with their time keys (`None` without the relation's key
    /// bounds), the groups of batch `b` from `first[b]`: a group's key found once, not once
    /// per list (a search of 65,536 bounds, whose last steps miss the cache). Its buffer is
    /// the [`Cutter`]'s, kept from hop to hop and counted in its bytes.
    groups: Vec<(i64, Option<u16>)>,
    first: Vec<usize>,
    sort: SortKey,
}

/// Lists whose frontier keys [`Frontier::each`] reads together before making any of them.
const KEYS_AHEAD: usize = 64;

impl<'a> Frontier<'a> {
    fn new(
        states: &'a [BatchState],
        outs: &'a [HeteroSample],
        (dst, n_dst): (usize, u64),
        indptr: &'a Offsets,
        bounds: Option<&[i64]>,
        (mut groups, pack): (Vec<(i64, Option<u16>)>, bool),
    ) -> Self {
        let mut starts = Vec::with_capacity(states.len() + 1);
        let mut first = Vec::with_capacity(states.len());
        let on = |st: &&BatchState| st.groups.on;
        let total = (states.iter().filter(on)).map(|st| st.groups.times.len());
        groups.clear();
        // Room for every group exactly: the capacity is counted in the cutter's bytes.
        groups.reserve_exact(total.sum());
        let mut n = 0;
        for st in states {
            starts.push(n);
            n += st.frontier[dst].len();
            first.push(groups.len());
            if st.groups.on {
                let key = |t| bounds.and_then(|b| ringgnn_store::time_keys::key_of(b, t));
                groups.extend(st.groups.times.iter().map(|&t| (t, key(t))));
            }
        }
        starts.push(n);
        let last = |len: usize| width((len as u64).saturating_sub(1));
        let (index, group) = (last(n), last(groups.len()));
        let sort = match width(n_dst.saturating_sub(1)) + index + group {
            bits if pack && bits <= 63 => SortKey::Packed { index, group },
            _ => {
                let entries = indptr.last().unwrap_or(0);
                SortKey::ByRange {
                    shift: width(entries).saturating_sub(32),
                }
            }
        };
        Frontier {
            states,
            outs,
            starts,
            dst,
            n_dst,
            indptr,
            groups,
            first,
            sort,
        }
    }

    /// Batch `b`'s frontier nodes (keys).
    fn frontier(&self, b: usize) -> Ids<'a> {
        let st = &self.states[b];
        let nodes = st.ids(&self.outs[b], self.dst);
        nodes.slice(st.frontier[self.dst].clone())
    }
}

impl Lists for Frontier<'_> {
    fn len(&self) -> usize {
        self.starts[self.states.len()]
    }

    fn each(&self, slice: &[u64], mut f: impl FnMut(u32, List, Option<u16>)) {
        if let SortKey::Packed { index, group } = self.sort {
            // Everything in the key: the offsets read in order of the nodes, the groups'
            // table small.
            let mask = |bits: u32| (1u64 << bits) - 1;
            for &o in slice {
                let (v, i) = (o >> (index + group), (o >> group) & mask(index));
                let (t, j) = self.groups[(o & mask(group)) as usize];
                f(i as u32, (self.indptr.range(v as usize), t), j);
            }
            return;
        }
        // The lists' frontier keys (each a cache miss: a slice's lists are in file order, not
        // the frontier's) read a block at a time in one loop of independent loads, then each
        // list made from its key.
        let mut got = [(0u32, 0u64); KEYS_AHEAD];
        for block in slice.chunks(KEYS_AHEAD) {
            for (g, &o) in got.iter_mut().zip(block) {
                let i = o as u32 as usize;
                let b = self.starts.partition_point(|&s| s <= i) - 1;
                *g = (b as u32, self.frontier(b).at(i - self.starts[b]));
            }
            for (&(b, key), &o) in got.iter().zip(block) {
                let b = b as usize;
                if !self.states[b].groups.on {
                    f(o as u32, (self.indptr.range(key as usize), i64::MAX), None);
                    continue;
                }
                let (g, v) = GroupKeys::split(key, self.n_dst);
                let (t, j) = self.groups[self.first[b] + g as usize];
                f(o as u32, (self.indptr.range(v as usize), t), j);
            }
        }
    }

    fn walk(
        &self,
        at: Range<usize>,
        mut f: impl FnMut(usize, List, u64) -> Result<()>,
    ) -> Result<()> {
        if at.is_empty() {
            return Ok(());
        }
        let mut b = self.starts.partition_point(|&s| s <= at.start) - 1;
        let mut i = at.start;
        while i < at.end {
            let (start, end) = (self.starts[b], self.starts[b + 1].min(at.end));
            let st = &self.states[b];
            if st.groups.on {
                let nodes = self.frontier(b);
                for i in i..end {
                    let (g, v) = GroupKeys::split(nodes.at(i - start), self.n_dst);
                    let g = self.first[b] + g as usize;
                    let (a, e) = self.indptr.range(v as usize);
                    let sort = match self.sort {
                        SortKey::Packed { index, group } => {
                            v << (index + group) | (i as u64) << group | g as u64
                        }
                        SortKey::ByRange { shift } => (a >> shift) << 32 | i as u64,
                    };
                    f(i, ((a, e), self.groups[g].0), sort)?;
                }
            }
            (i, b) = (end, b + 1);
        }
        Ok(())
    }
}

/// An error unless `req`'s seed times, if any, are one list per list of seeds, one time per
/// seed.
pub(super) fn check_times(req: &HeteroRequest<'_>) -> Result<()> {
    let Some(times) = req.times else {
        return Ok(());
    };
    if times.len() != req.seeds.len() {
        return Err(Error::Input(format!(
            "seed times for {} seed lists, but the request has {}: give one list of times per \
             list of seeds",
            times.len(),
            req.seeds.len()
        )));
    }
    for (&(t, ids), ts) in req.seeds.iter().zip(times) {
        if ts.len() != ids.len() {
            return Err(Error::Input(format!(
                "{} seed times for {} seeds of node type {t}: give one time per seed",
                ts.len(),
                ids.len()
            )));
        }
    }
    Ok(())
}

/// A batch's seed times: its distinct times in order of first appearance (group `g` is the
/// subgraph of the seeds at `times[g]`). A node `v` reached in group `g` is the key
/// [`GroupKeys::key`]`(g, n, v)` while the batch is sampled: the dedup map of its type keeps the
/// groups apart (one table per group).
#[derive(Default)]
pub(super) struct Groups {
    /// Whether the batch is temporal (it may have no seeds).
    pub on: bool,
    pub times: Vec<i64>,
    index: HashMap<i64, u64>,
}

impl Groups {
    pub fn clear(&mut self, on: bool) {
        self.on = on;
        self.times.clear();
        self.index.clear();
    }

    /// The group of seed time `t`, a new one after the others when it is new.
    pub fn group(&mut self, t: i64) -> u64 {
        let next = self.times.len() as u64;
        let g = *self.index.entry(t).or_insert(next);
        if g == next {
            self.times.push(t);
        }
        g
    }

    /// For a temporal batch, its sample's keys back to node ids, with the time of each one's
    /// group in `out.time`.
    pub fn finish(&self, out: &mut HeteroSample, num_nodes: &[u64]) {
        if !self.on {
            return;
        }
        let times = out.node.iter_mut().zip(num_nodes).map(|(node, &n)| {
            let time = node.iter_mut().map(|k| {
                let (g, v) = GroupKeys::split(*k, n);
                *k = v;
                self.times[g as usize]
            });
            time.collect()
        });
        out.time = Some(times.collect());
    }

    /// The keys of a type of `n` nodes, or an error when they would not fit 64 bits.
    pub fn keys(&self, n: u64, t: usize) -> Result<GroupKeys> {
        let keys = GroupKeys {
            groups: self.times.len() as u64,
            n,
        };
        keys.fit().then_some(keys).ok_or_else(|| {
            Error::Input(format!(
                "{} distinct seed times in one batch over node type {t} of {n} nodes: the \
                 batch's subgraphs (one per seed time) cannot be numbered in 64 bits; give \
                 fewer distinct times per batch",
                self.times.len()
            ))
        })
    }
}

/// One list being searched: list `at` of a [`Cutter::cut_lists`], every position below `a` with
/// a time `<= limit`, every one from `b` on with a later time, and the times in `[a, b)` within
/// `[ta, tb]` (the times read just outside it, or the relation's range); `s` is where this
/// round reads, `lo` where the list starts. 64 bytes: a slice holds [`SLICE`] of them.
struct Probe {
    at: u32,
    /// Whether this round reads the middle page (the last guess did not halve `[a, b)`).
    bisect: bool,
    /// Whether the list lies in a dense region of the slice ([`Search::mark_dense`]): read
    /// whole in the first round, with the region's other lists, and cut in memory.
    dense: bool,
    /// Over time keys, whether the probe also finds the list's count at `limit - 1` (its keys
    /// on one page, read whole in the first round: both of its partition points from one
    /// read, [`Search::load_keys`]), a second entry of `at` in the slice's cuts.
    pair: bool,
    lo: u64,
    a: u64,
    b: u64,
    s: u64,
    ta: i64,
    tb: i64,
    limit: i64,
}

impl Probe {
    /// Whether `[a, b)` is read whole this round, which ends the search: it is on one page, or
    /// the list is dense.
    fn short(&self, pp: u64) -> bool {
        self.dense || (self.b - 1) / pp - self.a / pp < 1
    }

    /// Set where this round's read starts, `s`: `a` for a short list, else the first entry of
    /// `[a, b)` on the page of the guess. The guess is where the cut would be if the times in
    /// `[a, b)` were spread evenly over `[ta, tb]` (times are roughly uniform within a list on
    /// many graphs), or the middle where that guess did not halve `[a, b)` last round:
    /// interpolation search, at worst half as fast as bisection, never wrong (every read
    /// narrows `[a, b)`).
    fn aim(&mut self, limit: i64, pp: u64) {
        if self.short(pp) {
            self.s = self.a;
            return;
        }
        let n = self.b - self.a;
        // A side not known yet (no range given) leaves nothing to interpolate between.
        let unknown = self.ta == i64::MIN || self.tb == i64::MAX;
        let guess = match self.bisect || unknown || self.ta > self.tb {
            true => n / 2,
            false => interpolate(n, self.ta, self.tb, limit),
        };
        self.s = self.a.max((self.a + guess) / pp * pp);
    }

    /// What the probes of `c` read this round, `(s, end)` each.
    fn spans(c: &[Probe], pp: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        c.iter().map(move |pr| (pr.s, pr.end(pp)))
    }

    /// Where this round's read ends: `b` for a short list, else the end of the page of `s`
    /// (`pp` entries a page).
    fn end(&self, pp: u64) -> u64 {
        match self.short(pp) {
            true => self.b,
            false => self.b.min((self.s / pp + 1) * pp),
        }
    }
}

/// Lists the search from disk works through at once: a hop's lists go in slices of at most
/// this many, each searched to its end before the next, so its workspace is bounded whatever
/// the hyperbatch (1 MiB of [`Probe`]s, beside the read chunk's [`CHUNK`] entries); only the
/// order of the lists, 8 bytes each, grows with the frontier. A slice's round is still one
/// coalesced read of up to as many pages, a queue deep enough for the device. Where a hop takes
/// several slices they follow the lists' positions in the file, so a page probed by several
/// lists (a node expanded by several batches of the hop, short lists side by side) is read
/// once as without slices: on R-MAT 22 under 240M, at 4 batches a hyperbatch, 7.52 GB read
/// with slices of 16K, 64K or without slicing, against 8.28 (64K) and 9.04 GB (16K) taking the
/// lists in frontier order.
const SLICE: usize = 1 << 14;

/// A search's readers from disk: of the times, the calling thread's and one per other thread,
/// and of the keys likewise, with their bounds, where the relation has them.
type Readers<'a, 'k> = (
    &'a mut DiskNeighbors,
    &'a mut [DiskNeighbors],
    Option<&'a mut KeyReaders<'k>>,
);

/// A relation's readers of its time keys (see [`Readers`]).
struct KeyReaders<'k> {
    first: &'k mut DiskNeighbors,
    more: &'k mut Vec<DiskNeighbors>,
    bounds: &'k [i64],
}

/// The slot of a list not searched in [`Cutter::cut_lists`]'s order (no sort key,
/// [`Lists::walk`]).
const SKIP: u64 = u64::MAX;

/// The workspace of the batched search (kept from hop to hop).
pub(super) struct Cutter {
    /// One per reader (the first the calling thread's): the search of one slice at a time.
    work: Vec<Search>,
    /// The most lists searched at once ([`SLICE`] unless a test sets it).
    slice: usize,
    /// The lists of a group with something to cut (their sort keys, [`Lists::walk`]), 8 bytes
    /// a list: what the search holds per frontier node.
    order: Vec<u64>,
    /// The seed-time groups of a group of batches with their time keys ([`Frontier::groups`]),
    /// 16 bytes a group.
    groups: Vec<(i64, Option<u16>)>,
    /// Whether sort keys are packed where they fit ([`SortKey`]; a test turns it off).
    pack: bool,
    /// The batches of a hop whose lists are searched together from disk (all of them unless a
    /// test sets it).
    pub(super) group: usize,
}

impl Default for Cutter {
    fn default() -> Self {
        Cutter {
            work: vec![Search::default()],
            order: Vec::new(),
            groups: Vec::new(),
            pack: true,
            slice: SLICE,
            group: usize::MAX,
        }
    }
}

impl Cutter {
    /// Search at most `lists` lists at once (at least one): for tests, which need a hop's
    /// lists in several slices on small graphs. The cuts are the same whatever the slice.
    pub fn set_slice(&mut self, lists: usize) {
        self.slice = lists.max(1);
    }

    /// Bytes its buffers hold.
    pub fn bytes(&self) -> u64 {
        let group = std::mem::size_of::<(i64, Option<u16>)>() as u64;
        8 * self.order.capacity() as u64
            + group * self.groups.capacity() as u64
            + self.scratch_bytes()
    }

    /// Of [`Self::bytes`], what one slice's search holds, per reader: bounded by the slice and
    /// the read chunk, whatever the number of lists cut.
    pub fn scratch_bytes(&self) -> u64 {
        let probe = std::mem::size_of::<Probe>();
        let each = |w: &Search| {
            probe * w.live.capacity()
                + std::mem::size_of::<keys::Keyed>() * w.keyed.capacity()
                + 16 * w.runs.capacity()
                + 8 * w.cuts.capacity()
                + 8 * w.vals.capacity()
        };
        self.work.iter().map(each).sum::<usize>() as u64
    }

    /// From disk, the count of every list `i` of `lists` at seed times in `counts[i]`: `c`, the
    /// number of its entries whose time is `<= limit`, searched for a list with entries and a
    /// limit below `i64::MAX` (the other lists are not searched: eligible whole). Its order of
    /// the lists, 8 bytes a list, is all it holds per list; the rest is one slice's per reader.
    /// The lists to search are found on `threads` threads (each walking its part of them in
    /// order), then each reader's thread takes the next slice of them in turn (making its
    /// probes, searching it round by round and writing its counts) until none is left, so a
    /// thread never waits for the others between slices.
    fn cut_lists(
        &mut self,
        readers: Readers<'_, '_>,
        range: Option<TimeRange>,
        threads: usize,
        lists: &impl Lists,
        counts: &mut [u32],
    ) -> Result<()> {
        let n = lists.len();
        // Every index fits 32 bits, below `u32::MAX`.
        u32::try_from(n).map_err(|_| Error::TooLarge)?;
        // The lists with something to cut, by sort key; where they take more than one slice, in
        // the order of their ranges in the file, so that the lists of a node expanded by several
        // batches of the hop, and of nodes stored side by side, share a slice and its reads.
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        // Room for every list exactly, not up to twice as many as it grows: the capacity is what
        // a loader measures and sizes hyperbatches by.
        order.reserve_exact(n);
        order.resize(n, SKIP);
        // Each list's slot: its key where it is searched, else its count (a seed time after
        // every time, or no entries).
        let find = |at: Range<usize>, order: &mut [u64], counts: &mut [u32]| {
            let first = at.start;
            lists.walk(at, |i, ((a, b), limit), sort| {
                let k = i - first;
                if a < b && limit != i64::MAX {
                    order[k] = sort;
                } else {
                    counts[k] = match limit {
                        i64::MAX => (b.checked_sub(a).and_then(|c| u32::try_from(c).ok()))
                            .ok_or(Error::TooLarge)?,
                        _ => 0,
                    };
                }
                Ok(())
            })
        };
        let found = if threads <= 1 || n <= self.slice {
            find(0..n, &mut order, counts)
        } else {
            let per = n.div_ceil(threads);
            std::thread::scope(|sc| {
                let parts = order.chunks_mut(per).zip(counts.chunks_mut(per));
                let handles: Vec<_> = (parts.enumerate())
                    .map(|(k, (o, c))| {
                        let at = k * per..k * per + o.len();
                        sc.spawn(move || find(at, o, c))
                    })
                    .collect();
                crate::hyper::join_all(handles)
            })
        };
        order.retain(|&o| o != SKIP);
        if order.len() > self.slice {
            order.sort_unstable();
        }
        let done = found.and_then(|()| self.search(readers, range, lists, &order, counts));
        self.order = order;
        done
    }

    /// The search of the lists of `order` (sort keys, the lists' indices in their low 32 bits),
    /// slice by slice, each slice on the next reader's thread free, its counts written to
    /// `counts` (under a lock: a slice's lists are anywhere among them).
    fn search(
        &mut self,
        (disk, more, keys): Readers<'_, '_>,
        range: Option<TimeRange>,
        lists: &impl Lists,
        order: &[u64],
        counts: &mut [u32],
    ) -> Result<()> {
        // Without the relation's range the first round bisects.
        let start = match range {
            Some(r) => (r.min, r.max, false),
            None => (i64::MIN, i64::MAX, true),
        };
        let size = self.slice;
        let readers = 1 + more
            .len()
            .min(keys.as_ref().map_or(usize::MAX, |k| k.more.len()));
        let t = readers.min(order.len().div_ceil(size));
        let bounds = keys.as_ref().map(|k| k.bounds);
        if self.work.len() < t {
            self.work.resize_with(t, Search::default);
        }
        let (next, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
        let counts = Mutex::new(counts);
        // Over the keys where there are (then the times of the runs they leave undecided),
        // else over the times.
        let one = |w: &mut Search, d: &mut DiskNeighbors, k: Option<&mut DiskNeighbors>, slice| {
            match (k, bounds) {
                (Some(k), Some(bounds)) => {
                    w.load_keys(slice, lists, bounds);
                    w.search(k)?;
                    w.undecided(bounds, start.1)?;
                }
                _ => w.load(slice, lists, start),
            }
            w.search(d)
        };
        let job = |w: &mut Search, d: &mut DiskNeighbors, mut k: Option<&mut DiskNeighbors>| {
            while !stop.load(Ordering::Relaxed) {
                let first = next.fetch_add(1, Ordering::Relaxed).saturating_mul(size);
                let Some(slice) = order.get(first..order.len().min(first.saturating_add(size)))
                else {
                    break;
                };
                if let Err(e) = one(w, d, k.as_deref_mut(), slice) {
                    stop.store(true, Ordering::Relaxed);
                    return Err(e);
                }
                let mut counts = counts.lock().unwrap_or_else(PoisonError::into_inner);
                for &(at, c) in &w.cuts {
                    counts[at as usize] = c;
                }
            }
            Ok::<_, Error>(())
        };
        let key_readers: Vec<Option<&mut DiskNeighbors>> = match keys {
            Some(k) => (std::iter::once(&mut *k.first).chain(k.more.iter_mut()))
                .map(Some)
                .collect(),
            None => Vec::new(),
        };
        let key_readers = key_readers
            .into_iter()
            .chain(std::iter::repeat_with(|| None));
        let readers = std::iter::once(disk)
            .chain(more.iter_mut())
            .zip(key_readers);
        match t {
            0 => Ok(()),
            1 => {
                let (d, k) = readers.into_iter().next().expect("one reader");
                job(&mut self.work[0], d, k)
            }
            _ => std::thread::scope(|sc| {
                let job = &job;
                let handles: Vec<_> = (self.work[..t].iter_mut().zip(readers))
                    .map(|(w, (d, k))| sc.spawn(move || job(w, d, k)))
                    .collect();
                crate::hyper::join_all(handles)
            }),
        }
    }
}

/// The search of one slice of lists from disk: the lists still searched (sorted by where this
/// round reads), the runs of a round's chunk and their times, and the counts found.
#[derive(Default)]
struct Search {
    live: Vec<Probe>,
    runs: Vec<(u64, u64)>,
    vals: Vec<u64>,
    /// `(list, count)`: the list's count of eligible entries.
    cuts: Vec<(u32, u32)>,
    /// Over time keys, the slice's lists ([`Search::load_keys`]).
    keyed: Vec<keys::Keyed>,
}

impl Search {
    /// Its probes for the lists of `slice` (sort keys of [`Cutter::cut_lists`]), every one
    /// starting from `(ta, tb, bisect)`.
    fn load(&mut self, slice: &[u64], lists: &impl Lists, (ta, tb, bisect): (i64, i64, bool)) {
        self.cuts.clear();
        self.live.clear();
        let live = &mut self.live;
        lists.each(slice, |at, ((a, b), limit), _| {
            live.push(Probe {
                at,
                bisect,
                dense: false,
                pair: false,
                lo: a,
                a,
                b,
                s: a,
                ta,
                tb,
                limit,
            })
        });
    }

    /// Search the lists of `live` to their ends, round by round, each round one
    /// coalesced read (in chunks) of the pages they probe, and cut their ranges.
    fn search(&mut self, disk: &mut DiskNeighbors) -> Result<()> {
        // A dense list may take the whole read chunk, but no more than the read buffer holds
        // (a run's pages, one more where it does not start on a page).
        let pp = per_page(disk);
        let cap = CHUNK.min((disk.buffer_bytes() / disk.width()).saturating_sub(pp));
        self.mark_dense(cap, pp);
        while !self.live.is_empty() {
            // What each list reads this round: all of it when it is on one page, else the page
            // of its guess.
            for pr in &mut self.live {
                pr.aim(pr.limit, pp);
            }
            self.live.sort_unstable_by_key(|pr| pr.s);
            // Read in chunks of at most `CHUNK` entries, so the times held do not grow with the
            // frontier (a hop of a hyperbatch probes hundreds of thousands of lists).
            let Search {
                live,
                runs,
                vals,
                cuts,
                ..
            } = &mut *self;
            let mut rest = &mut live[..];
            while !rest.is_empty() {
                // Spans that overlap (a list probed by several batches, read whole or at the
                // same guess) are read once, one run, and share their times.
                let (n, count, total) = merge_spans(Probe::spans(rest, pp), CHUNK, |_| {});
                let (chunk, tail) = rest.split_at_mut(n);
                rest = tail;
                // Reserved exactly: what they hold is the chunk's, not twice it.
                runs.clear();
                runs.reserve_exact(count);
                merge_spans(Probe::spans(chunk, pp), CHUNK, |r| runs.push(r));
                vals.clear();
                vals.reserve_exact(total as usize);
                vals.resize(total as usize, 0);
                disk.fetch_runs(runs, vals)?;
                // The run of the next probe, and where its times start in `vals`.
                let (mut r, mut base) = (0, 0);
                for pr in chunk {
                    let (l, s, e, n) = (pr.limit, pr.s, pr.end(pp), pr.b - pr.a);
                    while s >= runs[r].0 + runs[r].1 {
                        base += runs[r].1;
                        r += 1;
                    }
                    let at = (base + s - runs[r].0) as usize;
                    let got = &vals[at..at + (e - s) as usize];
                    let k = got.partition_point(|&x| x as i64 <= l);
                    if pr.pair {
                        // The whole list read (its first round, on one page): its count at
                        // the key below too.
                        let below = got[..k].partition_point(|&x| (x as i64) < l);
                        cuts.push((pr.at, below as u32));
                    }
                    let j = s + k as u64;
                    if j > s {
                        pr.a = j;
                        pr.ta = got[k - 1] as i64;
                    }
                    if j < e {
                        pr.b = j;
                        pr.tb = got[k] as i64;
                    }
                    pr.bisect = !pr.bisect && 2 * (pr.b - pr.a) > n;
                }
            }
            let (cuts, mut big) = (&mut self.cuts, false);
            self.live.retain(|pr| {
                let over = pr.a >= pr.b;
                if over {
                    match u32::try_from(pr.a - pr.lo) {
                        Ok(c) => cuts.push((pr.at, c)),
                        Err(_) => big = true,
                    }
                }
                !over
            });
            if big {
                return Err(Error::TooLarge);
            }
        }
        Ok(())
    }
}

impl Search {
    /// Mark the lists of dense regions of the time file, to be read whole in the first round
    /// (sequential runs of pages, each read once) and cut in memory, rather than searched a
    /// page a round. The lists in file order make regions: a region grows by the next list
    /// while that list starts on its last page or the next one and the region spans at most
    /// `cap` entries. A region is dense where its pages are at most [`DENSE`] times the pages
    /// the first round would read of its lists anyway (each list's whole page where it is on
    /// one, else the page of its first guess): many short lists side by side, or a long list
    /// among many probed ones. Elsewhere (long lists alone, lists pages apart) the search
    /// probes page by page. Which pages are read depends on it, never the cuts.
    fn mark_dense(&mut self, cap: u64, pp: u64) {
        let live = &mut self.live;
        live.sort_unstable_by_key(|pr| pr.a);
        let mut i = 0;
        while i < live.len() {
            let (start, mut end) = (live[i].a, live[i].b);
            let first_aim = |pr: &mut Probe| {
                pr.aim(pr.limit, pp);
                pr.s / pp
            };
            let (mut aims, mut top) = (1u64, first_aim(&mut live[i]));
            let mut j = i + 1;
            while let Some(pr) = live.get_mut(j) {
                if pr.a / pp > (end - 1) / pp + 1 || pr.b.max(end) - start > cap {
                    break;
                }
                end = end.max(pr.b);
                let p = first_aim(pr);
                if p > top {
                    (aims, top) = (aims + 1, p);
                }
                j += 1;
            }
            let pages = (end - 1) / pp - start / pp + 1;
            let dense = end - start <= cap && pages * DENSE.1 <= aims * DENSE.0;
            for pr in &mut live[i..j] {
                pr.dense = dense;
            }
            i = j;
        }
    }
}

/// A region of lists is read whole when its pages are at most `DENSE.0 / DENSE.1` times the
/// distinct pages its lists' first probes read ([`Search::mark_dense`]).
const DENSE: (u64, u64) = (3, 2);

/// Searches [`cut_in_memory`] runs side by side: about as many cache misses as a core keeps in
/// flight.
const LANES: usize = 16;

/// Lists whose two ends [`cut_in_memory`] reads together, before searching any of them.
const BLOCK: usize = 256;

/// Times on one cache line: a span this short is searched whole.
const LINE: u64 = 8;

/// One list searched in memory, `ranges[at]`: every entry below `a` is eligible (time `<=
/// limit`), none from `b` on, and the times in `[a, b)` lie within `[ta, tb]`.
#[derive(Clone, Copy)]
struct Lane {
    at: usize,
    a: u64,
    b: u64,
    ta: i64,
    tb: i64,
    limit: i64,
    /// Whether the next step bisects (the last guess did not halve `[a, b)`).
    bisect: bool,
}

impl Lane {
    /// One step: a span of at most a line is searched whole (`Some(cut)`); else the entry
    /// where the cut would be if the times in `[a, b)` were spread evenly over `[ta, tb]`, or
    /// the middle where the last guess did not halve `[a, b)`, as the search from disk guesses
    /// its pages.
    #[inline(always)]
    fn step(&mut self, t: &[i64]) -> Option<u64> {
        let (a, b, limit) = (self.a, self.b, self.limit);
        if b - a <= LINE {
            let span = &t[a as usize..b as usize];
            return Some(a + span.partition_point(|&x| x <= limit) as u64);
        }
        self.narrow(t, self.guess())
    }

    /// Where the next step reads (more than a line left).
    #[inline(always)]
    fn guess(&self) -> u64 {
        let n = self.b - self.a;
        self.a
            + match self.bisect {
                true => n / 2,
                false => interpolate(n, self.ta, self.tb, self.limit),
            }
    }

    /// The step that reads at `p` ([`Self::guess`]): the times of `[a, b)` on the cache line of
    /// `p`, all read by one miss, which hold the cut (`Some(cut)`) or narrow `[a, b)` to one
    /// side of them.
    #[inline(always)]
    fn narrow(&mut self, t: &[i64], p: u64) -> Option<u64> {
        let (a, b, n) = (self.a, self.b, self.b - self.a);
        // The entries of `t` are 8-byte aligned: those of one line start where the address
        // is a multiple of 64.
        let skew = (t.as_ptr() as usize / 8 + p as usize) as u64 % LINE;
        let (lo, hi) = (a.max(p.saturating_sub(skew)), b.min(p + (LINE - skew)));
        let span = &t[lo as usize..hi as usize];
        let k = span.partition_point(|&x| x <= self.limit);
        if k == 0 {
            (self.b, self.tb) = (lo, span[0]);
        } else if k == span.len() {
            (self.a, self.ta) = (hi, span[k - 1]);
        } else {
            return Some(lo + k as u64);
        }
        self.bisect = !self.bisect && 2 * (self.b - self.a) > n;
        None
    }
}

/// Where among `n` entries (at least one) whose times lie within `[ta, tb]` the cut at `limit`
/// would be if they were spread evenly: an offset below `n`.
fn interpolate(n: u64, ta: i64, tb: i64, limit: i64) -> u64 {
    let span = tb as f64 - ta as f64 + 1.0;
    let below = (limit as f64 - ta as f64 + 1.0).clamp(0.0, span);
    ((below / span * n as f64) as u64).min(n - 1)
}

/// The lists [`cut_in_memory`] hands to its lanes, [`BLOCK`] at a time: first the two ends of
/// every list of the block, read in one loop of independent loads (the first miss of each
/// list, overlapped with the others' where a lane's first step would wait for it alone), then
/// in a second such loop the line of the first guess of each list longer than a line that
/// its ends do not settle (its second miss); then list by list those reads settle a list
/// wholly eligible or not at all, or one of at most a line (searched whole, its line just
/// read), or one cut on the line of its guess, and start a lane for the rest.
struct Feed {
    /// The next list, and the end of the block whose ends are read.
    next: usize,
    end: usize,
    /// The times at both ends of each list of the block (from `end - ends.len()`).
    ends: Vec<(i64, i64)>,
}

/// The lane of list `at`, `(a, b)` of more than a line, cut at `limit`, with times `first`
/// and `last` at its ends, which do not settle it.
#[inline(always)]
fn lane(at: usize, (a, b): (u64, u64), limit: i64, (first, last): (i64, i64)) -> Lane {
    let (ta, tb, bisect) = (first, last, false);
    let (a, b) = (a + 1, b - 1);
    Lane {
        at,
        a,
        b,
        ta,
        tb,
        limit,
        bisect,
    }
}

impl Feed {
    /// The next list to search further, its cut set instead where its ends settle it.
    #[inline(always)]
    fn take(&mut self, t: &[i64], ranges: &mut [(u64, u64)], limits: &[i64]) -> Option<Lane> {
        loop {
            if self.next == self.end {
                if self.end == ranges.len() {
                    return None;
                }
                let block = self.end..ranges.len().min(self.end + BLOCK);
                self.ends.clear();
                self.ends.extend(block.clone().map(|i| match ranges[i] {
                    (a, b) if a < b && limits[i] != i64::MAX => (t[a as usize], t[b as usize - 1]),
                    _ => (0, 0),
                }));
                for (i, e) in block.clone().zip(&mut self.ends) {
                    let ((a, b), limit) = (ranges[i], limits[i]);
                    if b > a + LINE && e.0 <= limit && limit < e.1 {
                        // Only its line matters: read now, with the others', then read again
                        // from cache by the step.
                        let p = lane(i, (a, b), limit, (e.0, e.1)).guess();
                        std::hint::black_box(t[p as usize]);
                    }
                }
                self.end = block.end;
            }
            let at = self.next;
            self.next += 1;
            let ((a, b), limit) = (ranges[at], limits[at]);
            if a >= b || limit == i64::MAX {
                continue;
            }
            let (first, last) = self.ends[at + self.ends.len() - self.end];
            if limit < first {
                ranges[at].1 = a;
            } else if last <= limit {
                // Every entry eligible: the range stays as it is.
            } else if b - a <= LINE {
                let span = &t[a as usize..b as usize];
                ranges[at].1 = a + span.partition_point(|&x| x <= limit) as u64;
            } else {
                let mut l = lane(at, (a, b), limit, (first, last));
                match l.narrow(t, l.guess()) {
                    Some(cut) => ranges[at].1 = cut,
                    None => return Some(l),
                }
            }
        }
    }
}

/// [`Cutter::cut`] of times in memory: each list's ends read a block of lists at a time
/// ([`Feed`]), then its cut by [`Lane::step`]s (interpolation, as the search from disk),
/// [`LANES`] lists at a time, one step of each in turn. A step waits for a load from a list
/// that is rarely in cache (a hop's frontier is scattered over the time file), and the steps of
/// different lists do not depend on each other, so the core overlaps their misses where
/// searches one after the other would wait for each in turn.
fn cut_in_memory(t: &[i64], ranges: &mut [(u64, u64)], limits: &[i64]) {
    let mut feed = Feed {
        next: 0,
        end: 0,
        ends: Vec::with_capacity(BLOCK),
    };
    let mut lanes: Vec<Lane> = Vec::with_capacity(LANES);
    while lanes.len() < LANES {
        match feed.take(t, ranges, limits) {
            Some(l) => lanes.push(l),
            None => break,
        }
    }
    while !lanes.is_empty() {
        let mut i = 0;
        while i < lanes.len() {
            let Some(cut) = lanes[i].step(t) else {
                i += 1;
                continue;
            };
            ranges[lanes[i].at].1 = cut;
            match feed.take(t, ranges, limits) {
                Some(n) => {
                    lanes[i] = n;
                    i += 1;
                }
                None => {
                    lanes.swap_remove(i);
                }
            }
        }
    }
}

/// Entries of times the search reads at once (1 MiB, 256 pages: a queue deep enough for the
/// device, held by each sampler whatever the hyperbatch): a round's spans go in chunks of at
/// most this many (a span is at most a page, or a dense list of at most this many, so a chunk is
/// never empty and never over).
const CHUNK: u64 = 1 << 17;

/// How many of the spans `(s, e)` (at least one, ascending by `s`, each `e > s`) make the next
/// chunk of at most `cap` entries read (a span longer than `cap` alone), read as runs `(first,
/// count)` handed to `run` in order: a span that starts before the end of the run so far
/// extends it (its entries read once), else starts a run. Returns the spans, the runs and
/// their entries.
fn merge_spans(
    spans: impl Iterator<Item = (u64, u64)>,
    cap: u64,
    mut run: impl FnMut((u64, u64)),
) -> (usize, usize, u64) {
    let (mut n, mut runs, mut total) = (0, 0, 0);
    let mut cur: Option<(u64, u64)> = None;
    for (s, e) in spans {
        match cur {
            Some((a, b)) if s < b => {
                let grow = e.saturating_sub(b);
                if grow > 0 && total + grow > cap {
                    break;
                }
                total += grow;
                cur = Some((a, b.max(e)));
            }
            _ => {
                if n > 0 && total + (e - s) > cap {
                    break;
                }
                if let Some((a, b)) = cur {
                    run((a, b - a));
                }
                (runs, total, cur) = (runs + 1, total + (e - s), Some((s, e)));
            }
        }
        n += 1;
    }
    if let Some((a, b)) = cur {
        run((a, b - a));
    }
    (n, runs, total)
}

#[cfg(test)]
mod tests {
    use super::{cut_in_memory, merge_spans};
    use proptest::prelude::*;

    proptest! {
        /// The search in memory cuts every list where `partition_point` does, whatever its
        /// length and times (evenly spread or not, ties, limits outside them, every time
        /// eligible).
        #[test]
        fn memory_cuts_are_partition_points(
            lists in prop::collection::vec(
                (prop::collection::vec(-50i64..50, 0..200), -60i64..60, any::<bool>()), 0..40),
            squash in 1i64..20,
        ) {
            let (mut times, mut ranges, mut limits) = (Vec::new(), Vec::new(), Vec::new());
            for (mut list, limit, all) in lists {
                // Times bunched (divided) so that ties and uneven spreads are common.
                list.iter_mut().for_each(|x| *x = *x * *x * x.signum() / squash);
                list.sort_unstable();
                let lo = times.len() as u64;
                times.extend(&list);
                ranges.push((lo, times.len() as u64));
                limits.push(if all { i64::MAX } else { limit * limit * limit.signum() / squash });
            }
            let want: Vec<(u64, u64)> = ranges.iter().zip(&limits).map(|(&(lo, hi), &l)| {
                (lo, lo + times[lo as usize..hi as usize].partition_point(|&x| x <= l) as u64)
            }).collect();
            cut_in_memory(&times, &mut ranges, &limits);
            prop_assert_eq!(ranges, want);
        }
    }

    /// Over many blocks of lists (their ends read a block at a time), every cut is still where
    /// `partition_point` puts it: lists empty, short, long, wholly eligible or not at all.
    #[test]
    fn memory_cuts_across_blocks_are_partition_points() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let (mut times, mut ranges, mut limits) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..3 * super::BLOCK + 17 {
            let len = match rand(4) {
                0 => rand(3),
                1 => rand(9),
                _ => rand(300),
            };
            let mut list: Vec<i64> = (0..len).map(|_| rand(1000) as i64 - 500).collect();
            list.sort_unstable();
            let lo = times.len() as u64;
            times.extend(&list);
            ranges.push((lo, times.len() as u64));
            limits.push(match rand(10) {
                0 => i64::MAX,
                1 => i64::MIN,
                _ => rand(1200) as i64 - 600,
            });
        }
        let want: Vec<(u64, u64)> = ranges
            .iter()
            .zip(&limits)
            .map(|(&(lo, hi), &l)| {
                let cut = times[lo as usize..hi as usize].partition_point(|&x| x <= l);
                (lo, lo + cut as u64)
            })
            .collect();
        cut_in_memory(&times, &mut ranges, &limits);
        assert_eq!(ranges, want);
    }

    /// `spans` (each `(first, end, probe)`) cut into consecutive chunks by [`merge_spans`], as
    /// the search cuts a round's reads.
    fn chunks(spans: &[(u64, u64, usize)], cap: u64) -> Vec<&[(u64, u64, usize)]> {
        let (mut rest, mut out) = (spans, Vec::new());
        while !rest.is_empty() {
            let (n, ..) = merge_spans(rest.iter().map(|&(s, e, _)| (s, e)), cap, |_| {});
            let (head, tail) = rest.split_at(n);
            out.push(head);
            rest = tail;
        }
        out
    }

    /// Overlapping spans (a list probed by several batches) are read once, in one run with the
    /// spans that overlap it; only what a span adds to its run counts against the cap.
    #[test]
    fn overlapping_spans_share_one_run() {
        let spans = [(0, 8), (0, 8), (4, 10), (10, 12), (11, 20), (30, 31)];
        let plan = |cap| {
            let mut runs = Vec::new();
            let (n, count, total) = merge_spans(spans.iter().copied(), cap, |r| runs.push(r));
            assert_eq!(count, runs.len());
            assert_eq!(total, runs.iter().map(|r| r.1).sum::<u64>());
            (n, runs)
        };
        assert_eq!(plan(100), (6, vec![(0, 10), (10, 10), (30, 1)]));
        // 10 entries for the first three spans, 2 more for the fourth; the fifth would pass 12.
        assert_eq!(plan(12), (4, vec![(0, 10), (10, 2)]));
        // A first span longer than the cap alone; the copy of it adds nothing.
        assert_eq!(plan(5), (2, vec![(0, 8)]));
    }

    #[test]
    fn chunks_hold_at_most_cap_entries_and_cover_every_span_in_order() {
        // Spans of 3, 4, 2, 9, 1 entries.
        let spans = [
            (0, 3, 0),
            (10, 14, 1),
            (20, 22, 2),
            (30, 39, 3),
            (40, 41, 4),
        ];
        let got: Vec<Vec<usize>> = chunks(&spans, 6)
            .into_iter()
            .map(|c| c.iter().map(|x| x.2).collect())
            .collect();
        assert_eq!(got, vec![vec![0], vec![1, 2], vec![3], vec![4]]);
        let one: Vec<usize> = chunks(&spans, 100).into_iter().map(<[_]>::len).collect();
        assert_eq!(one, vec![5]);
        assert_eq!(chunks(&[], 6).len(), 0);
    }
}
