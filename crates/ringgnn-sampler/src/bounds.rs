//! Upper bounds on one sample's size and on a sampler's workspaces, from the fanouts and the
//! graph's degrees alone: what the memory plan (`ringgnn-loader`'s `budget`) counts.

use crate::Fanout;

/// Upper bounds on the size of one sample of `batch` seeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleBound {
    /// Nodes (seeds included), at most `V`.
    pub nodes: u64,
    /// Edges over all hops.
    pub edges: u64,
    /// Edges of the largest hop (the per-hop workspaces follow it).
    pub hop_edges: u64,
}

/// Bound the sample of `batch` seeds: hop `k` draws at most `min(fanout_k, max_degree)` edges
/// per frontier node (`max_degree` for `-1`, `fanout_k` with replacement), every drawn edge may
/// reach a new node, and there are never more than `num_nodes` nodes (nor, without replacement,
/// more than `num_edges` edges: each node is expanded once).
///
/// A hop's frontier is capped by the graph (`num_nodes`), never by what the earlier hops'
/// *bounds* left of it: a sample whose early draws meet reaches fewer nodes early and so more
/// later than those bounds say (2 seeds, fanouts 4,1,5, degrees up to 5, 10 nodes: 8 edges may
/// reach 4 new nodes, which draw 4 edges to 4 more, which draw 20).
pub fn sample_bound(
    batch: u64,
    fanouts: &[Fanout],
    replace: bool,
    max_degree: u64,
    num_nodes: u64,
    num_edges: u64,
) -> SampleBound {
    let mut b = SampleBound {
        nodes: batch.min(num_nodes),
        ..Default::default()
    };
    let mut frontier = b.nodes;
    for f in fanouts {
        let per_node = match *f {
            Fanout::All => max_degree,
            Fanout::Count(k) if replace => k,
            Fanout::Count(k) => k.min(max_degree),
        };
        let mut hop = frontier.saturating_mul(per_node);
        if !replace {
            hop = hop.min(num_edges);
        }
        b.edges = b.edges.saturating_add(hop);
        b.hop_edges = b.hop_edges.max(hop);
        frontier = hop.min(num_nodes);
        b.nodes = b.nodes.saturating_add(frontier).min(num_nodes);
    }
    if !replace {
        b.edges = b.edges.min(num_edges);
    }
    b
}

impl SampleBound {
    /// Bytes of a [`crate::SampledSubgraph`] this large: `node` (8 B per node), `row` and `col`
    /// (16 B per edge), and `edge` (8 B per edge) when edge ids are asked for.
    pub fn output_bytes(&self, with_edge_ids: bool) -> u64 {
        let per_edge = if with_edge_ids { 24 } else { 16 };
        self.nodes
            .saturating_mul(8)
            .saturating_add(self.edges.saturating_mul(per_edge))
    }

    /// Bytes of one sampler's workspaces while it builds such a sample, output excluded: per
    /// edge of the largest hop, the drawn position, its owner and the neighbor read (24 B) plus,
    /// for disk backends, the sort order and the buffer slot of the coalescer (32 B); per node,
    /// the relabeling map (32 B: its slots are 8 B, 12 B for graphs of `u32::MAX` nodes or more,
    /// filled to between 35% and 70%).
    pub fn workspace_bytes(&self) -> u64 {
        self.hop_edges
            .saturating_mul(56)
            .saturating_add(self.nodes.saturating_mul(32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_fanouts_and_saturate_at_the_graph() {
        let f = [Fanout::Count(20), Fanout::Count(15), Fanout::Count(10)];
        let b = sample_bound(1024, &f, false, 1000, 1 << 40, 1 << 40);
        assert_eq!(b.edges, 1024 * (20 + 20 * 15 + 20 * 15 * 10));
        assert_eq!(b.hop_edges, 1024 * 3000);
        assert_eq!(b.nodes, 1024 + b.edges);
        // Low degrees cap the draws without replacement, not with replacement.
        let b = sample_bound(10, &[Fanout::Count(20)], false, 3, 100, 300);
        assert_eq!((b.nodes, b.edges), (40, 30));
        let b = sample_bound(10, &[Fanout::Count(20)], true, 3, 100, 300);
        assert_eq!((b.nodes, b.edges), (100, 200));
        // -1 takes the maximum degree; a small graph caps everything.
        let b = sample_bound(4, &[Fanout::All, Fanout::All], false, 5, 10, 12);
        assert_eq!((b.nodes, b.edges, b.hop_edges), (10, 12, 12));
        assert_eq!(b.output_bytes(true), 10 * 8 + 12 * 24);
    }

    #[test]
    fn a_saturated_graph_does_not_cap_later_hops() {
        // The example of `sample_bound`'s docs: 8 + 4 + 20 = 32 edges are possible. Capping each
        // hop's frontier at what the earlier bounds left (10 - 2 - 8 = 0) said 16.
        let f = [Fanout::Count(4), Fanout::Count(1), Fanout::Count(5)];
        let b = sample_bound(2, &f, false, 5, 10, 1 << 20);
        assert_eq!((b.nodes, b.edges, b.hop_edges), (10, 8 + 8 + 40, 40));
        assert!(b.edges >= 32);
    }
}
