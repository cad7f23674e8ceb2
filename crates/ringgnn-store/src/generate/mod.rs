//! Synthetic datasets streamed straight into the format, deterministic by seed:
//! Graph500 R-MAT ([`rmat`]) and a degree-corrected planted partition with features and labels
//! ([`sbm`]). Either may hold out a link split as `convert` does (by fraction, or by time with
//! generated edge times), through the same plan and negatives ([`crate::convert`]).

mod chunked;
pub mod rmat;
pub mod sbm;

pub use rmat::{generate_rmat, generate_rmat_split, RmatOptions};
pub use sbm::{generate_sbm, generate_sbm_split, SbmOptions};

use crate::builder::GraphSummary;
use crate::convert::{edge_splits, link_plan};
use crate::link::{LinkPlan, LinkSplitOptions, LinkSplitSpec};
use crate::options::GraphOptions;
use crate::progress::Progress;
use crate::writer::Staging;
use crate::{Manifest, Result};

/// The plan of a generator's link split `link` on a graph built with `graph`'s options, checked
/// before anything is generated: a split by time needs generated edge times.
fn plan(
    link: Option<&LinkSplitOptions>,
    seed: u64,
    graph: &GraphOptions,
) -> Result<Option<LinkPlan>> {
    if let Some(LinkSplitSpec::Times(_)) = link.map(|l| &l.spec) {
        if graph.times.edges.is_none() {
            return crate::input_err!(
                "--link-split-time needs edge times: give --edge-time uniform or --edge-time growth"
            );
        }
    }
    link_plan(link, seed, graph)
}

/// Store the edge splits of `graph` (built with [`plan`]'s plan of `link`) in `manifest`, whose
/// node times are attached, and record how they were asked for (`source.link_split`).
fn add_edge_splits(
    manifest: &mut Manifest,
    staging: &mut Staging,
    graph: &GraphSummary,
    link: Option<&LinkSplitOptions>,
    (seed, memory): (u64, u64),
    progress: &dyn Progress,
) -> Result<()> {
    let Some(l) = link else { return Ok(()) };
    let times = manifest.node_times.is_some();
    manifest.edge_splits = edge_splits(staging, graph, link, seed, times, memory, progress)?;
    if let serde_json::Value::Object(source) = &mut manifest.source {
        source.insert("link_split".into(), l.describe());
    }
    Ok(())
}
