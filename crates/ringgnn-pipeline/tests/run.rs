//! The pipeline with toy stages: outputs in slot order whatever the threads and delays, jobs of
//! several slots, the backpressure bound, turns, stopping early, and every failure path (a
//! stage error, a start error, a panic, missing outputs) ending the run at its slot.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringgnn_pipeline::{Emit, JobSource, Jobs, Next, Run, RunOptions, Stage, WorkerFailed};

#[derive(Debug, PartialEq)]
enum Error {
    Failed(WorkerFailed),
    Stage(String),
}

impl From<WorkerFailed> for Error {
    fn from(e: WorkerFailed) -> Self {
        Error::Failed(e)
    }
}

/// A job: its values, one output each (`value * 10`), with a delay per value and a way to fail.
#[derive(Clone, Debug)]
struct Job {
    values: Vec<u64>,
    delay_ms: u64,
}

#[derive(Default)]
struct Toy {
    /// Value whose output is an error of the stage.
    fail_at: Option<u64>,
    panic_at: Option<u64>,
    /// Emit one output fewer than the job has.
    short: bool,
    fail_start: bool,
    /// Wait for the turn with this depth before each output.
    turn: Option<usize>,
    started: AtomicUsize,
}

impl Stage for Toy {
    type Job = Job;
    type State = ();
    type Output = u64;
    type Error = Error;

    fn start(&self, _: &Arc<AtomicBool>) -> Result<(), Error> {
        self.started.fetch_add(1, Ordering::SeqCst);
        if self.fail_start {
            return Err(Error::Stage("no backend".into()));
        }
        Ok(())
    }

    fn run(&self, _: &mut (), job: Job, out: &mut Emit<'_, u64, Error>) -> Result<(), Error> {
        let n = job.values.len() - usize::from(self.short);
        for &v in &job.values[..n] {
            std::thread::sleep(Duration::from_millis(job.delay_ms));
            if self.fail_at == Some(v) {
                return Err(Error::Stage(format!("bad value {v}")));
            }
            if self.panic_at == Some(v) {
                panic!("value {v}");
            }
            if let Some(d) = self.turn {
                if !out.wait_turn(d) {
                    return Err(Error::Stage("stopped".into()));
                }
            }
            out.emit(Ok(v * 10));
        }
        Ok(())
    }
}

fn opts(threads: usize, window: usize) -> RunOptions {
    RunOptions::new(
        NonZeroUsize::new(threads).unwrap(),
        NonZeroUsize::new(window).unwrap(),
        "test",
    )
}

/// `count` jobs of `per` consecutive values each, delays varying so workers finish out of order.
fn jobs(count: u64, per: u64) -> Jobs<Job> {
    Jobs::new(
        (0..count)
            .map(|j| {
                let values: Vec<u64> = (j * per..(j + 1) * per).collect();
                let n = values.len();
                let delay_ms = j * 7 % 5;
                (Job { values, delay_ms }, n)
            })
            .collect(),
    )
}

#[test]
fn outputs_come_in_slot_order_whatever_the_threads_and_job_sizes() {
    for threads in [1, 2, 4] {
        for per in [1, 3] {
            let run =
                Run::start(Arc::new(Toy::default()), jobs(12, per), opts(threads, 2)).unwrap();
            let got: Vec<u64> = run.map(|r| r.unwrap()).collect();
            let want: Vec<u64> = (0..12 * per).map(|v| v * 10).collect();
            assert_eq!(got, want, "{threads} threads, {per} per job");
        }
    }
}

#[test]
fn no_jobs_no_outputs_and_workers_are_not_over_started() {
    let toy = Arc::new(Toy::default());
    let mut run = Run::start(toy.clone(), Jobs::<Job>::new(vec![]), opts(4, 2)).unwrap();
    assert!(run.next().is_none());
    assert_eq!(toy.started.load(Ordering::SeqCst), 0);
    // Two jobs and four threads: two workers.
    let live = Arc::new(AtomicUsize::new(0));
    let mut o = opts(4, 2);
    o.live = live.clone();
    let run = Run::start(toy.clone(), jobs(2, 1), o).unwrap();
    assert!(live.load(Ordering::SeqCst) <= 2);
    assert_eq!(run.count(), 2);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

/// A source that does not know how many jobs it has (a queue of requests).
struct Unknown(u64);

impl JobSource for Unknown {
    type Job = Job;
    fn next_job(&mut self) -> Option<(Job, usize)> {
        (self.0 < 5).then(|| {
            self.0 += 1;
            let job = Job {
                values: vec![self.0],
                delay_ms: 0,
            };
            (job, 1)
        })
    }
}

#[test]
fn a_source_of_unknown_length_ends_when_it_runs_dry() {
    let run = Run::start(Arc::new(Toy::default()), Unknown(0), opts(3, 2)).unwrap();
    let got: Vec<u64> = run.map(|r| r.unwrap()).collect();
    assert_eq!(got, vec![10, 20, 30, 40, 50]);
}

#[test]
fn backpressure_bounds_finished_unconsumed_outputs() {
    for (window, per) in [(1, 1), (2, 1), (3, 1), (2, 3)] {
        let mut run = Run::start(Arc::new(Toy::default()), jobs(40, per), opts(4, window)).unwrap();
        // A slow consumer: the workers run ahead as far as the window lets them.
        let mut n = 0;
        for r in run.by_ref() {
            r.unwrap();
            n += 1;
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(n, 40 * per as usize);
        let peak = run.peak_queued();
        assert!(
            peak < window + per as usize,
            "window {window}, {per} per job: peak {peak}"
        );
        assert!(peak >= 1);
    }
}

#[test]
fn a_turn_bounds_a_stage_tighter_and_never_deadlocks() {
    let toy = Arc::new(Toy {
        turn: Some(1),
        ..Default::default()
    });
    // Jobs of 4 slots with a window of 8 but turns of depth 1: every output waits until the
    // consumer has taken the previous one, and still nothing blocks forever.
    let mut run = Run::start(toy, jobs(6, 4), opts(3, 8)).unwrap();
    let mut held = Vec::new();
    for r in run.by_ref() {
        held.push(r.unwrap()); // the consumer keeps everything
    }
    assert_eq!(held.len(), 24);
    assert!(run.peak_queued() <= 1, "{}", run.peak_queued());
}

#[test]
fn dropping_a_run_stops_and_joins_its_workers() {
    let live = Arc::new(AtomicUsize::new(0));
    let toy = Arc::new(Toy::default());
    let mut o = opts(4, 2);
    o.live = live.clone();
    let mut run = Run::start(toy, jobs(1000, 1), o).unwrap();
    assert_eq!(run.next().unwrap().unwrap(), 0);
    drop(run);
    assert_eq!(live.load(Ordering::SeqCst), 0, "every worker joined");
}

#[test]
fn next_within_times_out_then_delivers() {
    let toy = Arc::new(Toy::default());
    let slow = Jobs::new(vec![(
        Job {
            values: vec![1],
            delay_ms: 300,
        },
        1,
    )]);
    let mut run = Run::start(toy, slow, opts(1, 1)).unwrap();
    assert!(matches!(
        run.next_within(Duration::from_millis(10)),
        Next::NotYet
    ));
    loop {
        match run.next_within(Duration::from_millis(50)) {
            Next::NotYet => continue,
            Next::Item(r) => {
                assert_eq!(r.unwrap(), 10);
                break;
            }
            Next::End => panic!("ended early"),
        }
    }
    assert!(matches!(
        run.next_within(Duration::from_millis(10)),
        Next::End
    ));
}

fn collect(run: Run<u64, Error>) -> (Vec<u64>, Option<Error>) {
    let mut ok = Vec::new();
    for r in run {
        match r {
            Ok(v) => ok.push(v),
            Err(e) => return (ok, Some(e)),
        }
    }
    (ok, None)
}

#[test]
fn a_stage_error_is_the_output_of_its_slot_and_ends_the_run() {
    for (threads, per) in [(1, 1), (3, 1), (3, 4)] {
        let toy = Toy {
            fail_at: Some(9),
            ..Default::default()
        };
        let run = Run::start(Arc::new(toy), jobs(10, per), opts(threads, 2)).unwrap();
        let (ok, err) = collect(run);
        assert_eq!(ok, (0..9).map(|v| v * 10).collect::<Vec<_>>());
        assert_eq!(err, Some(Error::Stage("bad value 9".into())));
    }
}

#[test]
fn a_panic_a_start_failure_and_missing_outputs_are_errors_not_hangs() {
    let panics = Toy {
        panic_at: Some(5),
        ..Default::default()
    };
    let (ok, err) = collect(Run::start(Arc::new(panics), jobs(10, 1), opts(2, 2)).unwrap());
    assert_eq!(ok.len(), 5);
    match err {
        Some(Error::Failed(WorkerFailed { slot: 5, msg })) => {
            assert!(msg.contains("panicked (value 5)"), "{msg}")
        }
        e => panic!("{e:?}"),
    }

    let no_start = Toy {
        fail_start: true,
        ..Default::default()
    };
    let (ok, err) = collect(Run::start(Arc::new(no_start), jobs(10, 1), opts(2, 2)).unwrap());
    assert!(ok.is_empty());
    assert_eq!(err, Some(Error::Stage("no backend".into())));

    let short = Toy {
        short: true,
        ..Default::default()
    };
    let (ok, err) = collect(Run::start(Arc::new(short), jobs(3, 2), opts(1, 2)).unwrap());
    assert_eq!(ok, vec![0]);
    match err {
        Some(Error::Failed(WorkerFailed { slot: 1, msg })) => {
            assert!(msg.contains("emitted 1 of its job's 2 outputs"), "{msg}")
        }
        e => panic!("{e:?}"),
    }
}

/// A source that panics on its third claim.
struct Panicky(u64);

impl JobSource for Panicky {
    type Job = Job;
    fn next_job(&mut self) -> Option<(Job, usize)> {
        self.0 += 1;
        assert!(self.0 < 3, "source broke");
        Some((
            Job {
                values: vec![self.0],
                delay_ms: 0,
            },
            1,
        ))
    }
}

#[test]
fn a_panicking_source_ends_the_run_with_an_error() {
    let run = Run::start(Arc::new(Toy::default()), Panicky(0), opts(2, 2)).unwrap();
    let (ok, err) = collect(run);
    assert_eq!(ok, vec![10, 20]);
    assert!(
        matches!(err, Some(Error::Failed(WorkerFailed { slot: 2, .. }))),
        "{err:?}"
    );
}
