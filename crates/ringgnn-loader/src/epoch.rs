//! An epoch as jobs for the worker pipeline: [`EpochBatches`] fixes the epoch's order of the
//! seeds (one global shuffle from `(seed, epoch)`) and cuts it into batches numbered globally,
//! or takes the caller's own batches ([`BatchLists`]: a link batch's seeds are the endpoints of
//! its pairs, which the caller draws); [`EpochJobs`] hands a selection of those batches to the
//! workers (all of them, or one rank's share), `per_job` at a time.
//!
//! A batch's seeds depend only on `(seed, epoch, its global index)`, and its sample on the same
//! (the sampler's random stream is `(seed, epoch, global index)`): so the batches a rank takes
//! from an epoch are exactly those a single process gives for the same indices.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ringgnn_pipeline::JobSource;
use ringgnn_sampler::{SeedSlice, Seeds};
use ringgnn_store::rng;

use crate::{Error, Result};

/// The `purpose` of [`rng::stream`] for the epoch shuffle ("shuffle" in ASCII): the order of
/// the seeds never shares a stream with the sampling of a batch.
pub const SHUFFLE_PURPOSE: u64 = 0x73_68_75_66_66_6c_65;

/// How one epoch is cut and which of its batches to produce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochOptions {
    pub batch_size: NonZeroUsize,
    /// Permute the seeds with the stream `(seed, SHUFFLE_PURPOSE, epoch)` (Fisher-Yates).
    pub shuffle: bool,
    pub epoch: u64,
    /// Drop the last batch when it is short.
    pub drop_last: bool,
    /// The global indices of the batches to produce, in this order; `None`: all, in order.
    pub batches: Option<Vec<u64>>,
    /// The caller's batches instead of a cut of the seeds (`shuffle`, `drop_last` and
    /// `batch_size` then play no part in the cut; `batch_size` is still what the memory plan is
    /// made for, so give the longest batch).
    pub lists: Option<BatchLists>,
}

/// Batches given by the caller: the batch of global index `indices[i]` holds the seeds
/// `bounds[i]..bounds[i + 1]` (positions in the epoch's seed array). An epoch can so be given a
/// window of its batches at a time, or one rank's share, each batch keeping its global index
/// (and so its sample). They are produced in this order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchLists {
    pub bounds: Vec<usize>,
    pub indices: Vec<u64>,
}

impl EpochOptions {
    /// Every batch of epoch `epoch`, shuffled, the short last one kept.
    pub fn new(batch_size: NonZeroUsize, epoch: u64) -> Self {
        EpochOptions {
            batch_size,
            shuffle: true,
            epoch,
            drop_last: false,
            batches: None,
            lists: None,
        }
    }
}

/// How an epoch's seed array is cut into batches.
#[derive(Debug)]
enum Cut {
    /// Batch `b` is `b * batch_size..(b + 1) * batch_size`.
    Even(usize),
    /// The caller's batches, and the position of each global index among them.
    Lists(BatchLists, HashMap<u64, usize>),
}

/// The seeds of one epoch in epoch order, cut into batches with global indices.
#[derive(Debug)]
pub struct EpochBatches {
    order: Seeds,
    cut: Cut,
    len: usize,
    epoch: u64,
}

impl EpochBatches {
    /// Epoch `opts.epoch` of `seeds` under the user seed `seed`, or an error for
    /// [`BatchLists`] that do not cut `seeds` (bounds from 0 to its length, never decreasing).
    pub fn new(seeds: &Seeds, seed: u64, opts: &EpochOptions) -> Result<Self> {
        let Some(lists) = &opts.lists else {
            return Ok(Self::even(seeds, seed, opts));
        };
        let b = &lists.bounds;
        if b.first() != Some(&0)
            || b.last() != Some(&seeds.len())
            || b.windows(2).any(|w| w[0] > w[1])
            || lists.indices.len() + 1 != b.len()
        {
            return Err(Error::Input(format!(
                "batch bounds must rise from 0 to the number of seeds ({}), one more than the batch \
                 indices ({}); got {} bounds from {:?} to {:?}",
                seeds.len(),
                lists.indices.len(),
                b.len(),
                b.first(),
                b.last()
            )));
        }
        let mut pos = HashMap::with_capacity(lists.indices.len());
        for (i, &g) in lists.indices.iter().enumerate() {
            pos.entry(g).or_insert(i);
        }
        Ok(EpochBatches {
            order: seeds.clone(),
            len: lists.indices.len(),
            cut: Cut::Lists(lists.clone(), pos),
            epoch: opts.epoch,
        })
    }

    fn even(seeds: &Seeds, seed: u64, opts: &EpochOptions) -> Self {
        let bs = opts.batch_size.get();
        let order = if opts.shuffle {
            seeds.reordered(|ids| {
                let mut r = rng::stream(seed, SHUFFLE_PURPOSE, opts.epoch);
                for i in (1..ids.len()).rev() {
                    let j = rng::below(&mut r, i as u64 + 1) as usize;
                    ids.swap(i, j);
                }
            })
        } else {
            seeds.clone()
        };
        let len = if opts.drop_last {
            order.len() / bs
        } else {
            order.len().div_ceil(bs)
        };
        EpochBatches {
            order,
            cut: Cut::Even(bs),
            len,
            epoch: opts.epoch,
        }
    }

    /// Batches in the whole epoch.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The seeds of batch `b` (a global index [`Self::select`] gave).
    pub fn seeds_of(&self, b: u64) -> SeedSlice<'_> {
        match &self.cut {
            Cut::Even(bs) => {
                let start = b as usize * bs;
                self.order.slice(start..start + bs)
            }
            Cut::Lists(l, pos) => {
                let i = pos[&b];
                self.order.slice(l.bounds[i]..l.bounds[i + 1])
            }
        }
    }

    /// The indices `select` asks for (all when `None`), each checked to be a batch of this
    /// epoch.
    pub fn select(&self, select: Option<&[u64]>) -> Result<Vec<u64>> {
        let given = |b: u64| match &self.cut {
            Cut::Even(_) => b < self.len as u64,
            Cut::Lists(_, pos) => pos.contains_key(&b),
        };
        match (select, &self.cut) {
            (None, Cut::Even(_)) => Ok((0..self.len as u64).collect()),
            (None, Cut::Lists(l, _)) => Ok(l.indices.clone()),
            (Some(s), _) => {
                if let Some(&b) = s.iter().find(|&&b| !given(b)) {
                    return Err(Error::Input(match &self.cut {
                        Cut::Even(_) => format!(
                            "batch {b} is not a batch of this epoch: it has {} batches ({})",
                            self.len,
                            ringgnn_store::IdRange(self.len as u64)
                        ),
                        Cut::Lists(..) => format!("batch {b} is not one of the batches given"),
                    }));
                }
                Ok(s.to_vec())
            }
        }
    }
}

/// The short first job of an epoch of `left` batches (see [`EpochJobs`]): one batch. The plan's
/// cost splits an epoch the same way (`budget::cost`).
pub(crate) fn short_first_len(left: usize) -> usize {
    left.min(1)
}

/// One job: some batches of an epoch, by global index.
#[derive(Clone, Debug)]
pub struct BatchJob {
    pub batches: Arc<EpochBatches>,
    pub indices: Vec<u64>,
    /// The first job of the epoch's selection: nothing is trained while it is prepared (a
    /// loading driver does not stage its rows, see `staging::stage_rows`).
    pub first: bool,
}

/// The selected batches of an epoch in the selection's order, `per_job` batches per job (read
/// at each claim: a hyperbatch worker sizes the next job from what it measured).
///
/// With `balance`, `per_job` is the most a job may take, and the batches left are split into
/// as few jobs as that allows, of sizes that differ by one at most. For hyperbatches, a pass
/// over the neighbor file costs about as much for a few batches as for many: an epoch of 82
/// with room for 75 is two hyperbatches either way, and 41 + 41 spends less than 75 + 7 (each
/// batch's state is smaller next to fewer others; the last one is not a near-empty pass).
///
/// With `short_first` (balanced only; loading drivers that may stage rows), the first job is one
/// batch and the rest are split as before: it is gathered batch by batch (see
/// `staging::stage_rows`) and trained while the second driver samples and stages the next.
/// Its random reads share the device with that pass, so a longer first job slows the pass
/// about as much as its training covers (docs/benchmarks.md, "Measurements behind design
/// choices"): one batch starts the training at
/// once. 12 batches with room for 12 are 1 + 11.
pub struct EpochJobs {
    batches: Arc<EpochBatches>,
    indices: Vec<u64>,
    next: usize,
    per_job: Arc<AtomicUsize>,
    balance: bool,
    short_first: bool,
}

impl EpochJobs {
    pub fn new(
        batches: Arc<EpochBatches>,
        indices: Vec<u64>,
        per_job: Arc<AtomicUsize>,
        balance: bool,
    ) -> Self {
        EpochJobs {
            batches,
            indices,
            next: 0,
            per_job,
            balance,
            short_first: false,
        }
    }

    /// A first job of one batch, when balanced (see the type's docs).
    pub fn with_short_first(mut self, on: bool) -> Self {
        self.short_first = on;
        self
    }

    /// Whether the next job is the short first one.
    fn short(&self) -> bool {
        self.balance && self.short_first && self.next == 0
    }

    fn per_job(&self) -> usize {
        self.per_job.load(Ordering::Relaxed).max(1)
    }

    /// Batches the next job takes ([`take`]).
    fn take(&self) -> usize {
        take(
            self.indices.len() - self.next,
            self.per_job(),
            self.balance,
            self.short(),
        )
    }
}

/// Jobs `left` batches make with `most` a job (`short`: the next is the short first one): as
/// few as the size allows, of even sizes, but the short first and an even split of the rest.
fn jobs(left: usize, most: usize, short: bool) -> usize {
    let even = |left: usize| left.div_ceil(most.max(1)).max(1);
    if !short {
        return even(left);
    }
    let first = short_first_len(left);
    1 + if left > first { even(left - first) } else { 0 }
}

/// Batches the next job takes of the `left` batches, with `most` a job, `balance`d or not, and
/// whether it is the short first one: the rule of [`EpochJobs`] (see its docs).
pub(crate) fn take(left: usize, most: usize, balance: bool, short: bool) -> usize {
    if !balance {
        return most.max(1).min(left);
    }
    if short {
        return short_first_len(left);
    }
    left.div_ceil(jobs(left, most, false))
}

/// The sizes of the jobs of an epoch of `batches` batches when every job may take `most`
/// (`balance`d, as hyperbatches sized from the budget are; `short_first` as
/// [`EpochJobs::with_short_first`]): what [`EpochJobs`] hands out while the size stays (a
/// hyperbatch size asked for, in the memory plan's cost: `budget::cost::estimate`).
pub fn job_sizes(batches: usize, most: usize, balance: bool, short_first: bool) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut left = batches;
    while left > 0 {
        let n = take(
            left,
            most,
            balance,
            balance && short_first && sizes.is_empty(),
        );
        sizes.push(n);
        left -= n;
    }
    sizes
}

impl JobSource for EpochJobs {
    type Job = BatchJob;

    fn next_job(&mut self) -> Option<(BatchJob, usize)> {
        if self.next >= self.indices.len() {
            return None;
        }
        let end = self.next + self.take();
        let indices = self.indices[self.next..end].to_vec();
        let first = self.next == 0;
        self.next = end;
        let n = indices.len();
        Some((
            BatchJob {
                batches: self.batches.clone(),
                indices,
                first,
            },
            n,
        ))
    }

    fn jobs_left(&self) -> Option<usize> {
        let left = self.indices.len() - self.next;
        Some(if left == 0 {
            0
        } else {
            jobs(left, self.per_job(), self.short())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(bs: usize, shuffle: bool, epoch: u64, drop_last: bool) -> EpochOptions {
        EpochOptions {
            batch_size: NonZeroUsize::new(bs).unwrap(),
            shuffle,
            epoch,
            drop_last,
            batches: None,
            lists: None,
        }
    }

    #[test]
    fn an_epoch_is_a_reproducible_permutation_cut_into_numbered_batches() {
        let seeds = Seeds::new((100..350).collect::<Vec<u64>>(), 1000).unwrap();
        let cut = |o: &EpochOptions, seed| {
            let e = EpochBatches::new(&seeds, seed, o).unwrap();
            (0..e.len() as u64)
                .map(|b| e.seeds_of(b).ids().to_vec())
                .collect::<Vec<_>>()
        };
        let plain = cut(&opts(100, false, 0, false), 0);
        assert_eq!(
            plain.iter().map(Vec::len).collect::<Vec<_>>(),
            [100, 100, 50]
        );
        assert_eq!(plain.concat(), seeds.ids());
        assert_eq!(cut(&opts(100, false, 0, true), 0).len(), 2);
        let e0 = cut(&opts(100, true, 0, false), 7).concat();
        let mut sorted = e0.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, seeds.ids(), "a permutation");
        assert_ne!(e0, seeds.ids());
        assert_eq!(
            cut(&opts(100, true, 0, false), 7).concat(),
            e0,
            "reproducible"
        );
        assert_ne!(cut(&opts(100, true, 1, false), 7).concat(), e0, "per epoch");
        assert_ne!(cut(&opts(100, true, 0, false), 8).concat(), e0, "per seed");
    }

    #[test]
    fn given_lists_are_the_batches_with_their_global_indices() {
        let seeds = Seeds::new(vec![5, 1, 9, 2, 2, 7], 10).unwrap();
        let mut o = opts(3, true, 4, true);
        o.lists = Some(BatchLists {
            bounds: vec![0, 2, 2, 6],
            indices: vec![10, 3, 12],
        });
        let e = EpochBatches::new(&seeds, 0, &o).unwrap();
        assert_eq!((e.len(), e.epoch()), (3, 4));
        assert_eq!(e.select(None).unwrap(), [10, 3, 12], "in the order given");
        let got: Vec<Vec<u64>> = [10, 3, 12]
            .iter()
            .map(|&b| e.seeds_of(b).ids().to_vec())
            .collect();
        assert_eq!(
            got,
            [vec![5, 1], vec![], vec![9, 2, 2, 7]],
            "no shuffle, no drop"
        );
        assert_eq!(e.select(Some(&[12, 10])).unwrap(), [12, 10]);
        let err = e.select(Some(&[11])).unwrap_err().to_string();
        assert!(
            err.contains("batch 11 is not one of the batches given"),
            "{err}"
        );
        for (bounds, indices) in [
            (vec![0, 2, 5], vec![0, 1]),
            (vec![1, 6], vec![0]),
            (vec![0, 4, 3, 6], vec![0, 1, 2]),
            (vec![], vec![]),
            (vec![0, 6], vec![0, 1]),
        ] {
            o.lists = Some(BatchLists {
                bounds: bounds.clone(),
                indices,
            });
            let err = EpochBatches::new(&seeds, 0, &o).unwrap_err().to_string();
            assert!(
                err.contains("batch bounds must rise from 0"),
                "{bounds:?}: {err}"
            );
        }
    }

    #[test]
    fn jobs_hand_out_the_selection_in_order() {
        let seeds = Seeds::all(100);
        let e = Arc::new(EpochBatches::new(&seeds, 0, &opts(10, true, 3, false)).unwrap());
        assert_eq!(e.select(None).unwrap(), (0..10).collect::<Vec<u64>>());
        let err = e.select(Some(&[2, 10])).unwrap_err().to_string();
        assert!(err.contains("batch 10 is not a batch"), "{err}");
        let per_job = Arc::new(AtomicUsize::new(2));
        let mut jobs = EpochJobs::new(e.clone(), vec![7, 1, 4, 9, 3, 2], per_job.clone(), false);
        assert_eq!(jobs.jobs_left(), Some(3));
        let (j, n) = jobs.next_job().unwrap();
        assert_eq!((j.indices, n), (vec![7, 1], 2));
        // The size is read at each claim.
        per_job.store(3, Ordering::Relaxed);
        let (j, n) = jobs.next_job().unwrap();
        assert_eq!((j.indices, n), (vec![4, 9, 3], 3));
        let (j, n) = jobs.next_job().unwrap();
        assert_eq!((j.indices, n), (vec![2], 1));
        assert!(jobs.next_job().is_none());
        assert_eq!(jobs.jobs_left(), Some(0));
    }

    #[test]
    fn balanced_jobs_are_as_few_as_the_size_allows_and_even() {
        let seeds = Seeds::all(1000);
        let e = Arc::new(EpochBatches::new(&seeds, 0, &opts(10, false, 0, false)).unwrap());
        let sizes = |n: u64, most: usize, balance: bool| {
            let mut jobs = EpochJobs::new(
                e.clone(),
                (0..n).collect(),
                Arc::new(AtomicUsize::new(most)),
                balance,
            );
            let mut got = vec![];
            let mut all = vec![];
            while let Some((j, k)) = jobs.next_job() {
                assert_eq!(j.indices.len(), k);
                got.push(k);
                all.extend(j.indices);
            }
            assert_eq!(all, (0..n).collect::<Vec<_>>(), "every batch, in order");
            got
        };
        assert_eq!(sizes(82, 75, true), [41, 41]);
        assert_eq!(sizes(82, 75, false), [75, 7]);
        assert_eq!(sizes(10, 4, true), [4, 3, 3]);
        assert_eq!(sizes(82, 82, true), [82]);
        assert_eq!(sizes(82, 1000, true), [82]);
        assert_eq!(sizes(5, 1, true), [1, 1, 1, 1, 1]);
        assert_eq!(sizes(5, 0, true), [1, 1, 1, 1, 1]);
        assert!(sizes(0, 3, true).is_empty());
        // The most is read at each claim: the split follows it.
        let per_job = Arc::new(AtomicUsize::new(30));
        let mut jobs = EpochJobs::new(e.clone(), (0..82).collect(), per_job.clone(), true);
        assert_eq!(jobs.jobs_left(), Some(3));
        assert_eq!(jobs.next_job().unwrap().1, 28);
        per_job.store(75, Ordering::Relaxed);
        assert_eq!(jobs.jobs_left(), Some(1));
        assert_eq!(jobs.next_job().unwrap().1, 54);
        assert!(jobs.next_job().is_none());
    }

    #[test]
    fn a_short_first_job_and_only_the_first_is_first() {
        let seeds = Seeds::all(1000);
        let e = Arc::new(EpochBatches::new(&seeds, 0, &opts(10, false, 0, false)).unwrap());
        let run = |n: u64, most: usize, balance: bool, short: bool| {
            let mut jobs = EpochJobs::new(
                e.clone(),
                (0..n).collect(),
                Arc::new(AtomicUsize::new(most)),
                balance,
            )
            .with_short_first(short);
            let left = jobs.jobs_left();
            let mut got = vec![];
            let mut all = vec![];
            while let Some((j, k)) = jobs.next_job() {
                got.push((k, j.first));
                all.extend(j.indices);
            }
            assert_eq!(left, Some(got.len()), "jobs_left counts the split");
            assert_eq!(all, (0..n).collect::<Vec<_>>(), "every batch, in order");
            got
        };
        // Room for the whole epoch, yet two hyperbatches: the first, one batch, trains while
        // the second is staged.
        assert_eq!(run(12, 12, true, true), [(1, true), (11, false)]);
        assert_eq!(run(12, 100, true, true), [(1, true), (11, false)]);
        // Less room: the rest split evenly as before.
        assert_eq!(
            run(12, 5, true, true),
            [(1, true), (4, false), (4, false), (3, false)]
        );
        assert_eq!(
            run(82, 30, true, true),
            [(1, true), (27, false), (27, false), (27, false)]
        );
        assert_eq!(run(2, 12, true, true), [(1, true), (1, false)]);
        assert_eq!(run(1, 12, true, true), [(1, true)]);
        assert!(run(0, 12, true, true).is_empty());
        // Without it, or with a fixed size (not balanced), as before.
        assert_eq!(run(12, 12, true, false), [(12, true)]);
        assert_eq!(run(12, 12, false, true), [(12, true)]);
        assert_eq!(run(12, 5, false, true), [(5, true), (5, false), (2, false)]);
    }
}
