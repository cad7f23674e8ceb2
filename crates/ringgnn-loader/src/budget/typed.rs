//! The typed loader's hyperbatch size, batches ahead and workers ([`choose`]), from what its probe
//! batches measured ([`TypedNeeds::measured`]) within the batches' part of its memory plan.
//!
//! A typed worker samples a hyperbatch of `H` batches (each relation's file read once per hop for
//! all of them) and gathers a batch's rows only when it is among the next `prefetch` the
//! consumer takes, so an epoch holds `workers * H` *sampled* batches and `prefetch + 1` batches
//! of rows. `auto` counts everything an epoch holds, as measured: per sampled batch its share of
//! the sampler's hop buffers and what its sample holds while sampled (before its last hop where
//! hyperbatches spill), the largest times [`MEASURED_MARGIN`]; whatever `H`, the rows and samples
//! of the batches ahead and the consumer's, each worker's read and spill buffers, dedup maps and
//! the finished sample it spills or gathers, and the labels. The largest `H` whose total fits the
//! share is found by [`super::batches_fitting`], the rule the homogeneous drivers' `HyperFit`
//! uses too. Where not even one batch at a time fits, it takes one batch ahead instead of
//! [`DEFAULT_PREFETCH`], then one worker, as the homogeneous plan does, and warns where even
//! that does not fit. When every neighbor file is held there is nothing to share: `H` is 1.
//!
//! Where rows may be staged, staging's buffers take room from the hyperbatches and its pass pays
//! more the more batches share it: with the probe's [`Times`], the configuration predicted
//! fastest among those that fit (H, batches ahead, workers, staged or not) is taken.

use super::bytes;
use crate::typed::ProbeBytes;

/// Batches sampled as probes to measure what a batch holds.
pub const PROBE_BATCHES: usize = 3;
/// The margin on the largest probe batch: batches differ (a seed set that reaches hubs draws
/// more), and the allocator rounds and fragments.
pub const MEASURED_MARGIN: f64 = 1.5;
/// The margin on the largest probe batch's rows: their counts vary little from batch to batch
/// (the seeds' neighborhoods are of one size), far less than the sampler's workspaces.
pub const ROWS_MARGIN: f64 = 1.1;
/// Batches whose rows are gathered ahead of the consumer's when `prefetch` is not given.
pub const DEFAULT_PREFETCH: usize = 2;
/// A configuration predicted faster by less than this fraction does not displace one tried
/// before it (unstaged before staged, then as many batches ahead and workers as given before
/// fewer, larger H before smaller): the prediction is a model, not a measurement.
pub const TIME_MARGIN: f64 = 0.05;

/// Seconds a batch takes, from the probe batches: `sample` (its sampling, measured), `read`
/// (its rows read batch by batch), `scan` (one pass over the feature files for a hyperbatch's
/// rows), `back` (its staged rows written to the staging file and read back), estimated by the
/// device model over the types whose rows may be staged (the other types' reads are the same
/// whatever is chosen).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Times {
    pub sample: f64,
    pub read: f64,
    pub scan: f64,
    pub back: f64,
}

impl Times {
    /// The times of probe batches: means, and the one pass of the probe's hyperbatch.
    pub fn measured(probes: &[ProbeBytes]) -> Self {
        if probes.is_empty() {
            return Times::default();
        }
        let n = probes.len() as f64;
        let mean = |f: fn(&ProbeBytes) -> f64| probes.iter().map(f).sum::<f64>() / n;
        Times {
            sample: mean(|p| p.sample_s),
            read: mean(|p| p.read_s),
            scan: probes.iter().map(|p| p.pass_s).fold(0.0, f64::max),
            back: mean(|p| p.back_s),
        }
    }

    /// Predicted seconds a batch over an epoch of `batches` batches in hyperbatches of `h` on
    /// `workers` threads, rows `staged` or not: each batch's rows take `read`, or, staged, the
    /// hyperbatch's pass shared by its `h` batches plus `back` where that is cheaper (the loader
    /// chooses so for each hyperbatch); the reads of all workers share the device, their
    /// sampling does not, so a batch takes the longer of its reads and its worker's whole work
    /// shared among the workers. The epoch's first hyperbatch is read batch by batch (nothing
    /// trains before it to hide a pass).
    pub fn per_batch(&self, h: usize, workers: usize, staged: bool, batches: usize) -> f64 {
        let cost = |disk: f64| disk.max((self.sample + disk) / workers as f64);
        let steady = cost(if staged {
            self.read.min(self.scan / h as f64 + self.back)
        } else {
            self.read
        });
        let first = h.min(batches);
        (first as f64 * cost(self.read) + (batches - first) as f64 * steady) / batches as f64
    }
}

/// What an epoch of a typed loader holds, measured on its probe batches (each with its margin):
/// `per_batch` a sampled batch; `rows` a gathered batch (its rows and its sample); `buffers` one
/// worker's read and spill buffers, its sampler's dedup maps and the finished sample it spills
/// or gathers; `held` what the loader holds whatever its epochs (the labels); staging's part, a
/// batch's (`staging_per_batch`) and a worker's (`staging_buffers`); and the seconds a batch
/// takes (`times`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TypedNeeds {
    pub per_batch: u64,
    pub rows: u64,
    pub buffers: u64,
    pub held: u64,
    pub staging_per_batch: u64,
    pub staging_buffers: u64,
    pub times: Times,
}

/// The largest of `f` over `probes` times `margin`, truncated; 0 without probes.
fn largest(probes: &[ProbeBytes], f: fn(&ProbeBytes) -> u64, margin: f64) -> u64 {
    (margin * probes.iter().map(f).max().unwrap_or(0) as f64) as u64
}

impl TypedNeeds {
    /// From probe batches (`TypedLoader::probe`), one worker's fixed buffers (`worker`), what
    /// the loader holds (`held`) and one worker's staging buffers (`staging`).
    pub fn measured(probes: &[ProbeBytes], worker: u64, held: u64, staging: u64) -> Self {
        let sample = largest(probes, |p| p.sample, MEASURED_MARGIN);
        TypedNeeds {
            per_batch: largest(probes, |p| p.state + p.batch, MEASURED_MARGIN),
            rows: largest(probes, |p| p.rows, ROWS_MARGIN) + sample,
            buffers: worker + largest(probes, |p| p.scratch, MEASURED_MARGIN) + sample,
            held,
            staging_per_batch: largest(probes, |p| p.staging, MEASURED_MARGIN),
            staging_buffers: staging,
            times: Times::measured(probes),
        }
    }
}

/// What an epoch of a typed loader runs with: `hyperbatch` (H), `prefetch` (batches whose rows
/// are gathered ahead of the consumer's), `workers` (threads), `staging` (whether its
/// hyperbatches' rows may be staged), `why` in words, and a `warning` where even one batch at a
/// time exceeds the share.
#[derive(Clone, Debug, PartialEq)]
pub struct TypedSizes {
    pub hyperbatch: usize,
    pub prefetch: usize,
    pub workers: usize,
    pub why: String,
    pub staging: bool,
    pub warning: Option<String>,
}

impl TypedSizes {
    fn new(hyperbatch: usize, prefetch: usize, workers: usize, why: String) -> Self {
        TypedSizes {
            hyperbatch,
            prefetch,
            workers,
            why,
            staging: true,
            warning: None,
        }
    }

    /// Batches the run may sample ahead of the consumer's: jobs of `H` batches, one per worker,
    /// and at least the `prefetch + workers - 1` batches a per-batch loader keeps ahead.
    pub fn window(&self) -> usize {
        jobs_in_flight(self.hyperbatch, self.workers, self.prefetch) * self.hyperbatch
    }
}

/// Jobs (of `h` batches) submitted ahead of the one the consumer is taking: one per thread, and
/// at least the `prefetch + threads - 1` batches a per-batch loader keeps ahead.
pub fn jobs_in_flight(h: usize, threads: usize, prefetch: usize) -> usize {
    threads.max((prefetch + threads - 1).div_ceil(h.max(1)))
}

/// The sizes of an epoch of `batches` batches within `share` bytes. `asked`: a number fixes H
/// (at most `batches`); `None` is `auto`: 1 when every neighbor file is in memory, else, with
/// what the probes measured (`needs`), the largest H at most `ceil(batches / workers)` (so
/// every worker has a job) for which `(prefetch + 1) * rows + workers * (buffers + H *
/// per_batch) + held` fits the share, by bytes or, with staging and the probe's times, by
/// predicted time (see the module docs). `prefetch`: `None` for [`DEFAULT_PREFETCH`] or one
/// where that does not fit.
pub fn choose(
    asked: Option<usize>,
    in_memory: bool,
    share: u64,
    needs: &TypedNeeds,
    threads: usize,
    prefetch: Option<usize>,
    batches: usize,
) -> TypedSizes {
    let threads = threads.max(1);
    let p = prefetch.unwrap_or(DEFAULT_PREFETCH);
    if let Some(a) = asked {
        let h = a.min(batches).max(1);
        return TypedSizes::new(h, p, threads, format!("{h} (as given)"));
    }
    if in_memory {
        return TypedSizes::new(
            1,
            p,
            threads,
            "1 (auto: every neighbor file is in memory, nothing to share)".into(),
        );
    }
    let fit = Fit {
        share,
        needs,
        threads,
        prefetch,
        batches,
    };
    if needs.staging_buffers > 0 && needs.times.read > 0.0 {
        if let Some(timed) = fit.by_time() {
            return timed;
        }
    }
    if needs.staging_buffers > 0 {
        if let Some(staged) = fit.bytes(true, false).filter(|s| s.hyperbatch > 1) {
            return TypedSizes {
                why: staged.why
                    + "; rows staged where a pass over a feature file pays (its buffers and row \
                       ids counted)",
                ..staged
            };
        }
    }
    let plain = fit
        .bytes(false, true)
        .expect("with a warning the fit always has sizes");
    if needs.staging_buffers == 0 {
        return plain;
    }
    TypedSizes {
        why: plain.why
            + "; rows not staged: with staging's buffers only one batch at a time would fit",
        staging: false,
        ..plain
    }
}

/// What an epoch holds for (H, batches ahead, workers), staged or not, and its words.
struct Held {
    share: u64,
    per_batch: u64,
    rows: u64,
    buffers: u64,
    held: u64,
}

impl Held {
    fn of(share: u64, needs: &TypedNeeds, staged: bool) -> Self {
        let (per, buffers) = match staged {
            true => (needs.staging_per_batch, needs.staging_buffers),
            false => (0, 0),
        };
        Held {
            share,
            per_batch: needs.per_batch + per,
            rows: needs.rows,
            buffers: needs.buffers + buffers,
            held: needs.held,
        }
    }

    fn whatever_h(&self, p: usize, w: usize) -> u64 {
        (p as u64 + 1) * self.rows + w as u64 * self.buffers + self.held
    }

    fn total(&self, h: usize, p: usize, w: usize) -> u64 {
        self.whatever_h(p, w) + (w * h) as u64 * self.per_batch
    }

    /// The largest H at most `ceil(batches / w)` that fits, 0 where H = 1 does not.
    fn largest(&self, p: usize, w: usize, batches: usize) -> usize {
        let most = batches.div_ceil(w).max(1);
        if self.total(1, p, w) > self.share {
            return 0;
        }
        if self.per_batch == 0 {
            return most;
        }
        let each = (w as u64 * self.per_batch) as f64;
        super::batches_fitting(self.share, self.whatever_h(p, w), each).min(most)
    }

    fn why(&self, h: usize, p: usize, w: usize) -> String {
        let total = self.total(h, p, w);
        let fits = match total <= self.share {
            true => "fit in",
            false => "exceed, even one batch at a time,",
        };
        format!(
            "{h} (auto: {w} threads, {} per sampled batch (measured on {PROBE_BATCHES} probe \
             batches, x{MEASURED_MARGIN}) and {} whatever H (rows gathered for the next {p} and \
             the consumer's, read buffers, labels); {} held {fits} the batches' {})",
            bytes(self.per_batch),
            bytes(self.whatever_h(p, w)),
            bytes(total),
            bytes(self.share)
        )
    }
}

/// [`choose`]'s `auto` for one share and its measures.
struct Fit<'a> {
    share: u64,
    needs: &'a TypedNeeds,
    threads: usize,
    prefetch: Option<usize>,
    batches: usize,
}

impl Fit<'_> {
    /// (batches ahead, workers) in the order they are tried: as given, then one batch ahead
    /// (when `prefetch` is not given), then one worker.
    fn tries(&self) -> Vec<(usize, usize)> {
        let p = self.prefetch.unwrap_or(DEFAULT_PREFETCH);
        let mut tries = vec![(p, self.threads)];
        if self.prefetch.is_none() && p > 1 {
            tries.push((1, self.threads));
        }
        if self.threads > 1 {
            let last = tries[tries.len() - 1].0;
            tries.push((last, 1));
        }
        tries
    }

    /// By bytes, `staged` or not: the first (batches ahead, workers) where one batch at a time
    /// fits and the largest H there; where none fits, `None`, or with `warn` the batches as
    /// asked and the warning.
    fn bytes(&self, staged: bool, warn: bool) -> Option<TypedSizes> {
        let b = Held::of(self.share, self.needs, staged);
        let tries = self.tries();
        let mut warning = None;
        let (p, w) = match tries.iter().find(|&&(p, w)| b.total(1, p, w) <= self.share) {
            Some(&pw) => pw,
            None if !warn => return None,
            None => {
                let (p, w) = tries[tries.len() - 1];
                warning = Some(format!(
                    "the memory budget is too small for these batches: the plan leaves the \
                     batches {}, and even one batch at a time, with {p} ahead and {w} worker{}, \
                     needs {}: {} batches' rows ({} each, measured on {PROBE_BATCHES} probe \
                     batches), a sampled batch ({}), read buffers ({}) and labels ({}); they run \
                     as asked, one batch at a time, beyond the budget: give a larger memory \
                     budget (--memory), a smaller batch size or smaller fanouts",
                    bytes(self.share),
                    if w > 1 { "s" } else { "" },
                    bytes(b.total(1, p, w)),
                    p + 1,
                    bytes(b.rows),
                    bytes(b.per_batch),
                    bytes(w as u64 * b.buffers),
                    bytes(b.held)
                ));
                tries[0]
            }
        };
        let h = b.largest(p, w, self.batches).max(1);
        let mut why = b.why(h, p, w);
        if (p, w) != tries[0] {
            let mut less = Vec::new();
            if p != tries[0].0 {
                less.push(format!("{p} batch ahead instead of {}", tries[0].0));
            }
            if w != self.threads {
                less.push(format!("{w} worker instead of {}", self.threads));
            }
            why += &format!(
                "; {}: with them even one batch at a time would exceed the batches' memory",
                less.join(" and ")
            );
        }
        Some(TypedSizes {
            warning,
            ..TypedSizes::new(h, p, w, why)
        })
    }

    /// By predicted time ([`Times::per_batch`]): the fastest configuration that fits, staged or
    /// not; `None` where nothing fits.
    fn by_time(&self) -> Option<TypedSizes> {
        let t = &self.needs.times;
        let mut best: Option<(f64, usize, usize, usize, bool)> = None;
        for staged in [false, true] {
            let b = Held::of(self.share, self.needs, staged);
            for (p, w) in self.tries() {
                for h in (1..=b.largest(p, w, self.batches)).rev() {
                    let s = t.per_batch(h, w, staged, self.batches);
                    if best.is_none_or(|b| s < (1.0 - TIME_MARGIN) * b.0) {
                        best = Some((s, h, p, w, staged));
                    }
                }
            }
        }
        let (s, h, p, w, staged) = best?;
        let mut why = Held::of(self.share, self.needs, staged).why(h, p, w);
        let (p0, w0) = self.tries()[0];
        let mut less = Vec::new();
        if p != p0 {
            less.push(format!("{p} batch{} ahead", if p > 1 { "es" } else { "" }));
        }
        if w != w0 {
            less.push(format!("{w} worker{}", if w > 1 { "s" } else { "" }));
        }
        why += &format!(
            "; rows {}{}: the fastest that fits, predicted {s:.2} s a batch (rows read {:.2} s a \
             batch, a pass {:.2} s, sampling {:.2} s, estimated on the probe batches)",
            match staged {
                true => "staged where a pass over a feature file pays",
                false => "not staged",
            },
            match less.is_empty() {
                true => String::new(),
                false => format!(" and {}", less.join(" and ")),
            },
            t.read,
            t.scan,
            t.sample
        );
        if let Some(plain) = self.bytes(false, false) {
            if (plain.hyperbatch, plain.prefetch, plain.workers, false) != (h, p, w, staged) {
                why += &format!(
                    ", against {:.2} s for the largest H unstaged ({} on {} threads)",
                    t.per_batch(plain.hyperbatch, plain.workers, false, self.batches),
                    plain.hyperbatch,
                    plain.workers
                );
            }
        }
        Some(TypedSizes {
            staging: staged,
            ..TypedSizes::new(h, p, w, why)
        })
    }
}

#[cfg(test)]
mod tests;
