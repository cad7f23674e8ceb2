//! Gathering the rows of a hyperbatch: batch by batch (random page reads, as outside
//! hyperbatches), or staged ([`ringgnn_features::Stager`]: one pass over the feature file in file
//! order writes each batch's cold rows to its own region of a staging file, then each batch reads
//! its region sequentially). A cost model chooses, per hyperbatch, from the pages the batches
//! need and the device's rates ([`ReadModel`]); the choice and both estimates are counted in the
//! loader's stats.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringgnn_features::{FeatureFile, Stager};
use ringgnn_io::{open_backend, BackendKind, BlockReader, ReadModel, ALIGN};

use crate::{Error, Result};

/// An I/O error on `path`, as the feature store names them.
fn io_at(path: &std::path::Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| {
        Error::Features(ringgnn_features::Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// Bytes of the feature file a staging pass reads at a time (the plan reserves its buffer
/// from the hyperbatch share: `budget::STAGING_BUFFERS`).
pub const PASS_CHUNK: usize = 8 << 20;

/// Where a staging file goes and how large it may grow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagingOptions {
    /// A directory on the SSD (default: the dataset's parent directory).
    pub dir: PathBuf,
    /// Bytes the staging file may hold at a time (the cold rows of one hyperbatch).
    pub cap: u64,
}

/// Estimated seconds to read a hyperbatch's cold rows batch by batch, and staged.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    pub per_batch: f64,
    pub staged: f64,
    /// Of `staged`, the pass over the feature file (the rest writes the rows to the staging
    /// file and reads them back).
    pub pass: f64,
    /// Pages of the feature file that hold at least one cold row of the hyperbatch: what a
    /// pass could read at least (it reads whole blocks where they are dense).
    pub needed_pages: u64,
}

/// Whether a loading driver stages a hyperbatch's cold rows (one pass over the feature file,
/// then each batch's rows read back sequentially) rather than reading them batch by batch, from
/// the two estimates of its reads. Two drivers run a loading epoch: while one hands its
/// hyperbatch's batches to the consumer, the other samples and stages the next, so a pass
/// overlaps the training of the previous hyperbatch as per-batch reads overlap the training of
/// earlier batches, and the two compare at par: the cheaper wins. The first hyperbatch of an
/// epoch has nothing before it to overlap with (its pass would hold back the epoch's first
/// batch): it is gathered batch by batch, each batch handed out as soon as its rows are read,
/// while the second is staged. (Before, with no such first hyperbatch, a pass had to be
/// estimated at half the per-batch reads to be chosen.)
pub fn stage_rows(first: bool, per_batch: f64, staged: f64) -> bool {
    !first && staged < per_batch
}

/// Estimate both ways of reading `cold` (each batch's cold row ids, ascending) of `file`.
pub fn estimate(cold: &[Vec<u64>], file: &FeatureFile, model: &ReadModel) -> Estimate {
    let page_of = |id: u64| file.info.row_offset(id) / ALIGN as u64;
    let file_pages = file
        .info
        .payload_bytes(file.num_nodes)
        .div_ceil(ALIGN as u64);
    let mut union = vec![0u64; (file_pages as usize).div_ceil(64)];
    let mut per_batch = 0.0;
    let mut staged_bytes = 0u64;
    for ids in cold {
        let (mut pages, mut runs, mut last) = (0u64, 0u64, None::<u64>);
        for &id in ids {
            let p = page_of(id);
            if last == Some(p) {
                continue;
            }
            pages += 1;
            runs += (last != Some(p.wrapping_sub(1))) as u64;
            last = Some(p);
            union[(p / 64) as usize] |= 1 << (p % 64);
        }
        per_batch += model.seconds(pages, runs);
        staged_bytes += ids.len() as u64 * file.info.row_bytes;
    }
    // The pass: per block, its needed pages or the whole block, as the reader will choose.
    let bp = model.block_pages() as u64;
    let mut pass = 0.0;
    let mut b0 = 0u64;
    while b0 < file_pages {
        let b1 = (b0 + bp).min(file_pages);
        let (mut n, mut runs, mut prev) = (0u64, 0u64, false);
        for p in b0..b1 {
            let on = union[(p / 64) as usize] >> (p % 64) & 1 == 1;
            n += on as u64;
            runs += (on && !prev) as u64;
            prev = on;
        }
        if n > 0 {
            let whole = model.read_whole(n as usize, runs as usize, (b1 - b0) as usize);
            pass += if whole {
                model.seconds(b1 - b0, 1)
            } else {
                model.seconds(n, runs)
            };
        }
        b0 = b1;
    }
    // Then the rows are written once and read back once, sequentially.
    let rows = 2.0 * staged_bytes as f64 / model.seq_bytes_per_s;
    Estimate {
        per_batch,
        staged: pass + rows,
        pass,
        needed_pages: union.iter().map(|w| w.count_ones() as u64).sum(),
    }
}

/// A hyperbatch worker's staging side: the staging file (made on first use) and a reader of
/// the feature file.
pub struct Staging {
    opts: StagingOptions,
    file: FeatureFile,
    kind: BackendKind,
    direct: bool,
    model: ReadModel,
    stop: Arc<AtomicBool>,
    stager: Option<Stager>,
    reader: Option<BlockReader>,
    /// Bytes of the feature file each reader loads at a time ([`PASS_CHUNK`]).
    chunk: usize,
    /// Time the passes spent waiting for the feature file's reads.
    load_time: Duration,
    /// Each batch's cold row ids (reused).
    pub(crate) cold: Vec<Vec<u64>>,
    /// Why staging is off for good (the file could not be made), if it is.
    pub(crate) disabled: Option<String>,
}

impl Staging {
    pub(crate) fn new(
        opts: StagingOptions,
        file: FeatureFile,
        kind: BackendKind,
        direct: bool,
        stop: &Arc<AtomicBool>,
    ) -> Self {
        let disabled =
            (!Stager::supports(file.row_bytes()) || file.row_bytes() > ALIGN).then(|| {
                format!(
                    "rows of {} bytes are gathered batch by batch",
                    file.row_bytes()
                )
            });
        Staging {
            opts,
            file,
            kind,
            direct,
            model: ReadModel::from_env(),
            stop: stop.clone(),
            stager: None,
            reader: None,
            chunk: PASS_CHUNK,
            load_time: Duration::ZERO,
            cold: Vec::new(),
            disabled,
        }
    }

    pub(crate) fn model(&self) -> &ReadModel {
        &self.model
    }

    /// Stage the cold rows of `self.cold` (one list per batch): `Ok(false)` when they do not
    /// fit the cap or staging is off, and nothing was done.
    pub(crate) fn stage(&mut self) -> Result<bool> {
        if self.disabled.is_some() {
            return Ok(false);
        }
        if self.stager.is_none() {
            match Stager::create(&self.opts.dir, self.opts.cap, self.file.row_bytes()) {
                Ok(s) => self.stager = Some(s),
                Err(e) => {
                    self.disabled = Some(format!(
                        "no staging file in {}: {e}",
                        self.opts.dir.display()
                    ));
                    return Ok(false);
                }
            }
        }
        let rows: Vec<u64> = self.cold.iter().map(|c| c.len() as u64).collect();
        let stager = self.stager.as_mut().expect("made above");
        if !stager.plan(&rows) {
            return Ok(false);
        }
        if self.reader.is_none() {
            let path = &self.file.path;
            let (r, _) = open_backend(self.kind, path, self.direct).map_err(io_at(path))?;
            let bytes = self.file.info.payload_bytes(self.file.num_nodes);
            let mut reader = BlockReader::new(r, self.model, self.chunk, bytes);
            reader.set_cancel(self.stop.clone());
            self.reader = Some(reader);
        }
        let reader = self.reader.as_mut().expect("made above");
        let (file, stager) = (&self.file, self.stager.as_mut().expect("made above"));
        let io = io_at(&file.path);
        let cp = reader.chunk_pages() as u64;
        let rb = file.row_bytes();
        let mut needed = vec![0u64; (cp as usize).div_ceil(64)];
        let mut cursor = vec![0usize; self.cold.len()];
        let mut spans = vec![(0usize, 0usize); self.cold.len()];
        // One chunk at a time, its reads then its rows' writes. (Loading the next chunk while
        // writing out the rows of this one was tried: on this project's machine the disk's
        // scheduler, mq-deadline, serves reads first and starved the writes, 2.88 GB in 24.8 s,
        // and the gather stage took 67 s against 51 s in the same run: docs/benchmarks.md,
        // "Measurements behind design choices".)
        for c in 0..reader.chunks() {
            let (first, end) = (c * cp, (c + 1) * cp);
            needed.iter_mut().for_each(|w| *w = 0);
            let mut any = false;
            for ((ids, at), span) in self.cold.iter().zip(&mut cursor).zip(&mut spans) {
                let start = *at;
                while *at < ids.len() {
                    let page = file.info.row_offset(ids[*at]) / ALIGN as u64;
                    if page >= end {
                        break;
                    }
                    let i = (page - first) as usize;
                    needed[i / 64] |= 1 << (i % 64);
                    *at += 1;
                }
                *span = (start, *at);
                any |= *at > start;
            }
            if !any {
                continue;
            }
            let t = Instant::now();
            reader.load(c, &needed).map_err(&io)?;
            self.load_time += t.elapsed();
            for (b, (ids, &(s0, s1))) in self.cold.iter().zip(&spans).enumerate() {
                for &id in &ids[s0..s1] {
                    let row = reader.bytes(file.info.row_offset(id), rb);
                    if let Err(e) = stager.push(b, row) {
                        return Err(io_at(stager.path())(e));
                    }
                }
            }
        }
        if let Err(e) = stager.seal() {
            return Err(io_at(stager.path())(e));
        }
        Ok(true)
    }

    /// Feed batch `b`'s staged rows, in order, to `visit`; the bytes read.
    pub(crate) fn rows(
        &mut self,
        b: usize,
        visit: &mut dyn FnMut(usize, &[u8]),
    ) -> ringgnn_features::Result<u64> {
        let stager = self.stager.as_mut().expect("staged before");
        let before = stager.traffic().1;
        if let Err(source) = stager.read(b, |k, row| visit(k, row)) {
            return Err(ringgnn_features::Error::Io {
                path: stager.path().to_path_buf(),
                source,
            });
        }
        Ok(stager.traffic().1 - before)
    }

    /// Bytes of the feature file the passes read, and the staging file's writes and reads.
    pub(crate) fn traffic(&self) -> (u64, u64, u64) {
        let pass = self
            .reader
            .as_ref()
            .map_or(0, |r| r.counts().pages * ALIGN as u64);
        let (w, r) = self.stager.as_ref().map_or((0, 0), |s| s.traffic());
        (pass, w, r)
    }

    /// Seconds the passes waited for the feature file's reads, and the staging file's writes
    /// and reads back, so far.
    pub(crate) fn io_seconds(&self) -> (f64, f64, f64) {
        let (w, r) = self.stager.as_ref().map_or((0.0, 0.0), |s| s.io_seconds());
        (self.load_time.as_secs_f64(), w, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringgnn_store::generate::sbm::{generate_sbm, SbmOptions};
    use ringgnn_store::manifest::FeatureDtype;
    use ringgnn_store::{Dataset, GraphOptions, NoProgress};
    use std::os::unix::fs::FileExt;

    #[test]
    fn the_buffers_reserved_hold_what_staging_takes() {
        use ringgnn_features::staging::{READ_WAVE, WRITE_BUFFER};
        assert!(crate::budget::STAGING_BUFFERS >= (PASS_CHUNK + READ_WAVE) as u64);
        assert!(crate::budget::STAGING_PER_BATCH >= WRITE_BUFFER as u64);
    }

    /// A pass over many chunks (some with no cold row of a batch between others that hold
    /// some) stages each batch's rows, in order, as they are in the feature file.
    #[test]
    fn a_pass_over_many_chunks_stages_every_row_as_the_file_holds_it() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = SbmOptions {
            out: tmp.path().join("ds"),
            nodes: 20_000,
            classes: 4,
            avg_degree: 4.0,
            feature_dim: 16,
            feature_dtype: FeatureDtype::F32,
            seed: 3,
            split: vec![("train".into(), 0.5)],
            graph: GraphOptions::default(),
            overwrite: false,
        };
        generate_sbm(&opts, &NoProgress).unwrap();
        let ds = Dataset::open(&tmp.path().join("ds")).unwrap();
        let file = FeatureFile::of(&ds).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let sopts = StagingOptions {
            dir: tmp.path().to_path_buf(),
            cap: 1 << 30,
        };
        // Blocks and chunks of 4 KiB pages: the 1.25 MB file is 77 chunks of 16 KiB.
        let mut st = Staging::new(sopts, file.clone(), BackendKind::Pread, false, &stop);
        st.model.block = 4096;
        st.chunk = 16 << 10;
        let rb = file.row_bytes() as u64;
        // Batch 0: every 7th row; 1: a run at the start and one at the end (the chunks between
        // hold none of its rows); 2: one row; 3: none.
        st.cold = vec![
            (0..20_000).step_by(7).collect(),
            (0..300).chain(19_500..20_000).collect(),
            vec![12_345],
            vec![],
        ];
        // Rows 1000..19500 hold nothing of batches 1-3: many chunks hold batch 0's rows alone.
        assert!(st.stage().unwrap());
        let raw = std::fs::File::open(&file.path).unwrap();
        for b in 0..st.cold.len() {
            let ids = st.cold[b].clone();
            let mut got: Vec<(usize, Vec<u8>)> = Vec::new();
            st.rows(b, &mut |k, row| got.push((k, row.to_vec())))
                .unwrap();
            assert_eq!(got.len(), ids.len(), "batch {b}");
            for (k, (&id, (j, row))) in ids.iter().zip(&got).enumerate() {
                assert_eq!(*j, k);
                let mut want = vec![0u8; rb as usize];
                raw.read_exact_at(&mut want, file.info.row_offset(id))
                    .unwrap();
                assert_eq!(*row, want, "batch {b}, row {id}");
            }
        }
        // Each chunk (every one holds a row of batch 0) was loaded once.
        let r = st.reader.as_ref().unwrap();
        assert_eq!(r.counts().loads, r.chunks());
        assert!(r.chunks() > 50, "{}", r.chunks());
        let (pass, written, read) = st.traffic();
        assert!(
            pass >= file.info.payload_bytes(file.num_nodes) / 2,
            "{pass}"
        );
        assert!(written > 0 && read == written, "{written} {read}");
        let (load, write, read_s) = st.io_seconds();
        assert!(load > 0.0 && write > 0.0 && read_s > 0.0);
        // A second hyperbatch reuses the reader and the file: the same rows again.
        st.cold = vec![vec![5, 6, 19_999]];
        assert!(st.stage().unwrap());
        let mut got = Vec::new();
        st.rows(0, &mut |_, row| got.push(row.to_vec())).unwrap();
        let mut want = vec![0u8; rb as usize];
        raw.read_exact_at(&mut want, file.info.row_offset(19_999))
            .unwrap();
        assert_eq!(got[2], want);
    }
}
