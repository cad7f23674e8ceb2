//! A [`HeteroSample`] written to a [`SpillFile`] and read back: its arrays as one record of
//! words (`SpillFile::write_words`), so that a typed hyperbatch need not hold its finished
//! samples until each batch is gathered.
//!
//! The arrays, in order: a shape `[types, relations, has edge ids, has times]`, then per type
//! `node`, per type `num_sampled_nodes`, per relation `row`, `col` and `num_sampled_edges`, then
//! (when present) per relation `edge` and per type `time` (as the bits of each `i64`), then
//! how each id array (`node`, `row`, `col`, `edge`) is packed: two words each, its kind and its
//! length. An id array whose values all fit 32 bits is written two values a word (node ids of a
//! type of at most 2^32 nodes, local ids); a `col` that does not decrease (a relation's edges
//! in frontier order, as the sampler makes them) as the count of each value from its first to
//! its last, 32 bits each, where that is shorter (about one count per frontier node instead of
//! 8 bytes an edge). The record is what is read back, so its size is what a spilled hyperbatch
//! reads: about 4 bytes an edge, as the homogeneous `CompactSample`, instead of 16.

use ringgnn_io::AlignedBuf;

use super::HeteroSample;
use crate::spill::{SpillFile, Spilled};
use crate::{Error, Result};

/// How an id array is packed in a record (see the module docs).
const RAW: u64 = 0;
const HALVES: u64 = 1;
const COUNTS: u64 = 2;

/// `a` packed: its kind, and the words written (`None`: `a` itself, [`RAW`]).
fn pack(a: &[u64], counts_ok: bool) -> (u64, Option<Vec<u64>>) {
    if counts_ok && !a.is_empty() && a.windows(2).all(|w| w[0] <= w[1]) {
        let (first, last) = (a[0], a[a.len() - 1]);
        let span = last - first + 1;
        // One count a value: shorter than the values when fewer values than entries, and the
        // count of one value at most the entries, which fit 32 bits when the array is long.
        if span < a.len() as u64 && a.len() <= u32::MAX as usize {
            let mut halves = vec![0u32; span as usize];
            for &v in a {
                halves[(v - first) as usize] += 1;
            }
            let mut words = Vec::with_capacity(1 + (span as usize).div_ceil(2));
            words.push(first);
            words.extend(join(&halves));
            return (COUNTS, Some(words));
        }
    }
    if a.iter().all(|&v| v <= u32::MAX as u64) {
        let mut words = Vec::with_capacity(a.len().div_ceil(2));
        let mut it = a.chunks_exact(2);
        words.extend(it.by_ref().map(|p| p[0] | p[1] << 32));
        words.extend(it.remainder().iter().copied());
        return (HALVES, Some(words));
    }
    (RAW, None)
}

/// Each array of `raw` as written: its packed words, or itself.
fn written<'a>(v: &'a [Packed], raw: &'a [Vec<u64>]) -> Vec<&'a [u64]> {
    (v.iter().zip(raw))
        .map(|((_, p, _), a)| p.as_deref().unwrap_or(a))
        .collect()
}

/// An id array's kind, packed words (`None`: itself) and length.
type Packed = (u64, Option<Vec<u64>>, usize);

/// 32-bit values two a word, the first in the low half.
fn join(halves: &[u32]) -> impl Iterator<Item = u64> + '_ {
    halves
        .chunks(2)
        .map(|p| p[0] as u64 | (p.get(1).copied().unwrap_or(0) as u64) << 32)
}

/// The array of `len` values packed as `kind` in `words` (see [`pack`]); `None` if they do not
/// hold it.
fn unpack(kind: u64, len: u64, words: Vec<u64>) -> Option<Vec<u64>> {
    let len = usize::try_from(len).ok()?;
    let half = |w: &[u64], i: usize| (w[i / 2] >> (32 * (i % 2))) & u32::MAX as u64;
    match kind {
        RAW => (words.len() == len).then_some(words),
        HALVES if words.len() == len.div_ceil(2) => {
            Some((0..len).map(|i| half(&words, i)).collect())
        }
        COUNTS => {
            let (&first, counts) = words.split_first()?;
            let mut out = Vec::with_capacity(len);
            for i in 0..2 * counts.len() {
                let c = half(counts, i) as usize;
                if out.len() + c > len {
                    return None;
                }
                out.resize(out.len() + c, first.checked_add(i as u64)?);
            }
            (out.len() == len).then_some(out)
        }
        _ => None,
    }
}

impl HeteroSample {
    /// Write this sample to `f` (behind: readable after [`SpillFile::sync`]).
    pub fn spill(&self, f: &SpillFile) -> Result<Spilled> {
        let words = |v: &[usize]| v.iter().map(|&x| x as u64).collect::<Vec<u64>>();
        let shape = [
            self.node.len() as u64,
            self.row.len() as u64,
            self.edge.is_some() as u64,
            self.time.is_some() as u64,
        ];
        let nsn: Vec<Vec<u64>> = self.num_sampled_nodes.iter().map(|v| words(v)).collect();
        let nse: Vec<Vec<u64>> = self.num_sampled_edges.iter().map(|v| words(v)).collect();
        let ids = |v: &[Vec<u64>], counts_ok: bool| -> Vec<Packed> {
            v.iter()
                .map(|a| {
                    let (kind, packed) = pack(a, counts_ok);
                    (kind, packed, a.len())
                })
                .collect()
        };
        let (node, row, col) = (
            ids(&self.node, false),
            ids(&self.row, false),
            ids(&self.col, true),
        );
        let edge = self
            .edge
            .as_deref()
            .map(|e| ids(e, false))
            .unwrap_or_default();
        let mut meta = Vec::new();
        for (kind, _, len) in node.iter().chain(&row).chain(&col).chain(&edge) {
            meta.extend([*kind, *len as u64]);
        }
        let mut arrays: Vec<&[u64]> = vec![&shape];
        arrays.extend(written(&node, &self.node));
        arrays.extend(nsn.iter().map(Vec::as_slice));
        arrays.extend(written(&row, &self.row));
        arrays.extend(written(&col, &self.col));
        arrays.extend(nse.iter().map(Vec::as_slice));
        if let Some(e) = &self.edge {
            arrays.extend(written(&edge, e));
        }
        let times = self.time.iter().flatten();
        arrays.extend(times.map(|t| bytemuck::cast_slice::<i64, u64>(t)));
        arrays.push(&meta);
        f.write_words(&arrays)
    }

    /// The sample written to `f` at `r` by [`Self::spill`], read through `buf`.
    pub fn unspill(f: &SpillFile, r: Spilled, buf: &mut AlignedBuf) -> Result<HeteroSample> {
        let damaged = || {
            Error::Corrupt(format!(
                "spill file {}: a typed sample's record does not have the shape it was \
                 written with",
                f.path().display()
            ))
        };
        let mut arrays = f.read_words(r, buf)?.into_iter();
        let shape = arrays.next().ok_or_else(damaged)?;
        let &[types, rels, edge, time] = shape.as_slice() else {
            return Err(damaged());
        };
        let (types, rels) = (types as usize, rels as usize);
        let want = 2 + 2 * types + 3 * rels + edge as usize * rels + time as usize * types;
        if arrays.len() != want - 1 {
            return Err(damaged());
        }
        let meta = arrays.next_back().ok_or_else(damaged)?;
        let packed = types + 2 * rels + edge as usize * rels;
        if meta.len() != 2 * packed {
            return Err(damaged());
        }
        let mut meta = meta.chunks_exact(2);
        let mut take = |n: usize| arrays.by_ref().take(n).collect::<Vec<Vec<u64>>>();
        let mut ids = |v: Vec<Vec<u64>>| -> Result<Vec<Vec<u64>>> {
            v.into_iter()
                .map(|a| {
                    let m = meta.next().ok_or_else(damaged)?;
                    unpack(m[0], m[1], a).ok_or_else(damaged)
                })
                .collect()
        };
        let sizes = |v: Vec<Vec<u64>>| -> Vec<Vec<usize>> {
            v.into_iter()
                .map(|a| a.into_iter().map(|x| x as usize).collect())
                .collect()
        };
        let node = ids(take(types))?;
        let num_sampled_nodes = sizes(take(types));
        let row = ids(take(rels))?;
        let col = ids(take(rels))?;
        let num_sampled_edges = sizes(take(rels));
        let edge = match edge != 0 {
            true => Some(ids(take(rels))?),
            false => None,
        };
        let time = (time != 0).then(|| {
            take(types)
                .into_iter()
                .map(|a| a.into_iter().map(|x| x as i64).collect())
                .collect()
        });
        Ok(HeteroSample {
            node,
            num_sampled_nodes,
            row,
            col,
            num_sampled_edges,
            edge,
            time,
        })
    }

    /// Bytes it held before its last hop was relabelled, when the samples of a hyperbatch are
    /// handed out as each is finished ([`super::HeteroSampler::sample_each`]), `node_bytes[t]`
    /// a node of type `t` ([`super::HeteroSampler::resident_bytes`]): its node lists but the
    /// nodes its last hop reached, its rows of the hops before the last (4 B an edge: local
    /// ids, kept in 32 bits until it is finished) and their edge ids (8 B). Not its `col`
    /// (until it is finished the sampler holds a count per frontier node instead,
    /// [`super::HeteroSampler::held_bytes`]), nor its times, made then.
    pub fn resident_bytes_with(&self, node_bytes: &[u64]) -> u64 {
        let hops = self.num_sampled_edges.iter().any(|c| !c.is_empty());
        let nodes: u64 = (self.node.iter().zip(&self.num_sampled_nodes))
            .zip(node_bytes)
            .map(|((v, nsn), &w)| {
                let last = if hops {
                    nsn.last().copied().unwrap_or(0)
                } else {
                    0
                };
                w * (v.len() - last) as u64
            })
            .sum();
        let rows: usize = self.row.iter().map(Vec::len).sum();
        let last: usize = self.num_sampled_edges.iter().filter_map(|c| c.last()).sum();
        let ids = if self.edge.is_some() { 8 } else { 0 };
        nodes + (4 + ids) * (rows - last) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_read_back_equal_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let f = SpillFile::create(dir.path()).unwrap();
        let mut buf = AlignedBuf::new(crate::spill::SPILL_BUFFER);
        let plain = HeteroSample {
            node: vec![vec![3, 1, 4], vec![], vec![9]],
            num_sampled_nodes: vec![vec![1, 2], vec![0, 0], vec![0, 1]],
            row: vec![vec![1, 2], vec![0]],
            col: vec![vec![0, 0], vec![0]],
            num_sampled_edges: vec![vec![2], vec![1]],
            edge: None,
            time: None,
        };
        let mut full = plain.clone();
        full.edge = Some(vec![vec![7, 8], vec![1 << 40]]);
        full.time = Some(vec![vec![-5, 0, i64::MAX], vec![], vec![i64::MIN]]);
        let at: Vec<Spilled> = [&plain, &full, &HeteroSample::default()]
            .iter()
            .map(|s| s.spill(&f).unwrap())
            .collect();
        f.sync().unwrap();
        assert_eq!(HeteroSample::unspill(&f, at[1], &mut buf).unwrap(), full);
        assert_eq!(HeteroSample::unspill(&f, at[0], &mut buf).unwrap(), plain);
        let empty = HeteroSample::unspill(&f, at[2], &mut buf).unwrap();
        assert_eq!(empty, HeteroSample::default());
        // Its cols, its last hop's rows (2 + 1 edges: its only hop) and nodes (2 + 0 + 1), and
        // nothing else.
        let wide = [8, 8, 8];
        assert_eq!(
            plain.resident_bytes_with(&wide),
            plain.bytes() - 8 * (2 * 3 + 3)
        );
        // Its node lists held in 32 bits, 4 B a node: type 0's seed alone (the other nodes were
        // reached at its last hop).
        assert_eq!(plain.resident_bytes_with(&[4, 8, 4]), 4);
        // Two hops: 4 nodes, the last hop's 1 not held; 3 edges of the first hop held as
        // 32-bit rows (and their edge ids, 8 B), 2 of the last not; no cols, no times.
        let two = HeteroSample {
            node: vec![vec![3, 1, 4], vec![9]],
            num_sampled_nodes: vec![vec![1, 2, 0], vec![0, 0, 1]],
            row: vec![vec![1, 2, 0, 2], vec![0]],
            col: vec![vec![0, 0, 1, 2], vec![2]],
            num_sampled_edges: vec![vec![2, 2], vec![1, 0]],
            edge: None,
            time: Some(vec![vec![5; 3], vec![5]]),
        };
        assert_eq!(two.resident_bytes_with(&wide), 8 * 3 + 4 * 3);
        assert_eq!(two.resident_bytes_with(&[4, 4]), 4 * 3 + 4 * 3);
        let ids = HeteroSample {
            edge: Some(vec![vec![7, 8, 9, 10], vec![11]]),
            ..two
        };
        assert_eq!(ids.resident_bytes_with(&wide), 8 * 3 + 12 * 3);
    }

    #[test]
    fn ids_that_fit_32_bits_and_cols_in_order_take_about_4_bytes_an_edge() {
        let dir = tempfile::tempdir().unwrap();
        let f = SpillFile::create(dir.path()).unwrap();
        let mut buf = AlignedBuf::new(crate::spill::SPILL_BUFFER);
        // 1000 frontier nodes of 10 edges each (two with none), rows local ids, nodes global.
        let col: Vec<u64> = (0..1000u64)
            .filter(|&j| j != 17 && j != 500)
            .flat_map(|j| std::iter::repeat_n(j, 10))
            .collect();
        let row: Vec<u64> = (0..col.len() as u64).map(|i| (i * 7919) % 20_000).collect();
        let node: Vec<u64> = (0..20_001u64).map(|i| i * 3 + (1 << 31)).collect();
        let s = HeteroSample {
            node: vec![node],
            num_sampled_nodes: vec![vec![1000, 19_001]],
            row: vec![row],
            col: vec![col],
            num_sampled_edges: vec![vec![9980]],
            edge: None,
            time: None,
        };
        let at = s.spill(&f).unwrap();
        f.sync().unwrap();
        assert_eq!(HeteroSample::unspill(&f, at, &mut buf).unwrap(), s);
        // 4 B a node and a row, 4 B a count of col (one per value 0..=999), a few header words.
        let want = 4 * (20_001 + 9980 + 1000) + 8 * 40;
        assert!(at.bytes() <= want, "{} > {want}", at.bytes());
        assert!(at.bytes() > 4 * (20_001 + 9980 + 1000), "{}", at.bytes());
    }

    proptest::proptest! {
        /// Any arrays read back as written: values past 32 bits, cols out of order or with
        /// gaps longer than themselves, odd lengths, empty ones.
        #[test]
        fn any_sample_reads_back_as_written(
            node in proptest::collection::vec(
                proptest::collection::vec(proptest::prop_oneof![0..5u64, 0..u64::MAX], 0..9), 1..3),
            col in proptest::collection::vec(
                proptest::collection::vec(proptest::prop_oneof![0..3u64, 0..(1u64 << 33)], 0..12), 1..3),
            sorted in proptest::bool::ANY,
            edge in proptest::bool::ANY,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let f = SpillFile::create(dir.path()).unwrap();
            let mut buf = AlignedBuf::new(crate::spill::SPILL_BUFFER);
            let mut col = col;
            if sorted {
                col.iter_mut().for_each(|c| c.sort_unstable());
            }
            let s = HeteroSample {
                num_sampled_nodes: node.iter().map(|n| vec![n.len()]).collect(),
                node,
                row: col.iter().map(|c| c.iter().map(|x| x ^ 1).collect()).collect(),
                num_sampled_edges: col.iter().map(|c| vec![c.len()]).collect(),
                edge: edge.then(|| col.iter().map(|c| c.iter().map(|x| x << 20).collect()).collect()),
                col,
                time: None,
            };
            let at = s.spill(&f).unwrap();
            f.sync().unwrap();
            proptest::prop_assert_eq!(HeteroSample::unspill(&f, at, &mut buf).unwrap(), s);
        }
    }
}
