//! Attaching per-node data to a dataset being built: features and labels from `.npy` files,
//! splits from id files or random fractions. Everything streams; memory stays O(1) in the node
//! count except for a V-bit bitmap to catch duplicate split ids.

use std::collections::BTreeMap;
use std::path::Path;

use crate::api::SplitSpec;
use crate::manifest::{FeatureDtype, FeatureInfo, LabelInfo};
use crate::npy::NpyHeader;
use crate::progress::Progress;
use crate::writer::Staging;
use crate::Result;

/// Validate a features `.npy` header: 2-D, float16/float32/float64.
pub fn check_features(path: &Path) -> Result<NpyHeader> {
    todo!("{}", path.display())
}

/// Validate a labels `.npy` header: 1-D, int32/int64.
pub fn check_labels(path: &Path) -> Result<NpyHeader> {
    todo!("{}", path.display())
}

/// Validate a split spec before the build (names, fractions in [0,1] summing to <= 1, files exist).
pub fn check_split_spec(spec: &SplitSpec) -> Result<()> {
    todo!("{spec:?}")
}

/// Stream the features into `features.bin` (padding rule of FORMAT.md); rows must equal `num_nodes`.
pub fn attach_features(
    staging: &mut Staging,
    path: &Path,
    header: &NpyHeader,
    num_nodes: u64,
    dtype: Option<FeatureDtype>,
    progress: &dyn Progress,
) -> Result<FeatureInfo> {
    todo!("{:?} {} {:?} {}", staging.dir(), path.display(), header, num_nodes + dtype.is_some() as u64 + 0 * progress as *const _ as *const u8 as u64)
}

/// Stream labels into `labels.bin` (i64, -1 = unlabeled); length must equal `num_nodes`.
pub fn attach_labels(staging: &mut Staging, path: &Path, header: &NpyHeader, num_nodes: u64) -> Result<LabelInfo> {
    todo!("{:?} {} {:?} {num_nodes}", staging.dir(), path.display(), header)
}

/// Write `split_NAME.bin` files; returns name -> size.
pub fn attach_splits(
    staging: &mut Staging,
    spec: &SplitSpec,
    num_nodes: u64,
    labeled_only: bool,
    seed: u64,
) -> Result<BTreeMap<String, u64>> {
    todo!("{:?} {spec:?} {num_nodes} {labeled_only} {seed}", staging.dir())
}
