//! `convert` end to end: random small graphs written in every input format, converted with
//! every option combination, must give exactly the CSC of an in-memory reference.

use std::io::Write;
use std::path::Path;

use proptest::prelude::*;
use ringgnn_store::input::InputFormat;
use ringgnn_store::{convert, ConvertOptions, Dataset, GraphOptions, NoProgress, SelfLoops};

#[derive(Clone, Copy, Debug)]
enum Written {
    Tsv,
    Csv,
    SpacesWithComments,
    Gz,
    Bin32,
    Bin64,
    /// (2, E) int64, C order.
    NpyRows,
    /// (E, 2) uint32, C order.
    NpyPairs,
    /// (E, 2) int32, Fortran order (two contiguous columns).
    NpyFortran,
}

const ALL: [Written; 9] = [
    Written::Tsv,
    Written::Csv,
    Written::SpacesWithComments,
    Written::Gz,
    Written::Bin32,
    Written::Bin64,
    Written::NpyRows,
    Written::NpyPairs,
    Written::NpyFortran,
];

fn write_input(dir: &Path, how: Written, edges: &[(u64, u64)]) -> std::path::PathBuf {
    let text = |sep: &str| -> String {
        edges
            .iter()
            .map(|(a, b)| format!("{a}{sep}{b}\n"))
            .collect()
    };
    let le = |v: Vec<u64>, w: usize| -> Vec<u8> {
        v.into_iter()
            .flat_map(|x| x.to_le_bytes()[..w].to_vec())
            .collect()
    };
    let flat: Vec<u64> = edges.iter().flat_map(|&(a, b)| [a, b]).collect();
    let cols: Vec<u64> = edges
        .iter()
        .map(|e| e.0)
        .chain(edges.iter().map(|e| e.1))
        .collect();
    let n = edges.len() as u64;
    let (name, bytes) = match how {
        Written::Tsv => ("e.tsv", text("\t").into_bytes()),
        Written::Csv => ("e.csv", text(",").into_bytes()),
        Written::SpacesWithComments => (
            "e.txt",
            format!("# header\n% another\n\n{}", text("   ")).into_bytes(),
        ),
        Written::Gz => {
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(text("\t").as_bytes()).unwrap();
            ("e.tsv.gz", z.finish().unwrap())
        }
        Written::Bin32 => ("e.bin32", le(flat, 4)),
        Written::Bin64 => ("e.bin64", le(flat, 8)),
        Written::NpyRows => {
            let p = dir.join("e.npy");
            // A (2, 2) array is read as (E, 2), one edge per row (ARCHITECTURE.md): with two
            // edges, write the pairs, which is what that shape means.
            let data = if n == 2 { flat } else { cols };
            ringgnn_store::npy::write_npy(&p, "<i8", &[2, n], false, &le(data, 8)).unwrap();
            return p;
        }
        Written::NpyPairs => {
            let p = dir.join("e.npy");
            ringgnn_store::npy::write_npy(&p, "<u4", &[n, 2], false, &le(flat, 4)).unwrap();
            return p;
        }
        Written::NpyFortran => {
            let p = dir.join("e.npy");
            ringgnn_store::npy::write_npy(&p, "<i4", &[n, 2], true, &le(cols, 4)).unwrap();
            return p;
        }
    };
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn reference(edges: &[(u64, u64)], g: &GraphOptions) -> Vec<Vec<u64>> {
    let n = g
        .num_nodes
        .unwrap_or_else(|| edges.iter().map(|&(a, b)| a.max(b) + 1).max().unwrap_or(0));
    let mut lists = vec![Vec::new(); n as usize];
    for &(s, d) in edges {
        if s == d && g.self_loops == SelfLoops::Drop {
            continue;
        }
        lists[d as usize].push(s);
        if g.undirected && s != d {
            lists[s as usize].push(d);
        }
    }
    for l in &mut lists {
        l.sort_unstable();
        if g.dedup {
            l.dedup();
        }
    }
    lists
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn every_format_and_option_matches_reference(
        edges in prop::collection::vec((0u64..30, 0u64..30), 1..120),
        how in 0usize..ALL.len(),
        undirected: bool, drop: bool, dedup: bool, extra in prop::option::of(0u64..4),
        threads in 1usize..3,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let input = write_input(dir.path(), ALL[how], &edges);
        let max = edges.iter().map(|&(a, b)| a.max(b) + 1).max().unwrap();
        let graph = GraphOptions {
            undirected,
            self_loops: if drop { SelfLoops::Drop } else { SelfLoops::Keep },
            dedup,
            num_nodes: extra.map(|x| max + x),
            memory: 128 << 20,
            threads,
            ..Default::default()
        };
        let opts = ConvertOptions {
            format: if matches!(ALL[how], Written::Bin32) { Some(InputFormat::Bin32) } else { None },
            ..ConvertOptions::new(input, dir.path().join("ds"), graph.clone())
        };
        let m = convert(&opts, &NoProgress).unwrap();
        let want = reference(&edges, &graph);
        prop_assert_eq!(m.num_nodes, want.len() as u64);
        prop_assert_eq!(m.num_edges, want.iter().map(|l| l.len() as u64).sum::<u64>());
        let ds = Dataset::open(&dir.path().join("ds")).unwrap();
        for (v, l) in want.iter().enumerate() {
            prop_assert_eq!(&ds.neighbors(v as u64).unwrap(), l, "node {} ({:?})", v, ALL[how]);
        }
    }
}
