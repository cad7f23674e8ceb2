//! The bytes of `ringgnn.v1.SampleReply` (`python/ringgnn/serve.proto`), encoded here with
//! prost's field encoders so that a sample goes from the sampler's vectors to the wire in one
//! pass, with the GIL released, instead of through Python lists and Python's protobuf (which
//! cost about as much CPU as the sampling itself on single-node requests). The gRPC server
//! hands these bytes out unchanged; any protobuf parser reads them as the `.proto` says.
//!
//! Field numbers here and in `serve.proto` must agree: `tests/wire.rs` decodes these bytes with
//! a prost message declared from the `.proto`, and the Python tests parse them with the
//! message compiled from the shipped file.

use prost::encoding::{encode_key, encode_varint, int64, uint64, WireType};
use ringgnn_sampler::SampledSubgraph;

/// Field numbers of `SampleReply`.
mod field {
    pub const NODE: u32 = 1;
    pub const ROW: u32 = 2;
    pub const COL: u32 = 3;
    pub const EDGE: u32 = 4;
    pub const NUM_SAMPLED_NODES: u32 = 5;
    pub const NUM_SAMPLED_EDGES: u32 = 6;
    pub const SEED: u32 = 7;
    pub const SEED_TIME: u32 = 9;
}

/// `SampleReply` of `s`, drawn with `seed`, with each node's seed time `time` for a request at
/// times. Ids are below 2^63, so their `uint64` varints are the `int64` ones of the `.proto`;
/// repeated fields are packed (proto3's default).
pub fn sample_reply(s: &SampledSubgraph, seed: u64, time: Option<&[i64]>) -> Vec<u8> {
    let counts = |v: &[usize]| v.iter().map(|&x| x as u64).collect::<Vec<u64>>();
    let (nodes, edges) = (counts(&s.num_sampled_nodes), counts(&s.num_sampled_edges));
    let fields: [(u32, &[u64]); 6] = [
        (field::NODE, &s.node),
        (field::ROW, &s.row),
        (field::COL, &s.col),
        (field::EDGE, s.edge.as_deref().unwrap_or(&[])),
        (field::NUM_SAMPLED_NODES, &nodes),
        (field::NUM_SAMPLED_EDGES, &edges),
    ];
    let len: usize = fields
        .iter()
        .map(|&(tag, v)| uint64::encoded_len_packed(tag, v))
        .sum();
    // The seed's key and varint take at most 11 bytes.
    let mut buf = Vec::with_capacity(len + 11);
    for (tag, v) in fields {
        uint64::encode_packed(tag, v, &mut buf);
    }
    if seed != 0 {
        encode_key(field::SEED, WireType::Varint, &mut buf);
        encode_varint(seed, &mut buf);
    }
    if let Some(t) = time.filter(|t| !t.is_empty()) {
        int64::encode_packed(field::SEED_TIME, t, &mut buf);
    }
    buf
}
