//! One bipartite relation sampled alone ([`NeighborSampler::bipartite`]): seeds are checked
//! against the destinations, entries against the sources (more or fewer than the
//! destinations), sources and destinations are separate id spaces, and it samples one hop.

mod common;

use std::sync::Arc;

use common::{fan, SampleIds};
use ringgnn_sampler::{
    Error, Indices, ManyRequest, NeighborSampler, NeighborSource, SampledSubgraph, Seeds,
};

fn mem(v: Vec<u32>) -> NeighborSource {
    NeighborSource::Memory(Arc::new(Indices::U32(v)))
}

/// 2 destinations, 5 sources: destination 0's list is [0, 2, 4] (positions 0..3), 1's is [0]
/// (position 3).
fn more_sources(fanouts: &[i64]) -> NeighborSampler {
    NeighborSampler::bipartite(
        vec![0, 3, 4],
        5,
        &fan(fanouts),
        false,
        mem(vec![0, 2, 4, 0]),
    )
    .unwrap()
}

#[test]
fn sources_are_their_own_id_space() {
    let mut s = more_sources(&[-1]);
    assert_eq!((s.num_nodes(), s.num_sources()), (2, 5));
    let got = s.sample_ids(&[1, 0, 1], 0, 0, 0, true).unwrap();
    // Seeds 1, 0 (destination ids); then the sources: 0 (not seed 0), 2, 4.
    let want = SampledSubgraph {
        node: vec![1, 0, 0, 2, 4],
        row: vec![2, 2, 3, 4],
        col: vec![0, 1, 1, 1],
        edge: Some(vec![3, 0, 1, 2]),
        num_sampled_nodes: vec![2, 3],
        num_sampled_edges: vec![4],
    };
    assert_eq!(got, want);
    // The same request through sample_many.
    let seeds = Seeds::new(vec![1, 0, 1], 2).unwrap();
    let fanouts = fan(&[-1]);
    let req = ManyRequest {
        seeds: seeds.as_slice(),
        fanouts: &fanouts,
        replace: false,
        seed: 0,
        epoch: 0,
        batch: 0,
        with_edge_ids: true,
    };
    assert_eq!(
        s.sample_many(&[req, req]).unwrap(),
        vec![want.clone(), want]
    );
    // Seeds are destination ids: source 4 is not one.
    let err = s.sample_ids(&[4], 0, 0, 0, false).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Seed {
                id: 4,
                num_nodes: 2
            }
        ),
        "{err:?}"
    );
    // The same files as a homogeneous graph of 2 nodes: entry 2 is refused there.
    let mut homo =
        NeighborSampler::new(vec![0, 3, 4], &fan(&[-1]), false, mem(vec![0, 2, 4, 0])).unwrap();
    let err = homo.sample_ids(&[0], 0, 0, 0, false).unwrap_err();
    assert!(
        err.to_string()
            .contains("entry 1 of the neighbor file is 2"),
        "{err}"
    );
}

#[test]
fn fewer_sources_than_destinations() {
    // 4 destinations, 1 source: destinations 0 and 2 each have source 0.
    let mut s =
        NeighborSampler::bipartite(vec![0, 1, 1, 2, 2], 1, &fan(&[3]), false, mem(vec![0, 0]))
            .unwrap();
    let got = s.sample_ids(&[3, 2, 0], 0, 0, 0, false).unwrap();
    assert_eq!(got.node, vec![3, 2, 0, 0]);
    assert_eq!((got.row, got.col), (vec![3, 3], vec![1, 2]));
    assert_eq!(got.num_sampled_nodes, vec![3, 1]);
    // Entries are checked against the sources.
    let mut bad =
        NeighborSampler::bipartite(vec![0, 1, 1, 2, 2], 1, &fan(&[3]), false, mem(vec![0, 1]))
            .unwrap();
    let err = bad.sample_ids(&[2], 0, 0, 0, false).unwrap_err();
    assert!(
        err.to_string()
            .contains("entry 1 of the neighbor file is 1 but the graph has 1 nodes"),
        "{err}"
    );
}

#[test]
fn a_bipartite_relation_samples_one_hop() {
    let err = NeighborSampler::bipartite(vec![0, 3, 4], 5, &fan(&[1, 1]), false, mem(vec![0; 4]))
        .err()
        .unwrap();
    assert!(err.to_string().contains("samples one hop, not 2"), "{err}");
    let mut s = more_sources(&[]);
    let seeds = Seeds::new(vec![0], 2).unwrap();
    let fanouts = fan(&[2, 2]);
    let req = ManyRequest {
        seeds: seeds.as_slice(),
        fanouts: &fanouts,
        replace: false,
        seed: 0,
        epoch: 0,
        batch: 0,
        with_edge_ids: false,
    };
    let err = s.sample_many(&[req]).unwrap_err();
    assert!(err.to_string().contains("samples one hop, not 2"), "{err}");
    // No hops: the seeds alone.
    assert_eq!(s.sample_ids(&[1], 0, 0, 0, false).unwrap().node, vec![1]);
}
