//! Test doubles for the crates that read through [`ReadBatch`] (feature `testing`, and this
//! crate's own tests).

use std::io;
use std::sync::{Arc, Mutex};

use crate::{IoStats, ReadBatch, ReadReq};

/// The batches of requests a [`Recorder`] served, in order.
pub type ReadLog = Arc<Mutex<Vec<Vec<ReadReq>>>>;

/// A file in memory that records every batch of requests it serves.
pub struct Recorder {
    data: Vec<u8>,
    log: ReadLog,
}

impl Recorder {
    /// A reader of `data`, and the log of what it is asked.
    pub fn new(data: Vec<u8>) -> (Self, ReadLog) {
        let log = ReadLog::default();
        (
            Recorder {
                data,
                log: log.clone(),
            },
            log,
        )
    }
}

impl ReadBatch for Recorder {
    fn read_batch(&mut self, reqs: &[ReadReq], buf: &mut [u8]) -> io::Result<()> {
        self.log.lock().unwrap().push(reqs.to_vec());
        for r in reqs {
            let src = self.data.get(r.offset as usize..r.offset as usize + r.len);
            let src = src.ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
            buf[r.dst..r.dst + r.len].copy_from_slice(src);
        }
        Ok(())
    }
    fn stats(&self) -> IoStats {
        IoStats::default()
    }
    fn name(&self) -> &'static str {
        "recorder"
    }
}
