//! [`Buckets`]: a batch's drawn positions of one hop, grouped by chunk of the neighbor file for
//! a hyperbatch's pass over it (AGNES' bucket matrix, `003_0d24e84ecc7b1cfa.txt`, section 3.3:
//! block x mini-batch, one row per batch), and put back in draw order once the entries are read.
//! Positions move in pieces, so that a batch remembers little per position (see [`Buckets`]).

use crate::batch::Word;
use crate::{Error, Result};

/// Which chunk of the neighbor file an edge position is in: a shift when the chunk holds a
/// power of two of entries (the usual case), else a division.
#[derive(Clone, Copy)]
pub(crate) struct Chunking {
    per_chunk: u64,
    shift: Option<u32>,
}

impl Chunking {
    pub(crate) fn new(per_chunk: u64) -> Self {
        let shift = per_chunk
            .is_power_of_two()
            .then(|| per_chunk.trailing_zeros());
        Chunking { per_chunk, shift }
    }

    #[inline]
    pub(crate) fn of(self, p: u64) -> usize {
        (match self.shift {
            Some(s) => p >> s,
            None => p / self.per_chunk,
        }) as usize
    }
}

/// A batch's positions of the current hop bucketed by chunk (AGNES' bucket matrix, block x
/// mini-batch, one row per batch). [`Self::sort`] reorders `pos` so that the positions in chunk
/// `c` are `pos[starts[c]..starts[c + 1]]`; reading replaces each position by the entry there
/// (threads reading different chunks write disjoint parts of `pos`, and in file order);
/// [`Self::unsort`] puts the entries back in draw order.
///
/// Positions move as *pieces*: the longest stretches of positions, in draw order, that lie in
/// one chunk. A node's drawn positions are one stretch of its neighbor list, so a piece is
/// usually a whole node's fanout. The batch remembers each piece's chunk (4 bytes) and where
/// pieces start in draw order (a bit per position): about 0.5 byte per position at fanout 10,
/// where remembering each position's place took 4 (the state of H batches is what bounds H).
/// The moves go through a copy lent by the thread ([`Self::sort`]'s `ws`), one batch at a
/// time.
#[derive(Default)]
pub(crate) struct Buckets {
    /// The chunk of each piece, in draw order.
    keys: Vec<u32>,
    /// Bit `k` is set when a piece starts at position `k` (draw order).
    first: Vec<u64>,
    /// Sorted, the positions in chunk `c` are `pos[starts[c]..starts[c + 1]]`.
    pub(crate) starts: Vec<u32>,
}

impl Buckets {
    pub(crate) fn sort<W: Word>(
        &mut self,
        pos: &mut [W],
        chunk: Chunking,
        chunks: usize,
        ws: &mut Workspace<W>,
    ) -> Result<()> {
        let n = pos.len();
        if n > u32::MAX as usize || chunks > u32::MAX as usize {
            return Err(Error::TooLarge);
        }
        self.starts.clear();
        self.starts.resize(chunks + 1, 0);
        self.first.clear();
        self.first.resize(n.div_ceil(64), 0);
        let mut pieces = 0usize;
        let mut prev = usize::MAX;
        for (k, &p) in pos.iter().enumerate() {
            let c = chunk.of(p.get());
            self.starts[c + 1] += 1;
            if c != prev {
                self.first[k / 64] |= 1 << (k % 64);
                pieces += 1;
                prev = c;
            }
        }
        for c in 0..chunks {
            self.starts[c + 1] += self.starts[c];
        }
        // Exactly the room the hop takes.
        self.keys.clear();
        self.keys.reserve_exact(pieces);
        let keys = pieces_of(&self.first, n).map(|(o, _)| chunk.of(pos[o].get()) as u32);
        self.keys.extend(keys);
        self.move_pieces(pos, ws, true);
        Ok(())
    }

    /// The entries read, back in draw order (each piece back where it was drawn).
    pub(crate) fn unsort<W: Word>(&self, pos: &mut [W], ws: &mut Workspace<W>) {
        self.move_pieces(pos, ws, false);
    }

    /// Move every piece of `pos` from draw order to its chunk's range (`to_chunks`), or back,
    /// through a copy in `ws`. Each chunk's pieces keep their draw order within its range, so
    /// the same walk over the pieces finds where each goes either way.
    fn move_pieces<W: Word>(&self, pos: &mut [W], ws: &mut Workspace<W>, to_chunks: bool) {
        ws.copy.clear();
        ws.copy.extend_from_slice(pos);
        ws.next.clear();
        ws.next
            .extend_from_slice(&self.starts[..self.starts.len().saturating_sub(1)]);
        for ((o, e), &c) in pieces_of(&self.first, pos.len()).zip(&self.keys) {
            let d = ws.next[c as usize] as usize;
            let (drawn, sorted) = (o..e, d..d + e - o);
            if to_chunks {
                pos[sorted].copy_from_slice(&ws.copy[drawn]);
            } else {
                pos[drawn].copy_from_slice(&ws.copy[sorted]);
            }
            ws.next[c as usize] += (e - o) as u32;
        }
    }

    pub(crate) fn bytes(&self) -> u64 {
        (self.keys.capacity() + self.starts.capacity()) as u64 * 4
            + self.first.capacity() as u64 * 8
    }

    /// At most what [`Self::bytes`] will be once a hop of at most `positions` positions, drawn
    /// for `nodes` nodes, is sorted into `chunks` chunks (a piece per node, plus one per chunk
    /// boundary a node's positions cross).
    pub(crate) fn bytes_for(&self, positions: u64, nodes: u64, chunks: u64) -> u64 {
        let pieces = positions.min(nodes.saturating_add(chunks));
        4 * (self.keys.capacity() as u64).max(pieces)
            + 8 * (self.first.capacity() as u64).max(positions.div_ceil(64))
            + 4 * (self.starts.capacity() as u64).max(chunks + 1)
    }
}

/// The pieces `(start, end)` of `n` positions in draw order, bit `k` of `first` set where one
/// starts (bit 0 is set when `n > 0`).
fn pieces_of(first: &[u64], n: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut set = first.iter().enumerate().flat_map(|(w, &word)| {
        let mut bits = word;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                w * 64 + b
            })
        })
    });
    let mut cur = set.next();
    std::iter::from_fn(move || {
        let o = cur?;
        cur = set.next();
        Some((o, cur.unwrap_or(n)))
    })
}

/// What a thread lends [`Buckets`] to move one batch's positions: a copy of them, and a cursor
/// per chunk.
#[derive(Default)]
pub(crate) struct Workspace<W> {
    copy: Vec<W>,
    next: Vec<u32>,
}

impl<W> Workspace<W> {
    pub(crate) fn bytes(&self) -> u64 {
        (std::mem::size_of::<W>() * self.copy.capacity() + 4 * self.next.capacity()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Sorting by chunk groups every chunk's positions, in draw order, and unsorting gives
        /// back draw order, whatever each position was replaced by in between; the batch keeps
        /// one key per piece. Positions come in runs, as a node's drawn offsets do.
        #[test]
        fn sort_groups_by_chunk_and_unsort_restores_draw_order(
            runs in prop::collection::vec((0u64..1000, 1usize..12), 0..60),
            per_chunk in 1u64..300,
        ) {
            let pos: Vec<u64> = runs
                .iter()
                .flat_map(|&(p, n)| (p..p + n as u64).map(|x| x.min(999)))
                .collect();
            let chunk = Chunking::new(per_chunk);
            let chunks = (1000 / per_chunk + 1) as usize;
            let (mut b, mut ws) = (Buckets::default(), Workspace::default());
            let mut v = pos.clone();
            b.sort(&mut v, chunk, chunks, &mut ws).unwrap();
            prop_assert_eq!(b.starts[chunks] as usize, pos.len());
            let mut want = pos.clone();
            want.sort_by_key(|&p| p / per_chunk);
            prop_assert_eq!(&v, &want);
            for c in 0..chunks {
                for &p in &v[b.starts[c] as usize..b.starts[c + 1] as usize] {
                    prop_assert_eq!((p / per_chunk) as usize, c);
                }
            }
            let pieces = pos.windows(2).filter(|w| w[0] / per_chunk != w[1] / per_chunk).count()
                + usize::from(!pos.is_empty());
            prop_assert_eq!(b.keys.len(), pieces);
            // What reading does: each position replaced by the entry there.
            v.iter_mut().for_each(|x| *x = *x * 3 + 1);
            b.unsort(&mut v, &mut ws);
            let want: Vec<u64> = pos.iter().map(|x| x * 3 + 1).collect();
            prop_assert_eq!(v, want);
        }
    }

    #[test]
    fn chunking_by_shift_and_by_division_agree() {
        for per_chunk in [1u64, 2, 3, 7, 64, 1000, 1 << 18] {
            let c = Chunking::new(per_chunk);
            assert_eq!(c.shift.is_some(), per_chunk.is_power_of_two());
            for p in [0u64, 1, 63, 64, 999, 1 << 20, u32::MAX as u64, 1 << 40] {
                assert_eq!(c.of(p), (p / per_chunk) as usize, "{p} / {per_chunk}");
            }
        }
    }

    #[test]
    fn pieces_are_read_from_their_first_bits() {
        let mut first = vec![0u64; 3];
        for k in [0usize, 5, 63, 64, 130] {
            first[k / 64] |= 1 << (k % 64);
        }
        let got: Vec<_> = pieces_of(&first, 140).collect();
        assert_eq!(got, [(0, 5), (5, 63), (63, 64), (64, 130), (130, 140)]);
        assert_eq!(pieces_of(&[], 0).count(), 0);
    }
}
