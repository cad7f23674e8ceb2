//! Whether io_uring works in this process, and the choice of read backend that follows.
//!
//! io_uring is an optimisation, not a requirement: kernels without it, `kernel.io_uring_disabled`,
//! seccomp profiles of container runtimes and low memlock limits all make it unavailable, and
//! then [`open_backend`] with [`BackendKind::Auto`] falls back to `pread` with a reason for the
//! caller's one log line. The probe runs once per process; its cached *result* is inherited by
//! forked children, which is fine (rings are not, and the probe keeps none).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use io_uring::{opcode, types, IoUring};

use crate::{DirectFile, PreadBatch, ReadBatch, UringBatch};

/// Set to anything but "" or "0" to make [`probe_uring`] fail (forces the `pread` fallback).
pub const DISABLE_ENV: &str = "RINGGNN_DISABLE_URING";

static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
static PROBE_RUNS: AtomicUsize = AtomicUsize::new(0);

/// `Ok` if io_uring can create a ring and complete a NOP and a file read in this process,
/// otherwise a short human reason. The kernel is asked once per process; the environment
/// override [`DISABLE_ENV`] is read on every call.
pub fn probe_uring() -> Result<(), String> {
    if std::env::var_os(DISABLE_ENV).is_some_and(|v| !v.is_empty() && v != "0") {
        return Err(format!("disabled by {DISABLE_ENV}"));
    }
    PROBE.get_or_init(run_probe).clone()
}

/// How many times the kernel was actually probed in this process (at most once).
pub fn probe_runs() -> usize {
    PROBE_RUNS.load(Ordering::Relaxed)
}

fn run_probe() -> Result<(), String> {
    PROBE_RUNS.fetch_add(1, Ordering::Relaxed);
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    if sysctl == 2 {
        return Err("io_uring is disabled by sysctl kernel.io_uring_disabled = 2".into());
    }
    let mut ring = IoUring::new(4).map_err(|e| setup_error(&e, sysctl))?;
    let stat =
        File::open("/proc/self/stat").map_err(|e| format!("cannot open /proc/self/stat: {e}"))?;
    let mut buf = vec![0u8; 64];
    let nop = opcode::Nop::new().build().user_data(1);
    let read = opcode::Read::new(
        types::Fd(stat.as_raw_fd()),
        buf.as_mut_ptr(),
        buf.len() as u32,
    )
    .build()
    .user_data(2);
    // SAFETY: `buf` and `stat` stay alive until both completions are reaped, or are leaked
    // below when the kernel may still be using them.
    unsafe {
        let mut sq = ring.submission();
        sq.push(&nop)
            .map_err(|_| "io_uring submission queue full")?;
        sq.push(&read)
            .map_err(|_| "io_uring submission queue full")?;
    }
    let mut results = [None; 2];
    let mut submitted = 0;
    while results.iter().any(Option::is_none) {
        match ring.submit_and_wait(1) {
            Ok(n) => submitted += n,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN)) => {}
            Err(e) => {
                if submitted > 0 {
                    // The read may still be in flight: its buffer and file must never be freed.
                    std::mem::forget(buf);
                    std::mem::forget(stat);
                }
                return Err(format!("io_uring_enter failed: {e}"));
            }
        }
        for cqe in ring.completion() {
            results[(cqe.user_data() - 1) as usize] = Some(cqe.result());
        }
    }
    match results {
        [Some(0), Some(n)] if n > 0 => Ok(()),
        [Some(r), _] if r != 0 => Err(format!(
            "io_uring NOP failed: {}",
            io::Error::from_raw_os_error(-r)
        )),
        [_, Some(r)] if r == -libc::EINVAL => {
            Err("io_uring lacks IORING_OP_READ (needs Linux 5.6 or newer)".into())
        }
        [_, Some(r)] => Err(format!(
            "io_uring read of /proc/self/stat failed: {}",
            if r == 0 {
                "no data".to_string()
            } else {
                io::Error::from_raw_os_error(-r).to_string()
            }
        )),
        _ => unreachable!("loop ends when both results are in"),
    }
}

/// The reason for a failed `io_uring_setup`.
fn setup_error(e: &io::Error, sysctl: u32) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSYS) => "kernel without io_uring (io_uring_setup: ENOSYS)".into(),
        Some(libc::EPERM) if sysctl == 1 => "io_uring is restricted by sysctl \
            kernel.io_uring_disabled = 1 and this process is not in kernel.io_uring_group"
            .into(),
        Some(libc::EPERM) => "io_uring_setup denied (EPERM): a seccomp profile (e.g. docker's \
            default) or a security module blocks io_uring"
            .into(),
        Some(libc::ENOMEM) => format!(
            "io_uring_setup failed with ENOMEM: RLIMIT_MEMLOCK is {} (kernels before 5.12 \
             charge rings to it); raise it with `ulimit -l`",
            memlock_limit()
        ),
        _ => format!("io_uring_setup failed: {e}"),
    }
}

fn memlock_limit() -> String {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } != 0 {
        return "unknown".into();
    }
    if lim.rlim_cur == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        format!("{} KiB", lim.rlim_cur / 1024)
    }
}

/// Which read backend [`open_backend`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// io_uring if [`probe_uring`] passes, else pread (with the reason).
    #[default]
    Auto,
    /// io_uring or an error saying why it is unavailable.
    Uring,
    /// One `pread` per request.
    Pread,
}

/// Open `path` for batched reads with the backend `kind`, with `O_DIRECT` if `direct` (and the
/// filesystem allows it; see [`DirectFile`]). Returns the backend and, when `Auto` fell back to
/// pread, the reason to log.
pub fn open_backend(
    kind: BackendKind,
    path: &Path,
    direct: bool,
) -> io::Result<(Box<dyn ReadBatch>, Option<String>)> {
    let open = || -> io::Result<File> {
        if direct {
            Ok(DirectFile::open(path)?.into_file())
        } else {
            File::open(path)
        }
    };
    match kind {
        BackendKind::Pread => Ok((Box::new(PreadBatch::new(open()?)), None)),
        BackendKind::Uring => match probe_uring() {
            Ok(()) => Ok((Box::new(UringBatch::new(open()?)?), None)),
            Err(why) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("io_uring is not available: {why}; use backend=\"pread\""),
            )),
        },
        BackendKind::Auto => {
            let file = open()?;
            let why = match probe_uring() {
                Ok(()) => match UringBatch::new(file.try_clone()?) {
                    Ok(b) => return Ok((Box::new(b), None)),
                    Err(e) => format!("io_uring ring setup failed: {e}"),
                },
                Err(why) => why,
            };
            Ok((Box::new(PreadBatch::new(file)), Some(why)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_result_is_cached() {
        let first = probe_uring();
        for _ in 0..3 {
            assert_eq!(probe_uring(), first);
        }
        if std::env::var_os(DISABLE_ENV).is_none() {
            assert_eq!(probe_runs(), 1);
        }
        assert!(probe_runs() <= 1);
    }

    #[test]
    fn setup_failures_have_short_reasons() {
        let err = |n| setup_error(&io::Error::from_raw_os_error(n), 0);
        assert!(err(libc::ENOSYS).contains("kernel without io_uring"));
        assert!(err(libc::EPERM).contains("seccomp"));
        assert!(
            setup_error(&io::Error::from_raw_os_error(libc::EPERM), 1).contains("io_uring_group")
        );
        assert!(err(libc::ENOMEM).contains("RLIMIT_MEMLOCK"));
        assert!(err(libc::EINVAL).contains("os error 22"));
    }
}
