//! The search from disk over a relation's time keys (`edge_time_keys.bin`, docs/FORMAT.md
//! "Times"; [`ringgnn_store::time_keys`]): 2 bytes an entry instead of 8, 2,048 entries a page
//! instead of 512. For a list cut at seed time `t`, with `j = key_of(bounds, t)`, the entries of
//! key `< j` are eligible and those of key `> j` are not; those of key `j` (a run, as each list
//! is sorted by time) are undecided. So a list's count is found in two rounds of the one search
//! ([`Search`]: slices, rounds, interpolation, the dense path): over the keys, the two partition
//! points `#(key < j)` and `#(key <= j)` (one probe finding both where the list's keys are on
//! one page, as most are, else two, which mostly read the same page, read once); then, where they differ, over the times of that run alone (usually a page)
//! for its eligible entries. `None` (a time before every time of the file) counts none. The
//! counts are the search over the times', exactly; only which pages are read differs.

use std::path::Path;
use std::sync::Arc;

use ringgnn_io::{open_backend, BackendKind, CoalesceOptions, ALIGN};
use ringgnn_store::manifest::{pad_to_page, IndexDtype};
use ringgnn_store::time_keys::{key_of, payload_bytes, read_bounds, BUCKETS, HEADER_BYTES};

use super::{file_len, Lists, Probe, Search};
use crate::neighbors::DiskNeighbors;
use crate::{Error, Result};

/// Keys of the entries before the first one's: the bounds header, read as entries of 2 bytes.
const BASE: u64 = HEADER_BYTES / 2;

/// Keys on a page.
const PER_PAGE: u64 = ALIGN as u64 / 2;

/// A relation's time keys read from disk: the bounds, in memory (512 KiB, shared by every
/// sampler of a graph), and a reader of the keys.
pub struct TimeKeys {
    pub(in crate::hetero) disk: DiskNeighbors,
    pub(in crate::hetero) bounds: Arc<[i64]>,
}

impl TimeKeys {
    /// The bounds of the keys file `path` (checked: [`BUCKETS`] of them, non-decreasing).
    pub fn bounds(path: &Path) -> Result<Arc<[i64]>> {
        Ok(read_bounds(path)?.into())
    }

    /// An error unless the keys file `path` holds the bounds and one key per edge of
    /// `num_edges`, zero-padded to a whole page.
    pub fn check_file(path: &Path, num_edges: u64) -> Result<()> {
        let len = file_len(path)?;
        let want = pad_to_page(payload_bytes(num_edges));
        if len != want {
            return Err(Error::Corrupt(format!(
                "{}: {len} bytes of time keys, but the relation has {num_edges} edges, so it \
                 needs {want} (the {HEADER_BYTES}-byte bounds, then 2 bytes per entry, padded \
                 to a page); run `ringgnn verify` on the dataset and rebuild it",
                path.display()
            )));
        }
        Ok(())
    }

    /// Read the keys file `path` of a relation of `num_edges` edges, whose bounds are `bounds`,
    /// with `kind` (`O_DIRECT` when `direct`), its threads' readers reading the file opened
    /// now; with why the backend fell back, if it did.
    pub fn open(
        path: &Path,
        num_edges: u64,
        bounds: Arc<[i64]>,
        (kind, direct): (BackendKind, bool),
        coalesce: CoalesceOptions,
    ) -> Result<(Self, Option<String>)> {
        Self::check_file(path, num_edges)?;
        if bounds.len() != BUCKETS {
            return Err(Error::Input(format!(
                "{}: {} time key bounds, expected {BUCKETS}",
                path.display(),
                bounds.len()
            )));
        }
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let (reader, why) = open_backend(kind, path, direct).map_err(io)?;
        // As for the times: the search reads at most a page a run but for dense regions, for
        // which the page planner needs a buffer of two.
        let coalesce = CoalesceOptions {
            buffer: coalesce.buffer.max(2 * ALIGN),
            ..coalesce
        };
        let disk = DiskNeighbors::new(reader, path, IndexDtype::U32, coalesce)
            .with_u16_entries()
            .reopening_file(direct)?;
        Ok((TimeKeys { disk, bounds }, why))
    }

    /// Bytes of its bounds.
    pub fn bounds_bytes(&self) -> u64 {
        8 * self.bounds.len() as u64
    }
}

/// A list searched over the keys ([`Search::load_keys`]): list `at` of the lists, cut at `t` of
/// key `j`, its entries from `lo`; `points`, the partition points `#(key < j)` and `#(key <=
/// j)` as the key round finds them (`n` of them so far).
pub(super) struct Keyed {
    at: u32,
    t: i64,
    j: Option<u16>,
    lo: u64,
    points: [u64; 2],
    n: u8,
}

impl Search {
    /// Its probes over the keys for the lists of `slice` (sort keys of `Cutter::cut_lists`): of
    /// list `k` of the slice, probes `k` at key limits `j - 1` and `j` (one, at `j`, where `j`
    /// is 0: no key is below it; one at `j` finding both where its keys are on one page, read
    /// whole by the first round; none where nothing is eligible).
    pub(super) fn load_keys(&mut self, slice: &[u64], lists: &impl Lists, bounds: &[i64]) {
        self.cuts.clear();
        self.live.clear();
        self.keyed.clear();
        let (live, keyed) = (&mut self.live, &mut self.keyed);
        let mut k = 0;
        lists.each(slice, |at, ((a, b), t), j| {
            debug_assert_eq!(j, key_of(bounds, t));
            let mut kd = Keyed {
                at,
                t,
                j,
                lo: a,
                points: [0; 2],
                n: 0,
            };
            if let Some(j) = j {
                // Keys on one page are read whole by the first round, which finds both
                // partition points at once: one probe, not two.
                let one_page = (b + BASE - 1) / PER_PAGE == (a + BASE) / PER_PAGE;
                let pair = a < b && one_page && j > 0;
                let probe = |limit: u16| Probe {
                    at: k as u32,
                    bisect: false,
                    dense: false,
                    pair,
                    lo: a + BASE,
                    a: a + BASE,
                    b: b + BASE,
                    s: a + BASE,
                    ta: 0,
                    tb: BUCKETS as i64 - 1,
                    limit: limit as i64,
                };
                match j.checked_sub(1) {
                    Some(below) if !pair => live.push(probe(below)),
                    Some(_) => {}
                    None => kd.n = 1,
                }
                live.push(probe(j));
            }
            keyed.push(kd);
            k += 1;
        });
    }

    /// After the key round: each list's count where its two points agree (in `cuts`), else a
    /// probe of the times of its undecided run (`live`), known to lie within its key's bucket
    /// (up to `max`, the relation's latest time if known, for the last bucket).
    pub(super) fn undecided(&mut self, bounds: &[i64], max: i64) -> Result<()> {
        for &(k, c) in &self.cuts {
            let kd = &mut self.keyed[k as usize];
            kd.points[kd.n as usize] = c as u64;
            kd.n += 1;
        }
        self.cuts.clear();
        self.live.clear();
        for kd in &self.keyed {
            let Some(j) = kd.j else {
                self.cuts.push((kd.at, 0));
                continue;
            };
            let (below, upto) = match kd.points {
                [x, y] if x <= y => (x, y),
                [x, y] => (y, x),
            };
            if below == upto {
                self.cuts
                    .push((kd.at, u32::try_from(below).map_err(|_| Error::TooLarge)?));
                continue;
            }
            let tb = match bounds.get(j as usize + 1) {
                Some(&next) => next - 1,
                None => max,
            };
            self.live.push(Probe {
                at: kd.at,
                bisect: false,
                dense: false,
                pair: false,
                lo: kd.lo,
                a: kd.lo + below,
                b: kd.lo + upto,
                s: kd.lo + below,
                ta: bounds[j as usize],
                tb,
                limit: kd.t,
            });
        }
        Ok(())
    }
}
