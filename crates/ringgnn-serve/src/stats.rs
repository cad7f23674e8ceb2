//! The serving engines' counters, read by `stats()` and the gRPC `Stats` call.

use crate::latency::LatencyCounts;

/// Counters since the engine opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub sample_requests: u64,
    pub feature_requests: u64,
    /// Waves served, and the requests in them (their ratio is the batching achieved).
    pub waves: u64,
    pub wave_requests: u64,
    pub busy: u64,
    pub deadline_exceeded: u64,
    pub cancelled: u64,
    pub failed: u64,
    /// Requests waiting for a worker now.
    pub queued: u64,
    /// Latency of every answered request, from its arrival at the engine to its answer
    /// (queueing, the wave, the reads).
    pub latency: LatencyCounts,
    /// Reads issued and bytes read by the workers' backends.
    pub reads: u64,
    pub bytes_read: u64,
    /// The hot neighbor pages: hits, misses and pages held (0 without a page cache).
    pub page_hits: u64,
    pub page_misses: u64,
    pub pages_cached: u64,
}
