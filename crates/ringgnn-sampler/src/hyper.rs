//! [`HyperSampler`]: several mini-batches (a hyperbatch) sampled together, hop by hop, so that the
//! neighbor file is read once per hop for all of them instead of once per batch (AGNES,
//! `003_0d24e84ecc7b1cfa.txt`, sections 3.2-3.3).
//!
//! Per hop: every batch draws its positions with its own random stream, exactly as it would
//! alone ([`BatchDraw::draw`]); each batch's positions are bucketed by file chunk (AGNES' bucket
//! matrix, block x mini-batch, as one counting sort per batch: `buckets.rs`); then the chunks
//! are visited in file order, each loaded once with the pages any batch needs ([`BlockReader`]:
//! dense blocks whole, sparse ones by page) and every batch takes its entries from it; finally
//! every batch relabels its hop ([`BatchDraw::relabel`]). The draws and the relabelling run on
//! `threads` threads split by batch; the reads are shared. A batch's sample is therefore
//! byte-identical to the per-batch sampler's, whatever the hyperbatch size, the backend or the
//! threads.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ringgnn_io::{BlockCounts, BlockReader};

use crate::batch::{check_entry, BatchDraw, DrawScratch, IdMap, Word};
use crate::buckets::{Buckets, Chunking, Workspace};
use crate::output::CompactSample;
use crate::spill::{SpillFile, Spilled};
use crate::{Error, Offsets, Result, SampleOptions, SeedSlice};

/// One batch of a hyperbatch: its seeds and its `(epoch, batch)`.
#[derive(Clone, Copy, Debug)]
pub struct HyperBatch<'a> {
    pub seeds: SeedSlice<'a>,
    pub epoch: u64,
    pub batch: u64,
}

/// Whether a graph's edge positions and node ids all fit 32 bits (see [`Slots`]).
fn narrow(indptr: &Offsets) -> bool {
    let (nodes, edges) = (indptr.len() as u64 - 1, indptr.last().unwrap_or(0));
    edges <= 1 << 32 && nodes <= 1 << 32
}

/// Bytes a batch of a hyperbatch holds for a hop of `positions` drawn positions in `pieces`
/// pieces (see [`Buckets`]): the positions (then the entries read there), a key per piece and a
/// bit per position.
pub(crate) fn hop_bytes(indptr: &Offsets, positions: u64, pieces: u64) -> u64 {
    let word = if narrow(indptr) { 4 } else { 8 };
    word * positions + 4 * pieces + positions.div_ceil(64) * 8
}

/// One batch of a hyperbatch being sampled: its state, its bucketed positions, and where its
/// finished sample went when it was spilled.
#[derive(Default)]
struct Slot<W: Word> {
    st: BatchDraw<W>,
    bk: Buckets,
    spilled: Option<Spilled>,
    /// What the caller's [`Keep`] took from the sample before it was spilled.
    kept: Vec<u64>,
}

/// What a caller keeps in memory of each sample that is spilled, made from its node list by the
/// thread that finished it, before the sample is written and dropped (a loader keeps the rows
/// its staging pass reads: [`HyperSampler::sample_spilled_keeping`]).
pub type Keep<'a> = dyn Fn(&[u64]) -> Result<Vec<u64>> + Sync + 'a;

impl<W: Word> Slot<W> {
    /// Write the finished sample to the spill file (after `keep` took what it keeps of it) and
    /// drop it.
    fn spill(&mut self, (f, keep): (&SpillFile, Option<&Keep<'_>>)) -> Result<()> {
        self.kept = match keep {
            Some(k) => k(&self.st.out.node)?,
            None => Vec::new(),
        };
        self.spilled = Some(f.write(&self.st.out)?);
        // Dropped, not kept for reuse: this is the memory spilling frees.
        self.st.out = CompactSample::default();
        Ok(())
    }

    fn bytes(&self) -> u64 {
        self.st.bytes() + self.bk.bytes()
    }

    /// At most what a thread lends this batch for a hop of at most `positions` positions in
    /// `chunks` chunks (its dedup map, its moves and its draws), when it has lent less before.
    fn scratch_for(&self, positions: u64, chunks: u64, map: &IdMap) -> u64 {
        let word = std::mem::size_of::<W>() as u64;
        let nodes = self.st.out.node.len() as u64 + positions;
        map.bytes_for(usize::try_from(nodes).unwrap_or(usize::MAX))
            + word * positions
            + 4 * chunks
            + 16 * self.st.frontier_len()
    }

    /// At most what [`Self::bytes`] will be when the next hop, of at most `positions`
    /// positions, is drawn and bucketed into `chunks` chunks: the state a spilled batch holds
    /// at its largest when that hop is its last.
    fn bytes_before_relabel(&self, positions: u64, chunks: u64) -> u64 {
        let nodes = self.st.frontier_len();
        let word = std::mem::size_of::<W>() as u64;
        let edge_ids = if self.st.out.edge.is_some() { 8 } else { 0 };
        self.st.out.bytes()
            + 4 * nodes
            + edge_ids * positions
            + word * (self.st.pos.capacity() as u64).max(positions)
            + self.bk.bytes_for(positions, nodes, chunks)
    }
}

/// The batch states of a sampler: positions kept in 32 bits when the graph's edge positions and
/// node ids fit, else 64.
enum Slots {
    Narrow(Vec<Slot<u32>>),
    Wide(Vec<Slot<u64>>),
}

impl Default for Slots {
    fn default() -> Self {
        Slots::Wide(Vec::new())
    }
}

impl Slots {
    fn bytes(&self) -> u64 {
        match self {
            Slots::Narrow(v) => v.iter().map(Slot::bytes).sum(),
            Slots::Wide(v) => v.iter().map(Slot::bytes).sum(),
        }
    }
}

/// What each thread of a hyperbatch sampler keeps whatever the hyperbatch size: a dedup map,
/// filled with a batch's nodes when the thread relabels it, and the workspace of a batch's
/// draws.
struct Scratch {
    map: IdMap,
    draw: DrawScratch,
    narrow: Workspace<u32>,
    wide: Workspace<u64>,
}

impl Scratch {
    fn new(num_nodes: u64) -> Self {
        Scratch {
            map: IdMap::for_nodes(num_nodes),
            draw: DrawScratch::default(),
            narrow: Workspace::default(),
            wide: Workspace::default(),
        }
    }

    fn bytes(&self) -> u64 {
        self.map.bytes() + self.draw.bytes() + self.narrow.bytes() + self.wide.bytes()
    }
}

/// A position width whose [`Workspace`] a thread's [`Scratch`] holds.
trait Lent: Word {
    fn workspace(s: &mut Scratch) -> &mut Workspace<Self>;
}

impl Lent for u32 {
    fn workspace(s: &mut Scratch) -> &mut Workspace<u32> {
        &mut s.narrow
    }
}

impl Lent for u64 {
    fn workspace(s: &mut Scratch) -> &mut Workspace<u64> {
        &mut s.wide
    }
}

/// The per-batch states of a hyperbatch sampler (outputs and workspaces), kept between
/// samplers: a hyperbatch touches many megabytes per batch, and memory the process already has
/// costs no page faults (see [`HyperSampler::take_states`]).
#[derive(Default)]
pub struct HyperStates(Slots);

impl HyperStates {
    /// Bytes held (capacities).
    pub fn bytes(&self) -> u64 {
        self.0.bytes()
    }
}

/// The largest sizes of one batch that a hyperbatch sampler has seen, for sizing the next
/// hyperbatch (see [`HyperSampler::peaks`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HyperPeaks {
    /// Bytes of a batch's state once its sample is finished and kept in memory (capacities).
    pub batch: u64,
    /// Bytes of a batch's state just before its last hop is relabelled: what each batch of a
    /// hyperbatch holds at once when finished samples are spilled.
    pub resident: u64,
    /// Bytes of a finished sample (compact).
    pub sample: u64,
}

/// Samples hyperbatches from a neighbor file on disk; see the module docs. One per pipeline
/// worker (it owns a read backend).
pub struct HyperSampler {
    indptr: Offsets,
    opts: SampleOptions,
    /// One per thread: thread `t` reads its own contiguous range of chunks.
    readers: Vec<BlockReader>,
    path: PathBuf,
    width: u64,
    threads: usize,
    /// Whether positions fit 32 bits (see [`Slots`]).
    narrow: bool,
    states: Slots,
    /// One per thread.
    scratch: Vec<Scratch>,
    peaks: HyperPeaks,
}

impl HyperSampler {
    /// Sample with `opts` over the offset index `indptr`, reading the neighbor file `path`
    /// (entries `width` bytes wide) through `readers` (one per thread, all with the same chunk
    /// size; at least one), with as many threads for the draws and the relabelling.
    pub fn new(
        indptr: impl Into<Offsets>,
        opts: SampleOptions,
        readers: Vec<BlockReader>,
        path: PathBuf,
        width: u64,
    ) -> Self {
        assert!(!readers.is_empty(), "HyperSampler: at least one reader");
        let indptr = indptr.into();
        let narrow = narrow(&indptr);
        HyperSampler {
            narrow,
            indptr,
            opts,
            threads: readers.len(),
            readers,
            path,
            width,
            states: Slots::default(),
            scratch: Vec::new(),
            peaks: HyperPeaks::default(),
        }
    }

    pub fn num_nodes(&self) -> u64 {
        self.indptr.len() as u64 - 1
    }

    /// What the reads of this sampler cost so far.
    pub fn counts(&self) -> BlockCounts {
        let mut t = BlockCounts::default();
        for c in self.readers.iter().map(|r| r.counts()) {
            t.pages += c.pages;
            t.requests += c.requests;
            t.loads += c.loads;
            t.sequential_bytes += c.sequential_bytes;
            t.random_bytes += c.random_bytes;
        }
        t
    }

    /// The backend's name ("pread", "uring", ...).
    pub fn backend_name(&self) -> &'static str {
        self.readers[0].reader().name()
    }

    /// Cumulative I/O counters of the backends.
    pub fn io_stats(&self) -> ringgnn_io::IoStats {
        let mut t = ringgnn_io::IoStats::default();
        for s in self.readers.iter().map(|r| r.reader().stats()) {
            t.reads += s.reads;
            t.bytes += s.bytes;
            t.batches += s.batches;
        }
        t
    }

    /// Stop between chunk loads once `flag` is set (an `Interrupted` I/O error).
    pub fn set_cancel(&mut self, flag: Arc<AtomicBool>) {
        for r in &mut self.readers {
            r.set_cancel(flag.clone());
        }
    }

    /// The most bytes one batch's state (output, workspaces, buckets) has reached, kept and
    /// spilled: what sizing the next hyperbatch goes by, with [`Self::scratch_bytes`].
    pub fn peaks(&self) -> HyperPeaks {
        self.peaks
    }

    /// Bytes held by the threads' dedup maps and draw workspaces, whatever the hyperbatch size.
    pub fn scratch_bytes(&self) -> u64 {
        self.scratch.iter().map(Scratch::bytes).sum()
    }

    /// Bytes held now by the batch states (kept for reuse between hyperbatches).
    pub fn state_bytes(&self) -> u64 {
        self.states.bytes()
    }

    /// Use `states` (left by an earlier sampler) for the batches, instead of new ones.
    pub fn with_states(mut self, states: HyperStates) -> Self {
        self.states = states.0;
        self
    }

    /// Positions in 32 bits (`u32::MAX` edges and nodes at most), else 64.
    pub fn narrow_positions(&self) -> bool {
        self.narrow
    }

    /// Keep positions in 64 bits whatever the graph (tests of the wide path on small graphs).
    #[doc(hidden)]
    pub fn with_wide_positions(mut self) -> Self {
        self.narrow = false;
        self
    }

    /// The batch states, for a later sampler of the same graph to reuse.
    pub fn take_states(&mut self) -> HyperStates {
        HyperStates(std::mem::take(&mut self.states))
    }

    /// Sample `batches` together; the samples come back in the same order, each exactly what
    /// [`crate::NeighborSampler::sample`] gives for the same seeds and `(epoch, batch)`.
    /// They come back compact (see [`CompactSample`]): 4 bytes per edge until expanded.
    pub fn sample(&mut self, batches: &[HyperBatch<'_>]) -> Result<Vec<CompactSample>> {
        let h = self.run(batches, None, None)?;
        Ok(match &mut self.states {
            Slots::Narrow(v) => v[..h].iter_mut().map(|s| s.st.take()).collect(),
            Slots::Wide(v) => v[..h].iter_mut().map(|s| s.st.take()).collect(),
        })
    }

    /// [`Self::sample`], but each sample is written to `spill` as soon as its last hop is done
    /// and dropped from memory: what comes back is where each is ([`SpillFile::read`] gives it
    /// back), in the order of `batches`. A hyperbatch then holds at once only the state of
    /// batches still being sampled ([`HyperPeaks::resident`] each) and, per thread, the sample
    /// it is writing.
    ///
    /// With a `limit`, the batch states (all of this sampler's, [`Self::state_bytes`]) stay
    /// within it when the last hop is drawn: before drawing it, the batches whose last hop
    /// would not fit (bounded from their frontiers) are left out, from the end, and only the
    /// first ones are finished (one at least). What comes back is then shorter than
    /// `batches`; the others are to be sampled again, from the start, in a later call (their
    /// samples do not depend on it).
    pub fn sample_spilled(
        &mut self,
        batches: &[HyperBatch<'_>],
        spill: &SpillFile,
        limit: Option<u64>,
    ) -> Result<Vec<Spilled>> {
        Ok(self
            .spilled(batches, spill, limit, None)?
            .into_iter()
            .map(|(s, _)| s)
            .collect())
    }

    /// [`Self::sample_spilled`], and with each sample's place in the file what `keep` made of
    /// its node list before it was spilled: a loader keeps what staging its rows needs (the
    /// cold row ids) rather than the whole sample.
    pub fn sample_spilled_keeping(
        &mut self,
        batches: &[HyperBatch<'_>],
        spill: &SpillFile,
        limit: Option<u64>,
        keep: &Keep<'_>,
    ) -> Result<Vec<(Spilled, Vec<u64>)>> {
        self.spilled(batches, spill, limit, Some(keep))
    }

    fn spilled(
        &mut self,
        batches: &[HyperBatch<'_>],
        spill: &SpillFile,
        limit: Option<u64>,
        keep: Option<&Keep<'_>>,
    ) -> Result<Vec<(Spilled, Vec<u64>)>> {
        let h = self.run(batches, Some((spill, keep)), limit)?;
        spill.sync()?;
        fn taken<W: Word>(s: &mut Slot<W>) -> (Spilled, Vec<u64>) {
            let r = s.spilled.take().expect("every batch was spilled");
            (r, std::mem::take(&mut s.kept))
        }
        Ok(match &mut self.states {
            Slots::Narrow(v) => v[..h].iter_mut().map(taken).collect(),
            Slots::Wide(v) => v[..h].iter_mut().map(taken).collect(),
        })
    }

    /// Sample `batches` (the first ones only when `limit` says so, see
    /// [`Self::sample_spilled`]); how many were finished.
    fn run(
        &mut self,
        batches: &[HyperBatch<'_>],
        spill: Option<(&SpillFile, Option<&Keep<'_>>)>,
        limit: Option<u64>,
    ) -> Result<usize> {
        let num_nodes = self.num_nodes();
        if let Some(b) = batches.iter().find(|b| b.seeds.num_nodes() != num_nodes) {
            return Err(Error::Input(format!(
                "the seeds were checked against a graph of {} nodes, but this one has {num_nodes}",
                b.seeds.num_nodes()
            )));
        }
        let mut states = std::mem::take(&mut self.states);
        // States of the other width (from a sampler of another graph) are dropped.
        match (&states, self.narrow) {
            (Slots::Narrow(_), true) | (Slots::Wide(_), false) => {}
            (_, true) => states = Slots::Narrow(Vec::new()),
            (_, false) => states = Slots::Wide(Vec::new()),
        }
        let r = match &mut states {
            Slots::Narrow(v) => self.run_slots(v, batches, spill, limit),
            Slots::Wide(v) => self.run_slots(v, batches, spill, limit),
        };
        self.states = states;
        r
    }

    fn run_slots<W: Lent>(
        &mut self,
        slots: &mut Vec<Slot<W>>,
        batches: &[HyperBatch<'_>],
        spill: Option<(&SpillFile, Option<&Keep<'_>>)>,
        limit: Option<u64>,
    ) -> Result<usize> {
        let num_nodes = self.num_nodes();
        let mut h = batches.len();
        if slots.len() < h {
            slots.resize_with(h, Default::default);
        }
        self.scratch
            .resize_with(self.threads, || Scratch::new(num_nodes));
        let o = &self.opts;
        for (slot, b) in slots.iter_mut().zip(batches) {
            slot.spilled = None;
            slot.kept = Vec::new();
            slot.st.start(
                &mut self.scratch[0].map,
                b.seeds.ids(),
                o.seed,
                b.epoch,
                b.batch,
                o.with_edge_ids,
            )?;
        }
        let chunk = Chunking::new(self.readers[0].chunk_pages() as u64 * 4096 / self.width);
        let chunks = self.readers[0].chunks() as usize;
        let hops = self.opts.fanouts.len();
        let peaks = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
        for k in 0..hops {
            let (indptr, fanout, replace) = (&self.indptr, self.opts.fanouts[k], self.opts.replace);
            if let (Some(limit), true) = (limit, k + 1 == hops) {
                // The threads' dedup maps and workspaces, sized at the last hop for the largest
                // batch, come out of the same limit.
                let bounds: Vec<u64> = slots[..h]
                    .iter()
                    .map(|s| s.st.hop_bound(indptr, fanout))
                    .collect();
                let map = &self.scratch[0].map;
                let need = slots[..h]
                    .iter()
                    .zip(&bounds)
                    .map(|(s, &b)| s.scratch_for(b, chunks as u64, map))
                    .max()
                    .unwrap_or(0);
                let scratch = self
                    .scratch_bytes()
                    .max(need.saturating_mul(self.threads as u64));
                h = admitted(slots, h, limit.saturating_sub(scratch), |i, s| {
                    s.bytes_before_relabel(bounds[i], chunks as u64)
                });
            }
            par(&mut slots[..h], &mut self.scratch, |sc, slot| {
                slot.st.draw(indptr, fanout, replace, &mut sc.draw)?;
                slot.bk
                    .sort(&mut slot.st.pos, chunk, chunks, W::workspace(sc))
            })?;
            self.fetch(&mut slots[..h], chunks, num_nodes)?;
            let last = k + 1 == hops;
            par(&mut slots[..h], &mut self.scratch, |sc, slot| {
                slot.bk.unsort(&mut slot.st.pos, W::workspace(sc));
                let before = (slot.bytes(), slot.st.out.bytes());
                slot.st.fill_map(&mut sc.map);
                slot.st.relabel_in_place(&mut sc.map)?;
                if !last {
                    // Held until the last hop with the other batches': not the room a
                    // doubling left (up to half of it unused).
                    slot.st.out.node.shrink_to_fit();
                    return Ok(());
                }
                let sample = slot.st.out.bytes();
                // Kept: everything at once, the sample grown by its last hop.
                peaks[0].fetch_max(
                    before.0 + sample.saturating_sub(before.1),
                    Ordering::Relaxed,
                );
                peaks[1].fetch_max(before.0, Ordering::Relaxed);
                peaks[2].fetch_max(sample, Ordering::Relaxed);
                if let Some(to) = spill {
                    slot.spill(to)?;
                }
                Ok(())
            })?;
        }
        if hops == 0 {
            // Nothing drawn: the seeds are the samples.
            for slot in &mut slots[..h] {
                if let Some(to) = spill {
                    slot.spill(to)?;
                }
            }
        }
        let p = &mut self.peaks;
        p.batch = p.batch.max(peaks[0].load(Ordering::Relaxed));
        p.resident = p.resident.max(peaks[1].load(Ordering::Relaxed));
        p.sample = p.sample.max(peaks[2].load(Ordering::Relaxed));
        for slot in &slots[..h] {
            p.batch = p.batch.max(slot.bytes());
        }
        Ok(h)
    }

    /// Replace every batch's (sorted) positions by the entries there: each thread visits its own
    /// contiguous range of chunks in file order (ranges of about equal numbers of positions),
    /// loading each chunk once with the pages any batch needs.
    fn fetch<W: Word>(
        &mut self,
        states: &mut [Slot<W>],
        chunks: usize,
        num_nodes: u64,
    ) -> Result<()> {
        let t = self.readers.len();
        let h = states.len();
        // Split the chunks into t ranges of about equal numbers of positions.
        let mut per_chunk = vec![0u64; chunks];
        for Slot { bk, .. } in states.iter() {
            for (c, n) in per_chunk.iter_mut().enumerate() {
                *n += (bk.starts[c + 1] - bk.starts[c]) as u64;
            }
        }
        let total: u64 = per_chunk.iter().sum();
        let mut bounds = vec![0usize; t + 1];
        let mut acc = 0u64;
        let mut next = 1;
        for (c, &n) in per_chunk.iter().enumerate() {
            acc += n;
            while next < t && acc * t as u64 >= total * next as u64 {
                bounds[next] = c + 1;
                next += 1;
            }
        }
        for b in bounds.iter_mut().take(t).skip(next) {
            *b = chunks;
        }
        bounds[t] = chunks;
        // Per thread, per batch: the part of its (sorted) positions in the thread's chunks.
        let mut views: Vec<Vec<View<'_, W>>> = (0..t).map(|_| Vec::with_capacity(h)).collect();
        for Slot { st, bk, .. } in states.iter_mut() {
            let mut rest: &mut [W] = &mut st.pos;
            for (i, v) in views.iter_mut().enumerate() {
                let (c0, c1) = (bounds[i], bounds[i + 1]);
                let n = (bk.starts[c1] - bk.starts[c0]) as usize;
                let (part, tail) = std::mem::take(&mut rest).split_at_mut(n);
                rest = tail;
                v.push(View {
                    starts: &bk.starts,
                    vals: part,
                });
            }
        }
        let (width, path) = (self.width, &self.path);
        let work = |(r, views): (&mut BlockReader, Vec<View<'_, W>>), c0: usize, c1: usize| {
            read_chunks(r, views, c0..c1, width, num_nodes, path)
        };
        if t == 1 {
            let views = views.pop().expect("one thread");
            return work((&mut self.readers[0], views), 0, chunks);
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = self
                .readers
                .iter_mut()
                .zip(views)
                .enumerate()
                .map(|(i, rv)| {
                    let (c0, c1) = (bounds[i], bounds[i + 1]);
                    s.spawn(move || work(rv, c0, c1))
                })
                .collect();
            join_all(handles)
        })
    }
}

/// How many of the first `h` batches go on to their last hop within `limit` bytes: the most
/// (one at least) such that, with each of them at `before_relabel` (of its index and its
/// state) and every other state of `slots` as it is now, all the states fit. Batches left out
/// keep what they hold now until a later call reuses them.
fn admitted<W: Word>(
    slots: &[Slot<W>],
    h: usize,
    limit: u64,
    before_relabel: impl Fn(usize, &Slot<W>) -> u64,
) -> usize {
    let mut total: u64 = slots.iter().map(Slot::bytes).sum();
    for (i, s) in slots[..h].iter().enumerate() {
        total = total.saturating_add(before_relabel(i, s).saturating_sub(s.bytes()));
        if total > limit {
            return i.max(1);
        }
    }
    h
}

/// What one thread of [`HyperSampler::fetch`] sees of one batch.
struct View<'a, W> {
    starts: &'a [u32],
    /// The batch's sorted `pos` for this thread's chunks (from `starts[first chunk]`):
    /// positions, then the entries read there.
    vals: &'a mut [W],
}

/// Load the chunks `range` in order and serve every batch's positions in them (checking that
/// each entry is a node id of a graph of `num_nodes` nodes).
fn read_chunks<W: Word>(
    r: &mut BlockReader,
    mut views: Vec<View<'_, W>>,
    range: std::ops::Range<usize>,
    width: u64,
    num_nodes: u64,
    path: &std::path::Path,
) -> Result<()> {
    let cp = r.chunk_pages() as u64;
    let mut needed = vec![0u64; (cp as usize).div_ceil(64)];
    let base: Vec<u32> = views.iter().map(|v| v.starts[range.start]).collect();
    for c in range {
        let first = c as u64 * cp;
        needed.iter_mut().for_each(|w| *w = 0);
        let mut any = false;
        for (v, &b) in views.iter().zip(&base) {
            let (s0, s1) = ((v.starts[c] - b) as usize, (v.starts[c + 1] - b) as usize);
            for &p in &v.vals[s0..s1] {
                let page = (p.get() * width / 4096 - first) as usize;
                needed[page / 64] |= 1 << (page % 64);
            }
            any |= s1 > s0;
        }
        if !any {
            continue;
        }
        r.load(c as u64, &needed).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        for (v, &b) in views.iter_mut().zip(&base) {
            let (s0, s1) = ((v.starts[c] - b) as usize, (v.starts[c + 1] - b) as usize);
            for x in &mut v.vals[s0..s1] {
                let p = x.get();
                let bytes = r.bytes(p * width, width as usize);
                let u = match bytes.len() {
                    4 => u32::from_le_bytes(bytes.try_into().expect("4 bytes")) as u64,
                    _ => u64::from_le_bytes(bytes.try_into().expect("8 bytes")),
                };
                // Checked against the node count, which fits `W`.
                check_entry(p, u, num_nodes)?;
                *x = W::of(u);
            }
        }
    }
    Ok(())
}

/// Run `f` on every item, on one scoped thread per `scratch` (at least one), splitting `items`
/// into contiguous parts; each thread passes `f` its own scratch. The first error wins.
pub(crate) fn par<T: Send, S: Send>(
    items: &mut [T],
    scratch: &mut [S],
    f: impl Fn(&mut S, &mut T) -> Result<()> + Sync,
) -> Result<()> {
    let threads = scratch.len();
    let per = items.len().div_ceil(threads.max(1)).max(1);
    if threads <= 1 || items.len() <= 1 {
        let s = &mut scratch[0];
        return items.iter_mut().try_for_each(|t| f(s, t));
    }
    let f = &f;
    std::thread::scope(|sc| {
        let handles: Vec<_> = items
            .chunks_mut(per)
            .zip(scratch.iter_mut())
            .map(|(part, s)| sc.spawn(move || part.iter_mut().try_for_each(|t| f(s, t))))
            .collect();
        join_all(handles)
    })
}

/// Join every scoped thread (a panic is re-raised here); the first error wins.
pub(crate) fn join_all(handles: Vec<std::thread::ScopedJoinHandle<'_, Result<()>>>) -> Result<()> {
    let mut first = Ok(());
    for h in handles {
        let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        if first.is_ok() {
            first = r;
        }
    }
    first
}
