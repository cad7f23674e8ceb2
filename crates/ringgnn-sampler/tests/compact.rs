//! What a [`HeteroSampler`] hyperbatch holds between hops is compact (32-bit positions read in
//! place, a count per frontier node in place of each edge's `col`, 32-bit rows until the batch
//! is finished): a property test that it expands to the sample of the wide state (64-bit
//! positions, per-edge `col` and 64-bit rows, what a sample with edge ids and
//! `set_wide_state` use), for random typed graphs, fanouts, hyperbatch sizes, chunkings of the
//! fetch, from memory and from disk, with and without seed times.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use ringgnn_io::{CoalesceOptions, PreadBatch};
use ringgnn_sampler::{
    EdgeTimes, Fanout, HeteroRelation, HeteroRequest, HeteroSample, HeteroSampler, Indices,
    NeighborSource, TemporalStrategy,
};
use ringgnn_store::manifest::IndexDtype;

mod common;
use common::timed::{self, Graph, NodeTimes, Shape};

/// A random typed graph with edge times: mostly short lists, a few hubs, node times on some
/// types.
fn random_graph(seed: u64, types: usize, rels: usize) -> Graph {
    let node_times = NodeTimes::OneIn {
        one_in: 2,
        span: 80,
    };
    let shape = Shape {
        stream: (7, 3),
        max_nodes: 60,
        hub_one_in: 12,
        hub: (40, 200),
        short: 12,
        node_times,
    };
    timed::random_graph(seed, types, rels, shape)
}

impl Graph {
    /// A sampler of this graph, its neighbor files in memory or (u32, page-padded, in `dir`)
    /// read with pread; edge times in memory when `timed`.
    fn sampler(
        &self,
        fanouts: &[Vec<Fanout>],
        replace: bool,
        disk: Option<&Path>,
    ) -> HeteroSampler {
        let rels = self
            .rels
            .iter()
            .zip(fanouts)
            .enumerate()
            .map(|(i, (r, f))| {
                let source = match disk {
                    None => NeighborSource::Memory(Arc::new(Indices::U64(r.indices.clone()))),
                    Some(dir) => {
                        let path = dir.join(format!("rel{i}.bin"));
                        let mut b: Vec<u8> = (r.indices.iter())
                            .flat_map(|&x| (x as u32).to_le_bytes())
                            .collect();
                        b.resize(b.len().div_ceil(4096).max(1) * 4096, 0);
                        std::fs::write(&path, b).unwrap();
                        let reader = Box::new(PreadBatch::new(File::open(&path).unwrap()));
                        NeighborSource::disk(
                            reader,
                            &path,
                            IndexDtype::U32,
                            CoalesceOptions::default(),
                        )
                    }
                };
                HeteroRelation {
                    src: r.src,
                    dst: r.dst,
                    indptr: r.indptr.clone().into(),
                    source,
                    fanouts: f.clone(),
                    times: Some(EdgeTimes::Memory(r.times.clone().into())),
                }
            })
            .collect();
        let mut s = HeteroSampler::new(self.num_nodes.clone(), rels, replace).unwrap();
        let nt = self.node_times.iter().map(|t| t.clone().map(Arc::from));
        s.set_node_times(nt.collect()).unwrap();
        s
    }
}

fn without_edge_ids(mut s: HeteroSample) -> HeteroSample {
    s.edge = None;
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The compact state (32-bit positions, grouped by chunk for the fetch, and counts per
    /// frontier node) gives every batch of a hyperbatch exactly the sample the wide state
    /// gives it alone (a sample with edge ids, which keeps 64-bit positions, its edge ids
    /// dropped), whatever the chunks and groups of the fetch, in memory and from disk, with
    /// seed times (uniform or last, with node times) or without.
    #[test]
    fn the_compact_state_expands_to_the_wide_sample(
        graph_seed: u64,
        types in 1usize..4,
        rels in 1usize..4,
        hops in 1usize..4,
        replace: bool,
        timed: bool,
        last: bool,
        seed: u64,
        h in 1usize..6,
        per_chunk in 1u64..80,
        group in 1usize..40,
    ) {
        let g = random_graph(graph_seed, types, rels);
        let mut rng = ringgnn_store::rng::stream(graph_seed, 9, 1);
        let mut below = |n: u64| ringgnn_store::rng::below(&mut rng, n);
        let fanouts: Vec<Vec<Fanout>> = (0..rels)
            .map(|_| {
                (0..hops)
                    .map(|_| match below(6) {
                        0 => Fanout::All,
                        k => Fanout::Count(k - 1),
                    })
                    .collect()
            })
            .collect();
        // Per batch: seeds of one or two types, with times when `timed`.
        let seeds: Vec<Vec<(usize, Vec<u64>)>> = (0..h)
            .map(|_| {
                (0..1 + below(2))
                    .map(|_| {
                        let t = below(types as u64) as usize;
                        let n = 1 + below(6);
                        (t, (0..n).map(|_| below(g.num_nodes[t])).collect())
                    })
                    .collect()
            })
            .collect();
        let times: Vec<Vec<Vec<i64>>> = seeds
            .iter()
            .map(|b| b.iter().map(|(_, ids)| ids.iter().map(|_| below(110) as i64).collect()).collect())
            .collect();
        let refs: Vec<Vec<(usize, &[u64])>> = seeds
            .iter()
            .map(|b| b.iter().map(|(t, v)| (*t, v.as_slice())).collect())
            .collect();
        let time_refs: Vec<Vec<&[i64]>> = times
            .iter()
            .map(|b| b.iter().map(Vec::as_slice).collect())
            .collect();
        let requests: Vec<HeteroRequest> = refs
            .iter()
            .zip(&time_refs)
            .enumerate()
            .map(|(b, (s, t))| HeteroRequest {
                seeds: s,
                batch: 5 * b as u64 + 2,
                times: timed.then_some(t.as_slice()),
            })
            .collect();
        let strategy = if last { TemporalStrategy::Last } else { TemporalStrategy::Uniform };
        // The wide state: each batch alone, from memory, with edge ids.
        let wide: Vec<HeteroSample> = requests
            .iter()
            .map(|q| {
                let mut s = g.sampler(&fanouts, replace, None);
                s.set_temporal_strategy(strategy);
                s.set_wide_state(true);
                let mut out = s.sample_many(std::slice::from_ref(q), seed, 3, true).unwrap();
                out.pop().unwrap()
            })
            .collect();
        let want: Vec<HeteroSample> = wide.iter().cloned().map(without_edge_ids).collect();
        let dir = tempfile::tempdir().unwrap();
        for disk in [None, Some(dir.path())] {
            let mut s = g.sampler(&fanouts, replace, disk);
            s.set_temporal_strategy(strategy);
            // Default chunks (one chunk on these small files), then small ones: many chunks
            // and groups per fetch.
            let got = s.sample_many(&requests, seed, 3, false).unwrap();
            prop_assert_eq!(&got, &want, "disk {}", disk.is_some());
            s.set_fetch_groups(per_chunk, group);
            let got = s.sample_many(&requests, seed, 3, false).unwrap();
            prop_assert_eq!(&got, &want, "disk {}, chunks of {}", disk.is_some(), per_chunk);
            // Finished samples handed out one by one: the same.
            let mut each = Vec::new();
            s.sample_each(&requests, seed, 3, false, &mut |i, out| {
                each.push((i, out));
                Ok(())
            })
            .unwrap();
            prop_assert!(each.iter().enumerate().all(|(k, (i, _))| k == *i));
            let each: Vec<HeteroSample> = each.into_iter().map(|(_, o)| o).collect();
            prop_assert_eq!(&each, &want);
            // And the wide state in a hyperbatch, on the same sampler: with edge ids (64-bit
            // positions), then with 64-bit rows too.
            let got = s.sample_many(&requests, seed, 3, true).unwrap();
            prop_assert_eq!(&got, &wide);
            s.set_wide_state(true);
            let got = s.sample_many(&requests, seed, 3, true).unwrap();
            prop_assert_eq!(&got, &wide);
            let got = s.sample_many(&requests, seed, 3, false).unwrap();
            prop_assert_eq!(&got, &want);
        }
    }
}
