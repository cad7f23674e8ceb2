//! Sort keys: an edge u->v becomes the integer `(v << SRC_BITS) | u`, so sorting keys sorts
//! edges by destination, then source: exactly CSC order. Graphs whose ids fit in 32 bits use
//! 8-byte keys (half the memory and spill I/O of the 16-byte wide keys).

/// An edge packed for sorting.
pub trait Key: Copy + Ord + Default + Send + Sync + bytemuck::Pod + radsort::Key + 'static {
    const BITS: u32;
    const SRC_BITS: u32;
    fn make(dst: u64, src: u64) -> Self;
    fn dst(self) -> u64;
    fn src(self) -> u64;
    /// `(self - base) >> shift` as a bucket number; `shift` may be `BITS` (one bucket).
    fn bucket(self, base: Self, shift: u32) -> usize;
    /// `b << shift`, the first key of bucket `b` at that shift.
    fn bucket_base(b: u64, shift: u32) -> Self;
    fn add(self, other: Self) -> Self;
}

impl Key for u64 {
    const BITS: u32 = 64;
    const SRC_BITS: u32 = 32;
    #[inline]
    fn make(dst: u64, src: u64) -> Self {
        debug_assert!(dst < 1 << 32 && src < 1 << 32);
        (dst << 32) | src
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
    const SRC_BITS: u32 = 64;
    #[inline]
    fn make(dst: u64, src: u64) -> Self {
        ((dst as u128) << 64) | src as u128
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
