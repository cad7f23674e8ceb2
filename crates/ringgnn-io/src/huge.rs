//! Transparent huge pages for large buffers read at random (the aggregation's edges and pieces
//! of rows): a hint to the kernel, as numpy gives its own large arrays.
//!
//! Each random access to a buffer of 4 KiB pages much larger than the TLB's reach costs a page
//! walk, and in a virtual machine a nested one, on top of the cache miss: on this project's
//! machine, quiet, the fold's bare access pattern with its accumulators visited at random took
//! 130 ns an edge on huge pages and 193 ns on 4 KiB pages (visited in order, as the fold does,
//! the same either way; the fold itself 0.95-0.98x with its arrays advised: `docs/benchmarks.md`,
//! "What bounds a wide layer"). Where the system's policy is `madvise` (the common default),
//! memory gets huge pages only where asked for.

/// Buffers smaller than this are left alone (numpy's threshold for the same hint).
pub const HUGE_MIN_BYTES: usize = 4 << 20;

/// Ask for the whole 2 MiB pages within `buf` to be huge pages when they are first touched (so
/// call it on capacity not yet written: `Vec::spare_capacity_mut`). A hint: it changes no byte,
/// and where it is refused (no transparent huge pages, an old kernel) nothing happens.
pub fn advise_huge_pages<T>(buf: &[T]) {
    advise_whole_pages(buf, libc::MADV_HUGEPAGE);
}

/// Back the whole 2 MiB pages within `buf`, already written, with huge pages now
/// (`MADV_COLLAPSE`, Linux 6.1 on: the kernel copies them into huge pages, whatever the
/// system's policy short of `never`), for memory that could not be advised before it was filled
/// (an `Arc<[T]>` made from a vector). A hint: it changes no byte, and where it is refused (an
/// older kernel, no huge page free) nothing happens.
pub fn collapse_huge_pages<T>(buf: &[T]) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    advise_whole_pages(buf, libc::MADV_COLLAPSE);
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = buf;
}

/// `madvise(advice)` on the whole 2 MiB pages within `buf`, for a buffer of at least
/// [`HUGE_MIN_BYTES`]; the result is ignored (both callers' advice is a hint).
fn advise_whole_pages<T>(buf: &[T], advice: libc::c_int) {
    const HUGE: usize = 2 << 20;
    let bytes = std::mem::size_of_val(buf);
    if bytes < HUGE_MIN_BYTES {
        return;
    }
    let start = (buf.as_ptr() as usize).next_multiple_of(HUGE);
    let end = (buf.as_ptr() as usize + bytes) & !(HUGE - 1);
    if end <= start {
        return;
    }
    // SAFETY: the range lies within `buf`, memory this process owns and maps; MADV_HUGEPAGE
    // changes how its pages are backed and MADV_COLLAPSE moves their contents to huge pages,
    // neither changing a byte, and either fails harmlessly where it is not available.
    #[allow(unsafe_code)]
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, advice);
    }
}

/// The items of `items` in a vector whose pages were advised huge before it was filled.
pub fn collect_huge<T>(items: impl ExactSizeIterator<Item = T>) -> Vec<T> {
    let mut v = Vec::with_capacity(items.len());
    advise_huge_pages(v.spare_capacity_mut());
    v.extend(items);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags of the mapping holding `addr` (`/proc/self/smaps`' `VmFlags` line).
    fn vm_flags(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) =
                        (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                    {
                        inside = (a..b).contains(&addr);
                        continue;
                    }
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags.to_string());
                }
            }
        }
        None
    }

    #[test]
    fn a_large_buffer_is_advised_and_keeps_its_bytes() {
        let v = collect_huge(0..3u32 << 20);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
        // Where the kernel has transparent huge pages, the buffer's whole 2 MiB pages are
        // marked for them ("hg"); elsewhere the advice did nothing, which is all it may do.
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            let inner = (v.as_ptr() as usize).next_multiple_of(2 << 20);
            let flags = vm_flags(inner).expect("the buffer's mapping in /proc/self/smaps");
            assert!(
                flags.split_whitespace().any(|f| f == "hg"),
                "VmFlags:{flags}"
            );
        }
    }

    #[test]
    fn a_written_buffer_collapsed_keeps_its_bytes() {
        let v: std::sync::Arc<[u64]> = (0..3u64 << 20).map(|x| x * 7).collect();
        collapse_huge_pages(&v);
        assert!(v.iter().enumerate().all(|(i, &x)| x == 7 * i as u64));
        let small = vec![3u8; 100];
        collapse_huge_pages(&small);
        collapse_huge_pages::<u8>(&[]);
        assert!(small.iter().all(|&x| x == 3));
    }

    #[test]
    fn small_and_empty_buffers_are_left_alone() {
        let v = vec![7u8; HUGE_MIN_BYTES - 1];
        advise_huge_pages::<u8>(&[]);
        advise_huge_pages(&v);
        let flags = vm_flags(v.as_ptr() as usize + v.len() / 2).unwrap_or_default();
        assert!(
            !flags.split_whitespace().any(|f| f == "hg"),
            "VmFlags:{flags}"
        );
        assert!(v.iter().all(|&x| x == 7));
    }
}
