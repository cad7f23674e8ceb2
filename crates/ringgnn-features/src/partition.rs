//! The source-partitioned scheme of layer-wise inference (issue 24; `docs/INFERENCE.md`, "The
//! other scheme: source partitions"): a layer's aggregation computed by cutting the *sources*
//! into partitions (each read once) rather than the destinations into blocks (each sweeping the
//! input), with the partial aggregates spilled to disk and merged per destination block.
//!
//! [`Partitions`] owns the layer's temporaries in a directory the caller made (and removes). The
//! sources may be of another node type than the destinations (a relation `S:R:D` of a typed
//! graph): the source partitions' bounds end at the source count, the merge blocks' at the
//! destination count.
//!
//! 1. [`Partitions::bucket`]: one pass over the neighbor file, a chunk of destinations at a
//!    time; each edge `u -> v` is appended to its source partition's bucket (`p{q}.src`,
//!    `p{q}.dst`, ids as wide as the neighbor file's). The chunk is counted and scattered on all
//!    threads, each thread owning a contiguous run of destinations, so every bucket stays sorted
//!    by destination. Stored self loops are dropped here for GCN and GAT.
//! 2. [`Partitions::window`]: a window of a bucket's edges is one [`aggregate_block`] over the
//!    bucket's sources, with the destinations it reaches numbered compactly
//!    ([`BlockJob::dests`] gives their node ids to GCN's weights and GAT's destination logits),
//!    so the partition's rows are read once, in file order, on all threads. Its partial
//!    aggregates and their destination ids are appended to one spill pair (`partials.f32`,
//!    `partials.ids`), with the spill row where each merge sub-block starts (the marks).
//! 3. [`Partitions::merge`]: a merge block's partials, window by window, combined into the
//!    caller's accumulators on all threads, each thread owning a sub-block of destinations and
//!    reading its own rows of every window (found by the marks): sums added, maxima maxed, GAT's
//!    online-softmax partials rescaled to their common maximum ([`combine`]).
//!
//! Every temporary is written through [`ringgnn_io::DirectFile`] (`O_DIRECT` where the file
//! system allows it, from aligned buffers): written once and read once, it costs no page cache.
//! The partials are read back the same way. Memory: a bucketing chunk (24 bytes an edge), a
//! window ([`aggregate_block`]'s, its accumulators and the reached ids), the writers' buffers,
//! and a merge slice per thread; the caller's plan (`python/ringgnn/inference/plan.py`) sizes them.

use std::path::{Path, PathBuf};
use std::thread;

use ringgnn_io::{AlignedBuf, DirectFile, ALIGN};

use crate::aggregate::{
    read_ids, split, thread_count, AggregateStats, BlockJob, NeighborFile, PREFETCH,
};
use crate::fold::{Attention, Fold};
use crate::{Error, Result};

/// Bytes of a bucket writer's aligned buffer (two writers per partition).
const BUCKET_BUF: usize = 16 << 10;
/// Bytes of a partials writer's aligned buffer.
const SPILL_BUF: usize = 1 << 20;
/// Bytes of a merge thread's bounce buffer for `O_DIRECT` reads.
const BOUNCE: usize = 256 << 10;

/// How a partial aggregate is combined into a destination's accumulator row (from the
/// fold that made it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Combine {
    /// Sums (GraphSAGE's mean, GCN's weighted sums): added.
    Add,
    /// Element-wise maxima.
    Max,
    /// GAT's online softmax over `heads` heads: rows are weighted sums, running maxima and sums
    /// of exponentials ([`crate::fold`]), rescaled to their common maximum and added.
    Softmax { heads: usize },
}

impl Combine {
    /// The combination of the partials `fold` makes.
    pub fn of(fold: &Fold<'_>) -> Self {
        match fold {
            Fold::Sum | Fold::Gcn(_) => Combine::Add,
            Fold::Max => Combine::Max,
            Fold::Softmax(att) => Combine::Softmax { heads: att.heads },
        }
    }

    /// Set `acc` (rows of `width` values) to the identity: nothing aggregated yet.
    pub fn init(&self, acc: &mut [f32], width: usize) {
        match *self {
            Combine::Add => acc.fill(0.0),
            Combine::Max => acc.fill(f32::NEG_INFINITY),
            Combine::Softmax { heads } => {
                for row in acc.chunks_exact_mut(width) {
                    let hc = width - 2 * heads;
                    row[..hc].fill(0.0);
                    row[hc..hc + heads].fill(f32::NEG_INFINITY);
                    row[hc + heads..].fill(0.0);
                }
            }
        }
    }
}

/// Combine the partial row `x` into `acc` (see [`Combine`]).
#[inline]
pub fn combine(how: Combine, acc: &mut [f32], x: &[f32]) {
    match how {
        Combine::Add => acc.iter_mut().zip(x).for_each(|(o, x)| *o += x),
        Combine::Max => acc.iter_mut().zip(x).for_each(|(o, &x)| *o = o.max(x)),
        Combine::Softmax { heads } => {
            let hc = acc.len() - 2 * heads;
            let c = hc / heads;
            for h in 0..heads {
                let (ma, mb) = (acc[hc + h], x[hc + h]);
                if mb == f32::NEG_INFINITY {
                    continue; // nothing summed in the partial
                }
                let m = ma.max(mb);
                // exp(-inf) = 0: an empty accumulator takes the partial as it is.
                let (sa, sb) = ((ma - m).exp(), (mb - m).exp());
                let z = hc + heads + h;
                acc[z] = acc[z] * sa + x[z] * sb;
                acc[h * c..(h + 1) * c]
                    .iter_mut()
                    .zip(&x[h * c..(h + 1) * c])
                    .for_each(|(o, x)| *o = *o * sa + x * sb);
                acc[hc + h] = m;
            }
        }
    }
}

/// An append-only temporary written through an aligned buffer with `O_DIRECT` (where allowed),
/// cut to its length when finished.
struct SpillWriter {
    file: DirectFile,
    path: PathBuf,
    buf: AlignedBuf,
    flushed: u64,
}

impl SpillWriter {
    fn create(path: PathBuf, buf_bytes: usize) -> Result<Self> {
        let file = DirectFile::create(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        Ok(SpillWriter {
            file,
            path,
            buf: AlignedBuf::new(buf_bytes),
            flushed: 0,
        })
    }

    fn io(&self, source: std::io::Error) -> Error {
        Error::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn append(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            let l = self.buf.len();
            let take = (self.buf.capacity() - l).min(bytes.len());
            self.buf.set_len(l + take);
            self.buf[l..l + take].copy_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buf.len() == self.buf.capacity() {
                self.file
                    .write_all_at(&self.buf, self.flushed)
                    .map_err(|e| self.io(e))?;
                self.flushed += self.buf.len() as u64;
                self.buf.set_len(0);
            }
        }
        Ok(())
    }

    /// Ids as `id_bytes` (4 or 8) little-endian bytes each.
    fn append_ids(&mut self, ids: &[u64], id_bytes: usize) -> Result<()> {
        if id_bytes == 8 {
            return self.append(bytemuck::cast_slice(ids));
        }
        let mut tmp = [0u8; 4096];
        for chunk in ids.chunks(4096 / 4) {
            for (o, &id) in tmp.chunks_exact_mut(4).zip(chunk) {
                o.copy_from_slice(&(id as u32).to_le_bytes());
            }
            self.append(&tmp[..chunk.len() * 4])?;
        }
        Ok(())
    }

    /// Write what is buffered (padded to a page, then cut off) and close. Returns the length.
    fn finish(mut self) -> Result<u64> {
        let l = self.buf.len();
        if l > 0 {
            let padded = l.div_ceil(ALIGN) * ALIGN;
            self.buf.set_len(padded);
            self.buf[l..].fill(0);
            self.file
                .write_all_at(&self.buf, self.flushed)
                .map_err(|e| self.io(e))?;
        }
        let len = self.flushed + l as u64;
        self.file.file().set_len(len).map_err(|e| self.io(e))?;
        Ok(len)
    }
}

/// The bytes the scheme moved through its temporaries, and the neighbor file's bytes read.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PartitionIo {
    pub written: u64,
    pub read: u64,
    pub neighbor_bytes: u64,
}

/// One layer's source partitions and their temporaries (see the module's docs).
pub struct Partitions {
    dir: PathBuf,
    /// Partition `q` holds the sources `bounds[q]..bounds[q + 1]`.
    bounds: Vec<u64>,
    id_bytes: usize,
    /// Source nodes (the last bound) and destination nodes (the last merge bound): the same
    /// count but for a relation between two node types.
    num_sources: u64,
    num_nodes: u64,
    /// Edges bucketed per partition.
    edges: Vec<u64>,
    /// Values of an accumulator row (and of a spilled partial).
    width: usize,
    /// Merge sub-block bounds (node ids; each merge block split for the threads), and the
    /// index in `subs` of each merge block's first bound.
    subs: Vec<u64>,
    merge_at: Vec<usize>,
    spill: Option<(SpillWriter, SpillWriter)>,
    /// Partials spilled so far, and per window the spill row where each sub-block starts.
    spilled: u64,
    marks: Vec<u64>,
    pub io: PartitionIo,
}

impl Partitions {
    /// Partitions of the sources at `bounds` (ascending from 0; the last bound is the number of
    /// sources), partials of `width` values, merged in the destination blocks between `merge`
    /// bounds (ascending, `0..=num_nodes`: the destinations) on `threads` threads; temporaries
    /// in `dir`, ids `id_bytes` wide.
    pub fn new(
        dir: &Path,
        bounds: &[u64],
        merge: &[u64],
        num_nodes: u64,
        id_bytes: usize,
        width: usize,
        threads: usize,
    ) -> Result<Self> {
        let ascends = |b: &[u64]| b.len() >= 2 && b[0] == 0 && b.windows(2).all(|w| w[0] <= w[1]);
        if !ascends(bounds) || !ascends(merge) || *merge.last().unwrap() != num_nodes {
            return Err(Error::Input(format!(
                "partitions: bounds must ascend from 0 (to the sources), merge bounds from 0 to the \
                 {num_nodes} destinations"
            )));
        }
        if (id_bytes != 4 && id_bytes != 8) || width == 0 {
            return Err(Error::Input(format!(
                "partitions: ids of {id_bytes} bytes (4 or 8) and rows of {width} values (> 0) are needed"
            )));
        }
        let t = thread_count(threads) as u64;
        let (mut subs, mut merge_at) = (vec![0u64], Vec::new());
        for w in merge.windows(2) {
            merge_at.push(subs.len() - 1);
            let (a, b) = (w[0], w[1]);
            let k = t.min((b - a).max(1));
            for i in 1..=k {
                let s = a + (b - a) * i / k;
                if s > *subs.last().unwrap() {
                    subs.push(s);
                }
            }
        }
        merge_at.push(subs.len() - 1);
        let parts = bounds.len() - 1;
        let spill = (
            SpillWriter::create(dir.join("partials.ids"), SPILL_BUF)?,
            SpillWriter::create(dir.join("partials.f32"), SPILL_BUF)?,
        );
        Ok(Partitions {
            dir: dir.to_path_buf(),
            bounds: bounds.to_vec(),
            id_bytes,
            num_sources: *bounds.last().unwrap(),
            num_nodes,
            edges: vec![0; parts],
            width,
            subs,
            merge_at,
            spill: Some(spill),
            spilled: 0,
            marks: Vec::new(),
            io: PartitionIo::default(),
        })
    }

    /// The number of source partitions.
    pub fn parts(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Bytes of an id in the buckets (the neighbor file's).
    pub fn id_bytes(&self) -> usize {
        self.id_bytes
    }

    /// The edges bucketed in partition `q`.
    pub fn edges(&self, q: usize) -> u64 {
        self.edges[q]
    }

    fn bucket_path(&self, q: usize, what: &str) -> PathBuf {
        self.dir.join(format!("p{q}.{what}"))
    }

    /// Append every edge of destinations `0..indptr.len() - 1` (the neighbor file `nb`, the
    /// offset index `indptr`) to its source partition's bucket, `chunk_edges` edges (at least a
    /// destination's) at a time, on `threads` threads; `drop_self_loops` leaves out `v -> v`.
    pub fn bucket(
        &mut self,
        nb: NeighborFile<'_>,
        indptr: &[u64],
        drop_self_loops: bool,
        chunk_edges: usize,
        threads: usize,
    ) -> Result<()> {
        let n = indptr.len().saturating_sub(1);
        if n as u64 != self.num_nodes || indptr.windows(2).any(|w| w[0] > w[1]) {
            return Err(Error::Input(format!(
                "partitions: an ascending offset index of the {} nodes is needed",
                self.num_nodes
            )));
        }
        let parts = self.parts();
        let mut writers = Vec::with_capacity(2 * parts);
        for what in ["src", "dst"] {
            for q in 0..parts {
                writers.push(SpillWriter::create(self.bucket_path(q, what), BUCKET_BUF)?);
            }
        }
        let threads = thread_count(threads);
        let bounds = &self.bounds;
        let part_of = |u: u64| bounds.partition_point(|&b| b <= u) - 1;
        let mut a = 0usize;
        while a < n {
            let limit = indptr[a] + chunk_edges.max(1) as u64;
            let b = (indptr.partition_point(|&x| x <= limit) - 1).clamp(a + 1, n);
            let (lo, hi) = (indptr[a], indptr[b]);
            let first = a as u64;
            a = b;
            if hi == lo {
                continue;
            }
            let ids: Vec<u64> = read_ids(nb, lo, hi, self.num_sources)?;
            self.io.neighbor_bytes += (hi - lo) * nb.id_bytes as u64;
            let seg: Vec<usize> = indptr[first as usize..=b]
                .iter()
                .map(|&x| (x - lo) as usize)
                .collect();
            let ranges = split(&seg, threads);
            let keep = |u: u64, d: usize| !(drop_self_loops && u == first + d as u64);
            // Each thread counts its edges per partition ...
            let counts: Vec<Vec<usize>> = thread::scope(|s| {
                let handles: Vec<_> = ranges
                    .iter()
                    .map(|&(d0, d1)| {
                        let (ids, seg) = (&ids, &seg);
                        s.spawn(move || {
                            let mut c = vec![0usize; parts];
                            for d in d0..d1 {
                                for &u in &ids[seg[d]..seg[d + 1]] {
                                    if keep(u, d) {
                                        c[part_of(u)] += 1;
                                    }
                                }
                            }
                            c
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a bucketing thread panicked"))
                    .collect()
            });
            // ... then scatters them into its own slice of each partition's run (partition-major,
            // thread-minor: the threads' destinations ascend, so each run stays sorted).
            let total: usize = counts.iter().flatten().sum();
            let mut src = vec![0u64; total];
            let mut dst = vec![0u64; total];
            let mut slots: Vec<Vec<(&mut [u64], &mut [u64])>> = (0..ranges.len())
                .map(|_| Vec::with_capacity(parts))
                .collect();
            let (mut rs, mut rd) = (&mut src[..], &mut dst[..]);
            let mut run = vec![0usize; parts + 1];
            for q in 0..parts {
                for (t, c) in counts.iter().enumerate() {
                    let (hs, ts) = std::mem::take(&mut rs).split_at_mut(c[q]);
                    let (hd, td) = std::mem::take(&mut rd).split_at_mut(c[q]);
                    rs = ts;
                    rd = td;
                    slots[t].push((hs, hd));
                }
                run[q + 1] = run[q] + counts.iter().map(|c| c[q]).sum::<usize>();
            }
            thread::scope(|s| {
                for (&(d0, d1), mut mine) in ranges.iter().zip(slots) {
                    let (ids, seg) = (&ids, &seg);
                    s.spawn(move || {
                        let mut at = vec![0usize; parts];
                        for d in d0..d1 {
                            for &u in &ids[seg[d]..seg[d + 1]] {
                                if keep(u, d) {
                                    let q = part_of(u);
                                    mine[q].0[at[q]] = u;
                                    mine[q].1[at[q]] = first + d as u64;
                                    at[q] += 1;
                                }
                            }
                        }
                    });
                }
            });
            drop(ids);
            for q in 0..parts {
                let (r0, r1) = (run[q], run[q + 1]);
                if r1 > r0 {
                    writers[q].append_ids(&src[r0..r1], self.id_bytes)?;
                    writers[parts + q].append_ids(&dst[r0..r1], self.id_bytes)?;
                    self.edges[q] += (r1 - r0) as u64;
                }
            }
            self.io.written += 2 * total as u64 * self.id_bytes as u64;
        }
        for w in writers {
            w.finish()?;
        }
        Ok(())
    }

    /// Remove partition `q`'s bucket (its windows are done).
    pub fn remove_bucket(&self, q: usize) -> Result<()> {
        for what in ["src", "dst"] {
            let p = self.bucket_path(q, what);
            std::fs::remove_file(&p).map_err(|source| Error::Io { path: p, source })?;
        }
        Ok(())
    }

    /// Partition `q`'s bucket edges `e0..e1` aggregated with `fold` (for GCN, `dinv` of every
    /// node; for GAT, `a_dst` of every node, `heads` each) by `aggregate` (the caller's
    /// [`crate::aggregate::aggregate_block`] over its row source, with its transform), and the
    /// partials spilled.
    #[allow(clippy::too_many_arguments)]
    pub fn window<F>(
        &mut self,
        q: usize,
        e0: u64,
        e1: u64,
        fold: Fold<'_>,
        piece_rows: usize,
        threads: usize,
        aggregate: F,
    ) -> Result<AggregateStats>
    where
        F: FnOnce(NeighborFile<'_>, &BlockJob<'_>, &mut [f32]) -> Result<AggregateStats>,
    {
        if q >= self.parts() || e0 >= e1 || e1 > self.edges[q] {
            return Err(Error::Input(format!(
                "partitions: edges {e0}..{e1} are not a window of partition {q}'s {} (of {} partitions)",
                self.edges.get(q).copied().unwrap_or(0),
                self.parts()
            )));
        }
        let Some((ids_out, rows_out)) = self.spill.as_mut() else {
            return Err(Error::Input(
                "partitions: the partials are finished; no more windows".into(),
            ));
        };
        let dst_path = self.dir.join(format!("p{q}.dst"));
        let dst_nb = NeighborFile {
            path: &dst_path,
            id_bytes: self.id_bytes,
        };
        let dst: Vec<u64> = read_ids(dst_nb, e0, e1, self.num_nodes)?;
        self.io.read += (e1 - e0) * self.id_bytes as u64;
        // The destinations it reaches, ascending (the bucket is sorted by destination), and
        // their edges: the window's own offset index.
        let (mut reach, mut indptr) = (Vec::new(), Vec::new());
        for (i, &v) in dst.iter().enumerate() {
            match reach.last() {
                Some(&last) if last == v => {}
                Some(&last) if last > v => {
                    return Err(Error::Input(format!(
                        "{}: the bucket is not sorted by destination at entry {}",
                        dst_path.display(),
                        e0 + i as u64
                    )))
                }
                _ => {
                    reach.push(v);
                    indptr.push(e0 + i as u64);
                }
            }
        }
        indptr.push(e1);
        drop(dst);
        let a_dst: Vec<f32>;
        let fold = match fold {
            Fold::Softmax(att) => {
                let h = att.heads;
                if att.a_dst.len() as u64 != self.num_nodes * h as u64 {
                    return Err(Error::Input(format!(
                        "partitions: {} destination logits for {} nodes of {h} heads",
                        att.a_dst.len(),
                        self.num_nodes
                    )));
                }
                a_dst = reach
                    .iter()
                    .flat_map(|&v| &att.a_dst[v as usize * h..(v as usize + 1) * h])
                    .copied()
                    .collect();
                Fold::Softmax(Attention {
                    a_dst: &a_dst,
                    ..att
                })
            }
            f => f,
        };
        let mut acc = vec![0f32; reach.len() * self.width];
        Combine::of(&fold).init(&mut acc, self.width);
        let src_path = self.dir.join(format!("p{q}.src"));
        let job = BlockJob {
            a: 0,
            indptr: &indptr,
            lo: e0,
            hi: e1,
            fold,
            piece_rows,
            threads,
            prefetch: PREFETCH,
            dests: Some(&reach),
        };
        let nb = NeighborFile {
            path: &src_path,
            id_bytes: self.id_bytes,
        };
        let mut stats = aggregate(nb, &job, &mut acc)?;
        self.io.read += stats.neighbor_bytes;
        stats.neighbor_bytes = 0; // the bucket's, not the neighbor file's
        ids_out.append_ids(&reach, 8)?;
        rows_out.append(bytemuck::cast_slice(&acc))?;
        self.io.written += reach.len() as u64 * (8 + 4 * self.width as u64);
        for &s in &self.subs {
            self.marks
                .push(self.spilled + reach.partition_point(|&v| v < s) as u64);
        }
        self.spilled += reach.len() as u64;
        Ok(stats)
    }

    /// No more windows: the partials are written out for the merge.
    pub fn finish_spill(&mut self) -> Result<()> {
        if let Some((ids, rows)) = self.spill.take() {
            ids.finish()?;
            rows.finish()?;
        }
        Ok(())
    }

    /// Merge block `j`'s partials combined by `how` into `acc` (a row of `width` values per
    /// destination of the block, set here), `slice_rows` partials at a time per thread.
    pub fn merge(
        &mut self,
        j: usize,
        how: Combine,
        acc: &mut [f32],
        slice_rows: usize,
    ) -> Result<()> {
        self.finish_spill()?;
        if j + 1 >= self.merge_at.len() {
            return Err(Error::Input(format!(
                "partitions: no merge block {j} (of {})",
                self.merge_at.len() - 1
            )));
        }
        let (s0, s1) = (self.merge_at[j], self.merge_at[j + 1]);
        let (a, b) = (self.subs[s0], self.subs[s1]);
        let w = self.width;
        if acc.len() as u64 != (b - a) * w as u64 {
            return Err(Error::Input(format!(
                "partitions: the accumulator holds {} values but merge block {a}..{b} needs {}",
                acc.len(),
                (b - a) * w as u64
            )));
        }
        how.init(acc, w);
        let open = |name: &str| {
            let path = self.dir.join(name);
            DirectFile::open(&path)
                .map(|f| (f, path.clone()))
                .map_err(|source| Error::Io { path, source })
        };
        let (ids_f, ids_path) = open("partials.ids")?;
        let (rows_f, rows_path) = open("partials.f32")?;
        let stride = self.subs.len();
        let windows = self.marks.len() / stride;
        let (marks, subs) = (&self.marks, &self.subs);
        let slice_rows = slice_rows.max(1);
        let results: Vec<Result<u64>> = thread::scope(|s| {
            let mut rest = acc;
            let mut handles = Vec::new();
            for si in s0..s1 {
                let n_rows = (subs[si + 1] - subs[si]) as usize;
                let (mine, tail) = std::mem::take(&mut rest).split_at_mut(n_rows * w);
                rest = tail;
                let (ids_f, rows_f, ids_path, rows_path) = (&ids_f, &rows_f, &ids_path, &rows_path);
                handles.push(s.spawn(move || -> Result<u64> {
                    let base = subs[si];
                    let mut bounce = AlignedBuf::new(BOUNCE);
                    let mut ids = vec![0u64; slice_rows];
                    let mut rows = vec![0f32; slice_rows * w];
                    let mut read = 0u64;
                    for win in 0..windows {
                        let (r0, r1) = (marks[win * stride + si], marks[win * stride + si + 1]);
                        let mut r = r0;
                        while r < r1 {
                            let k = ((r1 - r) as usize).min(slice_rows);
                            let (ib, rb) = (&mut ids[..k], &mut rows[..k * w]);
                            ids_f
                                .read_exact_at(bytemuck::cast_slice_mut(ib), r * 8, &mut bounce)
                                .map_err(|source| Error::Io {
                                    path: ids_path.clone(),
                                    source,
                                })?;
                            rows_f
                                .read_exact_at(
                                    bytemuck::cast_slice_mut(rb),
                                    r * 4 * w as u64,
                                    &mut bounce,
                                )
                                .map_err(|source| Error::Io {
                                    path: rows_path.clone(),
                                    source,
                                })?;
                            for (i, &v) in ib.iter().enumerate() {
                                let d = v.checked_sub(base).map(|d| d as usize);
                                match d {
                                    Some(d) if d < n_rows => combine(
                                        how,
                                        &mut mine[d * w..(d + 1) * w],
                                        &rb[i * w..(i + 1) * w],
                                    ),
                                    _ => {
                                        return Err(Error::Input(format!(
                                            "{}: partial {} is of node {v}, not of {base}..{}",
                                            ids_path.display(),
                                            r + i as u64,
                                            base + n_rows as u64
                                        )))
                                    }
                                }
                            }
                            read += k as u64 * (8 + 4 * w as u64);
                            r += k as u64;
                        }
                    }
                    Ok(read)
                }));
            }
            handles
                .into_iter()
                .map(|h| h.join().expect("a merge thread panicked"))
                .collect()
        });
        for r in results {
            self.io.read += r?;
        }
        Ok(())
    }

    /// The merge blocks' bounds (node ids).
    pub fn merge_bounds(&self) -> Vec<u64> {
        self.merge_at.iter().map(|&i| self.subs[i]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::aggregate_block;
    use crate::rows::{FeatureFile, RowSource};
    use proptest::prelude::*;
    use ringgnn_store::manifest::{FeatureDtype, FeatureInfo};

    /// A graph in CSC (in-neighbor lists per destination) and its rows, in files.
    struct Graph {
        dir: tempfile::TempDir,
        file: FeatureFile,
        nb: PathBuf,
        id_bytes: usize,
        indptr: Vec<u64>,
    }

    fn graph(lists: &[Vec<u64>], rows: &[Vec<f32>], id_bytes: usize) -> Graph {
        let dir = tempfile::tempdir().unwrap();
        let dim = rows[0].len();
        assert!(4096 % (4 * dim) == 0, "rows must pack pages exactly");
        let bytes: Vec<u8> = rows
            .iter()
            .flatten()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let path = dir.path().join("rows.f32");
        std::fs::write(&path, bytes).unwrap();
        let file = FeatureFile {
            path,
            info: FeatureInfo::new(dim as u64, FeatureDtype::F32),
            num_nodes: rows.len() as u64,
        };
        let mut indptr = vec![0u64];
        let mut ids = Vec::new();
        for l in lists {
            for &u in l {
                if id_bytes == 4 {
                    ids.extend((u as u32).to_le_bytes());
                } else {
                    ids.extend(u.to_le_bytes());
                }
            }
            indptr.push(indptr.last().unwrap() + l.len() as u64);
        }
        let nb = dir.path().join("neighbors");
        std::fs::write(&nb, ids).unwrap();
        Graph {
            dir,
            file,
            nb,
            id_bytes,
            indptr,
        }
    }

    /// The grid's answer: one destination block of every node.
    fn grid(g: &Graph, fold: Fold<'_>, width: usize) -> Vec<f32> {
        let n = g.indptr.len() - 1;
        let mut acc = vec![0f32; n * width];
        Combine::of(&fold).init(&mut acc, width);
        let mut source = RowSource::memory(&g.file).unwrap();
        let job = BlockJob {
            a: 0,
            indptr: &g.indptr,
            lo: 0,
            hi: *g.indptr.last().unwrap(),
            fold,
            piece_rows: 3,
            threads: 2,
            prefetch: PREFETCH,
            dests: None,
        };
        let nb = NeighborFile {
            path: &g.nb,
            id_bytes: g.id_bytes,
        };
        aggregate_block(&g.file, &mut source, nb, &job, None, &mut acc).unwrap();
        acc
    }

    /// The partitioned answer: buckets at `bounds`, windows of `window` edges, merged in the
    /// blocks between `merge`.
    #[allow(clippy::too_many_arguments)]
    fn partitioned(
        g: &Graph,
        fold: Fold<'_>,
        width: usize,
        bounds: &[u64],
        window: u64,
        merge: &[u64],
        chunk: usize,
        threads: usize,
    ) -> (Vec<f32>, PartitionIo) {
        let n = g.indptr.len() - 1;
        let tmp = tempfile::tempdir_in(g.dir.path()).unwrap();
        let mut p = Partitions::new(
            tmp.path(),
            bounds,
            merge,
            n as u64,
            g.id_bytes,
            width,
            threads,
        )
        .unwrap();
        let nb = NeighborFile {
            path: &g.nb,
            id_bytes: g.id_bytes,
        };
        p.bucket(nb, &g.indptr, fold.drops_self_loops(), chunk, threads)
            .unwrap();
        let mut source = RowSource::memory(&g.file).unwrap();
        for q in 0..p.parts() {
            let total = p.edges(q);
            let mut e0 = 0;
            while e0 < total {
                let e1 = (e0 + window).min(total);
                p.window(q, e0, e1, fold, 2, threads, |nb, job, acc| {
                    aggregate_block(&g.file, &mut source, nb, job, None, acc)
                })
                .unwrap();
                e0 = e1;
            }
            p.remove_bucket(q).unwrap();
        }
        let mut out = vec![0f32; n * width];
        for j in 0..merge.len() - 1 {
            let (a, b) = (merge[j] as usize, merge[j + 1] as usize);
            p.merge(j, Combine::of(&fold), &mut out[a * width..b * width], 2)
                .unwrap();
        }
        // Only the partials are left once the buckets are removed.
        let mut left: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["partials.f32", "partials.ids"]);
        (out, p.io)
    }

    fn tiny() -> Graph {
        // dst 0 <- 1, 2; dst 1 <- 0, 3, 3 (a duplicate); dst 2 <- none; dst 3 <- 3 (a self loop), 0.
        let lists = vec![vec![1, 2], vec![0, 3, 3], vec![], vec![3, 0]];
        let rows: Vec<Vec<f32>> = (0..4)
            .map(|u| vec![u as f32 + 1.0, 10.0 * (u as f32 + 1.0), -(u as f32), 0.5])
            .collect();
        graph(&lists, &rows, 4)
    }

    #[test]
    fn sums_by_hand_with_two_partitions_and_one_edge_windows() {
        let g = tiny();
        // x0 = [1, 10, 0, .5], x1 = [2, 20, -1, .5], x2 = [3, 30, -2, .5], x3 = [4, 40, -3, .5].
        let want = [
            [5.0, 50.0, -3.0, 1.0], // x1 + x2
            [9.0, 90.0, -6.0, 1.5], // x0 + 2 x3
            [0.0, 0.0, 0.0, 0.0],   // no in-edges
            [5.0, 50.0, -3.0, 1.0], // x3 + x0 (the stored self loop is an edge for sums)
        ];
        let (got, io) = partitioned(&g, Fold::Sum, 4, &[0, 2, 4], 1, &[0, 3, 4], 2, 2);
        assert_eq!(got, want.concat());
        assert_eq!(got, grid(&g, Fold::Sum, 4));
        // Buckets: 7 edges, two 4-byte ids each, written; every window's partial: 7 windows
        // of one edge, an 8-byte id and 16 bytes each, written once and read once.
        assert_eq!(io.neighbor_bytes, 7 * 4);
        assert_eq!(io.written, 7 * 2 * 4 + 7 * (8 + 16));
        assert_eq!(io.read, 7 * 2 * 4 + 7 * (8 + 16));
    }

    #[test]
    fn gcn_weights_destinations_by_their_node_ids_and_drops_self_loops() {
        let g = tiny();
        let dinv = [1.0, 0.5, 0.25, 2.0];
        let (got, _) = partitioned(&g, Fold::Gcn(&dinv), 4, &[0, 1, 3, 4], 2, &[0, 4], 64, 3);
        let x = |u: usize| [u as f32 + 1.0, 10.0 * (u as f32 + 1.0), -(u as f32), 0.5];
        let mut want = vec![0f32; 16];
        for (v, u) in [(0, 1), (0, 2), (1, 0), (1, 3), (1, 3), (3, 0)] {
            for c in 0..4 {
                want[v * 4 + c] += dinv[u] * dinv[v] * x(u)[c];
            }
        }
        assert_eq!(got, want);
    }

    #[test]
    fn maxima_leave_nodes_without_in_edges_at_minus_infinity() {
        let g = tiny();
        let (got, _) = partitioned(&g, Fold::Max, 4, &[0, 2, 4], 1, &[0, 1, 2, 3, 4], 1, 1);
        let inf = f32::NEG_INFINITY;
        let want = [
            [3.0, 30.0, -1.0, 0.5],
            [4.0, 40.0, 0.0, 0.5],
            [inf, inf, inf, inf],
            [4.0, 40.0, 0.0, 0.5],
        ];
        assert_eq!(got, want.concat());
    }

    #[test]
    fn softmax_partials_merge_to_the_softmax_over_all_edges() {
        // One head of 3 channels: rows [c0, c1, c2, logit]; acc [msg0, msg1, msg2, max, z].
        let lists = vec![vec![1, 2, 3], vec![0], vec![], vec![]];
        let rows = vec![
            vec![1.0, 2.0, 0.0, 0.0],
            vec![10.0, 0.0, 1.0, 1.0],
            vec![0.0, 10.0, 3.0, 3.0],
            vec![5.0, 5.0, -1.0, -1.0],
        ];
        let g = graph(&lists, &rows, 8);
        let a_dst = [0.5, 0.0, 0.0, 0.0];
        let fold = Fold::Softmax(Attention {
            heads: 1,
            negative_slope: 0.2,
            a_dst: &a_dst,
        });
        let (got, _) = partitioned(&g, fold, 5, &[0, 2, 3, 4], 1, &[0, 4], 8, 2);
        // Destination 0: logits 1.5, 3.5, -0.5 (leaky: 1.5, 3.5, -0.1); max 3.5.
        let e = [1.5f32, 3.5, -0.1];
        let w: Vec<f32> = e.iter().map(|x| (x - 3.5).exp()).collect();
        let z: f32 = w.iter().sum();
        let msg = [
            10.0 * w[0] + 0.0 * w[1] + 5.0 * w[2],
            0.0 * w[0] + 10.0 * w[1] + 5.0 * w[2],
            1.0 * w[0] + 3.0 * w[1] - 1.0 * w[2],
        ];
        for (c, m) in msg.iter().enumerate() {
            assert!((got[c] - m).abs() < 1e-5, "{got:?}");
        }
        assert!(
            (got[3] - 3.5).abs() < 1e-6 && (got[4] - z).abs() < 1e-6,
            "{got:?}"
        );
        // Destination 1: its only edge's logit 0 + a_dst[1] = 0; weight 1.
        assert_eq!(&got[5..10], &[1.0, 2.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn bad_arguments_are_errors() {
        let g = tiny();
        let d = g.dir.path();
        assert!(Partitions::new(d, &[0, 3, 2], &[0, 4], 4, 4, 4, 1).is_err()); // bounds descend
        assert!(Partitions::new(d, &[1, 4], &[0, 4], 4, 4, 4, 1).is_err()); // bounds not from 0
        assert!(Partitions::new(d, &[0, 4], &[1, 4], 4, 4, 4, 1).is_err()); // merge not from 0
        assert!(Partitions::new(d, &[0, 4], &[0, 5], 4, 4, 4, 1).is_err()); // merge past the destinations
        assert!(Partitions::new(d, &[0, 4], &[0, 4], 4, 3, 4, 1).is_err()); // 3-byte ids
        let nb = NeighborFile {
            path: &g.nb,
            id_bytes: 4,
        };
        // Sources 0..3 only, but the neighbor file names source 3: refused while bucketing.
        let mut short = Partitions::new(d, &[0, 3], &[0, 4], 4, 4, 4, 1).unwrap();
        let err = short
            .bucket(nb, &g.indptr, false, 4, 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is node 3, but the graph has 3 nodes"),
            "{err}"
        );
        let mut p = Partitions::new(d, &[0, 2, 4], &[0, 4], 4, 4, 4, 1).unwrap();
        assert!(p.bucket(nb, &[0, 1, 2], false, 4, 1).is_err()); // 2 nodes' index for 4 nodes
        p.bucket(nb, &g.indptr, false, 4, 1).unwrap();
        let never = |_: NeighborFile<'_>,
                     _: &BlockJob<'_>,
                     _: &mut [f32]|
         -> Result<AggregateStats> { unreachable!() };
        assert!(p.window(2, 0, 1, Fold::Sum, 1, 1, never).is_err()); // no partition 2
        assert!(p.window(0, 0, 99, Fold::Sum, 1, 1, never).is_err()); // past the bucket
        assert!(p.merge(1, Combine::Add, &mut [0.0; 16], 1).is_err()); // one merge block
        assert!(p.merge(0, Combine::Add, &mut [0.0; 15], 1).is_err()); // wrong size
        assert!(p.window(0, 0, 1, Fold::Sum, 1, 1, never).is_err()); // merged: no more windows
    }

    /// A relation between two node types: 3 sources (rows of 4 values), 5 destinations.
    fn typed() -> Graph {
        // dst 0 <- 2, 0; dst 1 <- none; dst 2 <- 1; dst 3 <- 2, 2 (a duplicate); dst 4 <- 0, 1, 2.
        let lists = vec![vec![2, 0], vec![], vec![1], vec![2, 2], vec![0, 1, 2]];
        let rows: Vec<Vec<f32>> = (0..3)
            .map(|u| vec![u as f32 + 1.0, -2.0 * u as f32, 0.25, 8.0 - u as f32])
            .collect();
        graph(&lists, &rows, 4)
    }

    #[test]
    fn sources_of_another_type_sum_and_max_as_on_the_grid() {
        let g = typed();
        // x0 = [1, 0, .25, 8], x1 = [2, -2, .25, 7], x2 = [3, -4, .25, 6].
        let want_sum = [
            [4.0, -4.0, 0.5, 14.0], // x2 + x0
            [0.0, 0.0, 0.0, 0.0],   // no in-edges
            [2.0, -2.0, 0.25, 7.0], // x1
            [6.0, -8.0, 0.5, 12.0], // 2 x2
            [6.0, -6.0, 0.75, 21.0],
        ];
        // Sources cut in 3 partitions of 1, windows of one edge, merge blocks of 2, 2 and 1
        // destinations (more destinations than sources: the partitions end at 3, merges at 5).
        for (bounds, window, merge) in [
            (&[0u64, 1, 2, 3][..], 1, &[0u64, 2, 4, 5][..]),
            (&[0, 3], 8, &[0, 5]),
            (&[0, 2, 3], 2, &[0, 1, 5]),
        ] {
            let (got, io) = partitioned(&g, Fold::Sum, 4, bounds, window, merge, 2, 2);
            assert_eq!(got, want_sum.concat());
            assert_eq!(got, grid(&g, Fold::Sum, 4));
            assert_eq!(io.neighbor_bytes, 8 * 4);
            let (got, _) = partitioned(&g, Fold::Max, 4, bounds, window, merge, 3, 1);
            assert_eq!(got, grid(&g, Fold::Max, 4));
            let inf = f32::NEG_INFINITY;
            assert_eq!(&got[4..8], &[inf; 4]);
            assert_eq!(&got[16..20], &[3.0, 0.0, 0.25, 8.0]);
        }
    }

    fn arb_graph() -> impl Strategy<Value = (Vec<Vec<u64>>, usize)> {
        (1usize..40).prop_flat_map(|n| {
            (
                prop::collection::vec(prop::collection::vec(0..n as u64, 0..6), n),
                Just(n),
            )
        })
    }

    fn cuts(n: usize, raw: &[usize]) -> Vec<u64> {
        let mut b: Vec<u64> = raw.iter().map(|&x| (x % (n + 1)) as u64).collect();
        b.push(0);
        b.push(n as u64);
        b.sort_unstable();
        b.dedup();
        b
    }

    proptest! {
        /// Whatever the partitions, windows, merge blocks, chunks and threads, the partitioned
        /// scheme gives the grid's aggregates: sums, GCN, maxima and GAT's online softmax.
        #[test]
        fn partitioned_equals_the_grid(
            (lists, n) in arb_graph(),
            pb in prop::collection::vec(0usize..64, 0..5),
            mb in prop::collection::vec(0usize..64, 0..4),
            window in 1u64..12,
            chunk in 1usize..20,
            threads in 1usize..4,
            kind in 0usize..4,
            seed in 0u32..1000,
            wide in any::<bool>(),
        ) {
            let val = |i: usize| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 100.0 - 5.0;
            let rows: Vec<Vec<f32>> = (0..n).map(|u| (0..4).map(|c| val(u * 4 + c)).collect()).collect();
            let g = graph(&lists, &rows, if wide { 8 } else { 4 });
            let dinv: Vec<f32> = (0..n).map(|u| 1.0 / (1.0 + (u % 5) as f32)).collect();
            let a_dst: Vec<f32> = (0..n).map(|u| val(7919 + u)).collect();
            let fold = match kind {
                0 => Fold::Sum,
                1 => Fold::Gcn(&dinv),
                2 => Fold::Max,
                _ => Fold::Softmax(Attention { heads: 1, negative_slope: 0.2, a_dst: &a_dst }),
            };
            let width = if kind == 3 { 5 } else { 4 };
            let want = grid(&g, fold, width);
            let (got, _) = partitioned(&g, fold, width, &cuts(n, &pb), window, &cuts(n, &mb), chunk, threads);
            for (i, (x, y)) in got.iter().zip(&want).enumerate() {
                prop_assert!(x == y || (x - y).abs() <= 1e-4 * y.abs().max(1.0), "value {i}: {x} != {y}");
            }
        }

        /// A relation between two node types (`s` sources, `n` destinations, either more):
        /// whatever the partitions of the sources and the merge blocks of the destinations, the
        /// sums and maxima are the grid's.
        #[test]
        fn typed_partitioned_equals_the_grid(
            (s, lists) in (1usize..20).prop_flat_map(|s| {
                (Just(s), prop::collection::vec(prop::collection::vec(0..s as u64, 0..5), 1..30))
            }),
            pb in prop::collection::vec(0usize..64, 0..4),
            mb in prop::collection::vec(0usize..64, 0..4),
            window in 1u64..9,
            threads in 1usize..4,
            max in any::<bool>(),
        ) {
            let val = |u: usize, c: usize| ((u * 7 + c * 3) % 11) as f32 - 5.0;
            let rows: Vec<Vec<f32>> = (0..s).map(|u| (0..4).map(|c| val(u, c)).collect()).collect();
            let g = graph(&lists, &rows, 4);
            let fold = if max { Fold::Max } else { Fold::Sum };
            let n = lists.len();
            let (got, _) = partitioned(&g, fold, 4, &cuts(s, &pb), window, &cuts(n, &mb), 3, threads);
            prop_assert_eq!(got, grid(&g, fold, 4));
        }

        /// Combining an online softmax's partials over any split of its edges equals folding
        /// every edge into one accumulator.
        #[test]
        fn softmax_partials_combine_in_any_split(
            rows in prop::collection::vec(prop::collection::vec(-8.0f32..8.0, 6), 1..20),
            cut in 0usize..20,
        ) {
            let a_dst = [0.3, -0.7];
            let fold = Fold::Softmax(Attention { heads: 2, negative_slope: 0.2, a_dst: &a_dst });
            let how = Combine::of(&fold);
            let fresh = || { let mut a = vec![0.0; 8]; how.init(&mut a, 8); a };
            let (mut all, mut left, mut right) = (fresh(), fresh(), fresh());
            let cut = cut.min(rows.len());
            for (i, x) in rows.iter().enumerate() {
                fold.edge(&mut all, x, 0, 0, 0);
                fold.edge(if i < cut { &mut left } else { &mut right }, x, 0, 0, 0);
            }
            let mut merged = fresh();
            combine(how, &mut merged, &right);
            combine(how, &mut merged, &left);
            for (x, y) in merged.iter().zip(&all) {
                prop_assert!((x - y).abs() <= 1e-4 * y.abs().max(1.0), "{merged:?} != {all:?}");
            }
        }
    }
}
