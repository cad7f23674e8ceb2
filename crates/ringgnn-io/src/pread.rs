//! The portable read backend: one `pread` per request, in order, short reads continued.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::read_batch::{check_request, eof_error, is_direct, IoStats, ReadBatch, ReadReq};
use crate::ALIGN;

/// The portable backend: one `pread` per request, in order. On a file opened with `O_DIRECT`
/// the same alignment rules as [`crate::UringBatch`] apply and are checked before any read.
pub struct PreadBatch {
    file: File,
    direct: bool,
    stats: IoStats,
}

impl PreadBatch {
    pub fn new(file: File) -> Self {
        PreadBatch {
            direct: is_direct(&file),
            file,
            stats: IoStats::default(),
        }
    }
}

impl ReadBatch for PreadBatch {
    fn read_batch(&mut self, reqs: &[ReadReq], buf: &mut [u8]) -> io::Result<()> {
        self.stats.batches += 1;
        for (i, r) in reqs.iter().enumerate() {
            check_request(i, r, buf, self.direct)?;
        }
        for (i, r) in reqs.iter().enumerate() {
            let dst = &mut buf[r.dst..r.dst + r.len];
            let mut got = 0;
            while got < r.len {
                self.stats.reads += 1;
                match self.file.read_at(&mut dst[got..], r.offset + got as u64) {
                    Ok(0) => return Err(eof_error(i, r, got)),
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
                // O_DIRECT moves whole blocks except at the end of the file, and the remainder
                // could not be read with O_DIRECT anyway (unaligned).
                if self.direct && got < r.len && !got.is_multiple_of(ALIGN) {
                    return Err(eof_error(i, r, got));
                }
            }
            self.stats.bytes += r.len as u64;
        }
        Ok(())
    }
    fn stats(&self) -> IoStats {
        self.stats
    }
    fn name(&self) -> &'static str {
        "pread"
    }
}
