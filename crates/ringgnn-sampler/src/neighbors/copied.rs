//! A fetch of 32-bit positions through a 64-bit copy ([`fetch_copied`]): what a narrow fetch
//! does where it cannot read the positions where they lie (in memory; from disk with a page
//! cache, or a span wider than the read buffer), and the one rule for the first entry found
//! too large to replace its position ([`first_bad`]).

use crate::Result;

/// The first of two entries found too large, in position order: `(position, entry)`.
pub(crate) fn first_bad(a: Option<(u64, u64)>, b: Option<(u64, u64)>) -> Option<(u64, u64)> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.0 < x.0 { y } else { x }),
        (x, y) => x.or(y),
    }
}

/// Each position of `parts` (in turn) replaced by its entry, read by one call of `fetch`
/// (`out[i] = entry at positions[i]`) over 64-bit copies of them all held in `copies`
/// (positions, entries: the caller's workspace, kept for the next call); the first entry not
/// below `below` (at most 2^32), in position order, and its position returned instead, that
/// position left in place. Where `fetch` fails, its error, and `parts` as given.
pub(crate) fn fetch_copied(
    (sub, out): &mut (Vec<u64>, Vec<u64>),
    parts: &mut [&mut [u32]],
    below: u64,
    fetch: impl FnOnce(&[u64], &mut [u64]) -> Result<()>,
) -> Result<Option<(u64, u64)>> {
    sub.clear();
    sub.reserve_exact(parts.iter().map(|p| p.len()).sum());
    for p in parts.iter() {
        sub.extend(p.iter().map(|&v| v as u64));
    }
    out.clear();
    out.resize(sub.len(), 0);
    fetch(sub, out)?;
    let mut bad = None;
    let vals = parts.iter_mut().flat_map(|p| p.iter_mut());
    for ((v, &u), &p) in vals.zip(out.iter()).zip(sub.iter()) {
        match u < below {
            true => *v = u as u32,
            false => bad = first_bad(bad, Some((p, u))),
        }
    }
    Ok(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn the_first_too_large_in_position_order_is_named_and_left_in_place() {
        let (mut a, mut b) = ([7u32, 3, 9], [1u32, 5]);
        let mut copies = Default::default();
        // Entries are ten times the positions: below 60, positions 7 and 9 are too large.
        let bad = fetch_copied(&mut copies, &mut [&mut a, &mut b], 60, |p, o| {
            o.iter_mut().zip(p).for_each(|(o, &p)| *o = 10 * p);
            Ok(())
        })
        .unwrap();
        assert_eq!((bad, a, b), (Some((7, 70)), [7, 30, 9], [10, 50]));
        assert_eq!(copies, (vec![7, 3, 9, 1, 5], vec![70, 30, 90, 10, 50]));
        assert_eq!(first_bad(None, Some((4, 1))), Some((4, 1)));
        assert_eq!(first_bad(Some((4, 1)), Some((2, 8))), Some((2, 8)));
        assert_eq!(first_bad(Some((2, 1)), Some((2, 8))), Some((2, 1)));
    }

    #[test]
    fn a_failed_fetch_leaves_the_positions_as_given() {
        let mut a = [4u32, 2];
        let mut copies = Default::default();
        let r = fetch_copied(&mut copies, &mut [&mut a], 1 << 20, |_, o| {
            o[0] = 99;
            Err(Error::Corrupt("no".into()))
        });
        assert!(matches!(r, Err(Error::Corrupt(m)) if m == "no"));
        assert_eq!(a, [4, 2]);
    }
}
