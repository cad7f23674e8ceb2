//! Edge-list inputs for `convert`: text (whitespace, TSV, CSV, optionally gzip), raw binary
//! pairs (bin32, bin64) and NumPy `.npy`. Every source streams: memory does not grow with the
//! input size.

mod binary;
mod npy_edges;
mod source;
mod text;

use std::fs::File;
use std::path::Path;

use crate::{Excerpts, IoContext, Result};
pub(crate) use source::read_full;
pub use source::EdgeSource;

/// Input encodings `convert` understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    Text,
    Bin32,
    Bin64,
    Npy,
}

impl InputFormat {
    pub fn parse(s: &str) -> Result<Option<Self>> {
        Ok(Some(match s {
            "detect" | "auto" => return Ok(None),
            "text" | "tsv" | "csv" | "txt" => InputFormat::Text,
            "bin32" => InputFormat::Bin32,
            "bin64" => InputFormat::Bin64,
            "npy" => InputFormat::Npy,
            _ => {
                return crate::input_err!(
                    "--format '{s}' is not known; use text, bin32, bin64 or npy"
                )
            }
        }))
    }
}

/// Extensions that name a text edge list (`.mtx` files with a `%%MatrixMarket` header get their
/// size line skipped and their 1-based ids shifted, see [`text`]).
const TEXT_EXTENSIONS: &[&str] = &["tsv", "csv", "txt", "el", "edges", "edgelist", "mtx"];

/// How much of the file `detect` looks at.
const SNIFF_BYTES: usize = 4096;

/// Decide the format of `path` from its name and first bytes; errors when unsure.
///
/// In order: a `.bin32`/`.bin64` extension wins (raw pairs can begin with any bytes, the npy or
/// gzip magic included); then `.npy` or the `\x93NUMPY` magic; then the gzip magic or `.gz`
/// (decompressed text); then a text extension, or a first 4 KiB that is text (UTF-8 without
/// control characters other than whitespace).
pub fn detect(path: &Path) -> Result<InputFormat> {
    let mut file = File::open(path).at(path)?;
    let mut head = vec![0u8; SNIFF_BYTES];
    let n = read_full(&mut file, &mut head).at(path)?;
    head.truncate(n);
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "bin32" => return Ok(InputFormat::Bin32),
        "bin64" => return Ok(InputFormat::Bin64),
        _ => {}
    }
    if ext == "npy" || head.starts_with(b"\x93NUMPY") {
        return Ok(InputFormat::Npy);
    }
    if ext == "gz" || head.starts_with(&text::GZIP_MAGIC) {
        if [".bin32.gz", ".bin64.gz", ".npy.gz"]
            .iter()
            .any(|s| name.ends_with(s))
        {
            return crate::input_err!(
                "{}: compressed binary input is not supported; decompress it first (gunzip -k)",
                path.display()
            );
        }
        return Ok(InputFormat::Text);
    }
    if TEXT_EXTENSIONS.contains(&ext) || looks_like_text(&head) {
        return Ok(InputFormat::Text);
    }
    crate::input_err!(
        "{}: cannot tell the format (binary data without a .bin32/.bin64 extension); pass --format bin32, bin64, text or npy",
        path.display()
    )
}

/// UTF-8 (possibly cut mid-character at the end) with no control bytes besides whitespace.
fn looks_like_text(head: &[u8]) -> bool {
    let utf8 = match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    utf8 && head
        .iter()
        .all(|&b| b >= 0x20 && b != 0x7f || matches!(b, b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
}

/// Open `path` as an edge stream. Ids must be below `num_nodes` when given: a source reports the
/// first violation with its location (line number, edge index), quoting the offending text as
/// `excerpts` allows ([`crate::excerpt`]).
pub fn open(
    path: &Path,
    format: Option<InputFormat>,
    num_nodes: Option<u64>,
    excerpts: Excerpts,
) -> Result<Box<dyn EdgeSource>> {
    let format = match format {
        Some(f) => f,
        None => detect(path)?,
    };
    Ok(Box::new(Reopenable {
        inner: open_format(path, format, num_nodes, excerpts)?,
        path: path.to_path_buf(),
        format,
        num_nodes,
        excerpts,
    }))
}

fn open_format(
    path: &Path,
    format: InputFormat,
    num_nodes: Option<u64>,
    excerpts: Excerpts,
) -> Result<Box<dyn EdgeSource>> {
    Ok(match format {
        InputFormat::Text => Box::new(text::TextEdges::open(path, num_nodes, excerpts)?),
        InputFormat::Bin32 => Box::new(binary::BinaryEdges::open(
            path,
            binary::Width::U32,
            num_nodes,
        )?),
        InputFormat::Bin64 => Box::new(binary::BinaryEdges::open(
            path,
            binary::Width::U64,
            num_nodes,
        )?),
        InputFormat::Npy => Box::new(npy_edges::NpyEdges::open(path, num_nodes)?),
    })
}

/// A file source that rewinds by opening the file again.
struct Reopenable {
    inner: Box<dyn EdgeSource>,
    path: std::path::PathBuf,
    format: InputFormat,
    num_nodes: Option<u64>,
    excerpts: Excerpts,
}

impl EdgeSource for Reopenable {
    fn fill(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<usize> {
        self.inner.fill(out, max)
    }
    fn position(&self) -> (u64, Option<u64>) {
        self.inner.position()
    }
    fn unit(&self) -> &'static str {
        self.inner.unit()
    }
    fn ids_fit_u32(&self) -> bool {
        self.inner.ids_fit_u32()
    }
    fn rewind(&mut self) -> Result<bool> {
        self.inner = open_format(&self.path, self.format, self.num_nodes, self.excerpts)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::source::check_limit;
    use super::*;

    /// Everything `source` yields, calling `fill` with `max` at a time.
    pub(crate) fn drain(source: &mut dyn EdgeSource, max: usize) -> Result<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        loop {
            let before = out.len();
            let n = source.fill(&mut out, max)?;
            assert_eq!(out.len(), before + n);
            assert!(n <= max);
            if n == 0 {
                // Exhausted stays exhausted.
                assert_eq!(source.fill(&mut out, max)?, 0);
                return Ok(out);
            }
        }
    }

    fn detect_bytes(name: &str, bytes: &[u8]) -> Result<InputFormat> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        detect(&p)
    }

    #[test]
    fn detect_by_name_and_content() {
        use InputFormat::*;
        let binary = [0u8, 1, 2, 3, 0xff, 0, 0, 0];
        assert_eq!(detect_bytes("e.bin32", &binary).unwrap(), Bin32);
        assert_eq!(detect_bytes("e.BIN64", &binary).unwrap(), Bin64);
        // A bin32 whose first id starts with the gzip magic is still bin32.
        assert_eq!(
            detect_bytes("e.bin32", &[0x1f, 0x8b, 0, 0, 1, 0, 0, 0]).unwrap(),
            Bin32
        );
        assert_eq!(detect_bytes("e.npy", b"whatever").unwrap(), Npy);
        assert_eq!(detect_bytes("noext", b"\x93NUMPY\x01\x00").unwrap(), Npy);
        assert_eq!(detect_bytes("e.gz", b"").unwrap(), Text);
        assert_eq!(
            detect_bytes("edges.dat", &[0x1f, 0x8b, 8, 0, 0xff]).unwrap(),
            Text
        );
        for ext in TEXT_EXTENSIONS {
            assert_eq!(detect_bytes(&format!("e.{ext}"), &binary).unwrap(), Text);
        }
        assert_eq!(detect_bytes("edges", b"# c\n1 2\r\n3\t4\n").unwrap(), Text);
        assert_eq!(
            detect_bytes("edges", "# caf\u{e9}\n1 2\n".as_bytes()).unwrap(),
            Text
        );
        assert_eq!(detect_bytes("empty", b"").unwrap(), Text);
        let e = detect_bytes("edges.dat", &binary).unwrap_err().to_string();
        assert!(e.contains("edges.dat: cannot tell the format"), "{e}");
        assert!(e.contains("pass --format bin32, bin64, text or npy"), "{e}");
        let e = detect_bytes("e.bin32.gz", &[0x1f, 0x8b])
            .unwrap_err()
            .to_string();
        assert!(e.contains("decompress it first"), "{e}");
    }

    #[test]
    fn missing_file_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope.tsv");
        for r in [
            detect(&p).map(|_| ()),
            open(&p, None, None, Excerpts::Quote).map(|_| ()),
            open(&p, Some(InputFormat::Text), None, Excerpts::Quote).map(|_| ()),
        ] {
            match r {
                Err(crate::Error::Io { source, path }) => {
                    assert_eq!(source.kind(), io::ErrorKind::NotFound);
                    assert_eq!(path, p);
                }
                other => panic!("expected a NotFound io error, got {other:?}"),
            }
        }
    }

    #[test]
    fn open_detects_and_dispatches() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("e.tsv");
        std::fs::write(&t, "0\t1\n2\t3\n").unwrap();
        let b = dir.path().join("e.bin32");
        std::fs::write(&b, [0u8, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]).unwrap();
        for (p, fits) in [(&t, false), (&b, true)] {
            let mut s = open(p, None, None, Excerpts::Quote).unwrap();
            assert_eq!(s.unit(), "B");
            assert_eq!(s.ids_fit_u32(), fits);
            assert_eq!(drain(s.as_mut(), 1).unwrap(), vec![(0, 1), (2, 3)]);
            let (done, total) = s.position();
            assert_eq!(Some(done), total);
        }
    }

    #[test]
    fn out_of_range_search() {
        let p = Path::new("e.bin32");
        let e = vec![(7, 7), (1, 2), (3, 4), (9, 0), (10, 1)];
        let mut out = e.clone();
        check_limit(&mut out, 1, Some(11), p, 5).unwrap();
        check_limit(&mut out, 1, None, p, 5).unwrap();
        assert_eq!(out, e);
        let msg = check_limit(&mut out, 1, Some(10), p, 5)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("edge 8 (0-based) has node id 10") && msg.contains("--num-nodes 10"),
            "{msg}"
        );
        assert_eq!(out, vec![(7, 7)], "the bad batch is dropped");
        let mut out = e.clone();
        let msg = check_limit(&mut out, 1, Some(4), p, 0)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("edge 1 (0-based) has node id 4"), "{msg}");
        let mut empty = vec![];
        check_limit(&mut empty, 0, Some(0), p, 0).unwrap();
    }
}
