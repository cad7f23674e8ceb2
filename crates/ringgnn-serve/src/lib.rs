//! The request engine behind `ringgnn serve`: sampling and feature requests from many client
//! threads, served together.
//!
//! Requests that arrive together are batched into *waves* by one queue (`queue.rs`, shared by
//! both engines): a caller that finds a worker (a set of read backends) free leads a wave on its
//! own thread, taking what is queued (after up to [`EngineOptions::max_wait`] for others to
//! join); [`Engine`] then samples the whole wave with one read per hop for all of its requests
//! (`NeighborSampler::sample_many`: a page two requests need is read once, every request's reads
//! are in the same io_uring submissions) and gathers the wave's feature rows in one go. Each answer is exactly what the
//! library gives for the same request alone.
//!
//! What keeps a server alive under load is here too: a bounded queue ([`ServeError::Busy`]
//! beyond it), per-request deadlines and cancellation (a request given up is skipped, not
//! served), limits on a request's size checked before it is queued, and a drain on
//! [`Engine::close`]. The memory plan is the loader's (`ringgnn-loader`), made for one wave per
//! worker, with the neighbor file's hottest pages kept in memory (`ringgnn_sampler::hot_pages`).
//!
//! **Workers are sized for ordinary waves; the largest request takes one room in turn.** A wave
//! is `--batch-size` seeds at the default fanouts (default [`EngineOptions::DEFAULT_WAVE_SEEDS`],
//! a full wave of single-node requests), by the sample's upper bounds, with two waves of answers
//! per worker besides (what callers still hold, and its encoding). A request larger than a wave,
//! up to [`Limits::max_nodes`] ids at the default fanouts, is sampled alone, whole, by one worker,
//! in a room held for one such request: what a batch of `max_nodes` seeds holds (measured on
//! probe batches when the neighbor file is on disk) and two answers of it. The hot neighbor
//! pages lend that room for as long as the request and its encoding take
//! ([`ringgnn_io::PageCache::lend`]; large requests queue for it one at a time), so single-node
//! traffic keeps every page the budget gives them; when they are too few to lend it, the room
//! is taken off the budget once, not once per worker. A budget that cannot hold the plan
//! refuses to open, naming what to lower. So every request of up to `max_nodes` ids at fanouts
//! no larger than the defaults is served, whole; only a request beyond the largest request's
//! bound (larger fanouts, or replacement, on a graph its bound does not saturate) is refused, as
//! `INVALID_ARGUMENT` naming the limit, and `RESOURCE_EXHAUSTED` ([`ServeError::Busy`]) means a
//! full queue, nothing else.
//! Why a large request is not sampled in pieces and merged: a sample draws from one random
//! stream per (seed, epoch, batch), consumed hop by hop in frontier order, and a node reached by
//! two seeds is expanded once, at the hop it is first reached. Pieces of the seeds would draw from
//! other streams (or other positions in the stream) and expand shared nodes at other hops, so the
//! merged answer would not be the request's sample; and since the answer itself holds every edge,
//! pieces would not even save its memory, only the per-hop workspaces.
//! [`latency`] keeps a histogram of answered requests' latencies.
//!
//! A heterogeneous dataset (node types, relations `SRC:REL:DST`) has its engine,
//! [`HeteroEngine`] (`hetero.rs`, its waves in `hetero/wave.rs`) on the same queue: typed
//! requests, fanouts per relation, the waves of one sampling configuration sampled together by
//! `HeteroSampler::sample_many`, hot pages per relation read from disk (the graph opened by
//! `ringgnn_sampler::TypedGraph`). A homogeneous dataset is the one-relation case of the queue's
//! contract ([`Engine`] keeps its own memory plan, the loader's).
//!
//! A sampling request may give times ([`RequestTimes`]: one for the request, or one per seed):
//! it is then sampled at them, by the typed sampler (a homogeneous dataset as its one-type case),
//! disjoint per distinct time; each request of a wave is its own batch, so requests at
//! different times in one wave never share a subgraph. A request without times samples every
//! edge, as ever.
//!
//! The gRPC server is here too ([`grpc`]): tonic, over either engine. Over an [`Engine`] it
//! serves `Sample`, `Features` and `Info` in Rust end to end and hands `Predict`/`Embed`/`Score`
//! to a [`grpc::Delegate`] (the Python servicer, which runs the model); over a [`HeteroEngine`]
//! every call goes to the delegate. The largest reply, a sample, is encoded with prost's field encoders
//! ([`wire::sample_reply`]).

#![forbid(unsafe_code)]

mod engine;
mod error;
pub mod grpc;
mod hetero;
pub mod latency;
mod options;
mod queue;
mod stats;
mod times;
pub mod wire;

pub use engine::{Engine, FeatureRows, SampleRequest, Timed};
pub use error::{Result, ServeError};
pub use hetero::{HeteroEngine, HeteroOptions, HeteroSampleRequest, HeteroStats};
pub use options::{EngineOptions, Limits};
pub use queue::CancelToken;
pub use stats::EngineStats;
pub use times::RequestTimes;

/// With the `fault-injection` feature (tests only), a wave holding a sampling request with this
/// seed panics: how the tests check that a failed wave answers its requests and the server goes
/// on.
#[cfg(feature = "fault-injection")]
pub const FAULT_SEED: u64 = 0xFA17_FA17_FA17_FA17;
