//! NumPy `.npy` edge arrays: shape (2, E) (row 0 sources, row 1 destinations) or (E, 2) (one
//! edge per row), dtype int32, int64, uint32 or uint64, C or Fortran order.
//!
//! Of the four (shape, order) combinations, two store all sources then all destinations
//! ((2, E) C-order and (E, 2) F-order): those are streamed with two cursors, one per half. The
//! other two store interleaved pairs and stream like a binary edge list.

use std::path::{Path, PathBuf};

use super::binary::{Cursor, BLOCK};
use super::source::{check_limit, EdgeSource};
use crate::npy::{read_header, NpyHeader};
use crate::{Error, IoContext, Result};

const DTYPES: &[&str] = &["int32", "int64", "uint32", "uint64"];

/// Element type of the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Elem {
    I32,
    I64,
    U32,
    U64,
}

impl Elem {
    fn size(self) -> usize {
        match self {
            Elem::I32 | Elem::U32 => 4,
            Elem::I64 | Elem::U64 => 8,
        }
    }
}

/// How the edges lie in the data section.
enum Layout {
    /// src0 dst0 src1 dst1 ...
    Interleaved(Cursor),
    /// src0 src1 ... then dst0 dst1 ...
    Split { src: Cursor, dst: Cursor },
}

/// A `.npy` edge array, validated at open.
pub struct NpyEdges {
    path: PathBuf,
    elem: Elem,
    layout: Layout,
    data_offset: u64,
    file_len: u64,
    done: u64,
    limit: Option<u64>,
}

impl NpyEdges {
    pub fn open(path: &Path, num_nodes: Option<u64>) -> Result<NpyEdges> {
        Self::with_block(path, num_nodes, BLOCK)
    }

    /// Like [`NpyEdges::open`] with reads of `block` bytes (tests use tiny blocks).
    fn with_block(path: &Path, num_nodes: Option<u64>, block: usize) -> Result<NpyEdges> {
        let h = read_header(path)?;
        h.expect_dtype(DTYPES, "the edge array")?;
        let elem = match h.dtype.name().as_str() {
            "int32" => Elem::I32,
            "int64" => Elem::I64,
            "uint32" => Elem::U32,
            _ => Elem::U64,
        };
        let (edges, split) = edge_layout(&h)?;
        let half = edges * elem.size() as u64;
        let layout = if split {
            Layout::Split {
                src: Cursor::open(path, h.data_offset, half, block / 2)?,
                dst: Cursor::open(path, h.data_offset + half, half, block / 2)?,
            }
        } else {
            Layout::Interleaved(Cursor::open(path, h.data_offset, 2 * half, block)?)
        };
        Ok(NpyEdges {
            path: path.to_path_buf(),
            elem,
            layout,
            data_offset: h.data_offset,
            file_len: h.data_offset + 2 * half,
            done: 0,
            limit: num_nodes,
        })
    }
}

/// The edge count and whether sources and destinations are two separate runs.
///
/// Shape (2, 2) is ambiguous; it is read as (E, 2), one edge per row, like any other (E, 2).
fn edge_layout(h: &NpyHeader) -> Result<(u64, bool)> {
    match h.shape[..] {
        [e, 2] => Ok((e, h.fortran_order)),
        [2, e] => Ok((e, !h.fortran_order)),
        _ => {
            let shape = h
                .shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let shape = if h.shape.len() == 1 {
                format!("({shape},)")
            } else {
                format!("({shape})")
            };
            Err(Error::Input(format!(
                "{}: the edge array has shape {shape}; accepted shapes are (2, E) (row 0 = sources, row 1 = destinations) and (E, 2) (one edge per row)",
                h.path.display()
            )))
        }
    }
}

/// Decode one little-endian element, sign-extended for signed types; a negative value comes out
/// as a u64 with the top bit set, which `decode` checks for.
#[inline(always)]
fn get(elem: Elem, b: &[u8]) -> u64 {
    match elem {
        Elem::I32 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])) as u64,
        Elem::U32 => u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Elem::I64 | Elem::U64 => {
            u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
        }
    }
}

/// Append the edges of `src`/`dst` element runs (or of `src` alone holding pairs, when `dst` is
/// None). Inlined into [`decode`]'s arms with a constant `elem`, so the loop has no dispatch.
#[inline(always)]
fn decode_into(elem: Elem, src: &[u8], dst: Option<&[u8]>, out: &mut Vec<(u64, u64)>) {
    let size = elem.size();
    match dst {
        Some(dst) => out.extend(
            src.chunks_exact(size)
                .zip(dst.chunks_exact(size))
                .map(|(s, d)| (get(elem, s), get(elem, d))),
        ),
        None => out.extend(
            src.chunks_exact(2 * size)
                .map(|p| (get(elem, &p[..size]), get(elem, &p[size..]))),
        ),
    }
}

fn decode(elem: Elem, src: &[u8], dst: Option<&[u8]>, out: &mut Vec<(u64, u64)>) {
    match elem {
        Elem::I32 => decode_into(Elem::I32, src, dst, out),
        Elem::I64 => decode_into(Elem::I64, src, dst, out),
        Elem::U32 => decode_into(Elem::U32, src, dst, out),
        Elem::U64 => decode_into(Elem::U64, src, dst, out),
    }
}

impl NpyEdges {
    /// Decode up to `max` edges; returns how many (0 at the end).
    fn next_batch(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<usize> {
        let size = self.elem.size();
        match &mut self.layout {
            Layout::Interleaved(c) => {
                let pairs = c.units(2 * size, max).at(&self.path)?;
                decode(self.elem, pairs, None, out);
                let used = pairs.len();
                c.consume(used);
                let k = used / (2 * size);
                Ok(k)
            }
            Layout::Split { src, dst } => {
                let s = src.units(size, max).at(&self.path)?;
                let d = dst.units(size, max).at(&self.path)?;
                let k = (s.len() / size).min(d.len() / size);
                decode(self.elem, &s[..k * size], Some(&d[..k * size]), out);
                src.consume(k * size);
                dst.consume(k * size);
                Ok(k)
            }
        }
    }
}

impl EdgeSource for NpyEdges {
    fn fill(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<usize> {
        let signed = matches!(self.elem, Elem::I32 | Elem::I64);
        let mut n = 0;
        while n < max {
            let start = out.len();
            let k = self.next_batch(out, max - n)?;
            if k == 0 {
                break;
            }
            let batch = &out[start..];
            if signed && batch.iter().fold(0u64, |m, &(s, d)| m | s | d) >> 63 != 0 {
                let (i, v) = batch
                    .iter()
                    .enumerate()
                    .find_map(|(i, &(s, d))| {
                        [s, d]
                            .into_iter()
                            .find(|&v| (v as i64) < 0)
                            .map(|v| (i, v as i64))
                    })
                    .unwrap_or_default();
                out.truncate(start);
                return crate::input_err!(
                    "{}: edge {} (0-based) has a negative node id {v}; node ids must be >= 0",
                    self.path.display(),
                    self.done + i as u64
                );
            }
            check_limit(out, start, self.limit, &self.path, self.done)?;
            self.done += k as u64;
            n += k;
        }
        Ok(n)
    }

    fn position(&self) -> (u64, Option<u64>) {
        let done = self.data_offset + self.done * 2 * self.elem.size() as u64;
        (done, Some(self.file_len))
    }

    fn unit(&self) -> &'static str {
        "B"
    }

    fn ids_fit_u32(&self) -> bool {
        matches!(self.elem, Elem::I32 | Elem::U32)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::drain;
    use super::*;
    use crate::npy::write_npy;
    use proptest::prelude::*;

    const DESCRS: [(&str, Elem); 4] = [
        ("<i4", Elem::I32),
        ("<i8", Elem::I64),
        ("<u4", Elem::U32),
        ("<u8", Elem::U64),
    ];

    fn le(elem: Elem, v: u64) -> Vec<u8> {
        match elem.size() {
            4 => (v as u32).to_le_bytes().to_vec(),
            _ => v.to_le_bytes().to_vec(),
        }
    }

    /// Write `edges` as shape (2, E) when `two_by_e`, else (E, 2), in C or Fortran order. Two
    /// edges are always (E, 2): (2, 2) reads as one edge per row.
    fn write(
        path: &Path,
        descr: &str,
        elem: Elem,
        edges: &[(u64, u64)],
        two_by_e: bool,
        fortran: bool,
    ) {
        let e = edges.len() as u64;
        let two_by_e = two_by_e && e != 2;
        // Sources-then-destinations or interleaved, per the module doc.
        let split = two_by_e != fortran;
        let values: Vec<u64> = if split {
            edges
                .iter()
                .map(|p| p.0)
                .chain(edges.iter().map(|p| p.1))
                .collect()
        } else {
            edges.iter().flat_map(|&(s, d)| [s, d]).collect()
        };
        let data: Vec<u8> = values.into_iter().flat_map(|v| le(elem, v)).collect();
        let shape = if two_by_e { [2, e] } else { [e, 2] };
        write_npy(path, descr, &shape, fortran, &data).unwrap();
    }

    #[test]
    fn every_shape_order_and_dtype() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.npy");
        let edges = vec![(0, 1), (2, 3), (4, 5), (1, 0), (7, 7)];
        for (descr, elem) in DESCRS {
            for two_by_e in [false, true] {
                for fortran in [false, true] {
                    write(&p, descr, elem, &edges, two_by_e, fortran);
                    let mut s = NpyEdges::with_block(&p, None, 16).unwrap();
                    let what = format!("{descr} two_by_e={two_by_e} fortran={fortran}");
                    assert_eq!(s.ids_fit_u32(), elem.size() == 4, "{what}");
                    assert_eq!(drain(&mut s, 2).unwrap(), edges, "{what}");
                    let (done, total) = s.position();
                    assert_eq!(Some(done), total, "{what}");
                    assert_eq!(total, Some(std::fs::metadata(&p).unwrap().len()));
                }
            }
        }
    }

    #[test]
    fn two_by_two_is_one_edge_per_row() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.npy");
        let data: Vec<u8> = [1u32, 2, 3, 4]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        write_npy(&p, "<u4", &[2, 2], false, &data).unwrap();
        assert_eq!(
            drain(&mut NpyEdges::open(&p, None).unwrap(), 5).unwrap(),
            vec![(1, 2), (3, 4)]
        );
    }

    #[test]
    fn large_ids_and_empty_arrays() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.npy");
        let edges = vec![(u64::MAX, 0), (1 << 40, 3), (5, u64::MAX - 1)];
        write(&p, "<u8", Elem::U64, &edges, true, false);
        assert_eq!(
            drain(&mut NpyEdges::open(&p, None).unwrap(), 5).unwrap(),
            edges
        );
        for shape in [[0, 2], [2, 0]] {
            write_npy(&p, "<i8", &shape, false, &[]).unwrap();
            assert_eq!(
                drain(&mut NpyEdges::open(&p, Some(0)).unwrap(), 5).unwrap(),
                vec![]
            );
        }
    }

    #[test]
    fn wrong_dtype_or_shape() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.npy");
        write_npy(&p, "<f4", &[2, 3], false, &[0; 24]).unwrap();
        let e = NpyEdges::open(&p, None).err().unwrap().to_string();
        assert!(e.contains("found float32"), "{e}");
        assert!(e.contains("int32 or int64 or uint32 or uint64"), "{e}");
        write_npy(&p, "<i2", &[2, 3], false, &[0; 12]).unwrap();
        assert!(NpyEdges::open(&p, None)
            .err()
            .unwrap()
            .to_string()
            .contains("found int16"));
        for (shape, shown) in [
            (&[3u64, 4][..], "(3, 4)"),
            (&[8], "(8,)"),
            (&[2, 2, 2], "(2, 2, 2)"),
        ] {
            write_npy(
                &p,
                "<i8",
                shape,
                false,
                &vec![0; 8 * shape.iter().product::<u64>() as usize],
            )
            .unwrap();
            let e = NpyEdges::open(&p, None).err().unwrap().to_string();
            assert!(
                e.contains(&format!("shape {shown}; accepted shapes are (2, E)")),
                "{e}"
            );
        }
    }

    #[test]
    fn negative_ids_name_the_edge() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.npy");
        for (descr, elem) in [("<i4", Elem::I32), ("<i8", Elem::I64)] {
            for two_by_e in [false, true] {
                let mut edges: Vec<(u64, u64)> = (0..40).map(|i| (i, i + 1)).collect();
                edges[33].1 = -3i64 as u64;
                write(&p, descr, elem, &edges, two_by_e, false);
                let e = drain(&mut NpyEdges::with_block(&p, None, 32).unwrap(), 10)
                    .unwrap_err()
                    .to_string();
                assert!(
                    e.contains(
                        "edge 33 (0-based) has a negative node id -3; node ids must be >= 0"
                    ),
                    "{e}"
                );
            }
        }
    }

    #[test]
    fn id_at_or_above_num_nodes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.npy");
        write(
            &p,
            "<u4",
            Elem::U32,
            &[(0, 1), (1, 2), (12, 0)],
            false,
            true,
        );
        let e = drain(&mut NpyEdges::open(&p, Some(10)).unwrap(), 10)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("edge 2 (0-based) has node id 12, which is >= --num-nodes 10"),
            "{e}"
        );
    }

    proptest! {
        #[test]
        fn roundtrip_any_chunking(
            edges in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..100),
            dtype in 0usize..4,
            two_by_e in any::<bool>(),
            fortran in any::<bool>(),
            max in 1usize..40,
            block in 1usize..80,
        ) {
            let (descr, elem) = DESCRS[dtype];
            let mask = match elem {
                Elem::I32 => i32::MAX as u64,
                Elem::U32 => u32::MAX as u64,
                Elem::I64 => i64::MAX as u64,
                Elem::U64 => u64::MAX,
            };
            let edges: Vec<(u64, u64)> = edges.into_iter().map(|(s, d)| (s & mask, d & mask)).collect();
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("e.npy");
            write(&p, descr, elem, &edges, two_by_e, fortran);
            let mut s = NpyEdges::with_block(&p, None, block).unwrap();
            prop_assert_eq!(drain(&mut s, max).unwrap(), edges);
        }
    }
}
