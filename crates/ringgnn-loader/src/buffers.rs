//! Reused output buffers for gathered feature rows.
//!
//! A batch's feature matrix is large (nodes x dim x 4 bytes: about 480 MB for 1024 seeds with
//! fanouts 15,10,5 and 128 features). Allocating one per batch costs a page fault per 4 KiB on
//! first touch and returns the memory to the system only to map it again; so the buffers are
//! kept and handed out again. A buffer goes back to the pool when its consumer is done with it
//! (the Python binding does that when the tensor is garbage collected), and the pool keeps at
//! most `keep` free buffers: a consumer that holds many batches costs memory while it holds
//! them, never after.
//!
//! For a GPU consumer the pool *pins* its buffers: a [`Pinner`] (CUDA's `cudaHostRegister`,
//! given by the binding) page-locks each buffer's whole capacity once, when the buffer is made,
//! so that host-to-device copies from it run asynchronously at full bus speed; the pool
//! unregisters a buffer before it frees it.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

/// Page-locks host memory for a device (registration with its driver), and undoes it.
/// Failures are the pinner's to report: an unpinned buffer still works, only slower.
pub trait Pinner: Send + Sync {
    /// Register `bytes` bytes at `addr`.
    fn pin(&self, addr: usize, bytes: usize);
    /// Unregister what [`Pinner::pin`] registered at `addr`.
    fn unpin(&self, addr: usize);
}

/// Free `f32` buffers waiting for reuse.
pub struct BufferPool {
    free: Mutex<Vec<Vec<f32>>>,
    keep: usize,
    capacity: usize,
    pinning: OnceLock<Pinning>,
}

/// The pinner and what it registered: start address -> bytes. A buffer lost without coming
/// back (a batch dropped inside an abandoned epoch) stays in the map, so memory the allocator
/// hands out again at that address is known to be registered already; the pool unregisters
/// everything when it is dropped.
struct Pinning {
    pinner: Arc<dyn Pinner>,
    pinned: Mutex<HashMap<usize, usize>>,
}

impl Pinning {
    /// Make sure `v`'s whole capacity is registered. The map's lock is never held while the
    /// pinner runs (a pinner may wait for a lock of its own, e.g. Python's): a buffer is owned
    /// by one thread at a time, so no other thread covers or releases the same address.
    fn cover(&self, v: &Vec<f32>) {
        let (addr, bytes) = (v.as_ptr() as usize, v.capacity() * 4);
        if bytes == 0 {
            return;
        }
        let had = self.map().get(&addr).copied();
        match had {
            Some(b) if b >= bytes => return,
            Some(_) => self.pinner.unpin(addr),
            None => {}
        }
        self.pinner.pin(addr, bytes);
        self.map().insert(addr, bytes);
    }

    /// Unregister `v` before it is freed or reallocated.
    fn release(&self, v: &[f32]) {
        let addr = v.as_ptr() as usize;
        let was = self.map().remove(&addr);
        if was.is_some() {
            self.pinner.unpin(addr);
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<usize, usize>> {
        self.pinned.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPool")
            .field("keep", &self.keep)
            .field("capacity", &self.capacity)
            .field("free", &self.free_count())
            .field("pinned", &self.pinned_count())
            .finish()
    }
}

impl BufferPool {
    /// A pool keeping at most `keep` free buffers, each made with room for `capacity` values
    /// (the largest batch), so that a buffer is never reallocated when a batch is larger than
    /// the last. Room is address space only: pages the batches never reach are never touched
    /// (unless the pool pins them).
    pub fn new(keep: usize, capacity: usize) -> Self {
        BufferPool {
            free: Mutex::new(Vec::new()),
            keep,
            capacity,
            pinning: OnceLock::new(),
        }
    }

    /// From now on, register each buffer with `pinner` when it is handed out for the first
    /// time (its whole capacity, once) and unregister it before it is freed. A pool takes one
    /// pinner: false (and nothing changes) when it already has one.
    pub fn pin_with(&self, pinner: Arc<dyn Pinner>) -> bool {
        self.pinning
            .set(Pinning {
                pinner,
                pinned: Mutex::new(HashMap::new()),
            })
            .is_ok()
    }

    /// A buffer of exactly `len` values (contents unspecified). Takes the free buffer with the
    /// largest capacity, so one large buffer serves every batch after the first.
    pub fn take(&self, len: usize) -> Vec<f32> {
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            let best = (0..free.len()).max_by_key(|&i| free[i].capacity());
            best.map(|i| free.swap_remove(i))
        };
        let mut v = match reused {
            Some(mut v) => {
                if len > v.capacity() {
                    // Growing moves the buffer: unregister the old place first.
                    if let Some(p) = self.pinning.get() {
                        p.release(&v);
                    }
                    v.reserve_exact(len - v.len());
                }
                v
            }
            None => Vec::with_capacity(self.capacity.max(len)),
        };
        if let Some(p) = self.pinning.get() {
            p.cover(&v);
        }
        // Shrinking writes nothing; growing writes only the new tail.
        if v.len() > len {
            v.truncate(len);
        } else {
            v.resize(len, 0.0);
        }
        v
    }

    /// Give a buffer back; dropped (unregistered first) if the pool already keeps `keep`.
    pub fn give(&self, v: Vec<f32>) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < self.keep {
            free.push(v);
            return;
        }
        drop(free);
        if let Some(p) = self.pinning.get() {
            p.release(&v);
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

    /// Buffers registered with the pinner now (0 without one).
    pub fn pinned_count(&self) -> usize {
        self.pinning.get().map_or(0, |p| p.map().len())
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        if let Some(p) = self.pinning.get() {
            let pinned = std::mem::take(&mut *p.map());
            for addr in pinned.into_keys() {
                p.pinner.unpin(addr);
            }
        }
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
        // More than the capacity: grown (the allocator may grow it in place, so its address
        // says nothing).
        let d = p.take(150);
        assert_eq!(d.len(), 150);
        assert!(d.capacity() >= 150, "grown to the length asked");
        p.give(d);
        assert!(p.take(10).capacity() >= 150);
    }

    /// What a pinner was asked: +addr for pin (with bytes), -addr for unpin.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<(i8, usize, usize)>>);

    impl Pinner for Recorder {
        fn pin(&self, addr: usize, bytes: usize) {
            self.0.lock().unwrap().push((1, addr, bytes));
        }
        fn unpin(&self, addr: usize) {
            self.0.lock().unwrap().push((-1, addr, 0));
        }
    }

    impl Recorder {
        fn calls(&self) -> Vec<(i8, usize, usize)> {
            self.0.lock().unwrap().clone()
        }
    }

    #[test]
    fn buffers_are_pinned_once_when_made_and_unpinned_before_they_are_freed() {
        let rec = Arc::new(Recorder::default());
        let p = BufferPool::new(1, 100);
        assert!(p.pin_with(rec.clone()));
        assert!(!p.pin_with(rec.clone()), "one pinner per pool");
        let a = p.take(60);
        let a_addr = a.as_ptr() as usize;
        assert_eq!(
            rec.calls(),
            vec![(1, a_addr, 400)],
            "the whole capacity, at creation"
        );
        p.give(a);
        for _ in 0..5 {
            let again = p.take(100);
            assert_eq!(again.as_ptr() as usize, a_addr);
            p.give(again);
        }
        assert_eq!(rec.calls().len(), 1, "reuse registers nothing more");

        // Two buffers out at once: the second is made (and pinned); the pool keeps one, so
        // the other is unpinned when given back.
        let (x, y) = (p.take(10), p.take(10));
        let y_addr = y.as_ptr() as usize;
        assert_eq!(rec.calls()[1], (1, y_addr, 400));
        p.give(x);
        p.give(y);
        assert_eq!(
            rec.calls()[2],
            (-1, y_addr, 0),
            "dropped by the pool: unpinned first"
        );
        assert_eq!(p.pinned_count(), 1);

        // Growing past the capacity moves the buffer: old place unpinned, new one pinned.
        let big = p.take(1000);
        let calls = rec.calls();
        assert_eq!(calls[3], (-1, a_addr, 0));
        assert_eq!(calls[4], (1, big.as_ptr() as usize, big.capacity() * 4));
        assert!(big.capacity() >= 1000);
        p.give(big);
        drop(p);
        let calls = rec.calls();
        assert_eq!(
            calls.last().unwrap().0,
            -1,
            "the pool unpins what it holds when dropped"
        );
        let pins = calls.iter().filter(|c| c.0 == 1).count();
        let unpins = calls.iter().filter(|c| c.0 == -1).count();
        assert_eq!(pins, unpins, "every registration is undone: {calls:?}");
    }

    #[test]
    fn a_lost_buffer_stays_registered_until_the_pool_is_dropped() {
        let rec = Arc::new(Recorder::default());
        let p = BufferPool::new(2, 50);
        p.pin_with(rec.clone());
        let lost = p.take(50);
        let addr = lost.as_ptr() as usize;
        std::mem::forget(lost); // kept alive but never returned, like a batch of an abandoned epoch
        assert_eq!(p.pinned_count(), 1);
        drop(p);
        assert_eq!(rec.calls(), vec![(1, addr, 200), (-1, addr, 0)]);
    }
}
