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

/// A store error opening or reading the dataset: the user's input stays an input error; a damaged
/// dataset or an OS error is the server's (its message names the file and says what to do).
impl From<ringgnn_store::Error> for ServeError {
    fn from(e: ringgnn_store::Error) -> Self {
        match e {
            ringgnn_store::Error::Input(m) => ServeError::Input(m),
            e => ServeError::Internal(e.to_string()),
        }
    }
}

impl From<ringgnn_loader::Error> for ServeError {
    fn from(e: ringgnn_loader::Error) -> Self {
        ServeError::Internal(e.to_string())
    }
}
