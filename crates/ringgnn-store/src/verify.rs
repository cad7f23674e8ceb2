//! `ringgnn verify`: checksums and structure of a dataset (indptr monotone, indices < V, sizes,
//! labels and split ids in range, zero padding, degree statistics as recorded).
//!
//! Every file is read once, front to back, in large blocks: the CRC-32C, the zero padding and the
//! structure are checked in the same pass, so memory stays O(1) in the edge count (indices are
//! never loaded; a split needs one bit per node to find duplicates).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::attach::Bitmap;
use crate::manifest::{
    pad_to_page, FeatureInfo, FileEntry, IndexDtype, Manifest, MANIFEST_FILE, PAGE,
};
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
const ADVICE: &str =
    "the dataset is damaged; rebuild it with ringgnn convert (or ringgnn generate)";

#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    pub files_checked: u64,
    pub bytes_checked: u64,
}

/// Check everything; the first problem is returned as `Error::Corrupt` naming the file and field.
pub fn verify(dir: &Path, progress: &dyn Progress) -> Result<VerifyReport> {
    let m = Manifest::read(dir)?;
    let manifest_path = dir.join(MANIFEST_FILE);
    let bad_manifest = |what: String| {
        Err(Error::Corrupt(format!(
            "{}: {what}; {ADVICE}",
            manifest_path.display()
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
    let mut order: Vec<&str> = vec!["indptr", "indices"];
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
            _ => match key.strip_prefix("split.").and_then(|s| m.splits.get(s)) {
                Some(n) => n * 8,
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
    progress.stage("verify", Some(total), "B");
    let mut report = VerifyReport::default();
    for &key in &order {
        let entry = m.file(key)?;
        let path = dir.join(&entry.path);
        let mut check: Box<dyn Check> = match key {
            "indptr" => Box::new(Indptr::new(&m)),
            "indices" => Box::new(Indices::new(&m, dir.join(&m.file("indptr")?.path))),
            "features" => Box::new(Features(
                m.features.clone().expect("checked by Manifest::read"),
            )),
            "labels" => Box::new(Labels::new(&m)),
            _ => Box::new(Split::new(m.num_nodes)),
        };
        check_file(&path, key, entry, expected[key], check.as_mut(), progress)?;
        report.files_checked += 1;
        report.bytes_checked += entry.bytes;
    }
    Ok(report)
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

/// indices: every entry < V, each node's in-neighbors ascending. The segment boundaries come from
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
            num_nodes: m.num_nodes,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::assemble;
    use crate::attach::tests::Record;
    use crate::build::{GraphSummary, INDICES_FILE, INDPTR_FILE};
    use crate::features::{split_file, FeatureWriter, LABELS_FILE};
    use crate::manifest::{DegreeStats, FeatureDtype, LabelInfo};
    use crate::rng;
    use crate::writer::Staging;
    use crate::NoProgress;

    struct Graph {
        indptr: Vec<u64>,
        indices: Vec<u32>,
    }

    /// In-degree statistics computed the obvious way, independently of `Indptr`.
    fn stats(indptr: &[u64]) -> DegreeStats {
        let mut d: Vec<u64> = indptr.windows(2).map(|w| w[1] - w[0]).collect();
        if d.is_empty() {
            return DegreeStats::default();
        }
        d.sort();
        DegreeStats {
            min: d[0],
            max: *d.last().unwrap(),
            mean: *indptr.last().unwrap() as f64 / d.len() as f64,
            median: d[(d.len() - 1) / 2],
            zero: d.iter().filter(|&&x| x == 0).count() as u64,
        }
    }

    /// Write a dataset by hand: the graph, 1000-wide f32 features (one row per page, so pages
    /// have an inner gap), labels and the given splits.
    fn build(out: &Path, g: &Graph, labels: &[i64], splits: &[(&str, &[i64])]) -> PathBuf {
        let v = g.indptr.len() as u64 - 1;
        let mut s = Staging::create(out, true).unwrap();
        let mut w = s.writer(INDPTR_FILE).unwrap();
        w.write_u64s(&g.indptr).unwrap();
        s.add("indptr", w.finish().unwrap());
        let mut w = s.writer(INDICES_FILE).unwrap();
        w.write_u32s(&g.indices).unwrap();
        s.add("indices", w.finish().unwrap());
        let mut fw = FeatureWriter::new(&s, 1000, FeatureDtype::F32).unwrap();
        for i in 0..v {
            fw.push_row(&vec![i as f32 + 0.5; 1000]).unwrap();
        }
        let (features, e) = fw.finish().unwrap();
        s.add("features", e);
        crate::features::write_i64_file(&mut s, "labels", LABELS_FILE, labels).unwrap();
        let mut sizes = BTreeMap::new();
        for (name, ids) in splits {
            crate::features::write_i64_file(
                &mut s,
                &format!("split.{name}"),
                &split_file(name),
                ids,
            )
            .unwrap();
            sizes.insert(name.to_string(), ids.len() as u64);
        }
        let graph = GraphSummary {
            num_nodes: v,
            num_edges: g.indices.len() as u64,
            indices_dtype: IndexDtype::U32,
            degree: stats(&g.indptr),
        };
        let labels = LabelInfo {
            num_classes: (labels.iter().max().copied().unwrap_or(-1) + 1) as u64,
            num_labeled: labels.iter().filter(|&&l| l >= 0).count() as u64,
        };
        s.commit(assemble(
            &graph,
            Some(features),
            Some(labels),
            sizes,
            Default::default(),
        ))
        .unwrap()
    }

    /// 3 nodes, edges 0->1, 2->1, 1->2 (the example of FORMAT.md).
    fn tiny(dir: &tempfile::TempDir) -> PathBuf {
        let g = Graph {
            indptr: vec![0, 0, 2, 3],
            indices: vec![0, 2, 1],
        };
        build(
            &dir.path().join("ds"),
            &g,
            &[1, -1, 0],
            &[("train", &[0, 2]), ("test", &[1])],
        )
    }

    fn err(ds: &Path) -> String {
        match verify(ds, &NoProgress) {
            Err(Error::Corrupt(m)) => m,
            other => panic!("expected Error::Corrupt, got {other:?}"),
        }
    }

    fn edit_manifest(ds: &Path, f: impl FnOnce(&mut Manifest)) {
        let mut m = Manifest::read(ds).unwrap();
        f(&mut m);
        std::fs::write(ds.join(MANIFEST_FILE), m.to_json()).unwrap();
    }

    /// Overwrite bytes of `file` at `at`; with `fix_crc` record the new checksum, so that only
    /// the structure is wrong.
    fn poke(ds: &Path, file: &str, at: u64, bytes: &[u8], fix_crc: bool) {
        let p = ds.join(file);
        let mut b = std::fs::read(&p).unwrap();
        b[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
        std::fs::write(&p, &b).unwrap();
        if fix_crc {
            edit_manifest(ds, |m| {
                for e in m.files.values_mut().filter(|e| e.path == file) {
                    e.crc32c = format!("{:08x}", crc32c::crc32c(&b));
                }
            });
        }
    }

    #[test]
    fn a_good_dataset_passes() {
        let dir = tempfile::tempdir().unwrap();
        let ds = tiny(&dir);
        let rec = Record::default();
        let r = verify(&ds, &rec).unwrap();
        let total: u64 = Manifest::read(&ds)
            .unwrap()
            .files
            .values()
            .map(|f| f.bytes)
            .sum();
        assert_eq!((r.files_checked, r.bytes_checked), (6, total));
        assert_eq!(total, 4096 * 5 + 3 * 4096);
        let rec = rec.get();
        assert_eq!(
            rec.stages,
            vec![("verify".to_string(), Some(total), "B".to_string())]
        );
        assert_eq!(rec.done, total);
    }

    #[test]
    fn random_graphs_pass_and_their_degree_stats_match() {
        for seed in 0..12u64 {
            let mut r = rng::stream(seed, 0, 0);
            let v = rng::below(&mut r, 2000);
            let mut indptr = vec![0u64];
            let mut indices = Vec::new();
            for _ in 0..v {
                // Mostly small degrees, a few hubs beyond the dense histogram.
                let d = match rng::below(&mut r, 10) {
                    0 => rng::below(&mut r, 200),
                    _ => rng::below(&mut r, 6),
                };
                let mut nb: Vec<u32> = (0..d).map(|_| rng::below(&mut r, v) as u32).collect();
                nb.sort();
                indices.extend(nb);
                indptr.push(indices.len() as u64);
            }
            let labels: Vec<i64> = (0..v).map(|i| (i as i64 % 5) - 1).collect();
            let dir = tempfile::tempdir().unwrap();
            let ds = build(
                &dir.path().join("ds"),
                &Graph { indptr, indices },
                &labels,
                &[("all", &[])],
            );
            verify(&ds, &NoProgress).unwrap_or_else(|e| panic!("seed {seed}, {v} nodes: {e}"));
        }
    }

    #[test]
    fn damaged_bytes_fail_the_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let ds = tiny(&dir);
        poke(&ds, INDICES_FILE, 2000, &[1], false); // in the padding
        let e = err(&ds);
        assert!(
            e.contains("indices.bin: checksum mismatch")
                && e.contains("first inconsistency: byte 2000 is 0x01"),
            "{e}"
        );
        assert!(e.ends_with(ADVICE), "{e}");
        let ds = tiny(&dir);
        poke(&ds, FEATURES_FILE_NAME, 5, &[0xff], false); // a feature value: only the checksum can tell
        let e = err(&ds);
        assert!(
            e.contains("features.bin: checksum mismatch") && !e.contains("first inconsistency"),
            "{e}"
        );
    }

    const FEATURES_FILE_NAME: &str = crate::features::FEATURES_FILE;

    #[test]
    fn wrong_sizes_and_missing_files_fail() {
        let dir = tempfile::tempdir().unwrap();
        let ds = tiny(&dir);
        let p = ds.join(FEATURES_FILE_NAME);
        std::fs::write(&p, &std::fs::read(&p).unwrap()[..4096]).unwrap();
        let e = err(&ds);
        assert!(e.contains("features.bin: 4096 bytes on disk but the manifest records 12288 (files.features.bytes)"), "{e}");
        let ds = tiny(&dir);
        std::fs::remove_file(ds.join("split_test.bin")).unwrap();
        assert!(err(&ds)
            .contains("split_test.bin: missing (the manifest lists it as files.split.test)"));
        let ds = tiny(&dir);
        edit_manifest(&ds, |m| {
            m.files.get_mut("labels").unwrap().payload_bytes = 16
        });
        assert!(err(&ds).contains(
            "labels.bin: files.labels.payload_bytes is 16 but the counts in the manifest give 24"
        ));
        let ds = tiny(&dir);
        edit_manifest(&ds, |m| m.num_edges = 4);
        assert!(err(&ds).contains("indptr.bin: entry 3 (the last) is 3 but num_edges is 4"));
        let ds = tiny(&dir);
        edit_manifest(&ds, |m| {
            m.files.get_mut("indices").unwrap().payload_bytes = 16
        });
        assert!(err(&ds).contains(
            "indices.bin: files.indices.payload_bytes is 16 but the counts in the manifest give 12"
        ));
        let ds = tiny(&dir);
        edit_manifest(&ds, |m| {
            m.files.get_mut("indptr").unwrap().crc32c = "xyz".into()
        });
        assert!(err(&ds).contains("files.indptr.crc32c 'xyz' is not 8 hex digits"));
        let ds = tiny(&dir);
        edit_manifest(&ds, |m| {
            let e = m.files["labels"].clone();
            m.files.insert("extra".into(), e);
        });
        assert!(err(&ds).contains("manifest.json: files.extra is not a file of format version 1"));
        let ds = tiny(&dir);
        edit_manifest(&ds, |m| m.features.as_mut().unwrap().rows_per_page = 2);
        assert!(err(&ds).contains("features.row_bytes 4000 and rows_per_page 2 do not follow"));
    }

    fn u64le(x: u64) -> [u8; 8] {
        x.to_le_bytes()
    }

    #[test]
    fn bad_indptr_fails_with_the_position() {
        let dir = tempfile::tempdir().unwrap();
        let ds = tiny(&dir);
        poke(&ds, INDPTR_FILE, 8, &u64le(3), true); // [0, 3, 2, 3]
        let e = err(&ds);
        assert!(
            e.contains("indptr.bin: entry 2 is 2 but entry 1 is 3; indptr must never decrease"),
            "{e}"
        );
        let ds = tiny(&dir);
        poke(&ds, INDPTR_FILE, 0, &u64le(1), true);
        assert!(err(&ds).contains("indptr.bin: entry 0 is 1 but indptr must start at 0"));
        let ds = tiny(&dir);
        poke(&ds, INDPTR_FILE, 24, &u64le(2), true);
        assert!(err(&ds).contains("indptr.bin: entry 3 (the last) is 2 but num_edges is 3"));
        let ds = tiny(&dir);
        poke(&ds, INDPTR_FILE, 16, &u64le(7), true);
        assert!(err(&ds).contains("indptr.bin: entry 2 is 7 but num_edges is 3"));
    }

    #[test]
    fn bad_indices_fail_with_the_position() {
        let dir = tempfile::tempdir().unwrap();
        let ds = tiny(&dir);
        poke(&ds, INDICES_FILE, 4, &99u32.to_le_bytes(), true);
        let e = err(&ds);
        assert!(
            e.contains("indices.bin: entry 1 is 99 but num_nodes is 3") && e.ends_with(ADVICE),
            "{e}"
        );
        let ds = tiny(&dir);
        poke(&ds, INDICES_FILE, 0, &[2, 0, 0, 0, 0, 0, 0, 0], true); // node 1: [2, 0]
        let e = err(&ds);
        assert!(
            e.contains("indices.bin: entry 1 is 0, smaller than the entry before it (2)")
                && e.contains("node 1 (entries 0..2)"),
            "{e}"
        );
        // A smaller id at the start of the next node's list is fine: [0, 2 | 1].
        let ds = tiny(&dir);
        verify(&ds, &NoProgress).unwrap();
        // Order across a read-block boundary (2048 u32 entries per block in tests): node 1 has
        // 3000 in-neighbors 0, 0, 1, 1, ...; entry 2048 made smaller than entry 2047.
        let g = Graph {
            indptr: vec![0, 0, 3000, 3000],
            indices: (0..3000).map(|i| i / 1000).collect(),
        };
        let ds = build(&dir.path().join("big"), &g, &[0, 0, 0], &[]);
        verify(&ds, &NoProgress).unwrap();
        poke(&ds, INDICES_FILE, 2048 * 4, &[0, 0, 0, 0], true);
        let e = err(&ds);
        assert!(
            e.contains("entry 2048 is 0, smaller than the entry before it (2)")
                && e.contains("node 1 (entries 0..3000)"),
            "{e}"
        );
    }

    #[test]
    fn bad_labels_and_splits_fail() {
        let dir = tempfile::tempdir().unwrap();
        let ds = tiny(&dir);
        poke(&ds, LABELS_FILE, 0, &5i64.to_le_bytes(), true);
        assert!(err(&ds).contains("labels.bin: entry 0 is 5 but labels must be -1 or in [0, 2)"));
        let ds = tiny(&dir);
        poke(&ds, LABELS_FILE, 8, &(-2i64).to_le_bytes(), true);
        assert!(err(&ds).contains("labels.bin: entry 1 is -2"));
        let ds = tiny(&dir);
        edit_manifest(&ds, |m| m.labels.as_mut().unwrap().num_labeled = 3);
        assert!(err(&ds).contains(
            "labels.bin: 2 nodes are labeled but the manifest's labels.num_labeled is 3"
        ));
        let ds = tiny(&dir);
        edit_manifest(&ds, |m| m.labels.as_mut().unwrap().num_classes = 4);
        assert!(
            err(&ds).contains("the largest label is 1 but the manifest's labels.num_classes is 4")
        );
        let ds = tiny(&dir);
        poke(&ds, "split_train.bin", 8, &3i64.to_le_bytes(), true);
        assert!(err(&ds).contains("split_train.bin: entry 1 is 3 but node ids must be in [0, 3)"));
        let ds = tiny(&dir);
        poke(&ds, "split_train.bin", 8, &0i64.to_le_bytes(), true);
        assert!(err(&ds).contains("split_train.bin: entry 1 is node 0, which appears earlier"));
    }

    #[test]
    fn nonzero_padding_fails() {
        let dir = tempfile::tempdir().unwrap();
        let ds = tiny(&dir);
        poke(&ds, INDPTR_FILE, 100, &[7], true);
        let e = err(&ds);
        assert!(e.contains("indptr.bin: byte 100 is 0x07, but the padding after the 32-byte payload must be zero"), "{e}");
        // Inside the payload of features: the gap after the one 4000-byte row of page 1.
        let ds = tiny(&dir);
        poke(&ds, FEATURES_FILE_NAME, 4096 + 4001, &[1], true);
        let e = err(&ds);
        assert!(e.contains("features.bin: byte 8097 is 0x01, but the padding after the 1 rows of page 1 must be zero"), "{e}");
        // After the last row (in the file padding).
        let ds = tiny(&dir);
        poke(&ds, FEATURES_FILE_NAME, 3 * 4096 - 1, &[1], true);
        assert!(err(&ds).contains(
            "features.bin: byte 12287 is 0x01, but the padding after the 12192-byte payload"
        ));
    }

    #[test]
    fn wrong_degree_stats_fail() {
        let dir = tempfile::tempdir().unwrap();
        for (field, f) in [
            (
                "degree.min is 1 but the in-degrees in indptr give 0",
                (|d: &mut DegreeStats| d.min = 1) as fn(&mut DegreeStats),
            ),
            ("degree.max is 5 but the in-degrees in indptr give 2", |d| {
                d.max = 5
            }),
            (
                "degree.median is 0 but the in-degrees in indptr give 1",
                |d| d.median = 0,
            ),
            (
                "degree.zero is 2 but the in-degrees in indptr give 1",
                |d| d.zero = 2,
            ),
            (
                "degree.mean is 1.5 but the in-degrees in indptr give 1",
                |d| d.mean = 1.5,
            ),
        ] {
            let ds = tiny(&dir);
            edit_manifest(&ds, |m| f(&mut m.degree));
            let e = err(&ds);
            assert!(
                e.contains("indptr.bin: the manifest's") && e.contains(field),
                "{e}"
            );
        }
    }

    /// Datasets made by `convert` (with features, labels and fraction splits) and by both
    /// generators pass, and a flipped edge in them is caught.
    #[test]
    fn built_and_generated_datasets_pass() {
        use crate::api::{convert, ConvertOptions, GraphOptions, SplitSpec};
        let dir = tempfile::tempdir().unwrap();
        let edges = dir.path().join("e.tsv");
        let mut r = rng::stream(5, 0, 0);
        let text: String = (0..5000)
            .map(|_| format!("{}\t{}\n", rng::below(&mut r, 700), rng::below(&mut r, 700)))
            .collect();
        std::fs::write(&edges, text).unwrap();
        let x: Vec<u8> = (0..700 * 3)
            .flat_map(|k| (k as f32).to_le_bytes())
            .collect();
        let y: Vec<u8> = (0..700i64)
            .flat_map(|v| (v % 4 - 1).to_le_bytes())
            .collect();
        crate::npy::write_npy(&dir.path().join("x.npy"), "<f4", &[700, 3], false, &x).unwrap();
        crate::npy::write_npy(&dir.path().join("y.npy"), "<i8", &[700], false, &y).unwrap();
        let opts = ConvertOptions {
            input: edges,
            out: dir.path().join("conv"),
            format: None,
            graph: GraphOptions {
                undirected: true,
                num_nodes: Some(700),
                ..Default::default()
            },
            features: Some(dir.path().join("x.npy")),
            feature_dtype: None,
            labels: Some(dir.path().join("y.npy")),
            split: Some(SplitSpec::Fractions(vec![
                ("train".into(), 0.6),
                ("test".into(), 0.4),
            ])),
            seed: 3,
            overwrite: false,
        };
        convert(&opts, &NoProgress).unwrap();
        let sbm = crate::generate::SbmOptions {
            out: dir.path().join("sbm"),
            nodes: 500,
            classes: 4,
            avg_degree: 6.0,
            feature_dim: 8,
            feature_dtype: FeatureDtype::Bf16,
            seed: 1,
            split: vec![("train".into(), 0.5), ("val".into(), 0.25)],
            graph: GraphOptions::default(),
            overwrite: false,
        };
        crate::generate::generate_sbm(&sbm, &NoProgress).unwrap();
        let rmat = crate::generate::RmatOptions {
            out: dir.path().join("rmat"),
            scale: 9,
            edge_factor: 8,
            seed: 1,
            graph: GraphOptions::default(),
            overwrite: false,
        };
        crate::generate::generate_rmat(&rmat, &NoProgress).unwrap();
        for name in ["conv", "sbm", "rmat"] {
            let ds = dir.path().join(name);
            let r = verify(&ds, &NoProgress).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(r.files_checked >= 2);
            poke(&ds, INDICES_FILE, 0, &[0xff, 0xff], false);
            assert!(
                err(&ds).contains("indices.bin: checksum mismatch"),
                "{name}"
            );
        }
    }

    #[test]
    fn empty_graph_passes() {
        let dir = tempfile::tempdir().unwrap();
        let ds = build(
            &dir.path().join("e"),
            &Graph {
                indptr: vec![0],
                indices: vec![],
            },
            &[],
            &[],
        );
        verify(&ds, &NoProgress).unwrap();
    }
}
