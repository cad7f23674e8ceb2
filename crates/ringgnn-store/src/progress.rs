//! Progress reporting and cancellation for long-running commands.
//!
//! The core never prints: it calls a [`Progress`] that the front end (the Python CLI's
//! progress bar, or nothing) implements. `advance` is also the cancellation point: a front end
//! that saw Ctrl-C returns `Err(Error::Interrupted)` and the operation unwinds, removing its
//! temporary files. Loops that write without a unit of progress to report (a run of millions of
//! empty nodes in a graph's index) notice the same request through a [`Cancel`] flag, which
//! every file the staging hands out checks as it writes ([`crate::writer::BinWriter`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::{Error, Result};

/// The flag a front end raises to stop an operation; clones share it.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    /// `Err(Error::Interrupted)` once cancelled.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            return Err(Error::Interrupted);
        }
        Ok(())
    }
}

pub trait Progress: Send + Sync {
    /// A new stage starts: `name` for display, `total` units if known, `unit` like "B" or "edges".
    fn stage(&self, name: &str, total: Option<u64>, unit: &str);
    /// `n` more units done. Returning an error aborts the operation.
    fn advance(&self, n: u64) -> Result<()>;
    /// A line for the user about something done besides the task (a stale temporary of a killed
    /// run removed, see [`crate::temp`]); front ends print it on stderr.
    fn note(&self, _line: &str) {}
    /// The flag that makes [`Progress::advance`] fail, for loops that write without reporting
    /// (default: a flag nobody raises).
    fn cancel(&self) -> Cancel {
        Cancel::default()
    }
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
    fn cancel(&self) -> Cancel {
        self.inner.cancel()
    }
}
