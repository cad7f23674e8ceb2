//! Attaching per-node data to a dataset being built: features and labels from `.npy` files,
//! splits from id files or random fractions. Everything streams; memory stays O(1) in the node
//! count except for a V-bit bitmap to catch duplicate split ids.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

use half::{bf16, f16};

use crate::bitmap::Bitmap;
use crate::manifest::{FeatureDtype, FeatureInfo, LabelInfo};
use crate::node_files::{split_file, FeatureWriter, LABELS_FILE};
use crate::npy::{read_header, NpyHeader};
use crate::options::{check_split_name, SplitSpec};
use crate::progress::Progress;
use crate::rng;
use crate::writer::{BinWriter, Staging};
use crate::{input_err, Error, IoContext, Result};

/// Bytes of input read per block: large enough that reads are sequential and cheap, small
/// enough to stay far below any `--memory` budget.
const BLOCK_BYTES: u64 = 16 << 20;
/// Elements per chunk when streaming 1-D integer arrays (8 bytes each: 512 KiB).
const INT_CHUNK: u64 = 1 << 16;
/// `purpose` of the random stream that draws fraction splits (ASCII "split").
const SPLIT_STREAM: u64 = 0x73_70_6c_69_74;
/// Slack for fractions such as 0.29 whose binary value is a hair below the decimal one, so that
/// 0.29 of 100 nodes is 29 and not 28.
const FRACTION_EPS: f64 = 1e-9;

const FEATURE_DTYPES: [&str; 3] = ["float16", "float32", "float64"];
const LABEL_DTYPES: [&str; 2] = ["int32", "int64"];
const ID_DTYPES: [&str; 4] = ["int32", "int64", "uint32", "uint64"];

/// Validate a features `.npy` header: 2-D, float16/float32/float64.
pub fn check_features(path: &Path) -> Result<NpyHeader> {
    let h = read_header(path)?;
    validate_features(&h)?;
    Ok(h)
}

fn validate_features(h: &NpyHeader) -> Result<()> {
    if h.shape.len() != 2 {
        return input_err!(
            "{}: features must be a 2-D array [num_nodes, feature_dim], found shape {:?}; reshape it, e.g. x.reshape(len(x), -1)",
            h.path.display(),
            h.shape
        );
    }
    h.expect_dtype(&FEATURE_DTYPES, "features")?;
    if h.shape[1] == 0 {
        return input_err!(
            "{}: features have shape {:?}, zero values per node; leave out --features instead",
            h.path.display(),
            h.shape
        );
    }
    Ok(())
}

/// Validate a labels `.npy` header: 1-D, int32/int64.
pub fn check_labels(path: &Path) -> Result<NpyHeader> {
    let h = read_header(path)?;
    validate_labels(&h)?;
    Ok(h)
}

fn validate_labels(h: &NpyHeader) -> Result<()> {
    if h.shape.len() != 1 {
        return input_err!(
            "{}: labels must be a 1-D array with one class per node (-1 = unlabeled), found shape {:?}; flatten it with y.ravel()",
            h.path.display(),
            h.shape
        );
    }
    h.expect_dtype(&LABEL_DTYPES, "labels")
}

/// Validate a split spec before the build (names, fractions in [0,1] summing to <= 1, files exist).
pub fn check_split_spec(spec: &SplitSpec) -> Result<()> {
    let names: Vec<&str> = match spec {
        SplitSpec::Files(v) => v.iter().map(|(n, _)| n.as_str()).collect(),
        SplitSpec::Fractions(v) => v.iter().map(|(n, _)| n.as_str()).collect(),
    };
    if names.is_empty() {
        return input_err!("the split spec names no split; give e.g. train=0.8,val=0.1,test=0.1");
    }
    for (i, name) in names.iter().enumerate() {
        check_split_name(name, "--split")?;
        if names[..i].contains(name) {
            return input_err!("split '{name}' is given twice; name each split once");
        }
    }
    match spec {
        SplitSpec::Fractions(v) => {
            for (name, f) in v {
                if !(0.0..=1.0).contains(f) {
                    return input_err!("split {name}={f}: a fraction must be between 0 and 1");
                }
            }
            let sum: f64 = v.iter().map(|(_, f)| f).sum();
            if sum > 1.0 + FRACTION_EPS {
                return input_err!(
                    "split fractions add up to {sum}, more than 1; make them sum to at most 1"
                );
            }
        }
        SplitSpec::Files(v) => {
            for (name, path) in v {
                Error::must_exist(path, format!("id file of split '{name}' not found"))?;
                validate_ids(&read_header(path)?, name)?;
            }
        }
    }
    Ok(())
}

fn validate_ids(h: &NpyHeader, name: &str) -> Result<()> {
    if h.shape.len() != 1 {
        return input_err!(
            "{}: split '{name}' must be a 1-D array of node ids, found shape {:?}; flatten it with ids.ravel()",
            h.path.display(),
            h.shape
        );
    }
    h.expect_dtype(&ID_DTYPES, &format!("split '{name}'"))
}

/// The dtype features of `header` are stored in: `dtype` when given, else f16 for float16
/// input and f32 for float32/float64.
pub fn stored_dtype(header: &NpyHeader, dtype: Option<FeatureDtype>) -> FeatureDtype {
    dtype.unwrap_or(if header.dtype.size == 2 {
        FeatureDtype::F16
    } else {
        FeatureDtype::F32
    })
}

/// Bytes per node of the stored features of `header` (see [`stored_dtype`]).
pub fn feature_row_bytes(header: &NpyHeader, dtype: Option<FeatureDtype>) -> u64 {
    header
        .shape
        .get(1)
        .copied()
        .unwrap_or(1)
        .saturating_mul(stored_dtype(header, dtype).size())
}

/// Stream the features into `features.bin` (padding rule of FORMAT.md); rows must equal `num_nodes`.
pub fn attach_features(
    staging: &mut Staging,
    path: &Path,
    header: &NpyHeader,
    num_nodes: u64,
    dtype: Option<FeatureDtype>,
    progress: &dyn Progress,
) -> Result<FeatureInfo> {
    validate_features(header)?;
    let (rows, dim) = (header.shape[0], header.shape[1]);
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    if rows != num_nodes {
        let advice = if rows > num_nodes {
            format!("pass --num-nodes {rows} (nodes without edges are allowed)")
        } else {
            format!("pass --num-nodes {rows} if no edge uses a node id >= {rows}, otherwise add the missing rows")
        };
        return input_err!(
            "{name} has {rows} rows but the graph has {num_nodes} nodes; features need exactly one row per node: {advice}"
        );
    }
    let src_size = header.dtype.size;
    let dtype = stored_dtype(header, dtype);
    let mut out = FeatureWriter::new(staging, dim, dtype)?;
    let row_in = dim * src_size;
    let row_out = out.info().row_bytes as usize;
    let block_rows = (BLOCK_BYTES / row_in).clamp(1, rows.max(1));
    progress.stage("features", Some(rows * row_in), "B");

    let file = File::open(path).at(path)?;
    let mut raw = vec![0u8; (block_rows * row_in) as usize];
    let mut col = Vec::new();
    let mut enc = Vec::new();
    let mut r0 = 0;
    while r0 < rows {
        let b = block_rows.min(rows - r0);
        let raw = &mut raw[..(b * row_in) as usize];
        if header.fortran_order {
            // Column-major: column j of rows r0..r0+b is contiguous; gather it into C order.
            col.resize((b * src_size) as usize, 0);
            for j in 0..dim {
                file.read_exact_at(&mut col, header.data_offset + (j * rows + r0) * src_size)
                    .at(path)?;
                let s = src_size as usize;
                for (i, v) in col.chunks_exact(s).enumerate() {
                    let at = (i as u64 * row_in + j * src_size) as usize;
                    raw[at..at + s].copy_from_slice(v);
                }
            }
        } else {
            file.read_exact_at(raw, header.data_offset + r0 * row_in)
                .at(path)?;
        }
        encode(raw, src_size, dtype, &mut enc);
        for row in enc.chunks_exact(row_out) {
            out.push_row_bytes(row)?;
        }
        progress.advance(b * row_in)?;
        r0 += b;
    }
    let (info, entry) = out.finish()?;
    staging.add("features", entry);
    Ok(info)
}

/// Convert little-endian floats of `src_size` bytes into `dst` (round to nearest even; NaN and
/// infinities are kept). Each value is rounded once, straight from the input precision.
fn encode(src: &[u8], src_size: u64, dst: FeatureDtype, out: &mut Vec<u8>) {
    fn each<const N: usize>(
        src: &[u8],
        out: &mut Vec<u8>,
        mut f: impl FnMut([u8; N], &mut Vec<u8>),
    ) {
        src.chunks_exact(N)
            .for_each(|c| f(c.try_into().unwrap(), out));
    }
    out.clear();
    out.reserve(src.len() / src_size as usize * dst.size() as usize);
    use FeatureDtype::*;
    match (src_size, dst) {
        (4, F32) | (2, F16) => out.extend_from_slice(src),
        (2, F32) => each(src, out, |b, o| {
            o.extend_from_slice(&f16::from_le_bytes(b).to_f32().to_le_bytes())
        }),
        // f16 -> f32 is exact, so this rounds once.
        (2, Bf16) => each(src, out, |b, o| {
            o.extend_from_slice(&bf16::from_f32(f16::from_le_bytes(b).to_f32()).to_le_bytes())
        }),
        (4, F16) => each(src, out, |b, o| {
            o.extend_from_slice(&f16::from_f32(f32::from_le_bytes(b)).to_le_bytes())
        }),
        (4, Bf16) => each(src, out, |b, o| {
            o.extend_from_slice(&bf16::from_f32(f32::from_le_bytes(b)).to_le_bytes())
        }),
        (8, F32) => each(src, out, |b, o| {
            o.extend_from_slice(&(f64::from_le_bytes(b) as f32).to_le_bytes())
        }),
        (8, F16) => each(src, out, |b, o| {
            o.extend_from_slice(&f16::from_f64(f64::from_le_bytes(b)).to_le_bytes())
        }),
        (8, Bf16) => each(src, out, |b, o| {
            o.extend_from_slice(&bf16::from_f64(f64::from_le_bytes(b)).to_le_bytes())
        }),
        _ => unreachable!("validate_features admits float16/32/64 only"),
    }
}

/// Stream labels into `labels.bin` (i64, -1 = unlabeled); length must equal `num_nodes`.
pub fn attach_labels(
    staging: &mut Staging,
    path: &Path,
    header: &NpyHeader,
    num_nodes: u64,
) -> Result<LabelInfo> {
    validate_labels(header)?;
    let len = header.shape[0];
    if len != num_nodes {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        return input_err!(
            "{name} has {len} labels but the graph has {num_nodes} nodes; give one label per node (-1 = unlabeled), or pass --num-nodes {len} if that is the true node count"
        );
    }
    let mut w = staging.writer(LABELS_FILE)?;
    let (mut max, mut labeled) = (-1i64, 0u64);
    let mut buf = Vec::new();
    for_each_int(path, header, |start, vals| {
        buf.clear();
        for (k, &v) in vals.iter().enumerate() {
            if v < -1 {
                return input_err!(
                    "{}: label at index {} is {v}; labels must be class ids >= 0, or -1 for unlabeled nodes",
                    path.display(),
                    start + k as u64
                );
            }
            let v = v as i64; // int32/int64 only, so exact
            max = max.max(v);
            labeled += (v >= 0) as u64;
            buf.push(v);
        }
        w.write_i64s(&buf)
    })?;
    staging.add("labels", w.finish()?);
    Ok(LabelInfo {
        num_classes: (max + 1) as u64,
        num_labeled: labeled,
    })
}

/// Call `f(first_index, values)` on consecutive chunks of a 1-D integer array. Values are i128 so
/// that every int/uint dtype, and the errors that quote them, are exact.
fn for_each_int(
    path: &Path,
    h: &NpyHeader,
    mut f: impl FnMut(u64, &[i128]) -> Result<()>,
) -> Result<()> {
    let size = h.dtype.size;
    let signed = h.dtype.kind == 'i';
    let file = File::open(path).at(path)?;
    let mut raw = vec![0u8; (INT_CHUNK * size) as usize];
    let mut vals = Vec::with_capacity(INT_CHUNK as usize);
    let n = h.len();
    let mut i = 0;
    while i < n {
        let k = INT_CHUNK.min(n - i);
        let raw = &mut raw[..(k * size) as usize];
        file.read_exact_at(raw, h.data_offset + i * size).at(path)?;
        vals.clear();
        match (size, signed) {
            (4, true) => vals.extend(
                raw.chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i128),
            ),
            (4, false) => vals.extend(
                raw.chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().unwrap()) as i128),
            ),
            (8, true) => vals.extend(
                raw.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as i128),
            ),
            (8, false) => vals.extend(
                raw.chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap()) as i128),
            ),
            _ => unreachable!("callers admit 32- and 64-bit integers only"),
        }
        f(i, &vals)?;
        i += k;
    }
    Ok(())
}

/// Write `split_NAME.bin` files; returns name -> size.
pub fn attach_splits(
    staging: &mut Staging,
    spec: &SplitSpec,
    num_nodes: u64,
    labeled_only: bool,
    seed: u64,
) -> Result<BTreeMap<String, u64>> {
    check_split_spec(spec)?;
    match spec {
        SplitSpec::Files(files) => {
            let mut seen = Bitmap::new(num_nodes);
            let mut sizes = BTreeMap::new();
            for (name, path) in files {
                let h = read_header(path)?;
                validate_ids(&h, name)?;
                seen.clear();
                let mut w = staging.writer(&split_file(name))?;
                let mut buf = Vec::new();
                for_each_int(path, &h, |start, vals| {
                    buf.clear();
                    for (k, &v) in vals.iter().enumerate() {
                        let pos = start + k as u64;
                        if v < 0 || v >= num_nodes as i128 {
                            return input_err!(
                                "{}: entry {pos} of split '{name}' is {v} but node ids must be in [0, {num_nodes}); the graph has {num_nodes} nodes",
                                path.display()
                            );
                        }
                        if !seen.insert(v as u64) {
                            return input_err!(
                                "{}: node {v} appears more than once in split '{name}' (again at entry {pos}); list each node once, e.g. with np.unique",
                                path.display()
                            );
                        }
                        buf.push(v as i64);
                    }
                    w.write_i64s(&buf)
                })?;
                staging.add(&format!("split.{name}"), w.finish()?);
                sizes.insert(name.clone(), h.len());
            }
            Ok(sizes)
        }
        SplitSpec::Fractions(fracs) => random_splits(staging, fracs, num_nodes, labeled_only, seed),
    }
}

/// Draw fraction splits: exact sizes, uniformly random among the candidates (the labeled nodes
/// when `labeled_only`, else all nodes), each split's ids ascending.
fn random_splits(
    staging: &mut Staging,
    fracs: &[(String, f64)],
    num_nodes: u64,
    labeled_only: bool,
    seed: u64,
) -> Result<BTreeMap<String, u64>> {
    let labels = staging.file_path(LABELS_FILE);
    let candidates = if labeled_only {
        let mut n = 0;
        for_each_label(&labels, num_nodes, |_, l| n += (l >= 0) as u64)?;
        n
    } else {
        num_nodes
    };
    let fractions: Vec<f64> = fracs.iter().map(|(_, f)| *f).collect();
    let mut sel = Selector::new(&fractions, candidates, seed);
    let sizes: BTreeMap<String, u64> = fracs
        .iter()
        .zip(&sel.need)
        .map(|((n, _), &k)| (n.clone(), k))
        .collect();
    let mut writers: Vec<(BinWriter, Vec<i64>)> = fracs
        .iter()
        .map(|(n, _)| Ok((staging.writer(&split_file(n))?, Vec::new())))
        .collect::<Result<_>>()?;
    let mut emit = |v: u64| -> Result<()> {
        if let Some(s) = sel.pick() {
            let (w, buf) = &mut writers[s];
            buf.push(v as i64);
            if buf.len() >= 8192 {
                w.write_i64s(buf)?;
                buf.clear();
            }
        }
        Ok(())
    };
    if labeled_only {
        let mut res = Ok(());
        for_each_label(&labels, num_nodes, |v, l| {
            if l >= 0 && res.is_ok() {
                res = emit(v);
            }
        })?;
        res?;
    } else {
        for v in 0..num_nodes {
            emit(v)?;
        }
    }
    for ((name, _), (mut w, buf)) in fracs.iter().zip(writers) {
        w.write_i64s(&buf)?;
        staging.add(&format!("split.{name}"), w.finish()?);
    }
    Ok(sizes)
}

/// Selection sampling: fed the candidates one by one, candidate i joins split s with probability
/// need_s / remaining. Every assignment with the exact sizes is equally likely; one pass, O(#splits)
/// memory, and ids come out in the order they went in.
struct Selector {
    /// Still to pick, per split (initially the split sizes).
    need: Vec<u64>,
    /// Candidates not yet seen.
    remaining: u64,
    rng: rng::Rng,
}

impl Selector {
    /// Split s gets floor(fractions[s] * candidates) nodes (clamped so the sizes never exceed the
    /// candidates when fractions sum to 1 within rounding).
    fn new(fractions: &[f64], candidates: u64, seed: u64) -> Self {
        let mut left = candidates;
        let need = fractions
            .iter()
            .map(|f| {
                let want = f * candidates as f64;
                let k = ((want + want * FRACTION_EPS).floor() as u64).min(left);
                left -= k;
                k
            })
            .collect();
        Selector {
            need,
            remaining: candidates,
            rng: rng::stream(seed, SPLIT_STREAM, 0),
        }
    }

    /// The split of the next candidate, or None when it stays out of every split.
    fn pick(&mut self) -> Option<usize> {
        if self.need.iter().all(|&k| k == 0) {
            return None;
        }
        debug_assert!(self.remaining > 0);
        let mut u = rng::below(&mut self.rng, self.remaining);
        self.remaining -= 1;
        for (s, k) in self.need.iter_mut().enumerate() {
            if u < *k {
                *k -= 1;
                return Some(s);
            }
            u -= *k;
        }
        None
    }
}

/// Stream the first `num_nodes` labels of a `labels.bin` being built.
fn for_each_label(path: &Path, num_nodes: u64, mut f: impl FnMut(u64, i64)) -> Result<()> {
    let mut r = BufReader::with_capacity(1 << 20, File::open(path).at(path)?);
    let mut b = [0u8; 8];
    for v in 0..num_nodes {
        r.read_exact(&mut b).at(path)?;
        f(v, i64::from_le_bytes(b));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
