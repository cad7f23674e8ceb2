//! `wire::sample_reply` decodes, with a message declared as in `serve.proto`, to the sample.

use proptest::prelude::*;
use prost::Message;
use ringgnn_sampler::SampledSubgraph;
use ringgnn_serve::wire;

/// `ringgnn.v1.SampleReply` as `python/ringgnn/serve.proto` declares it.
#[derive(Clone, PartialEq, Message)]
struct SampleReply {
    #[prost(int64, repeated, tag = "1")]
    node: Vec<i64>,
    #[prost(int64, repeated, tag = "2")]
    row: Vec<i64>,
    #[prost(int64, repeated, tag = "3")]
    col: Vec<i64>,
    #[prost(int64, repeated, tag = "4")]
    edge: Vec<i64>,
    #[prost(int64, repeated, tag = "5")]
    num_sampled_nodes: Vec<i64>,
    #[prost(int64, repeated, tag = "6")]
    num_sampled_edges: Vec<i64>,
    #[prost(uint64, tag = "7")]
    seed: u64,
    #[prost(int64, repeated, tag = "9")]
    seed_time: Vec<i64>,
}

fn i(v: &[u64]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

fn check(s: &SampledSubgraph, seed: u64, time: Option<&[i64]>) {
    let bytes = wire::sample_reply(s, seed, time);
    let r = SampleReply::decode(&bytes[..]).unwrap();
    assert_eq!(r.node, i(&s.node));
    assert_eq!(r.row, i(&s.row));
    assert_eq!(r.col, i(&s.col));
    assert_eq!(r.edge, s.edge.as_deref().map_or(vec![], i));
    let n: Vec<i64> = s.num_sampled_nodes.iter().map(|&x| x as i64).collect();
    let e: Vec<i64> = s.num_sampled_edges.iter().map(|&x| x as i64).collect();
    assert_eq!(
        (r.num_sampled_nodes, r.num_sampled_edges, r.seed),
        (n, e, seed)
    );
    assert_eq!(r.seed_time, time.unwrap_or_default());
    // prost's own encoding of the same message is byte for byte the same.
    let again = SampleReply {
        node: i(&s.node),
        row: i(&s.row),
        col: i(&s.col),
        edge: s.edge.as_deref().map_or(vec![], i),
        num_sampled_nodes: s.num_sampled_nodes.iter().map(|&x| x as i64).collect(),
        num_sampled_edges: s.num_sampled_edges.iter().map(|&x| x as i64).collect(),
        seed,
        seed_time: time.unwrap_or_default().to_vec(),
    };
    assert_eq!(again.encode_to_vec(), bytes);
}

#[test]
fn a_small_sample_round_trips() {
    let s = SampledSubgraph {
        node: vec![7, 3, (1 << 40) + 5],
        row: vec![1, 2],
        col: vec![0, 0],
        edge: Some(vec![10, 1 << 35]),
        num_sampled_nodes: vec![1, 2],
        num_sampled_edges: vec![2],
    };
    check(&s, 0, None);
    check(&s, u64::MAX, None);
    // A sample at times: each node's seed time (negative ones too: times are int64).
    check(&s, 3, Some(&[5, -2, i64::MAX]));
    check(&SampledSubgraph { edge: None, ..s }, 42, None);
}

proptest! {
    #[test]
    fn any_sample_round_trips(
        node in prop::collection::vec(0u64..(1 << 62), 0..50),
        row in prop::collection::vec(0u64..1000, 0..50),
        edge in prop::option::of(prop::collection::vec(0u64..(1 << 62), 0..50)),
        seed in any::<u64>(),
    ) {
        let s = SampledSubgraph {
            num_sampled_nodes: vec![node.len()],
            num_sampled_edges: vec![row.len()],
            col: row.iter().map(|x| x / 2).collect(),
            node, row, edge,
        };
        check(&s, seed, None);
    }
}
