//! Progress reporting and cancellation for long-running commands.
//!
//! The core never prints: it calls a [`Progress`] that the front end (the Python CLI's
//! progress bar, or nothing) implements. `advance` is also the cancellation point: a front end
//! that saw Ctrl-C returns `Err(Error::Interrupted)` and the operation unwinds, removing its
//! temporary files.

use crate::Result;

pub trait Progress: Send + Sync {
    /// A new stage starts: `name` for display, `total` units if known, `unit` like "B" or "edges".
    fn stage(&self, name: &str, total: Option<u64>, unit: &str);
    /// `n` more units done. Returning an error aborts the operation.
    fn advance(&self, n: u64) -> Result<()>;
    /// A line for the user about something done besides the task (a stale temporary of a killed
    /// run removed, see [`crate::temp`]); front ends print it on stderr.
    fn note(&self, _line: &str) {}
}

/// Reports nothing and never cancels.
pub struct NoProgress;

impl Progress for NoProgress {
    fn stage(&self, _: &str, _: Option<u64>, _: &str) {}
    fn advance(&self, _: u64) -> Result<()> {
        Ok(())
    }
}

/// Another [`Progress`] whose stage names start with `prefix` (a heterogeneous build names the
/// relation each "read" and "sort" stage belongs to).
pub struct Prefixed<'a> {
    pub inner: &'a dyn Progress,
    pub prefix: String,
}

impl Progress for Prefixed<'_> {
    fn stage(&self, name: &str, total: Option<u64>, unit: &str) {
        self.inner
            .stage(&format!("{} {name}", self.prefix), total, unit)
    }
    fn advance(&self, n: u64) -> Result<()> {
        self.inner.advance(n)
    }
    fn note(&self, line: &str) {
        self.inner.note(line)
    }
}
