//! The worker pipeline: jobs taken from a [`JobSource`] by worker threads, each done by a
//! [`Stage`], their outputs handed to the consumer in order by a [`Run`].
//!
//! It knows nothing of graphs: a job is whatever the source hands out (one mini-batch of an
//! epoch, the batches of a hyperbatch, a server request) and fills one or more consecutive
//! output *slots*. Workers claim jobs in slot order; each worker keeps its own state (a read
//! backend, an io_uring ring) made on its own thread; the only shared state is the source's
//! lock, taken for the moment of a claim, and the reorder window where finished outputs wait for
//! their turn.
//!
//! **Backpressure.** A worker whose job starts at slot `s` waits before doing it until
//! `s < next_to_yield + window`: at most `window` outputs (plus the rest of the last job) are
//! ever finished and not yet consumed, whatever the consumer's speed. A stage may bound a
//! costly part tighter with [`Emit::wait_turn`]. The slot the consumer waits for always belongs
//! to a claimed job whose worker is not blocked (its first slot is inside the window, and a
//! turn for it is always granted), so no arrangement of a slow consumer, held outputs or slow
//! workers can deadlock.
//!
//! **Stopping and failing.** Dropping a [`Run`] sets the stop flag (given to every stage, which
//! should give up between reads), wakes every waiting worker and joins them. A stage's error, a
//! worker that could not start and a panic all become the output of the slot the worker was
//! at; the consumer gets it in order and the run ends there.

#![forbid(unsafe_code)]

mod run;
mod source;

pub use run::{Emit, Next, Run, RunOptions};
pub use source::{JobSource, Jobs};

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The work of a pipeline's workers. One value is shared by all of them.
pub trait Stage: Send + Sync + 'static {
    /// What a worker takes from the source.
    type Job: Send + 'static;
    /// A worker's own state, made on its thread before its first job (never crosses threads).
    type State;
    /// One per slot.
    type Output: Send + 'static;
    type Error: From<WorkerFailed> + Send + 'static;

    /// Make a worker's state. `stop` is set when the run is dropped: long work should check it.
    fn start(&self, stop: &Arc<AtomicBool>) -> Result<Self::State, Self::Error>;

    /// Do `job`, emitting one output per slot of it, in order ([`Emit::emit`]). Returning an
    /// error makes it the output of the first slot not yet emitted, and ends the run there.
    fn run(
        &self,
        state: &mut Self::State,
        job: Self::Job,
        out: &mut Emit<'_, Self::Output, Self::Error>,
    ) -> Result<(), Self::Error>;
}

/// A worker that could not start, panicked, or finished a job without emitting all its slots.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("worker failed at output {slot}: {msg}")]
pub struct WorkerFailed {
    pub slot: usize,
    pub msg: String,
}
