//! `ringgnn._core`: the PyO3 glue between the Python package and the Rust core crates.
//!
//! This crate holds no logic: it converts arguments, releases the GIL around each core call
//! ([`progress::run`]) and converts results and errors ([`errors`]). Everything a user sees is
//! wrapped by the Python package (`python/ringgnn`).
//!
//! `unsafe` is denied here but for one documented site: a numpy array that borrows a loader
//! buffer (`loader.rs`, `exposed`).

#![deny(unsafe_code)]

mod convert;
mod dataset;
mod errors;
mod features;
mod hetero;
mod loader;
mod plan;
mod progress;
mod sampler;
mod serve;
mod serve_hetero;
mod temp;
mod typed;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(convert::check_output, m)?)?;
    m.add_function(wrap_pyfunction!(convert::convert, m)?)?;
    m.add_function(wrap_pyfunction!(convert::build_hetero, m)?)?;
    m.add_function(wrap_pyfunction!(convert::generate_rmat, m)?)?;
    m.add_function(wrap_pyfunction!(convert::generate_sbm, m)?)?;
    m.add_function(wrap_pyfunction!(convert::check_room, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::verify, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::file_crc32c, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::read_manifest, m)?)?;
    m.add_class::<dataset::DatasetHandle>()?;
    m.add_class::<features::FeatureReader>()?;
    m.add_function(wrap_pyfunction!(features::aggregate_edge_bytes, m)?)?;
    m.add_class::<features::SourcePartitions>()?;
    m.add_class::<hetero::HeteroGraph>()?;
    m.add_class::<hetero::HeteroSampler>()?;
    m.add_class::<typed::TypedLoader>()?;
    m.add_class::<typed::TypedEpoch>()?;
    m.add_class::<loader::Loader>()?;
    m.add_class::<loader::LoaderEpoch>()?;
    m.add_class::<loader::HostBuffer>()?;
    m.add_class::<sampler::Sampler>()?;
    m.add_class::<sampler::SamplerEpoch>()?;
    m.add_function(wrap_pyfunction!(sampler::parse_fanouts, m)?)?;
    m.add_function(wrap_pyfunction!(sampler::default_budget, m)?)?;
    m.add_function(wrap_pyfunction!(sampler::default_refusal, m)?)?;
    m.add_function(wrap_pyfunction!(sampler::offset_index_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(plan::plan_files, m)?)?;
    m.add_function(wrap_pyfunction!(plan::expected_reads, m)?)?;
    m.add_function(wrap_pyfunction!(plan::source_hits, m)?)?;
    m.add_function(wrap_pyfunction!(plan::ranked_groups, m)?)?;
    m.add_function(wrap_pyfunction!(plan::choose_cache_rows, m)?)?;
    serve::register(m)?;
    m.add_class::<serve_hetero::HeteroEngine>()?;
    m.add_class::<temp::Temporary>()?;
    m.add_function(wrap_pyfunction!(temp::reclaim, m)?)?;
    m.add("TEMP_MARKER", ringgnn_store::temp::MARKER)?;
    m.add("EXCERPT_CHARS", ringgnn_store::EXCERPT_CHARS)?;
    // The names the core's parsers accept, so that front ends list the same ones.
    m.add("BACKENDS", ringgnn_loader::BackendChoice::NAMES.to_vec())?;
    m.add(
        "CACHE_POLICIES",
        ringgnn_loader::CachePolicy::NAMES.to_vec(),
    )?;
    m.add("MAX_FANOUT", ringgnn_sampler::MAX_FANOUT)?;
    m.add("MIN_BUILD_MEMORY", ringgnn_store::builder::MIN_MEMORY)?;
    Ok(())
}
