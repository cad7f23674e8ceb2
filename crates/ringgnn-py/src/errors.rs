//! The Python exception classes of ringgnn and the one conversion from the store's [`Error`].
//!
//! Every class derives from `ringgnn.RingGnnError` *and* from the built-in class a Python user
//! would catch without knowing ringgnn (`ValueError` for bad input, `FileExistsError` for an
//! existing output). Operating-system errors keep their own class (`FileNotFoundError`,
//! `PermissionError`, `OSError` with `errno == ENOSPC`, ...) so `except OSError` works as usual.

use std::io;

use pyo3::exceptions::{
    PyException, PyFileExistsError, PyKeyboardInterrupt, PyOSError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use ringgnn_store::Error;

pyo3::create_exception!(
    ringgnn,
    RingGnnError,
    PyException,
    "Base class of every error ringgnn raises (OS errors keep their own class)."
);

/// An exception class with two bases. `create_exception!` takes one base, so the class is made
/// the way a `class` statement makes it: by calling `type(name, bases, namespace)`.
struct DualBase {
    cell: PyOnceLock<Py<PyType>>,
    name: &'static str,
    doc: &'static str,
    builtin: fn(Python<'_>) -> Bound<'_, PyType>,
}

impl DualBase {
    const fn new(
        name: &'static str,
        doc: &'static str,
        builtin: fn(Python<'_>) -> Bound<'_, PyType>,
    ) -> Self {
        DualBase {
            cell: PyOnceLock::new(),
            name,
            doc,
            builtin,
        }
    }

    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyType>> {
        let ty = self.cell.get_or_try_init(py, || -> PyResult<Py<PyType>> {
            let bases = PyTuple::new(py, [py.get_type::<RingGnnError>(), (self.builtin)(py)])?;
            let ns = PyDict::new(py);
            ns.set_item("__module__", "ringgnn")?;
            ns.set_item("__doc__", self.doc)?;
            let ty = py.get_type::<PyType>().call1((self.name, bases, ns))?;
            Ok(ty.cast_into::<PyType>()?.unbind())
        })?;
        Ok(ty.bind(py).clone())
    }
}

static INPUT_ERROR: DualBase = DualBase::new(
    "InputError",
    "The input is wrong (malformed edge list, id out of range, bad option); the message says where.",
    |py| py.get_type::<PyValueError>(),
);
static CORRUPT_DATASET_ERROR: DualBase = DualBase::new(
    "CorruptDatasetError",
    "A dataset on disk is damaged or does not match its manifest; rebuild it.",
    |py| py.get_type::<PyValueError>(),
);
static DATASET_EXISTS_ERROR: DualBase = DualBase::new(
    "DatasetExistsError",
    "The output directory already exists; pass overwrite=True (--overwrite) to replace it.",
    |py| py.get_type::<PyFileExistsError>(),
);

/// Add the exception classes to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RingGnnError", py.get_type::<RingGnnError>())?;
    m.add("InputError", INPUT_ERROR.get(py)?)?;
    m.add("CorruptDatasetError", CORRUPT_DATASET_ERROR.get(py)?)?;
    m.add("DatasetExistsError", DATASET_EXISTS_ERROR.get(py)?)?;
    Ok(())
}

/// `InputError(msg)`, for argument checks done in the binding.
pub fn input_error(msg: String) -> PyErr {
    Python::attach(|py| match INPUT_ERROR.get(py) {
        Ok(ty) => PyErr::from_type(ty, msg),
        Err(e) => e,
    })
}

/// A store error on its way to Python: `result.map_err(StoreError)?` in a `PyResult` function.
/// (A newtype because neither `Error` nor `PyErr` is defined in this crate.)
pub struct StoreError(pub Error);

impl From<StoreError> for PyErr {
    fn from(StoreError(err): StoreError) -> PyErr {
        let dual = |class: &DualBase, msg: String| {
            Python::attach(|py| match class.get(py) {
                Ok(ty) => PyErr::from_type(ty, msg),
                Err(e) => e,
            })
        };
        match err {
            Error::Io { path, source } => os_error(&path.to_string_lossy(), source),
            Error::Input(msg) => dual(&INPUT_ERROR, msg),
            Error::Corrupt(msg) => dual(&CORRUPT_DATASET_ERROR, msg),
            e @ Error::Exists(_) => dual(&DATASET_EXISTS_ERROR, e.to_string()),
            Error::Interrupted => PyKeyboardInterrupt::new_err("interrupted"),
        }
    }
}

/// A sampler error on its way to Python, like [`StoreError`].
pub struct SamplerError(pub ringgnn_sampler::Error);

impl From<SamplerError> for PyErr {
    fn from(SamplerError(err): SamplerError) -> PyErr {
        use ringgnn_sampler::Error as E;
        match err {
            E::Store(e) => StoreError(e).into(),
            E::Io { path, source } => os_error(&path.to_string_lossy(), source),
            E::Corrupt(msg) => StoreError(Error::Corrupt(msg)).into(),
            e @ (E::Fanout { .. } | E::Seed { .. } | E::TooLarge | E::Input(_)) => {
                input_error(e.to_string())
            }
        }
    }
}

/// A feature-store error on its way to Python, like [`StoreError`].
pub struct FeaturesError(pub ringgnn_features::Error);

impl From<FeaturesError> for PyErr {
    fn from(FeaturesError(err): FeaturesError) -> PyErr {
        use ringgnn_features::Error as E;
        match err {
            E::Store(e) => StoreError(e).into(),
            E::Io { path, source } => os_error(&path.to_string_lossy(), source),
            e @ (E::NodeOutOfRange { .. } | E::NoFeatures { .. } | E::Input(_)) => {
                input_error(e.to_string())
            }
        }
    }
}

/// An `OSError` of the class Python itself would raise, naming the file.
fn os_error(path: &str, source: io::Error) -> PyErr {
    match source.raw_os_error() {
        // `OSError(errno, strerror, filename)` picks the subclass from errno (ENOENT ->
        // FileNotFoundError, EACCES -> PermissionError) and sets `.errno`/`.filename`, exactly as
        // `open()` would; ENOSPC stays a plain OSError with errno 28.
        Some(code) => {
            let text = source.to_string();
            let strerror = text.split(" (os error").next().unwrap_or(&text).to_string();
            PyOSError::new_err((code, strerror, path.to_string()))
        }
        // An error made by the store (no errno): the class follows its kind, the message keeps the path.
        None => PyErr::from(io::Error::new(source.kind(), format!("{path}: {source}"))),
    }
}

/// A loader error: each cause keeps the class its own crate's conversion gives it.
pub struct LoaderError(pub ringgnn_loader::Error);

impl From<LoaderError> for PyErr {
    fn from(LoaderError(err): LoaderError) -> PyErr {
        use ringgnn_loader::Error as E;
        match err {
            E::Sampler(e) => SamplerError(e).into(),
            E::Features(e) => FeaturesError(e).into(),
            E::Store(e) => StoreError(e).into(),
            E::Input(msg) => input_error(msg),
            // A bug, not a user error: the base class, with the message asking for a report.
            e @ E::Worker(_) => RingGnnError::new_err(e.to_string()),
        }
    }
}
