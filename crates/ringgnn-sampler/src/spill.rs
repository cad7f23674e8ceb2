//! [`SpillFile`]: the finished samples of a hyperbatch written to disk as each batch completes,
//! and read back one at a time in batch order, so that a hyperbatch holds only the state of its
//! batches still being sampled (their frontiers and positions), not every finished sample until
//! the consumer takes it (issue 9: "when even the finished samples of a useful H do not fit,
//! spill them sequentially").
//!
//! The file is created in a directory the caller chooses (on the SSD) and unlinked at once, so
//! nothing is left behind whatever happens; it is written and read with `O_DIRECT` where the
//! filesystem allows, so spilled samples do not go through the page cache the memory budget
//! counts. Each record starts at a page boundary; records are reserved with one atomic add, so
//! threads write theirs concurrently, each sequentially, in pieces of [`SPILL_BUFFER`]. The
//! pieces are written behind: a writing thread fills a buffer from the file's small pool and hands
//! it to the file's own writer thread, which writes it and gives it back, so serializing the next
//! piece (and relabelling the next batch) overlaps the device's write. [`SpillFile::sync`] waits
//! for every write and reports the first error.
//!
//! A record, in this process's byte order (the file never outlives it): a header of 64-bit words
//! (`MAGIC`, the lengths of `node`, `row`, `counts`, `edge` (`u64::MAX`: none), the hop count
//! `k`, then `num_sampled_nodes` (k + 1 words) and `num_sampled_edges` (k words)), then `node`
//! and `edge` (64-bit), `row` and `counts` (32-bit), zero-padded to a whole page. A record of
//! arrays of words ([`SpillFile::write_words`], what the typed sampler's samples are written as:
//! `hetero/record.rs`): `WORDS_MAGIC`, the number of arrays, their lengths, then the arrays.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Condvar, Mutex};

use ringgnn_io::{AlignedBuf, DirectFile, ALIGN};

use crate::output::CompactSample;
use crate::{Error, Result};

/// Bytes of each write buffer and of a read buffer: the unit of spill I/O.
pub const SPILL_BUFFER: usize = 1 << 20;

/// Write buffers of a spill file (filled by the writing threads, written behind by its writer
/// thread): [`SpillFile::BUFFER_BYTES`] in all.
const WRITE_BUFFERS: usize = 4;

const MAGIC: u64 = 0x3152_4c49_5053_4752; // "RGSPILR1"
const WORDS_MAGIC: u64 = 0x3157_4c49_5053_4752; // "RGSPILW1"

/// Where one spilled sample is in its [`SpillFile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spilled {
    offset: u64,
    bytes: u64,
}

impl Spilled {
    /// Bytes of the record (before padding).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// What the writing threads and the writer thread share: the free buffers, the writes queued
/// or in progress, and the first write error.
#[derive(Default)]
struct Behind {
    state: Mutex<BehindState>,
    changed: Condvar,
}

#[derive(Default)]
struct BehindState {
    free: Vec<AlignedBuf>,
    pending: usize,
    error: Option<io::Error>,
}

impl Behind {
    fn lock(&self) -> std::sync::MutexGuard<'_, BehindState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first write error, as a new error of the same errno (or kind and message) (the
    /// original stays, so every later call reports it too). The errno is what gives the error
    /// its class and `errno` in Python (`EFBIG`, `ENOSPC`).
    fn failed(st: &BehindState) -> Option<io::Error> {
        st.error.as_ref().map(|e| match e.raw_os_error() {
            Some(code) => io::Error::from_raw_os_error(code),
            None => io::Error::new(e.kind(), e.to_string()),
        })
    }

    /// A free buffer, waiting for one; the first write error instead, if any.
    fn take(&self) -> io::Result<AlignedBuf> {
        let mut st = self.lock();
        loop {
            if let Some(e) = Self::failed(&st) {
                return Err(e);
            }
            if let Some(b) = st.free.pop() {
                return Ok(b);
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Give a buffer back to the pool.
    fn give(&self, mut b: AlignedBuf) {
        b.set_len(0);
        self.lock().free.push(b);
        self.changed.notify_all();
    }
}

/// A spill file for finished samples; see the module docs.
pub struct SpillFile {
    file: Arc<DirectFile>,
    path: PathBuf,
    /// The next free offset (page-aligned).
    end: AtomicU64,
    written: AtomicU64,
    read: AtomicU64,
    behind: Arc<Behind>,
    /// To the writer thread: a filled buffer and where it goes.
    queue: Option<SyncSender<(AlignedBuf, u64)>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        // The writer thread ends once the queue is closed and what it holds is written.
        self.queue.take();
        if let Some(t) = self.writer.take() {
            let _ = t.join();
        }
    }
}

impl SpillFile {
    /// A new, already unlinked spill file in `dir`.
    pub fn create(dir: &Path) -> Result<Self> {
        let (file, path) = DirectFile::scratch(dir, ".ringgnn-spill")
            .map_err(|(path, source)| Error::Io { path, source })?;
        Self::with_file(file, path)
    }

    /// A spill file writing to `file` (open for reading and writing), named `path` in messages.
    fn with_file(file: DirectFile, path: PathBuf) -> Result<Self> {
        let file = Arc::new(file);
        let behind = Arc::new(Behind::default());
        behind.lock().free = (0..WRITE_BUFFERS)
            .map(|_| AlignedBuf::new(SPILL_BUFFER))
            .collect();
        let (queue, jobs) = sync_channel::<(AlignedBuf, u64)>(WRITE_BUFFERS);
        let (f, b) = (file.clone(), behind.clone());
        let writer = std::thread::Builder::new()
            .name("ringgnn-spill".into())
            .spawn(move || {
                for (buf, at) in jobs {
                    let r = f.write_all_at(&buf, at);
                    let mut st = b.lock();
                    if let (Err(e), None) = (r, &st.error) {
                        st.error = Some(e);
                    }
                    st.pending -= 1;
                    drop(st);
                    b.give(buf);
                }
            })
            .map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
        Ok(SpillFile {
            file,
            path,
            end: AtomicU64::new(0),
            written: AtomicU64::new(0),
            read: AtomicU64::new(0),
            behind,
            queue: Some(queue),
            writer: Some(writer),
        })
    }

    /// Bytes of the write buffers (allocated with the file).
    pub const BUFFER_BYTES: u64 = (WRITE_BUFFERS * SPILL_BUFFER) as u64;

    /// Wait until every record written so far is on disk (or in the page cache, where the file
    /// system refuses `O_DIRECT`); the first write error, naming the file, if one failed.
    pub fn sync(&self) -> Result<()> {
        let mut st = self.behind.lock();
        while st.pending > 0 {
            st = self
                .behind
                .changed
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
        match Behind::failed(&st) {
            Some(e) => Err(self.io_err(e)),
            None => Ok(()),
        }
    }

    /// Where the file was (it is unlinked), for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether reads and writes bypass the page cache.
    pub fn is_direct(&self) -> bool {
        self.file.is_direct()
    }

    /// Start over at the beginning of the file: every record written so far is given up (the
    /// caller has read them all). The file keeps the size of the largest hyperbatch.
    pub fn rewind(&mut self) {
        *self.end.get_mut() = 0;
    }

    /// Bytes written and read so far (padding included).
    pub fn traffic(&self) -> (u64, u64) {
        (
            self.written.load(Ordering::Relaxed),
            self.read.load(Ordering::Relaxed),
        )
    }

    fn io_err(&self, source: io::Error) -> Error {
        Error::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Write `s` as a new record, behind: when this returns, `s` may be dropped, but the record
    /// is on disk, and readable, only after [`Self::sync`].
    pub fn write(&self, s: &CompactSample) -> Result<Spilled> {
        let header = header(s);
        let bytes = 8 * header.len() as u64 + s.len_bytes();
        let padded = bytes.div_ceil(ALIGN as u64) * ALIGN as u64;
        let offset = self.end.fetch_add(padded, Ordering::Relaxed);
        let mut w = Writer {
            file: self,
            buf: None,
            at: offset,
        };
        w.put(bytemuck::cast_slice(&header))
            .and_then(|_| w.put(bytemuck::cast_slice(&s.node)))
            .and_then(|_| w.put(bytemuck::cast_slice(s.edge.as_deref().unwrap_or(&[]))))
            .and_then(|_| w.put(bytemuck::cast_slice(&s.row)))
            .and_then(|_| w.put(bytemuck::cast_slice(&s.counts)))
            .and_then(|_| w.flush())
            .map_err(|e| self.io_err(e))?;
        self.written.fetch_add(padded, Ordering::Relaxed);
        Ok(Spilled { offset, bytes })
    }

    /// Write `arrays` as a new record of words, behind (as [`Self::write`]); read back by
    /// [`Self::read_words`].
    pub fn write_words(&self, arrays: &[&[u64]]) -> Result<Spilled> {
        let mut header = vec![WORDS_MAGIC, arrays.len() as u64];
        header.extend(arrays.iter().map(|a| a.len() as u64));
        let words = header.len() + arrays.iter().map(|a| a.len()).sum::<usize>();
        let bytes = 8 * words as u64;
        let padded = bytes.div_ceil(ALIGN as u64) * ALIGN as u64;
        let offset = self.end.fetch_add(padded, Ordering::Relaxed);
        let mut w = Writer {
            file: self,
            buf: None,
            at: offset,
        };
        std::iter::once(header.as_slice())
            .chain(arrays.iter().copied())
            .try_for_each(|a| w.put(bytemuck::cast_slice(a)))
            .and_then(|_| w.flush())
            .map_err(|e| self.io_err(e))?;
        self.written.fetch_add(padded, Ordering::Relaxed);
        Ok(Spilled { offset, bytes })
    }

    /// Read the record of words `r` back (its arrays in the order written), through `buf` (a
    /// [`SPILL_BUFFER`]).
    pub fn read_words(&self, r: Spilled, buf: &mut AlignedBuf) -> Result<Vec<Vec<u64>>> {
        let (mut rd, padded) = self.reader(r, buf);
        let damaged = || self.damaged(r, "does not have the layout it was written with");
        let mut head = [0u64; 2];
        rd.take(bytemuck::cast_slice_mut(&mut head))
            .map_err(|e| self.io_err(e))?;
        let [magic, n] = head;
        if magic != WORDS_MAGIC || n.saturating_add(2).saturating_mul(8) > r.bytes {
            return Err(damaged());
        }
        let mut lens = vec![0u64; n as usize];
        rd.take(bytemuck::cast_slice_mut(&mut lens))
            .map_err(|e| self.io_err(e))?;
        let words = lens
            .iter()
            .try_fold(n + 2, |a, &l| a.checked_add(l))
            .and_then(|w| w.checked_mul(8));
        if words != Some(r.bytes) {
            return Err(damaged());
        }
        let mut out = Vec::with_capacity(lens.len());
        for &l in &lens {
            let mut a = vec![0u64; l as usize];
            rd.take(bytemuck::cast_slice_mut(&mut a))
                .map_err(|e| self.io_err(e))?;
            out.push(a);
        }
        self.read.fetch_add(padded, Ordering::Relaxed);
        Ok(out)
    }

    /// A reader of record `r` through `buf` (emptied), and the record's padded length.
    fn reader<'a>(&'a self, r: Spilled, buf: &'a mut AlignedBuf) -> (Reader<'a>, u64) {
        let padded = r.bytes.div_ceil(ALIGN as u64) * ALIGN as u64;
        buf.set_len(0);
        let rd = Reader {
            file: &self.file,
            buf,
            at: r.offset,
            end: r.offset + padded,
            pos: 0,
        };
        (rd, padded)
    }

    fn damaged(&self, r: Spilled, what: &str) -> Error {
        Error::Corrupt(format!(
            "spill file {}: record at byte {} {what}; the disk or the file system gave back \
             other bytes than were written",
            self.path.display(),
            r.offset
        ))
    }

    /// Read record `r` back, through `buf` (a [`SPILL_BUFFER`]).
    pub fn read(&self, r: Spilled, buf: &mut AlignedBuf) -> Result<CompactSample> {
        let (mut rd, padded) = self.reader(r, buf);
        let damaged = |what: &str| self.damaged(r, what);
        let mut head = [0u64; 6];
        rd.take(bytemuck::cast_slice_mut(&mut head))
            .map_err(|e| self.io_err(e))?;
        let [magic, nodes, rows, counts, edges, hops] = head;
        let e = if edges == u64::MAX { 0 } else { edges };
        let size = (hops.saturating_mul(2).saturating_add(7))
            .saturating_add(nodes)
            .saturating_add(e)
            .saturating_mul(8)
            .saturating_add(rows.saturating_add(counts).saturating_mul(4));
        if magic != MAGIC || size != r.bytes {
            return Err(damaged("does not have the layout it was written with"));
        }
        let usize_of = |x: u64| usize::try_from(x).map_err(|_| damaged("is too large"));
        let mut sizes = vec![0u64; 2 * usize_of(hops)? + 1];
        let mut s = CompactSample {
            node: vec![0; usize_of(nodes)?],
            row: vec![0; usize_of(rows)?],
            counts: vec![0; usize_of(counts)?],
            edge: (edges != u64::MAX)
                .then(|| usize_of(edges).map(|n| vec![0; n]))
                .transpose()?,
            num_sampled_nodes: Vec::new(),
            num_sampled_edges: Vec::new(),
        };
        rd.take(bytemuck::cast_slice_mut(&mut sizes))
            .and_then(|_| rd.take(bytemuck::cast_slice_mut(&mut s.node)))
            .and_then(|_| match &mut s.edge {
                Some(e) => rd.take(bytemuck::cast_slice_mut(e)),
                None => Ok(()),
            })
            .and_then(|_| rd.take(bytemuck::cast_slice_mut(&mut s.row)))
            .and_then(|_| rd.take(bytemuck::cast_slice_mut(&mut s.counts)))
            .map_err(|e| self.io_err(e))?;
        let k = usize_of(hops)?;
        s.num_sampled_nodes = sizes[..k + 1].iter().map(|&x| x as usize).collect();
        s.num_sampled_edges = sizes[k + 1..].iter().map(|&x| x as usize).collect();
        self.read.fetch_add(padded, Ordering::Relaxed);
        Ok(s)
    }
}

/// The header words of `s` (see the module docs).
fn header(s: &CompactSample) -> Vec<u64> {
    let mut h = vec![
        MAGIC,
        s.node.len() as u64,
        s.row.len() as u64,
        s.counts.len() as u64,
        s.edge.as_ref().map_or(u64::MAX, |e| e.len() as u64),
        s.num_sampled_edges.len() as u64,
    ];
    h.extend(s.num_sampled_nodes.iter().map(|&x| x as u64));
    h.extend(s.num_sampled_edges.iter().map(|&x| x as u64));
    h
}

/// Appends bytes to a record, handing each buffer to the writer thread when it fills.
struct Writer<'a> {
    file: &'a SpillFile,
    /// The buffer being filled (taken from the pool when the first byte comes).
    buf: Option<AlignedBuf>,
    /// Where the buffer's first byte goes.
    at: u64,
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        // A buffer not handed over (an error on the way) goes back to the pool.
        if let Some(b) = self.buf.take() {
            self.file.behind.give(b);
        }
    }
}

impl Writer<'_> {
    fn put(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            if self.buf.is_none() {
                self.buf = Some(self.file.behind.take()?);
            }
            let buf = self.buf.as_mut().expect("taken above");
            let (len, cap) = (buf.len(), buf.capacity());
            let n = bytes.len().min(cap - len);
            buf.spare()[len..len + n].copy_from_slice(&bytes[..n]);
            buf.set_len(len + n);
            bytes = &bytes[n..];
            if len + n == cap {
                self.hand_over()?;
            }
        }
        Ok(())
    }

    /// Queue the buffer for the writer thread.
    fn hand_over(&mut self) -> io::Result<()> {
        let buf = self.buf.take().expect("a buffer to hand over");
        let n = buf.len() as u64;
        self.file.behind.lock().pending += 1;
        let queue = self.file.queue.as_ref().expect("open until dropped");
        if let Err(back) = queue.send((buf, self.at)) {
            // The writer thread is gone (it panicked): nothing more can be written.
            self.file.behind.lock().pending -= 1;
            self.file.behind.give(back.0 .0);
            return Err(io::Error::other("the spill file's writer thread stopped"));
        }
        self.at += n;
        Ok(())
    }

    /// Hand over what is left, zero-padded to a whole page.
    fn flush(&mut self) -> io::Result<()> {
        let Some(buf) = self.buf.as_mut() else {
            return Ok(());
        };
        let len = buf.len();
        let padded = len.div_ceil(ALIGN) * ALIGN;
        buf.spare()[len..padded].fill(0);
        buf.set_len(padded);
        self.hand_over()
    }
}

/// Takes bytes from a record, reading it in buffer-sized pieces.
struct Reader<'a> {
    file: &'a DirectFile,
    buf: &'a mut AlignedBuf,
    /// The file offset of the next piece, and the end of the (padded) record.
    at: u64,
    end: u64,
    /// Bytes of the buffer already taken.
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, mut dst: &mut [u8]) -> io::Result<()> {
        while !dst.is_empty() {
            if self.pos == self.buf.len() {
                let n = (self.end - self.at).min(self.buf.capacity() as u64) as usize;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "spilled record ends early",
                    ));
                }
                self.buf.set_len(n);
                self.file.file().read_exact_at(&mut self.buf[..], self.at)?;
                self.at += n as u64;
                self.pos = 0;
            }
            let n = dst.len().min(self.buf.len() - self.pos);
            dst[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            dst = &mut dst[n..];
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize, edges: bool) -> CompactSample {
        CompactSample {
            node: (0..n as u64).map(|x| x * 7 + 3).collect(),
            row: (0..2 * n as u32).rev().collect(),
            counts: vec![2; n],
            edge: edges.then(|| (0..2 * n as u64).map(|x| x << 33).collect()),
            num_sampled_nodes: vec![1, n - 1, 0],
            num_sampled_edges: vec![n, n],
        }
    }

    #[test]
    fn records_read_back_equal_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let f = SpillFile::create(dir.path()).unwrap();
        // The file is unlinked at once.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // A small read buffer (one page) reads records in many pieces; sizes straddle pages, and
        // the 2.4 MB record spans three write buffers.
        let mut buf = AlignedBuf::new(ALIGN);
        let samples = [
            sample(1, false),
            sample(1000, true),
            sample(300_000, false),
            sample(513, true),
        ];
        let recs: Vec<Spilled> = samples.iter().map(|s| f.write(s).unwrap()).collect();
        f.sync().unwrap();
        for (s, r) in samples.iter().zip(&recs).rev() {
            assert_eq!(&f.read(*r, &mut buf).unwrap(), s);
        }
        let (w, rd) = f.traffic();
        assert_eq!(w, rd);
        assert!(w.is_multiple_of(ALIGN as u64));
        // Rewound, the space is reused.
        let mut f = f;
        f.rewind();
        let again = f.write(&samples[3]).unwrap();
        f.sync().unwrap();
        assert_eq!(again.offset, 0);
        assert_eq!(f.read(again, &mut buf).unwrap(), samples[3]);
    }

    /// EBADF: writing through a file opened read-only.
    fn libc_ebadf() -> i32 {
        9
    }

    #[test]
    fn a_failed_write_behind_is_reported_by_sync_and_by_later_writes() {
        // A file the writer thread cannot write (opened read-only): every write fails there.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("spill");
        std::fs::write(&p, b"").unwrap();
        let f = SpillFile::with_file(DirectFile::open(&p).unwrap(), p.clone()).unwrap();
        // Handing the record over succeeds; the write itself fails behind.
        f.write(&sample(10, false)).unwrap();
        let e = f.sync().unwrap_err();
        // Its errno too (EBADF here), which gives it its class and `errno` in Python.
        assert!(
            matches!(&e, Error::Io { source, .. } if source.raw_os_error() == Some(libc_ebadf())),
            "{e}"
        );
        let e = e.to_string();
        assert!(e.contains(&p.display().to_string()), "{e}");
        // Reported again, by sync and by the next write (which waits for a buffer first).
        assert!(f.sync().is_err());
        let e = f.write(&sample(10, false)).unwrap_err().to_string();
        assert!(e.contains(&p.display().to_string()), "{e}");
        // Nothing is left pending, and dropping the file ends its writer thread.
        drop(f);
    }

    #[test]
    fn records_of_words_read_back_equal_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let f = SpillFile::create(dir.path()).unwrap();
        let mut buf = AlignedBuf::new(ALIGN);
        let big: Vec<u64> = (0..300_000u64).map(|x| x * 3).collect();
        let records: [Vec<Vec<u64>>; 3] = [
            vec![],
            vec![vec![1, 2, 3], vec![], big.clone()],
            vec![vec![u64::MAX; 513]],
        ];
        let spilled: Vec<Spilled> = records
            .iter()
            .map(|r| f.write_words(&r.iter().map(Vec::as_slice).collect::<Vec<_>>()))
            .collect::<Result<_>>()
            .unwrap();
        // A sample record beside them.
        let s = f.write(&sample(10, true)).unwrap();
        f.sync().unwrap();
        for (r, at) in records.iter().zip(&spilled).rev() {
            assert_eq!(&f.read_words(*at, &mut buf).unwrap(), r);
        }
        assert_eq!(f.read(s, &mut buf).unwrap(), sample(10, true));
        // Each kind refuses the other's record.
        let e = f.read(spilled[1], &mut buf).unwrap_err().to_string();
        assert!(e.contains("layout"), "{e}");
        let e = f.read_words(s, &mut buf).unwrap_err().to_string();
        assert!(e.contains("layout"), "{e}");
    }

    #[test]
    fn a_damaged_record_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = SpillFile::create(dir.path()).unwrap();
        let mut buf = AlignedBuf::new(SPILL_BUFFER);
        let r = f.write(&sample(50, false)).unwrap();
        f.sync().unwrap();
        // Overwrite the record's first page with zeros.
        let mut zero = AlignedBuf::new(ALIGN);
        zero.set_len(ALIGN);
        zero.fill(0);
        f.file.write_all_at(&zero, r.offset).unwrap();
        let e = f.read(r, &mut buf).unwrap_err().to_string();
        assert!(e.contains(".ringgnn-spill-") && e.contains("layout"), "{e}");
        // A record past the end of the file: a short read, named too.
        let past = Spilled {
            offset: 1 << 20,
            bytes: 100,
        };
        let e = f.read(past, &mut buf).unwrap_err().to_string();
        assert!(e.contains(".ringgnn-spill-"), "{e}");
    }
}
