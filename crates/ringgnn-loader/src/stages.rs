//! The work of the loader's pipeline workers, per job of an epoch: [`SampleStage`] samples each
//! batch; [`LoadStage`] samples each batch and then gathers its feature rows and labels on the
//! same thread, with the same io_uring ring budget, into a reused buffer.
//!
//! A worker only starts *gathering* a batch once it is among the next `prefetch` the consumer
//! will take ([`ringgnn_pipeline::Emit::wait_turn`]): sampled batches are small, gathered ones
//! are not, so the pipeline's window (`prefetch + threads` batches) bounds the samples and the
//! turn bounds the feature matrices.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringgnn_features::{FeatureFile, FeatureGatherer, GatherStats, HotRowCache, RowSource};
use ringgnn_io::{BackendKind, CoalesceOptions};
use ringgnn_pipeline::{Emit, Stage};
use ringgnn_sampler::{Graph, GraphSampler, SampleOptions, SampledSubgraph};

use crate::buffers::BufferPool;
use crate::epoch::BatchJob;
use crate::labels::Labels;
use crate::{Error, Result};

/// One sampled mini-batch of an epoch: its global index, its seeds and its sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub index: u64,
    pub seeds: Vec<u64>,
    pub sample: SampledSubgraph,
}

/// One mini-batch, sampled and gathered.
#[derive(Debug)]
pub struct LoadedBatch {
    pub index: u64,
    pub seeds: Vec<u64>,
    pub sample: SampledSubgraph,
    /// Feature rows of `sample.node`, row-major `[nodes, dim]`, f32. Give it back with
    /// [`crate::BatchLoader::recycle`] (or drop it).
    pub x: Vec<f32>,
    /// Labels of `sample.node` (`-1` = unlabeled), when the dataset has labels.
    pub y: Option<Vec<i64>>,
    /// Time the worker spent sampling, waiting for its turn to gather (the prefetch bound),
    /// and gathering.
    pub sample_time: Duration,
    pub wait_time: Duration,
    pub gather_time: Duration,
    pub stats: GatherStats,
}

/// A worker's sampler, made on its thread, cancelled with the run.
fn worker_sampler(
    graph: &Graph,
    opts: &SampleOptions,
    stop: &Arc<AtomicBool>,
) -> Result<GraphSampler> {
    let mut s = graph.sampler(opts)?;
    s.set_cancel(stop.clone());
    Ok(s)
}

/// Sample batch `b` of `job`'s epoch.
fn sample(graph: &Graph, s: &mut GraphSampler, job: &BatchJob, b: u64) -> Result<Batch> {
    let seeds = job.batches.seeds_of(b);
    let sample = s.sample(graph, seeds, job.batches.epoch(), b)?;
    Ok(Batch {
        index: b,
        seeds: seeds.ids().to_vec(),
        sample,
    })
}

/// Sampling only: each output is the sampled [`Batch`].
pub struct SampleStage {
    pub(crate) graph: Arc<Graph>,
    pub(crate) opts: SampleOptions,
}

impl Stage for SampleStage {
    type Job = BatchJob;
    type State = GraphSampler;
    type Output = Batch;
    type Error = Error;

    fn start(&self, stop: &Arc<AtomicBool>) -> Result<GraphSampler> {
        worker_sampler(&self.graph, &self.opts, stop)
    }

    fn run(
        &self,
        s: &mut GraphSampler,
        job: BatchJob,
        out: &mut Emit<'_, Batch, Error>,
    ) -> Result<()> {
        for &b in &job.indices {
            out.emit(Ok(sample(&self.graph, s, &job, b)?));
        }
        Ok(())
    }
}

/// Where a gather worker reads rows from, as the plan decided.
pub(crate) enum RowsFrom {
    Memory(Arc<Vec<u8>>),
    Disk { kind: BackendKind, direct: bool },
}

/// Counters over every batch a loader has produced.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoaderStats {
    pub batches: u64,
    /// Worker seconds (summed over threads) spent sampling and gathering.
    pub sample_seconds: f64,
    pub gather_seconds: f64,
    pub gather: GatherStats,
    /// Rows of the hot-row cache, its bytes, and the seconds and batches of look-ahead
    /// sampling that chose them (0 for the in-degree policy).
    pub cached_rows: u64,
    pub cache_bytes: u64,
    pub presample_seconds: f64,
    pub presample_batches: u64,
}

/// What gathering needs, shared by every worker of a loader's epochs.
pub(crate) struct GatherParts {
    pub(crate) file: FeatureFile,
    pub(crate) rows: RowsFrom,
    pub(crate) cache: Option<Arc<HotRowCache>>,
    pub(crate) labels: Option<Labels>,
    pub(crate) buffers: Arc<BufferPool>,
    /// Gathered batches ahead of the consumer (the plan's prefetch).
    pub(crate) ahead: usize,
    pub(crate) totals: Mutex<LoaderStats>,
}

impl GatherParts {
    /// A gatherer for the calling thread (its own read backend).
    fn gatherer(&self, stop: &Arc<AtomicBool>) -> Result<FeatureGatherer> {
        let source = match &self.rows {
            RowsFrom::Memory(bytes) => RowSource::Memory(bytes.clone()),
            RowsFrom::Disk { kind, direct } => {
                RowSource::open(&self.file, *kind, *direct, CoalesceOptions::default())?.0
            }
        };
        let mut g = FeatureGatherer::new(self.file.clone(), source);
        if let Some(c) = &self.cache {
            g = g.with_cache(c.clone())?;
        }
        g.set_cancel(stop.clone());
        Ok(g)
    }
}

/// Sampling and gathering: each output is a [`LoadedBatch`].
pub struct LoadStage {
    pub(crate) graph: Arc<Graph>,
    pub(crate) opts: SampleOptions,
    pub(crate) parts: Arc<GatherParts>,
}

impl Stage for LoadStage {
    type Job = BatchJob;
    type State = (GraphSampler, FeatureGatherer);
    type Output = LoadedBatch;
    type Error = Error;

    fn start(&self, stop: &Arc<AtomicBool>) -> Result<Self::State> {
        Ok((
            worker_sampler(&self.graph, &self.opts, stop)?,
            self.parts.gatherer(stop)?,
        ))
    }

    fn run(
        &self,
        (s, g): &mut Self::State,
        job: BatchJob,
        out: &mut Emit<'_, LoadedBatch, Error>,
    ) -> Result<()> {
        for &b in &job.indices {
            let t0 = Instant::now();
            let batch = sample(&self.graph, s, &job, b)?;
            let sample_time = t0.elapsed();
            let t1 = Instant::now();
            if !out.wait_turn(self.parts.ahead) {
                return Err(Error::Input("the epoch was stopped".into()));
            }
            let wait_time = t1.elapsed();
            out.emit(Ok(self.gather(g, batch, sample_time, wait_time)?));
        }
        Ok(())
    }
}

impl LoadStage {
    fn gather(
        &self,
        g: &mut FeatureGatherer,
        batch: Batch,
        sample_time: Duration,
        wait_time: Duration,
    ) -> Result<LoadedBatch> {
        let p = &self.parts;
        let t0 = Instant::now();
        let nodes = &batch.sample.node;
        let mut x = p.buffers.take(nodes.len() * p.file.dim());
        let stats = match g.gather(nodes, &mut x) {
            Ok(s) => s,
            Err(e) => {
                p.buffers.give(x);
                return Err(e.into());
            }
        };
        let y = p.labels.as_ref().map(|l| {
            let mut y = Vec::with_capacity(nodes.len());
            l.gather_into(nodes, &mut y);
            y
        });
        let gather_time = t0.elapsed();
        {
            let mut t = p.totals.lock().unwrap_or_else(|e| e.into_inner());
            t.batches += 1;
            t.sample_seconds += sample_time.as_secs_f64();
            t.gather_seconds += gather_time.as_secs_f64();
            t.gather.add(&stats);
        }
        Ok(LoadedBatch {
            index: batch.index,
            seeds: batch.seeds,
            sample: batch.sample,
            x,
            y,
            sample_time,
            wait_time,
            gather_time,
            stats,
        })
    }
}
