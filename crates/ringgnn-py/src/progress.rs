//! Running a long core operation with the GIL released, while relaying its progress to an optional
//! Python object (`stage(name, total, unit)`, `advance(n)`) and letting Ctrl-C cancel it.
//!
//! The core runs on a scoped worker thread and reports to a [`Relay`], which only touches atomics
//! and a short queue, so core threads never wait for the GIL. The calling thread, detached from
//! Python, wakes every [`TICK`], attaches, forwards what accumulated and calls
//! `check_signals()`. Doing the Python side on the calling thread matters: Python runs signal
//! handlers (the one that raises `KeyboardInterrupt`) only on the main thread, and core worker
//! threads are never it. When a signal handler or a progress method raises, the relay is
//! cancelled: the core's next `advance` returns `Error::Interrupted`, it removes its staging
//! directory, and the Python error is raised once the core has returned.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use ringgnn_store::{Error, Progress, Result};

use crate::errors::StoreError;

/// How often the GIL is taken to update the progress object and check for signals: often enough
/// that Ctrl-C feels immediate and bars move smoothly, rarely enough to cost nothing.
const TICK: Duration = Duration::from_millis(100);

enum Event {
    Stage {
        name: String,
        total: Option<u64>,
        unit: String,
    },
    Advance(u64),
}

/// The core's view: a [`Progress`] that never blocks on Python.
struct Relay {
    /// Units reported since the last tick (several core threads may add to it).
    pending: AtomicU64,
    /// Stage changes, in order, with the counts that preceded each.
    events: Mutex<Vec<Event>>,
    cancelled: AtomicBool,
}

impl Progress for Relay {
    fn stage(&self, name: &str, total: Option<u64>, unit: &str) {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let done = self.pending.swap(0, Ordering::Relaxed);
        if done > 0 {
            events.push(Event::Advance(done));
        }
        events.push(Event::Stage {
            name: name.to_string(),
            total,
            unit: unit.to_string(),
        });
    }

    fn advance(&self, n: u64) -> Result<()> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Err(Error::Interrupted);
        }
        self.pending.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }
}

impl Relay {
    /// Everything reported since the last call, in order.
    fn drain(&self) -> Vec<Event> {
        // Take the count under the lock too: a `stage` cannot slip in between, so units of a new
        // stage are never credited to the previous one.
        let mut queue = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let mut events = std::mem::take(&mut *queue);
        let done = self.pending.swap(0, Ordering::Relaxed);
        drop(queue);
        if done > 0 {
            events.push(Event::Advance(done));
        }
        events
    }
}

/// Forward events to the Python object; the first Python error is returned.
fn forward(py: Python<'_>, target: Option<&Py<PyAny>>, events: Vec<Event>) -> PyResult<()> {
    let Some(target) = target else { return Ok(()) };
    let target = target.bind(py);
    for event in events {
        match event {
            Event::Stage { name, total, unit } => {
                target.call_method1("stage", (name, total, unit))?
            }
            Event::Advance(n) => target.call_method1("advance", (n,))?,
        };
    }
    Ok(())
}

/// Run `op` with the GIL released, relaying progress to `progress` (any object with `stage` and
/// `advance` methods, or None) and turning Ctrl-C into a clean cancellation.
pub fn run<T, F>(py: Python<'_>, progress: Option<Py<PyAny>>, op: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce(&dyn Progress) -> Result<T> + Send,
{
    let relay = Relay {
        pending: AtomicU64::new(0),
        events: Mutex::new(Vec::new()),
        cancelled: AtomicBool::new(false),
    };
    let relay = &relay;
    let progress = progress.as_ref();
    let (result, py_error) = py.detach(|| {
        std::thread::scope(|scope| {
            let (tx, rx) = mpsc::channel();
            let worker = scope.spawn(move || {
                // If `op` panics, `tx` is dropped and the loop below sees `Disconnected`.
                let _ = tx.send(op(relay));
            });
            let mut py_error: Option<PyErr> = None;
            let result = loop {
                let received = rx.recv_timeout(TICK);
                Python::attach(|py| {
                    let events = relay.drain();
                    if py_error.is_none() {
                        let outcome =
                            forward(py, progress, events).and_then(|()| py.check_signals());
                        if let Err(e) = outcome {
                            relay.cancelled.store(true, Ordering::Relaxed);
                            py_error = Some(e);
                        }
                    }
                });
                match received {
                    Ok(result) => break result,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => match worker.join() {
                        Err(panic) => std::panic::resume_unwind(panic),
                        Ok(()) => unreachable!("the worker sends its result before it ends"),
                    },
                }
            };
            (result, py_error)
        })
    });
    match (result, py_error) {
        // The core stopped because Python asked it to: raise what Python raised (KeyboardInterrupt,
        // or the progress object's own error).
        (Err(Error::Interrupted), Some(e)) => Err(e),
        (Err(e), _) => Err(StoreError(e).into()),
        // It finished before it noticed the cancellation; a pending KeyboardInterrupt still wins.
        (Ok(_), Some(e)) => Err(e),
        (Ok(v), None) => Ok(v),
    }
}
