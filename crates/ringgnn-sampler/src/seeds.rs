//! Seed node ids checked once, where they enter: [`Seeds`] can only be made from ids that are
//! nodes of the graph, so nothing downstream (the epoch's shuffle, its batches, the sampler)
//! checks them again.

use std::ops::Range;
use std::sync::Arc;

use crate::{Error, Result};

/// Node ids, each below `num_nodes`, in the caller's order (duplicates allowed: a sample keeps
/// the first occurrence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seeds {
    ids: Arc<[u64]>,
    num_nodes: u64,
}

impl Seeds {
    /// `ids` as seeds of a graph of `num_nodes` nodes, or [`Error::Seed`] naming the first id
    /// that is not a node.
    pub fn new(ids: impl Into<Arc<[u64]>>, num_nodes: u64) -> Result<Self> {
        let ids = ids.into();
        if let Some(&id) = ids.iter().find(|&&s| s >= num_nodes) {
            return Err(Error::Seed {
                id: id as i128,
                num_nodes,
            });
        }
        Ok(Seeds { ids, num_nodes })
    }

    /// Seeds from signed ids (numpy's int64), negative ones refused like out-of-range ones.
    pub fn from_signed(ids: &[i64], num_nodes: u64) -> Result<Self> {
        if let Some(&id) = ids.iter().find(|&&s| s < 0 || s as u64 >= num_nodes) {
            return Err(Error::Seed {
                id: id as i128,
                num_nodes,
            });
        }
        Ok(Seeds {
            ids: ids.iter().map(|&s| s as u64).collect(),
            num_nodes,
        })
    }

    /// Every node of a graph of `num_nodes` nodes, in id order.
    pub fn all(num_nodes: u64) -> Self {
        Seeds {
            ids: (0..num_nodes).collect(),
            num_nodes,
        }
    }

    /// The same ids, reordered in place by `perm` (an epoch's shuffle): still nodes, so not
    /// checked again.
    pub fn reordered(&self, perm: impl Fn(&mut [u64])) -> Self {
        let mut ids = self.ids.to_vec();
        perm(&mut ids);
        Seeds {
            ids: ids.into(),
            num_nodes: self.num_nodes,
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn num_nodes(&self) -> u64 {
        self.num_nodes
    }

    pub fn ids(&self) -> &[u64] {
        &self.ids
    }

    /// All of them, for a sampler.
    pub fn as_slice(&self) -> SeedSlice<'_> {
        SeedSlice {
            ids: &self.ids,
            num_nodes: self.num_nodes,
        }
    }

    /// The ids at positions `r` (clamped to the end), for a sampler.
    pub fn slice(&self, r: Range<usize>) -> SeedSlice<'_> {
        let end = r.end.min(self.ids.len());
        SeedSlice {
            ids: &self.ids[r.start.min(end)..end],
            num_nodes: self.num_nodes,
        }
    }
}

/// A borrowed run of checked seeds: what [`crate::NeighborSampler::sample`] takes.
#[derive(Clone, Copy, Debug)]
pub struct SeedSlice<'a> {
    ids: &'a [u64],
    num_nodes: u64,
}

impl<'a> SeedSlice<'a> {
    pub fn ids(&self) -> &'a [u64] {
        self.ids
    }

    /// The node count the ids were checked against.
    pub fn num_nodes(&self) -> u64 {
        self.num_nodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_node_ids_become_seeds() {
        let s = Seeds::new(vec![2, 0, 2], 3).unwrap();
        assert_eq!(s.ids(), &[2, 0, 2]);
        assert_eq!(s.slice(1..9).ids(), &[0, 2]);
        assert_eq!(s.slice(5..9).ids(), &[] as &[u64]);
        let e = Seeds::new(vec![1, 3, 7], 3).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Seed {
                    id: 3,
                    num_nodes: 3
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "seed node 3 is out of range: the graph has 3 nodes (ids 0..2)"
        );
        let e = Seeds::from_signed(&[0, -4], 3).unwrap_err();
        assert_eq!(
            e.to_string(),
            "seed node -4 is out of range: the graph has 3 nodes (ids 0..2)"
        );
        assert_eq!(Seeds::from_signed(&[2, 1], 3).unwrap().ids(), &[2, 1]);
        assert_eq!(Seeds::all(3).ids(), &[0, 1, 2]);
        assert_eq!(s.reordered(|v| v.reverse()).ids(), &[2, 0, 2]);
    }
}
