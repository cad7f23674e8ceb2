//! The loader's options as typed values, each parsed once where it enters (`FromStr` here for the
//! names front ends pass, `NonZeroUsize` for counts that cannot be 0), so that the layers below
//! never validate them again.

use std::num::NonZeroUsize;
use std::str::FromStr;

use ringgnn_io::{probe_uring, BackendKind};
use ringgnn_sampler::SampleOptions;

use crate::{Error, Result};

/// How a file (neighbor lists or feature rows) is read, as asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// `memory` when the whole plan fits with the file in memory, else `uring` where io_uring
    /// works, else `pread` (see [`crate::budget`]).
    #[default]
    Auto,
    Memory,
    Uring,
    Pread,
}

impl BackendChoice {
    /// The names [`FromStr`] accepts, in the order front ends list them.
    pub const NAMES: [&'static str; 4] = ["auto", "memory", "uring", "pread"];

    /// The read backend for a file the plan left on disk: `uring` (an error where io_uring does
    /// not work), `pread`, or for `auto` io_uring where the probe passes and else `pread`, with
    /// the probe's reason for one log line.
    pub fn disk_kind(self) -> Result<(BackendKind, Option<String>)> {
        match self {
            BackendChoice::Pread => Ok((BackendKind::Pread, None)),
            BackendChoice::Uring => match probe_uring() {
                Ok(()) => Ok((BackendKind::Uring, None)),
                Err(why) => Err(Error::Input(format!(
                    "io_uring is not available: {why}; use backend \"pread\" (or \"auto\")"
                ))),
            },
            BackendChoice::Auto | BackendChoice::Memory => match probe_uring() {
                Ok(()) => Ok((BackendKind::Uring, None)),
                Err(why) => Ok((BackendKind::Pread, Some(why))),
            },
        }
    }
}

impl FromStr for BackendChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "memory" => Ok(BackendChoice::Memory),
            "uring" => Ok(BackendChoice::Uring),
            "pread" => Ok(BackendChoice::Pread),
            _ => Err(Error::Input(format!(
                "unknown backend {s:?}: use \"auto\", \"memory\", \"uring\" or \"pread\""
            ))),
        }
    }
}

/// How the hot-row cache chooses its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CachePolicy {
    /// Highest in-degree first.
    Degree,
    /// Sample `batches` batches of the training seeds ahead (without gathering) and cache the
    /// rows they touch most (DiskGNN's offline access counting, GIDS' look-ahead window);
    /// in-degree when no seeds are given or the counts (2 bytes per node) would not fit the
    /// cache's own budget.
    Presample { batches: usize },
}

impl CachePolicy {
    /// The names [`FromStr`] accepts.
    pub const NAMES: [&'static str; 2] = ["presample", "degree"];

    /// Look-ahead batches of `presample` unless told otherwise.
    pub const PRESAMPLE_BATCHES: usize = 64;

    /// This policy with `batches` look-ahead batches for `presample` (`degree` ignores it).
    pub fn with_batches(self, batches: usize) -> Self {
        match self {
            CachePolicy::Presample { .. } => CachePolicy::Presample { batches },
            d => d,
        }
    }
}

impl FromStr for CachePolicy {
    type Err = Error;
    /// `"presample"` (with [`Self::PRESAMPLE_BATCHES`]) or `"degree"`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "presample" => Ok(CachePolicy::Presample {
                batches: Self::PRESAMPLE_BATCHES,
            }),
            "degree" => Ok(CachePolicy::Degree),
            _ => Err(Error::Input(format!(
                "unknown cache_policy {s:?}: use \"presample\" or \"degree\""
            ))),
        }
    }
}

/// How many mini-batches are sampled together when the neighbor file is read from disk, so
/// that each page is read once per hop for all of them (see `ringgnn_sampler::HyperSampler`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hyperbatch {
    /// The largest number whose state fits the plan's share, measured as batches are sampled.
    #[default]
    Auto,
    /// Exactly this many (1: per-batch sampling on every worker thread, as before hyperbatches).
    Size(NonZeroUsize),
}

impl Hyperbatch {
    /// One batch at a time.
    pub const PER_BATCH: Hyperbatch = Hyperbatch::Size(NonZeroUsize::MIN);
}

impl FromStr for Hyperbatch {
    type Err = Error;
    /// `"auto"` or a count of at least 1.
    fn from_str(s: &str) -> Result<Self> {
        if s == "auto" {
            return Ok(Hyperbatch::Auto);
        }
        match s.trim().parse::<usize>().ok().and_then(NonZeroUsize::new) {
            Some(n) => Ok(Hyperbatch::Size(n)),
            None => Err(Error::Input(format!(
                "hyperbatch {s:?} is not valid: use \"auto\" or a number of batches of at least 1"
            ))),
        }
    }
}

/// Whether a hyperbatch's finished samples are written to a spill file as each is done and read
/// back when its turn comes (see `ringgnn_sampler::SpillFile`), instead of kept in memory until
/// the consumer takes them. Spilled, a batch holds only its state before the last hop (about half
/// of a kept one on skewed graphs), so more batches share each pass over the neighbor file.
/// Loading epochs spill too, keeping of each batch only the cold row ids its staging pass
/// reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Spill {
    /// Spill a hyperbatch that would not fit with its samples kept, when spilling fits more
    /// batches.
    #[default]
    Auto,
    /// Never: a hyperbatch is as large as its kept samples allow.
    Off,
    /// Every hyperbatch, sized for spilled samples.
    On,
}

impl FromStr for Spill {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Spill::Auto),
            "off" => Ok(Spill::Off),
            "on" => Ok(Spill::On),
            _ => Err(Error::Input(format!(
                "spill {s:?} is not valid: use \"auto\", \"on\" or \"off\""
            ))),
        }
    }
}

/// What a loader does with the feature file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureOptions {
    /// How feature rows are read (e.g. `memory` with neighbors on disk).
    pub backend: BackendChoice,
    /// Hot-row cache size; `None`: whatever the budget leaves.
    pub cache: Option<u64>,
    pub cache_policy: CachePolicy,
    /// Where hyperbatches stage their cold rows (`None`: the dataset's parent directory).
    pub staging_dir: Option<std::path::PathBuf>,
    /// Bytes the staging file may hold (`None`: the feature file's size; 0: no staging).
    pub staging_cap: Option<u64>,
}

/// Everything a [`crate::BatchLoader`] is built from.
#[derive(Clone, Debug)]
pub struct LoaderOptions {
    /// What decides each sample: fanouts, replacement, the seed, edge ids.
    pub sample: SampleOptions,
    /// How neighbor lists are read.
    pub backend: BackendChoice,
    /// `O_DIRECT` for both files when read from disk.
    pub direct: bool,
    /// Worker threads of an epoch.
    pub threads: NonZeroUsize,
    /// The whole process's budget in bytes; `None`: `reserve` plus
    /// [`crate::budget::default_budget`] (half of what is still available).
    pub memory: Option<u64>,
    /// Bytes the caller needs besides the loader (runtime, model), taken off the budget first.
    pub reserve: u64,
    /// Features and labels with each batch, or `None` for samples alone.
    pub features: Option<FeatureOptions>,
    /// The largest batch the plan is sized for (a larger one is accepted when the plan, redone
    /// for it, still fits).
    pub batch_size: NonZeroUsize,
    /// Batches the workers may hold ahead of the consumer; `None`: see [`crate::budget`].
    pub prefetch: Option<NonZeroUsize>,
    /// Batches the consumer holds while asking for the next (see [`crate::budget`]).
    pub hold: NonZeroUsize,
    /// Batches sampled together when the neighbor file is read from disk.
    pub hyperbatch: Hyperbatch,
    /// Whether hyperbatches spill their finished samples to disk.
    pub spill: Spill,
    /// A directory on the SSD for the spill file (`None`: the dataset's parent directory).
    pub spill_dir: Option<std::path::PathBuf>,
    /// Bytes of hot neighbor-file pages kept in memory when the file is read from disk one
    /// batch at a time; `None`: a share of what the budget leaves (see [`crate::budget`]).
    /// Training's default is `Some(0)`: hyperbatches share its reads instead.
    pub neighbor_cache: Option<u64>,
    /// Processes on this machine that each run a loader like this one (the local ranks of a
    /// `torchrun` job): the default budget is divided among them.
    pub processes: NonZeroUsize,
}

/// One worker thread per available core.
pub fn default_threads() -> NonZeroUsize {
    default_threads_among(NonZeroUsize::MIN)
}

/// The cores of this machine divided among `processes` processes (local ranks), at least one
/// thread each.
pub fn default_threads_among(processes: NonZeroUsize) -> NonZeroUsize {
    let cores = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
    NonZeroUsize::new(cores.get() / processes.get()).unwrap_or(NonZeroUsize::MIN)
}

impl Default for LoaderOptions {
    /// No hops, `auto`, one thread per core, the default budget, features with a look-ahead
    /// cache, batches of 1024, a plain `for` loop's hold of 2.
    fn default() -> Self {
        LoaderOptions {
            sample: SampleOptions::default(),
            backend: BackendChoice::Auto,
            direct: false,
            threads: default_threads(),
            memory: None,
            reserve: 0,
            features: Some(FeatureOptions {
                backend: BackendChoice::Auto,
                cache: None,
                cache_policy: CachePolicy::Presample {
                    batches: CachePolicy::PRESAMPLE_BATCHES,
                },
                staging_dir: None,
                staging_cap: None,
            }),
            batch_size: NonZeroUsize::new(1024).expect("not 0"),
            prefetch: None,
            hold: NonZeroUsize::new(2).expect("not 0"),
            hyperbatch: Hyperbatch::Auto,
            spill: Spill::Auto,
            spill_dir: None,
            neighbor_cache: Some(0),
            processes: NonZeroUsize::MIN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_ones_say_what_to_use() {
        for (i, n) in BackendChoice::NAMES.iter().enumerate() {
            let b: BackendChoice = n.parse().unwrap();
            assert_eq!(
                b,
                [
                    BackendChoice::Auto,
                    BackendChoice::Memory,
                    BackendChoice::Uring,
                    BackendChoice::Pread
                ][i]
            );
        }
        let e = "ram".parse::<BackendChoice>().unwrap_err().to_string();
        assert!(e.contains("\"ram\"") && e.contains("\"pread\""), "{e}");
        assert_eq!(
            "presample".parse::<CachePolicy>().unwrap(),
            CachePolicy::Presample { batches: 64 }
        );
        assert_eq!(
            "degree".parse::<CachePolicy>().unwrap().with_batches(3),
            CachePolicy::Degree
        );
        assert!("lru".parse::<CachePolicy>().is_err());
        assert_eq!("auto".parse::<Hyperbatch>().unwrap(), Hyperbatch::Auto);
        for (n, s) in [
            ("auto", Spill::Auto),
            ("on", Spill::On),
            ("off", Spill::Off),
        ] {
            assert_eq!(n.parse::<Spill>().unwrap(), s);
        }
        let e = "yes".parse::<Spill>().unwrap_err().to_string();
        assert!(e.contains("\"yes\"") && e.contains("\"off\""), "{e}");
        assert_eq!("1".parse::<Hyperbatch>().unwrap(), Hyperbatch::PER_BATCH);
        for bad in ["0", "-2", "x", ""] {
            let e = bad.parse::<Hyperbatch>().unwrap_err().to_string();
            assert!(e.contains("\"auto\" or a number"), "{e}");
        }
        assert_eq!(
            BackendChoice::Pread.disk_kind().unwrap(),
            (BackendKind::Pread, None)
        );
    }
}
