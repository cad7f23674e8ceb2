//! Neighbor sampling (work in progress).
