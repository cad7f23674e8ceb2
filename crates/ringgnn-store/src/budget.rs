//! A build's memory budget (`--memory`), shared by every step it runs within it: the
//! out-of-core CSC builder ([`crate::builder`]), the check of original ids ([`crate::node_ids`])
//! and the negatives of an edge split by time ([`crate::link`]) each take what is left beyond
//! [`OVERHEAD`]. `verify` has a budget of its own ([`crate::verify::OVERHEAD`]).

use crate::Result;

/// Memory the budget sets aside for everything but the sort buffers: reader chunks in flight
/// (4 x 256K edges x 16 B = 16 MiB), input decode buffers (<= 10 MiB), output write buffers
/// (2 x 4 MiB), bounce buffers (4 MiB per worker), bookkeeping, and the Python interpreter with
/// numpy that hosts the build (about 50 MiB of RSS). Measured: `--memory 512M` peaks at
/// about 480 MiB RSS on a 400M-edge build (docs/benchmarks.md).
pub(crate) const OVERHEAD: u64 = 112 << 20;
/// Smallest budget accepted: the overhead plus room for sort buffers that are not absurdly small.
pub const MIN_MEMORY: u64 = 128 << 20;

/// Refuse a budget below [`MIN_MEMORY`] (the builds also check it before their check of the
/// original ids, which sorts within the same budget).
pub fn check_memory(memory: u64) -> Result<()> {
    if memory < MIN_MEMORY {
        return crate::input_err!(
            "--memory {memory} bytes is too small; the builder needs at least {}M",
            MIN_MEMORY >> 20
        );
    }
    Ok(())
}
