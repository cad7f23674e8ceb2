//! [`PageCache`]: the hot 4 KiB pages of one file kept in memory within a byte budget, shared by
//! every reader thread of that file.
//!
//! Made for the neighbor file under on-demand sampling: single-node requests touch a few hundred
//! pages each, at random, and on skewed graphs most of those touches land on the pages of a few
//! hub lists. Pages enter when a read brings them in and leave by CLOCK (second chance): a page
//! touched since the hand last passed stays, so the working set of hot lists survives a stream of
//! one-off pages. The cache never changes what a read returns, only whether it costs I/O.
//!
//! The pages are split over shards by page number, each behind its own mutex, so readers rarely
//! wait for each other; a lookup copies out what it needs while holding the shard. Memory: the
//! page bytes (allocated up front, committed by the kernel as pages fill) plus
//! [`PageCache::BYTES_PER_PAGE`] - [`ALIGN`] bytes of bookkeeping per page; both are within the
//! bytes given to [`PageCache::new`].

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::ALIGN;

const SHARDS: usize = 16;

/// Counters of a [`PageCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Pages found in the cache, and pages that had to be read.
    pub hits: u64,
    pub misses: u64,
    /// Pages held now, and at most.
    pub pages: u64,
    pub capacity: u64,
}

/// Hot pages of one file in memory (see the module docs).
pub struct PageCache {
    shards: Box<[Mutex<Shard>]>,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Once set ([`PageCache::keep`]), the pages in the cache never leave: reads only fill
    /// slots still free.
    kept: AtomicBool,
}

struct Shard {
    /// Page number -> slot.
    map: HashMap<u64, u32>,
    /// Per slot: its page and whether it was used since the hand last passed.
    slots: Vec<(u64, bool)>,
    data: Vec<u8>,
    /// Slots usable now: `full` less those lent ([`PageCache::lend`]).
    cap: usize,
    /// Pages of a kept cache that left with lent slots: until they are back, free slots take
    /// only them (a kept cache holds the pages chosen for it, not whatever is read next).
    wanted: HashSet<u64>,
    full: usize,
    hand: usize,
}

impl Shard {
    /// Give up the slots from `keep` on: their pages leave, and their memory goes back to the
    /// system (the pages of `data` past `keep` slots that no kept slot shares).
    fn shrink_to(&mut self, keep: usize, kept: bool) {
        if self.slots.len() > keep {
            for &(page, _) in &self.slots[keep..] {
                self.map.remove(&page);
                if kept {
                    self.wanted.insert(page);
                }
            }
            self.slots.truncate(keep);
            self.data.truncate(keep * ALIGN);
        }
        self.cap = keep;
        if self.hand >= keep {
            self.hand = 0;
        }
        // The allocation's bytes from `keep` slots on (their contents are no longer used, and
        // `insert` writes a slot before it is read), whole system pages only.
        let base = self.data.as_ptr() as usize;
        let start = (base + keep * ALIGN).next_multiple_of(SYSTEM_PAGE);
        let end = (base + self.full * ALIGN) / SYSTEM_PAGE * SYSTEM_PAGE;
        if end > start {
            // SAFETY: [start, end) lies within `data`'s allocation (its capacity is `full`
            // slots), past its length: no live bytes; MADV_DONTNEED only drops their pages.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
}

/// Return the allocator's free memory to the system (glibc keeps freed heap memory for reuse):
/// what a caller does before handing memory it used back to a [`PageCache`]
/// ([`PageCache::give_back`]), so that the two never hold it at once. Nothing elsewhere.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The granule `madvise` releases memory in (4 KiB on the systems ringgnn runs on; a larger
/// page only releases less).
const SYSTEM_PAGE: usize = 4096;

impl PageCache {
    /// Memory one cached page costs: its bytes, its slot and its map entry (with the map's load
    /// factor).
    pub const BYTES_PER_PAGE: u64 = ALIGN as u64 + 48;

    /// A cache of at most `bytes` (pages and bookkeeping); `None` when that is less than one
    /// page per shard.
    pub fn new(bytes: u64) -> Option<Self> {
        let pages = usize::try_from(bytes / Self::BYTES_PER_PAGE).unwrap_or(usize::MAX);
        if pages < SHARDS {
            return None;
        }
        let shards = (0..SHARDS)
            .map(|i| {
                let cap = pages / SHARDS + usize::from(i < pages % SHARDS);
                Mutex::new(Shard {
                    map: HashMap::with_capacity(cap),
                    slots: Vec::with_capacity(cap),
                    data: Vec::with_capacity(cap * ALIGN),
                    cap,
                    wanted: HashSet::new(),
                    full: cap,
                    hand: 0,
                })
            })
            .collect();
        Some(PageCache {
            shards,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            kept: AtomicBool::new(false),
        })
    }

    fn shard(&self, page: u64) -> MutexGuard<'_, Shard> {
        let s = &self.shards[Self::shard_of(page)];
        s.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Call `f` with the bytes of page `page` (byte offset `page * ALIGN`) if it is cached, and
    /// say whether it was.
    pub fn get(&self, page: u64, f: impl FnOnce(&[u8])) -> bool {
        let mut s = self.shard(page);
        let Some(&slot) = s.map.get(&page) else {
            drop(s);
            self.misses.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let slot = slot as usize;
        s.slots[slot].1 = true;
        f(&s.data[slot * ALIGN..(slot + 1) * ALIGN]);
        drop(s);
        self.hits.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Keep `bytes` (at most one page; a short last page of the file is padded with zeros) as
    /// page `page`, evicting a page not used lately if the shard is full.
    pub fn insert(&self, page: u64, bytes: &[u8]) {
        let bytes = &bytes[..bytes.len().min(ALIGN)];
        let mut guard = self.shard(page);
        let s = &mut *guard;
        if s.map.contains_key(&page) {
            return;
        }
        let slot = if s.slots.len() < s.cap {
            if !s.wanted.is_empty() && !s.wanted.remove(&page) {
                return;
            }
            s.slots.push((page, false));
            s.data.resize(s.slots.len() * ALIGN, 0);
            s.slots.len() - 1
        } else if self.kept.load(Ordering::Relaxed) {
            return;
        } else {
            // CLOCK: clear the used flags in the hand's way until a page not used since the
            // last pass comes up.
            loop {
                let h = s.hand;
                s.hand = (h + 1) % s.cap;
                if std::mem::take(&mut s.slots[h].1) {
                    continue;
                }
                s.map.remove(&s.slots[h].0);
                s.slots[h] = (page, false);
                break h;
            }
        };
        let dst = &mut s.data[slot * ALIGN..(slot + 1) * ALIGN];
        dst[..bytes.len()].copy_from_slice(bytes);
        dst[bytes.len()..].fill(0);
        s.map.insert(page, slot as u32);
    }

    /// The pages of `by_priority` (best first) that an empty cache holds together: each shard
    /// takes its best pages up to its capacity. What to read before [`Self::keep`].
    pub fn fitting(&self, by_priority: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let mut room: Vec<usize> = self
            .shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).cap)
            .collect();
        let mut left: usize = room.iter().sum();
        let mut out = Vec::new();
        for page in by_priority {
            if left == 0 {
                break;
            }
            let r = &mut room[Self::shard_of(page)];
            if *r > 0 {
                *r -= 1;
                left -= 1;
                out.push(page);
            }
        }
        out
    }

    /// The shard of `page`: pages are spread by number.
    pub fn shard_of(page: u64) -> usize {
        (page % SHARDS as u64) as usize
    }

    /// Keep the pages cached now for good (chosen ahead, e.g. by expected use): from now on
    /// pages read only fill slots that are still free, and nothing is evicted.
    pub fn keep(&self) {
        self.kept.store(true, Ordering::Relaxed);
    }

    /// Slots to lend for `bytes` to be free ([`Self::lend`]): a lent slot frees its page less
    /// what remembering its page takes (at most 64 bytes), and each shard may keep a system page
    /// at either end of its lent range.
    pub fn slots_for(bytes: u64) -> u64 {
        bytes.div_ceil(ALIGN as u64 - 64) + 2 * SHARDS as u64
    }

    /// Lend the memory of `pages` page slots (at most all but one per shard; how many it lent
    /// is returned) to whoever needs it for a while: the pages in them leave the cache (each
    /// shard's last slots: with pages read in priority order, [`Self::fitting`]'s, the least
    /// wanted), their memory goes back to the system, and the cache holds that many fewer until
    /// [`Self::give_back`]. Readers go on meanwhile; they find fewer pages.
    pub fn lend(&self, pages: u64) -> u64 {
        let mut lent = 0;
        for (i, s) in self.shards.iter().enumerate() {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            // An even share per shard, the remainder to the first ones.
            let want = pages / SHARDS as u64 + u64::from((i as u64) < pages % SHARDS as u64);
            let k = (want as usize).min(s.cap.saturating_sub(1));
            let keep = s.cap - k;
            s.shrink_to(keep, self.kept.load(Ordering::Relaxed));
            lent += k as u64;
        }
        lent
    }

    /// Take back every slot lent by [`Self::lend`]: they fill again as reads bring pages in (in
    /// a kept cache, only the pages that left with them).
    pub fn give_back(&self) {
        for s in self.shards.iter() {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            s.cap = s.full;
        }
    }

    pub fn stats(&self) -> CacheStats {
        let (mut pages, mut capacity) = (0, 0);
        for s in self.shards.iter() {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            pages += s.slots.len() as u64;
            capacity += s.cap as u64;
        }
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            pages,
            capacity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(v: u8) -> Vec<u8> {
        vec![v; ALIGN]
    }

    fn cached(c: &PageCache, p: u64) -> Option<u8> {
        let mut got = None;
        c.get(p, |b| got = Some(b[0]));
        got
    }

    #[test]
    fn too_small_for_a_page_per_shard_is_no_cache() {
        assert!(PageCache::new(0).is_none());
        assert!(PageCache::new(PageCache::BYTES_PER_PAGE * SHARDS as u64 - 1).is_none());
        let c = PageCache::new(PageCache::BYTES_PER_PAGE * SHARDS as u64).unwrap();
        assert_eq!(c.stats().capacity, SHARDS as u64);
    }

    #[test]
    fn pages_come_back_as_stored_and_a_short_page_is_padded() {
        let c = PageCache::new(PageCache::BYTES_PER_PAGE * 64).unwrap();
        assert_eq!(cached(&c, 7), None);
        c.insert(7, &page(7));
        c.insert(9, &[1, 2, 3]);
        assert_eq!(cached(&c, 7), Some(7));
        let mut tail = vec![];
        assert!(c.get(9, |b| tail = b.to_vec()));
        assert_eq!(tail.len(), ALIGN);
        assert_eq!(
            (&tail[..3], tail[3..].iter().all(|&x| x == 0)),
            (&[1, 2, 3][..], true)
        );
        // Inserting a page again keeps the first copy (they are the same file bytes).
        c.insert(7, &page(8));
        assert_eq!(cached(&c, 7), Some(7));
        assert_eq!(
            c.stats(),
            CacheStats {
                hits: 3,
                misses: 1,
                pages: 2,
                capacity: 64
            }
        );
    }

    #[test]
    fn clock_keeps_pages_used_since_the_hand_passed() {
        // 16 shards of 2 slots: pages 0, 16, 32, ... share shard 0.
        let c = PageCache::new(PageCache::BYTES_PER_PAGE * 32).unwrap();
        c.insert(0, &page(0));
        c.insert(16, &page(16));
        assert!(c.get(0, |_| ())); // page 0 used: it survives the next eviction
        c.insert(32, &page(32));
        assert_eq!(
            (cached(&c, 0), cached(&c, 16), cached(&c, 32)),
            (Some(0), None, Some(32))
        );
        // Both used now: the hand clears them and evicts the first it meets again (page 0's slot).
        c.insert(48, &page(48));
        assert_eq!(
            (cached(&c, 0), cached(&c, 32), cached(&c, 48)),
            (None, Some(32), Some(48))
        );
        let st = c.stats();
        assert_eq!((st.pages, st.capacity), (2, 32));
    }

    #[test]
    fn fitting_takes_the_best_pages_each_shard_holds() {
        // 2 slots per shard: pages 0, 16, 32 share shard 0, so 32 does not fit after 0 and 16.
        let c = PageCache::new(PageCache::BYTES_PER_PAGE * 32).unwrap();
        assert_eq!(c.fitting([0, 16, 32, 1, 17, 33, 2]), vec![0, 16, 1, 17, 2]);
        let all: Vec<u64> = (0..100).collect();
        assert_eq!(c.fitting(all).len(), 32);
    }

    #[test]
    fn kept_pages_never_leave() {
        let c = PageCache::new(PageCache::BYTES_PER_PAGE * 32).unwrap();
        c.insert(0, &page(0));
        c.keep();
        c.insert(16, &page(16)); // a free slot: taken
        c.insert(32, &page(32)); // full: refused, nothing evicted
        assert_eq!(
            (cached(&c, 0), cached(&c, 16), cached(&c, 32)),
            (Some(0), Some(16), None)
        );
    }

    #[test]
    fn lent_slots_leave_with_their_pages_and_come_back_empty() {
        // 16 shards of 4 slots; pages 0..64 fill them all (4 per shard).
        let c = PageCache::new(PageCache::BYTES_PER_PAGE * 64).unwrap();
        for p in 0..64 {
            c.insert(p, &page(p as u8));
        }
        c.keep();
        // 20 slots: 2 from each of the first 4 shards, 1 from the others; each shard's last
        // slots (its pages inserted last: 48..64, then 32..36) leave.
        assert_eq!(c.lend(20), 20);
        let st = c.stats();
        assert_eq!((st.pages, st.capacity), (44, 44));
        for p in 0..64u64 {
            let gone = p >= 48 || (32..36).contains(&p);
            assert_eq!(cached(&c, p).is_none(), gone, "page {p}");
        }
        // Full: a kept cache takes nothing more while the slots are lent.
        c.insert(100, &page(100));
        assert_eq!(cached(&c, 100), None);
        // At most all but one slot of each shard.
        c.give_back();
        assert_eq!(c.lend(1000), 48);
        assert_eq!(c.stats().capacity, 16);
        c.give_back();
        let st = c.stats();
        assert_eq!((st.pages, st.capacity), (16, 64));
        // The slots given back take only the kept pages that left, as reads bring them in,
        // with the right bytes; other pages read meanwhile do not enter.
        for p in 16..264u64 {
            c.insert(p, &page(p as u8));
        }
        assert_eq!(c.stats().pages, 64);
        for p in 0..64u64 {
            assert_eq!(cached(&c, p), Some(p as u8), "page {p}");
        }
        assert_eq!(cached(&c, 200), None);
    }

    #[test]
    fn a_cache_that_learns_refills_lent_slots_with_any_page() {
        let c = PageCache::new(PageCache::BYTES_PER_PAGE * 32).unwrap();
        for p in 0..32 {
            c.insert(p, &page(p as u8));
        }
        assert_eq!(c.lend(16), 16);
        c.give_back();
        for p in 100..116u64 {
            c.insert(p, &page(p as u8));
        }
        assert_eq!(c.stats().pages, 32);
        assert_eq!(cached(&c, 100), Some(100));
    }

    #[test]
    fn threads_share_it() {
        let c = std::sync::Arc::new(PageCache::new(PageCache::BYTES_PER_PAGE * 256).unwrap());
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        let p = (i * 7 + t) % 300;
                        let mut ok = true;
                        if !c.get(p, |b| {
                            ok = b[0] == (p % 251) as u8 && b[ALIGN - 1] == (p % 251) as u8
                        }) {
                            c.insert(p, &page((p % 251) as u8));
                        }
                        assert!(ok, "page {p} holds another page's bytes");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let st = c.stats();
        assert_eq!(st.hits + st.misses, 4000);
        assert!(st.pages <= 256 && st.hits > 0);
    }
}
