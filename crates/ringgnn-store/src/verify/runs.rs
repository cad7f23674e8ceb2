//! The external sort behind `verify`'s check of the original ids and a link split by time
//! ([`crate::link`]): 16-byte `(u64, u64)` records sorted in memory when they fit the budget,
//! else sorted in runs written to a temporary directory and merged (in several passes when there
//! are more runs than merge buffers fit the budget).
//!
//! Run files are scratch files of a [`Temp`] directory made only when the first run is written:
//! unlinked as soon as they are created, so their space goes back when they are closed (even by
//! a crash), and the directory itself is removed when the sorter is dropped, on success, error
//! or interrupt alike. They are read and written with `O_DIRECT` where the filesystem allows:
//! each byte is written once and read once, so the page cache would only cost memory.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use ringgnn_io::{AlignedBuf, DirectFile, ALIGN};

use crate::progress::Progress;
use crate::temp::{Kind, Temp};
use crate::{Error, IoContext, Result};

/// Two words sorted as a pair: a sort key (an id, or its hash) and the node it belongs to, or a
/// held-out event's time and ends.
pub(crate) type Record = (u64, u64);

const RECORD: usize = 16;

/// How the budget is spent: records per in-memory run, bytes per run buffer while merging.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub run_records: usize,
    pub io_bytes: usize,
}

impl Sizes {
    /// Runs fill the whole budget; a merge gives each of its inputs and its output one buffer,
    /// 1/64 of the budget (at most 4 MiB, where reads are already sequential enough; at least a
    /// page), so one pass merges at least 63 runs: `ids < 63 * budget / 16` for one pass (a 1 GiB
    /// budget merges 4 billion ids in one pass, 250 billion in two).
    pub fn for_budget(bytes: u64) -> Sizes {
        Sizes {
            run_records: (bytes / RECORD as u64).max(2) as usize,
            io_bytes: ((bytes / 64) as usize).clamp(ALIGN, 4 << 20) / ALIGN * ALIGN,
        }
    }

    /// The bytes of the budget (what a run's records take).
    pub fn budget(&self) -> u64 {
        (self.run_records * RECORD) as u64
    }

    /// Runs one merge pass reads together.
    pub(crate) fn fan_in(&self) -> usize {
        (self.budget() as usize / self.io_bytes)
            .saturating_sub(1)
            .max(2)
    }
}

/// What a sort is called: its temporary directory's label, what its records are for the
/// progress stages ("the original ids") and their unit ("ids").
#[derive(Clone, Copy, Debug)]
pub(crate) struct SortName {
    pub label: &'static str,
    pub what: &'static str,
    pub unit: &'static str,
}

/// Records pushed in any order, handed back sorted.
pub(crate) struct Sorter {
    sizes: Sizes,
    buf: Vec<Record>,
    spill_parent: PathBuf,
    temp: Option<Temp>,
    runs: VecDeque<Run>,
    /// Bytes written to run files (what the disk saw), for the report.
    spilled_bytes: u64,
    name: SortName,
    /// Stale temporaries removed on the way, reported by [`Sorter::finish`].
    reclaimed: Vec<String>,
}

impl Sorter {
    /// `total` records (at most; it sizes the first buffer) will be pushed; runs go under
    /// `spill_parent` if they do not fit.
    pub fn new(sizes: Sizes, total: u64, spill_parent: &Path, name: SortName) -> Self {
        Sorter {
            sizes,
            buf: Vec::with_capacity(total.min(sizes.run_records as u64) as usize),
            spill_parent: spill_parent.to_path_buf(),
            temp: None,
            runs: VecDeque::new(),
            spilled_bytes: 0,
            name,
            reclaimed: Vec::new(),
        }
    }

    pub fn push(&mut self, r: Record) -> Result<()> {
        if self.buf.len() == self.sizes.run_records {
            self.spill()?;
        }
        self.buf.push(r);
        Ok(())
    }

    /// Sort the buffer and write it as a run.
    fn spill(&mut self) -> Result<()> {
        self.buf.sort_unstable();
        let mut w = self.writer()?;
        for &r in &self.buf {
            w.push(r)?;
        }
        self.buf.clear();
        let run = w.finish()?;
        self.spilled_bytes += run.bytes();
        self.runs.push_back(run);
        Ok(())
    }

    fn writer(&mut self) -> Result<RunWriter> {
        let temp = match &mut self.temp {
            Some(t) => t,
            None => {
                let t = Temp::create(&self.spill_parent, self.name.label, Kind::Dir)?;
                self.reclaimed
                    .extend(t.reclaimed().iter().map(ToString::to_string));
                self.temp.insert(t)
            }
        };
        RunWriter::new(temp.path(), self.sizes.io_bytes)
    }

    /// Hand every record to `each` in ascending order until it returns true (found what it
    /// looked for); returns the bytes written to disk. `stage` names the last pass (the one that
    /// calls `each`) in `progress`.
    pub fn finish(
        mut self,
        stage: &str,
        progress: &dyn Progress,
        each: &mut dyn FnMut(Record) -> Result<bool>,
    ) -> Result<u64> {
        for note in &self.reclaimed {
            progress.note(note);
        }
        if self.runs.is_empty() {
            self.buf.sort_unstable();
            for &r in &self.buf {
                if each(r)? {
                    break;
                }
            }
            return Ok(0);
        }
        if !self.buf.is_empty() {
            self.spill()?;
        }
        self.buf = Vec::new(); // the merge buffers take its place in the budget
        let fan_in = self.sizes.fan_in();
        while self.runs.len() > fan_in {
            let group: Vec<Run> = self.runs.drain(..fan_in).collect();
            let n = group.iter().map(|r| r.records).sum();
            let stage = format!("merge sorted runs of {}", self.name.what);
            progress.stage(&stage, Some(n), self.name.unit);
            let mut w = self.writer()?;
            merge(group, self.sizes.io_bytes, progress, &mut |r| {
                w.push(r).map(|()| false)
            })?;
            let run = w.finish()?;
            self.spilled_bytes += run.bytes();
            self.runs.push_back(run);
        }
        let total = self.runs.iter().map(|r| r.records).sum();
        progress.stage(stage, Some(total), self.name.unit);
        let runs = std::mem::take(&mut self.runs).into();
        merge(runs, self.sizes.io_bytes, progress, each)?;
        Ok(self.spilled_bytes)
    }
}

/// Merge sorted runs into `each` (until it returns true).
fn merge(
    runs: Vec<Run>,
    io_bytes: usize,
    progress: &dyn Progress,
    each: &mut dyn FnMut(Record) -> Result<bool>,
) -> Result<bool> {
    let mut readers: Vec<RunReader> = runs
        .into_iter()
        .map(|r| RunReader::new(r, io_bytes))
        .collect();
    let mut heap = BinaryHeap::with_capacity(readers.len());
    for (k, r) in readers.iter_mut().enumerate() {
        if let Some(x) = r.next()? {
            heap.push(Reverse((x, k)));
        }
    }
    let mut done = 0u64;
    // The smallest head is replaced in place (one sift down) rather than popped and pushed.
    while let Some(mut top) = heap.peek_mut() {
        let Reverse((x, k)) = *top;
        if each(x)? {
            return Ok(true);
        }
        match readers[k].next()? {
            Some(y) => *top = Reverse((y, k)),
            None => drop(PeekMut::pop(top)),
        }
        done += 1;
        if done.is_multiple_of(1 << 20) {
            progress.advance(1 << 20)?;
        }
    }
    progress.advance(done % (1 << 20))?;
    Ok(false)
}

/// A sorted run on disk: `records` records from offset 0, the last page zero-padded.
struct Run {
    file: DirectFile,
    path: PathBuf,
    records: u64,
}

impl Run {
    fn bytes(&self) -> u64 {
        (self.records * RECORD as u64).next_multiple_of(ALIGN as u64)
    }
}

struct RunWriter {
    file: DirectFile,
    path: PathBuf,
    buf: AlignedBuf,
    offset: u64,
    records: u64,
}

impl RunWriter {
    fn new(dir: &Path, io_bytes: usize) -> Result<Self> {
        let (file, path) = DirectFile::scratch(dir, "run").map_err(|(p, e)| Error::io(p, e))?;
        Ok(RunWriter {
            file,
            path,
            buf: AlignedBuf::new(io_bytes),
            offset: 0,
            records: 0,
        })
    }

    fn push(&mut self, (key, node): Record) -> Result<()> {
        let n = self.buf.len();
        if n == self.buf.capacity() {
            self.flush()?;
        }
        let n = self.buf.len();
        self.buf.set_len(n + RECORD);
        self.buf[n..n + 8].copy_from_slice(&key.to_le_bytes());
        self.buf[n + 8..n + RECORD].copy_from_slice(&node.to_le_bytes());
        self.records += 1;
        Ok(())
    }

    /// Write the buffer, zero-padded to a page (only the last write of a run is partial: the
    /// capacity is a multiple of the page size, which is a multiple of 16).
    fn flush(&mut self) -> Result<()> {
        let n = self.buf.len();
        let padded = n.next_multiple_of(ALIGN);
        self.buf.set_len(padded);
        self.buf[n..].fill(0);
        self.file
            .write_all_at(&self.buf, self.offset)
            .at(&self.path)?;
        self.offset += padded as u64;
        self.buf.set_len(0);
        Ok(())
    }

    fn finish(mut self) -> Result<Run> {
        if !self.buf.is_empty() {
            self.flush()?;
        }
        Ok(Run {
            file: self.file,
            path: self.path,
            records: self.records,
        })
    }
}

struct RunReader {
    run: Run,
    buf: AlignedBuf,
    /// Where the next read starts, and the records not read from the file yet.
    offset: u64,
    left: u64,
    pos: usize,
}

impl RunReader {
    fn new(run: Run, io_bytes: usize) -> Self {
        RunReader {
            left: run.records,
            run,
            buf: AlignedBuf::new(io_bytes),
            offset: 0,
            pos: 0,
        }
    }

    fn next(&mut self) -> Result<Option<Record>> {
        if self.pos == self.buf.len() {
            if self.left == 0 {
                return Ok(None);
            }
            let n = (self.left * RECORD as u64).min(self.buf.capacity() as u64) as usize;
            let padded = n.next_multiple_of(ALIGN);
            self.buf.set_len(padded);
            self.run
                .file
                .file()
                .read_exact_at(&mut self.buf, self.offset)
                .at(&self.run.path)?;
            self.buf.set_len(n);
            self.offset += padded as u64;
            self.left -= (n / RECORD) as u64;
            self.pos = 0;
        }
        let b = &self.buf[self.pos..self.pos + RECORD];
        self.pos += RECORD;
        Ok(Some((
            u64::from_le_bytes(b[..8].try_into().unwrap()),
            u64::from_le_bytes(b[8..].try_into().unwrap()),
        )))
    }
}
