//! Running a long core operation with the GIL released, while relaying its progress to an optional
//! Python object (`stage(name, total, unit)`, `advance(n)`) and letting Ctrl-C cancel it.
//!
//! The core runs on a scoped worker thread and reports to a [`Relay`], which only touches atomics
//! and a short queue, so core threads never wait for the GIL. The calling thread, detached from
//! Python, wakes when a stage starts, when the core is done, and otherwise every [`TICK`]; it
//! attaches, forwards what accumulated and calls `check_signals()`. Doing the Python side on the
//! calling thread matters: Python runs signal handlers (the one that raises `KeyboardInterrupt`)
//! only on the main thread, and core worker threads are never it. When a signal handler or a
//! progress method raises, the relay is cancelled: the core's next `advance` returns
//! `Error::Interrupted` (and so does its next write to a staged file, for loops that write for long
//! between two `advance`s: see `ringgnn_store::progress::Cancel`), it removes its staging
//! directory, and the Python error is raised once the core has returned.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::prelude::*;
use ringgnn_store::{Cancel, Error, Progress, Result};

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
    Note(String),
}

#[derive(Default)]
struct Queue {
    /// Stage changes, in order, with the counts that preceded each.
    events: Vec<Event>,
    /// The core has returned (or panicked).
    finished: bool,
}

/// The core's view: a [`Progress`] that never blocks on Python.
#[derive(Default)]
struct Relay {
    /// Units reported since the last forward (several core threads may add to it).
    pending: AtomicU64,
    queue: Mutex<Queue>,
    wake: Condvar,
    cancel: Cancel,
}

impl Progress for Relay {
    fn stage(&self, name: &str, total: Option<u64>, unit: &str) {
        let mut q = self.lock();
        let done = self.pending.swap(0, Ordering::Relaxed);
        if done > 0 {
            q.events.push(Event::Advance(done));
        }
        q.events.push(Event::Stage {
            name: name.to_string(),
            total,
            unit: unit.to_string(),
        });
        // Start the new bar now, so that its clock (and rate) is right.
        self.wake.notify_one();
    }

    fn advance(&self, n: u64) -> Result<()> {
        self.cancel.check()?;
        self.pending.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    fn note(&self, line: &str) {
        self.lock().events.push(Event::Note(line.to_string()));
        self.wake.notify_one();
    }

    fn cancel(&self) -> Cancel {
        self.cancel.clone()
    }
}

impl Relay {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait up to a tick for news; returns what was reported, in order, and whether the core is done.
    fn wait(&self) -> (Vec<Event>, bool) {
        let mut q = self.lock();
        if q.events.is_empty() && !q.finished {
            q = self
                .wake
                .wait_timeout(q, TICK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        // Take the count under the lock too: a `stage` cannot slip in between, so units of a new
        // stage are never credited to the previous one.
        let mut events = std::mem::take(&mut q.events);
        let done = self.pending.swap(0, Ordering::Relaxed);
        if done > 0 {
            events.push(Event::Advance(done));
        }
        (events, q.finished)
    }
}

/// Marks the relay finished when the worker ends, by returning or by panicking.
struct Finish<'a>(&'a Relay);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.0.lock().finished = true;
        self.0.wake.notify_one();
    }
}

/// Forward events to the Python object; the first Python error is returned. Notes go to its
/// `note(line)` method where it has one, else to `sys.stderr` as `ringgnn: LINE` (also when there
/// is no progress object: they say what was done to the user's files).
fn forward(py: Python<'_>, target: Option<&Py<PyAny>>, events: Vec<Event>) -> PyResult<()> {
    let target = target.map(|t| t.bind(py));
    for event in events {
        match (event, target) {
            (Event::Note(line), Some(t)) if t.hasattr("note")? => {
                t.call_method1("note", (line,))?;
            }
            (Event::Note(line), _) => {
                let stderr = py.import("sys")?.getattr("stderr")?;
                stderr.call_method1("write", (format!("ringgnn: {line}\n"),))?;
                stderr.call_method0("flush")?;
            }
            (Event::Stage { name, total, unit }, Some(t)) => {
                t.call_method1("stage", (name, total, unit))?;
            }
            (Event::Advance(n), Some(t)) => {
                t.call_method1("advance", (n,))?;
            }
            (_, None) => {}
        }
    }
    Ok(())
}

/// Run `op` with the GIL released, relaying progress to `progress` (any object with `stage` and
/// `advance` methods, and optionally `note`, or None) and turning Ctrl-C into a clean cancellation.
pub fn run<T, F>(py: Python<'_>, progress: Option<Py<PyAny>>, op: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce(&dyn Progress) -> Result<T> + Send,
{
    let relay = &Relay::default();
    let progress = progress.as_ref();
    let (result, py_error) = py.detach(|| {
        std::thread::scope(|scope| {
            let worker = scope.spawn(move || {
                let _finish = Finish(relay);
                op(relay)
            });
            let mut py_error: Option<PyErr> = None;
            loop {
                let (events, finished) = relay.wait();
                Python::attach(|py| {
                    if py_error.is_none() {
                        let outcome =
                            forward(py, progress, events).and_then(|()| py.check_signals());
                        if let Err(e) = outcome {
                            relay.cancel.cancel();
                            py_error = Some(e);
                        }
                    }
                });
                if finished {
                    break;
                }
            }
            match worker.join() {
                Ok(result) => (result, py_error),
                Err(panic) => std::panic::resume_unwind(panic),
            }
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
