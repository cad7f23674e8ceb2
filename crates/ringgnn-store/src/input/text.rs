//! Text edge lists, plain or gzip-compressed.
//!
//! One edge per line: a source and a destination id, decimal integers `>= 0` and `< 2^64`,
//! separated by spaces and/or tabs, or by a comma with optional spaces around it (whitespace,
//! TSV and CSV files all parse). Anything after the second id and a separator is ignored, so
//! weighted edge lists (`src dst weight`) read as their unweighted edges. Lines whose first
//! non-blank character is `#` or `%` are comments; blank lines are skipped; `\r\n` line ends and
//! a UTF-8 byte order mark are accepted; the last line needs no newline.
//!
//! A file that starts with the gzip magic (`1f 8b`) is decompressed whatever its name,
//! concatenated gzip members included (`cat a.gz b.gz`).
//!
//! A file whose first line is a `%%MatrixMarket matrix coordinate ...` header is read as Matrix
//! Market: the size line after the header comments is skipped and the 1-based ids are shifted
//! to 0-based. Symmetric Matrix Market files store each undirected edge once; convert them with
//! `--undirected`.
//!
//! Parsing works on large blocks of complete lines with a hand-written integer parser; the
//! partial line at the end of a block is carried into the next one.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek};
use std::path::{Path, PathBuf};

use flate2::bufread::MultiGzDecoder;
use memchr::{memchr, memrchr};

use super::source::{read_full, EdgeSource};
use crate::excerpt::{excerpt, Excerpts};
use crate::{Error, IoContext, Result};

pub(super) const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Bytes read per block: parsing cost per block is constant, so big blocks amortise it; 8 MiB is
/// still small next to the build's memory budget.
const READ_SIZE: usize = 8 << 20;

/// Longest accepted line. Without a bound, binary data read as text (no newlines) would grow the
/// carry buffer to the size of the file.
const MAX_LINE: usize = 1 << 20;

/// Compressed bytes buffered in front of the gzip decoder.
const GZ_BUFFER: usize = 1 << 20;

/// Counts the bytes read from the compressed file, for progress.
struct Counting {
    file: File,
    read: u64,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

enum Input {
    Plain { file: File, read: u64 },
    Gz(Box<MultiGzDecoder<BufReader<Counting>>>),
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Input::Plain { file, read } => {
                let n = file.read(buf)?;
                *read += n as u64;
                Ok(n)
            }
            Input::Gz(d) => d.read(buf),
        }
    }
}

/// Whether the file's first line made it Matrix Market, and where the reader is in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MatrixMarket {
    /// The first line has not been seen yet.
    Unknown,
    No,
    /// Header seen; the size line `rows cols entries` comes next after comments.
    SizeLine,
    /// Entry lines with 1-based ids.
    Entries,
}

/// A streaming text edge list; see the module documentation for the accepted syntax.
pub struct TextEdges {
    path: PathBuf,
    input: Input,
    file_len: u64,
    /// `buf[pos..end]` holds complete lines not parsed yet, `buf[end..filled]` a partial line.
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    filled: usize,
    read_size: usize,
    eof: bool,
    /// Lines fully consumed, so the line being parsed is `line + 1`.
    line: u64,
    limit: Option<u64>,
    mm: MatrixMarket,
    /// Whether errors may quote the offending line (see [`crate::excerpt`]).
    excerpts: Excerpts,
}

impl TextEdges {
    pub fn open(path: &Path, num_nodes: Option<u64>, excerpts: Excerpts) -> Result<TextEdges> {
        let mut edges = Self::with_read_size(path, num_nodes, READ_SIZE)?;
        edges.excerpts = excerpts;
        Ok(edges)
    }

    /// Like [`TextEdges::open`], reading `read_size` bytes at a time (tests use tiny sizes so that
    /// lines straddle blocks).
    fn with_read_size(path: &Path, num_nodes: Option<u64>, read_size: usize) -> Result<TextEdges> {
        let mut file = File::open(path).at(path)?;
        let file_len = file.metadata().at(path)?.len();
        let mut magic = [0u8; 2];
        let n = read_full(&mut file, &mut magic).at(path)?;
        file.rewind().at(path)?;
        let input = if n == 2 && magic == GZIP_MAGIC {
            let counting = BufReader::with_capacity(GZ_BUFFER, Counting { file, read: 0 });
            Input::Gz(Box::new(MultiGzDecoder::new(counting)))
        } else {
            Input::Plain { file, read: 0 }
        };
        Ok(TextEdges {
            path: path.to_path_buf(),
            input,
            file_len,
            buf: Vec::new(),
            pos: 0,
            end: 0,
            filled: 0,
            read_size: read_size.max(1),
            eof: false,
            line: 0,
            limit: num_nodes,
            mm: MatrixMarket::Unknown,
            excerpts: Excerpts::Quote,
        })
    }

    /// Make `buf[pos..end]` non-empty complete lines (a missing final newline is supplied);
    /// false at the end of the input.
    fn refill(&mut self) -> Result<bool> {
        self.buf.copy_within(self.pos..self.filled, 0);
        self.filled -= self.pos;
        self.pos = 0;
        self.end = 0;
        loop {
            if self.eof {
                if self.filled == 0 {
                    return Ok(false);
                }
                if self.filled == self.buf.len() {
                    self.buf.push(b'\n');
                } else {
                    self.buf[self.filled] = b'\n';
                }
                self.filled += 1;
                self.end = self.filled;
                break;
            }
            if self.filled > MAX_LINE {
                return crate::input_err!(
                    "{} line {}: the line is longer than {} MiB; this does not look like a text edge list (for binary pairs pass --format bin32 or bin64)",
                    self.path.display(),
                    self.line + 1,
                    MAX_LINE >> 20
                );
            }
            let want = self.filled + self.read_size;
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            let gz = matches!(self.input, Input::Gz(_));
            let got = read_full(&mut self.input, &mut self.buf[self.filled..want])
                .map_err(|e| read_error(&self.path, gz, e))?;
            self.eof = got < self.read_size;
            let from = self.filled;
            self.filled += got;
            if let Some(k) = memrchr(b'\n', &self.buf[from..self.filled]) {
                self.end = from + k + 1;
                break;
            }
        }
        if self.mm == MatrixMarket::Unknown {
            self.start_of_file()?;
        }
        Ok(true)
    }

    /// Skip a byte order mark and recognise a Matrix Market header; the first line is complete.
    fn start_of_file(&mut self) -> Result<()> {
        if self.buf[..self.end].starts_with(b"\xef\xbb\xbf") {
            self.pos = 3;
        }
        let rest = &self.buf[self.pos..self.end];
        let first = &rest[..memchr(b'\n', rest).unwrap_or(rest.len())];
        const MM: &[u8] = b"%%MatrixMarket";
        if first.len() < MM.len() || !first[..MM.len()].eq_ignore_ascii_case(MM) {
            self.mm = MatrixMarket::No;
            return Ok(());
        }
        let words: Vec<String> = String::from_utf8_lossy(first)
            .split_whitespace()
            .map(str::to_lowercase)
            .collect();
        let kind = |i: usize| words.get(i).map_or("", String::as_str);
        if kind(1) != "matrix" || kind(2) != "coordinate" {
            let words = format!("{} {}", kind(1), kind(2));
            let what = self
                .excerpts
                .show(words.as_bytes())
                .map_or(String::new(), |t| format!(" '{t}'"));
            return crate::input_err!(
                "{}: a Matrix Market{what} file is not a list of edges; only 'matrix coordinate' files are",
                self.path.display(),
            );
        }
        self.mm = MatrixMarket::SizeLine;
        Ok(())
    }

    /// Consume Matrix Market comment lines up to and including the size line, as far as the
    /// current block goes.
    fn skip_size_line(&mut self) {
        let lines = &self.buf[self.pos..self.end];
        let mut i = 0;
        while i < lines.len() {
            let eol = end_of_line(lines, i);
            let first = lines[i..eol].iter().find(|c| !c.is_ascii_whitespace());
            self.line += 1;
            i = eol;
            if !matches!(first, None | Some(b'%' | b'#')) {
                self.mm = MatrixMarket::Entries;
                break;
            }
        }
        self.pos += i;
    }

    /// The error for `fault`, whose line starts at `pos`.
    fn fault_error(&self, fault: &Fault) -> Error {
        let rest = &self.buf[self.pos..self.end];
        let text = &rest[..memchr(b'\n', rest).unwrap_or(rest.len())];
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        let at = &rest[fault.at - fault.start..];
        let sign = usize::from(at.first() == Some(&b'-'));
        let token = &at[..sign + at[sign..].iter().take_while(|c| c.is_ascii_digit()).count()];
        let (p, n) = (self.path.display(), self.line + 1);
        let one_based = self.mm == MatrixMarket::Entries;
        // What the message shows of the line: an excerpt, or nothing for a file a description
        // named, whose errors then say so at their end (crate::excerpt). Ids are numbers the
        // parser read, not text, and are named either way.
        let (found, note) = match self.excerpts.show(text) {
            Some(t) => (format!(", found '{t}'"), ""),
            None => (String::new(), WITHHELD),
        };
        let tok = excerpt(token);
        Error::Input(match fault.kind {
            Kind::Malformed => format!(
                "{p} line {n}: expected 2 integer node ids{found}; each line must start with a source and a destination id (integers >= 0) separated by spaces, a tab or a comma, and comment lines start with # or %{note}"
            ),
            Kind::Negative => format!("{p} line {n}: negative node id {tok}; node ids must be >= 0"),
            Kind::Overflow => format!("{p} line {n}: node id {tok} is too large; node ids must be below 2^64"),
            Kind::TooLarge(id) if one_based => format!(
                "{p} line {n}: node id {} is > --num-nodes {} (Matrix Market ids start at 1); raise --num-nodes or leave it out (the default is the largest id)",
                id + 1,
                self.limit.unwrap_or_default()
            ),
            Kind::TooLarge(id) => format!(
                "{p} line {n}: node id {id} is >= --num-nodes {}; raise --num-nodes or leave it out (the default is the largest id + 1)",
                self.limit.unwrap_or_default()
            ),
            Kind::ZeroId => format!(
                "{p} line {n}: node id 0 in a Matrix Market file, whose ids start at 1; fix the id, or remove the %%MatrixMarket header to read the ids as 0-based"
            ),
        })
    }
}

/// A decompression error is bad input; anything else stays an OS error.
fn read_error(path: &Path, gz: bool, e: io::Error) -> Error {
    use io::ErrorKind::{InvalidData, InvalidInput, UnexpectedEof};
    if gz && matches!(e.kind(), InvalidData | InvalidInput | UnexpectedEof) {
        Error::Input(format!(
            "{}: the gzip data is corrupt or truncated ({e}); check the file with `gzip -t`",
            path.display()
        ))
    } else {
        Error::io(path, e)
    }
}

/// The end of an error about a file whose content is withheld ([`Excerpts::Withhold`]).
const WITHHELD: &str = " (the line is not quoted: the dataset named this file, not you)";

impl EdgeSource for TextEdges {
    fn fill(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<usize> {
        let mut n = 0;
        while n < max {
            if self.pos == self.end && !self.refill()? {
                break;
            }
            if self.mm == MatrixMarket::SizeLine {
                self.skip_size_line();
                continue;
            }
            let lines = &self.buf[self.pos..self.end];
            let parsed = if self.mm == MatrixMarket::Entries {
                parse_lines::<true>(lines, out, max - n, self.limit, &mut self.line)
            } else {
                parse_lines::<false>(lines, out, max - n, self.limit, &mut self.line)
            };
            match parsed {
                Ok((used, k)) => {
                    self.pos += used;
                    n += k;
                }
                Err(fault) => {
                    // Stop at the bad line, so that calling again reports the same error.
                    self.pos += fault.start;
                    return Err(self.fault_error(&fault));
                }
            }
        }
        Ok(n)
    }

    fn position(&self) -> (u64, Option<u64>) {
        let done = match &self.input {
            Input::Plain { read, .. } => read.saturating_sub((self.filled - self.pos) as u64),
            Input::Gz(d) => d.get_ref().get_ref().read - d.get_ref().buffer().len() as u64,
        };
        (done, Some(self.file_len))
    }

    fn unit(&self) -> &'static str {
        "B"
    }

    fn ids_fit_u32(&self) -> bool {
        false
    }
}

/// What is wrong with a line.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Malformed,
    Negative,
    Overflow,
    /// An id (0-based) at or above the node count.
    TooLarge(u64),
    /// Id 0 in a 1-based file.
    ZeroId,
}

/// A bad line: `start` is the offset of the line, `at` of the offending token.
#[derive(Debug)]
struct Fault {
    start: usize,
    at: usize,
    kind: Kind,
}

#[inline(always)]
fn blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

#[inline(always)]
fn digit(c: u8) -> bool {
    c.wrapping_sub(b'0') < 10
}

/// Offset just past the newline that ends the line containing `s[i]`.
fn end_of_line(s: &[u8], i: usize) -> usize {
    memchr(b'\n', &s[i..]).map_or(s.len(), |k| i + k + 1)
}

/// The decimal number starting at `s[start]` (a digit) and the offset after it; None when it
/// does not fit in a u64. `s` must end with a non-digit.
#[inline(always)]
fn number(s: &[u8], start: usize) -> Option<(u64, usize)> {
    let mut i = start;
    let mut v = 0u64;
    loop {
        let d = s[i].wrapping_sub(b'0');
        if d >= 10 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        i += 1;
    }
    if i - start > 19 {
        // 20 digits or more may have wrapped: redo with checks (leading zeros are fine).
        v = s[start..i].iter().try_fold(0u64, |v, &c| {
            v.checked_mul(10)?.checked_add(u64::from(c - b'0'))
        })?;
    }
    Some((v, i))
}

/// Parse complete lines `s` (which ends with `\n`) until `max` edges were appended to `out`;
/// returns the bytes consumed (whole lines) and the edges appended. `line` counts consumed lines.
/// With `ONE_BASED`, ids are shifted down by one (Matrix Market).
fn parse_lines<const ONE_BASED: bool>(
    s: &[u8],
    out: &mut Vec<(u64, u64)>,
    max: usize,
    limit: Option<u64>,
    line: &mut u64,
) -> Result<(usize, usize), Fault> {
    debug_assert_eq!(s.last(), Some(&b'\n'));
    // Every scan below stops at the final '\n' (neither blank nor digit), so indexing stays in
    // bounds; and s[i + 1] after a '\r' exists because the '\r' is not the final '\n'.
    let mut i = 0;
    let mut pushed = 0;
    while i < s.len() && pushed < max {
        let start = i;
        let fault = |at: usize, kind: Kind| Fault { start, at, kind };
        while blank(s[i]) {
            i += 1;
        }
        if !digit(s[i]) {
            match s[i] {
                b'\n' => i += 1,
                b'\r' if s[i + 1] == b'\n' => i += 2,
                b'#' | b'%' => i = end_of_line(s, i),
                b'-' => return Err(fault(i, Kind::Negative)),
                _ => return Err(fault(i, Kind::Malformed)),
            }
            *line += 1;
            continue;
        }
        let (mut src, j) = number(s, i).ok_or_else(|| fault(i, Kind::Overflow))?;
        i = j;
        let sep = i;
        while blank(s[i]) {
            i += 1;
        }
        if s[i] == b',' {
            i += 1;
            while blank(s[i]) {
                i += 1;
            }
        }
        if i == sep || !digit(s[i]) {
            let kind = if i != sep && s[i] == b'-' {
                Kind::Negative
            } else {
                Kind::Malformed
            };
            return Err(fault(i, kind));
        }
        let (mut dst, j) = number(s, i).ok_or_else(|| fault(i, Kind::Overflow))?;
        i = j;
        match s[i] {
            b'\n' => i += 1,
            b'\r' if s[i + 1] == b'\n' => i += 2,
            b' ' | b'\t' | b',' => i = end_of_line(s, i),
            _ => return Err(fault(start, Kind::Malformed)),
        }
        if ONE_BASED {
            if src == 0 || dst == 0 {
                return Err(fault(start, Kind::ZeroId));
            }
            src -= 1;
            dst -= 1;
        }
        if let Some(limit) = limit {
            if src >= limit || dst >= limit {
                return Err(fault(
                    start,
                    Kind::TooLarge(if src >= limit { src } else { dst }),
                ));
            }
        }
        *line += 1;
        out.push((src, dst));
        pushed += 1;
    }
    Ok((i, pushed))
}

#[cfg(test)]
mod tests;
