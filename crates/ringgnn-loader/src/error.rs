//! The loader's error type: the sampler's and the feature store's errors, kept whole so the
//! bindings map each to its class, plus budget and option errors.

/// Everything that can go wrong while planning, starting or running a loader.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Sampler(#[from] ringgnn_sampler::Error),
    #[error(transparent)]
    Features(#[from] ringgnn_features::Error),
    #[error(transparent)]
    Store(#[from] ringgnn_store::Error),
    /// A worker thread that could not start or stopped without a result (a panic).
    #[error(transparent)]
    Worker(#[from] ringgnn_pipeline::WorkerFailed),
    /// An option that cannot work, or a memory budget too small; the message says what to
    /// change.
    #[error("{0}")]
    Input(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
