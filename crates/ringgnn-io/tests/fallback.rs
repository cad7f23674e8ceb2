//! The environment override forces the pread fallback, and the probe runs once per process.
//! One test in its own binary (its own process): it sets an environment variable.

mod common;

use std::io::ErrorKind;

use common::{known_file, TempDir};
use ringgnn_io::{open_backend, probe_runs, probe_uring, BackendKind, DISABLE_ENV};

#[test]
fn env_override_forces_fallback_and_probe_is_cached() {
    let dir = TempDir::new();
    let (path, data) = known_file(&dir, "f", 10_000);
    let reason = "disabled by RINGGNN_DISABLE_URING";

    std::env::set_var(DISABLE_ENV, "1");
    assert_eq!(probe_uring(), Err(reason.to_string()));
    let (mut b, why) = open_backend(BackendKind::Auto, &path, false).unwrap();
    assert_eq!((b.name(), why.as_deref()), ("pread", Some(reason)));
    let mut buf = vec![0u8; 100];
    let req = ringgnn_io::ReadReq {
        offset: 9_900,
        len: 100,
        dst: 0,
    };
    b.read_batch(&[req], &mut buf).unwrap();
    assert_eq!(&buf[..], &data[9_900..]);
    let e = open_backend(BackendKind::Uring, &path, false)
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(
        e.to_string().contains(reason) && e.to_string().contains("backend=\"pread\""),
        "{e}"
    );
    let (b, why) = open_backend(BackendKind::Pread, &path, false).unwrap();
    assert_eq!((b.name(), why), ("pread", None));
    assert_eq!(
        probe_runs(),
        0,
        "the override answers without asking the kernel"
    );

    std::env::set_var(DISABLE_ENV, "0");
    let first = probe_uring();
    assert_eq!(probe_uring(), first);
    assert_eq!(probe_runs(), 1, "the kernel is probed once per process");
    let (b, why) = open_backend(BackendKind::Auto, &path, false).unwrap();
    match first {
        Ok(()) => assert_eq!((b.name(), why), ("uring", None)),
        Err(reason) => {
            eprintln!("io_uring unavailable here: {reason}");
            assert_eq!((b.name(), why), ("pread", Some(reason)));
        }
    }
    assert_eq!(probe_runs(), 1);
}
