//! The edge stream shared by the generators: fixed-size chunks, each from its own rng
//! stream, made ahead by background workers and consumed in index order, so the output never
//! depends on thread count or timing.

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::input::EdgeSource;
use crate::Result;

/// A generator of fixed-length edge chunks, chunk `index` from its own rng stream.
pub(crate) trait ChunkGen: Send + Sync + 'static {
    /// Fill `out` (the chunk's whole length) with the edges of chunk `index`.
    fn chunk(&self, index: u64, out: &mut [(u64, u64)]);
}

type Chunk = Vec<(u64, u64)>;

/// Chunks a worker may run ahead of the consumer: bounds memory to
/// `threads * (AHEAD + 1) * chunk * 16` bytes (12 MiB for 16 threads and R-MAT's chunk).
const AHEAD: usize = 2;

/// An [`EdgeSource`] over the chunks of a [`ChunkGen`]. With `threads > 1`, worker `w` makes
/// chunks `w, w + T, w + 2T, ...` in the background and the consumer takes them round-robin, so
/// generation overlaps the builder's work and the order never depends on timing.
pub(crate) struct ChunkedSource<G: ChunkGen> {
    gen: Arc<G>,
    total: u64,
    chunk_len: u64,
    ids_u32: bool,
    threads: usize,
    /// The chunk being handed out and how much of it is gone.
    current: Vec<(u64, u64)>,
    current_pos: usize,
    next_chunk: u64,
    emitted: u64,
    workers: Vec<(Receiver<Chunk>, JoinHandle<()>)>,
}

impl<G: ChunkGen> ChunkedSource<G> {
    pub fn new(gen: G, total: u64, chunk_len: u64, ids_u32: bool, threads: usize) -> Self {
        ChunkedSource {
            gen: Arc::new(gen),
            total,
            chunk_len,
            ids_u32,
            threads: threads.max(1),
            current: Vec::new(),
            current_pos: 0,
            next_chunk: 0,
            emitted: 0,
            workers: Vec::new(),
        }
    }

    fn num_chunks(&self) -> u64 {
        self.total.div_ceil(self.chunk_len)
    }

    fn chunk_len_of(&self, index: u64) -> usize {
        (self.total - index * self.chunk_len).min(self.chunk_len) as usize
    }

    fn start_workers(&mut self) {
        let t = self.threads as u64;
        let n = self.num_chunks();
        for w in 0..t.min(n) {
            let (tx, rx) = sync_channel(AHEAD);
            let gen = Arc::clone(&self.gen);
            let (total, len) = (self.total, self.chunk_len);
            let handle = std::thread::spawn(move || {
                let mut i = w;
                while i < n {
                    let mut buf = vec![(0, 0); (total - i * len).min(len) as usize];
                    gen.chunk(i, &mut buf);
                    if tx.send(buf).is_err() {
                        return; // the source was dropped
                    }
                    i += t;
                }
            });
            self.workers.push((rx, handle));
        }
    }

    fn stop_workers(&mut self) {
        // Dropping the receivers makes every blocked `send` fail, so the workers end promptly.
        let handles: Vec<_> = self.workers.drain(..).map(|(_, h)| h).collect();
        for h in handles {
            let _ = h.join();
        }
    }

    /// The next chunk, in order.
    fn next(&mut self) -> Chunk {
        let i = self.next_chunk;
        self.next_chunk += 1;
        if self.threads == 1 {
            let mut buf = std::mem::take(&mut self.current);
            buf.resize(self.chunk_len_of(i), (0, 0));
            self.gen.chunk(i, &mut buf);
            return buf;
        }
        if self.workers.is_empty() {
            self.start_workers();
        }
        let w = (i % self.threads as u64) as usize;
        // A worker only stops early when the receiver is gone, so recv fails only if it panicked.
        self.workers[w]
            .0
            .recv()
            .expect("edge generator thread panicked")
    }
}

impl<G: ChunkGen> EdgeSource for ChunkedSource<G> {
    fn fill(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<usize> {
        let mut done = 0;
        while done < max {
            if self.current_pos == self.current.len() {
                if self.next_chunk == self.num_chunks() {
                    break;
                }
                self.current = self.next();
                self.current_pos = 0;
            }
            let k = (max - done).min(self.current.len() - self.current_pos);
            out.extend_from_slice(&self.current[self.current_pos..self.current_pos + k]);
            self.current_pos += k;
            done += k;
        }
        self.emitted += done as u64;
        Ok(done)
    }

    fn position(&self) -> (u64, Option<u64>) {
        (self.emitted, Some(self.total))
    }

    fn unit(&self) -> &'static str {
        "edges"
    }

    fn ids_fit_u32(&self) -> bool {
        self.ids_u32
    }

    fn rewind(&mut self) -> Result<bool> {
        self.stop_workers();
        self.current.clear();
        self.current_pos = 0;
        self.next_chunk = 0;
        self.emitted = 0;
        Ok(true)
    }
}

impl<G: ChunkGen> Drop for ChunkedSource<G> {
    fn drop(&mut self) {
        self.stop_workers();
    }
}
