//! One bit per node id: duplicate ids in a split (`attach`, `verify`), the rows a device holds
//! (the loader's GPU tier).

use std::fmt;

/// A set of ids below a bound, one bit each.
pub struct Bitmap(Vec<u64>);

impl Bitmap {
    /// An empty set of ids `0..n`.
    pub fn new(n: u64) -> Self {
        Bitmap(vec![0; n.div_ceil(64) as usize])
    }

    pub fn clear(&mut self) {
        self.0.fill(0);
    }

    /// Set bit `i`; false if it was already set.
    pub fn insert(&mut self, i: u64) -> bool {
        let (w, m) = ((i / 64) as usize, 1u64 << (i % 64));
        let was = self.0[w] & m != 0;
        self.0[w] |= m;
        !was
    }

    /// Whether bit `i` is set (false beyond the bound).
    pub fn contains(&self, i: u64) -> bool {
        self.0
            .get((i / 64) as usize)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
}

impl fmt::Debug for Bitmap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bitmap({} words)", self.0.len())
    }
}
