//! [`HyperSampler`]: several mini-batches (a hyperbatch) sampled together, hop by hop, so that the
//! neighbor file is read once per hop for all of them instead of once per batch (AGNES,
//! `003_0d24e84ecc7b1cfa.txt`, sections 3.2-3.3).
//!
//! Per hop: every batch draws its positions with its own random stream, exactly as it would
//! alone ([`BatchDraw::draw`]); each batch's positions are bucketed by file chunk (AGNES' bucket
//! matrix, block x mini-batch, as one counting sort per batch); then the chunks are visited in
//! file order, each loaded once with the pages any batch needs ([`BlockReader`]: dense blocks
//! whole, sparse ones by page) and every batch takes its entries from it; finally every batch
//! relabels its hop ([`BatchDraw::relabel`]). The draws and the relabelling run on `threads`
//! threads split by batch; the reads are shared. A batch's sample is therefore byte-identical
//! to the per-batch sampler's, whatever the hyperbatch size, the backend or the threads.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ringgnn_io::{BlockCounts, BlockReader};

use crate::batch::BatchDraw;
use crate::{Error, Result, SampleOptions, SampledSubgraph, SeedSlice};

/// One batch of a hyperbatch: its seeds and its `(epoch, batch)`.
#[derive(Clone, Copy, Debug)]
pub struct HyperBatch<'a> {
    pub seeds: SeedSlice<'a>,
    pub epoch: u64,
    pub batch: u64,
}

/// A batch's positions of the current hop bucketed by chunk (one counting sort): the positions
/// in chunk `c` are `vals[starts[c]..starts[c + 1]]`, taken from `pos[idx[k]]`; reading replaces
/// each `vals[k]` by the entry at that position (so threads reading different chunks write
/// disjoint parts of `vals`, and read them in order).
#[derive(Default)]
struct Buckets {
    idx: Vec<u32>,
    starts: Vec<u32>,
    vals: Vec<u64>,
}

impl Buckets {
    fn fill(&mut self, pos: &[u64], per_chunk: u64, chunks: usize) {
        self.starts.clear();
        self.starts.resize(chunks + 1, 0);
        for &p in pos {
            self.starts[(p / per_chunk) as usize + 1] += 1;
        }
        for c in 0..chunks {
            self.starts[c + 1] += self.starts[c];
        }
        self.idx.clear();
        self.idx.resize(pos.len(), 0);
        self.vals.clear();
        self.vals.resize(pos.len(), 0);
        let mut next = self.starts.clone();
        for (i, &p) in pos.iter().enumerate() {
            let c = (p / per_chunk) as usize;
            let k = next[c] as usize;
            self.idx[k] = i as u32;
            self.vals[k] = p;
            next[c] += 1;
        }
    }

    /// The entries read, into the batch's `nbr` in draw order.
    fn scatter(&self, nbr: &mut [u64]) {
        for (&i, &v) in self.idx.iter().zip(&self.vals) {
            nbr[i as usize] = v;
        }
    }

    fn bytes(&self) -> u64 {
        (self.idx.capacity() + self.starts.capacity()) as u64 * 4 + self.vals.capacity() as u64 * 8
    }
}

/// The per-batch states of a hyperbatch sampler (outputs, dedup maps, workspaces), kept between
/// samplers: a hyperbatch touches many megabytes per batch, and memory the process already has
/// costs no page faults (see [`HyperSampler::take_states`]).
#[derive(Default)]
pub struct HyperStates(Vec<(BatchDraw, Buckets)>);

impl HyperStates {
    /// Bytes held (capacities).
    pub fn bytes(&self) -> u64 {
        self.0.iter().map(|(s, b)| s.bytes() + b.bytes()).sum()
    }
}

/// Samples hyperbatches from a neighbor file on disk; see the module docs. One per pipeline
/// worker (it owns a read backend).
pub struct HyperSampler {
    indptr: Arc<[u64]>,
    opts: SampleOptions,
    /// One per thread: thread `t` reads its own contiguous range of chunks.
    readers: Vec<BlockReader>,
    path: PathBuf,
    width: u64,
    threads: usize,
    states: Vec<(BatchDraw, Buckets)>,
    /// The most bytes one batch's state reached.
    peak_batch: u64,
}

impl HyperSampler {
    /// Sample with `opts` over the offset index `indptr`, reading the neighbor file `path`
    /// (entries `width` bytes wide) through `readers` (one per thread, all with the same chunk
    /// size; at least one), with as many threads for the draws and the relabelling.
    pub fn new(
        indptr: Arc<[u64]>,
        opts: SampleOptions,
        readers: Vec<BlockReader>,
        path: PathBuf,
        width: u64,
    ) -> Self {
        assert!(!readers.is_empty(), "HyperSampler: at least one reader");
        HyperSampler {
            indptr,
            opts,
            threads: readers.len(),
            readers,
            path,
            width,
            states: Vec::new(),
            peak_batch: 0,
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

    /// The most bytes one batch's state (output, dedup map, workspaces, buckets) has reached:
    /// what sizing the next hyperbatch goes by.
    pub fn peak_batch_bytes(&self) -> u64 {
        self.peak_batch
    }

    /// Bytes held now by the batch states (kept for reuse between hyperbatches).
    pub fn state_bytes(&self) -> u64 {
        self.states.iter().map(|(s, b)| s.bytes() + b.bytes()).sum()
    }

    /// Use `states` (left by an earlier sampler) for the batches, instead of new ones.
    pub fn with_states(mut self, states: HyperStates) -> Self {
        self.states = states.0;
        self
    }

    /// The batch states, for a later sampler of the same graph to reuse.
    pub fn take_states(&mut self) -> HyperStates {
        HyperStates(std::mem::take(&mut self.states))
    }

    /// Sample `batches` together; the samples come back in the same order, each exactly what
    /// [`crate::NeighborSampler::sample`] gives for the same seeds and `(epoch, batch)`.
    pub fn sample(&mut self, batches: &[HyperBatch<'_>]) -> Result<Vec<SampledSubgraph>> {
        let num_nodes = self.num_nodes();
        if let Some(b) = batches.iter().find(|b| b.seeds.num_nodes() != num_nodes) {
            return Err(Error::Input(format!(
                "the seeds were checked against a graph of {} nodes, but this one has {num_nodes}",
                b.seeds.num_nodes()
            )));
        }
        let h = batches.len();
        if self.states.len() < h {
            self.states.resize_with(h, Default::default);
        }
        let o = &self.opts;
        for ((st, _), b) in self.states.iter_mut().zip(batches) {
            st.start(b.seeds.ids(), o.seed, b.epoch, b.batch, o.with_edge_ids)?;
        }
        let per_chunk = self.readers[0].chunk_pages() as u64 * 4096 / self.width;
        let chunks = self.readers[0].chunks() as usize;
        for k in 0..self.opts.fanouts.len() {
            let (indptr, fanout, replace) = (&self.indptr, self.opts.fanouts[k], self.opts.replace);
            par(&mut self.states[..h], self.threads, |(st, bk)| {
                st.draw(indptr, fanout, replace);
                bk.fill(&st.pos, per_chunk, chunks);
                Ok(())
            })?;
            self.fetch(h, chunks)?;
            par(&mut self.states[..h], self.threads, |(st, bk)| {
                bk.scatter(&mut st.nbr);
                st.relabel(num_nodes)
            })?;
        }
        for (st, bk) in &self.states[..h] {
            self.peak_batch = self.peak_batch.max(st.bytes() + bk.bytes());
        }
        Ok(self.states[..h]
            .iter_mut()
            .map(|(st, _)| st.take())
            .collect())
    }

    /// Fill every batch's `vals` from its `pos`: each thread visits its own contiguous range of
    /// chunks in file order (ranges of about equal numbers of positions), loading each chunk
    /// once with the pages any batch needs.
    fn fetch(&mut self, h: usize, chunks: usize) -> Result<()> {
        let t = self.readers.len();
        let states = &mut self.states[..h];
        // Split the chunks into t ranges of about equal numbers of positions.
        let mut per_chunk = vec![0u64; chunks];
        for (_, bk) in states.iter() {
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
        // Per thread, per batch: its positions and the part of `vals` its chunks fill.
        let mut views: Vec<Vec<View<'_>>> = (0..t).map(|_| Vec::with_capacity(h)).collect();
        for (_, bk) in states.iter_mut() {
            let mut rest: &mut [u64] = &mut bk.vals;
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
        let work = |(r, views): (&mut BlockReader, Vec<View<'_>>), c0: usize, c1: usize| {
            read_chunks(r, views, c0..c1, width).map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })
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
            let mut first = Ok(());
            for h in handles {
                let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                if first.is_ok() {
                    first = r;
                }
            }
            first
        })
    }
}

/// What one thread of [`HyperSampler::fetch`] sees of one batch.
struct View<'a> {
    starts: &'a [u32],
    /// The batch's `vals` for this thread's chunks (from `starts[first chunk]`): positions, then
    /// the entries read there.
    vals: &'a mut [u64],
}

/// Load the chunks `range` in order and serve every batch's positions in them.
fn read_chunks(
    r: &mut BlockReader,
    mut views: Vec<View<'_>>,
    range: std::ops::Range<usize>,
    width: u64,
) -> std::io::Result<()> {
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
                let page = (p * width / 4096 - first) as usize;
                needed[page / 64] |= 1 << (page % 64);
            }
            any |= s1 > s0;
        }
        if !any {
            continue;
        }
        r.load(c as u64, &needed)?;
        for (v, &b) in views.iter_mut().zip(&base) {
            let (s0, s1) = ((v.starts[c] - b) as usize, (v.starts[c + 1] - b) as usize);
            for x in &mut v.vals[s0..s1] {
                let bytes = r.bytes(*x * width, width as usize);
                *x = match bytes.len() {
                    4 => u32::from_le_bytes(bytes.try_into().expect("4 bytes")) as u64,
                    _ => u64::from_le_bytes(bytes.try_into().expect("8 bytes")),
                };
            }
        }
    }
    Ok(())
}

/// Run `f` on every item, on up to `threads` scoped threads splitting `items` into contiguous
/// parts; the first error wins.
fn par<T: Send>(
    items: &mut [T],
    threads: usize,
    f: impl Fn(&mut T) -> Result<()> + Sync,
) -> Result<()> {
    let per = items.len().div_ceil(threads.max(1)).max(1);
    if threads <= 1 || items.len() <= 1 {
        return items.iter_mut().try_for_each(&f);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks_mut(per)
            .map(|part| s.spawn(|| part.iter_mut().try_for_each(&f)))
            .collect();
        let mut first = Ok(());
        for h in handles {
            let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            if first.is_ok() {
                first = r;
            }
        }
        first
    })
}
