//! Files read and written with `O_DIRECT` where the filesystem allows it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{AlignedBuf, ALIGN};

/// A file opened with `O_DIRECT` when possible, buffered otherwise. Reads take any offset and
/// length: unaligned requests go through a caller-provided aligned bounce buffer.
pub struct DirectFile {
    file: File,
    direct: bool,
}

impl DirectFile {
    /// Create (or truncate) `path` for reading and writing.
    pub fn create(path: &Path) -> io::Result<Self> {
        let mut o = OpenOptions::new();
        o.read(true).write(true).create(true).truncate(true);
        Self::open_with(path, o)
    }

    /// A new scratch file in `dir`, named `{prefix}-{pid}-{n}` (unique in this process), and
    /// unlinked at once: its space is given back when it is closed, even by a crash, and nothing
    /// is left behind. On error, the path it was to have, for messages.
    pub fn scratch(dir: &Path, prefix: &str) -> Result<(Self, PathBuf), (PathBuf, io::Error)> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{prefix}-{}-{n}", std::process::id()));
        match Self::create(&path).and_then(|f| std::fs::remove_file(&path).map(|_| f)) {
            Ok(f) => Ok((f, path)),
            Err(e) => Err((path, e)),
        }
    }

    /// Open an existing file read-only.
    pub fn open(path: &Path) -> io::Result<Self> {
        let mut o = OpenOptions::new();
        o.read(true);
        Self::open_with(path, o)
    }

    /// Open an existing file read-only, with `O_DIRECT` (where allowed) only if `direct`.
    pub fn open_read(path: &Path, direct: bool) -> io::Result<Self> {
        if direct {
            return Self::open(path);
        }
        Ok(DirectFile {
            file: File::open(path)?,
            direct: false,
        })
    }

    fn open_with(path: &Path, o: OpenOptions) -> io::Result<Self> {
        let mut od = o.clone();
        od.custom_flags(libc::O_DIRECT);
        match od.open(path) {
            Ok(file) => Ok(DirectFile { file, direct: true }),
            // tmpfs and some overlay filesystems answer EINVAL: use the page cache there.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(DirectFile {
                file: o.open(path)?,
                direct: false,
            }),
            Err(e) => Err(e),
        }
    }

    /// Whether reads and writes bypass the page cache.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// The open file, e.g. to hand to a read backend ([`crate::PreadBatch`], [`crate::UringBatch`]),
    /// which detect `O_DIRECT` from the descriptor's flags.
    pub fn into_file(self) -> File {
        self.file
    }

    /// Write all of `buf` at `offset`. With O_DIRECT, `offset` and `buf.len()` must be
    /// multiples of [`ALIGN`] (the buffer itself is aligned by construction).
    pub fn write_all_at(&self, buf: &AlignedBuf, offset: u64) -> io::Result<()> {
        if self.direct && (!offset.is_multiple_of(ALIGN as u64) || !buf.len().is_multiple_of(ALIGN))
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unaligned O_DIRECT write: {} bytes at {offset}", buf.len()),
            ));
        }
        self.file.write_all_at(buf, offset)
    }

    /// Read exactly `dst.len()` bytes at `offset` (any alignment), using `bounce` for the
    /// aligned reads O_DIRECT requires. A short read (end of file) is an `UnexpectedEof` error.
    pub fn read_exact_at(
        &self,
        dst: &mut [u8],
        offset: u64,
        bounce: &mut AlignedBuf,
    ) -> io::Result<()> {
        if !self.direct {
            return self.file.read_exact_at(dst, offset);
        }
        let a = ALIGN as u64;
        let mut done = 0usize;
        while done < dst.len() {
            let pos = offset + done as u64;
            let start = pos / a * a;
            let skip = (pos - start) as usize;
            let want = (dst.len() - done + skip).div_ceil(ALIGN) * ALIGN;
            let n = want.min(bounce.capacity());
            bounce.set_len(n);
            let got = read_full_at(&self.file, &mut bounce[..], start)?;
            if got <= skip {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "read past the end of the file",
                ));
            }
            let take = (got - skip).min(dst.len() - done);
            dst[done..done + take].copy_from_slice(&bounce[skip..skip + take]);
            done += take;
        }
        Ok(())
    }
}

/// Read until `buf` is full or the file ends; returns the bytes read.
fn read_full_at(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_reads_through_bounce_buffer() {
        let dir = std::env::temp_dir().join(format!("ringgnn-io-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f");
        let f = DirectFile::create(&p).unwrap();
        let mut b = AlignedBuf::new(3 * ALIGN);
        b.set_len(3 * ALIGN);
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        f.write_all_at(&b, 0).unwrap();
        let mut bounce = AlignedBuf::new(ALIGN); // smaller than a request: forces several reads
        for (off, len) in [
            (0usize, 10usize),
            (4000, 200),
            (1, 3 * ALIGN - 1),
            (8191, 1),
        ] {
            let mut dst = vec![0u8; len];
            f.read_exact_at(&mut dst, off as u64, &mut bounce).unwrap();
            assert_eq!(&dst[..], &b[off..off + len], "off {off} len {len}");
        }
        let mut dst = vec![0u8; 10];
        let e = f
            .read_exact_at(&mut dst, 3 * ALIGN as u64 - 5, &mut bounce)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        if f.is_direct() {
            let mut odd = AlignedBuf::new(ALIGN);
            odd.set_len(100);
            assert!(f.write_all_at(&odd, 0).is_err());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
