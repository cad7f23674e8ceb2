//! Random 4 KiB reads of one file, pread vs io_uring, buffered and O_DIRECT, at queue depth 1
//! and 64, side by side in one run.
//!
//! cargo run --release -p ringgnn-io --example randread -- [FILE] [SIZE_MIB] [SECONDS]
//!
//! Without FILE a 1 GiB file is written to the temp directory and removed afterwards. Buffered
//! runs are cold: the file's pages are dropped from the page cache (POSIX_FADV_DONTNEED) before
//! the run and every 16k reads (outside the timed sections), and readahead is off
//! (POSIX_FADV_RANDOM), so that most reads reach the device like O_DIRECT reads do. pread has no
//! queue: "QD 64" for it means batches of 64 reads issued one after another.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ringgnn_io::{AlignedBuf, DirectFile, PreadBatch, ReadBatch, ReadReq, UringBatch, ALIGN};

fn fadvise(f: &File, advice: libc::c_int) {
    // SAFETY: advisory call on a descriptor `f` keeps open; no memory is passed.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, advice) };
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let size_mib: u64 = args.get(1).map_or(1024, |s| s.parse().expect("SIZE_MIB"));
    let secs: f64 = args.get(2).map_or(3.0, |s| s.parse().expect("SECONDS"));
    let (path, temp) = match args.first() {
        Some(p) => (PathBuf::from(p), false),
        None => (
            std::env::temp_dir().join(format!("ringgnn-randread-{}.bin", std::process::id())),
            true,
        ),
    };
    if temp || !path.exists() {
        eprintln!("writing {size_mib} MiB to {}", path.display());
        let mut f = File::create(&path)?;
        let mut chunk = vec![0u8; 1 << 20];
        for (i, x) in chunk.iter_mut().enumerate() {
            *x = (i * 31 % 251) as u8;
        }
        for _ in 0..size_mib {
            f.write_all(&chunk)?;
        }
        f.sync_all()?;
    }
    let pages = std::fs::metadata(&path)?.len() / ALIGN as u64;
    println!(
        "file {} ({} MiB), 4 KiB random reads, {secs} s per row",
        path.display(),
        (pages * ALIGN as u64) >> 20
    );
    println!(
        "{:<14} {:>4} {:>8} {:>12} {:>9} {:>10}",
        "backend", "QD", "direct", "reads/s", "MB/s", "us/read"
    );
    let mut rng = 0x1234_5678_9abc_def0u64;
    for direct in [false, true] {
        for qd in [1u32, 64] {
            for uring in [false, true] {
                let file = if direct {
                    let d = DirectFile::open(&path)?;
                    assert!(d.is_direct(), "the filesystem refuses O_DIRECT");
                    d.into_file()
                } else {
                    File::open(&path)?
                };
                let cache = file.try_clone()?;
                if !direct {
                    fadvise(&cache, libc::POSIX_FADV_RANDOM);
                    fadvise(&cache, libc::POSIX_FADV_DONTNEED);
                }
                let mut b: Box<dyn ReadBatch> = if uring {
                    Box::new(UringBatch::with_depth(file, qd)?)
                } else {
                    Box::new(PreadBatch::new(file))
                };
                // Several rounds of the queue per batch keep it full between batches.
                let batch = if qd == 1 { 1 } else { qd as usize * 8 };
                let mut buf = AlignedBuf::new(batch * ALIGN);
                buf.set_len(batch * ALIGN);
                let mut reqs = vec![
                    ReadReq {
                        offset: 0,
                        len: ALIGN,
                        dst: 0
                    };
                    batch
                ];
                let (mut timed, mut reads, mut since_drop) = (Duration::ZERO, 0u64, 0u64);
                while timed.as_secs_f64() < secs {
                    for (i, r) in reqs.iter_mut().enumerate() {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        *r = ReadReq {
                            offset: rng % pages * ALIGN as u64,
                            len: ALIGN,
                            dst: i * ALIGN,
                        };
                    }
                    let t = Instant::now();
                    b.read_batch(&reqs, &mut buf)?;
                    timed += t.elapsed();
                    reads += batch as u64;
                    since_drop += batch as u64;
                    if !direct && since_drop >= 16_384 {
                        fadvise(&cache, libc::POSIX_FADV_DONTNEED);
                        since_drop = 0;
                    }
                }
                let s = timed.as_secs_f64();
                println!(
                    "{:<14} {:>4} {:>8} {:>12.0} {:>9.1} {:>10.1}",
                    b.name(),
                    qd,
                    direct,
                    reads as f64 / s,
                    reads as f64 * ALIGN as f64 / s / 1e6,
                    s * 1e6 / reads as f64
                );
            }
        }
    }
    if temp {
        std::fs::remove_file(&path)?;
    }
    Ok(())
}
