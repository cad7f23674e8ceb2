//! [`HeteroBound`]: upper bounds on one heterogeneous sample and on what a batch holds while a
//! hyperbatch samples it ([`super::HeteroSampler::sample_many`]), from the fanouts, the seeds
//! per type and each relation's largest degree alone: what sizes a hyperbatch to a memory
//! budget (`ringgnn.HeteroLoader(hyperbatch="auto")`).

use crate::Fanout;

/// Upper bounds on one sample of given seeds per type (see [`hetero_bound`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeteroBound {
    /// Nodes of each type (seeds included), at most the type's count.
    pub nodes: Vec<u64>,
    /// Edges of each relation over all hops.
    pub edges: Vec<u64>,
    /// Positions of the largest (relation, hop): the per-hop workspaces follow it.
    pub hop_positions: u64,
    /// Whether each type's dedup map has 12-byte slots (`u32::MAX` nodes or more), not 8.
    pub wide: Vec<bool>,
}

/// Bound the sample of `seeds[t]` seeds of each type `t`: at hop `k` relation `r` draws at most
/// `min(fanout, max_degree[r])` positions per frontier node of its destination type
/// (`max_degree[r]` for all, the fanout with replacement, none for `Count(0)`), every drawn
/// position may reach a new node of its source type, a type never has more than its count
/// (nor, without replacement, a relation more edges than it has: each node is expanded once
/// per relation).
///
/// The caps are applied to each hop and to the totals alone, never as "what is left" after the
/// bounds of earlier hops: a sample that reaches fewer nodes early (duplicate seeds, draws that
/// meet) has more left to reach later, so a remainder computed from the earlier *bounds* could
/// fall below what a later hop really draws.
pub fn hetero_bound(
    seeds: &[u64],
    num_nodes: &[u64],
    relations: &[(usize, usize, &[Fanout], u64, u64)],
    replace: bool,
) -> HeteroBound {
    let types = num_nodes.len();
    let mut b = HeteroBound {
        nodes: (0..types)
            .map(|t| seeds.get(t).copied().unwrap_or(0).min(num_nodes[t]))
            .collect(),
        edges: vec![0; relations.len()],
        hop_positions: 0,
        wide: num_nodes.iter().map(|&n| n >= u32::MAX as u64).collect(),
    };
    let mut frontier = b.nodes.clone();
    let hops = relations.first().map_or(0, |r| r.2.len());
    for k in 0..hops {
        let mut new = vec![0u64; types];
        for (r, &(src, dst, fanouts, max_degree, num_edges)) in relations.iter().enumerate() {
            let per_node = match fanouts[k] {
                Fanout::All => max_degree,
                Fanout::Count(c) if replace => c,
                Fanout::Count(c) => c.min(max_degree),
            };
            let mut hop = frontier[dst].saturating_mul(per_node);
            b.edges[r] = b.edges[r].saturating_add(hop);
            if !replace {
                hop = hop.min(num_edges);
                b.edges[r] = b.edges[r].min(num_edges);
            }
            b.hop_positions = b.hop_positions.max(hop);
            new[src] = new[src].saturating_add(hop);
        }
        for t in 0..types {
            frontier[t] = new[t].min(num_nodes[t]);
            b.nodes[t] = b.nodes[t].saturating_add(frontier[t]).min(num_nodes[t]);
        }
    }
    b
}

impl HeteroBound {
    /// Bytes of the sample as the core hands it out: `node` (8 B per node), `row` and `col`
    /// (16 B per edge) and `edge` (8 B per edge) when edge ids are asked for.
    pub fn sample_bytes(&self, with_edge_ids: bool) -> u64 {
        let per_edge = if with_edge_ids { 24 } else { 16 };
        let nodes: u64 = self.nodes.iter().sum();
        let edges: u64 = self.edges.iter().sum();
        nodes
            .saturating_mul(8)
            .saturating_add(edges.saturating_mul(per_edge))
    }

    /// Bytes one batch of a hyperbatch holds at most while it is sampled, its sample included:
    /// the sample, with room for its node lists to double as they grow (8 B more per node);
    /// its dedup maps (8 B slots, 12 B wide, at least 35% full: 23 B per node, 35 B wide); and
    /// its share of the per-hop workspaces, which hold every batch's positions of one relation
    /// at once: per position the position and the entry read (16 B) and the fetch's sort order
    /// (16 B, up to twice that as it grows), per frontier node its range (16 B).
    pub fn state_bytes(&self, with_edge_ids: bool) -> u64 {
        let maps: u64 = self
            .nodes
            .iter()
            .zip(&self.wide)
            .map(|(&n, &w)| n.saturating_mul(if w { 35 } else { 23 }))
            .sum();
        let nodes: u64 = self.nodes.iter().sum();
        self.sample_bytes(with_edge_ids)
            .saturating_add(nodes.saturating_mul(8 + 16))
            .saturating_add(maps)
            .saturating_add(self.hop_positions.saturating_mul(48))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_each_relation_into_its_source_type() {
        use Fanout::{All, Count};
        // Types a (100 nodes), p (1000 nodes); relations a->p (max degree 3), p->p (max 50),
        // p->a (max 7); 10 seeds of p.
        let (ap, pp, pa) = ([Count(5), Count(2)], [Count(4), All], [Count(0), Count(6)]);
        let rels: [(usize, usize, &[Fanout], u64, u64); 3] = [
            (0, 1, &ap, 3, 1 << 20),
            (1, 1, &pp, 50, 1 << 20),
            (1, 0, &pa, 7, 1 << 20),
        ];
        let b = hetero_bound(&[0, 10], &[100, 1000], &rels, false);
        // Hop 0: a->p draws 10 * min(5, 3) = 30 (30 new a), p->p 10 * 4 = 40 (40 new p),
        // p->a nothing. Hop 1: a->p 40 * 2, p->p 40 * 50 = 2000, p->a 30 * 6 = 180; the nodes
        // of each type are capped at its count.
        assert_eq!(b.edges, vec![30 + 80, 40 + 2000, 180]);
        assert_eq!(b.nodes, vec![100, 1000]);
        assert_eq!(b.hop_positions, 2000);
        assert_eq!(b.wide, vec![false, false]);
        assert_eq!(b.sample_bytes(false), 1100 * 8 + 2330 * 16);
        assert_eq!(b.sample_bytes(true), 1100 * 8 + 2330 * 24);
        assert_eq!(
            b.state_bytes(false),
            b.sample_bytes(false) + 1100 * 24 + 1100 * 23 + 2000 * 48
        );
        // Without replacement a relation never has more edges than its file; with replacement
        // the fanout is drawn whatever the degree.
        let few: [(usize, usize, &[Fanout], u64, u64); 1] = [(0, 0, &[Count(5), Count(5)], 3, 40)];
        // Hop 0 draws 10 x 3 = 30, hop 1 30 x 3 = 90, capped at the 40 edges (not at the 10
        // left after hop 0's bound: hop 0 may have drawn fewer).
        let b = hetero_bound(&[10], &[1 << 40], &few, false);
        assert_eq!(
            (b.edges[0], b.hop_positions, b.nodes[0]),
            (40, 40, 10 + 30 + 40)
        );
        assert_eq!(b.wide, vec![true]);
        let b = hetero_bound(&[10], &[1 << 40], &few, true);
        assert_eq!((b.edges[0], b.nodes[0]), (50 + 250, 10 + 300));
        // Seeds beyond a type's count are capped; no hops: the seeds alone.
        let none: [(usize, usize, &[Fanout], u64, u64); 1] = [(0, 0, &[], 3, 40)];
        let b = hetero_bound(&[500], &[20], &none, false);
        assert_eq!((b.nodes[0], b.edges[0], b.hop_positions), (20, 0, 0));
    }
}
