//! Raw binary edge lists: `bin32` (little-endian u32 pairs `src, dst` back to back) and `bin64`
//! (u64 pairs), and [`Cursor`], the large-block reader over a byte range of a file that they and
//! the `.npy` reader share.

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::source::{check_limit, read_full, EdgeSource};
use crate::{IoContext, Result};

/// Bytes per read: large enough that per-call overhead vanishes next to decoding, small next to
/// the build's memory budget.
pub(super) const BLOCK: usize = 8 << 20;

/// Sequential reads of `[offset, offset + len)` of a file in large blocks, handing out whole
/// units (an edge, an element) so that callers can decode with `chunks_exact`.
pub(super) struct Cursor {
    file: File,
    buf: Vec<u8>,
    pos: usize,
    filled: usize,
    /// Bytes of the range not yet read from the file.
    left: u64,
}

impl Cursor {
    /// `block` is rounded up to a multiple of 16 so that any unit (4, 8 or 16 bytes) tiles it.
    pub(super) fn open(path: &Path, offset: u64, len: u64, block: usize) -> Result<Cursor> {
        let mut file = File::open(path).at(path)?;
        file.seek(SeekFrom::Start(offset)).at(path)?;
        let block = block.max(1).next_multiple_of(16);
        let size = usize::try_from(len).map_or(block, |l| l.min(block));
        Ok(Cursor {
            file,
            buf: vec![0; size],
            pos: 0,
            filled: 0,
            left: len,
        })
    }

    /// Up to `max_units` whole units of `unit` bytes, read ahead as needed; empty at the end of
    /// the range. Call [`Cursor::consume`] with what was used.
    pub(super) fn units(&mut self, unit: usize, max_units: usize) -> io::Result<&[u8]> {
        if self.filled - self.pos < unit && self.left > 0 {
            self.refill()?;
        }
        let n = ((self.filled - self.pos) / unit).min(max_units);
        Ok(&self.buf[self.pos..self.pos + n * unit])
    }

    pub(super) fn consume(&mut self, bytes: usize) {
        self.pos += bytes;
    }

    fn refill(&mut self) -> io::Result<()> {
        self.buf.copy_within(self.pos..self.filled, 0);
        self.filled -= self.pos;
        self.pos = 0;
        let room = self.buf.len() - self.filled;
        let want = usize::try_from(self.left).map_or(room, |l| l.min(room));
        let got = read_full(
            &mut self.file,
            &mut self.buf[self.filled..self.filled + want],
        )?;
        if got < want {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file became shorter while it was being read",
            ));
        }
        self.filled += got;
        self.left -= got as u64;
        Ok(())
    }
}

/// Integer width of a binary edge list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    U32,
    U64,
}

impl Width {
    fn pair_bytes(self) -> usize {
        match self {
            Width::U32 => 8,
            Width::U64 => 16,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Width::U32 => "bin32",
            Width::U64 => "bin64",
        }
    }
}

/// A `bin32` or `bin64` file: pairs `(src, dst)` of little-endian unsigned integers, nothing else.
pub struct BinaryEdges {
    path: PathBuf,
    width: Width,
    cursor: Cursor,
    file_len: u64,
    /// Edges handed out so far.
    done: u64,
    limit: Option<u64>,
}

impl BinaryEdges {
    pub fn open(path: &Path, width: Width, num_nodes: Option<u64>) -> Result<BinaryEdges> {
        Self::with_block(path, width, num_nodes, BLOCK)
    }

    /// Like [`BinaryEdges::open`] with reads of `block` bytes (tests use tiny blocks).
    fn with_block(
        path: &Path,
        width: Width,
        num_nodes: Option<u64>,
        block: usize,
    ) -> Result<BinaryEdges> {
        let file_len = std::fs::metadata(path).at(path)?.len();
        let pair = width.pair_bytes() as u64;
        if file_len % pair != 0 {
            let (other, hint) = match width {
                Width::U32 => ("bin64", "16"),
                Width::U64 => ("bin32", "8"),
            };
            return crate::input_err!(
                "{}: size {file_len} bytes is not a multiple of {pair}, the size of one {} edge (two little-endian {}-bit ids); the file is truncated, or it is not {} (a {other} file is a multiple of {hint}: pass --format {other}; for text pass --format text)",
                path.display(),
                width.name(),
                pair * 4,
                width.name(),
            );
        }
        Ok(BinaryEdges {
            path: path.to_path_buf(),
            width,
            cursor: Cursor::open(path, 0, file_len, block)?,
            file_len,
            done: 0,
            limit: num_nodes,
        })
    }
}

impl EdgeSource for BinaryEdges {
    fn fill(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<usize> {
        let pair = self.width.pair_bytes();
        let mut n = 0;
        while n < max {
            let bytes = self.cursor.units(pair, max - n).at(&self.path)?;
            if bytes.is_empty() {
                break;
            }
            let start = out.len();
            match self.width {
                Width::U32 => out.extend(bytes.chunks_exact(8).map(|c| {
                    let s = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    let d = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
                    (u64::from(s), u64::from(d))
                })),
                Width::U64 => out.extend(bytes.chunks_exact(16).map(|c| {
                    let s = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
                    let d =
                        u64::from_le_bytes([c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]]);
                    (s, d)
                })),
            }
            let used = bytes.len();
            self.cursor.consume(used);
            let k = used / pair;
            check_limit(out, start, self.limit, &self.path, self.done)?;
            self.done += k as u64;
            n += k;
        }
        Ok(n)
    }

    fn position(&self) -> (u64, Option<u64>) {
        (
            self.done * self.width.pair_bytes() as u64,
            Some(self.file_len),
        )
    }

    fn unit(&self) -> &'static str {
        "B"
    }

    fn ids_fit_u32(&self) -> bool {
        self.width == Width::U32
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::drain;
    use super::*;
    use proptest::prelude::*;

    fn write(dir: &Path, name: &str, edges: &[(u64, u64)], width: Width) -> PathBuf {
        let p = dir.join(name);
        let bytes: Vec<u8> = match width {
            Width::U32 => edges
                .iter()
                .flat_map(|&(s, d)| [s as u32, d as u32])
                .flat_map(u32::to_le_bytes)
                .collect(),
            Width::U64 => edges
                .iter()
                .flat_map(|&(s, d)| [s, d])
                .flat_map(u64::to_le_bytes)
                .collect(),
        };
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn exact_edges_both_widths() {
        let dir = tempfile::tempdir().unwrap();
        let edges = vec![(0, 1), (u32::MAX as u64, 7), (5, 5), (3, 0)];
        let p = write(dir.path(), "e.bin32", &edges, Width::U32);
        let mut s = BinaryEdges::open(&p, Width::U32, None).unwrap();
        assert!(s.ids_fit_u32());
        assert_eq!(s.position(), (0, Some(32)));
        assert_eq!(drain(&mut s, 3).unwrap(), edges);
        assert_eq!(s.position(), (32, Some(32)));

        let edges = vec![(u64::MAX, 0), (1 << 40, (1 << 33) + 5), (2, 3)];
        let p = write(dir.path(), "e.bin64", &edges, Width::U64);
        let mut s = BinaryEdges::open(&p, Width::U64, None).unwrap();
        assert!(!s.ids_fit_u32());
        assert_eq!(drain(&mut s, 1000).unwrap(), edges);
    }

    #[test]
    fn empty_file_has_no_edges() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "e.bin32", &[], Width::U32);
        let mut s = BinaryEdges::open(&p, Width::U32, Some(0)).unwrap();
        assert_eq!(drain(&mut s, 10).unwrap(), vec![]);
    }

    #[test]
    fn size_not_a_multiple_of_the_pair() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.bin32");
        std::fs::write(&p, [0u8; 12]).unwrap();
        let e = BinaryEdges::open(&p, Width::U32, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("size 12 bytes is not a multiple of 8"), "{e}");
        std::fs::write(&p, [0u8; 24]).unwrap();
        let e = BinaryEdges::open(&p, Width::U64, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("size 24 bytes is not a multiple of 16"), "{e}");
        assert!(e.contains("--format bin32"), "{e}");
    }

    #[test]
    fn id_at_or_above_num_nodes_names_the_edge() {
        let dir = tempfile::tempdir().unwrap();
        let edges: Vec<(u64, u64)> = (0..100)
            .map(|i| (i % 10, (i + 1) % 10))
            .chain([(3, 10)])
            .collect();
        for width in [Width::U32, Width::U64] {
            let p = write(dir.path(), "e.bin", &edges, width);
            let mut s = BinaryEdges::with_block(&p, width, Some(10), 64).unwrap();
            let e = drain(&mut s, 7).unwrap_err().to_string();
            assert!(
                e.contains("edge 100 (0-based) has node id 10, which is >= --num-nodes 10"),
                "{e}"
            );
            let mut s = BinaryEdges::open(&p, width, Some(11)).unwrap();
            assert_eq!(drain(&mut s, 7).unwrap(), edges);
        }
    }

    proptest! {
        #[test]
        fn roundtrip_any_chunking(
            edges in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..200),
            max in 1usize..50,
            block in 1usize..100,
            wide in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let (width, edges) = if wide {
                (Width::U64, edges)
            } else {
                (Width::U32, edges.into_iter().map(|(s, d)| (s >> 32, d & 0xffff_ffff)).collect())
            };
            let p = write(dir.path(), "e.bin", &edges, width);
            let mut s = BinaryEdges::with_block(&p, width, None, block).unwrap();
            prop_assert_eq!(drain(&mut s, max).unwrap(), edges);
        }
    }
}
