//! The fold kernels of layer-wise inference's aggregation ([`crate::aggregate`]): how one edge's
//! source row is folded into its destination's accumulator row. Sums (GraphSAGE's mean is a sum
//! over the in-degree), GCN's normalised sums, element-wise maxima, and GAT's attention as an
//! online softmax (a running maximum, sum of exponentials and weighted sum per head, so that the
//! edges of a destination may come in any number of pieces and windows).
//!
//! The rows folded in are those of the piece after the caller's transform, if any (`W x` for a
//! layer whose output is narrower than its input; GAT's transformed rows with their attention
//! logits appended); see [`Fold::acc_width`] for the accumulator row each fold keeps.

use crate::{Error, Result};

/// How an edge's source row is folded into its destination's accumulator row.
#[derive(Clone, Copy, Debug)]
pub enum Fold<'a> {
    /// `acc += x` over every stored edge (GraphSAGE's mean is this sum over the in-degree).
    Sum,
    /// GCN: stored self loops dropped (the caller adds one per node), edge `u -> v` weighted
    /// `dinv[u] * dinv[v]` (`dinv`: one value per node of the graph).
    Gcn(&'a [f32]),
    /// `acc = max(acc, x)` element-wise over every stored edge (PyG's `aggr="max"`); the caller
    /// starts the accumulators at `-inf` and sets those of nodes without in-edges to 0, as PyG does.
    Max,
    /// GAT's attention, stored self loops dropped (the caller folds one per node in last).
    Softmax(Attention<'a>),
}

/// GAT's attention over `heads` heads of `channels` values each. A source row is its transformed
/// row (`heads * channels` values, head by head) followed by its `heads` source logits
/// `<x_u W, att_src>`; edge `u -> v`'s logit for head `h` is
/// `leaky_relu(src[u, h] + a_dst[v, h], negative_slope)`. The accumulator row of a destination is
/// its weighted sum of messages (`heads * channels`), its running maximum logit (`heads`) and its
/// sum of exponentials (`heads`), relative to that maximum.
#[derive(Clone, Copy, Debug)]
pub struct Attention<'a> {
    pub heads: usize,
    pub negative_slope: f32,
    /// The destination logits `<x_v W, att_dst>` of the block's destinations, `heads` each.
    pub a_dst: &'a [f32],
}

impl Fold<'_> {
    /// Whether stored self loops are left out (the caller adds one per node).
    pub fn drops_self_loops(&self) -> bool {
        matches!(self, Fold::Gcn(_) | Fold::Softmax(_))
    }

    /// Values per accumulator row for source rows of `width` values, checked against the fold's
    /// parameters for a block of `n_d` destinations of a graph of `num_nodes` nodes.
    pub fn acc_width(&self, width: usize, n_d: usize, num_nodes: u64) -> Result<usize> {
        match self {
            Fold::Sum | Fold::Max => Ok(width),
            Fold::Gcn(dinv) => {
                if dinv.len() as u64 != num_nodes {
                    return Err(Error::Input(format!(
                        "aggregate: {} GCN normalisation values for a graph of {num_nodes} nodes",
                        dinv.len()
                    )));
                }
                Ok(width)
            }
            Fold::Softmax(att) => {
                let h = att.heads;
                if h == 0 || width <= h || !(width - h).is_multiple_of(h) {
                    return Err(Error::Input(format!(
                        "aggregate: attention rows of {width} values cannot hold {h} heads' messages and logits \
                         (heads x channels + heads values are needed)"
                    )));
                }
                if att.a_dst.len() != n_d * h {
                    return Err(Error::Input(format!(
                        "aggregate: {} destination logits for {n_d} destinations of {h} heads",
                        att.a_dst.len()
                    )));
                }
                Ok(width + h)
            }
        }
    }

    /// Fold the row `x` of source `u` into `acc`, the accumulator row of destination `v`, the
    /// block's `d`-th.
    #[inline(always)]
    pub fn edge(&self, acc: &mut [f32], x: &[f32], u: u64, v: u64, d: usize) {
        match *self {
            Fold::Sum => acc.iter_mut().zip(x).for_each(|(o, x)| *o += x),
            Fold::Gcn(dinv) => {
                let w = dinv[u as usize] * dinv[v as usize];
                acc.iter_mut().zip(x).for_each(|(o, x)| *o += x * w);
            }
            Fold::Max => acc.iter_mut().zip(x).for_each(|(o, &x)| *o = o.max(x)),
            Fold::Softmax(att) => {
                let h = att.heads;
                softmax_edge(
                    acc,
                    x,
                    &att.a_dst[d * h..(d + 1) * h],
                    h,
                    att.negative_slope,
                )
            }
        }
    }
}

/// One edge of an online softmax: its logit per head, the running maximum raised (and what was
/// summed rescaled) when the logit exceeds it, then its exponential and weighted message added.
fn softmax_edge(acc: &mut [f32], x: &[f32], a_dst: &[f32], heads: usize, slope: f32) {
    let hc = x.len() - heads;
    let c = hc / heads;
    let (msg, rest) = acc.split_at_mut(hc);
    let (m, z) = rest.split_at_mut(heads);
    for h in 0..heads {
        let s = x[hc + h] + a_dst[h];
        let e = if s >= 0.0 { s } else { s * slope };
        let out = &mut msg[h * c..(h + 1) * c];
        if e > m[h] {
            // From -inf (nothing yet) the scale is exp(-inf) = 0 and the sums are 0 already.
            let scale = (m[h] - e).exp();
            z[h] *= scale;
            out.iter_mut().for_each(|o| *o *= scale);
            m[h] = e;
        }
        let p = (e - m[h]).exp();
        z[h] += p;
        out.iter_mut()
            .zip(&x[h * c..(h + 1) * c])
            .for_each(|(o, x)| *o += p * x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn leaky(s: f64, slope: f64) -> f64 {
        if s >= 0.0 {
            s
        } else {
            s * slope
        }
    }

    #[test]
    fn max_keeps_the_largest_value_of_each_column() {
        let mut acc = vec![f32::NEG_INFINITY; 3];
        for x in [[1.0, -5.0, 2.0], [0.5, -1.0, 7.0], [3.0, -9.0, -1.0]] {
            Fold::Max.edge(&mut acc, &x, 0, 0, 0);
        }
        assert_eq!(acc, [3.0, -1.0, 7.0]);
    }

    #[test]
    fn softmax_by_hand() {
        // Two heads of one channel; a_dst = [0, 1]. Source rows: [msg0, msg1, logit0, logit1].
        let a_dst = [0.0, 1.0];
        let fold = Fold::Softmax(Attention {
            heads: 2,
            negative_slope: 0.5,
            a_dst: &a_dst,
        });
        let mut acc = vec![0.0, 0.0, f32::NEG_INFINITY, f32::NEG_INFINITY, 0.0, 0.0];
        fold.edge(&mut acc, &[10.0, 20.0, 1.0, -3.0], 0, 0, 0); // logits 1 and leaky(-2) = -1
        fold.edge(&mut acc, &[30.0, 40.0, 2.0, -1.0], 0, 0, 0); // logits 2 and 0
                                                                // Head 0: max 2, z = e^-1 + 1, msg = 10 e^-1 + 30. Head 1: max 0, z = e^-1 + 1,
                                                                // msg = 20 e^-1 + 40.
        let e1 = (-1.0f32).exp();
        let want = [
            10.0 * e1 + 30.0,
            20.0 * e1 + 40.0,
            2.0,
            0.0,
            e1 + 1.0,
            e1 + 1.0,
        ];
        for (g, w) in acc.iter().zip(want) {
            assert!((g - w).abs() < 1e-5, "{acc:?} != {want:?}");
        }
    }

    #[test]
    fn widths_are_checked() {
        let a_dst = [0.0; 4];
        let att = |heads| {
            Fold::Softmax(Attention {
                heads,
                negative_slope: 0.2,
                a_dst: &a_dst,
            })
        };
        assert_eq!(att(2).acc_width(6, 2, 9).unwrap(), 8);
        assert!(att(2).acc_width(5, 2, 9).is_err()); // 5 - 2 is not a multiple of 2
        assert!(att(2).acc_width(2, 2, 9).is_err()); // no room for messages
        assert!(att(2).acc_width(6, 3, 9).is_err()); // 4 logits for 3 destinations of 2 heads
        assert!(Fold::Gcn(&[1.0; 3]).acc_width(4, 1, 4).is_err());
        assert_eq!(Fold::Max.acc_width(4, 1, 4).unwrap(), 4);
        assert!(Fold::Gcn(&[1.0]).drops_self_loops() && att(1).drops_self_loops());
        assert!(!Fold::Sum.drops_self_loops() && !Fold::Max.drops_self_loops());
    }

    proptest! {
        /// The online softmax over edges in any order equals the two-pass softmax: weights
        /// `exp(e - max) / sum`, messages summed with them (relative to the final maximum).
        #[test]
        fn online_softmax_equals_the_two_pass_softmax(
            rows in prop::collection::vec(prop::collection::vec(-8.0f32..8.0, 6), 1..30),
            a_dst in prop::collection::vec(-3.0f32..3.0, 2),
        ) {
            let (heads, c) = (2, 2);
            let fold = Fold::Softmax(Attention { heads, negative_slope: 0.2, a_dst: &a_dst });
            let mut acc = vec![0.0, 0.0, 0.0, 0.0, f32::NEG_INFINITY, f32::NEG_INFINITY, 0.0, 0.0];
            for x in &rows {
                fold.edge(&mut acc, x, 0, 0, 0);
            }
            for h in 0..heads {
                let e: Vec<f64> = rows.iter().map(|x| leaky(x[4 + h] as f64 + a_dst[h] as f64, 0.2)).collect();
                let m = e.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = e.iter().map(|e| (e - m).exp()).sum();
                prop_assert!((acc[4 + h] as f64 - m).abs() < 1e-5);
                prop_assert!((acc[6 + h] as f64 - z).abs() < 1e-4 * z.max(1.0));
                for j in 0..c {
                    let want: f64 = rows.iter().zip(&e).map(|(x, e)| (e - m).exp() * x[h * c + j] as f64).sum();
                    prop_assert!((acc[h * c + j] as f64 - want).abs() < 1e-3 * want.abs().max(1.0));
                }
            }
        }
    }
}
