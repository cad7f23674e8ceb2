//! The disk path: coalescing reads each needed page once (and never more requests than
//! distinct pages), 8-byte entries read the same as 4-byte ones, and every failure (bad seed,
//! bad fanout, short file, damaged index) is a clear error rather than a panic or garbage.

mod common;

use std::collections::BTreeSet;
use std::fs::File;
use std::io::ErrorKind;
use std::sync::Arc;

use common::{build, fan, SampleIds};
use ringgnn_io::PreadBatch;
use ringgnn_sampler::{CoalesceOptions, Error, Fanout, Indices, NeighborSampler, NeighborSource};
use ringgnn_store::manifest::IndexDtype;
use ringgnn_store::rng;

const ONE_PAGE: CoalesceOptions = CoalesceOptions {
    max_run: 4096,
    buffer: 4096,
};

#[test]
fn a_whole_list_is_one_read_per_run() {
    // Hub 0 with 5000 in-neighbors: 20000 bytes of u32, pages 0..=4.
    let edges: Vec<_> = (0..5000).map(|i| (i, 0)).collect();
    let (_d, ds) = build(&edges, None, false);
    let mut mem = NeighborSampler::open(
        &ds,
        &fan(&[-1]),
        false,
        NeighborSource::memory(&ds).unwrap(),
    )
    .unwrap();
    let want = mem.sample_ids(&[0], 0, 0, 0, false).unwrap();
    assert_eq!(want.row.len(), 5000);
    assert_eq!(mem.io_stats().reads, 0);
    for (opts, reads) in [(CoalesceOptions::default(), 1), (ONE_PAGE, 5)] {
        let b = NeighborSource::pread(&ds, opts).unwrap();
        assert_eq!(b.name(), "pread");
        let mut s = NeighborSampler::open(&ds, &fan(&[-1]), false, b).unwrap();
        assert_eq!(s.sample_ids(&[0], 0, 0, 0, false).unwrap(), want);
        let st = s.io_stats();
        assert_eq!((st.reads, st.bytes), (reads, 5 * 4096), "{opts:?}");
    }
}

#[test]
fn coalescing_reads_no_more_than_the_distinct_pages() {
    let n = 20_000u64;
    let mut r = rng::stream(5, 5, 5);
    let edges: Vec<_> = (0..200_000)
        .map(|_| (rng::below(&mut r, n), rng::below(&mut r, n)))
        .collect();
    let (_d, ds) = build(&edges, Some(n), false);
    let seeds: Vec<u64> = (0..300).map(|i| i * 61).collect();
    let fanouts = fan(&[10, 5]);
    let mut big = NeighborSampler::open(
        &ds,
        &fanouts,
        false,
        NeighborSource::pread(&ds, Default::default()).unwrap(),
    )
    .unwrap();
    let mut small = NeighborSampler::open(
        &ds,
        &fanouts,
        false,
        NeighborSource::pread(&ds, ONE_PAGE).unwrap(),
    )
    .unwrap();
    for batch in 0..5 {
        let (b0, s0) = (big.io_stats(), small.io_stats());
        let out = big.sample_ids(&seeds, 1, 0, batch, true).unwrap();
        assert_eq!(small.sample_ids(&seeds, 1, 0, batch, true).unwrap(), out);
        let (b1, s1) = (big.io_stats(), small.io_stats());
        // Pages are counted per hop: each hop is read on its own, after its draws.
        let edge = out.edge.as_ref().unwrap();
        let pages: u64 = (1..=out.hops())
            .map(|k| {
                let set: BTreeSet<u64> = edge[out.hop_edges(k)]
                    .iter()
                    .map(|e| e * 4 / 4096)
                    .collect();
                set.len() as u64
            })
            .sum();
        let entries = edge.len() as u64;
        assert!(
            pages < entries,
            "the test needs pages shared by several entries"
        );
        // Exactly one page of bytes per distinct page, whatever the run cap.
        assert_eq!(b1.bytes - b0.bytes, pages * 4096);
        assert_eq!(s1.bytes - s0.bytes, pages * 4096);
        // One request per page with one-page runs; merged runs need fewer.
        assert_eq!(s1.reads - s0.reads, pages);
        assert!(
            b1.reads - b0.reads < pages,
            "adjacent pages were not merged"
        );
        // A one-page buffer needs one read batch per page.
        assert_eq!(s1.batches - s0.batches, pages);
    }
}

/// Write `entries` as a page-padded little-endian file of `width`-byte integers.
fn write_indices(path: &std::path::Path, entries: &[u64], width: usize) {
    let mut b: Vec<u8> = entries
        .iter()
        .flat_map(|&x| x.to_le_bytes()[..width].to_vec())
        .collect();
    b.resize(b.len().div_ceil(4096) * 4096, 0);
    std::fs::write(path, b).unwrap();
}

#[test]
fn u64_entries_sample_like_u32_entries() {
    // A random CSC graph of 3000 nodes written by hand in both widths.
    let n = 3000u64;
    let mut r = rng::stream(9, 9, 9);
    let mut indptr = vec![0u64];
    let mut entries = vec![];
    for _ in 0..n {
        let deg = rng::below(&mut r, 12);
        let mut list: Vec<u64> = (0..deg).map(|_| rng::below(&mut r, n)).collect();
        list.sort_unstable();
        entries.extend(list);
        indptr.push(entries.len() as u64);
    }
    let dir = tempfile::tempdir().unwrap();
    let (p32, p64) = (dir.path().join("i32.bin"), dir.path().join("i64.bin"));
    write_indices(&p32, &entries, 4);
    write_indices(&p64, &entries, 8);
    let e = entries.len() as u64;
    assert_eq!(
        Indices::load(&p64, IndexDtype::U64, e).unwrap(),
        Indices::U64(entries.clone())
    );
    let backends = vec![
        NeighborSource::Memory(Arc::new(Indices::load(&p32, IndexDtype::U32, e).unwrap())),
        NeighborSource::Memory(Arc::new(Indices::U64(entries.clone()))),
        NeighborSource::disk(
            Box::new(PreadBatch::new(File::open(&p64).unwrap())),
            &p64,
            IndexDtype::U64,
            ONE_PAGE,
        ),
        NeighborSource::disk(
            Box::new(PreadBatch::new(File::open(&p64).unwrap())),
            &p64,
            IndexDtype::U64,
            CoalesceOptions::default(),
        ),
    ];
    let seeds: Vec<u64> = (0..100).map(|i| i * 29).collect();
    let outs: Vec<_> = backends
        .into_iter()
        .map(|b| {
            let mut s = NeighborSampler::new(indptr.clone(), &fan(&[4, 3, 2]), false, b).unwrap();
            s.sample_ids(&seeds, 3, 1, 2, true).unwrap()
        })
        .collect();
    assert!(outs[0].row.len() > 500);
    for o in &outs[1..] {
        assert_eq!(o, &outs[0]);
    }
}

#[test]
fn bad_seeds_and_fanouts_are_clear_errors() {
    let (_d, ds) = build(&[(0, 1), (1, 2)], None, false);
    let mut s = NeighborSampler::open(&ds, &fan(&[2]), false, NeighborSource::memory(&ds).unwrap())
        .unwrap();
    let err = s.sample_ids(&[1, 3, 7], 0, 0, 0, false).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Seed {
                id: 3,
                num_nodes: 3
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "seed node 3 is out of range: the graph has 3 nodes (ids 0..2)"
    );
    // A sampler made for another graph refuses seeds checked against this one.
    let other = ringgnn_sampler::Seeds::new(vec![0], 10).unwrap();
    let err = s.sample(other.as_slice(), 0, 0, 0, false).unwrap_err();
    assert!(err.to_string().contains("a graph of 10 nodes"), "{err}");
    for (fanouts, bad) in [(&[2, 0][..], 0), (&[-2][..], -2)] {
        let msg = Fanout::parse_all(fanouts).unwrap_err().to_string();
        assert!(msg.starts_with(&format!("fanout {bad} at hop")), "{msg}");
        assert!(msg.contains("-1 for all"), "{msg}");
    }
}

#[test]
fn a_short_neighbor_file_is_an_io_error_naming_it() {
    let (_d, ds) = build(&[(0, 1), (1, 2)], None, false);
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short-indices.bin");
    std::fs::write(&short, b"").unwrap();
    let b = NeighborSource::disk(
        Box::new(PreadBatch::new(File::open(&short).unwrap())),
        &short,
        IndexDtype::U32,
        CoalesceOptions::default(),
    );
    let mut s = NeighborSampler::open(&ds, &fan(&[1]), false, b).unwrap();
    let err = s.sample_ids(&[2], 0, 0, 0, false).unwrap_err();
    match &err {
        Error::Io { path, source } => {
            assert_eq!(path, &short);
            assert_eq!(source.kind(), ErrorKind::UnexpectedEof);
        }
        e => panic!("expected an I/O error, got {e:?}"),
    }
    assert!(err.to_string().contains("short-indices.bin"), "{err}");
    // A missing file when loading into memory names the file too.
    let gone = dir.path().join("gone.bin");
    let err = Indices::load(&gone, IndexDtype::U32, 1).unwrap_err();
    assert!(matches!(&err, Error::Io { source, .. } if source.kind() == ErrorKind::NotFound));
    assert!(err.to_string().contains("gone.bin"), "{err}");
}

#[test]
fn damaged_graphs_are_corrupt_errors() {
    let mem = |v: Vec<u32>| NeighborSource::Memory(Arc::new(Indices::U32(v)));
    // The offset index runs past the neighbor file.
    let err = NeighborSampler::new(vec![0, 5], &fan(&[1]), false, mem(vec![0; 2]))
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("neighbor file has 2 entries"),
        "{err}"
    );
    // The offset index decreases.
    let err = NeighborSampler::new(vec![0, 2, 1], &fan(&[1]), false, mem(vec![0; 2]))
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("indptr[1] = 2 > indptr[2] = 1"),
        "{err}"
    );
    let err = NeighborSampler::new(vec![], &fan(&[1]), false, mem(vec![]))
        .err()
        .unwrap();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    // A neighbor id beyond the node count.
    let mut s = NeighborSampler::new(vec![0, 1], &fan(&[1]), false, mem(vec![9])).unwrap();
    let err = s.sample_ids(&[0], 0, 0, 0, false).unwrap_err();
    assert!(
        err.to_string()
            .contains("entry 0 of the neighbor file is 9"),
        "{err}"
    );
}
