//! A [`HeteroSample`] written to a [`SpillFile`] and read back: its arrays as one record of
//! words (`SpillFile::write_words`), so that a typed hyperbatch need not hold its finished
//! samples until each batch is gathered.
//!
//! The arrays, in order: a shape `[types, relations, has edge ids, has times]`, then per type
//! `node`, per type `num_sampled_nodes`, per relation `row`, `col` and `num_sampled_edges`, then
//! (when present) per relation `edge` and per type `time` (as the bits of each `i64`).

use ringgnn_io::AlignedBuf;

use super::HeteroSample;
use crate::spill::{SpillFile, Spilled};
use crate::{Error, Result};

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
        let mut arrays: Vec<&[u64]> = vec![&shape];
        arrays.extend(self.node.iter().map(Vec::as_slice));
        arrays.extend(nsn.iter().map(Vec::as_slice));
        arrays.extend(self.row.iter().map(Vec::as_slice));
        arrays.extend(self.col.iter().map(Vec::as_slice));
        arrays.extend(nse.iter().map(Vec::as_slice));
        arrays.extend(self.edge.iter().flatten().map(Vec::as_slice));
        let times = self.time.iter().flatten();
        arrays.extend(times.map(|t| bytemuck::cast_slice::<i64, u64>(t)));
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
        let want = 1 + 2 * types + 3 * rels + edge as usize * rels + time as usize * types;
        if arrays.len() != want - 1 {
            return Err(damaged());
        }
        let mut take = |n: usize| arrays.by_ref().take(n).collect::<Vec<Vec<u64>>>();
        let sizes = |v: Vec<Vec<u64>>| -> Vec<Vec<usize>> {
            v.into_iter()
                .map(|a| a.into_iter().map(|x| x as usize).collect())
                .collect()
        };
        let node = take(types);
        let num_sampled_nodes = sizes(take(types));
        let row = take(rels);
        let col = take(rels);
        let num_sampled_edges = sizes(take(rels));
        let edge = (edge != 0).then(|| take(rels));
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
}
