//! [`ServeError`]: why a request got no answer. Each maps to one gRPC status (the server says
//! which).

/// Why a request was not answered.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The request is wrong (node id out of range, too many nodes, bad fanouts); the message
    /// says what and the limit.
    #[error("{0}")]
    Input(String),
    /// The queue is full: try again later.
    #[error("the server is busy: {0} requests are waiting; retry later")]
    Busy(usize),
    /// The deadline passed before the answer was ready.
    #[error("the deadline passed before the answer was ready")]
    DeadlineExceeded,
    /// The caller gave the request up.
    #[error("the request was cancelled")]
    Cancelled,
    /// The engine is closing: no new requests.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// Reading or sampling failed (a damaged dataset, an I/O error); the message names the file.
    #[error("{0}")]
    Internal(String),
}

pub type Result<T> = std::result::Result<T, ServeError>;

impl From<ringgnn_loader::Error> for ServeError {
    fn from(e: ringgnn_loader::Error) -> Self {
        ServeError::Internal(e.to_string())
    }
}
