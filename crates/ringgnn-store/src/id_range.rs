//! How a message writes the ids that a count allows: `ids 0..1999` for 2000 nodes. Rust's
//! `0..2000` excludes its end, but a user reads "0..2000" as 2001 ids and 2000 as one of them.

use std::fmt;

/// The ids `0` to `n - 1` of `n` things (nodes, node types, batches), for messages:
/// `ids 0..1999`, `ids 0..0` for one, `no ids` for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRange(pub u64);

impl IdRange {
    /// The ids of `n` things, from a reference (as `thiserror` passes a field).
    pub fn of(n: &u64) -> Self {
        IdRange(*n)
    }
}

impl fmt::Display for IdRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("no ids"),
            n => write!(f, "ids 0..{}", n - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IdRange;

    #[test]
    fn the_last_id_is_one_below_the_count() {
        assert_eq!(IdRange(2000).to_string(), "ids 0..1999");
        assert_eq!(IdRange(1).to_string(), "ids 0..0");
        assert_eq!(IdRange(0).to_string(), "no ids");
        assert_eq!(
            IdRange(u64::MAX).to_string(),
            format!("ids 0..{}", u64::MAX - 1)
        );
    }
}
