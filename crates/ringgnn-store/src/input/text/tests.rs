use super::super::tests::drain;
use super::*;
use flate2::write::GzEncoder;
use flate2::Compression;
use proptest::prelude::*;
use std::io::Write;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Parse `bytes` stored as `name`, reading `read_size` bytes at a time and `max` edges per fill.
fn parse_as(
    name: &str,
    bytes: &[u8],
    num_nodes: Option<u64>,
    read_size: usize,
    max: usize,
) -> Result<Vec<(u64, u64)>> {
    // A fixed directory name per thread keeps messages comparable between calls.
    thread_local!(static DIR: tempfile::TempDir = tempfile::tempdir().unwrap());
    let p = DIR.with(|d| d.path().join(name));
    std::fs::write(&p, bytes).unwrap();
    let mut s = TextEdges::with_read_size(&p, num_nodes, read_size)?;
    let edges = drain(&mut s, max)?;
    let (done, total) = s.position();
    assert_eq!(Some(done), total, "the whole file is consumed");
    Ok(edges)
}

/// Parse with many read sizes (lines straddling blocks everywhere) and chunk sizes; all must agree.
fn parse(text: &str) -> Result<Vec<(u64, u64)>> {
    parse_with(text, None)
}

fn parse_with(text: &str, num_nodes: Option<u64>) -> Result<Vec<(u64, u64)>> {
    let first = parse_as("e.txt", text.as_bytes(), num_nodes, READ_SIZE, usize::MAX);
    for read_size in [1, 2, 3, 5, 7, 16] {
        for max in [1, 2, 1000] {
            let other = parse_as("e.txt", text.as_bytes(), num_nodes, read_size, max);
            assert_eq!(
                format!("{first:?}"),
                format!("{other:?}"),
                "read_size {read_size} max {max}"
            );
        }
    }
    first
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn separators_comments_blank_lines() {
    let text = "# a comment\n% another\n  # indented comment\n\n0 1\n2\t3\n4,5\n6, 7\n8 ,9\n10 \t 11\n\t 12  13\n\n";
    let want = vec![(0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11), (12, 13)];
    assert_eq!(parse(text).unwrap(), want);
    // CRLF everywhere, including blank and comment lines, and a last line without newline.
    let crlf = text.replace('\n', "\r\n");
    assert_eq!(parse(&crlf).unwrap(), want);
    assert_eq!(parse(text.trim_end()).unwrap(), want);
    assert_eq!(parse("0 1\r\n2 3").unwrap(), vec![(0, 1), (2, 3)]);
}

#[test]
fn extra_columns_are_ignored() {
    let text = "0 1 0.5\n2\t3\t7\tlabel\n4,5,1e-3\n6 7 \n8 9\t\r\n10, 11, x\n";
    assert_eq!(
        parse(text).unwrap(),
        vec![(0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11)]
    );
}

#[test]
fn large_ids_leading_zeros_and_bom() {
    let text = "18446744073709551615 0\n0000000000000000000000000042 007\n";
    assert_eq!(parse(text).unwrap(), vec![(u64::MAX, 0), (42, 7)]);
    assert_eq!(parse("\u{feff}1 2\n").unwrap(), vec![(1, 2)]);
    assert_eq!(parse("\u{feff}").unwrap(), vec![]);
}

#[test]
fn no_edges_is_not_an_error() {
    for text in ["", "\n\n", "# only a comment", "% c\r\n\r\n  \n"] {
        assert_eq!(parse(text).unwrap(), vec![], "{text:?}");
    }
}

#[test]
fn malformed_lines_name_file_line_and_text() {
    let e = err("# header\n0 1\n\n2 3\nabc\n4 5\n");
    assert!(
        e.contains("e.txt line 5: expected 2 integer node ids, found 'abc'"),
        "{e}"
    );
    assert!(e.contains("comment lines start with # or %"), "{e}");
    for (bad, shown) in [
        ("7", "7"),
        ("7 ", "7 "),
        ("1.5 2", "1.5 2"),
        ("1 2.5", "1 2.5"),
        ("1 x", "1 x"),
        ("1;2", "1;2"),
        ("1,,2", "1,,2"),
        ("+1 2", "+1 2"),
        ("src,dst", "src,dst"),
        ("1 2\r3 4", "1 2\\r3 4"),
    ] {
        let e = err(&format!("0 0\r\n{bad}\r\n"));
        assert!(
            e.contains(&format!(
                "line 2: expected 2 integer node ids, found '{shown}'"
            )),
            "{bad:?}: {e}"
        );
    }
    let long = format!("{}\n", "x".repeat(200));
    let e = err(&long);
    assert!(
        e.contains(&format!("found '{}...'", "x".repeat(crate::EXCERPT_CHARS))),
        "{e}"
    );
}

/// A file a dataset description named: a fault names the file and the line and quotes no text
/// of it (ids the parser read as numbers are still named).
#[test]
fn withheld_files_quote_no_text() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (text, says)) in [
        (
            "0 1\ns3cr3t:x:0:0\n",
            " line 2: expected 2 integer node ids;",
        ),
        ("0 1\n12 s3cr3t\n", " line 2: expected 2 integer node ids;"),
        (
            "%%MatrixMarket s3cr3t x\n0 1\n",
            ": a Matrix Market file is not a list of edges",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let p = dir.path().join(format!("{i}.csv"));
        std::fs::write(&p, text).unwrap();
        let mut s = TextEdges::open(&p, None, Excerpts::Withhold).unwrap();
        let e = drain(&mut s, 10).unwrap_err().to_string();
        assert!(!e.contains("s3cr3t"), "{text}: {e}");
        assert!(
            e.starts_with(&format!("{}{says}", p.display())),
            "{text}: {e}"
        );
        if says.starts_with(" line") {
            assert!(e.ends_with(WITHHELD), "{e}");
        }
        // The same file named by the user is quoted.
        let mut s = TextEdges::open(&p, None, Excerpts::Quote).unwrap();
        let e = drain(&mut s, 10).unwrap_err().to_string();
        assert!(e.contains("s3cr3t"), "{text}: {e}");
    }
}

#[test]
fn negative_and_overflowing_ids() {
    let e = err("0 1\n-3 4\n");
    assert!(
        e.contains("e.txt line 2: negative node id -3; node ids must be >= 0"),
        "{e}"
    );
    let e = err("0 1\n\n3, -12\n");
    assert!(e.contains("line 3: negative node id -12"), "{e}");
    let e = err("18446744073709551616 1\n");
    assert!(
        e.contains(
            "line 1: node id 18446744073709551616 is too large; node ids must be below 2^64"
        ),
        "{e}"
    );
    let e = err("1 99999999999999999999999\n");
    assert!(
        e.contains("node id 99999999999999999999999 is too large"),
        "{e}"
    );
}

#[test]
fn ids_at_or_above_num_nodes() {
    assert_eq!(
        parse_with("0 9\n9 0\n", Some(10)).unwrap(),
        vec![(0, 9), (9, 0)]
    );
    let e = parse_with("0 9\n# c\n12 3\n", Some(10))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("e.txt line 3: node id 12 is >= --num-nodes 10"),
        "{e}"
    );
    let e = parse_with("0 10\n", Some(10)).unwrap_err().to_string();
    assert!(e.contains("line 1: node id 10 is >= --num-nodes 10"), "{e}");
}

#[test]
fn an_error_is_reported_again_on_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("e.txt");
    std::fs::write(&p, "0 1\n2 3\nbad\n").unwrap();
    let mut s = TextEdges::open(&p, None, Excerpts::Quote).unwrap();
    let mut out = Vec::new();
    let e1 = s.fill(&mut out, 10).unwrap_err().to_string();
    let e2 = s.fill(&mut out, 10).unwrap_err().to_string();
    assert!(e1.contains("line 3"), "{e1}");
    assert_eq!(e1, e2);
}

#[test]
fn binary_data_as_text_fails_fast() {
    let mut bytes = b"0 1\n".to_vec();
    bytes.extend(std::iter::repeat_n(0xffu8, 3 * MAX_LINE));
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("e.txt");
    std::fs::write(&p, &bytes).unwrap();
    let mut s = TextEdges::with_read_size(&p, None, 1 << 16).unwrap();
    let e = drain(&mut s, 10).unwrap_err().to_string();
    assert!(e.contains("line 2: the line is longer than 1 MiB"), "{e}");
}

#[test]
fn gzip_single_and_multi_member() {
    let text = "# c\n0 1\n2 3\n";
    let one = gzip(text.as_bytes());
    let mut two = one.clone();
    two.extend(gzip(b"4 5\n6 7"));
    for (name, bytes, want) in [
        ("e.tsv.gz", &one, vec![(0, 1), (2, 3)]),
        // Detected by magic, not by name.
        ("e.tsv", &one, vec![(0, 1), (2, 3)]),
        ("e.gz", &two, vec![(0, 1), (2, 3), (4, 5), (6, 7)]),
    ] {
        for read_size in [1, 3, READ_SIZE] {
            assert_eq!(
                parse_as(name, bytes, None, read_size, 1).unwrap(),
                want,
                "{name}"
            );
        }
    }
    // Line numbers count decompressed lines.
    let e = parse_as("e.gz", &gzip(b"0 1\n\nx y\n"), None, 4, 10)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("e.gz line 3: expected 2 integer node ids, found 'x y'"),
        "{e}"
    );
}

#[test]
fn corrupt_gzip_is_bad_input() {
    let mut bytes = gzip("0 1\n".repeat(1000).as_bytes());
    bytes.truncate(bytes.len() / 2);
    let e = parse_as("e.gz", &bytes, None, READ_SIZE, 10).unwrap_err();
    assert!(matches!(e, Error::Input(_)), "{e:?}");
    assert!(
        e.to_string().contains("gzip data is corrupt or truncated"),
        "{e}"
    );
}

#[test]
fn matrix_market_coordinate() {
    let text = "%%MatrixMarket matrix coordinate real general\n% comment\n%\n3 3 4\n1 2 0.5\n3 1 1.0\n2 2 2\n3 3 1\n";
    assert_eq!(parse(text).unwrap(), vec![(0, 1), (2, 0), (1, 1), (2, 2)]);
    assert_eq!(
        parse("%%matrixmarket MATRIX Coordinate pattern symmetric\r\n2 2 1\r\n2 1\r\n").unwrap(),
        vec![(1, 0)]
    );
    let e = parse_with(&text.replace("3 1 1.0", "4 1 1.0"), Some(3))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 6: node id 4 is > --num-nodes 3 (Matrix Market ids start at 1)"),
        "{e}"
    );
    let e = err(&text.replace("3 1 1.0", "0 1 1.0"));
    assert!(
        e.contains("line 6: node id 0 in a Matrix Market file"),
        "{e}"
    );
    let e = err("%%MatrixMarket matrix array real general\n2 2\n1.0\n");
    assert!(
        e.contains("'matrix array' file is not a list of edges"),
        "{e}"
    );
    // Without the header, '%' lines are plain comments and ids are 0-based.
    assert_eq!(parse("% x\n0 1\n").unwrap(), vec![(0, 1)]);
}

/// How one line of a generated file is written.
#[derive(Clone, Debug)]
struct Style {
    lead: &'static str,
    sep: &'static str,
    extra: &'static str,
    eol: &'static str,
    noise: &'static str,
}

fn style() -> impl Strategy<Value = Style> {
    (
        prop::sample::select(vec!["", " ", "\t", " \t "]),
        prop::sample::select(vec![" ", "\t", ",", ", ", " , ", "  \t"]),
        prop::sample::select(vec!["", " 1.5", "\tw", ",3", " "]),
        prop::sample::select(vec!["\n", "\r\n"]),
        prop::sample::select(vec!["", "", "", "\n", "# c\n", "  % c 1 2\r\n", "\r\n"]),
    )
        .prop_map(|(lead, sep, extra, eol, noise)| Style {
            lead,
            sep,
            extra,
            eol,
            noise,
        })
}

fn render(edges: &[(u64, u64)], styles: &[Style]) -> String {
    let mut s = String::new();
    for (&(a, b), st) in edges.iter().zip(styles.iter().cycle()) {
        s.push_str(st.noise);
        s.push_str(&format!(
            "{}{a}{}{b}{}{}",
            st.lead, st.sep, st.extra, st.eol
        ));
    }
    s
}

proptest! {
    #[test]
    fn roundtrip_any_style_block_and_chunking(
        edges in prop::collection::vec((any::<u64>(), prop::num::u64::ANY.prop_map(|x| x % 1000)), 0..60),
        styles in prop::collection::vec(style(), 1..8),
        read_size in 1usize..64,
        max in 1usize..20,
        gz in any::<bool>(),
        trim_last_eol in any::<bool>(),
    ) {
        let mut text = render(&edges, &styles);
        if trim_last_eol {
            text = text.trim_end_matches(['\r', '\n']).to_string();
        }
        let bytes = if gz { gzip(text.as_bytes()) } else { text.into_bytes() };
        prop_assert_eq!(parse_as("e.txt", &bytes, None, read_size, max).unwrap(), edges);
    }

    #[test]
    fn bad_line_reports_its_number(
        edges in prop::collection::vec((0u64..100, 0u64..100), 1..40),
        styles in prop::collection::vec(style(), 1..8),
        at in any::<prop::sample::Index>(),
        read_size in 1usize..64,
    ) {
        let text = render(&edges, &styles);
        let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
        let k = at.index(lines.len() + 1);
        lines.insert(k, "oops\n");
        let text = lines.concat();
        let e = parse_as("e.txt", text.as_bytes(), None, read_size, 3).unwrap_err().to_string();
        let want = format!("e.txt line {}: expected 2 integer node ids, found 'oops'", k + 1);
        prop_assert!(e.contains(&want), "{} / {}", e, want);
    }
}
