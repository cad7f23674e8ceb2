//! An epoch as jobs for the worker pipeline: [`EpochBatches`] fixes the epoch's order of the
//! seeds (one global shuffle from `(seed, epoch)`) and cuts it into batches numbered globally;
//! [`EpochJobs`] hands a selection of those batches to the workers (all of them, or one rank's
//! share), `per_job` at a time.
//!
//! A batch's seeds depend only on `(seed, epoch, its global index)`, and its sample on the same
//! (the sampler's random stream is `(seed, epoch, global index)`): so the batches a rank takes
//! from an epoch are exactly those a single process gives for the same indices.

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
        }
    }
}

/// The seeds of one epoch in epoch order, cut into batches with global indices.
#[derive(Debug)]
pub struct EpochBatches {
    order: Seeds,
    batch_size: usize,
    len: usize,
    epoch: u64,
}

impl EpochBatches {
    /// Epoch `opts.epoch` of `seeds` under the user seed `seed`.
    pub fn new(seeds: &Seeds, seed: u64, opts: &EpochOptions) -> Self {
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
            batch_size: bs,
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

    /// The seeds of batch `b` (a global index below [`Self::len`]).
    pub fn seeds_of(&self, b: u64) -> SeedSlice<'_> {
        let start = b as usize * self.batch_size;
        self.order.slice(start..start + self.batch_size)
    }

    /// The indices `select` asks for (all when `None`), each checked to be a batch of this
    /// epoch.
    pub fn select(&self, select: Option<&[u64]>) -> Result<Vec<u64>> {
        match select {
            None => Ok((0..self.len as u64).collect()),
            Some(s) => {
                if let Some(&b) = s.iter().find(|&&b| b >= self.len as u64) {
                    return Err(Error::Input(format!(
                        "batch {b} is not a batch of this epoch: it has {} batches (0..{})",
                        self.len, self.len
                    )));
                }
                Ok(s.to_vec())
            }
        }
    }
}

/// One job: some batches of an epoch, by global index.
#[derive(Clone, Debug)]
pub struct BatchJob {
    pub batches: Arc<EpochBatches>,
    pub indices: Vec<u64>,
}

/// The selected batches of an epoch in the selection's order, `per_job` batches per job (read
/// at each claim: a hyperbatch worker sizes the next job from what it measured).
///
/// With `balance`, `per_job` is the most a job may take, and the batches left are split into
/// as few jobs as that allows, of sizes that differ by one at most. For hyperbatches, a pass
/// over the neighbor file costs about as much for a few batches as for many: an epoch of 82
/// with room for 75 is two hyperbatches either way, and 41 + 41 spends less than 75 + 7 (each
/// batch's state is smaller next to fewer others; the last one is not a near-empty pass).
pub struct EpochJobs {
    batches: Arc<EpochBatches>,
    indices: Vec<u64>,
    next: usize,
    per_job: Arc<AtomicUsize>,
    balance: bool,
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
        }
    }

    fn per_job(&self) -> usize {
        self.per_job.load(Ordering::Relaxed).max(1)
    }

    /// Batches the next job takes.
    fn take(&self) -> usize {
        let (left, most) = (self.indices.len() - self.next, self.per_job());
        if !self.balance {
            return most.min(left);
        }
        left.div_ceil(left.div_ceil(most).max(1))
    }
}

impl JobSource for EpochJobs {
    type Job = BatchJob;

    fn next_job(&mut self) -> Option<(BatchJob, usize)> {
        if self.next >= self.indices.len() {
            return None;
        }
        let end = self.next + self.take();
        let indices = self.indices[self.next..end].to_vec();
        self.next = end;
        let n = indices.len();
        Some((
            BatchJob {
                batches: self.batches.clone(),
                indices,
            },
            n,
        ))
    }

    fn jobs_left(&self) -> Option<usize> {
        Some((self.indices.len() - self.next).div_ceil(self.per_job()))
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
        }
    }

    #[test]
    fn an_epoch_is_a_reproducible_permutation_cut_into_numbered_batches() {
        let seeds = Seeds::new((100..350).collect::<Vec<u64>>(), 1000).unwrap();
        let cut = |o: &EpochOptions, seed| {
            let e = EpochBatches::new(&seeds, seed, o);
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
    fn jobs_hand_out_the_selection_in_order() {
        let seeds = Seeds::all(100);
        let e = Arc::new(EpochBatches::new(&seeds, 0, &opts(10, true, 3, false)));
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
        let e = Arc::new(EpochBatches::new(&seeds, 0, &opts(10, false, 0, false)));
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
}
