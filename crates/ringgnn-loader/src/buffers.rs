//! Reused output buffers for gathered feature rows.
//!
//! A batch's feature matrix is large (nodes x dim x 4 bytes: about 480 MB for 1024 seeds with
//! fanouts 15,10,5 and 128 features). Allocating one per batch costs a page fault per 4 KiB on
//! first touch and returns the memory to the system only to map it again; so the buffers are
//! kept and handed out again. A buffer goes back to the pool when its consumer is done with it
//! (the Python binding does that when the tensor is garbage collected), and the pool keeps at
//! most `keep` free buffers: a consumer that holds many batches costs memory while it holds
//! them, never after.

use std::sync::Mutex;

/// Free `f32` buffers waiting for reuse.
#[derive(Debug)]
pub struct BufferPool {
    free: Mutex<Vec<Vec<f32>>>,
    keep: usize,
    capacity: usize,
}

impl BufferPool {
    /// A pool keeping at most `keep` free buffers, each made with room for `capacity` values
    /// (the largest batch), so that a buffer is never reallocated when a batch is larger than
    /// the last. Room is address space only: pages the batches never reach are never touched.
    pub fn new(keep: usize, capacity: usize) -> Self {
        BufferPool {
            free: Mutex::new(Vec::new()),
            keep,
            capacity,
        }
    }

    /// A buffer of exactly `len` values (contents unspecified). Takes the free buffer with the
    /// largest capacity, so one large buffer serves every batch after the first.
    pub fn take(&self, len: usize) -> Vec<f32> {
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            let best = (0..free.len()).max_by_key(|&i| free[i].capacity());
            best.map(|i| free.swap_remove(i))
        };
        match reused {
            Some(mut v) => {
                // Shrinking writes nothing; growing writes only the new tail.
                if v.len() > len {
                    v.truncate(len);
                } else {
                    v.resize(len, 0.0);
                }
                v
            }
            None => {
                let mut v = Vec::with_capacity(self.capacity.max(len));
                v.resize(len, 0.0);
                v
            }
        }
    }

    /// Give a buffer back; dropped if the pool already keeps `keep`.
    pub fn give(&self, v: Vec<f32>) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < self.keep {
            free.push(v);
        }
    }

    /// Free buffers now held.
    pub fn free_count(&self) -> usize {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Bytes of the free buffers now held (their capacity).
    pub fn free_bytes(&self) -> u64 {
        let free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        free.iter().map(|v| v.capacity() as u64 * 4).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_and_the_pool_keeps_at_most_keep() {
        let p = BufferPool::new(1, 100);
        let a = p.take(100);
        assert_eq!(a.len(), 100);
        let ptr = a.as_ptr();
        p.give(a);
        let b = p.take(60);
        assert_eq!((b.len(), b.as_ptr()), (60, ptr));
        p.give(b);
        let c = p.take(100);
        assert_eq!(
            (c.len(), c.as_ptr()),
            (100, ptr),
            "grown back within capacity"
        );
        p.give(c);
        p.give(vec![0.0; 5]);
        assert_eq!(p.free_count(), 1, "the second free buffer is dropped");
        assert_eq!(p.free_bytes(), 400);
        let d = p.take(150);
        assert_ne!(d.as_ptr(), ptr, "more than the capacity: grown once");
        p.give(d);
        assert!(p.take(10).capacity() >= 150);
    }
}
