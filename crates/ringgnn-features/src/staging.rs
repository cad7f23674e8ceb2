//! [`Stager`]: DiskGNN's feature packing (`002_e13ec28ab71e33ee.txt`, section 4) done online,
//! within a disk-space cap. For a hyperbatch, one pass over the feature file in file order copies
//! each batch's cold rows (those the hot-row cache does not hold) into that batch's own region of
//! a staging file, contiguously and in id order; each batch's gather is then one sequential read
//! of its region. Where the rows a hyperbatch needs are dense in the file, this turns hundreds of
//! thousands of random page reads per batch into one sequential pass plus sequential writes and
//! reads of exactly the bytes needed.
//!
//! The staging file is created in a directory the caller chooses (on the SSD) and unlinked at
//! once, so nothing is left behind whatever happens; it is written and read with `O_DIRECT` where
//! the filesystem allows. Its regions are page-aligned; rows are packed back to back in them, and
//! writes and reads go in units of `lcm(row size, 4 KiB)` so that no row straddles a unit.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ringgnn_io::{AlignedBuf, DirectFile, ALIGN};

use crate::{Error, Result};

/// Bytes a batch's write buffer holds at most (rounded down to whole units).
pub const WRITE_BUFFER: usize = 256 << 10;

/// Bytes of one read wave of a region (rounded down to whole units).
pub const READ_WAVE: usize = 8 << 20;

/// The largest unit (`lcm(row size, 4 KiB)`) staging takes: rows of sizes whose unit is larger
/// are gathered per batch instead.
pub const MAX_UNIT: usize = 1 << 20;

/// Fill `buf` from `file` at `offset`.
fn read_all_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the staging file is shorter than its regions",
                ))
            }
            Ok(m) => got += m,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Bytes of the smallest run of whole rows that is also whole pages.
pub fn unit(row_bytes: usize) -> usize {
    row_bytes / gcd(row_bytes, ALIGN) * ALIGN
}

struct Region {
    offset: u64,
    rows: u64,
    /// Bytes in the batch's write buffer, and bytes of the region written so far.
    fill: usize,
    written: u64,
}

/// A staging file and the regions of the current hyperbatch; see the module docs.
pub struct Stager {
    file: DirectFile,
    path: PathBuf,
    cap: u64,
    row_bytes: usize,
    unit: usize,
    regions: Vec<Region>,
    bufs: Vec<AlignedBuf>,
    wave: AlignedBuf,
    written: u64,
    read: u64,
    /// Time spent in the staging file's writes and reads (the device's part of staging).
    write_time: Duration,
    read_time: Duration,
}

impl Stager {
    /// Whether rows of `row_bytes` can be staged (see [`MAX_UNIT`]).
    pub fn supports(row_bytes: usize) -> bool {
        row_bytes > 0 && unit(row_bytes) <= MAX_UNIT
    }

    /// A staging file for rows of `row_bytes` in `dir`, holding at most `cap` bytes at a time.
    pub fn create(dir: &Path, cap: u64, row_bytes: usize) -> Result<Self> {
        if !Self::supports(row_bytes) {
            return Err(Error::Input(format!(
                "rows of {row_bytes} bytes cannot be staged; gather them batch by batch"
            )));
        }
        let (file, path) = DirectFile::scratch(dir, ".ringgnn-staging")
            .map_err(|(path, source)| Error::Io { path, source })?;
        let unit = unit(row_bytes);
        Ok(Stager {
            file,
            path,
            cap,
            row_bytes,
            unit,
            regions: Vec::new(),
            bufs: Vec::new(),
            wave: AlignedBuf::new((READ_WAVE / unit).max(1) * unit),
            written: 0,
            read: 0,
            write_time: Duration::ZERO,
            read_time: Duration::ZERO,
        })
    }

    /// Where the file was (it is unlinked), for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes the regions of `rows` (rows per batch) take, page-aligned.
    pub fn bytes_for(&self, rows: &[u64]) -> u64 {
        rows.iter()
            .map(|&r| (r * self.row_bytes as u64).div_ceil(ALIGN as u64) * ALIGN as u64)
            .sum()
    }

    /// Lay out one region per batch for `rows` rows each; `false` (and nothing laid out) when
    /// they would not fit the cap.
    pub fn plan(&mut self, rows: &[u64]) -> bool {
        if self.bytes_for(rows) > self.cap {
            return false;
        }
        let buf = (WRITE_BUFFER / self.unit).max(1) * self.unit;
        self.regions.clear();
        let mut at = 0u64;
        for &r in rows {
            self.regions.push(Region {
                offset: at,
                rows: r,
                fill: 0,
                written: 0,
            });
            at += (r * self.row_bytes as u64).div_ceil(ALIGN as u64) * ALIGN as u64;
        }
        while self.bufs.len() < rows.len() {
            self.bufs.push(AlignedBuf::new(buf));
        }
        true
    }

    /// Append `row` (its stored bytes) to batch `b`'s region.
    pub fn push(&mut self, b: usize, row: &[u8]) -> io::Result<()> {
        debug_assert_eq!(row.len(), self.row_bytes);
        let r = &mut self.regions[b];
        let buf = &mut self.bufs[b];
        buf.spare()[r.fill..r.fill + row.len()].copy_from_slice(row);
        r.fill += row.len();
        if r.fill == buf.capacity() {
            let t = Instant::now();
            Self::flush(&self.file, r, buf, &mut self.written)?;
            self.write_time += t.elapsed();
        }
        Ok(())
    }

    fn flush(
        file: &DirectFile,
        r: &mut Region,
        buf: &mut AlignedBuf,
        total: &mut u64,
    ) -> io::Result<()> {
        if r.fill == 0 {
            return Ok(());
        }
        let len = r.fill.div_ceil(ALIGN) * ALIGN;
        buf.spare()[r.fill..len].fill(0);
        buf.set_len(len);
        file.write_all_at(buf, r.offset + r.written)?;
        r.written += r.fill as u64;
        *total += len as u64;
        r.fill = 0;
        Ok(())
    }

    /// Write what the buffers still hold: every region is then complete.
    pub fn seal(&mut self) -> io::Result<()> {
        let t = Instant::now();
        for (r, buf) in self.regions.iter_mut().zip(&mut self.bufs) {
            Self::flush(&self.file, r, buf, &mut self.written)?;
        }
        self.write_time += t.elapsed();
        Ok(())
    }

    /// Call `visit(k, row)` with the `k`-th row pushed to batch `b`'s region, for every `k`, in
    /// sequential reads of the region.
    pub fn read(&mut self, b: usize, mut visit: impl FnMut(usize, &[u8])) -> io::Result<()> {
        let r = &self.regions[b];
        let total = r.rows as usize * self.row_bytes;
        let cap = self.wave.capacity();
        let mut done = 0usize;
        let mut k = 0usize;
        while done < total {
            let n = (total - done).min(cap);
            let len = n.div_ceil(ALIGN) * ALIGN;
            let buf = &mut self.wave.spare()[..len];
            let t = Instant::now();
            read_all_at(self.file.file(), buf, r.offset + done as u64)?;
            self.read_time += t.elapsed();
            self.read += len as u64;
            for row in buf[..n].chunks_exact(self.row_bytes) {
                visit(k, row);
                k += 1;
            }
            done += n;
        }
        Ok(())
    }

    /// Bytes written to and read from the staging file so far.
    pub fn traffic(&self) -> (u64, u64) {
        (self.written, self.read)
    }

    /// Seconds spent writing the staging file and reading it back so far (the device's part;
    /// the rows' copies are not in them).
    pub fn io_seconds(&self) -> (f64, f64) {
        (self.write_time.as_secs_f64(), self.read_time.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_hold_whole_rows_and_pages() {
        assert_eq!(unit(512), 4096);
        assert_eq!(unit(48), 12288);
        assert_eq!(unit(4096), 4096);
        assert_eq!(unit(6000), 6000 / 16 * 4096);
        assert!(Stager::supports(48) && !Stager::supports(4100) && !Stager::supports(0));
    }

    #[test]
    fn rows_come_back_in_order_per_batch_and_the_cap_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Stager::create(dir.path(), 1 << 20, 48).unwrap();
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "unlinked at once"
        );
        let rows = [7000u64, 0, 3];
        assert!(!s.plan(&[1 << 20, 1]), "over the cap");
        assert!(s.plan(&rows));
        assert_eq!(
            s.bytes_for(&rows),
            (7000 * 48u64).div_ceil(4096) * 4096 + 4096
        );
        // Interleaved pushes, as a pass over the feature file makes them.
        for i in 0..7000u64 {
            let row: Vec<u8> = (0..48).map(|j| (i * 7 + j) as u8).collect();
            s.push(0, &row).unwrap();
            if i < 3 {
                s.push(2, &[i as u8; 48]).unwrap();
            }
        }
        s.seal().unwrap();
        let mut n = 0;
        s.read(0, |k, row| {
            assert_eq!(
                row,
                (0..48)
                    .map(|j| (k as u64 * 7 + j) as u8)
                    .collect::<Vec<_>>()
            );
            n += 1;
        })
        .unwrap();
        assert_eq!(n, 7000);
        let mut got = vec![];
        s.read(2, |k, row| got.push((k, row[0]))).unwrap();
        assert_eq!(got, vec![(0, 0), (1, 1), (2, 2)]);
        s.read(1, |_, _| panic!("no rows")).unwrap();
        let (w, r) = s.traffic();
        assert!(w >= 7000 * 48 && r >= w);
        // A second hyperbatch reuses the file.
        assert!(s.plan(&[1]));
        s.push(0, &[9; 48]).unwrap();
        s.seal().unwrap();
        s.read(0, |_, row| assert_eq!(row, &[9; 48])).unwrap();
    }
}
