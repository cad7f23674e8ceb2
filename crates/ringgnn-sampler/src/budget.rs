//! How much memory a sampler pool may use, and how much it will: the default budget (a share of
//! the memory this process can still get) and the estimate of a pool's footprint that the
//! `auto` backend choice and the `memory` backend's budget check compare with it.

use crate::draw::Fanout;

/// Share of the available memory the default budget takes: the other half is left to the
/// training process (model, features, optimizer state) that runs next to the sampler.
pub const DEFAULT_SHARE: (u64, u64) = (1, 2);

/// The mini-batch size estimates assume when no batch size is known yet (when a pool is opened):
/// the paper's and PyG's usual 1024.
pub const ESTIMATE_BATCH: usize = 1024;

/// The default budget: half of the memory this process can still get, that is the smaller of
/// `MemAvailable` in `/proc/meminfo` and the room left under every cgroup v2 `memory.max`
/// above this process (a container or `memcap` limit). `None` when neither can be read.
pub fn default_budget() -> Option<u64> {
    available_memory().map(|a| a / DEFAULT_SHARE.1 * DEFAULT_SHARE.0)
}

/// The memory this process can still get (see [`default_budget`]).
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let host = meminfo.as_deref().and_then(mem_available);
    match (host, cgroup_room()) {
        (Some(h), Some(c)) => Some(h.min(c)),
        (h, c) => h.or(c),
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The least room (`memory.max - memory.current`) over this process's cgroup v2 and its
/// ancestors; `None` when no limit is set or cgroup v2 is not mounted at `/sys/fs/cgroup`.
fn cgroup_room() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mut dir = std::path::Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    let mut room: Option<u64> = None;
    loop {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        if let (Some(max), Some(cur)) = (read("memory.max"), read("memory.current")) {
            if let (Ok(max), Ok(cur)) = (max.trim().parse::<u64>(), cur.trim().parse::<u64>()) {
                let r = max.saturating_sub(cur);
                room = Some(room.map_or(r, |x| x.min(r)));
            }
        }
        if dir == std::path::Path::new("/sys/fs/cgroup") || !dir.pop() {
            return room;
        }
    }
}

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
        frontier = hop.min(num_nodes - b.nodes.min(num_nodes));
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
    /// the relabeling hash map (about 32 B with its load factor).
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
    fn meminfo_is_parsed_in_bytes() {
        let text = "MemTotal:       16000000 kB\nMemFree: 1 kB\nMemAvailable:    8000000 kB\n";
        assert_eq!(mem_available(text), Some(8_000_000 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert!(
            default_budget().is_some_and(|b| b > 0),
            "Linux has /proc/meminfo"
        );
    }

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
}
