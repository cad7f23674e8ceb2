//! Turning scattered byte ranges of one file into few page-aligned reads: the planning step of
//! [`crate::PageReader`], which both readers of scattered data (the sampler's neighbor entries,
//! the feature gatherer's rows) go through.
//!
//! Ranges are visited in ascending order of offset. Each is mapped to the 4 KiB pages it
//! touches; pages already planned are not planned again, and adjacent pages are merged into runs
//! of at most `max_run` bytes, one [`ReadReq`] per run. Runs are packed back to back into the
//! caller's buffer, so the buffer holds the distinct pages in ascending order and a range that
//! spans several pages lands contiguously. Offsets, lengths and buffer positions are multiples
//! of [`ALIGN`], so the same requests serve buffered and `O_DIRECT` backends.

use crate::{ReadReq, ALIGN};

const PAGE: u64 = ALIGN as u64;

/// How reads are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoalesceOptions {
    /// Longest run of adjacent pages read by one request, in bytes (rounded up to a page).
    /// 128 KiB is where NVMe throughput for one request stops growing, and it keeps a few
    /// hundred requests in flight within the buffer.
    pub max_run: usize,
    /// Size of the aligned read buffer, in bytes (at least `max_run`): the most bytes one
    /// [`crate::ReadBatch::read_batch`] call reads. Work that needs more pages takes several
    /// calls ("waves").
    pub buffer: usize,
}

impl Default for CoalesceOptions {
    fn default() -> Self {
        CoalesceOptions {
            max_run: 128 << 10,
            buffer: 8 << 20,
        }
    }
}

impl CoalesceOptions {
    /// `max_run` rounded up to whole pages (at least one).
    pub fn run_bytes(&self) -> usize {
        self.max_run.max(1).div_ceil(ALIGN) * ALIGN
    }
}

/// Plan reads for a prefix of `ranges` (`(offset, len)` pairs, ascending by offset) that fits in
/// a buffer of `cap` bytes. On return `reqs` holds the requests (runs of at most `max_run`
/// bytes, a multiple of [`ALIGN`]) and `at[k]` the buffer position of the first byte of range
/// `k`; `at.len()` is the number of ranges planned, so the caller resumes after them. Returns
/// the bytes of buffer the requests fill. Both vectors are cleared first.
///
/// A range whose pages do not fit in the rest of the buffer ends the plan; the first range
/// always fits if `cap` is at least the pages one range can touch (`len.div_ceil(4096) + 1`
/// pages), otherwise this panics: size the buffer for the largest range.
pub fn coalesce_pages<I>(
    ranges: I,
    max_run: usize,
    cap: usize,
    reqs: &mut Vec<ReadReq>,
    at: &mut Vec<usize>,
) -> usize
where
    I: IntoIterator<Item = (u64, usize)>,
{
    reqs.clear();
    at.clear();
    let max_run = max_run.max(1).div_ceil(ALIGN) * ALIGN;
    let mut used = 0usize;
    // The highest page planned so far; every page from the first page of the latest range up
    // to it is in the buffer, contiguously (ranges come in ascending order).
    let mut last_page: Option<u64> = None;
    for (offset, len) in ranges {
        let first = offset / PAGE;
        let last = (offset + len.max(1) as u64 - 1) / PAGE;
        let new_from = match last_page {
            Some(lp) if first <= lp => lp + 1,
            _ => first,
        };
        let new_pages = if last >= new_from {
            (last - new_from + 1) as usize
        } else {
            0
        };
        if used + new_pages * ALIGN > cap {
            assert!(
                !at.is_empty(),
                "coalesce_pages: a {len}-byte range needs {new_pages} pages but the buffer \
                 holds {cap} bytes; size the buffer for the largest range"
            );
            break;
        }
        for page in new_from..new_from + new_pages as u64 {
            match reqs.last_mut() {
                Some(r) if last_page == Some(page - 1) && r.len < max_run => r.len += ALIGN,
                _ => reqs.push(ReadReq {
                    offset: page * PAGE,
                    len: ALIGN,
                    dst: used,
                }),
            }
            used += ALIGN;
            last_page = Some(page);
        }
        let top = last_page.expect("a range always has a planned page");
        at.push(used - ((top - first + 1) as usize) * ALIGN + (offset % PAGE) as usize);
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(page: u64, pages: usize, dst_page: usize) -> ReadReq {
        ReadReq {
            offset: page * PAGE,
            len: pages * ALIGN,
            dst: dst_page * ALIGN,
        }
    }

    fn plan(ranges: &[(u64, usize)], max_run: usize, cap: usize) -> (Vec<ReadReq>, Vec<usize>) {
        let (mut reqs, mut at) = (vec![], vec![]);
        let used = coalesce_pages(ranges.iter().copied(), max_run, cap, &mut reqs, &mut at);
        assert_eq!(used, reqs.iter().map(|r| r.len).sum::<usize>());
        (reqs, at)
    }

    #[test]
    fn small_ranges_share_pages_and_adjacent_pages_merge() {
        // Pages 0 (twice), 1, 3, 4, 5 with runs capped at two pages.
        let ranges = [
            (10, 8),
            (100, 8),
            (4096 + 5, 8),
            (3 * 4096, 4),
            (4 * 4096, 8192),
        ];
        let (reqs, at) = plan(&ranges, 2 * ALIGN, 1 << 20);
        assert_eq!(reqs, vec![req(0, 2, 0), req(3, 2, 2), req(5, 1, 4)]);
        assert_eq!(at, vec![10, 100, 4096 + 5, 2 * 4096, 3 * 4096]);
    }

    #[test]
    fn a_straddling_range_reuses_the_page_before_it() {
        // Rows of 4400 bytes back to back: row 1 covers pages 1-2, row 2 covers pages 2-3.
        let ranges = [(4400, 4400), (8800, 4400)];
        let (reqs, at) = plan(&ranges, 1 << 20, 1 << 20);
        assert_eq!(reqs, vec![req(1, 3, 0)]);
        assert_eq!(at, vec![4400 - 4096, 8800 - 4096]);
    }

    #[test]
    fn a_full_buffer_ends_the_plan() {
        let ranges = [(0, 4), (5 * 4096, 4), (9 * 4096, 4)];
        let (reqs, at) = plan(&ranges, 1 << 20, 2 * ALIGN);
        assert_eq!(reqs, vec![req(0, 1, 0), req(5, 1, 1)]);
        assert_eq!(at.len(), 2);
        let (reqs, at) = plan(&[], 1 << 20, ALIGN);
        assert!(reqs.is_empty() && at.is_empty());
    }

    #[test]
    #[should_panic(expected = "size the buffer")]
    fn a_range_larger_than_the_buffer_is_a_bug() {
        plan(&[(100, 4096)], 1 << 20, ALIGN);
    }
}
