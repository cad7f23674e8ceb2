//! The typed loader's hyperbatch size, batches ahead and workers ([`choose`]), from what its probe
//! batches measured ([`TypedNeeds::measured`]) within the batches' part of its memory plan.
//!
//! Read from disk, an epoch runs **one hyperbatch at a time sampled with every thread**, as the
//! homogeneous loader's drivers do (`stages::HyperFit`): one driver holds a hyperbatch of `H`
//! batches (each relation's file read once per hop for all of them), or two where batches
//! gather feature rows ([`crate::loader::LOAD_DRIVERS`]: one gathers its batches for the
//! consumer while the other samples the next), each sampling with all the loader's threads. A
//! driver gathers a batch's rows only when it is among the next `prefetch` the consumer takes,
//! so an epoch holds `drivers * H` *sampled* batches and `prefetch + 1` batches of rows. `auto`
//! counts everything an epoch holds, as measured: per sampled batch its share of the sampler's
//! hop buffers and its sample before its last hop was relabelled (hyperbatches spill), the
//! largest times [`MEASURED_MARGIN`]; whatever `H`, the rows and samples of the batches ahead
//! and the consumer's, each driver's read and spill buffers, dedup maps and the finished samples
//! it spills (one a sampling thread) or gathers, and the labels. The largest `H` whose total fits
//! the share is found by [`super::batches_fitting`], the rule the homogeneous drivers'
//! `HyperFit` uses too. Where not even one batch at a time fits the drivers, it takes one batch
//! ahead instead of [`DEFAULT_PREFETCH`], then one driver; where the drivers fit fewer than two
//! batches a hyperbatch, each of the threads samples one batch at a time as a worker of its own
//! (as in memory, where every neighbor file is held and there is nothing to share: `H` is 1),
//! with the same fallbacks, as the homogeneous plan does, and it warns where even one batch on
//! one worker does not fit.
//!
//! Where rows may be staged, staging's buffers take room from the hyperbatches and its pass pays
//! more the more batches share it: with the probe's [`Times`], the configuration predicted
//! fastest among those that fit (H, batches ahead, drivers or workers, staged or not) is taken.

use super::bytes;
use crate::stages::{HyperFit, SizedFrom};
use crate::typed::ProbeBytes;

/// Batches sampled as probes to measure what a batch holds.
pub const PROBE_BATCHES: usize = 3;
/// The margin on the largest probe batch: the homogeneous drivers' own on what they measured
/// of fewer than 16 batches ([`HyperFit::margin`]; the probe is a hyperbatch of
/// [`PROBE_BATCHES`], measured as the drivers measure theirs). Batches differ (a seed set that
/// reaches hubs draws more; 3 batches cannot show an epoch whose later batches are larger), and
/// some workspaces grow with H: on R-MAT 22 at seed times a batch's state in hyperbatches of 13
/// to 41 was within 5% of the probe's largest, but the sampler's scratch grew from 15.2 to
/// 22.7 MB (docs/ARCHITECTURE.md, "The typed loaders' plan").
pub const MEASURED_MARGIN: f64 = HyperFit::margin(SizedFrom::Epoch(PROBE_BATCHES as u64));
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
    /// `workers` workers (or drivers), rows `staged` or not: each batch's rows take `read`, or, staged, the
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
/// worker's read and spill buffers (its sampler's threads' readers' too, as measured: fixed
/// sizes, no margin), its sampler's dedup maps and the finished sample it spills or gathers; `sample` a finished sample (each further sampling thread of a driver may spill
/// one at once); `held` what the loader holds whatever its epochs (the labels); staging's part,
/// a batch's (`staging_per_batch`) and a worker's (`staging_buffers`); the seconds a batch
/// takes (`times`); and `drivers`, the hyperbatch drivers an epoch read from disk runs (1, or
/// [`crate::loader::LOAD_DRIVERS`] where batches gather feature rows; 0 is taken as 1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TypedNeeds {
    pub per_batch: u64,
    pub rows: u64,
    pub buffers: u64,
    pub sample: u64,
    pub held: u64,
    pub staging_per_batch: u64,
    pub staging_buffers: u64,
    pub times: Times,
    pub drivers: usize,
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
            buffers: worker
                + largest(probes, |p| p.readers, 1.0)
                + largest(probes, |p| p.scratch, MEASURED_MARGIN)
                + sample,
            sample,
            held,
            staging_per_batch: largest(probes, |p| p.staging, MEASURED_MARGIN),
            staging_buffers: staging,
            times: Times::measured(probes),
            drivers: 0,
        }
    }

    /// These needs for an epoch run by `drivers` hyperbatch drivers from disk.
    pub fn with_drivers(self, drivers: usize) -> Self {
        TypedNeeds { drivers, ..self }
    }
}

/// What an epoch of a typed loader runs with: `hyperbatch` (H), `prefetch` (batches whose rows
/// are gathered ahead of the consumer's), `workers` (the run's worker threads, each holding one
/// job at a time), `threads` (the threads each worker's sampler draws and relabels its
/// hyperbatch with), `shared` (whether the workers are hyperbatch drivers: each samples one
/// hyperbatch at a time with every thread, from disk; else each samples its own jobs on its
/// own thread), `staging` (whether its hyperbatches' rows may be staged), `why` in words, and a
/// `warning` where even one batch at a time exceeds the share.
#[derive(Clone, Debug, PartialEq)]
pub struct TypedSizes {
    pub hyperbatch: usize,
    pub prefetch: usize,
    pub workers: usize,
    pub threads: usize,
    pub shared: bool,
    pub why: String,
    pub staging: bool,
    pub warning: Option<String>,
}

impl TypedSizes {
    /// `workers` each sampling their own jobs of `hyperbatch` batches on their own thread.
    fn new(hyperbatch: usize, prefetch: usize, workers: usize, why: String) -> Self {
        TypedSizes {
            hyperbatch,
            prefetch,
            workers,
            threads: 1,
            shared: false,
            why,
            staging: true,
            warning: None,
        }
    }

    /// `drivers` each sampling one hyperbatch at a time with `threads` threads.
    fn driven(
        hyperbatch: usize,
        prefetch: usize,
        drivers: usize,
        threads: usize,
        why: String,
    ) -> Self {
        TypedSizes {
            threads,
            shared: true,
            ..TypedSizes::new(hyperbatch, prefetch, drivers, why)
        }
    }

    /// Batches the run may sample ahead of the consumer's: drivers, a hyperbatch each; else
    /// jobs of `H` batches, one per worker, and at least the `prefetch + workers - 1` batches a
    /// per-batch loader keeps ahead.
    pub fn window(&self) -> usize {
        match self.shared {
            true => self.workers * self.hyperbatch,
            false => jobs_in_flight(self.hyperbatch, self.workers, self.prefetch) * self.hyperbatch,
        }
    }
}

/// Jobs (of `h` batches) submitted ahead of the one the consumer is taking: one per thread, and
/// at least the `prefetch + threads - 1` batches a per-batch loader keeps ahead.
pub fn jobs_in_flight(h: usize, threads: usize, prefetch: usize) -> usize {
    threads.max((prefetch + threads - 1).div_ceil(h.max(1)))
}

/// The sizes of an epoch of `batches` batches within `share` bytes. `asked`: a number fixes H
/// (at most `batches`), run by the drivers (`needs.drivers`) from disk when it is more than 1;
/// `None` is `auto`: 1 when every neighbor file is in memory, else, with what the probes
/// measured (`needs`), the largest H at most `ceil(batches / drivers)` (so every driver has a
/// job) for which `(prefetch + 1) * rows + drivers * (buffers + H * per_batch) + held` fits the
/// share (each driver's buffers with a finished sample per further thread), by bytes or, with
/// staging and the probe's times, by predicted time (see the module docs); where not even
/// `H = 2` fits, `threads` workers of one batch at a time. `prefetch`: `None` for
/// [`DEFAULT_PREFETCH`] or one where that does not fit.
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
        let why = format!("{h} (as given)");
        return match h > 1 && !in_memory {
            true => TypedSizes::driven(h, p, needs.drivers.max(1), threads, why),
            false => TypedSizes::new(h, p, threads, why),
        };
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

/// Who holds an epoch's sampled batches: hyperbatch drivers sampling with every thread, or
/// workers sampling one batch at a time on their own thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holders {
    Drivers,
    Workers,
}

/// What an epoch holds for (H, batches ahead, holders), staged or not, and its words.
struct Held {
    share: u64,
    per_batch: u64,
    rows: u64,
    buffers: u64,
    held: u64,
}

impl Held {
    /// Each holder with `samples` finished samples at once (one a sampling thread).
    fn of(share: u64, needs: &TypedNeeds, staged: bool, samples: usize) -> Self {
        let (per, buffers) = match staged {
            true => (needs.staging_per_batch, needs.staging_buffers),
            false => (0, 0),
        };
        let more = samples.saturating_sub(1) as u64 * needs.sample;
        Held {
            share,
            per_batch: needs.per_batch + per,
            rows: needs.rows,
            buffers: needs.buffers + buffers + more,
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

    /// Why H, `p` ahead and `w` holders (`threads` sampling threads each when drivers).
    fn why(&self, h: usize, p: usize, w: usize, holders: Holders, threads: usize) -> String {
        let total = self.total(h, p, w);
        let fits = match total <= self.share {
            true => "fit in",
            false => "exceed, even one batch at a time,",
        };
        let who = match (holders, w) {
            (Holders::Workers, _) => format!("{w} threads"),
            (Holders::Drivers, 1) => {
                format!("one hyperbatch at a time read from disk, sampled with {threads} threads")
            }
            (Holders::Drivers, _) => format!(
                "{w} hyperbatches at a time read from disk (one gathers its rows while the \
                 next is sampled), each sampled with {threads} threads"
            ),
        };
        format!(
            "{h} (auto: {who}, {} per sampled batch (measured on {PROBE_BATCHES} probe \
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
    /// (batches ahead, holders) in the order they are tried: as given (the drivers, or a worker
    /// per thread), then one batch ahead (when `prefetch` is not given), then one holder.
    fn tries(&self, holders: Holders) -> Vec<(usize, usize)> {
        let p = self.prefetch.unwrap_or(DEFAULT_PREFETCH);
        let w = match holders {
            Holders::Drivers => self.needs.drivers.max(1),
            Holders::Workers => self.threads,
        };
        let mut tries = vec![(p, w)];
        if self.prefetch.is_none() && p > 1 {
            tries.push((1, w));
        }
        if w > 1 {
            let last = tries[tries.len() - 1].0;
            tries.push((last, 1));
        }
        tries
    }

    /// What an epoch holds, `staged` or not, for these holders.
    fn held(&self, staged: bool, holders: Holders) -> Held {
        let samples = match holders {
            Holders::Drivers => self.threads,
            Holders::Workers => 1,
        };
        Held::of(self.share, self.needs, staged, samples)
    }

    /// The words for H, `p` ahead and `w` holders, and what was given up against the first try.
    fn why(&self, b: &Held, h: usize, (p, w): (usize, usize), holders: Holders) -> String {
        let mut why = b.why(h, p, w, holders, self.threads);
        let first = self.tries(holders)[0];
        if (p, w) != first {
            let mut less = Vec::new();
            if p != first.0 {
                less.push(format!("{p} batch ahead instead of {}", first.0));
            }
            if w != first.1 {
                less.push(format!("{w} worker instead of {}", first.1));
            }
            why += &format!(
                "; {}: with them even one batch at a time would exceed the batches' memory",
                less.join(" and ")
            );
        }
        why
    }

    /// By bytes, `staged` or not: at the first (batches ahead, drivers) where one batch fits
    /// the drivers, the largest H there if it is 2 or more; else one batch at a time, each
    /// thread a worker, at the first (batches ahead, workers) where it fits; where none fits,
    /// `None`, or with `warn` the batches as asked and the warning.
    fn bytes(&self, staged: bool, warn: bool) -> Option<TypedSizes> {
        let d = self.held(staged, Holders::Drivers);
        let tries = self.tries(Holders::Drivers);
        if let Some(&(p, w)) = tries.iter().find(|&&(p, w)| d.total(1, p, w) <= self.share) {
            let h = d.largest(p, w, self.batches);
            if h >= 2 {
                let why = self.why(&d, h, (p, w), Holders::Drivers);
                return Some(TypedSizes::driven(h, p, w, self.threads, why));
            }
        }
        let b = self.held(staged, Holders::Workers);
        let tries = self.tries(Holders::Workers);
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
        let why = self.why(&b, 1, (p, w), Holders::Workers);
        Some(TypedSizes {
            warning,
            ..TypedSizes::new(1, p, w, why)
        })
    }

    /// By predicted time ([`Times::per_batch`]): the fastest configuration that fits, staged or
    /// not, drivers of two batches or more or workers of one; `None` where nothing fits.
    fn by_time(&self) -> Option<TypedSizes> {
        let t = &self.needs.times;
        let mut best: Option<(f64, usize, usize, usize, bool, Holders)> = None;
        for staged in [false, true] {
            for holders in [Holders::Drivers, Holders::Workers] {
                let b = self.held(staged, holders);
                for (p, w) in self.tries(holders) {
                    let (most, least) = match holders {
                        Holders::Drivers => (b.largest(p, w, self.batches), 2),
                        Holders::Workers => (b.largest(p, w, self.batches).min(1), 1),
                    };
                    for h in (least..=most).rev() {
                        let s = t.per_batch(h, w, staged, self.batches);
                        if best.is_none_or(|b| s < (1.0 - TIME_MARGIN) * b.0) {
                            best = Some((s, h, p, w, staged, holders));
                        }
                    }
                }
            }
        }
        let (s, h, p, w, staged, holders) = best?;
        let mut why = self
            .held(staged, holders)
            .why(h, p, w, holders, self.threads);
        let (p0, w0) = self.tries(holders)[0];
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
            let same = (
                plain.hyperbatch,
                plain.prefetch,
                plain.workers,
                plain.shared,
            );
            if same != (h, p, w, holders == Holders::Drivers) || staged {
                let on = match (plain.shared, plain.workers) {
                    (true, 1) => "one driver".to_string(),
                    (true, n) => format!("{n} drivers"),
                    (false, 1) => "1 thread".to_string(),
                    (false, n) => format!("{n} threads"),
                };
                why += &format!(
                    ", against {:.2} s for the largest H unstaged ({} on {on})",
                    t.per_batch(plain.hyperbatch, plain.workers, false, self.batches),
                    plain.hyperbatch,
                );
            }
        }
        let sizes = match holders {
            Holders::Drivers => TypedSizes::driven(h, p, w, self.threads, why),
            Holders::Workers => TypedSizes::new(h, p, w, why),
        };
        Some(TypedSizes {
            staging: staged,
            ..sizes
        })
    }
}

#[cfg(test)]
mod tests;
