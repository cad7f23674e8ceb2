//! Exact tests of the queue over a fake engine (no I/O): which requests share a wave, the wait
//! for company, the room, admission, deadlines, cancellation, failed waves and close.

use std::num::NonZeroUsize;
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{lock, wave_cap, Job, Queue, QueueOptions, Room, Waves, DEADLINE_SLACK};
use crate::queue::CancelToken;
use crate::{Result, ServeError};

/// A request of the fake engine: `tag` comes back as its answer.
#[derive(Clone, Copy, Debug, Default)]
struct W {
    tag: u32,
    sample: bool,
    /// Sampling requests of one `config` share a wave.
    config: u32,
    /// Its wave waits for [`Fake::open_gate`].
    gated: bool,
    panics: bool,
}

/// Records every wave (its tags, and whether it was large) and the most large waves at once.
#[derive(Default)]
struct Fake {
    waves: Mutex<Vec<(Vec<u32>, bool)>>,
    gate: Mutex<bool>,
    opened: Condvar,
    large_now: Mutex<(usize, usize)>,
    queue: Option<Queue<Fake>>,
}

impl Waves for Fake {
    type Work = W;
    type Answer = u32;
    type Worker = usize;

    fn is_sample(w: &W) -> bool {
        w.sample
    }

    fn joins(&self, taken: &[Job<Self>], next: &W) -> bool {
        !next.sample
            || taken
                .iter()
                .all(|j| !j.work.sample || j.work.config == next.config)
    }

    fn serve(&self, _w: &mut usize, wave: Vec<Job<Self>>, large: bool) {
        self.waves
            .lock()
            .unwrap()
            .push((wave.iter().map(|j| j.work.tag).collect(), large));
        if large {
            let mut n = self.large_now.lock().unwrap();
            n.0 += 1;
            n.1 = n.1.max(n.0);
        }
        if wave.iter().any(|j| j.work.gated) {
            let mut open = self.gate.lock().unwrap();
            while !*open {
                open = self.opened.wait(open).unwrap();
            }
        }
        if large {
            thread::sleep(Duration::from_millis(30));
            self.large_now.lock().unwrap().0 -= 1;
        }
        if wave.iter().any(|j| j.work.panics) {
            panic!("a fake wave panics");
        }
        for j in &wave {
            j.answer(Ok(j.work.tag));
        }
    }
}

impl Fake {
    fn new(workers: usize, max_wait_ms: u64, queue: usize, wave_edges: u64) -> Arc<Fake> {
        let opts = QueueOptions {
            max_wait: Duration::from_millis(max_wait_ms),
            max_wave: NonZeroUsize::new(64).unwrap(),
            queue: NonZeroUsize::new(queue).unwrap(),
            wave_edges,
            wave_rows: wave_edges,
        };
        Arc::new(Fake {
            queue: Some(Queue::new(
                opts,
                (0..workers).collect(),
                Room::new(0, Vec::new()),
            )),
            ..Default::default()
        })
    }

    fn q(&self) -> &Queue<Fake> {
        self.queue.as_ref().unwrap()
    }

    fn call(&self, w: W, cost: u64) -> Result<u32> {
        self.q().call(self, w, cost, None, None).map(|(a, _)| a)
    }

    fn open_gate(&self) {
        *self.gate.lock().unwrap() = true;
        self.opened.notify_all();
    }

    fn waves(&self) -> Vec<(Vec<u32>, bool)> {
        self.waves.lock().unwrap().clone()
    }

    /// Wait until `n` requests are queued.
    fn until_queued(&self, n: u64) {
        let t = Instant::now();
        while self.q().stats((0, 0), (0, 0, 0)).queued != n {
            assert!(t.elapsed() < Duration::from_secs(10), "never {n} queued");
            thread::sleep(Duration::from_millis(1));
        }
    }
}

fn sample(tag: u32, config: u32) -> W {
    W {
        tag,
        sample: true,
        config,
        ..Default::default()
    }
}

fn gated(tag: u32) -> W {
    W {
        gated: true,
        ..sample(tag, 0)
    }
}

/// With the one worker held by a gated request, `queued` requests queue from their own threads
/// in order; then the gate opens. Their answers, in order.
fn behind_a_gate(f: &Arc<Fake>, queued: Vec<(W, u64)>) -> Vec<Result<u32>> {
    let first = {
        let f = f.clone();
        thread::spawn(move || f.call(gated(0), 1))
    };
    f.until_queued(0);
    while f.waves().is_empty() {
        thread::sleep(Duration::from_millis(1));
    }
    let mut calls = Vec::new();
    for (i, (w, cost)) in queued.into_iter().enumerate() {
        let g = f.clone();
        calls.push(thread::spawn(move || g.call(w, cost)));
        f.until_queued(i as u64 + 1);
    }
    f.open_gate();
    assert_eq!(first.join().unwrap().unwrap(), 0);
    calls.into_iter().map(|c| c.join().unwrap()).collect()
}

#[test]
fn a_request_alone_is_a_wave_of_its_own_and_gets_its_answer() {
    let f = Fake::new(1, 0, 8, 100);
    for tag in 1..=3 {
        assert_eq!(f.call(sample(tag, 0), 1).unwrap(), tag);
    }
    assert_eq!(
        f.waves(),
        vec![(vec![1], false), (vec![2], false), (vec![3], false)]
    );
    let st = f.q().stats((7, 8), (1, 2, 3));
    assert_eq!((st.waves, st.wave_requests, st.queued), (3, 3, 0));
    assert_eq!((st.reads, st.bytes_read), (7, 8));
    assert_eq!((st.page_hits, st.page_misses, st.pages_cached), (1, 2, 3));
    assert_eq!(st.latency.count(), 3);
}

#[test]
fn requests_queued_while_the_worker_is_out_share_the_next_wave() {
    let f = Fake::new(1, 0, 8, 100);
    let got = behind_a_gate(&f, (1..=3).map(|t| (sample(t, 0), 1)).collect());
    assert_eq!(
        got.into_iter().collect::<Result<Vec<_>>>().unwrap(),
        [1, 2, 3]
    );
    assert_eq!(f.waves(), vec![(vec![0], false), (vec![1, 2, 3], false)]);
}

#[test]
fn a_request_that_may_not_join_keeps_its_place_for_the_next_wave() {
    let f = Fake::new(1, 0, 8, 100);
    let feature = W {
        tag: 4,
        ..Default::default()
    };
    let got = behind_a_gate(
        &f,
        vec![
            (sample(1, 7), 1),
            (sample(2, 8), 1),
            (sample(3, 7), 1),
            (feature, 1),
        ],
    );
    assert_eq!(
        got.into_iter().collect::<Result<Vec<_>>>().unwrap(),
        [1, 2, 3, 4]
    );
    assert_eq!(
        f.waves(),
        vec![(vec![0], false), (vec![1, 3, 4], false), (vec![2], false)]
    );
}

#[test]
fn a_wave_stops_at_the_first_request_that_does_not_fit_and_a_large_one_comes_alone() {
    let f = Fake::new(1, 0, 8, 10);
    let got = behind_a_gate(
        &f,
        vec![
            (sample(1, 0), 6),
            (sample(2, 0), 4),
            (sample(3, 0), 1),
            (sample(4, 0), 11),
        ],
    );
    assert_eq!(
        got.into_iter().collect::<Result<Vec<_>>>().unwrap(),
        [1, 2, 3, 4]
    );
    // 6 + 4 fit 10; 3 does not; 3 then 11 do not fit together; 11 is larger than a wave.
    assert_eq!(
        f.waves(),
        vec![
            (vec![0], false),
            (vec![1, 2], false),
            (vec![3], false),
            (vec![4], true)
        ]
    );
}

#[test]
fn large_requests_take_the_room_one_at_a_time() {
    let f = Fake::new(4, 0, 8, 10);
    let start = Arc::new(Barrier::new(4));
    let calls: Vec<_> = (0..4)
        .map(|t| {
            let (f, start) = (f.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                f.call(sample(t, t), 50)
            })
        })
        .collect();
    for (t, c) in calls.into_iter().enumerate() {
        assert_eq!(c.join().unwrap().unwrap(), t as u32);
    }
    assert_eq!(f.waves().len(), 4);
    assert!(f.waves().iter().all(|(w, large)| w.len() == 1 && *large));
    assert_eq!(
        f.large_now.lock().unwrap().1,
        1,
        "two large requests at once"
    );
}

#[test]
fn a_wait_for_company_gathers_requests_that_arrive_within_it() {
    let f = Fake::new(1, 300, 8, 100);
    let first = {
        let f = f.clone();
        thread::spawn(move || f.call(sample(1, 0), 1))
    };
    thread::sleep(Duration::from_millis(30));
    assert_eq!(f.call(sample(2, 0), 1).unwrap(), 2);
    assert_eq!(first.join().unwrap().unwrap(), 1);
    assert_eq!(f.waves(), vec![(vec![1, 2], false)]);
}

#[test]
fn a_full_queue_answers_busy_and_counts_it() {
    let f = Fake::new(1, 0, 1, 100);
    let first = {
        let f = f.clone();
        thread::spawn(move || f.call(gated(0), 1))
    };
    while f.waves().is_empty() {
        thread::sleep(Duration::from_millis(1));
    }
    let queued = {
        let f = f.clone();
        thread::spawn(move || f.call(sample(1, 0), 1))
    };
    f.until_queued(1);
    assert!(matches!(f.call(sample(2, 0), 1), Err(ServeError::Busy(1))));
    f.open_gate();
    assert_eq!(first.join().unwrap().unwrap(), 0);
    assert_eq!(queued.join().unwrap().unwrap(), 1);
    assert_eq!(f.q().stats((0, 0), (0, 0, 0)).busy, 1);
}

#[test]
fn a_deadline_or_a_cancel_ends_the_wait_and_frees_the_place() {
    let f = Fake::new(1, 0, 8, 100);
    let first = {
        let f = f.clone();
        thread::spawn(move || f.call(gated(0), 1))
    };
    while f.waves().is_empty() {
        thread::sleep(Duration::from_millis(1));
    }
    let t = Instant::now();
    let late = f.q().call(
        &f,
        sample(1, 0),
        1,
        Some(t + Duration::from_millis(50)),
        None,
    );
    assert!(matches!(late, Err(ServeError::DeadlineExceeded)));
    assert!(t.elapsed() >= Duration::from_millis(50));
    assert_eq!(f.q().stats((0, 0), (0, 0, 0)).queued, 0);
    let token = CancelToken::default();
    let cancelled = {
        let (f, token) = (f.clone(), token.clone());
        thread::spawn(move || {
            f.q()
                .call(&f, sample(2, 0), 1, None, Some(token))
                .map(|a| a.0)
        })
    };
    f.until_queued(1);
    token.cancel();
    assert!(matches!(
        cancelled.join().unwrap(),
        Err(ServeError::Cancelled)
    ));
    assert_eq!(f.q().stats((0, 0), (0, 0, 0)).queued, 0);
    // A deadline already past is refused before it is queued.
    let past = f.q().call(&f, sample(3, 0), 1, Some(Instant::now()), None);
    assert!(matches!(past, Err(ServeError::DeadlineExceeded)));
    f.open_gate();
    assert_eq!(first.join().unwrap().unwrap(), 0);
    let st = f.q().stats((0, 0), (0, 0, 0));
    assert_eq!((st.deadline_exceeded, st.cancelled, st.waves), (2, 1, 1));
    assert_eq!(f.waves(), vec![(vec![0], false)]);
}

#[test]
fn a_wave_that_panics_answers_an_error_and_loses_only_its_worker() {
    let f = Fake::new(2, 0, 8, 100);
    let bad = W {
        panics: true,
        ..sample(1, 0)
    };
    let Err(ServeError::Internal(m)) = f.call(bad, 1) else {
        panic!("an internal error")
    };
    assert!(m.contains("the request's wave failed"), "{m}");
    assert_eq!(f.call(sample(2, 0), 1).unwrap(), 2);
    assert!(matches!(f.call(bad, 1), Err(ServeError::Internal(_))));
    let Err(ServeError::Internal(m)) = f.call(sample(3, 0), 1) else {
        panic!("no worker is left")
    };
    assert!(m.contains("every worker of this server failed"), "{m}");
}

#[test]
fn failing_a_wave_answers_and_counts_each_request() {
    let f = Fake::new(1, 0, 8, 100);
    let j = |tag| Job::<Fake> {
        work: sample(tag, 0),
        cost: 1,
        arrived: Instant::now(),
        deadline: None,
        cancel: CancelToken::default(),
        slot: Arc::new(super::Slot::new()),
    };
    let jobs = [j(1), j(2)];
    f.q().fail(&jobs, "disk on fire");
    for job in &jobs {
        let a = lock(&job.slot.state).answer.take();
        assert!(matches!(a, Some(Err(ServeError::Internal(m))) if m == "disk on fire"));
    }
    assert_eq!(f.q().stats((0, 0), (0, 0, 0)).failed, 2);
}

#[test]
fn close_answers_what_is_queued_then_refuses() {
    let f = Fake::new(1, 0, 8, 100);
    let first = {
        let f = f.clone();
        thread::spawn(move || f.call(gated(0), 1))
    };
    while f.waves().is_empty() {
        thread::sleep(Duration::from_millis(1));
    }
    let queued = {
        let f = f.clone();
        thread::spawn(move || f.call(sample(1, 0), 1))
    };
    f.until_queued(1);
    let closing = {
        let f = f.clone();
        thread::spawn(move || f.q().close())
    };
    thread::sleep(Duration::from_millis(30));
    assert!(!closing.is_finished(), "close waits for what is queued");
    assert!(matches!(
        f.call(sample(2, 0), 1),
        Err(ServeError::ShuttingDown)
    ));
    f.open_gate();
    assert_eq!(first.join().unwrap().unwrap(), 0);
    assert_eq!(queued.join().unwrap().unwrap(), 1);
    closing.join().unwrap();
    f.q().close();
    assert_eq!(f.waves(), vec![(vec![0], false), (vec![1], false)]);
}

#[test]
fn a_wave_takes_its_share_of_the_queue_unless_it_waited_for_company() {
    // (queued, workers, max_wave) -> cap
    for (q, w, m, want) in [
        (0, 2, 64, 1),
        (1, 2, 64, 1),
        (2, 2, 64, 1),
        (3, 2, 64, 2),
        (30, 2, 64, 15),
        (200, 2, 64, 64),
        (5, 1, 64, 5),
        (5, 4, 64, 2),
        (9, 2, 1, 1),
    ] {
        assert_eq!(
            wave_cap(q, w, m, false),
            want,
            "{q} queued, {w} workers, max {m}"
        );
        assert_eq!(wave_cap(q, w, m, true), m, "waiting: {q} queued");
    }
}

#[test]
fn a_cancel_that_comes_with_the_deadline_counts_as_the_deadline() {
    let f = Fake::new(1, 0, 8, 100);
    let now = Instant::now();
    let soon = Some(now + DEADLINE_SLACK / 2);
    let later = Some(now + DEADLINE_SLACK * 10);
    // A gRPC client cancels at its own deadline: within the slack of the server's, a deadline.
    assert!(matches!(
        f.q().gave_up(now, soon, true),
        Some(ServeError::DeadlineExceeded)
    ));
    // Well before its deadline, or with none, a cancel is the caller leaving.
    assert!(matches!(
        f.q().gave_up(now, later, true),
        Some(ServeError::Cancelled)
    ));
    assert!(matches!(
        f.q().gave_up(now, None, true),
        Some(ServeError::Cancelled)
    ));
    // Not cancelled: only a deadline already past ends the wait, with no slack.
    assert!(f.q().gave_up(now, soon, false).is_none());
    assert!(matches!(
        f.q().gave_up(now, Some(now), false),
        Some(ServeError::DeadlineExceeded)
    ));
    let st = f.q().stats((0, 0), (0, 0, 0));
    assert_eq!((st.deadline_exceeded, st.cancelled), (2, 2));
}
