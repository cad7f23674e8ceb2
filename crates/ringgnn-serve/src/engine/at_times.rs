//! An [`Engine`]'s requests at times ([`crate::RequestTimes`]; see the parent module): the
//! graph's one-type case with the dataset's times ([`Graph::one_type`]), and a wave's requests at
//! times sampled on it by the typed sampler, each request its own batch.
//!
//! [`Engine`]: super::Engine
//! [`Graph::one_type`]: ringgnn_sampler::Graph::one_type

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringgnn_loader::BatchLoader;
use ringgnn_sampler::{HeteroSample, SampledSubgraph, TypedGraph};

use super::{SampleRequest, Shared, Timed, Work, Worker};
use crate::queue::Job;
use crate::times::each_request;
use crate::{Result, ServeError};

/// Typed samplers (one-type case) of other configurations than the default one a worker keeps.
const KEPT_TYPED: usize = 8;

impl Shared {
    /// Sample the wave's requests with times (`outs` gets theirs), those of one configuration
    /// together, each its own batch: its own subgraphs.
    pub(super) fn sample_at_times(
        &self,
        w: &mut Worker,
        jobs: &[Job<Shared>],
        outs: &mut [Option<Timed>],
    ) -> Result<()> {
        let mut todo: Vec<usize> = (0..jobs.len())
            .filter(|&i| request(&jobs[i]).times.is_some())
            .collect();
        let Some(graph) = &self.typed else {
            // Refused when queued: a dataset without times takes no request with times.
            return match todo.is_empty() {
                true => Ok(()),
                false => Err(ServeError::Internal("the dataset has no times".into())),
            };
        };
        let config = |r: &SampleRequest| (r.fanouts.clone(), r.replace, r.seed, r.with_edge_ids);
        while let Some(&first) = todo.first() {
            let r0 = request(&jobs[first]);
            let (same, rest): (Vec<usize>, Vec<usize>) = todo
                .iter()
                .partition(|&&i| config(request(&jobs[i])) == config(r0));
            todo = rest;
            let key = (r0.fanouts.clone(), r0.replace);
            let at = match w.typed.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    let (mut s, _, _) = graph.sampler(vec![key.0.clone()], key.1, None)?;
                    s.set_temporal_strategy(self.opts.temporal_strategy);
                    if w.typed.len() >= KEPT_TYPED {
                        w.typed.remove(0);
                    }
                    w.typed.push((key, s));
                    w.typed.len() - 1
                }
            };
            let requests = same.iter().map(|&i| {
                let r = request(&jobs[i]);
                let t = r.times.as_ref().expect("a request with times");
                (0, r.seeds.ids(), Some(t))
            });
            let sampler = &mut w.typed[at].1;
            let before = sampler.io_stats();
            let got = each_request(requests, |reqs| {
                sampler.sample_many(reqs, r0.seed, 0, r0.with_edge_ids)
            });
            let after = sampler.io_stats();
            for (c, (a, b)) in self
                .typed_io
                .iter()
                .zip([(after.reads, before.reads), (after.bytes, before.bytes)])
            {
                c.fetch_add(a.saturating_sub(b), Ordering::Relaxed);
            }
            for (&i, s) in same.iter().zip(got?) {
                outs[i] = Some(one_type_sample(s));
            }
        }
        Ok(())
    }
}

/// The sampling request of a sampling job.
pub(super) fn request(j: &Job<Shared>) -> &SampleRequest {
    match &j.work {
        Work::Sample(r, _) => r,
        Work::Features(_) => unreachable!("sample jobs only"),
    }
}

/// The graph of `dir` (opened by `loader`) as its one-type case with the dataset's times, for
/// requests at times; `None` when it has neither edge nor node times. Edge times are held in
/// memory beside a neighbor file in memory only when the loader's plan leaves room for them
/// (8 bytes an edge); else they are read from disk per request.
pub(super) fn one_type(dir: &Path, loader: &BatchLoader) -> Result<Option<TypedGraph>> {
    let store = ServeError::from;
    let ds = ringgnn_store::Dataset::open(dir).map_err(store)?;
    ds.check_times().map_err(store)?;
    let (edge_times, keys) = (ds.edge_times_path(), ds.edge_time_keys_path());
    let node_times = ds.node_times().map_err(store)?;
    if edge_times.is_none() && node_times.is_none() {
        return Ok(None);
    }
    let plan = loader.plan();
    let room = plan.budget.saturating_sub(plan.total());
    let held = node_times.as_ref().map_or(0, |t| 8 * t.len() as u64);
    let times = 8 * loader.graph().index().num_edges();
    let mut graph = loader
        .graph()
        .one_type(
            edge_times.as_deref().map(|t| (t, keys.as_deref())),
            node_times.map(Arc::from),
            room >= held.saturating_add(times),
        )
        .map_err(ServeError::from)?;
    // Where a search from disk looks first (the dataset's range of edge times); the file is
    // the dataset's own (an error reading it sends to `ringgnn verify`).
    graph.relations[0].time_range = ds.edge_time_range();
    graph.relations[0].times_of = Some(dir.to_path_buf());
    Ok(Some(graph))
}

/// A one-type typed sample as the homogeneous sample it is, with its nodes' seed times.
fn one_type_sample(mut s: HeteroSample) -> Timed {
    let first = |v: &mut Vec<Vec<u64>>| std::mem::take(&mut v[0]);
    let sub = SampledSubgraph {
        node: first(&mut s.node),
        row: first(&mut s.row),
        col: first(&mut s.col),
        edge: s.edge.as_mut().map(first),
        num_sampled_nodes: std::mem::take(&mut s.num_sampled_nodes[0]),
        num_sampled_edges: std::mem::take(&mut s.num_sampled_edges[0]),
    };
    (sub, s.time.map(|mut t| std::mem::take(&mut t[0])))
}
