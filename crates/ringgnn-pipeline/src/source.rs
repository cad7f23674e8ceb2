//! Where jobs come from: [`JobSource`], and [`Jobs`], a source of jobs known in advance.

/// Hands out jobs, in slot order. Called under a lock, one claim at a time.
pub trait JobSource: Send + 'static {
    type Job: Send + 'static;

    /// The next job and the number of output slots it fills (at least 1), or `None` when there
    /// are no jobs left.
    fn next_job(&mut self) -> Option<(Self::Job, usize)>;

    /// Jobs left, when known: a run starts no more workers than that.
    fn jobs_left(&self) -> Option<usize> {
        None
    }
}

/// Jobs known in advance, each with its number of slots.
pub struct Jobs<J> {
    jobs: std::vec::IntoIter<(J, usize)>,
}

impl<J> Jobs<J> {
    /// `jobs` in order, each `(job, slots)` (a job of 0 slots is counted as 1).
    pub fn new(jobs: Vec<(J, usize)>) -> Self {
        Jobs {
            jobs: jobs.into_iter(),
        }
    }
}

impl<J: Send + 'static> JobSource for Jobs<J> {
    type Job = J;

    fn next_job(&mut self) -> Option<(J, usize)> {
        self.jobs.next().map(|(j, n)| (j, n.max(1)))
    }

    fn jobs_left(&self) -> Option<usize> {
        Some(self.jobs.len())
    }
}
