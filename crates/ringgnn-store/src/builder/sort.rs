//! Pass 2 of the builder ([`super`]): the spilled buckets grouped up to the memory budget
//! ([`plan`]), loaded, radix-sorted on worker threads and emitted in order as CSC; a bucket too
//! large for memory re-partitioned on finer key ranges ([`repartition`]); or, when the whole
//! graph fit one buffer in pass 1, that buffer bucketed and sorted ([`sort_in_memory`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use ringgnn_io::AlignedBuf;

use super::emit::CscEmitter;
use super::key::Key;
use super::spill::{self, Spill, FANOUT, FANOUT_BITS};
use crate::progress::Progress;
use crate::{Error, Result};

/// A unit of pass-2 work: buckets `[lo, hi)` that fit in memory together, or one bucket that
/// does not and must be re-partitioned.
#[derive(Clone, Copy)]
enum Task {
    Group(usize, usize),
    Oversized(usize),
}

fn plan<K: Key>(spill: &Spill<K>, cap: usize) -> Vec<Task> {
    let mut tasks = Vec::new();
    let mut lo = 0;
    let mut acc = 0u64;
    for b in 0..FANOUT {
        let n = spill.count(b, b + 1);
        if n > cap as u64 {
            if lo < b && acc > 0 {
                tasks.push(Task::Group(lo, b));
            }
            tasks.push(Task::Oversized(b));
            lo = b + 1;
            acc = 0;
        } else if acc + n > cap as u64 {
            tasks.push(Task::Group(lo, b));
            lo = b;
            acc = n;
        } else {
            acc += n;
        }
    }
    if acc > 0 {
        tasks.push(Task::Group(lo, FANOUT));
    }
    tasks
}

/// Emit sorted keys (dedup drops repeats within the slice; slices never share keys).
fn emit_sorted<K: Key>(em: &mut CscEmitter, keys: &[K]) -> Result<()> {
    em.sorted(keys)
}

/// The whole graph is in `buf`: bucket it, sort the buckets on `workers` threads, emit.
pub(super) fn sort_in_memory<K: Key>(
    spill: &Spill<K>,
    buf: Vec<K>,
    mut em: CscEmitter,
    dedup: bool,
    workers: usize,
    progress: &dyn Progress,
) -> Result<CscEmitter> {
    let mut keys = vec![K::default(); buf.len()];
    let starts = spill::bucketize(&buf, &mut keys, spill.base, spill.shift);
    drop(buf);
    // Split the buckets into `workers` ranges of about equal key counts, sort each on its own thread.
    let per = keys.len().div_ceil(workers.max(1)).max(1);
    let mut cuts = vec![0usize];
    for (b, &start) in starts.iter().enumerate().take(FANOUT).skip(1) {
        if start >= cuts.len() * per && *cuts.last().unwrap() < b {
            cuts.push(b);
        }
    }
    cuts.push(FANOUT);
    std::thread::scope(|s| {
        let mut rest: &mut [K] = &mut keys;
        let mut offset = 0;
        for w in cuts.windows(2) {
            let (part, tail) = rest.split_at_mut(starts[w[1]] - offset);
            rest = tail;
            let local: Vec<usize> = starts[w[0]..=w[1]].iter().map(|x| x - offset).collect();
            offset = starts[w[1]];
            s.spawn(move || spill::sort_buckets(part, &local));
        }
    });
    if dedup {
        keys.dedup();
    }
    for piece in keys.chunks(1 << 22) {
        emit_sorted(&mut em, piece)?;
        progress.advance(piece.len() as u64)?;
    }
    Ok(em)
}

pub(super) fn sort_and_emit<K: Key>(
    spill: &Spill<K>,
    emitter: CscEmitter,
    dedup: bool,
    workers: usize,
    cap: usize,
    scratch: &Path,
    progress: &dyn Progress,
) -> Result<CscEmitter> {
    let tasks = plan(spill, cap);
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    // (index of the task whose turn it is to emit, the emitter)
    let state = Mutex::new((0usize, emitter));
    let turn_changed = Condvar::new();
    let first_error: Mutex<Option<Error>> = Mutex::new(None);

    let wait_turn = |i: usize| -> Option<std::sync::MutexGuard<'_, (usize, CscEmitter)>> {
        let mut g = state.lock().unwrap();
        while g.0 != i {
            if failed.load(Ordering::Relaxed) {
                return None;
            }
            g = turn_changed.wait(g).unwrap();
        }
        Some(g)
    };
    let worker = || {
        let mut buf: Vec<K> = Vec::new();
        let mut sorted: Vec<K> = Vec::new();
        let mut bounce = AlignedBuf::new(spill::BOUNCE);
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= tasks.len() || failed.load(Ordering::Relaxed) {
                return;
            }
            let r = (|| -> Result<()> {
                match tasks[i] {
                    Task::Group(lo, hi) => {
                        let starts =
                            spill.load_bucketed(lo, hi, &mut buf, &mut sorted, &mut bounce)?;
                        spill::sort_buckets(&mut sorted, &starts);
                        if dedup {
                            sorted.dedup();
                        }
                        let Some(mut g) = wait_turn(i) else {
                            return Ok(());
                        };
                        emit_sorted(&mut g.1, &sorted)?;
                        g.0 += 1;
                        progress.advance(spill.count(lo, hi))?;
                    }
                    Task::Oversized(b) => {
                        let Some(mut g) = wait_turn(i) else {
                            return Ok(());
                        };
                        let path = scratch.join(format!("sub.{b}"));
                        repartition(spill, b, &path, &mut g.1, dedup, cap, &mut buf, &mut bounce)?;
                        g.0 += 1;
                        progress.advance(spill.count(b, b + 1))?;
                    }
                }
                Ok(())
            })();
            if let Err(e) = r {
                failed.store(true, Ordering::Relaxed);
                first_error.lock().unwrap().get_or_insert(e);
            }
            turn_changed.notify_all();
        }
    };
    std::thread::scope(|s| {
        for _ in 1..workers.min(tasks.len().max(1)) {
            s.spawn(worker);
        }
        worker();
    });
    if let Some(e) = first_error.into_inner().unwrap() {
        return Err(e);
    }
    Ok(state.into_inner().unwrap().1)
}

/// Split bucket `b` of `parent` on finer key ranges and emit it, recursing while a sub-bucket
/// is still too big. A bucket whose range is a single key holds copies of one edge: it is
/// emitted without loading it.
#[allow(clippy::too_many_arguments)] // recursion state; a struct would only rename it
fn repartition<K: Key>(
    parent: &Spill<K>,
    b: usize,
    path: &Path,
    em: &mut CscEmitter,
    dedup: bool,
    cap: usize,
    buf: &mut Vec<K>,
    bounce: &mut AlignedBuf,
) -> Result<()> {
    let base = parent.base.add(K::bucket_base(b as u64, parent.shift));
    if parent.shift == 0 {
        let n = parent.count(b, b + 1);
        return em.edges(base, if dedup { 1 } else { n });
    }
    let mut sub = Spill::<K>::create(path, base, parent.shift.saturating_sub(FANOUT_BITS))?;
    let mut sorted = spill::key_buffer::<K>(cap / 2);
    parent.for_each_piece(b, cap / 2, buf, bounce, |piece| {
        sub.flush(piece, &mut sorted)
    })?;
    drop(sorted);
    for task in plan(&sub, cap) {
        match task {
            Task::Group(lo, hi) => {
                let mut sorted = Vec::new();
                let starts = sub.load_bucketed(lo, hi, buf, &mut sorted, bounce)?;
                spill::sort_buckets(&mut sorted, &starts);
                if dedup {
                    sorted.dedup();
                }
                emit_sorted(em, &sorted)?;
            }
            Task::Oversized(sb) => {
                // The recursion is a tree: extending the parent's name keeps names unique.
                let p = PathBuf::from(format!("{}.{sb}", path.display()));
                repartition(&sub, sb, &p, em, dedup, cap, buf, bounce)?;
            }
        }
    }
    Ok(())
}
