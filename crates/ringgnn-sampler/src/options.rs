//! What shapes a sample, as typed values parsed once where they enter: [`Fanout`] (one rule
//! for every front end: `-1` or `1..=MAX_FANOUT`, from an integer or from text such as
//! `"20,15,10"` with [`parse_fanouts`]) and [`SampleOptions`].

use std::str::FromStr;

use crate::{Error, Result};

/// The largest fanout accepted; real fanouts are tens, so anything beyond is a mistake (and
/// the bound keeps a typo such as 10^12 with replacement from allocating terabytes).
pub const MAX_FANOUT: i64 = u32::MAX as i64;

/// How many neighbors to draw per node at one hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fanout {
    /// Every neighbor, in order (PyG's `-1`).
    All,
    /// At most this many (exactly this many with replacement, when the degree is not 0).
    Count(u64),
}

impl Fanout {
    /// Read a PyG-style fanout: `-1` or a positive count up to [`MAX_FANOUT`]. `hop` (0-based)
    /// names it in errors.
    pub fn parse(hop: usize, value: i64) -> Result<Self> {
        match value {
            -1 => Ok(Fanout::All),
            v if v > 0 && v <= MAX_FANOUT => Ok(Fanout::Count(v as u64)),
            value => Err(Error::Fanout { hop, value }),
        }
    }

    /// The PyG-style value: `-1` for all neighbors.
    pub fn value(self) -> i64 {
        match self {
            Fanout::All => -1,
            Fanout::Count(k) => k as i64,
        }
    }

    /// Fanouts from PyG-style values, one per hop (see [`Fanout::parse`]); an empty list is an
    /// error here, the edge where users give fanouts (the core accepts no hops: seeds only).
    pub fn parse_all(values: &[i64]) -> Result<Vec<Fanout>> {
        if values.is_empty() {
            return Err(Error::Input(
                "fanouts is empty: give one fanout per hop, e.g. 20,15,10".into(),
            ));
        }
        values
            .iter()
            .enumerate()
            .map(|(hop, &v)| Fanout::parse(hop, v))
            .collect()
    }
}

/// Fanouts from text such as `"20,15,10"` or `"10, -1"`: comma-separated integers, each as in
/// [`Fanout::parse`].
pub fn parse_fanouts(text: &str) -> Result<Vec<Fanout>> {
    let values = text
        .split(',')
        .map(|part| {
            part.trim().parse::<i64>().map_err(|_| {
                Error::Input(format!(
                    "fanouts '{text}': '{}' is not an integer; use e.g. 20,15,10 (-1 = all \
                     neighbors)",
                    part.trim()
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Fanout::parse_all(&values)
}

impl FromStr for Fanout {
    type Err = Error;
    /// One fanout: an integer, `-1` for all neighbors.
    fn from_str(s: &str) -> Result<Self> {
        let v = s.trim().parse::<i64>().map_err(|_| {
            Error::Input(format!(
                "fanout '{s}' is not an integer; use a positive count or -1"
            ))
        })?;
        Fanout::parse(0, v)
    }
}

/// Everything that decides a sample besides its seeds and `(epoch, batch)`: with the same
/// options, the same seeds and the same `(epoch, batch)`, every sampler returns the same
/// subgraph, whatever its backend, thread or process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampleOptions {
    /// Neighbors per node at each hop, `fanouts[0]` for the seeds.
    pub fanouts: Vec<Fanout>,
    /// Draw with replacement.
    pub replace: bool,
    /// The user seed: with `(epoch, batch)` it fixes every draw.
    pub seed: u64,
    /// Return the global edge ids of the sampled edges.
    pub with_edge_ids: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fanouts_have_one_rule_for_numbers_and_text() {
        assert_eq!(Fanout::parse(0, -1).unwrap(), Fanout::All);
        assert_eq!(Fanout::parse(0, 3).unwrap(), Fanout::Count(3));
        assert_eq!(
            Fanout::parse(0, MAX_FANOUT).unwrap(),
            Fanout::Count(u32::MAX as u64)
        );
        for bad in [0, -2, i64::MIN, MAX_FANOUT + 1] {
            let msg = Fanout::parse(2, bad).unwrap_err().to_string();
            assert!(msg.contains(&format!("fanout {bad} at hop 2")), "{msg}");
            assert!(msg.contains("-1"), "{msg}");
        }
        assert_eq!(
            parse_fanouts(" 20, 15 ,-1").unwrap(),
            vec![Fanout::Count(20), Fanout::Count(15), Fanout::All]
        );
        let msg = parse_fanouts("10,x").unwrap_err().to_string();
        assert!(msg.contains("'x' is not an integer"), "{msg}");
        let msg = parse_fanouts("10,0").unwrap_err().to_string();
        assert!(msg.contains("fanout 0 at hop 1"), "{msg}");
        assert!(parse_fanouts("").is_err());
        assert!(Fanout::parse_all(&[])
            .unwrap_err()
            .to_string()
            .contains("empty"));
        assert_eq!("-1".parse::<Fanout>().unwrap(), Fanout::All);
        assert_eq!(Fanout::Count(7).value(), 7);
        assert_eq!(Fanout::All.value(), -1);
    }
}
