//! The hot-row cache: feature rows that many batches need, kept in memory within a byte budget.
//!
//! Rows are kept **compact, in their stored dtype** (`row_bytes` each: an f16 dataset caches
//! twice the rows of an f32 one in the same budget) and widened to f32 when gathered, like rows
//! read from disk. Each cached row costs `row_bytes + 8` bytes of the budget: the row and its id.
//!
//! Lookup structure: the cached ids in one ascending `Vec<u64>`, and row `k` of the data is the
//! row of `ids[k]`. That is 8 bytes per cached row and nothing else (a hash map costs 2-4x that
//! with its load factor and control bytes), and it suits [`crate::FeatureGatherer`], which sorts
//! each batch's ids anyway: it looks the batch up with one forward galloping pass
//! ([`HotRowCache::find_from`]), `O(k log(n/k))` for `k` batch ids against `n` cached rows, so
//! near-constant per id with monotone, cache-friendly accesses. A lone [`HotRowCache::slot`] is
//! a binary search, `O(log n)`.
//!
//! Rows are chosen by in-degree ([`HotRowCache::build_by_degree`]) or by access counts from
//! sampling ahead ([`HotRowCache::build_from_counts`], DiskGNN's offline counting / GIDS'
//! window), highest first, ties to the smaller id.

use std::collections::BTreeMap;

use ringgnn_store::manifest::FeatureInfo;
use ringgnn_store::Dataset;

use crate::rows::{FeatureFile, RowSource};
use crate::{Error, Result};

/// Budget bytes per cached row on top of the row itself: its id in the lookup array.
pub const INDEX_BYTES_PER_ROW: u64 = 8;

/// Feature rows held in memory; see the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct HotRowCache {
    info: FeatureInfo,
    num_nodes: u64,
    /// Cached ids, ascending.
    ids: Vec<u64>,
    /// `ids.len()` rows of `info.row_bytes`, in the order of `ids`.
    data: Vec<u8>,
}

impl HotRowCache {
    /// How many rows of `file` a budget of `budget` bytes holds: never more than the file has.
    pub fn rows_for_budget(file: &FeatureFile, budget: u64) -> u64 {
        (budget / (file.info.row_bytes + INDEX_BYTES_PER_ROW)).min(file.num_nodes)
    }

    /// A cache holding nothing (budget 0).
    pub fn empty(file: &FeatureFile) -> Self {
        HotRowCache {
            info: file.info.clone(),
            num_nodes: file.num_nodes,
            ids: Vec::new(),
            data: Vec::new(),
        }
    }

    /// The rows of highest in-degree of `ds` that fit in `budget` bytes, read with buffered
    /// preads.
    pub fn build_by_degree(ds: &Dataset, budget: u64) -> Result<Self> {
        let file = FeatureFile::of(ds)?;
        let k = Self::rows_for_budget(&file, budget);
        if k == 0 {
            return Ok(Self::empty(&file));
        }
        let indptr = ds.load_indptr()?;
        let ids = top_by_degree(&indptr, k);
        Self::load(&file, &mut open_pread(&file)?, ids)
    }

    /// [`Self::build_by_degree`] with the offset index already in memory (a sampler's, which
    /// gives its `degrees`, one per node, in order).
    pub fn build_by_degree_with<I>(ds: &Dataset, degrees: I, budget: u64) -> Result<Self>
    where
        I: ExactSizeIterator<Item = u64> + Clone,
    {
        let file = FeatureFile::of(ds)?;
        if degrees.len() as u64 != file.num_nodes {
            return Err(Error::Input(format!(
                "the offset index has {} entries but the dataset has {} nodes",
                degrees.len() + 1,
                file.num_nodes
            )));
        }
        let k = Self::rows_for_budget(&file, budget);
        if k == 0 {
            return Ok(Self::empty(&file));
        }
        let ids = top_k(degrees.enumerate().map(|(v, d)| (v as u64, d)), k);
        Self::load(&file, &mut open_pread(&file)?, ids)
    }

    /// The rows with the highest access counts, given densely (`counts[v]` for every node `v`,
    /// e.g. counted while sampling ahead), that fit in `budget` bytes. Ties, including the nodes
    /// never counted when there is room for them, go to the higher in-degree (`degrees`, one per
    /// node, from the offset index), then to the smaller id: a short look-ahead leaves many
    /// nodes with equal small counts, and degree is the best predictor among them.
    pub fn build_from_dense_counts(
        ds: &Dataset,
        budget: u64,
        counts: &[u16],
        degrees: impl ExactSizeIterator<Item = u64> + Clone,
    ) -> Result<Self> {
        let file = FeatureFile::of(ds)?;
        if counts.len() as u64 != file.num_nodes || degrees.len() as u64 != file.num_nodes {
            return Err(Error::Input(format!(
                "{} access counts and {} offsets for {} nodes: give one count per node and the \
                 dataset's offset index",
                counts.len(),
                degrees.len() + 1,
                file.num_nodes
            )));
        }
        let k = Self::rows_for_budget(&file, budget);
        let items = counts.iter().zip(degrees).enumerate().map(|(v, (&c, d))| {
            let degree = d.min((1 << 40) - 1);
            (v as u64, (u64::from(c) << 40) | degree)
        });
        let ids = top_k(items, k);
        if ids.is_empty() {
            return Ok(Self::empty(&file));
        }
        Self::load(&file, &mut open_pread(&file)?, ids)
    }

    /// The rows with the highest access `counts` (`(node id, count)` pairs; an id given twice
    /// has its counts added; ids with count 0 are never cached) that fit in `budget` bytes.
    pub fn build_from_counts(ds: &Dataset, budget: u64, counts: &[(u64, u64)]) -> Result<Self> {
        let file = FeatureFile::of(ds)?;
        let ids = top_by_count(&file, budget, counts)?;
        if ids.is_empty() {
            return Ok(Self::empty(&file));
        }
        Self::load(&file, &mut open_pread(&file)?, ids)
    }

    /// A cache of exactly the rows `ids` of `ds` (ascending, distinct, in range: an error names
    /// the first that is not), read with buffered preads: the caller chose them, e.g. the
    /// heterogeneous loader's ranking of rows across node types by expected hits per byte.
    pub fn build_from_ids(ds: &Dataset, ids: Vec<u64>) -> Result<Self> {
        let file = FeatureFile::of(ds)?;
        if ids.is_empty() {
            return Ok(Self::empty(&file));
        }
        Self::load(&file, &mut open_pread(&file)?, ids)
    }

    /// A cache of the rows `ids` (ascending, distinct, in range) of `file`, read from `source`.
    pub fn load(file: &FeatureFile, source: &mut RowSource, ids: Vec<u64>) -> Result<Self> {
        if let Some(w) = ids.windows(2).find(|w| w[0] >= w[1]) {
            return Err(Error::Input(format!(
                "hot-row cache ids must be ascending and distinct, found {} then {}",
                w[0], w[1]
            )));
        }
        if let Some(&last) = ids.last() {
            file.check_id(last)?;
        }
        let rb = file.row_bytes();
        let mut data = vec![0u8; ids.len() * rb];
        source.for_each_row(file, &ids, |k, row| {
            data[k * rb..(k + 1) * rb].copy_from_slice(row)
        })?;
        Ok(HotRowCache {
            info: file.info.clone(),
            num_nodes: file.num_nodes,
            ids,
            data,
        })
    }

    /// Number of cached rows.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Memory held, in the units of the budget (rows plus ids).
    pub fn bytes(&self) -> u64 {
        (self.data.len() + self.ids.len() * 8) as u64
    }

    /// The cached ids, ascending.
    pub fn ids(&self) -> &[u64] {
        &self.ids
    }

    /// Whether this cache holds rows of `file` (same layout and node count).
    pub fn matches(&self, file: &FeatureFile) -> bool {
        self.info == file.info && self.num_nodes == file.num_nodes
    }

    /// The slot of `id`, if cached (binary search).
    pub fn slot(&self, id: u64) -> Option<usize> {
        self.ids.binary_search(&id).ok()
    }

    /// The stored bytes of the row in `slot`.
    pub fn row(&self, slot: usize) -> &[u8] {
        let rb = self.info.row_bytes as usize;
        &self.data[slot * rb..(slot + 1) * rb]
    }

    /// For ids looked up in ascending order: the first position `>= from` whose id is `>= id`
    /// (pass it as the next `from`), and the slot of `id` if it is cached. Galloping, so a
    /// sorted batch costs one forward pass over the ids.
    pub fn find_from(&self, from: usize, id: u64) -> (usize, Option<usize>) {
        let from = from.min(self.ids.len());
        let rest = &self.ids[from..];
        let mut bound = 1;
        while bound < rest.len() && rest[bound] < id {
            bound *= 2;
        }
        let start = bound / 2;
        let end = (bound + 1).min(rest.len());
        let pos = from + start + rest[start.min(end)..end].partition_point(|&x| x < id);
        let hit = (self.ids.get(pos) == Some(&id)).then_some(pos);
        (pos, hit)
    }
}

/// The `k` nodes of highest in-degree (`indptr[v+1] - indptr[v]`), ties to the smaller id,
/// ascending. Two passes and a histogram of the distinct degrees instead of a sort of all
/// nodes: memory grows with `k`, not with the node count.
pub fn top_by_degree(indptr: &[u64], k: u64) -> Vec<u64> {
    let degrees = indptr
        .windows(2)
        .enumerate()
        .map(|(v, w)| (v as u64, w[1].saturating_sub(w[0])));
    top_k(degrees, k)
}

/// The `k` ids with the highest scores of `items` (`(id, score)`, ids distinct and ascending),
/// ties to the smaller id; ascending.
fn top_k<I>(items: I, k: u64) -> Vec<u64>
where
    I: Iterator<Item = (u64, u64)> + Clone,
{
    if k == 0 {
        return Vec::new();
    }
    let mut hist: BTreeMap<u64, u64> = BTreeMap::new();
    for (_, s) in items.clone() {
        *hist.entry(s).or_default() += 1;
    }
    // The score of the last row taken, and how many with exactly that score fit.
    let (mut threshold, mut at_threshold, mut above) = (0, 0, 0u64);
    for (&s, &n) in hist.iter().rev() {
        threshold = s;
        at_threshold = n.min(k - above);
        if above + n >= k {
            break;
        }
        above += n;
    }
    let mut out = Vec::with_capacity(k.min(above + at_threshold) as usize);
    for (id, s) in items {
        if s > threshold {
            out.push(id);
        } else if s == threshold && at_threshold > 0 {
            out.push(id);
            at_threshold -= 1;
        }
    }
    out
}

/// The ids to cache for access `counts` within `budget`, ascending.
fn top_by_count(file: &FeatureFile, budget: u64, counts: &[(u64, u64)]) -> Result<Vec<u64>> {
    let k = HotRowCache::rows_for_budget(file, budget);
    if k == 0 {
        return Ok(Vec::new());
    }
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(counts.len());
    let mut sorted = counts.to_vec();
    sorted.sort_unstable();
    for (id, c) in sorted {
        file.check_id(id)?;
        match merged.last_mut() {
            Some((last, total)) if *last == id => *total = total.saturating_add(c),
            _ => merged.push((id, c)),
        }
    }
    merged.retain(|&(_, c)| c > 0);
    Ok(top_k(merged.iter().copied(), k))
}

fn open_pread(file: &FeatureFile) -> Result<RowSource> {
    let opts = ringgnn_io::CoalesceOptions::default();
    Ok(RowSource::open(file, ringgnn_io::BackendKind::Pread, false, opts)?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_takes_the_highest_scores_ties_to_small_ids() {
        let items = [(0, 5), (1, 2), (2, 5), (3, 9), (4, 2), (5, 0)];
        let top = |k| top_k(items.iter().copied(), k);
        assert_eq!(top(0), Vec::<u64>::new());
        assert_eq!(top(1), vec![3]);
        assert_eq!(top(2), vec![0, 3]);
        assert_eq!(top(3), vec![0, 2, 3]);
        assert_eq!(top(4), vec![0, 1, 2, 3]);
        assert_eq!(top(6), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(top(100), vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn degrees_come_from_indptr_differences() {
        // Degrees 0, 3, 1, 3, 2.
        let indptr = [0, 0, 3, 4, 7, 9];
        assert_eq!(top_by_degree(&indptr, 1), vec![1]);
        assert_eq!(top_by_degree(&indptr, 3), vec![1, 3, 4]);
        assert_eq!(top_by_degree(&indptr, 4), vec![1, 2, 3, 4]);
    }
}
