//! [`EngineOptions`]: how the engine batches requests and what it accepts, decided here once.

use std::num::NonZeroUsize;
use std::time::Duration;

use ringgnn_loader::LoaderOptions;
use ringgnn_sampler::TemporalStrategy;

/// What a single request may ask for; larger ones are refused before they are queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Node ids in one request; a request this large at the default fanouts is answered, alone
    /// and one at a time when it is larger than a wave (see [`crate::Engine::open`]).
    pub max_nodes: usize,
    /// Hops of one sampling request.
    pub max_hops: usize,
}

impl Limits {
    /// Refuse a request of `n` ids (before they are converted): none, or more than `max_nodes`.
    pub fn check_count(&self, n: usize) -> crate::Result<()> {
        let max = self.max_nodes;
        if n == 0 {
            return Err(crate::ServeError::Input(
                "no node ids: give at least one".into(),
            ));
        }
        if n > max {
            return Err(crate::ServeError::Input(format!(
                "{n} node ids in one request: at most {max} (the server's --max-nodes)"
            )));
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_nodes: 4096,
            max_hops: 6,
        }
    }
}

/// The engine's options.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// How the dataset is opened and the memory planned: `threads` is the number of workers
    /// (read backends: waves served at once), `sample.fanouts` and `batch_size` the wave each
    /// worker is sized for (a wave holds requests whose samples may reach, by their upper
    /// bounds, at most what one such batch may; [`EngineOptions::DEFAULT_WAVE_SEEDS`] unless
    /// asked), and `sample.seed` the seed of requests that give none.
    pub loader: LoaderOptions,
    /// How long the caller leading a wave waits for others to join it (0: take what is queued
    /// and go; the default, measured faster for single-node requests: docs/SERVING.md).
    pub max_wait: Duration,
    /// Requests in one wave.
    pub max_wave: NonZeroUsize,
    /// Requests waiting for a worker; one more is refused with [`crate::ServeError::Busy`].
    pub queue: NonZeroUsize,
    pub limits: Limits,
    /// How requests at times draw among the edges not newer than their time.
    pub temporal_strategy: TemporalStrategy,
    /// Open the dataset's edge and node times (if it has them). `false`: a server that samples
    /// without times opens none of their files and refuses requests at times.
    pub times: bool,
}

impl EngineOptions {
    pub const DEFAULT_MAX_WAIT: Duration = Duration::ZERO;
    pub const DEFAULT_MAX_WAVE: NonZeroUsize = NonZeroUsize::new(64).unwrap();
    pub const DEFAULT_QUEUE: NonZeroUsize = NonZeroUsize::new(256).unwrap();
    /// Seeds of the wave each worker is sized for by default: a full wave of single-node
    /// requests ([`Self::DEFAULT_MAX_WAVE`]). Larger requests, up to [`Limits::max_nodes`], are
    /// answered one at a time in a room of their own.
    pub const DEFAULT_WAVE_SEEDS: NonZeroUsize = Self::DEFAULT_MAX_WAVE;

    pub fn new(loader: LoaderOptions) -> Self {
        EngineOptions {
            loader,
            max_wait: Self::DEFAULT_MAX_WAIT,
            max_wave: Self::DEFAULT_MAX_WAVE,
            queue: Self::DEFAULT_QUEUE,
            limits: Limits::default(),
            temporal_strategy: TemporalStrategy::default(),
            times: true,
        }
    }
}
