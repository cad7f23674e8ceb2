//! Gathering a batch's feature rows into an f32 matrix.
//!
//! One [`FeatureGatherer::gather`] call: check every id, sort `(id, position)` pairs, keep the
//! first position of each distinct id, serve distinct ids from the [`HotRowCache`] where it has
//! them, read the rest with one pass of coalesced page reads ([`RowSource::for_each_row`]),
//! widening each row to f32 straight into the output, then copy rows for repeated ids. A row is
//! therefore converted once and read at most once per call, whatever the duplicates.

use std::sync::Arc;

use ringgnn_io::{BackendKind, CoalesceOptions, ALIGN};
use ringgnn_store::Dataset;

use crate::cache::HotRowCache;
use crate::rows::{decode_row, FeatureFile, RowSource};
use crate::{Error, Result};

/// Counters of gathering; [`FeatureGatherer::gather`] returns those of one call and
/// [`FeatureGatherer::stats`] the sums since creation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatherStats {
    /// Ids asked for, duplicates included.
    pub rows_requested: u64,
    /// Distinct ids among them.
    pub distinct_rows: u64,
    /// Distinct ids served by the hot-row cache (the rest came from the source).
    pub cache_hits: u64,
    /// 4 KiB pages read from disk (0 for the memory source).
    pub pages_read: u64,
    /// Bytes read from disk: `pages_read * 4096`.
    pub bytes_read: u64,
    /// Read requests (runs of adjacent pages) and read batches issued.
    pub read_requests: u64,
    pub read_batches: u64,
}

impl GatherStats {
    /// Share of distinct rows served by the cache (0 when nothing was gathered).
    pub fn hit_rate(&self) -> f64 {
        if self.distinct_rows == 0 {
            0.0
        } else {
            self.cache_hits as f64 / self.distinct_rows as f64
        }
    }

    /// Add `o` to these counters.
    pub fn add(&mut self, o: &GatherStats) {
        self.rows_requested += o.rows_requested;
        self.distinct_rows += o.distinct_rows;
        self.cache_hits += o.cache_hits;
        self.pages_read += o.pages_read;
        self.bytes_read += o.bytes_read;
        self.read_requests += o.read_requests;
        self.read_batches += o.read_batches;
    }
}

/// Reads feature rows for batches of node ids; one per thread (it owns its read buffer).
pub struct FeatureGatherer {
    file: FeatureFile,
    source: RowSource,
    cache: Option<Arc<HotRowCache>>,
    stats: GatherStats,
    /// (id, position in the caller's ids), sorted.
    order: Vec<(u64, usize)>,
    /// Distinct ids the cache lacks, ascending, and the output row each is written to first.
    miss_ids: Vec<u64>,
    miss_at: Vec<usize>,
    /// (output row written, output row that repeats its id).
    dups: Vec<(usize, usize)>,
}

impl FeatureGatherer {
    /// Gather rows of `file` from `source`, without a cache.
    pub fn new(file: FeatureFile, source: RowSource) -> Self {
        FeatureGatherer {
            file,
            source,
            cache: None,
            stats: GatherStats::default(),
            order: Vec::new(),
            miss_ids: Vec::new(),
            miss_at: Vec::new(),
            dups: Vec::new(),
        }
    }

    /// The features of `ds` loaded into memory.
    pub fn memory(ds: &Dataset) -> Result<Self> {
        let file = FeatureFile::of(ds)?;
        let source = RowSource::memory(&file)?;
        Ok(Self::new(file, source))
    }

    /// The features of `ds` read from disk with the backend `kind` (`O_DIRECT` if `direct`).
    /// Also returns why `Auto` fell back to pread, for the caller's one log line.
    pub fn open(
        ds: &Dataset,
        kind: BackendKind,
        direct: bool,
        opts: CoalesceOptions,
    ) -> Result<(Self, Option<String>)> {
        let file = FeatureFile::of(ds)?;
        let (source, why) = RowSource::open(&file, kind, direct, opts)?;
        Ok((Self::new(file, source), why))
    }

    /// Serve rows from `cache` first (shared, read-only, between gatherers).
    pub fn with_cache(mut self, cache: Arc<HotRowCache>) -> Result<Self> {
        if !cache.matches(&self.file) {
            return Err(Error::Input(format!(
                "{}: the hot-row cache was built for another feature layout; build it from \
                 the same dataset",
                self.file.path.display()
            )));
        }
        self.cache = Some(cache);
        Ok(self)
    }

    /// Stop a gather between read waves, with an error, once `flag` is set.
    pub fn set_cancel(&mut self, flag: Arc<std::sync::atomic::AtomicBool>) {
        self.source.set_cancel(flag);
    }

    pub fn file(&self) -> &FeatureFile {
        &self.file
    }

    /// Values per row: `out` holds `ids.len() * dim()` of them.
    pub fn dim(&self) -> usize {
        self.file.dim()
    }

    /// "memory", "pread", "uring", ...
    pub fn source_name(&self) -> &'static str {
        self.source.name()
    }

    /// Counters summed over every call since creation.
    pub fn stats(&self) -> GatherStats {
        self.stats
    }

    /// Write the row of `ids[i]`, as f32, to `out[i * dim .. (i + 1) * dim]` for every `i`.
    /// Returns this call's counters. An id beyond the node count is an error naming it, and
    /// nothing is read.
    pub fn gather(&mut self, ids: &[u64], out: &mut [f32]) -> Result<GatherStats> {
        let mut call = self.prepare(ids, out)?;
        let (dtype, dim) = (self.file.info.dtype, self.file.dim());
        let miss_at = &self.miss_at;
        let read = self
            .source
            .for_each_row(&self.file, &self.miss_ids, |k, row| {
                let i = miss_at[k];
                decode_row(dtype, row, &mut out[i * dim..(i + 1) * dim]);
            })?;
        call.pages_read = read.pages;
        call.bytes_read = read.pages * ALIGN as u64;
        call.read_requests = read.requests;
        call.read_batches = read.batches;
        Ok(self.finish(out, call))
    }

    /// Fold the rows of a destination block's in-neighbors (through `transform`) into `acc`
    /// ([`crate::aggregate::aggregate_block`]), read from this gatherer's source (not its
    /// cache: a block reads its sources in file order anyway). The reads are counted.
    pub fn aggregate(
        &mut self,
        neighbors: crate::aggregate::NeighborFile<'_>,
        job: &crate::aggregate::BlockJob<'_>,
        transform: Option<crate::aggregate::Transform<'_>>,
        acc: &mut [f32],
    ) -> Result<crate::aggregate::AggregateStats> {
        let s = crate::aggregate::aggregate_block(
            &self.file,
            &mut self.source,
            neighbors,
            job,
            transform,
            acc,
        )?;
        self.stats.add(&GatherStats {
            distinct_rows: s.rows,
            rows_requested: s.rows,
            pages_read: s.read.pages,
            bytes_read: s.read.pages * ALIGN as u64,
            read_requests: s.read.requests,
            read_batches: s.read.batches,
            cache_hits: 0,
        });
        Ok(s)
    }

    /// [`Self::gather`] with the rows the cache lacks (the ids [`Self::cold_ids`] gives, in
    /// that order) provided by `rows`, which calls its visitor with the `k`-th one's stored bytes
    /// for every `k` (a batch's region of a staging file). `bytes_read` counts what `rows`
    /// reports.
    pub fn gather_staged(
        &mut self,
        ids: &[u64],
        out: &mut [f32],
        rows: impl FnOnce(usize, &mut dyn FnMut(usize, &[u8])) -> Result<u64>,
    ) -> Result<GatherStats> {
        let mut call = self.prepare(ids, out)?;
        let (dtype, dim) = (self.file.info.dtype, self.file.dim());
        let miss_at = &self.miss_at;
        let mut seen = 0usize;
        let bytes = rows(self.miss_ids.len(), &mut |k, row| {
            let i = miss_at[k];
            decode_row(dtype, row, &mut out[i * dim..(i + 1) * dim]);
            seen += 1;
        })?;
        if seen != self.miss_ids.len() {
            return Err(Error::Input(format!(
                "staged rows: {seen} given for {} rows missing from the cache",
                self.miss_ids.len()
            )));
        }
        call.bytes_read = bytes;
        call.pages_read = bytes / ALIGN as u64;
        Ok(self.finish(out, call))
    }

    /// The distinct ids of `ids` the cache does not hold, ascending: the rows a gather of `ids`
    /// reads, in the order it reads them. Ids are checked.
    pub fn cold_ids(&self, ids: &[u64], into: &mut Vec<u64>) -> Result<()> {
        Self::cold_rows(&self.file, self.cache.as_deref(), ids, into)
    }

    /// [`Self::cold_ids`] for a gatherer of `file` with `cache`, without one (any thread may
    /// call it: a hyperbatch's sampling threads do, before they spill each sample).
    pub fn cold_rows(
        file: &FeatureFile,
        cache: Option<&HotRowCache>,
        ids: &[u64],
        into: &mut Vec<u64>,
    ) -> Result<()> {
        into.clear();
        for &id in ids {
            file.check_id(id)?;
            into.push(id);
        }
        into.sort_unstable();
        into.dedup();
        if let Some(cache) = cache {
            let mut cursor = 0;
            into.retain(|&id| {
                let (pos, slot) = cache.find_from(cursor, id);
                cursor = pos;
                slot.is_none()
            });
        }
        Ok(())
    }

    /// Check and sort `ids`, serve cache hits into `out`, and list the rows to read
    /// (`miss_ids`, `miss_at`) and the repeated ids (`dups`).
    fn prepare(&mut self, ids: &[u64], out: &mut [f32]) -> Result<GatherStats> {
        let dim = self.file.dim();
        if ids.len().checked_mul(dim) != Some(out.len()) {
            return Err(Error::Input(format!(
                "gather: the output holds {} values but {} ids of {dim} values need {}",
                out.len(),
                ids.len(),
                ids.len() as u128 * dim as u128
            )));
        }
        self.order.clear();
        for (i, &id) in ids.iter().enumerate() {
            self.file.check_id(id)?;
            self.order.push((id, i));
        }
        self.order.sort_unstable();
        self.miss_ids.clear();
        self.miss_at.clear();
        self.dups.clear();
        let dtype = self.file.info.dtype;
        let mut call = GatherStats {
            rows_requested: ids.len() as u64,
            ..GatherStats::default()
        };
        let mut cursor = 0;
        let mut prev: Option<(u64, usize)> = None;
        for &(id, i) in &self.order {
            match prev {
                Some((p, first)) if p == id => {
                    self.dups.push((first, i));
                    continue;
                }
                _ => prev = Some((id, i)),
            }
            call.distinct_rows += 1;
            if let Some(cache) = &self.cache {
                let (pos, slot) = cache.find_from(cursor, id);
                cursor = pos;
                if let Some(s) = slot {
                    decode_row(dtype, cache.row(s), &mut out[i * dim..(i + 1) * dim]);
                    call.cache_hits += 1;
                    continue;
                }
            }
            self.miss_ids.push(id);
            self.miss_at.push(i);
        }
        Ok(call)
    }

    /// Copy the rows of repeated ids and count the call.
    fn finish(&mut self, out: &mut [f32], call: GatherStats) -> GatherStats {
        let dim = self.file.dim();
        for &(src, dst) in &self.dups {
            out.copy_within(src * dim..(src + 1) * dim, dst * dim);
        }
        self.stats.add(&call);
        call
    }
}
