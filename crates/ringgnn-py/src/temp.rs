//! `Temporary` and `reclaim`: the temporaries protocol of `ringgnn_store::temp` for the Python
//! side (`python/ringgnn/_files.py`), so that Python's temporaries have the same names and locks
//! as the core's and are reclaimed by the same rule.

use std::path::PathBuf;

use pyo3::prelude::*;
use ringgnn_store::temp::{self, Kind, Reclaimed, Temp};

use crate::errors::StoreError;

/// `(path, bytes, line)` of each removed temporary; `line` is what the front end prints.
type Report = Vec<(String, u64, String)>;

fn report(removed: &[Reclaimed]) -> Report {
    removed
        .iter()
        .map(|r| {
            (
                r.path.to_string_lossy().into_owned(),
                r.bytes,
                r.to_string(),
            )
        })
        .collect()
}

/// A locked temporary directory or file beside what it becomes (see `ringgnn_store::temp`).
/// Made after the stale temporaries in `parent` were removed (`reclaimed` lists them).
/// `commit(to)` renames it into place; `close()` removes it if it is still there. Either
/// releases the lock.
#[pyclass(module = "ringgnn._core")]
pub struct Temporary {
    temp: Option<Temp>,
    path: String,
    reclaimed: Report,
}

#[pymethods]
impl Temporary {
    #[new]
    #[pyo3(signature = (parent, label, directory = false))]
    fn new(parent: PathBuf, label: &str, directory: bool) -> PyResult<Self> {
        let kind = if directory { Kind::Dir } else { Kind::File };
        let temp = Temp::create(&parent, label, kind).map_err(StoreError)?;
        Ok(Temporary {
            path: temp.path().to_string_lossy().into_owned(),
            reclaimed: report(temp.reclaimed()),
            temp: Some(temp),
        })
    }

    /// Where the temporary is.
    #[getter]
    fn path(&self) -> String {
        self.path.clone()
    }

    /// `(path, bytes, line)` of the stale temporaries removed before this one was made.
    #[getter]
    fn reclaimed(&self) -> Report {
        self.reclaimed.clone()
    }

    /// Rename the temporary to `to` (replacing a file there) and release its lock.
    fn commit(&mut self, to: PathBuf) -> PyResult<()> {
        match self.temp.take() {
            Some(t) => Ok(t.commit(&to).map_err(StoreError)?),
            None => Err(crate::errors::input_error(format!(
                "{}: the temporary was already committed or closed",
                self.path
            ))),
        }
    }

    /// Remove the temporary if it is still there, and release its lock (idempotent).
    fn close(&mut self) {
        self.temp = None;
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &mut self,
        _ty: Option<Bound<'_, PyAny>>,
        _value: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> bool {
        self.close();
        false
    }
}

/// Remove the stale temporaries in `parent` (never fails); `(path, bytes, line)` of each.
#[pyfunction]
pub fn reclaim(py: Python<'_>, parent: PathBuf) -> Report {
    py.detach(|| report(&temp::reclaim(&parent)))
}
