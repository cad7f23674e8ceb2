//! Every backend returns exactly the file's bytes or a clear error, with the same error kinds.

mod common;

use std::fs::File;
use std::io::ErrorKind;

use common::{backends, direct_supported, known_file, Rng, TempDir};
use ringgnn_io::{
    probe_uring, AlignedBuf, IoStats, PreadBatch, ReadBatch, ReadReq, UringBatch, ALIGN,
};

/// Lay `(offset, len)` pairs out back to back in a buffer; returns requests and buffer size.
fn layout(pairs: &[(u64, usize)]) -> (Vec<ReadReq>, usize) {
    let mut dst = 0;
    let reqs = pairs
        .iter()
        .map(|&(offset, len)| {
            let r = ReadReq { offset, len, dst };
            dst += len;
            r
        })
        .collect();
    (reqs, dst)
}

fn check_against(data: &[u8], reqs: &[ReadReq], buf: &[u8], what: &str) {
    for (i, r) in reqs.iter().enumerate() {
        let want = &data[r.offset as usize..r.offset as usize + r.len];
        assert!(
            &buf[r.dst..r.dst + r.len] == want,
            "{what}: request {i} {r:?} returned wrong bytes"
        );
    }
}

/// Random offsets and lengths, the last partial page, duplicates and overlaps.
fn random_pairs(rng: &mut Rng, size: usize, n: usize) -> Vec<(u64, usize)> {
    let mut v: Vec<(u64, usize)> = Vec::with_capacity(n + 4);
    let last_page = (size - 1) / ALIGN * ALIGN;
    v.push((last_page as u64, size - last_page));
    v.push((size as u64 - 1, 1));
    for _ in 0..n {
        match rng.below(8) {
            0 if !v.is_empty() => v.push(v[rng.below(v.len() as u64) as usize]), // duplicate
            1 if !v.is_empty() => {
                // overlaps an earlier request
                let (o, l) = v[rng.below(v.len() as u64) as usize];
                let o = o + rng.below(l as u64 + 1);
                let l = (rng.below(3 * ALIGN as u64) as usize).min(size - o as usize);
                v.push((o, l));
            }
            _ => {
                let o = rng.below(size as u64);
                let l = (rng.below(20_000) as usize).min(size - o as usize);
                v.push((o, l));
            }
        }
    }
    v
}

#[test]
fn random_batches_return_the_files_bytes() {
    let dir = TempDir::new();
    let size = (3 << 20) + 1234; // ends in a partial page
    let (path, data) = known_file(&dir, "f", size);
    let mut rng = Rng::new(7);
    let mut all = backends(&path, false);
    if probe_uring().is_ok() {
        // a shallow ring too, so that batches wrap around the queue many times
        all.push(Box::new(
            UringBatch::with_depth(File::open(&path).unwrap(), 4).unwrap(),
        ));
    }
    for round in 0..40 {
        let n = 1 + rng.below(300) as usize;
        let (reqs, total) = layout(&random_pairs(&mut rng, size, n));
        for b in all.iter_mut() {
            let mut buf = vec![0xAAu8; total];
            b.read_batch(&reqs, &mut buf).unwrap();
            check_against(&data, &reqs, &buf, &format!("{} round {round}", b.name()));
        }
    }
}

#[test]
fn direct_aligned_page_reads() {
    let dir = TempDir::new();
    let pages = 512;
    let (path, data) = known_file(&dir, "f", pages * ALIGN);
    if !direct_supported(&path) {
        return;
    }
    let mut rng = Rng::new(11);
    for mut b in backends(&path, true) {
        assert!(
            b.name() == "pread" || b.name() == "uring-direct",
            "{}",
            b.name()
        );
        for _ in 0..20 {
            let n = 1 + rng.below(200) as usize;
            let pairs: Vec<(u64, usize)> = (0..n)
                .map(|_| {
                    let p = rng.below(pages as u64 - 4);
                    (p * ALIGN as u64, (1 + rng.below(4) as usize) * ALIGN)
                })
                .collect();
            let (reqs, total) = layout(&pairs);
            let mut buf = AlignedBuf::new(total);
            buf.set_len(total);
            b.read_batch(&reqs, &mut buf).unwrap();
            check_against(&data, &reqs, &buf, b.name());
        }
    }
}

#[test]
fn unaligned_request_on_direct_file_is_invalid_input() {
    let dir = TempDir::new();
    let (path, _) = known_file(&dir, "f", 16 * ALIGN);
    if !direct_supported(&path) {
        return;
    }
    let good = ReadReq {
        offset: 0,
        len: ALIGN,
        dst: 0,
    };
    let bad = [
        ReadReq {
            offset: 512,
            len: ALIGN,
            dst: ALIGN,
        },
        ReadReq {
            offset: ALIGN as u64,
            len: 100,
            dst: ALIGN,
        },
        ReadReq {
            offset: ALIGN as u64,
            len: ALIGN,
            dst: ALIGN + 512,
        },
    ];
    for mut b in backends(&path, true) {
        for r in bad {
            let mut buf = AlignedBuf::new(4 * ALIGN);
            buf.set_len(4 * ALIGN);
            let e = b.read_batch(&[good, r], &mut buf).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{}: {e}", b.name());
            assert!(
                e.to_string().contains("read request 1"),
                "{}: {e}",
                b.name()
            );
            assert!(e.to_string().contains("O_DIRECT"), "{}: {e}", b.name());
        }
        // checked before any read is issued
        assert_eq!(b.stats().reads, 0, "{}", b.name());
    }
}

#[test]
fn read_past_eof_is_unexpected_eof_for_every_backend() {
    let dir = TempDir::new();
    let size = 4 * ALIGN + 100;
    let (path, data) = known_file(&dir, "f", size);
    let ok = ReadReq {
        offset: 0,
        len: 64,
        dst: 0,
    };
    let past = [
        ReadReq {
            offset: size as u64 - 10,
            len: 20,
            dst: 64,
        }, // crosses the end
        ReadReq {
            offset: size as u64,
            len: 1,
            dst: 64,
        }, // starts at the end
        ReadReq {
            offset: 10 * size as u64,
            len: 5,
            dst: 64,
        }, // starts beyond it
    ];
    for mut b in backends(&path, false) {
        for r in past {
            let mut buf = vec![0u8; 128];
            let e = b.read_batch(&[ok, r], &mut buf).unwrap_err();
            assert_eq!(
                e.kind(),
                ErrorKind::UnexpectedEof,
                "{}: {r:?}: {e}",
                b.name()
            );
        }
        // the backend is still usable after an error
        let mut buf = vec![0u8; 64];
        b.read_batch(&[ok], &mut buf).unwrap();
        assert_eq!(&buf[..], &data[..64]);
    }
    if direct_supported(&path) {
        // O_DIRECT reads of whole pages: the last page of this file is partial
        let last = ReadReq {
            offset: 4 * ALIGN as u64,
            len: ALIGN,
            dst: 0,
        };
        for mut b in backends(&path, true) {
            let mut buf = AlignedBuf::new(ALIGN);
            buf.set_len(ALIGN);
            let e = b.read_batch(&[last], &mut buf).unwrap_err();
            assert_eq!(
                e.kind(),
                ErrorKind::UnexpectedEof,
                "{} direct: {e}",
                b.name()
            );
        }
    }
}

#[test]
fn an_error_mid_batch_waits_for_the_reads_in_flight() {
    let dir = TempDir::new();
    let size = 1 << 20;
    let (path, data) = known_file(&dir, "f", size);
    let mut pairs: Vec<(u64, usize)> = (0..2000)
        .map(|i| ((i * 509 % (size - 512)) as u64, 512))
        .collect();
    pairs[1000] = (size as u64, 8);
    let (reqs, total) = layout(&pairs);
    for mut b in backends(&path, false) {
        let mut buf = vec![0u8; total];
        let e = b.read_batch(&reqs, &mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnexpectedEof, "{}", b.name());
        let ok = &reqs[..1000];
        b.read_batch(ok, &mut buf).unwrap();
        check_against(&data, ok, &buf, b.name());
    }
}

#[test]
fn batch_much_larger_than_the_queue_depth() {
    let dir = TempDir::new();
    let size = 8 << 20;
    let (path, data) = known_file(&dir, "f", size);
    let mut rng = Rng::new(3);
    let pairs: Vec<(u64, usize)> = (0..10_000)
        .map(|_| (rng.below(size as u64 - 4096), 1 + rng.below(4096) as usize))
        .collect();
    let (reqs, total) = layout(&pairs);
    let mut all: Vec<Box<dyn ReadBatch>> =
        vec![Box::new(PreadBatch::new(File::open(&path).unwrap()))];
    match UringBatch::with_depth(File::open(&path).unwrap(), 32) {
        Ok(u) if probe_uring().is_ok() => {
            assert_eq!(u.depth(), 32);
            all.push(Box::new(u));
        }
        _ => eprintln!("skipping the io_uring backend: {:?}", probe_uring()),
    }
    for mut b in all {
        let mut buf = vec![0u8; total];
        b.read_batch(&reqs, &mut buf).unwrap();
        check_against(&data, &reqs, &buf, b.name());
        let s = b.stats();
        assert_eq!(s.batches, 1);
        assert_eq!(s.bytes, total as u64);
        // regular files on a local filesystem do not return short reads
        assert_eq!(s.reads, 10_000, "{}", b.name());
    }
}

#[test]
fn stats_count_batches_reads_and_bytes() {
    let dir = TempDir::new();
    let (path, _) = known_file(&dir, "f", 64 * 1024);
    let (reqs, total) = layout(&[
        (0, 100),
        (5000, 0),
        (9000, 4096),
        (9000, 4096),
        (65_000, 536),
    ]);
    for mut b in backends(&path, false) {
        assert_eq!(b.stats(), IoStats::default());
        let mut buf = vec![0u8; total];
        b.read_batch(&reqs, &mut buf).unwrap();
        b.read_batch(&[], &mut buf).unwrap();
        b.read_batch(&reqs[..1], &mut buf).unwrap();
        let want = IoStats {
            reads: 5,
            bytes: (total + 100) as u64,
            batches: 3,
        };
        assert_eq!(b.stats(), want, "{}", b.name()); // the empty request issues no read
    }
}

#[test]
fn request_outside_the_buffer_is_invalid_input() {
    let dir = TempDir::new();
    let (path, _) = known_file(&dir, "f", 8192);
    for mut b in backends(&path, false) {
        let mut buf = vec![0u8; 100];
        for r in [
            ReadReq {
                offset: 0,
                len: 101,
                dst: 0,
            },
            ReadReq {
                offset: 0,
                len: 1,
                dst: 100,
            },
            ReadReq {
                offset: 0,
                len: 2,
                dst: usize::MAX,
            },
        ] {
            let e = b.read_batch(&[r], &mut buf).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{}: {e}", b.name());
            assert!(e.to_string().contains("outside the 100-byte buffer"), "{e}");
        }
    }
}

#[test]
fn uring_depth_is_validated_and_names_say_which_mode() {
    if let Err(why) = probe_uring() {
        eprintln!("skipping: io_uring unavailable: {why}");
        return;
    }
    let dir = TempDir::new();
    let (path, _) = known_file(&dir, "f", 8192);
    for d in [0, ringgnn_io::MAX_DEPTH + 1] {
        let e = UringBatch::with_depth(File::open(&path).unwrap(), d)
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
    }
    let u = UringBatch::new(File::open(&path).unwrap()).unwrap();
    assert_eq!(
        (u.depth(), u.name()),
        (ringgnn_io::DEFAULT_DEPTH as usize, "uring")
    );
    if direct_supported(&path) {
        let f = ringgnn_io::DirectFile::open(&path).unwrap().into_file();
        assert_eq!(UringBatch::new(f).unwrap().name(), "uring-direct");
    }
}
