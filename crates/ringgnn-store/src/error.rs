//! The one error type of the store crate. Messages say what was wrong and what to do.

use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong while building, opening or checking a dataset.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system error on a named file; `source.kind()` keeps its class
    /// (not found, permission denied, disk full) so bindings can map it faithfully.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The user's input is wrong: the message names the file, line or field and what to do.
    #[error("{0}")]
    Input(String),
    /// A dataset on disk is damaged or inconsistent with its manifest.
    #[error("{0}")]
    Corrupt(String),
    /// The output already exists and `overwrite` was not given.
    #[error("{}: already exists; pass --overwrite to replace it", .0.display())]
    Exists(PathBuf),
    /// The caller asked to stop (Ctrl-C); nothing was left behind.
    #[error("interrupted")]
    Interrupted,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(path: impl AsRef<Path>, source: io::Error) -> Self {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    /// `Ok` when `path` exists, else a not-found I/O error naming it and `what` it is (an input
    /// given by an option, checked before any work starts).
    pub fn must_exist(path: impl AsRef<Path>, what: impl Into<String>) -> Result<()> {
        if path.as_ref().exists() {
            return Ok(());
        }
        Err(Error::io(
            path,
            io::Error::new(io::ErrorKind::NotFound, what.into()),
        ))
    }
}

/// Attach a path to `io::Result`s: `file.read(..).at(&path)?`.
pub trait IoContext<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}

/// `Err(Error::Input(format!(...)))` in one token.
#[macro_export]
macro_rules! input_err {
    ($($arg:tt)*) => { Err($crate::Error::Input(format!($($arg)*))) };
}
