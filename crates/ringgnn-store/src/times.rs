//! Edge and node times (docs/FORMAT.md "Times"): where a build's times come from, an `.npy`
//! file ([`NpyTimes`]) or a generator's rule ([`TimeGen`], drawn by [`GeneratedTimes`]), how
//! they travel beside the edges into the builder ([`Timed`], one time per input edge, in input
//! order), and the node times file ([`attach_node_times`]). The builder orders each neighbor list
//! by (time, source) and writes `edge_times.bin` ([`crate::builder`]).

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::input::EdgeSource;
use crate::manifest::TimeRange;
use crate::npy::{read_header, NpyHeader};
use crate::options::{TimeGen, TimeInput, TimeOptions, PURPOSE_EDGE_TIMES, PURPOSE_NODE_TIMES};
use crate::writer::Staging;
use crate::{input_err, Error, IoContext, Result};

pub const EDGE_TIMES_FILE: &str = "edge_times.bin";
pub const NODE_TIMES_FILE: &str = "node_times.bin";

/// A time as an unsigned sort key: the sign bit flipped, so keys order as the int64 times do.
#[inline]
pub fn to_key(t: i64) -> u64 {
    (t as u64) ^ (1 << 63)
}

/// The time of a sort key made by [`to_key`].
#[inline]
pub fn from_key(k: u64) -> i64 {
    (k ^ (1 << 63)) as i64
}

/// Times of consecutive edges (or nodes), in input order.
pub trait TimeSource: Send {
    /// Append the next `n` times to `out`; returns how many (fewer only at the end).
    fn fill(&mut self, out: &mut Vec<i64>, n: usize) -> Result<usize>;
    /// Start again from the first time.
    fn rewind(&mut self) -> Result<()>;
    /// How many times there are, when fixed in advance (a file's length).
    fn count(&self) -> Option<u64>;
    /// How messages name the times (`--edge-time t.npy`).
    fn name(&self) -> String;
}

/// Times read from a 1-D int64 (or int32, widened) `.npy` file.
pub struct NpyTimes {
    header: NpyHeader,
    option: &'static str,
    reader: BufReader<File>,
    done: u64,
    raw: Vec<u8>,
}

impl NpyTimes {
    /// Open `path` as the times of `option` (`--edge-time`, `--node-time`), one per `what`
    /// ("input edge", "node"); a missing file, another dtype or shape is a clear error.
    pub fn open(path: &Path, option: &'static str, what: &str) -> Result<Self> {
        Error::must_exist(path, format!("{option} file not found"))?;
        // read_header names the file; which option gave it is said here, as the checks below do.
        let header = read_header(path).map_err(|e| match e {
            Error::Input(m) => Error::Input(format!("{option} {m}")),
            e => e,
        })?;
        if header.shape.len() != 1 {
            return input_err!(
                "{}: {option} must be a 1-D array with one time per {what}, found shape {:?}; flatten it with t.ravel()",
                path.display(),
                header.shape
            );
        }
        header.expect_dtype(&["int64", "int32"], option)?;
        let mut s = NpyTimes {
            reader: BufReader::with_capacity(1 << 20, File::open(path).at(path)?),
            header,
            option,
            done: 0,
            raw: Vec::new(),
        };
        s.rewind()?;
        Ok(s)
    }
}

impl TimeSource for NpyTimes {
    fn fill(&mut self, out: &mut Vec<i64>, n: usize) -> Result<usize> {
        let size = self.header.dtype.size as usize;
        let k = (n as u64).min(self.header.len() - self.done) as usize;
        self.raw.resize(k * size, 0);
        let path = &self.header.path;
        self.reader.read_exact(&mut self.raw).at(path)?;
        if size == 8 {
            out.extend(
                self.raw
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap())),
            );
        } else {
            out.extend(
                self.raw
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64),
            );
        }
        self.done += k as u64;
        Ok(k)
    }
    fn rewind(&mut self) -> Result<()> {
        let path = &self.header.path;
        self.reader
            .seek(SeekFrom::Start(self.header.data_offset))
            .at(path)?;
        self.done = 0;
        Ok(())
    }
    fn count(&self) -> Option<u64> {
        Some(self.header.len())
    }
    fn name(&self) -> String {
        format!("{} {}", self.option, self.header.path.display())
    }
}

/// The edge times a [`TimeGen`] draws, as a [`TimeSource`] of unbounded length.
pub struct GeneratedTimes {
    gen: TimeGen,
    next: u64,
}

impl GeneratedTimes {
    pub fn new(gen: TimeGen) -> Self {
        GeneratedTimes { gen, next: 0 }
    }
}

impl TimeSource for GeneratedTimes {
    fn fill(&mut self, out: &mut Vec<i64>, n: usize) -> Result<usize> {
        let first = self.next;
        out.extend((first..first + n as u64).map(|i| self.gen.at(PURPOSE_EDGE_TIMES, i)));
        self.next += n as u64;
        Ok(n)
    }
    fn rewind(&mut self) -> Result<()> {
        self.next = 0;
        Ok(())
    }
    fn count(&self) -> Option<u64> {
        None
    }
    fn name(&self) -> String {
        "--edge-time".into()
    }
}

/// An edge stream with one time per edge: the builder takes its edges with
/// [`EdgeSource::fill_timed`]. A count of times that differs from the count of edges is an
/// error naming both.
pub struct Timed<'a> {
    edges: &'a mut dyn EdgeSource,
    times: Box<dyn TimeSource>,
    /// How messages name the edges (the input file).
    input: String,
    seen: u64,
    scratch: Vec<(u64, u64)>,
}

impl<'a> Timed<'a> {
    pub fn new(edges: &'a mut dyn EdgeSource, times: Box<dyn TimeSource>, input: String) -> Self {
        Timed {
            edges,
            times,
            input,
            seen: 0,
            scratch: Vec::new(),
        }
    }

    /// The error for `times` times against `edges` edges.
    fn mismatch<T>(&self, times: String, edges: u64) -> Result<T> {
        input_err!(
            "{} has {times} times but {} has {edges} edges; give one time per input edge, in input order",
            self.times.name(),
            self.input
        )
    }
}

impl EdgeSource for Timed<'_> {
    fn fill(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<usize> {
        self.edges.fill(out, max)
    }
    fn fill_timed(
        &mut self,
        out: &mut Vec<(u64, u64)>,
        times: &mut Vec<i64>,
        max: usize,
    ) -> Result<usize> {
        let n = self.edges.fill(out, max)?;
        let got = self.times.fill(times, n)?;
        if got < n {
            // The times ran out: count the rest of the edges for the message.
            let mut edges = self.seen + n as u64;
            loop {
                self.scratch.clear();
                let k = self.edges.fill(&mut self.scratch, 1 << 16)?;
                if k == 0 {
                    break;
                }
                edges += k as u64;
            }
            return self.mismatch((self.seen + got as u64).to_string(), edges);
        }
        if n == 0 {
            if let Some(len) = self.times.count().filter(|&l| l != self.seen) {
                return self.mismatch(len.to_string(), self.seen);
            }
        }
        self.seen += n as u64;
        Ok(n)
    }
    fn timed(&self) -> bool {
        true
    }
    fn position(&self) -> (u64, Option<u64>) {
        self.edges.position()
    }
    fn unit(&self) -> &'static str {
        self.edges.unit()
    }
    fn ids_fit_u32(&self) -> bool {
        self.edges.ids_fit_u32()
    }
    fn rewind(&mut self) -> Result<bool> {
        if !self.edges.rewind()? {
            return Ok(false);
        }
        self.times.rewind()?;
        self.seen = 0;
        Ok(true)
    }
}

/// Write `node_times.bin` from `times` (one per node, `num_nodes` of them) and return its range
/// (None for a graph without nodes, then no file is written).
pub fn write_node_times(
    staging: &mut Staging,
    times: &mut dyn TimeSource,
    num_nodes: u64,
) -> Result<Option<TimeRange>> {
    if let Some(len) = times.count().filter(|&l| l != num_nodes) {
        return input_err!(
            "{} has {len} times but the graph has {num_nodes} nodes; give one time per node, or pass --num-nodes {len} if that is the true node count",
            times.name()
        );
    }
    if num_nodes == 0 {
        return Ok(None);
    }
    let mut w = staging.writer(NODE_TIMES_FILE)?;
    let (mut buf, mut range, mut done) = (Vec::new(), None, 0u64);
    while done < num_nodes {
        buf.clear();
        let k = times.fill(&mut buf, (num_nodes - done).min(1 << 16) as usize)?;
        range = TimeRange::union(range, TimeRange::of(&buf));
        w.write_i64s(&buf)?;
        done += k as u64;
    }
    staging.add("node_times", w.finish()?);
    Ok(range)
}

/// A generator's node times: `gen`'s rule over the node ids.
fn generate_node_times(
    staging: &mut Staging,
    gen: TimeGen,
    num_nodes: u64,
) -> Result<Option<TimeRange>> {
    struct Nodes(TimeGen, u64);
    impl TimeSource for Nodes {
        fn fill(&mut self, out: &mut Vec<i64>, n: usize) -> Result<usize> {
            let first = self.1;
            out.extend((first..first + n as u64).map(|i| self.0.at(PURPOSE_NODE_TIMES, i)));
            self.1 += n as u64;
            Ok(n)
        }
        fn rewind(&mut self) -> Result<()> {
            self.1 = 0;
            Ok(())
        }
        fn count(&self) -> Option<u64> {
            None
        }
        fn name(&self) -> String {
            "--node-time".into()
        }
    }
    write_node_times(staging, &mut Nodes(gen, 0), num_nodes)
}

/// The edge times `input` gives, as a stream.
pub fn edge_times(input: &TimeInput) -> Result<Box<dyn TimeSource>> {
    Ok(match input {
        TimeInput::File(p) => Box::new(NpyTimes::open(p, "--edge-time", "input edge")?),
        TimeInput::Generated(g) => Box::new(GeneratedTimes::new(*g)),
    })
}

/// Write the node times `input` gives for `num_nodes` nodes (see [`write_node_times`]).
pub fn attach_node_times(
    staging: &mut Staging,
    input: &TimeInput,
    num_nodes: u64,
) -> Result<Option<TimeRange>> {
    match input {
        TimeInput::File(p) => write_node_times(
            staging,
            &mut NpyTimes::open(p, "--node-time", "node")?,
            num_nodes,
        ),
        TimeInput::Generated(g) => generate_node_times(staging, *g, num_nodes),
    }
}

/// The times a generator draws with `seed`: `edges` and `nodes` each `uniform` or `growth`
/// (None: no times), uniform ones in `range` (default [`crate::options::UNIFORM_RANGE`]).
pub fn generated(
    edges: Option<&str>,
    nodes: Option<&str>,
    range: Option<(i64, i64)>,
    seed: u64,
) -> Result<TimeOptions> {
    if range.is_some() && edges != Some("uniform") && nodes != Some("uniform") {
        return input_err!(
            "--time-range applies to uniform times; give --edge-time uniform or --node-time uniform"
        );
    }
    // The range is the uniform ones'; growth times are indices.
    let gen = |option, kind: Option<&str>| {
        kind.map(|k| {
            let range = range.filter(|_| k == "uniform");
            TimeGen::parse(option, k, seed, range).map(TimeInput::Generated)
        })
        .transpose()
    };
    Ok(TimeOptions {
        edges: gen("--edge-time", edges)?,
        nodes: gen("--node-time", nodes)?,
    })
}

/// Check before a build that the time files can be read as times (their lengths are checked
/// as the build meets the edges and learns the node count).
pub fn check(times: &TimeOptions) -> Result<()> {
    if let Some(TimeInput::File(p)) = &times.edges {
        NpyTimes::open(p, "--edge-time", "input edge")?;
    }
    if let Some(TimeInput::File(p)) = &times.nodes {
        NpyTimes::open(p, "--node-time", "node")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_as_times() {
        let ts = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for w in ts.windows(2) {
            assert!(to_key(w[0]) < to_key(w[1]));
        }
        for t in ts {
            assert_eq!(from_key(to_key(t)), t);
        }
    }

    #[test]
    fn generated_times_are_deterministic_and_in_range() {
        let g = TimeGen::parse("--edge-time", "uniform", 9, Some((-10, 10))).unwrap();
        let mut a = GeneratedTimes::new(g);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        a.fill(&mut x, 1000).unwrap();
        // Chunking does not matter.
        let mut b = GeneratedTimes::new(g);
        for _ in 0..10 {
            b.fill(&mut y, 100).unwrap();
        }
        assert_eq!(x, y);
        assert!(x.iter().all(|t| (-10..10).contains(t)));
        assert!(x.contains(&-10) && x.contains(&9));
        let mut growth = GeneratedTimes::new(TimeGen::Growth);
        let mut z = Vec::new();
        growth.fill(&mut z, 3).unwrap();
        growth.fill(&mut z, 2).unwrap();
        assert_eq!(z, [0, 1, 2, 3, 4]);
        let e = |k, r| {
            TimeGen::parse("--edge-time", k, 0, r)
                .unwrap_err()
                .to_string()
        };
        assert!(e("uniform", Some((5, 5))).contains("--time-range 5,5 is empty"));
        assert!(e("growth", Some((0, 5))).contains("--time-range applies to uniform times"));
        assert!(e("later", None).contains("--edge-time 'later' is not known"));
    }

    #[test]
    fn a_time_file_that_is_no_npy_array_names_its_option() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.npy");
        let err = |option| match NpyTimes::open(&p, option, "node") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{} opened", p.display()),
        };
        // numpy's object arrays (and structured ones) have a descr no .npy reader can use
        crate::npy::write_npy(&p, "|O", &[3], false, &[0u8; 24]).unwrap();
        let want = format!(
            "{}: not a valid .npy file: unsupported dtype '|O'",
            p.display()
        );
        for option in ["--edge-time", "--node-time"] {
            let e = err(option);
            assert!(e.starts_with(&format!("{option} {want}")), "{e}");
        }
        std::fs::write(&p, b"0 1 2\n").unwrap();
        let e = err("--edge-time");
        assert!(
            e.starts_with(&format!(
                "--edge-time {}: not a valid .npy file",
                p.display()
            )),
            "{e}"
        );
    }
}
