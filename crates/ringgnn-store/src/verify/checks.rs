//! The one pass `verify` makes over each file ([`check_file`]: size, CRC-32C, zero padding)
//! and the structure of each kind of file it feeds ([`Check`]: indptr, indices, features,
//! labels, node splits, string-id offsets), in blocks of [`BLOCK`] bytes so memory stays O(1)
//! in the file size. The edge splits' checks ([`super::link`]) and the id check
//! ([`super::unique_ids`]) read through the same helpers.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::bitmap::Bitmap;
use crate::input::read_full;
use crate::manifest::{pad_to_page, FeatureInfo, FileEntry, IndexDtype, Manifest, PAGE};
use crate::progress::Progress;
use crate::{Error, IoContext, Result};

/// Bytes per read: a multiple of the page size, so blocks never split an element or a page.
/// Tests use two pages so that tiny datasets cross block boundaries.
const BLOCK: usize = if cfg!(test) {
    2 * PAGE as usize
} else {
    4 << 20
};
/// Degrees below this are counted in a dense histogram; the few larger ones in a map. There are
/// at most sqrt(2E) distinct degrees, so the map stays small. Tests exercise the map too.
const DENSE_DEGREES: u64 = if cfg!(test) { 4 } else { 1 << 16 };
/// What to do about any problem `verify` finds.
pub(super) const ADVICE: &str =
    "the dataset is damaged; rebuild it with ringgnn convert (or ringgnn generate)";

/// The structure of one kind of file, fed its payload front to back.
pub(super) trait Check {
    /// `data` starts at payload byte `pos`, a multiple of [`BLOCK`]. Ok(Some(problem)) describes
    /// the first inconsistency; Err is an I/O error of the check itself.
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>>;
    /// Called after the whole payload when everything fed was fine (and the checksum matched).
    fn finish(&mut self) -> Result<Option<String>> {
        Ok(None)
    }
}

/// Size, checksum, zero padding and structure of one file, in one sequential pass. A checksum
/// mismatch is reported before a structural problem: it says the bytes changed after writing.
pub(super) fn check_file(
    path: &Path,
    key: &str,
    entry: &FileEntry,
    payload: u64,
    check: &mut dyn Check,
    progress: &dyn Progress,
) -> Result<()> {
    let bad = |what: String| {
        Err(Error::Corrupt(format!(
            "{}: {what}; {ADVICE}",
            path.display()
        )))
    };
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return bad(format!("missing (the manifest lists it as files.{key})"))
        }
        Err(e) => return Err(Error::io(path, e)),
    };
    let len = f.metadata().at(path)?.len();
    if len != entry.bytes {
        return bad(format!(
            "{len} bytes on disk but the manifest records {} (files.{key}.bytes)",
            entry.bytes
        ));
    }
    if entry.payload_bytes != payload {
        return bad(format!(
            "files.{key}.payload_bytes is {} but the counts in the manifest give {payload}",
            entry.payload_bytes
        ));
    }
    if entry.bytes != pad_to_page(payload) {
        return bad(format!(
            "files.{key}.bytes is {} but a payload of {payload} bytes padded to {PAGE} gives {}",
            entry.bytes,
            pad_to_page(payload)
        ));
    }
    let want_crc = match u32::from_str_radix(&entry.crc32c, 16) {
        Ok(c) if entry.crc32c.len() == 8 => c,
        _ => {
            return bad(format!(
                "files.{key}.crc32c '{}' is not 8 hex digits",
                entry.crc32c
            ))
        }
    };
    let mut buf = vec![0u8; BLOCK];
    let (mut crc, mut pos, mut problem) = (0u32, 0u64, None);
    while pos < len {
        let n = read_full(&mut f, &mut buf[..(len - pos).min(BLOCK as u64) as usize]).at(path)?;
        if n == 0 {
            return bad(format!(
                "ended after {pos} bytes while being read, {len} expected"
            ));
        }
        let data = &buf[..n];
        crc = crc32c::crc32c_append(crc, data);
        let split = payload.saturating_sub(pos).min(n as u64) as usize;
        if problem.is_none() && split > 0 {
            problem = check.feed(pos, &data[..split])?;
        }
        if problem.is_none() {
            if let Some(i) = data[split..].iter().position(|&b| b != 0) {
                let at = pos + (split + i) as u64;
                problem = Some(format!(
                    "byte {at} is 0x{:02x}, but the padding after the {payload}-byte payload must be zero",
                    data[split + i]
                ));
            }
        }
        pos += n as u64;
        progress.advance(n as u64)?;
    }
    if crc != want_crc {
        let first = problem.map_or(String::new(), |p| format!(" (first inconsistency: {p})"));
        return bad(format!(
            "checksum mismatch: CRC-32C of the file is {crc:08x} but the manifest records {}{first}",
            entry.crc32c
        ));
    }
    match problem.map_or_else(|| check.finish(), |p| Ok(Some(p)))? {
        Some(p) => bad(p),
        None => Ok(()),
    }
}

pub(super) fn u64s(data: &[u8]) -> impl Iterator<Item = u64> + '_ {
    data.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
}

/// indptr: starts at 0, never decreases, ends at E; its differences are the in-degrees, whose
/// statistics must equal the manifest's `degree`.
pub(super) struct Indptr {
    num_nodes: u64,
    num_edges: u64,
    recorded: crate::manifest::DegreeStats,
    prev: u64,
    dense: Vec<u64>,
    sparse: BTreeMap<u64, u64>,
    min: u64,
    max: u64,
}

impl Indptr {
    pub(super) fn new(m: &Manifest) -> Self {
        Indptr {
            num_nodes: m.num_nodes,
            num_edges: m.num_edges,
            recorded: m.degree.clone(),
            prev: 0,
            dense: vec![0; DENSE_DEGREES.min(m.num_edges + 1) as usize],
            sparse: BTreeMap::new(),
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Check for Indptr {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        for (k, x) in u64s(data).enumerate() {
            let i = pos / 8 + k as u64;
            if i == 0 {
                if x != 0 {
                    return Ok(Some(format!("entry 0 is {x} but indptr must start at 0")));
                }
            } else {
                if x < self.prev {
                    return Ok(Some(format!(
                        "entry {i} is {x} but entry {} is {}; indptr must never decrease",
                        i - 1,
                        self.prev
                    )));
                }
                let d = x - self.prev;
                match self.dense.get_mut(d as usize) {
                    Some(c) => *c += 1,
                    None => *self.sparse.entry(d).or_default() += 1,
                }
                self.min = self.min.min(d);
                self.max = self.max.max(d);
            }
            if x > self.num_edges {
                return Ok(Some(format!(
                    "entry {i} is {x} but num_edges is {}",
                    self.num_edges
                )));
            }
            self.prev = x;
        }
        Ok(None)
    }

    fn finish(&mut self) -> Result<Option<String>> {
        let (v, e) = (self.num_nodes, self.num_edges);
        if self.prev != e {
            return Ok(Some(format!(
                "entry {v} (the last) is {} but num_edges is {e}",
                self.prev
            )));
        }
        let got = if v == 0 {
            crate::manifest::DegreeStats::default()
        } else {
            let target = (v - 1) / 2; // the lower median's rank
            let mut seen = 0;
            let mut median = None;
            let counts = self.dense.iter().enumerate().map(|(d, &c)| (d as u64, c));
            for (d, c) in counts.chain(self.sparse.iter().map(|(&d, &c)| (d, c))) {
                seen += c;
                if seen > target {
                    median = Some(d);
                    break;
                }
            }
            crate::manifest::DegreeStats {
                min: self.min,
                max: self.max,
                mean: e as f64 / v as f64,
                median: median.expect("the histogram holds v degrees"),
                zero: self.dense.first().copied().unwrap_or(0),
            }
        };
        let r = &self.recorded;
        let ints = [
            ("min", r.min, got.min),
            ("max", r.max, got.max),
            ("median", r.median, got.median),
            ("zero", r.zero, got.zero),
        ];
        for (field, rec, real) in ints {
            if rec != real {
                return Ok(Some(format!("the manifest's degree.{field} is {rec} but the in-degrees in indptr give {real}")));
            }
        }
        if (r.mean - got.mean).abs() > 1e-9 * got.mean.abs().max(1.0) {
            return Ok(Some(format!(
                "the manifest's degree.mean is {} but the in-degrees in indptr give {}",
                r.mean, got.mean
            )));
        }
        Ok(None)
    }
}

/// indices: every entry < V (a relation's: below its source type's count, kept in `num_nodes`),
/// each node's in-neighbors ascending (ordered by (time, source) instead when the edges have
/// times: [`super::times::EdgeTimes`] checks that). The segment boundaries come from
/// streaming indptr alongside (already verified), so neither file is loaded.
pub(super) struct Indices {
    num_nodes: u64,
    /// Whether each list must be ascending (no edge times).
    sorted: bool,
    width: IndexDtype,
    indptr_path: PathBuf,
    indptr: Option<BufReader<File>>,
    /// The segment last entered: node `node - 1` owns entries `start..end`.
    node: u64,
    start: u64,
    end: u64,
    prev: u64,
}

impl Indices {
    pub(super) fn new(m: &Manifest, indptr_path: PathBuf) -> Self {
        Indices {
            num_nodes: m.num_sources(),
            sorted: m.edge_times.is_none(),
            width: m.graph.indices_dtype,
            indptr_path,
            indptr: None,
            node: 0,
            start: 0,
            end: 0,
            prev: 0,
        }
    }

    /// Enter the segment holding entry `p` (past any empty ones); `p` is then its first entry.
    fn next_segment(&mut self, p: u64) -> Result<()> {
        let path = &self.indptr_path;
        let r = match &mut self.indptr {
            Some(r) => r,
            None => {
                let mut r = BufReader::with_capacity(1 << 20, File::open(path).at(path)?);
                r.read_exact(&mut [0u8; 8]).at(path)?; // indptr[0], known to be 0
                self.indptr.insert(r)
            }
        };
        while p >= self.end {
            let mut b = [0u8; 8];
            r.read_exact(&mut b).at(path)?;
            self.node += 1;
            self.start = self.end;
            self.end = u64::from_le_bytes(b);
        }
        Ok(())
    }
}

impl Indices {
    /// Check `vals`, entries `first..` of indices, a whole segment piece at a time: the common
    /// all-good case is two tight loops; only a bad piece is rescanned for its first problem.
    fn scan<T: Copy + Ord + Into<u64>>(
        &mut self,
        first: u64,
        vals: &[T],
    ) -> Result<Option<String>> {
        let mut i = 0;
        while i < vals.len() {
            let p = first + i as u64;
            let continues = p < self.end;
            if !continues {
                self.next_segment(p)?;
            }
            let piece = &vals[i..((self.end - first) as usize).min(vals.len())];
            let good = piece.iter().all(|&x| x.into() < self.num_nodes)
                && (!self.sorted
                    || piece.windows(2).all(|w| w[0] <= w[1])
                        && (!continues || piece[0].into() >= self.prev));
            if !good {
                let mut prev = if continues { Some(self.prev) } else { None };
                for (k, &x) in piece.iter().enumerate() {
                    let (p, x) = (p + k as u64, x.into());
                    if x >= self.num_nodes {
                        return Ok(Some(format!(
                            "entry {p} is {x} but num_nodes is {}",
                            self.num_nodes
                        )));
                    }
                    if let Some(y) = prev.filter(|&y| x < y && self.sorted) {
                        return Ok(Some(format!(
                            "entry {p} is {x}, smaller than the entry before it ({y}), but the in-neighbors of node {} (entries {}..{}) must be sorted ascending",
                            self.node - 1,
                            self.start,
                            self.end
                        )));
                    }
                    prev = Some(x);
                }
            }
            self.prev = piece[piece.len() - 1].into();
            i += piece.len();
        }
        Ok(None)
    }
}

impl Check for Indices {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        match self.width {
            IndexDtype::U32 => {
                let vals: Vec<u32> = data
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                self.scan(pos / 4, &vals)
            }
            IndexDtype::U64 => {
                let vals: Vec<u64> = u64s(data).collect();
                self.scan(pos / 8, &vals)
            }
        }
    }
}

/// features: the gap after the last row of each page (when rows are packed per page) is zero.
pub(super) struct Features(pub(super) FeatureInfo);

impl Check for Features {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        let f = &self.0;
        if f.rows_per_page == 0 {
            return Ok(None);
        }
        let used = f.rows_per_page * f.row_bytes;
        let end = pos + data.len() as u64;
        let mut page = pos / PAGE;
        while page * PAGE < end {
            let (lo, hi) = ((page * PAGE + used).max(pos), ((page + 1) * PAGE).min(end));
            if lo < hi {
                let gap = &data[(lo - pos) as usize..(hi - pos) as usize];
                if let Some(i) = gap.iter().position(|&b| b != 0) {
                    return Ok(Some(format!(
                        "byte {} is 0x{:02x}, but the padding after the {} rows of page {page} must be zero",
                        lo + i as u64,
                        gap[i],
                        f.rows_per_page
                    )));
                }
            }
            page += 1;
        }
        Ok(None)
    }
}

/// labels: -1 or a class below num_classes; the manifest's counts match.
pub(super) struct Labels {
    info: crate::manifest::LabelInfo,
    max: i64,
    labeled: u64,
}

impl Labels {
    pub(super) fn new(m: &Manifest) -> Self {
        Labels {
            info: m.labels.clone().expect("checked by Manifest::read"),
            max: -1,
            labeled: 0,
        }
    }
}

impl Check for Labels {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        let classes = self.info.num_classes;
        for (k, x) in u64s(data).map(|x| x as i64).enumerate() {
            if x < -1 || (x >= 0 && x as u64 >= classes) {
                return Ok(Some(format!(
                    "entry {} is {x} but labels must be -1 or in [0, {classes}) (labels.num_classes is {classes})",
                    pos / 8 + k as u64
                )));
            }
            self.max = self.max.max(x);
            self.labeled += (x >= 0) as u64;
        }
        Ok(None)
    }

    fn finish(&mut self) -> Result<Option<String>> {
        if self.labeled != self.info.num_labeled {
            return Ok(Some(format!(
                "{} nodes are labeled but the manifest's labels.num_labeled is {}",
                self.labeled, self.info.num_labeled
            )));
        }
        if (self.max + 1) as u64 != self.info.num_classes {
            return Ok(Some(format!(
                "the largest label is {} but the manifest's labels.num_classes is {} (it must be the largest label + 1)",
                self.max, self.info.num_classes
            )));
        }
        Ok(None)
    }
}

/// split_NAME: node ids in [0, V), none twice.
pub(super) struct Split {
    num_nodes: u64,
    seen: Bitmap,
}

impl Split {
    pub(super) fn new(num_nodes: u64) -> Self {
        Split {
            num_nodes,
            seen: Bitmap::new(num_nodes),
        }
    }
}

impl Check for Split {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        for (k, x) in u64s(data).map(|x| x as i64).enumerate() {
            let p = pos / 8 + k as u64;
            if x < 0 || x as u64 >= self.num_nodes {
                return Ok(Some(format!(
                    "entry {p} is {x} but node ids must be in [0, {})",
                    self.num_nodes
                )));
            }
            if !self.seen.insert(x as u64) {
                return Ok(Some(format!(
                    "entry {p} is node {x}, which appears earlier in the split too"
                )));
            }
        }
        Ok(None)
    }
}

/// Files whose bytes have no structure to check beyond size and checksum (original integer
/// ids, which may be anything but are checked unique afterwards; the UTF-8 of string ids,
/// checked when read).
pub(super) struct Opaque;

impl Check for Opaque {
    fn feed(&mut self, _pos: u64, _data: &[u8]) -> Result<Option<String>> {
        Ok(None)
    }
}

/// The offsets of string node ids: from 0, never decreasing, ending at the byte count.
pub(super) struct Offsets {
    bytes: u64,
    last: Option<u64>,
}

impl Offsets {
    pub(super) fn new(bytes: u64) -> Self {
        Offsets { bytes, last: None }
    }
}

impl Check for Offsets {
    fn feed(&mut self, pos: u64, data: &[u8]) -> Result<Option<String>> {
        for (k, x) in u64s(data).enumerate() {
            let p = pos / 8 + k as u64;
            let ok = match self.last {
                None => x == 0,
                Some(prev) => x >= prev && x <= self.bytes,
            };
            if !ok {
                return Ok(Some(format!(
                    "offset {p} is {x}: offsets start at 0, never decrease and end at {}",
                    self.bytes
                )));
            }
            self.last = Some(x);
        }
        Ok(None)
    }
    fn finish(&mut self) -> Result<Option<String>> {
        Ok(match self.last {
            Some(x) if x != self.bytes => Some(format!(
                "the last offset is {x} but node_ids.bytes is {}",
                self.bytes
            )),
            _ => None,
        })
    }
}
