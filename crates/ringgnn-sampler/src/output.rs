//! The sample: [`SampledSubgraph`], the same data type as PyG's `SamplerOutput`.

/// One sampled mini-batch, with exactly the layout of PyG's `SamplerOutput` for node-wise
/// neighbor sampling.
///
/// - `node`: global node ids. The seeds come first, deduplicated keeping the first occurrence
///   (PyG's `NeighborSampler` deduplicates them the same way when it relabels), then the nodes
///   first reached at hop 1 in discovery order, then those first reached at hop 2, and so on.
///   A node appears once.
/// - `row`, `col`: one entry per sampled edge, as local indices into `node`. `row` is the
///   sampled neighbor (the message source), `col` the node it was sampled for. Edges are grouped
///   by hop; within a hop they follow the order of the expanded nodes, and for each node the
///   order of the positions drawn in its neighbor list (ascending).
/// - `edge`: global edge ids (positions in the `indices` file), parallel to `row`/`col`, when
///   they were asked for.
/// - `num_sampled_nodes`: `hops + 1` entries; entry 0 is the number of (distinct) seeds, entry
///   `k` the number of nodes first reached at hop `k`. They sum to `node.len()`.
/// - `num_sampled_edges`: `hops` entries, the number of edges sampled at each hop. They sum to
///   `row.len()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampledSubgraph {
    pub node: Vec<u64>,
    pub row: Vec<u64>,
    pub col: Vec<u64>,
    pub edge: Option<Vec<u64>>,
    pub num_sampled_nodes: Vec<usize>,
    pub num_sampled_edges: Vec<usize>,
}

impl SampledSubgraph {
    /// Bytes of its arrays (lengths, not capacities).
    pub fn bytes(&self) -> u64 {
        8 * (self.node.len()
            + self.row.len()
            + self.col.len()
            + self.edge.as_ref().map_or(0, Vec::len)) as u64
    }

    /// Number of hops the sample was drawn with.
    pub fn hops(&self) -> usize {
        self.num_sampled_edges.len()
    }

    /// The local ids of the nodes first reached at hop `k` (`k = 0`: the seeds).
    pub fn hop_nodes(&self, k: usize) -> std::ops::Range<usize> {
        let start: usize = self.num_sampled_nodes[..k].iter().sum();
        start..start + self.num_sampled_nodes[k]
    }

    /// The positions in `row`/`col` of the edges sampled at hop `k` (1-based, as in PyG: hop 1
    /// holds the edges drawn for the seeds).
    pub fn hop_edges(&self, k: usize) -> std::ops::Range<usize> {
        assert!(k >= 1, "hop_edges: hops are numbered from 1");
        let start: usize = self.num_sampled_edges[..k - 1].iter().sum();
        start..start + self.num_sampled_edges[k - 1]
    }
}

/// A sample in the form a batch keeps while it is being sampled, and a hyperbatch keeps until
/// each batch is handed out: `row` as 32-bit local ids, and instead of `col` the number of edges
/// drawn for each expanded node. The expanded nodes of hop `k` are exactly the nodes first
/// reached at hop `k - 1`, in local-id order, so `counts[l]` is the number of edges whose `col`
/// is `l`, and they come in that order: `col` is implied. 4 bytes per edge instead of 16.
/// [`Self::expand`] gives the [`SampledSubgraph`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactSample {
    pub(crate) node: Vec<u64>,
    pub(crate) row: Vec<u32>,
    /// One entry per expanded node, in local-id order (`counts.len()` is the number of nodes
    /// reached before the last hop).
    pub(crate) counts: Vec<u32>,
    pub(crate) edge: Option<Vec<u64>>,
    pub(crate) num_sampled_nodes: Vec<usize>,
    pub(crate) num_sampled_edges: Vec<usize>,
}

impl CompactSample {
    /// Global node ids, as [`SampledSubgraph::node`].
    pub fn node(&self) -> &[u64] {
        &self.node
    }

    /// Number of sampled edges.
    pub fn num_edges(&self) -> usize {
        self.row.len()
    }

    /// Bytes held (capacities).
    pub fn bytes(&self) -> u64 {
        8 * (self.node.capacity() + self.edge.as_ref().map_or(0, Vec::capacity)) as u64
            + 4 * (self.row.capacity() + self.counts.capacity()) as u64
    }

    /// Bytes of its arrays' contents (lengths, not capacities).
    pub(crate) fn len_bytes(&self) -> u64 {
        8 * (self.node.len() + self.edge.as_ref().map_or(0, Vec::len)) as u64
            + 4 * (self.row.len() + self.counts.len()) as u64
    }

    /// The sample in PyG's layout.
    pub fn expand(mut self) -> SampledSubgraph {
        self.expand_reuse()
    }

    /// [`Self::expand`], leaving this one empty but with its `row` and `counts` buffers, for a
    /// next batch to reuse.
    pub(crate) fn expand_reuse(&mut self) -> SampledSubgraph {
        let mut col = Vec::with_capacity(self.row.len());
        for (l, &c) in self.counts.iter().enumerate() {
            col.extend(std::iter::repeat_n(l as u64, c as usize));
        }
        debug_assert_eq!(col.len(), self.row.len());
        let row = self.row.iter().map(|&r| r as u64).collect();
        self.row.clear();
        self.counts.clear();
        SampledSubgraph {
            node: std::mem::take(&mut self.node),
            row,
            col,
            edge: self.edge.take(),
            num_sampled_nodes: std::mem::take(&mut self.num_sampled_nodes),
            num_sampled_edges: std::mem::take(&mut self.num_sampled_edges),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expand_gives_col_from_counts_and_widens_row() {
        // Seeds 10, 11 (local 0, 1); hop 1: 0 draws 12 and 11, 1 draws 12; hop 2 expands 12
        // (local 2): it draws 10.
        let c = CompactSample {
            node: vec![10, 11, 12],
            row: vec![2, 1, 2, 0],
            counts: vec![2, 1, 1],
            edge: Some(vec![5, 6, 7, 8]),
            num_sampled_nodes: vec![2, 1, 0],
            num_sampled_edges: vec![3, 1],
        };
        assert_eq!(c.node(), &[10, 11, 12]);
        assert_eq!(c.num_edges(), 4);
        let mut again = c.clone();
        let s = c.expand();
        assert_eq!(
            s,
            SampledSubgraph {
                node: vec![10, 11, 12],
                row: vec![2, 1, 2, 0],
                col: vec![0, 0, 1, 2],
                edge: Some(vec![5, 6, 7, 8]),
                num_sampled_nodes: vec![2, 1, 0],
                num_sampled_edges: vec![3, 1],
            }
        );
        // Expanding for reuse gives the same and keeps the row buffer, empty.
        assert_eq!(again.expand_reuse(), s);
        assert!(again.row.is_empty() && again.row.capacity() >= 4 && again.node.is_empty());
    }
}
