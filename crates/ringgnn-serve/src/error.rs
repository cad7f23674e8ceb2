//! [`ServeError`]: why a request got no answer. Each maps to one gRPC status (the server says
//! which).

/// Why a request was not answered.
#[derive(Clone, Debug, thiserror::Error)]
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
    /// The dataset is damaged (a file does not match its manifest or the counts it records);
    /// the message names the file and says to verify the dataset.
    #[error("{0}")]
    Corrupt(String),
    /// Reading or sampling failed otherwise (an I/O error, a fault); the message names the
    /// file, if any.
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
            ringgnn_store::Error::Corrupt(m) => ServeError::Corrupt(m),
            e => ServeError::Internal(e.to_string()),
        }
    }
}

/// A sampler error: bad input stays the request's, a damaged dataset is [`ServeError::Corrupt`],
/// the rest the server's.
impl From<ringgnn_sampler::Error> for ServeError {
    fn from(e: ringgnn_sampler::Error) -> Self {
        match e {
            ringgnn_sampler::Error::Store(e) => ServeError::from(e),
            ringgnn_sampler::Error::Input(m) => ServeError::Input(m),
            ringgnn_sampler::Error::Corrupt(m) => ServeError::Corrupt(m),
            e => ServeError::Internal(e.to_string()),
        }
    }
}

/// A loader error: a damaged dataset found by its sampler or store is
/// [`ServeError::Corrupt`], the rest the server's.
impl From<ringgnn_loader::Error> for ServeError {
    fn from(e: ringgnn_loader::Error) -> Self {
        use ringgnn_loader::Error as E;
        use ringgnn_sampler::Error as S;
        use ringgnn_store::Error::Corrupt;
        match e {
            E::Store(Corrupt(m)) | E::Sampler(S::Corrupt(m) | S::Store(Corrupt(m))) => {
                ServeError::Corrupt(m)
            }
            e => ServeError::Internal(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_dataset_is_corrupt_from_every_crate() {
        let store = || ringgnn_store::Error::Corrupt("x.bin: damaged".into());
        let sampler = ringgnn_sampler::Error::Corrupt("entry 3 is 9".into());
        let cases = [
            ServeError::from(store()),
            ServeError::from(ringgnn_sampler::Error::Store(store())),
            ServeError::from(ringgnn_loader::Error::Store(store())),
            ServeError::from(ringgnn_loader::Error::Sampler(
                ringgnn_sampler::Error::Store(store()),
            )),
        ];
        for e in cases {
            assert!(
                matches!(&e, ServeError::Corrupt(m) if m == "x.bin: damaged"),
                "{e:?}"
            );
        }
        let e = ServeError::from(ringgnn_loader::Error::Sampler(sampler));
        assert!(
            matches!(&e, ServeError::Corrupt(m) if m == "entry 3 is 9"),
            "{e:?}"
        );
        // The rest stays as it was: the request's input, else the server's.
        let input = ServeError::from(ringgnn_sampler::Error::Input("bad".into()));
        assert!(matches!(input, ServeError::Input(m) if m == "bad"));
        let loader = ServeError::from(ringgnn_loader::Error::Input("bad".into()));
        assert!(matches!(loader, ServeError::Internal(m) if m == "bad"));
    }
}
