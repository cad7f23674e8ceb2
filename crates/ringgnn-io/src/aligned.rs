//! A heap buffer whose address and capacity are multiples of [`ALIGN`], as `O_DIRECT` needs.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::ALIGN;

/// A fixed-capacity, zero-initialised, page-aligned byte buffer with a length.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    cap: usize,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8], like Vec<u8>.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of at least `cap` bytes (rounded up to a multiple of ALIGN), length 0.
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(1).div_ceil(ALIGN) * ALIGN;
        let layout = Layout::from_size_align(cap, ALIGN).expect("buffer size overflows");
        // SAFETY: layout has non-zero size (cap >= ALIGN).
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, cap, len: 0 }
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Set the length; bytes past the old length keep whatever they held (initialised memory).
    pub fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.cap,
            "AlignedBuf::set_len({len}) beyond capacity {}",
            self.cap
        );
        self.len = len;
    }

    /// The whole capacity as a mutable slice.
    pub fn spare(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for cap initialised bytes (alloc_zeroed) and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: len <= cap and the first cap bytes are initialised.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees uniqueness.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe {
            dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.cap, ALIGN),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        let mut b = AlignedBuf::new(10);
        assert_eq!(b.capacity(), ALIGN);
        assert_eq!(b.spare().as_ptr() as usize % ALIGN, 0);
        b.set_len(5);
        assert_eq!(&b[..], &[0; 5]);
        b[0] = 7;
        assert_eq!(b[0], 7);
    }

    #[test]
    #[should_panic(expected = "beyond capacity")]
    fn set_len_is_bounded() {
        AlignedBuf::new(4096).set_len(4097);
    }
}
