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
