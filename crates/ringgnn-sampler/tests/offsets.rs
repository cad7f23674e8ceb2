//! The in-memory offset index ([`Offsets`]): equal to the `u64` offsets it holds in each layout,
//! its exact sizes at the boundaries, and the errors of a damaged offset-index file.

mod common;

use common::{build, fan};
use proptest::prelude::*;
use ringgnn_sampler::{NeighborSampler, NeighborSource, OffsetIndex, Offsets, BLOCK_SHIFT};

/// Every accessor of `o` against the `u64` offsets `want`.
fn check_equal(o: &Offsets, want: &[u64]) {
    assert_eq!(o.len(), want.len());
    assert_eq!(o.is_empty(), want.is_empty());
    assert_eq!(o.last(), want.last().copied());
    assert_eq!(o.to_vec(), want);
    for (i, &x) in want.iter().enumerate() {
        assert_eq!(o.get(i), x, "entry {i}");
    }
    for v in 0..want.len().saturating_sub(1) {
        assert_eq!(o.range(v), (want[v], want[v + 1]), "range of {v}");
        assert_eq!(o.degree(v), want[v + 1] - want[v]);
    }
    let degrees: Vec<u64> = want.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(o.degrees().collect::<Vec<_>>(), degrees);
}

/// Ascending offsets from 0 with `degrees`, plus `jump` added at every `jumps`-th node (how a
/// test reaches counts over 2^32 with few entries).
fn offsets(degrees: &[u64], jump: u64, every: usize) -> Vec<u64> {
    let mut v = vec![0u64];
    for (i, &d) in degrees.iter().enumerate() {
        let extra = if every > 0 && i % every == every - 1 {
            jump
        } else {
            0
        };
        v.push(v.last().unwrap() + d + extra);
    }
    v
}

#[test]
fn narrow_when_every_offset_fits_u32() {
    let want = offsets(&[3, 0, 7, 1], 0, 0);
    let o = Offsets::from(want.clone());
    assert_eq!(o.layout(), "narrow");
    assert_eq!(o.bytes(), 4 * 5);
    assert_eq!(o.bytes(), Offsets::bytes_for(5, 11));
    check_equal(&o, &want);
}

#[test]
fn boundaries_of_the_edge_count() {
    // Empty, one node without edges, one node with all of them.
    let empty = Offsets::from(Vec::<u64>::new());
    assert_eq!((empty.len(), empty.bytes(), empty.last()), (0, 0, None));
    assert_eq!(empty.degrees().count(), 0);
    let one = Offsets::from(vec![0u64, 0]);
    assert_eq!(
        (one.layout(), one.bytes(), one.range(0)),
        ("narrow", 8, (0, 0))
    );
    // 2^32 - 1 edges still fit u32; 2^32 do not: blocks, one u64 base per 65,536 entries.
    let max = u32::MAX as u64;
    let o = Offsets::from(vec![0, max]);
    assert_eq!((o.layout(), o.bytes(), o.range(0)), ("narrow", 8, (0, max)));
    assert_eq!(o.bytes(), Offsets::bytes_for(2, max));
    // In blocks of one entry each delta is 0; in one block of 65,536 the span is 2^32.
    let o = Offsets::with_block_shift(&[0, 1 << 32], 0);
    assert_eq!((o.layout(), o.range(0)), ("blocked", (0, 1 << 32)));
    assert_eq!(o.bytes(), 4 * 2 + 8 * 2);
    let o = Offsets::from(vec![0, 1 << 32]);
    assert_eq!(
        (o.layout(), o.range(0), o.bytes()),
        ("wide", (0, 1 << 32), 16)
    );
    // Blocks of 2: the last offset starts a block of its own, its base over u32.
    let want = vec![0, 5, max + 1];
    let o = Offsets::with_block_shift(&want, 1);
    assert_eq!((o.layout(), o.bytes()), ("blocked", 3 * 4 + 2 * 8));
    assert_eq!(o.bytes(), 3 * 4 + 8 * 3u64.div_ceil(2));
    check_equal(&o, &want);
    // The default blocks: 2^32 edges on the last node of the first block, 1 on every other.
    let block = 1usize << BLOCK_SHIFT;
    let mut degrees = vec![1u64; 2 * block];
    degrees[block - 1] = 1 << 32;
    let want = offsets(&degrees, 0, 0);
    let o = Offsets::from(want.clone());
    assert_eq!(o.layout(), "blocked");
    assert_eq!(o.bytes(), 4 * (2 * block as u64 + 1) + 8 * 3);
    assert_eq!(
        o.bytes(),
        Offsets::bytes_for(want.len() as u64, *want.last().unwrap())
    );
    check_equal(&o, &want);
    assert_eq!(
        Offsets::bytes_for(1 << BLOCK_SHIFT, 1 << 32),
        4 * (1 << BLOCK_SHIFT) + 8
    );
    assert_eq!(
        Offsets::bytes_for((1 << BLOCK_SHIFT) + 1, 1 << 32),
        4 * ((1 << BLOCK_SHIFT) + 1) + 16
    );
}

#[test]
fn a_block_spanning_2_32_edges_and_offsets_that_do_not_ascend_stay_u64() {
    // One block (of 2 entries) from 1 to 2^32 + 1: its delta does not fit.
    let want = vec![0, 1, 1 << 32, (1 << 32) + 1];
    let o = Offsets::with_block_shift(&want, 2);
    assert_eq!((o.layout(), o.bytes()), ("wide", 32));
    check_equal(&o, &want);
    // A corrupt index is kept as read, for the check to name the entries.
    let bad = vec![0, 5, 2, 7];
    let o = Offsets::from(bad.clone());
    assert_eq!(o.to_vec(), bad);
    let bad = vec![0, (1 << 33) + 5, 1 << 33, 1 << 34];
    let o = Offsets::with_block_shift(&bad, 1);
    assert_eq!((o.layout(), o.to_vec()), ("wide", bad));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any offsets: narrow ones, and ones over 2^32 (jumps of up to 2^33 between blocks) in
    /// blocks of 1 to 16 entries, equal the u64 offsets; their size is the planned one when no
    /// block spans 2^32.
    #[test]
    fn compact_equals_the_u64_offsets(
        degrees in prop::collection::vec(0u64..50, 0..200),
        jump in prop_oneof![Just(0u64), (1u64 << 32)..(1u64 << 33)],
        every in 1usize..20,
        shift in 0u32..5,
    ) {
        let want = offsets(&degrees, jump, every);
        let o = Offsets::with_block_shift(&want, shift);
        check_equal(&o, &want);
        let edges = *want.last().unwrap();
        let n = want.len() as u64;
        if edges <= u32::MAX as u64 {
            prop_assert_eq!(o.layout(), "narrow");
            prop_assert_eq!(o.bytes(), 4 * n);
        } else if o.layout() == "blocked" {
            prop_assert_eq!(o.bytes(), 4 * n + 8 * n.div_ceil(1 << shift));
        } else {
            // Wide only when some block spans 2^32 edges or more.
            let block = 1usize << shift;
            let spans = want.chunks(block).any(|c| c[c.len() - 1] - c[0] > u32::MAX as u64);
            prop_assert!(spans);
            prop_assert_eq!(o.bytes(), 8 * n);
        }
    }

    /// Loading in pieces gives the same index as the whole file.
    #[test]
    fn loading_equals_the_file(edges in prop::collection::vec((0u64..40, 0u64..40), 1..120)) {
        let (_dir, ds) = build(&edges, Some(40), false);
        let o = Offsets::load(&ds).unwrap();
        check_equal(&o, &ds.load_indptr().unwrap());
    }
}

#[test]
fn a_truncated_offset_index_fails_with_the_file_named() {
    let edges: Vec<(u64, u64)> = (0..50).map(|i| (i, (i * 7 + 1) % 50)).collect();
    let (_dir, ds) = build(&edges, None, false);
    let path = ds.path_of("indptr").unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(8 * 20).unwrap();
    let whole = ds.load_indptr().unwrap_err().to_string();
    assert!(whole.contains("indptr"), "{whole}");
    for err in [
        Offsets::load(&ds).unwrap_err().to_string(),
        OffsetIndex::load(&ds).unwrap_err().to_string(),
        NeighborSampler::open(&ds, &fan(&[2]), false, memory(&ds))
            .err()
            .unwrap()
            .to_string(),
    ] {
        assert_eq!(err, whole);
    }
}

#[test]
fn a_corrupt_offset_index_fails_with_the_entries_named() {
    let edges: Vec<(u64, u64)> = (0..50).map(|i| (i, (i * 7 + 1) % 50)).collect();
    let (_dir, ds) = build(&edges, None, false);
    let path = ds.path_of("indptr").unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    // indptr[3] = 1000 > indptr[4].
    bytes[24..32].copy_from_slice(&1000u64.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let err = NeighborSampler::open(&ds, &fan(&[2]), false, memory(&ds))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("offset index: indptr[3] = 1000 > indptr[4] = 4; rebuild the dataset"),
        "{err}"
    );
}

fn memory(ds: &ringgnn_store::Dataset) -> NeighborSource {
    NeighborSource::memory(ds).unwrap()
}
