//! Reading datasets from Python: `_core.DatasetHandle`, `_core.read_manifest`, `_core.verify`.

use std::path::{Path, PathBuf};

use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ringgnn_store::hetero::{AnyManifest, Part};
use ringgnn_store::verify::{verify as core_verify, VerifyOptions};
use ringgnn_store::Dataset;

use crate::errors::StoreError;
use crate::progress;

/// An open dataset (`ringgnn.Dataset` wraps it). Reads use positional I/O on shared file
/// handles, so one handle may serve several threads, and forked children (DataLoader workers).
#[pyclass(module = "ringgnn._core", frozen)]
pub struct DatasetHandle {
    inner: Dataset,
}

#[pymethods]
impl DatasetHandle {
    /// Open the dataset in `path`, checking that every file has the size its manifest records;
    /// `part` (`node/TYPE` or `relation/SRC:REL:DST`) opens one part of a heterogeneous dataset.
    #[staticmethod]
    #[pyo3(signature = (path, part=None))]
    fn open(py: Python<'_>, path: PathBuf, part: Option<&str>) -> PyResult<Self> {
        let inner = py
            .detach(|| open_dataset(&path, part))
            .map_err(StoreError)?;
        Ok(DatasetHandle { inner })
    }

    /// The manifest as JSON.
    fn manifest_json(&self) -> String {
        self.inner.manifest().to_json()
    }

    /// The dataset directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.dir().to_path_buf()
    }

    /// Sources of the edges into `v` (in-neighbors, ascending, duplicates kept) as int64.
    fn neighbors<'py>(&self, py: Python<'py>, v: u64) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let ids = py.detach(|| self.inner.neighbors(v)).map_err(StoreError)?;
        // Node ids are below 2^63 (the builder stores at most u64 ids of real node counts), and
        // numpy users index with int64.
        Ok(ids
            .into_iter()
            .map(|x| x as i64)
            .collect::<Vec<_>>()
            .into_pyarray(py))
    }

    /// `indptr` (V+1 offsets into the neighbor lists) as int64.
    fn indptr<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let ptr = py.detach(|| self.inner.load_indptr()).map_err(StoreError)?;
        Ok(ptr
            .into_iter()
            .map(|x| x as i64)
            .collect::<Vec<_>>()
            .into_pyarray(py))
    }

    /// Labels (-1 = unlabeled) as int64, or None when the dataset has none.
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray1<i64>>>> {
        let labels = py.detach(|| self.inner.labels()).map_err(StoreError)?;
        Ok(labels.map(|l| l.into_pyarray(py)))
    }

    /// Node ids of split `name` as int64.
    fn split<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let ids = py.detach(|| self.inner.split(name)).map_err(StoreError)?;
        Ok(ids.into_pyarray(py))
    }

    /// The pairs of edge split `name` as an int64 array of shape (n, 2): (src, dst) rows.
    fn edge_split<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let (v, _) = py
            .detach(|| self.inner.edge_split(name))
            .map_err(StoreError)?;
        let n = v.len() / 2;
        v.into_pyarray(py).reshape([n, 2])
    }

    /// The fixed negatives of edge split `name` as an int64 array of shape (n, K).
    fn edge_negatives<'py>(
        &self,
        py: Python<'py>,
        name: &str,
    ) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let (v, k) = py
            .detach(|| self.inner.edge_negatives(name))
            .map_err(StoreError)?;
        let n = v.len() / k as usize;
        v.into_pyarray(py).reshape([n, k as usize])
    }
}

/// The dataset in `path`, or one part of it (`node/TYPE`, `relation/SRC:REL:DST`) when it is
/// heterogeneous: every binding that opens a dataset takes such a `part`.
pub(crate) fn open_dataset(path: &Path, part: Option<&str>) -> ringgnn_store::Result<Dataset> {
    match part {
        None => Dataset::open(path),
        Some(p) => Dataset::open_part(path, &Part::parse(p)?),
    }
}

/// Read and check `path/manifest.json` (homogeneous or heterogeneous); returns it as JSON.
#[pyfunction]
pub fn read_manifest(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let m = py.detach(|| AnyManifest::read(&path)).map_err(StoreError)?;
    Ok(m.to_json())
}

/// The size and CRC-32C (8 lowercase hex digits, `docs/FORMAT.md`) of the whole file `path`,
/// read in 1 MiB blocks with the GIL released: what a manifest's file entry records.
#[pyfunction]
pub fn file_crc32c(py: Python<'_>, path: PathBuf) -> PyResult<(u64, String)> {
    use std::io::Read;
    let run = || -> std::io::Result<(u64, u32)> {
        let mut f = std::fs::File::open(&path)?;
        let mut buf = vec![0u8; 1 << 20];
        let (mut crc, mut len) = (0u32, 0u64);
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok((len, crc));
            }
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            len += n as u64;
        }
    };
    let (len, crc) = py.detach(run).map_err(|e| {
        crate::errors::input_error(format!(
            "{}: {e} while computing its checksum",
            path.display()
        ))
    })?;
    Ok((len, format!("{crc:08x}")))
}

/// Check checksums and structure within `memory` bytes; raises `CorruptDatasetError` naming
/// the first problem.
#[pyfunction]
#[pyo3(signature = (path, memory, spill_dir=None, progress=None))]
pub fn verify<'py>(
    py: Python<'py>,
    path: PathBuf,
    memory: u64,
    spill_dir: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = VerifyOptions { memory, spill_dir };
    let report = progress::run(py, progress, |p| core_verify(&path, &opts, p))?;
    let d = PyDict::new(py);
    d.set_item("files_checked", report.files_checked)?;
    d.set_item("bytes_checked", report.bytes_checked)?;
    d.set_item("spilled_bytes", report.spilled_bytes)?;
    Ok(d)
}
