//! Helpers shared by the integration tests: temp files with known content, a seeded RNG, and
//! the list of backends to run (io_uring only where this machine supports it).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use ringgnn_io::{open_backend, probe_uring, BackendKind, ReadBatch};

/// A directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "ringgnn-io-it-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// splitmix64: small, seeded, good enough to pick offsets.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Write a file of `len` bytes whose content is not periodic in pages; returns path and bytes.
pub fn known_file(dir: &TempDir, name: &str, len: usize) -> (PathBuf, Vec<u8>) {
    let mut rng = Rng::new(len as u64 ^ 0x5eed);
    let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
    let p = dir.path().join(name);
    std::fs::write(&p, &data).unwrap();
    (p, data)
}

/// The backends to test on `path`: pread always, io_uring when the probe passes (otherwise a
/// message says why it is skipped).
pub fn backends(path: &Path, direct: bool) -> Vec<Box<dyn ReadBatch>> {
    let mut v = vec![open_backend(BackendKind::Pread, path, direct).unwrap().0];
    match probe_uring() {
        Ok(()) => v.push(open_backend(BackendKind::Uring, path, direct).unwrap().0),
        Err(why) => eprintln!("skipping the io_uring backend: {why}"),
    }
    v
}

/// Whether `path` can be opened with O_DIRECT here (tmpfs cannot); prints why not.
pub fn direct_supported(path: &Path) -> bool {
    let ok = ringgnn_io::DirectFile::open(path).unwrap().is_direct();
    if !ok {
        eprintln!(
            "skipping O_DIRECT checks: the filesystem of {} refuses O_DIRECT",
            path.display()
        );
    }
    ok
}
