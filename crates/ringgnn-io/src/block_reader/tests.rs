use std::io;
use std::sync::Arc;

use super::*;
use crate::testing::{ReadLog, Recorder};

/// A file of `pages` pages of u32 values equal to their position; blocks of 4 pages.
fn reader(pages: usize, chunk_pages: usize) -> (BlockReader, ReadLog) {
    let data: Vec<u8> = (0..(pages * 1024) as u32)
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let (rec, log) = Recorder::new(data);
    let model = ReadModel {
        block: 4 * ALIGN,
        max_request: 8 * ALIGN,
        ..Default::default()
    };
    let len = (pages * ALIGN) as u64;
    (
        BlockReader::new(Box::new(rec), model, chunk_pages * ALIGN, len),
        log,
    )
}

fn bits(pages: &[usize], n: usize) -> Vec<u64> {
    let mut v = vec![0u64; n.div_ceil(64)];
    for &p in pages {
        v[p / 64] |= 1 << (p % 64);
    }
    v
}

fn value(r: &BlockReader, pos: u64) -> u32 {
    u32::from_le_bytes(r.bytes(pos * 4, 4).try_into().unwrap())
}

#[test]
fn the_model_reads_dense_blocks_whole_and_sparse_ones_by_page() {
    let m = ReadModel::default();
    assert_eq!(m.block_pages(), 256);
    // At 92k IOPS and 1.1 GB/s a random page costs about 3 sequential ones: a block is read
    // whole once about a third of its pages are needed in separate runs.
    assert!(!m.read_whole(10, 10, 256));
    assert!(m.read_whole(100, 100, 256));
    // Needed pages in one run cost their bytes only: never more than the whole block.
    assert!(!m.read_whole(255, 1, 256));
    assert!(
        (m.seconds(256, 1) - (256.0 * 4096.0 / 1.1e9 + (1.0 / 92e3 - 4096.0 / 1.1e9))).abs()
            < 1e-12
    );
}

#[test]
fn a_chunk_reads_each_needed_page_once_with_whole_dense_blocks() {
    // 16 pages in chunks of 8; blocks of 4 pages.
    let (mut r, log) = reader(16, 8);
    assert_eq!((r.chunk_pages(), r.chunks()), (8, 2));
    // Chunk 0: block 0 has pages 0, 2, 3 (dense: read whole), block 1 only page 6.
    r.load(0, &bits(&[0, 2, 3, 6], 8)).unwrap();
    assert_eq!(value(&r, 2 * 1024 + 5), 2 * 1024 + 5);
    assert_eq!(value(&r, 6 * 1024), 6 * 1024);
    assert_eq!(value(&r, 1023), 1023);
    let reqs = log.lock().unwrap().pop().unwrap();
    let pages: Vec<(u64, usize)> = reqs
        .iter()
        .map(|q| (q.offset / PAGE, q.len / ALIGN))
        .collect();
    assert_eq!(pages, vec![(0, 4), (6, 1)]);
    let c = r.counts();
    assert_eq!((c.pages, c.requests, c.loads), (5, 2, 1));
    assert_eq!((c.sequential_bytes, c.random_bytes), (4 * 4096, 4096));
    // Chunk 1: nothing of pages 8-11, pages 12 and 15; an empty chunk reads nothing.
    r.load(1, &bits(&[4, 7], 8)).unwrap();
    assert_eq!(value(&r, 15 * 1024 + 3), 15 * 1024 + 3);
    let reqs = log.lock().unwrap().pop().unwrap();
    assert_eq!(reqs.len(), 2, "two scattered pages: two requests");
    r.load(1, &bits(&[], 8)).unwrap();
    assert!(log.lock().unwrap().is_empty(), "no read for an empty chunk");
}

#[test]
fn whole_blocks_merge_up_to_the_request_cap_and_stop_at_the_end_of_the_file() {
    // 10 pages, one chunk of 12: blocks 0-3, 4-7, 8-9 (the file ends inside the third block).
    let (mut r, log) = reader(10, 12);
    r.load(0, &bits(&(0..10).collect::<Vec<_>>(), 12)).unwrap();
    let reqs = log.lock().unwrap().pop().unwrap();
    let pages: Vec<(u64, usize)> = reqs
        .iter()
        .map(|q| (q.offset / PAGE, q.len / ALIGN))
        .collect();
    assert_eq!(
        pages,
        vec![(0, 8), (8, 2)],
        "runs capped at 8 pages, nothing past the end"
    );
    for q in &reqs {
        assert_eq!((q.offset % PAGE, q.len % ALIGN, q.dst % ALIGN), (0, 0, 0));
    }
    assert_eq!(value(&r, 9 * 1024 + 1023), 9 * 1024 + 1023);
}

#[test]
#[should_panic(expected = "was not loaded")]
fn bytes_outside_the_loaded_pages_is_a_bug() {
    let (mut r, _) = reader(8, 8);
    r.load(0, &bits(&[0], 8)).unwrap();
    value(&r, 7 * 1024);
}

#[test]
fn a_cancelled_reader_stops_before_reading() {
    let (mut r, log) = reader(8, 8);
    let flag = Arc::new(AtomicBool::new(true));
    r.set_cancel(flag);
    let e = r.load(0, &bits(&[1], 8)).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::Interrupted);
    assert!(log.lock().unwrap().is_empty());
}
