//! Sort keys: an edge u->v becomes the integer `(v << LOW_BITS) | u`, so sorting keys sorts
//! edges by destination, then source: exactly CSC order. Graphs whose ids fit in 32 bits use
//! 8-byte keys (half the memory and spill I/O of the 16-byte wide keys). An edge with a time t
//! becomes `(v << 96) | (t' << 32) | u`, t' the time as an order-preserving unsigned
//! ([`crate::times::to_key`]): sorted by destination, then time, then source, the order of
//! FORMAT.md "Times" (16 bytes; times need ids below 2^32).

use crate::times::to_key;

/// An edge packed for sorting.
pub trait Key: Copy + Ord + Default + Send + Sync + bytemuck::Pod + 'static {
    const BITS: u32;
    /// Bits below the destination (the source's, and the time's when [`Key::TIMED`]).
    const LOW_BITS: u32;
    /// Whether every id fits 32 bits (else the build restarts with wider keys).
    const NARROW: bool;
    /// Whether the key holds a time.
    const TIMED: bool;
    /// The key of edge `src -> dst` at time `time` (ignored by keys without times).
    fn make(dst: u64, src: u64, time: i64) -> Self;
    fn dst(self) -> u64;
    fn src(self) -> u64;
    /// The edge's time (0 for keys without times).
    fn time(self) -> i64;
    /// Sort keys ascending.
    fn sort(keys: &mut [Self]);
    /// `(self - base) >> shift` as a bucket number; `shift` may be `BITS` (one bucket).
    fn bucket(self, base: Self, shift: u32) -> usize;
    /// `b << shift`, the first key of bucket `b` at that shift.
    fn bucket_base(b: u64, shift: u32) -> Self;
    fn add(self, other: Self) -> Self;
}

impl Key for u64 {
    const BITS: u32 = 64;
    const LOW_BITS: u32 = 32;
    const NARROW: bool = true;
    const TIMED: bool = false;
    #[inline]
    fn make(dst: u64, src: u64, _time: i64) -> Self {
        debug_assert!(dst < 1 << 32 && src < 1 << 32);
        (dst << 32) | src
    }
    fn time(self) -> i64 {
        0
    }
    fn sort(keys: &mut [Self]) {
        radsort::sort(keys);
    }
    #[inline]
    fn dst(self) -> u64 {
        self >> 32
    }
    #[inline]
    fn src(self) -> u64 {
        self & 0xFFFF_FFFF
    }
    #[inline]
    fn bucket(self, base: Self, shift: u32) -> usize {
        (self - base).checked_shr(shift).unwrap_or(0) as usize
    }
    fn bucket_base(b: u64, shift: u32) -> Self {
        b.checked_shl(shift).unwrap_or(0)
    }
    fn add(self, other: Self) -> Self {
        self + other
    }
}

impl Key for u128 {
    const BITS: u32 = 128;
    const LOW_BITS: u32 = 64;
    const NARROW: bool = false;
    const TIMED: bool = false;
    #[inline]
    fn make(dst: u64, src: u64, _time: i64) -> Self {
        ((dst as u128) << 64) | src as u128
    }
    fn time(self) -> i64 {
        0
    }
    fn sort(keys: &mut [Self]) {
        radsort::sort(keys);
    }
    #[inline]
    fn dst(self) -> u64 {
        (self >> 64) as u64
    }
    #[inline]
    fn src(self) -> u64 {
        self as u64
    }
    #[inline]
    fn bucket(self, base: Self, shift: u32) -> usize {
        (self - base).checked_shr(shift).unwrap_or(0) as usize
    }
    fn bucket_base(b: u64, shift: u32) -> Self {
        (b as u128).checked_shl(shift).unwrap_or(0)
    }
    fn add(self, other: Self) -> Self {
        self + other
    }
}

/// A timed key: the 128-bit `(dst << 96) | (time << 32) | src` as `[high word, low word]`, whose
/// array order is the integer's (a plain `u128` is already the untimed wide key).
pub type TimedKey = [u64; 2];

#[inline]
fn wide(k: TimedKey) -> u128 {
    ((k[0] as u128) << 64) | k[1] as u128
}

#[inline]
fn split(x: u128) -> TimedKey {
    [(x >> 64) as u64, x as u64]
}

impl Key for TimedKey {
    const BITS: u32 = 128;
    const LOW_BITS: u32 = 96;
    const NARROW: bool = true;
    const TIMED: bool = true;
    #[inline]
    fn make(dst: u64, src: u64, time: i64) -> Self {
        debug_assert!(dst < 1 << 32 && src < 1 << 32);
        let t = to_key(time);
        [(dst << 32) | (t >> 32), (t << 32) | src]
    }
    #[inline]
    fn dst(self) -> u64 {
        self[0] >> 32
    }
    #[inline]
    fn src(self) -> u64 {
        self[1] & 0xFFFF_FFFF
    }
    #[inline]
    fn time(self) -> i64 {
        crate::times::from_key((self[0] << 32) | (self[1] >> 32))
    }
    fn sort(keys: &mut [Self]) {
        radsort::sort_by_key(keys, |k| (k[0], k[1]));
    }
    #[inline]
    fn bucket(self, base: Self, shift: u32) -> usize {
        (wide(self) - wide(base)).checked_shr(shift).unwrap_or(0) as usize
    }
    fn bucket_base(b: u64, shift: u32) -> Self {
        split((b as u128).checked_shl(shift).unwrap_or(0))
    }
    fn add(self, other: Self) -> Self {
        split(wide(self) + wide(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_keys_order_by_destination_time_source() {
        let k = |d, s, t| <TimedKey as Key>::make(d, s, t);
        let a = k(3, 9, -4);
        assert_eq!((a.dst(), a.src(), a.time()), (3, 9, -4));
        assert!(k(1, 7, 3) < k(1, 2, 5)); // earlier time first, whatever the source
        assert!(k(1, 0, 3) < k(1, 7, 3)); // ties by source
        assert!(k(1, 0, i64::MAX) < k(2, 0, i64::MIN)); // destination first
        assert_eq!(k(5, 1, 2).bucket(TimedKey::default(), 96), 5);
        assert_eq!(<TimedKey as Key>::bucket_base(5, 96), k(5, 0, i64::MIN));
    }

    #[test]
    fn timed_radix_sort_is_the_key_order() {
        let mut r = crate::rng::stream(1, 2, 3);
        let mut keys: Vec<TimedKey> = (0..5000)
            .map(|_| {
                let x = rand_xoshiro::rand_core::Rng::next_u64(&mut r);
                Key::make(x % 1000, (x >> 10) % 50, (x >> 20) as i64 % 7 - 3)
            })
            .collect();
        let mut want = keys.clone();
        want.sort_unstable();
        Key::sort(&mut keys[..]);
        assert_eq!(keys, want);
    }
}
