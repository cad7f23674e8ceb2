//! The pre-write size check: every build adds up the bytes it is about to write ([`Need`]) and
//! refuses at once, before writing them, when they exceed the free space of the file system it
//! writes to. Without it a node count of 10^12 (a typo, or one id of 2^40 in an edge list whose
//! count is inferred) wrote an 8-byte-per-node index at disk speed until the disk was full.
//!
//! The sizes are the format's ([`docs/FORMAT.md`]): each file padded to a page. A build checks
//! what it knows when it starts (node counts given, generated edge counts) and again once a
//! graph's node and edge counts are known (after the builder's first pass, [`crate::builder`]).
//! The Python importers check the files they stage through the binding of [`check_room`].

use std::path::Path;

use crate::manifest::{pad_to_page, IndexDtype};
use crate::temp::human_bytes;
use crate::{Error, Result};

/// Bytes of a CSC `indptr` for `num_nodes` destinations: `num_nodes + 1` u64s.
pub fn indptr_bytes(num_nodes: u64) -> u64 {
    pad_to_page(num_nodes.saturating_add(1).saturating_mul(8))
}

/// Bytes of a CSC `indices` of `edges` sources among `num_nodes` nodes.
pub fn indices_bytes(num_nodes: u64, edges: u64) -> u64 {
    pad_to_page(edges.saturating_mul(IndexDtype::for_nodes(num_nodes).size()))
}

/// What a build is about to write, part by part (each part named for the message).
#[derive(Clone, Debug, Default)]
pub struct Need {
    parts: Vec<(String, u64)>,
}

impl Need {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `bytes` for `what` ("features of 10 nodes x 128 f32"); zero-byte parts are left out.
    pub fn add(&mut self, what: impl Into<String>, bytes: u64) -> &mut Self {
        if bytes > 0 {
            self.parts.push((what.into(), bytes));
        }
        self
    }

    /// Add the CSC files of a graph (`of` names it: "the graph", "relation a:r:b") with
    /// `num_nodes` destinations and `edges` edges.
    pub fn graph(&mut self, of: &str, num_nodes: u64, edges: u64) -> &mut Self {
        self.add(
            format!("the index of {of}: {num_nodes} nodes x 8 B"),
            indptr_bytes(num_nodes),
        );
        self.add(
            format!(
                "the edges of {of}: {edges} x {} B",
                IndexDtype::for_nodes(num_nodes).size()
            ),
            indices_bytes(num_nodes, edges),
        )
    }

    /// Add `rows` x `row_bytes` for `what` (per-node files: "labels", "features of type paper").
    pub fn rows(&mut self, what: &str, rows: u64, row_bytes: u64) -> &mut Self {
        self.add(
            format!("{what}: {rows} x {row_bytes} B"),
            pad_to_page(rows.saturating_mul(row_bytes)),
        )
    }

    /// Add the per-node files of `num_nodes` nodes of `of` ("the graph", "node type 'paper'"):
    /// features of `feature_row` bytes a node, and labels (one i64 a node) when `labels`.
    pub fn nodes(
        &mut self,
        of: &str,
        num_nodes: u64,
        feature_row: Option<u64>,
        labels: bool,
    ) -> &mut Self {
        if let Some(row) = feature_row {
            self.rows(&format!("the features of {of}"), num_nodes, row);
        }
        if labels {
            self.rows(&format!("the labels of {of}"), num_nodes, 8);
        }
        self
    }

    pub fn total(&self) -> u64 {
        self.parts
            .iter()
            .fold(0u64, |a, (_, b)| a.saturating_add(*b))
    }

    /// Refuse when the parts exceed the free space of the file system holding `dir` (which
    /// exists: the staging directory, or the output's parent). `out` is what the message names.
    pub fn check(&self, dir: &Path, out: &Path) -> Result<()> {
        if self.parts.is_empty() {
            return Ok(());
        }
        let free = ringgnn_io::free_bytes(dir).map_err(|e| Error::io(dir, e))?;
        self.check_free(free, out)
    }

    /// [`Need::check`] against `free` bytes.
    pub fn check_free(&self, free: u64, out: &Path) -> Result<()> {
        let need = self.total();
        if need <= free {
            return Ok(());
        }
        // The largest parts first: they are what to look at.
        let mut parts = self.parts.clone();
        parts.sort_by_key(|p| std::cmp::Reverse(p.1));
        let listed: Vec<String> = parts
            .iter()
            .take(3)
            .map(|(what, b)| format!("{what} = {}", human_bytes(*b)))
            .collect();
        let more = if parts.len() > 3 { ", ..." } else { "" };
        crate::input_err!(
            "{}: writing it needs {} ({need} bytes: {}{more}), but its file system has only {} ({free} bytes) free; check the node and edge counts, free space there, or write to a file system with room",
            out.display(),
            human_bytes(need),
            listed.join(", "),
            human_bytes(free)
        )
    }
}

/// [`Need::check`] of `parts` (the binding's form: the Python importers name what they stage).
pub fn check_room(dir: &Path, out: &Path, parts: &[(String, u64)]) -> Result<()> {
    let mut need = Need::new();
    for (what, bytes) in parts {
        need.add(what.clone(), *bytes);
    }
    need.check(dir, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn sizes_follow_the_format() {
        assert_eq!(indptr_bytes(0), 4096);
        assert_eq!(indptr_bytes(511), 4096);
        assert_eq!(indptr_bytes(512), 8192);
        assert_eq!(indptr_bytes(1_000_000_000_000), 8_000_000_004_096);
        assert_eq!(indptr_bytes(u64::MAX), u64::MAX); // saturates, never wraps
        assert_eq!(indices_bytes(10, 1025), 8192); // u32 ids
        assert_eq!(indices_bytes(1 << 32, 512), 4096); // u64 ids
        assert_eq!(indices_bytes(1 << 32, 513), 8192);
    }

    #[test]
    fn refuses_more_than_free_naming_both_and_the_path() {
        let mut need = Need::new();
        need.graph("the graph", 1_000_000_000_000, 3);
        let out = PathBuf::from("/data/big");
        let e = need.check_free(80 << 30, &out).unwrap_err().to_string();
        assert_eq!(
            e,
            "/data/big: writing it needs 7.3 TiB (8000000008192 bytes: the index of the graph: \
             1000000000000 nodes x 8 B = 7.3 TiB, the edges of the graph: 3 x 8 B = 4.0 KiB), but \
             its file system has only 80.0 GiB (85899345920 bytes) free; check the node and edge \
             counts, free space there, or write to a file system with room"
        );
    }

    #[test]
    fn fits_exactly_and_empty_needs_nothing() {
        let mut need = Need::new();
        need.rows("labels", 1000, 8);
        assert_eq!(need.total(), 8192);
        need.check_free(8192, Path::new("x")).unwrap();
        assert!(need.check_free(8191, Path::new("x")).is_err());
        Need::new().check_free(0, Path::new("x")).unwrap();
        // No parts: no statvfs call either (the directory need not exist).
        Need::new()
            .check(Path::new("/no/such/dir"), Path::new("x"))
            .unwrap();
    }

    #[test]
    fn lists_the_three_largest_parts() {
        let mut need = Need::new();
        for (i, b) in [5u64, 50, 500, 5000].iter().enumerate() {
            need.add(format!("part{i}"), b << 30);
        }
        let e = need.check_free(1, Path::new("o")).unwrap_err().to_string();
        assert!(
            e.contains("part3 = 4.9 TiB, part2 = 500.0 GiB, part1 = 50.0 GiB, ..."),
            "{e}"
        );
        assert!(!e.contains("part0"), "{e}");
    }

    #[test]
    fn checks_the_real_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let mut need = Need::new();
        need.add("a little", 1);
        need.check(dir.path(), dir.path()).unwrap();
        need.add("everything", u64::MAX);
        let e = need.check(dir.path(), Path::new("out")).unwrap_err();
        assert!(matches!(e, Error::Input(_)), "{e}");
        let missing = Need::new()
            .add("x", 1)
            .check(Path::new("/no/such"), Path::new("o"));
        assert!(matches!(missing, Err(Error::Io { .. })));
    }
}
