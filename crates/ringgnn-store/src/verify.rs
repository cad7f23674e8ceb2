//! `ringgnn verify`: checksums and structure of a dataset (indptr monotone, indices < V, sizes,
//! labels and split ids in range, zero padding, degree statistics as recorded).
//!
//! Every file is read once, front to back, in large blocks: the CRC-32C, the zero padding and the
//! structure are checked in the same pass, so memory stays O(1) in the edge count (indices are
//! never loaded; a split needs one bit per node to find duplicates). That each original node id
//! occurs once is checked last, by an external sort within the budget ([`unique_ids`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::bitmap::Bitmap;
use crate::hetero::{AnyManifest, Part};
use crate::manifest::{
    pad_to_page, FeatureInfo, FileEntry, IndexDtype, Manifest, NodeIdDtype, MANIFEST_FILE, PAGE,
};
use crate::progress::Progress;
use crate::{Error, IoContext, Result};
use unique_ids::IdCheck;

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
const ADVICE: &str =
    "the dataset is damaged; rebuild it with ringgnn convert (or ringgnn generate)";

/// Memory the budget sets aside for everything but the sort of the original ids: the Python
/// interpreter that hosts the command, the read blocks and readers (about 45 MiB of RSS beside
/// the sort, measured: docs/benchmarks.md, "verify: unique original ids"), and room for the page
/// cache of the files read. The other checks run before the sort, never beside it; the only one
/// that grows with the dataset, a split's (one bit per node), must fit the sort's room too.
pub const OVERHEAD: u64 = 96 << 20;
/// Smallest budget accepted: the overhead plus a sort buffer of 1M ids.
pub const MIN_MEMORY: u64 = OVERHEAD + (16 << 20);

/// What `verify` may use besides reading the dataset.
#[derive(Clone, Debug)]
pub struct VerifyOptions {
    /// The command's memory budget in bytes ([`OVERHEAD`] of it for everything but the sort
    /// of the original ids).
    pub memory: u64,
    /// Where the sorted runs of the original ids go when they do not fit in memory (a
    /// temporary directory made there and removed afterwards); None: beside the dataset.
    pub spill_dir: Option<PathBuf>,
}

#[cfg(test)]
impl VerifyOptions {
    /// The tests' options: 1 GiB, runs beside the dataset.
    pub(crate) fn test() -> Self {
        VerifyOptions {
            memory: 1 << 30,
            spill_dir: None,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    pub files_checked: u64,
    pub bytes_checked: u64,
    /// Bytes the check of the original ids wrote to temporary files (0 when they fit).
    pub spilled_bytes: u64,
}

/// Check everything; the first problem is returned as `Error::Corrupt` naming the file and field.
pub fn verify(dir: &Path, opts: &VerifyOptions, progress: &dyn Progress) -> Result<VerifyReport> {
    if opts.memory < MIN_MEMORY {
        return Err(Error::Input(format!(
            "--memory {} bytes is too small; verify needs at least {}M",
            opts.memory,
            MIN_MEMORY >> 20
        )));
    }
    let spill_dir = match &opts.spill_dir {
        Some(d) if !d.is_dir() => {
            return Err(Error::Input(format!(
                "{}: the directory for the temporary files (--spill-dir) does not exist; create it first",
                d.display()
            )))
        }
        Some(d) => d.clone(),
        None => std::path::absolute(dir)
            .at(dir)?
            .parent()
            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf),
    };
    let how = IdCheck {
        sizes: runs::Sizes::for_budget(opts.memory - OVERHEAD),
        spill_dir: &spill_dir,
        hash: unique_ids::hash_bytes,
    };
    verify_with(dir, &how, progress)
}

/// [`verify`] with the sizes of the id check and its hash given (tests make them tiny).
pub(crate) fn verify_with(
    dir: &Path,
    how: &IdCheck<'_>,
    progress: &dyn Progress,
) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    match AnyManifest::read(dir)? {
        AnyManifest::Homogeneous(m) => {
            verify_view(dir, &m, Parts::default(), how, progress, &mut report)?
        }
        AnyManifest::Heterogeneous(h) => {
            // Each part is checked as the homogeneous dataset its view describes; the
            // relations' entries against their source type's count (`num_sources`).
            let parts = h
                .node_types
                .keys()
                .map(|t| Part::Node(t.clone()))
                .chain(h.relations.keys().map(|r| Part::Relation(r.clone())));
            for part in parts {
                let view = h.view(&part)?;
                // A split relation's reverse (`D:rev_R:S`) must not hold its held-out pairs.
                let reverse = match &part {
                    Part::Relation(r) if !view.edge_splits.is_empty() => {
                        Some(crate::hetero::reverse_name(r)?)
                            .filter(|rev| h.relations.contains_key(rev))
                            .map(Part::Relation)
                    }
                    _ => None,
                };
                let parts = Parts {
                    this: Some(&part),
                    reverse: reverse.as_ref(),
                };
                verify_view(dir, &view, parts, how, progress, &mut report)?;
            }
        }
    }
    Ok(report)
}

/// Which part of a heterogeneous dataset a view is (none: a homogeneous dataset), and the
/// reverse relation its held-out pairs must be absent from.
#[derive(Clone, Copy, Default)]
struct Parts<'a> {
    this: Option<&'a Part>,
    reverse: Option<&'a Part>,
}

/// Check the files of one (homogeneous) manifest or heterogeneous part.
fn verify_view(
    dir: &Path,
    m: &Manifest,
    parts: Parts<'_>,
    how: &IdCheck<'_>,
    progress: &dyn Progress,
    report: &mut VerifyReport,
) -> Result<()> {
    let part = parts.this;
    let manifest_path = dir.join(MANIFEST_FILE);
    let bad_manifest = |what: String| {
        Err(Error::Corrupt(format!(
            "{}: {}{what}; {ADVICE}",
            manifest_path.display(),
            part.map_or(String::new(), |p| format!("{p}: "))
        )))
    };
    if let Some(f) = &m.features {
        let want = FeatureInfo::new(f.dim, f.dtype);
        if f.dim == 0 {
            return bad_manifest("features.dim is 0".into());
        }
        if (f.row_bytes, f.rows_per_page) != (want.row_bytes, want.rows_per_page) {
            return bad_manifest(format!(
                "features.row_bytes {} and rows_per_page {} do not follow from dim {} and dtype {}: expected {} and {}",
                f.row_bytes,
                f.rows_per_page,
                f.dim,
                f.dtype.name(),
                want.row_bytes,
                want.rows_per_page
            ));
        }
    }
    // Graph files first: the indices check walks indptr, which must already be known good.
    // (A node type of a heterogeneous dataset has none.)
    let mut order: Vec<&str> = ["indptr", "indices"]
        .into_iter()
        .filter(|k| m.files.contains_key(*k))
        .collect();
    order.extend(
        m.files
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "indptr" && *k != "indices"),
    );
    let mut expected = BTreeMap::new();
    for &key in &order {
        let payload = match key {
            "indptr" => (m.num_nodes + 1) * 8,
            "indices" => m.num_edges * m.graph.indices_dtype.size(),
            "features" => m
                .features
                .as_ref()
                .map_or(0, |f| f.payload_bytes(m.num_nodes)),
            "labels" => m.num_nodes * 8,
            "node_ids" => m
                .node_ids
                .as_ref()
                .map_or(0, |i| i.ids_payload(m.num_nodes)),
            "node_id_bytes" => m.node_ids.as_ref().map_or(0, |i| i.bytes),
            _ => match edge_payload(m, key).or_else(|| {
                key.strip_prefix("split.")
                    .and_then(|s| m.splits.get(s))
                    .map(|n| n * 8)
            }) {
                Some(n) => n,
                None => {
                    return bad_manifest(format!(
                        "files.{key} is not a file of format version {}",
                        m.version
                    ))
                }
            },
        };
        expected.insert(key, payload);
    }
    let total: u64 = m.files.values().map(|f| f.bytes).sum();
    let stage = part.map_or("verify".to_string(), |p| format!("verify {p}"));
    progress.stage(&stage, Some(total), "B");
    let open = || match part {
        None => crate::dataset::Dataset::open(dir),
        Some(p) => crate::dataset::Dataset::open_part(dir, p),
    };
    for &key in &order {
        let entry = m.file(key)?;
        let path = dir.join(&entry.path);
        let mut check: Box<dyn Check> = match key {
            "indptr" => Box::new(Indptr::new(m)),
            "indices" => Box::new(Indices::new(m, dir.join(&m.file("indptr")?.path))),
            "features" => Box::new(Features(
                m.features.clone().expect("checked by Manifest::read"),
            )),
            "labels" => Box::new(Labels::new(m)),
            "node_ids" => match m.node_ids.as_ref().map(|i| i.dtype) {
                Some(NodeIdDtype::Str) => {
                    Box::new(Offsets::new(m.node_ids.as_ref().map_or(0, |i| i.bytes)))
                }
                _ => Box::new(Opaque),
            },
            "node_id_bytes" => Box::new(Opaque),
            _ => {
                if let Some(name) = key.strip_prefix("edge_split.") {
                    let reverse = parts
                        .reverse
                        .map(|r| Ok((r, crate::dataset::Dataset::open_part(dir, r)?)))
                        .transpose()?;
                    let bipartite = match part {
                        Some(Part::Relation(r)) => {
                            let (s, _, d) = crate::hetero::split_relation(r)?;
                            s != d
                        }
                        _ => false,
                    };
                    Box::new(link::Pairs::new(
                        name,
                        (m.num_sources(), m.num_nodes),
                        bipartite,
                        open()?,
                        reverse,
                    ))
                } else if key.starts_with("edge_shared_negatives.") {
                    Box::new(link::SharedNegatives(m.num_nodes))
                } else if let Some(name) = key.strip_prefix("edge_negatives.") {
                    let info = &m.edge_splits[name];
                    let pairs = dir.join(&m.file(&format!("edge_split.{name}"))?.path);
                    let strict = !info.given_negatives;
                    Box::new(link::Negatives::new(
                        m.num_nodes,
                        info.negatives,
                        pairs,
                        strict,
                    )?)
                } else {
                    // One bit per node, held while the split is read (never beside the sort of
                    // the original ids): within the same room.
                    let bits = m.num_nodes.div_ceil(8);
                    if bits > how.sizes.budget() {
                        return Err(Error::Input(format!(
                            "{}: checking it takes one bit per node ({bits} bytes for {} nodes), more than --memory leaves beyond verify's own {} MiB; raise --memory to at least {}M",
                            path.display(),
                            m.num_nodes,
                            OVERHEAD >> 20,
                            (OVERHEAD + bits).div_ceil(1 << 20)
                        )));
                    }
                    Box::new(Split::new(m.num_nodes))
                }
            }
        };
        check_file(&path, key, entry, expected[key], check.as_mut(), progress)?;
        report.files_checked += 1;
        report.bytes_checked += entry.bytes;
    }
    // Last: the id files' bytes and offsets are known good by now.
    report.spilled_bytes += unique_ids::check(dir, m, part, how, progress)?;
    Ok(())
}

/// Payload bytes of an edge split's pairs (16 per pair) or negatives (8 per negative); None for
/// other keys.
fn edge_payload(m: &Manifest, key: &str) -> Option<u64> {
    if let Some(info) = key
        .strip_prefix("edge_split.")
        .and_then(|s| m.edge_splits.get(s))
    {
        return Some(info.edges * 16);
    }
    if let Some(info) = key
        .strip_prefix("edge_shared_negatives.")
        .and_then(|s| m.edge_splits.get(s))
    {
        return Some(info.shared_negatives * 16);
    }
    let info = key
        .strip_prefix("edge_negatives.")
        .and_then(|s| m.edge_splits.get(s))?;
    Some(info.edges * info.negatives * 8)
}

/// The structure of one kind of file, fed its payload front to back.
trait Check {
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
fn check_file(
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

/// Read until `buf` is full or the file ends.
fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn u64s(data: &[u8]) -> impl Iterator<Item = u64> + '_ {
    data.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
}

/// indptr: starts at 0, never decreases, ends at E; its differences are the in-degrees, whose
/// statistics must equal the manifest's `degree`.
struct Indptr {
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
    fn new(m: &Manifest) -> Self {
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
/// each node's in-neighbors ascending. The segment boundaries come from
/// streaming indptr alongside (already verified), so neither file is loaded.
struct Indices {
    num_nodes: u64,
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
    fn new(m: &Manifest, indptr_path: PathBuf) -> Self {
        Indices {
            num_nodes: m.num_sources(),
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
                && piece.windows(2).all(|w| w[0] <= w[1])
                && (!continues || piece[0].into() >= self.prev);
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
                    if let Some(y) = prev.filter(|&y| x < y) {
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
struct Features(FeatureInfo);

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
struct Labels {
    info: crate::manifest::LabelInfo,
    max: i64,
    labeled: u64,
}

impl Labels {
    fn new(m: &Manifest) -> Self {
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
struct Split {
    num_nodes: u64,
    seen: Bitmap,
}

impl Split {
    fn new(num_nodes: u64) -> Self {
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
struct Opaque;

impl Check for Opaque {
    fn feed(&mut self, _pos: u64, _data: &[u8]) -> Result<Option<String>> {
        Ok(None)
    }
}

/// The offsets of string node ids: from 0, never decreasing, ending at the byte count.
struct Offsets {
    bytes: u64,
    last: Option<u64>,
}

impl Offsets {
    fn new(bytes: u64) -> Self {
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

mod link;
pub(crate) mod runs;
#[cfg(test)]
mod tests;
pub(crate) mod unique_ids;
