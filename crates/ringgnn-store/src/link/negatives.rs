//! The evaluation negatives of each held-out split, once the CSC and its pairs are written:
//! drawn per pair ([`attach_negatives`]) or copied as given, and the pairs read back
//! ([`read_pairs`]). In a split by time, where the nodes have times, a pair's negatives are
//! drawn among the nodes not newer than the pair ([`AtTime`]).

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::{
    check_negatives, negatives_file, pairs_file, times_file, HeldOut, LinkSplitOptions, CHUNK,
};
use crate::manifest::{EdgeSplitInfo, TRAIN};
use crate::progress::Progress;
use crate::rng::{self, mix64};
use crate::writer::Staging;
use crate::{input_err, Error, IoContext, Result};

/// `purpose` of the streams that draw evaluation negatives (ASCII "lneg").
const NEG_STREAM: u64 = 0x6c_6e_65_67;

/// Draw `opts.negatives` distinct negative destinations in `[0, num_nodes)` other than `dst` for
/// every pair of each held-out split (not `train`), and write them as `edge_negatives.NAME`.
/// Pair `i` of split NAME draws from its own stream (seed, "lneg", hash(NAME) + i): the
/// negatives of a pair do not depend on the other splits or on how the file is read. A split
/// named in `opts.given_negatives` stores those as given instead; a split with shared negatives
/// (`opts.shared_negatives`, OGB's `edge_neg`) gets none per pair: its evaluation ranks every
/// positive against the shared ones, so per-pair negatives would be written and never read.
/// In a split by time (`held.times`), `node_times` (the destinations' node times file, if they
/// have times, and the build's `--memory`) limits pair `i`'s negatives to the nodes whose time
/// is not after its own (see [`AtTime`]), drawn from the same stream.
pub fn attach_negatives(
    staging: &mut Staging,
    held: &HeldOut,
    num_nodes: u64,
    opts: &LinkSplitOptions,
    seed: u64,
    node_times: Option<(&Path, u64)>,
    progress: &dyn Progress,
) -> Result<BTreeMap<String, EdgeSplitInfo>> {
    let at_time = match node_times {
        Some((p, memory)) if held.times && draws_any(held, opts) => {
            Some(AtTime::load(p, num_nodes, memory)?)
        }
        _ => None,
    };
    let given = &opts.given_negatives;
    let mut out = BTreeMap::new();
    for (name, _, pairs) in &held.splits {
        if let Some((_, path)) = given.iter().find(|(n, _)| n == name) {
            let info = copy_negatives(staging, name, path, *pairs, num_nodes)?;
            out.insert(name.clone(), info);
            continue;
        }
        let shared = opts.shared_negatives.iter().any(|(n, _)| n == name);
        let k = opts.negatives;
        let negatives = if name == TRAIN || shared { 0 } else { k };
        out.insert(
            name.clone(),
            EdgeSplitInfo {
                edges: *pairs,
                negatives,
                given_negatives: false,
                shared_negatives: 0,
                times: held.times,
            },
        );
        if negatives == 0 {
            continue;
        }
        check_negatives(k, num_nodes)?;
        progress.stage(&format!("negatives {name}"), Some(*pairs), "edges");
        let path = staging.file_path(&pairs_file(name));
        let mut reader = BufReader::with_capacity(1 << 20, File::open(&path).at(&path)?);
        let mut w = staging.writer(&negatives_file(name))?;
        let name_hash = name.bytes().fold(0u64, |h, b| mix64(h ^ b as u64));
        let mut set = HashSet::with_capacity(2 * k as usize);
        let mut row = Vec::with_capacity(k as usize);
        let mut buf = Vec::with_capacity(CHUNK * k as usize);
        let mut times = match &at_time {
            Some(_) => {
                let p = staging.file_path(&times_file(name));
                Some((BufReader::with_capacity(1 << 20, File::open(&p).at(&p)?), p))
            }
            None => None,
        };
        let mut end = 0;
        let mut pair = [0u8; 16];
        for i in 0..*pairs {
            reader.read_exact(&mut pair).at(&path)?;
            let src = u64::from_le_bytes(pair[..8].try_into().unwrap());
            let dst = u64::from_le_bytes(pair[8..].try_into().unwrap());
            let mut r = rng::stream(seed, NEG_STREAM, name_hash.wrapping_add(i));
            match (&at_time, &mut times) {
                (Some(at), Some((t, p))) => {
                    let mut b = [0u8; 8];
                    t.read_exact(&mut b).at(p)?;
                    let time = i64::from_le_bytes(b);
                    at.draw(&mut end, &mut r, dst, time, k, &mut set, &mut row)
                        .map_err(|few| few.error(name, i, (src, dst), time, k))?;
                }
                _ => distinct_except(&mut r, num_nodes, dst, k, &mut set, &mut row),
            }
            buf.extend(row.iter().map(|&x| x as i64));
            if buf.len() >= CHUNK * k as usize {
                w.write_i64s(&buf)?;
                buf.clear();
                progress.advance(CHUNK as u64)?;
            }
        }
        w.write_i64s(&buf)?;
        staging.add(&format!("edge_negatives.{name}"), w.finish()?);
    }
    Ok(out)
}

/// Whether some held-out split of `held` draws negatives per pair (see [`attach_negatives`]).
fn draws_any(held: &HeldOut, opts: &LinkSplitOptions) -> bool {
    opts.negatives > 0
        && held.splits.iter().any(|(n, _, pairs)| {
            n != TRAIN
                && *pairs > 0
                && !opts
                    .given_negatives
                    .iter()
                    .chain(&opts.shared_negatives)
                    .any(|(g, _)| g == n)
        })
}

/// The nodes in order of (time, id), to draw a pair's negatives among the nodes not newer than
/// it: those are a prefix of the order, whose end moves forward as a split's pairs (ordered by
/// time) are read. Holds 16 bytes per node (their times, the order and each node's place in it)
/// out of `--memory` (the graph's sort buffers are gone by then).
struct AtTime {
    times: Vec<i64>,
    order: Vec<u32>,
    rank: Vec<u32>,
}

/// Fewer nodes are eligible than a pair needs negatives: how many are.
struct TooFew(u64);

impl TooFew {
    fn error(&self, name: &str, i: u64, (src, dst): (u64, u64), time: i64, k: u64) -> Error {
        Error::Input(format!(
            "--link-negatives {k}: pair {i} ({src}, {dst}) of edge split {name}, at time {time}, has only {} nodes of node time <= {time} besides its destination to draw its negatives from; lower --link-negatives to at most {}, or give later split times",
            self.0, self.0
        ))
    }
}

impl AtTime {
    fn load(path: &Path, num_nodes: u64, memory: u64) -> Result<Self> {
        let bytes = num_nodes.saturating_mul(16);
        let room = memory.saturating_sub(crate::budget::OVERHEAD);
        if bytes > room {
            return input_err!(
                "drawing negatives at the pairs' times holds the {num_nodes} nodes in order of their times, 16 bytes each ({} MiB), more than --memory {} MiB leaves beyond the builder's own {} MiB; raise --memory to at least {}M",
                bytes >> 20,
                memory >> 20,
                crate::budget::OVERHEAD >> 20,
                (crate::budget::OVERHEAD + bytes).div_ceil(1 << 20)
            );
        }
        let mut reader = BufReader::with_capacity(1 << 20, File::open(path).at(path)?);
        let mut times = Vec::with_capacity(num_nodes as usize);
        let mut b = [0u8; 8];
        for _ in 0..num_nodes {
            reader.read_exact(&mut b).at(path)?;
            times.push(i64::from_le_bytes(b));
        }
        let mut order: Vec<u32> = (0..num_nodes as u32).collect();
        order.sort_unstable_by_key(|&v| (times[v as usize], v));
        let mut rank = vec![0u32; num_nodes as usize];
        for (i, &v) in order.iter().enumerate() {
            rank[v as usize] = i as u32;
        }
        Ok(AtTime { times, order, rank })
    }

    /// `k` distinct nodes of time `<= time` other than `dst`, uniformly, in `row`. `end` is the
    /// number of nodes not newer than the previous pair of the split (0 before its first): it
    /// only moves forward while times do not decrease.
    #[allow(clippy::too_many_arguments)]
    fn draw(
        &self,
        end: &mut usize,
        r: &mut rng::Rng,
        dst: u64,
        time: i64,
        k: u64,
        set: &mut HashSet<u64>,
        row: &mut Vec<u64>,
    ) -> std::result::Result<(), TooFew> {
        let t = |v: u32| self.times[v as usize];
        if *end > 0 && t(self.order[*end - 1]) > time {
            *end = self.order.partition_point(|&v| t(v) <= time);
        }
        while *end < self.order.len() && t(self.order[*end]) <= time {
            *end += 1;
        }
        let m = *end as u64;
        // Positions in the order: dst's, or `m` (just past the eligible) when it is newer.
        let pos = if t(dst as u32) <= time {
            self.rank[dst as usize] as u64
        } else {
            m
        };
        let n = if pos < m { m } else { m + 1 };
        if n - 1 < k {
            return Err(TooFew(n - 1));
        }
        distinct_except(r, n, pos, k, set, row);
        for x in row.iter_mut() {
            *x = self.order[*x as usize] as u64;
        }
        Ok(())
    }
}

/// Store split `name`'s negatives from `path` (`.npy` int64 `(pairs, K)`, C order), each id
/// checked to be below `num_nodes`.
fn copy_negatives(
    staging: &mut Staging,
    name: &str,
    path: &Path,
    pairs: u64,
    num_nodes: u64,
) -> Result<EdgeSplitInfo> {
    let h = crate::npy::read_header(path)?;
    h.expect_dtype(&["int64"], "negatives")?;
    let k = match h.shape[..] {
        [n, k] if n == pairs && k >= 1 && !h.fortran_order => k,
        _ => {
            return input_err!(
                "{}: negatives of edge split {name} must be a C-order array of shape ({pairs}, K >= 1), one row per stored pair; found shape {:?}",
                path.display(),
                h.shape
            )
        }
    };
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path).at(path)?);
    std::io::copy(&mut (&mut reader).take(h.data_offset), &mut std::io::sink()).at(path)?;
    let mut w = staging.writer(&negatives_file(name))?;
    let mut buf = vec![0u8; 8 * (CHUNK * k as usize).min((pairs * k) as usize).max(1)];
    let mut left = pairs * k;
    let mut at = 0u64;
    while left > 0 {
        let n = (left as usize).min(buf.len() / 8);
        reader.read_exact(&mut buf[..8 * n]).at(path)?;
        for (j, c) in buf[..8 * n].chunks_exact(8).enumerate() {
            let x = i64::from_le_bytes(c.try_into().unwrap());
            if x < 0 || x as u64 >= num_nodes {
                let e = at + j as u64;
                return input_err!(
                    "{}: negative {} of pair {} of edge split {name} is {x}, but node ids are in [0, {num_nodes})",
                    path.display(),
                    e % k,
                    e / k
                );
            }
        }
        w.write(&buf[..8 * n])?;
        left -= n as u64;
        at += n as u64;
    }
    staging.add(&format!("edge_negatives.{name}"), w.finish()?);
    Ok(EdgeSplitInfo {
        edges: pairs,
        negatives: k,
        given_negatives: true,
        shared_negatives: 0,
        times: false,
    })
}

/// `k` distinct values of `[0, n)` other than `except`, uniformly (Floyd's algorithm on the
/// `n - 1` others), in `row`.
fn distinct_except(
    r: &mut rng::Rng,
    n: u64,
    except: u64,
    k: u64,
    set: &mut HashSet<u64>,
    row: &mut Vec<u64>,
) {
    set.clear();
    row.clear();
    let m = n - 1;
    for j in (m - k)..m {
        let t = rng::below(r, j + 1);
        let pick = if set.insert(t) {
            t
        } else {
            set.insert(j);
            j
        };
        row.push(if pick >= except { pick + 1 } else { pick });
    }
}

/// The first `n` pairs of a split file read back as (src, dst) (for tests).
pub fn read_pairs(path: &Path, n: u64) -> Result<Vec<(u64, u64)>> {
    let bytes = std::fs::read(path).at(path)?;
    Ok(bytes[..(16 * n as usize).min(bytes.len())]
        .chunks_exact(16)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().unwrap()),
                u64::from_le_bytes(c[8..].try_into().unwrap()),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floyd_draws_distinct_values_other_than_the_positive() {
        let mut set = HashSet::new();
        let mut row = Vec::new();
        for seed in 0..200 {
            let mut r = rng::stream(seed, 1, 2);
            distinct_except(&mut r, 10, seed % 10, 9, &mut set, &mut row);
            let mut sorted = row.clone();
            sorted.sort();
            let want: Vec<u64> = (0..10).filter(|&x| x != seed % 10).collect();
            assert_eq!(sorted, want);
        }
    }

    #[test]
    fn at_time_draws_among_the_nodes_not_newer_than_the_pair() {
        // Node times 5, 1, 9, 1, 3: in order of (time, id) 1, 3, 4, 0, 2.
        let at = AtTime {
            times: vec![5, 1, 9, 1, 3],
            order: vec![1, 3, 4, 0, 2],
            rank: vec![3, 0, 4, 1, 2],
        };
        let (mut set, mut row) = (HashSet::new(), Vec::new());
        let mut r = rng::stream(1, 2, 3);
        let mut end = 0;
        // At 3 nodes 1, 3, 4 are eligible; besides the destination 3, exactly 1 and 4.
        at.draw(&mut end, &mut r, 3, 3, 2, &mut set, &mut row)
            .ok()
            .unwrap();
        row.sort();
        assert_eq!(row, [1, 4]);
        // Back in time (the end moves back), and a destination newer than the pair is no
        // exception: at 1, both of 1 and 3.
        at.draw(&mut end, &mut r, 2, 1, 2, &mut set, &mut row)
            .ok()
            .unwrap();
        row.sort();
        assert_eq!(row, [1, 3]);
        // Too few: at 1 with destination 1 only node 3 is left.
        assert_eq!(
            at.draw(&mut end, &mut r, 1, 1, 2, &mut set, &mut row)
                .err()
                .unwrap()
                .0,
            1
        );
        // Before every node: none.
        assert_eq!(
            at.draw(&mut end, &mut r, 0, 0, 1, &mut set, &mut row)
                .err()
                .unwrap()
                .0,
            0
        );
        // Uniform among the eligible: at 5, destination 0, each of 1, 3, 4 in 1/3 of the rows.
        let mut counts = [0u32; 5];
        for _ in 0..9000 {
            at.draw(&mut end, &mut r, 0, 5, 1, &mut set, &mut row)
                .ok()
                .unwrap();
            counts[row[0] as usize] += 1;
        }
        assert_eq!((counts[0], counts[2]), (0, 0));
        // Each count is binomial(9000, 1/3): sd 45; allow 5 sd.
        for x in [1, 3, 4] {
            assert!((counts[x] as f64 - 3000.0).abs() < 225.0, "{counts:?}");
        }
    }

    #[test]
    fn floyd_is_uniform() {
        // 3 of the 5 nodes other than 2, in [0, 6): each of 0,1,3,4,5 appears in 3/5 of rows.
        let mut set = HashSet::new();
        let mut row = Vec::new();
        let mut counts = [0u32; 6];
        let mut r = rng::stream(9, 9, 9);
        let rows = 20000;
        for _ in 0..rows {
            distinct_except(&mut r, 6, 2, 3, &mut set, &mut row);
            for &x in &row {
                counts[x as usize] += 1;
            }
        }
        assert_eq!(counts[2], 0);
        // Each count is binomial(20000, 0.6): sd 69; allow 5 sd.
        for (x, &c) in counts.iter().enumerate().filter(|(x, _)| *x != 2) {
            assert!((c as f64 - 12000.0).abs() < 350.0, "node {x}: {c}");
        }
    }
}
