//! Edge-list inputs for `convert`: text (whitespace, TSV, CSV, optionally gzip), raw binary
//! pairs (bin32, bin64) and NumPy `.npy`. Every source streams: memory does not grow with the
//! input size.

mod binary;
mod npy_edges;
mod text;

use std::path::Path;

use crate::Result;

/// Input encodings `convert` understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    Text,
    Bin32,
    Bin64,
    Npy,
}

impl InputFormat {
    pub fn parse(s: &str) -> Result<Option<Self>> {
        Ok(Some(match s {
            "detect" | "auto" => return Ok(None),
            "text" | "tsv" | "csv" | "txt" => InputFormat::Text,
            "bin32" => InputFormat::Bin32,
            "bin64" => InputFormat::Bin64,
            "npy" => InputFormat::Npy,
            _ => return crate::input_err!("--format '{s}' is not known; use text, bin32, bin64 or npy"),
        }))
    }
}

/// A stream of directed edges `(src, dst)`.
pub trait EdgeSource: Send {
    /// Append up to `max` edges to `out`; returns how many were appended, 0 once exhausted.
    fn fill(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<usize>;
    /// Work done so far and the total, in the unit of [`EdgeSource::unit`], for progress bars.
    fn position(&self) -> (u64, Option<u64>);
    /// "B" (input bytes) or "edges".
    fn unit(&self) -> &'static str;
    /// True when every id this source can yield is below 2^32 (enables the compact build path).
    fn ids_fit_u32(&self) -> bool;
}

/// Decide the format of `path` from its name and first bytes; errors when unsure.
pub fn detect(path: &Path) -> Result<InputFormat> {
    todo!("input::detect {}", path.display())
}

/// Open `path` as an edge stream. Ids must be below `num_nodes` when given: a source reports the
/// first violation with its location (line number, edge index).
pub fn open(path: &Path, format: Option<InputFormat>, num_nodes: Option<u64>) -> Result<Box<dyn EdgeSource>> {
    let _ = (path, format, num_nodes);
    todo!()
}
