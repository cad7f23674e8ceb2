//! The io_uring read backend: one ring per [`UringBatch`], up to `depth` reads in flight, every
//! completion checked (errors keep their errno, short reads are resubmitted, `EINTR`/`EAGAIN`
//! are retried, a read that hits the end of the file is an `UnexpectedEof` error).
//!
//! A ring belongs to the process that created it: create backends lazily, after any fork (the
//! sampler makes one per worker thread). A `UringBatch` used in a forked child returns an error
//! instead of sharing the parent's ring.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use io_uring::{opcode, types, IoUring};

use crate::read_batch::{check_request, eof_error, is_direct, IoStats, ReadBatch, ReadReq};
use crate::ALIGN;

/// Reads in flight per ring unless told otherwise: enough to keep an NVMe SSD's queue busy
/// (random 4 KiB reads saturate around QD 64-128), small enough that the ring's memory is a few
/// pages.
pub const DEFAULT_DEPTH: u32 = 128;

/// Set to a number of milliseconds to create rings with kernel submission polling (`SQPOLL`),
/// the poller thread sleeping after that long idle: an experiment (docs/benchmarks.md).
pub const SQPOLL_ENV: &str = "RINGGNN_URING_SQPOLL";

/// The largest depth accepted (the kernel's limit on submission queue entries).
pub const MAX_DEPTH: u32 = 32768;

/// The kernel caps one read at MAX_RW_COUNT (2 GiB - 4 KiB); longer requests go in chunks of
/// this size, a multiple of [`ALIGN`] so that O_DIRECT chunks stay aligned.
const MAX_CHUNK: usize = 0x7fff_f000;

/// A [`ReadBatch`] on one file through its own io_uring ring.
pub struct UringBatch {
    ring: IoUring,
    file: File,
    /// The file is registered at index 0 of the ring's file table (saves an fd lookup per read).
    fixed: bool,
    /// The ring was made with kernel submission polling ([`SQPOLL_ENV`]).
    sqpoll: bool,
    direct: bool,
    depth: usize,
    /// MAX_CHUNK, smaller in tests to exercise the resubmission of partial reads.
    max_chunk: usize,
    pid: u32,
    stats: IoStats,
    /// Bytes done so far per request of the current batch (reused between batches).
    done: Vec<usize>,
    /// Requests to (re)submit before new ones: short reads and EINTR/EAGAIN results.
    retry: Vec<usize>,
    /// The buffer registered as fixed buffer 0 (address, length), if any.
    registered: Option<(usize, usize)>,
}

impl UringBatch {
    /// A backend with [`DEFAULT_DEPTH`] reads in flight.
    pub fn new(file: File) -> io::Result<Self> {
        Self::with_depth(file, DEFAULT_DEPTH)
    }

    /// A backend with up to `depth` reads in flight (1 ..= [`MAX_DEPTH`]). A file opened with
    /// `O_DIRECT` (e.g. [`crate::DirectFile::into_file`]) makes every request subject to the
    /// O_DIRECT alignment rules, checked before any read is issued.
    pub fn with_depth(file: File, depth: u32) -> io::Result<Self> {
        if !(1..=MAX_DEPTH).contains(&depth) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("io_uring queue depth {depth} is outside 1..={MAX_DEPTH}"),
            ));
        }
        // The completion queue is twice the submission queue (the default), and at most `depth`
        // reads are ever in flight, so completions can never overflow.
        let sqpoll = std::env::var(SQPOLL_ENV)
            .ok()
            .and_then(|v| v.parse::<u32>().ok());
        let ring = match sqpoll {
            // Kernel submission polling (RingSampler's future work): measured in
            // docs/benchmarks.md, only on request.
            Some(idle_ms) => IoUring::builder().setup_sqpoll(idle_ms).build(depth)?,
            None => IoUring::new(depth)?,
        };
        let fixed = ring.submitter().register_files(&[file.as_raw_fd()]).is_ok();
        Ok(UringBatch {
            ring,
            direct: is_direct(&file),
            file,
            fixed,
            sqpoll: sqpoll.is_some(),
            depth: depth as usize,
            max_chunk: MAX_CHUNK,
            pid: std::process::id(),
            stats: IoStats::default(),
            done: Vec::new(),
            retry: Vec::new(),
            registered: None,
        })
    }

    /// Reads in flight at most.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Whether the file was opened with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Queue a read of `len` bytes at `offset` into `dst`, tagged with `user_data`.
    ///
    /// # Safety
    ///
    /// `dst .. dst + len` must stay valid for writes, and not be read or written by anyone else,
    /// until the completion carrying `user_data` has been reaped: the kernel writes into it
    /// asynchronously. (Buffers must outlive the operation.)
    unsafe fn push_read(&mut self, dst: *mut u8, len: u32, offset: u64, user_data: u64) {
        let at = dst as usize;
        let in_registered = self
            .registered
            .is_some_and(|(b, l)| at >= b && at + len as usize <= b + l);
        let fd = self.file.as_raw_fd();
        let entry = match (in_registered, self.fixed) {
            (true, true) => opcode::ReadFixed::new(types::Fixed(0), dst, len, 0)
                .offset(offset)
                .build(),
            (true, false) => opcode::ReadFixed::new(types::Fd(fd), dst, len, 0)
                .offset(offset)
                .build(),
            (false, true) => opcode::Read::new(types::Fixed(0), dst, len)
                .offset(offset)
                .build(),
            (false, false) => opcode::Read::new(types::Fd(fd), dst, len)
                .offset(offset)
                .build(),
        }
        .user_data(user_data);
        loop {
            // SAFETY: the caller guarantees the buffer outlives the operation (see above).
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                break;
            }
            // With kernel submission polling the poller may not have taken the queued entries
            // yet (without it, never more than `depth` are queued): let it catch up.
            assert!(
                self.sqpoll,
                "submission queue has room: never more than `depth` entries are queued"
            );
            let _ = self.ring.submit();
            let _ = self.ring.submitter().squeue_wait();
        }
        self.stats.reads += 1;
    }

    /// Submit what is queued and wait for at least one completion. Transient failures return
    /// without waiting; the caller reaps what is there and comes back.
    fn submit_and_wait(&self, in_flight: usize) {
        match self.ring.submit_and_wait(1) {
            Ok(_) => {}
            // EINTR: a signal. EAGAIN: the kernel is short of request memory. EBUSY: the
            // completion queue is full (cannot happen with depth-bounded submissions).
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                ) => {}
            Err(e) => {
                // Returning would end the borrow of the caller's buffer while the kernel may
                // still write into it; nothing safe is left to do.
                eprintln!(
                    "ringgnn-io: io_uring_enter failed with {in_flight} reads in flight ({e}); \
                     aborting because their buffers cannot be released safely"
                );
                std::process::abort();
            }
        }
    }
}

impl ReadBatch for UringBatch {
    fn read_batch(&mut self, reqs: &[ReadReq], buf: &mut [u8]) -> io::Result<()> {
        if std::process::id() != self.pid {
            return Err(io::Error::other(format!(
                "io_uring backend created in process {} used in process {} (after a fork): \
                 create the backend in the process that reads",
                self.pid,
                std::process::id()
            )));
        }
        self.stats.batches += 1;
        for (i, r) in reqs.iter().enumerate() {
            check_request(i, r, buf, self.direct)?;
        }
        let base = buf.as_mut_ptr();
        self.done.clear();
        self.done.resize(reqs.len(), 0);
        self.retry.clear();
        let mut next = 0;
        let mut in_flight = 0;
        let mut error: Option<io::Error> = None;
        loop {
            // After an error nothing new is issued, but what is in flight is still awaited.
            while error.is_none() && in_flight < self.depth {
                let i = match self.retry.pop() {
                    Some(i) => i,
                    None if next < reqs.len() => {
                        next += 1;
                        next - 1
                    }
                    None => break,
                };
                let (r, done) = (&reqs[i], self.done[i]);
                if r.len == done {
                    continue; // empty request
                }
                let len = (r.len - done).min(self.max_chunk);
                // SAFETY: check_request proved r.dst + r.len <= buf.len(), and done < r.len.
                let dst = unsafe { base.add(r.dst + done) };
                // SAFETY: dst .. dst + len lies inside `buf`, borrowed mutably for this whole
                // call, and the call does not return before every read in flight completes.
                unsafe { self.push_read(dst, len as u32, r.offset + done as u64, i as u64) };
                in_flight += 1;
            }
            if in_flight == 0 {
                break;
            }
            self.submit_and_wait(in_flight);
            for cqe in self.ring.completion() {
                in_flight -= 1;
                let i = cqe.user_data() as usize;
                let r = &reqs[i];
                let res = cqe.result();
                if res < 0 {
                    if matches!(-res, libc::EINTR | libc::EAGAIN) {
                        self.retry.push(i);
                    } else if error.is_none() {
                        error = Some(io::Error::from_raw_os_error(-res));
                    }
                    continue;
                }
                let got = &mut self.done[i];
                *got += res as usize;
                self.stats.bytes += res as u64;
                if *got == r.len {
                    continue;
                }
                // Zero bytes means end of file; so does a short O_DIRECT read that leaves an
                // unaligned remainder (O_DIRECT moves whole blocks except at the end).
                if res == 0 || (self.direct && !got.is_multiple_of(ALIGN)) {
                    error.get_or_insert_with(|| eof_error(i, r, *got));
                } else {
                    self.retry.push(i);
                }
            }
        }
        match error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    unsafe fn register_buffer(&mut self, buf: &mut [u8]) -> bool {
        if self.registered.is_some() || buf.is_empty() || buf.len() > 1 << 30 {
            return false;
        }
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: the caller keeps `buf` allocated at this address, read into only through this
        // backend, until the backend (and its ring) is dropped.
        let ok = unsafe { self.ring.submitter().register_buffers(&[iov]) }.is_ok();
        if ok {
            self.registered = Some((buf.as_mut_ptr() as usize, buf.len()));
        }
        ok
    }

    fn stats(&self) -> IoStats {
        self.stats
    }

    fn name(&self) -> &'static str {
        if self.direct {
            "uring-direct"
        } else {
            "uring"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring_or_skip(file: File, depth: u32) -> Option<UringBatch> {
        match crate::probe_uring()
            .and_then(|()| UringBatch::with_depth(file, depth).map_err(|e| e.to_string()))
        {
            Ok(u) => Some(u),
            Err(why) => {
                eprintln!("skipping: io_uring unavailable: {why}");
                None
            }
        }
    }

    fn temp_file(name: &str, data: &[u8]) -> (std::path::PathBuf, File) {
        let p =
            std::env::temp_dir().join(format!("ringgnn-io-uring-{}-{name}", std::process::id()));
        std::fs::write(&p, data).unwrap();
        let f = File::open(&p).unwrap();
        (p, f)
    }

    #[test]
    fn partial_reads_are_resubmitted_until_complete() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 253) as u8).collect();
        let (p, f) = temp_file("partial", &data);
        let Some(mut u) = ring_or_skip(f, 4) else {
            return;
        };
        // Chunks of 1000 bytes: each request comes back in parts, exactly like short reads.
        u.max_chunk = 1000;
        let reqs = [
            ReadReq {
                offset: 0,
                len: 10_500,
                dst: 0,
            },
            ReadReq {
                offset: 99_999,
                len: 1,
                dst: 10_500,
            },
            ReadReq {
                offset: 50_001,
                len: 2_000,
                dst: 10_501,
            },
        ];
        let mut buf = vec![0u8; 12_501];
        u.read_batch(&reqs, &mut buf).unwrap();
        assert_eq!(&buf[..10_500], &data[..10_500]);
        assert_eq!(buf[10_500], data[99_999]);
        assert_eq!(&buf[10_501..], &data[50_001..52_001]);
        assert_eq!(u.stats().reads, 11 + 1 + 2);
        assert_eq!(u.stats().bytes, 12_501);
        // a partial read that then meets the end of the file
        let e = u
            .read_batch(
                &[ReadReq {
                    offset: 97_000,
                    len: 5000,
                    dst: 0,
                }],
                &mut buf,
            )
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("only 3000 bytes"), "{e}");
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn reads_into_a_registered_buffer_use_it_and_others_still_work() {
        let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 13 % 251) as u8).collect();
        let (p, f) = temp_file("fixed", &data);
        let Some(mut u) = ring_or_skip(f, 8) else {
            return;
        };
        let mut reg = crate::AlignedBuf::new(32 * 1024);
        // SAFETY: `reg` outlives `u` (declared before it is registered, dropped after `u`
        // below) and is read into only through `u`.
        let registered = unsafe { u.register_buffer(reg.spare()) };
        if !registered {
            eprintln!("skipping: io_uring fixed buffers unavailable");
            drop(u);
            std::fs::remove_file(p).unwrap();
            return;
        }
        // SAFETY: a second registration is refused, whatever the buffer.
        assert!(!unsafe { u.register_buffer(&mut [0u8; 8]) });
        let reqs = [
            ReadReq {
                offset: 4096,
                len: 8192,
                dst: 0,
            },
            ReadReq {
                offset: 60_000,
                len: 5536,
                dst: 8192,
            },
            ReadReq {
                offset: 3,
                len: 100,
                dst: 20_000,
            },
        ];
        u.read_batch(&reqs, reg.spare()).unwrap();
        let got = reg.spare();
        assert_eq!(&got[..8192], &data[4096..12_288]);
        assert_eq!(&got[8192..13_728], &data[60_000..65_536]);
        assert_eq!(&got[20_000..20_100], &data[3..103]);
        // A buffer that is not the registered one is read with plain reads.
        let mut other = vec![0u8; 300];
        u.read_batch(
            &[ReadReq {
                offset: 1000,
                len: 300,
                dst: 0,
            }],
            &mut other,
        )
        .unwrap();
        assert_eq!(&other[..], &data[1000..1300]);
        drop(u);
        drop(reg);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_ring_from_another_process_refuses_to_run() {
        let (p, f) = temp_file("fork", &[1, 2, 3]);
        let Some(mut u) = ring_or_skip(f, 4) else {
            return;
        };
        u.pid = u.pid.wrapping_add(1); // as if we were a forked child
        let mut buf = [0u8; 3];
        let e = u
            .read_batch(
                &[ReadReq {
                    offset: 0,
                    len: 3,
                    dst: 0,
                }],
                &mut buf,
            )
            .unwrap_err();
        assert!(e.to_string().contains("after a fork"), "{e}");
        assert_eq!(u.stats().reads, 0);
        std::fs::remove_file(p).unwrap();
    }
}
