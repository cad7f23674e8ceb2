//! Free space of a file system, for the builds' pre-write size check
//! (`ringgnn_store::space`).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Bytes an unprivileged writer may still use on the file system holding `path` (statvfs
/// `f_bavail * f_frsize`: the blocks reserved for root are not counted).
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a NUL-terminated string that outlives the call, and `st` points to memory
    // for one `statvfs`, which the call fills completely when it returns 0.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it initialised `st`.
    let st = unsafe { st.assume_init() };
    // fsblkcnt_t and c_ulong are 32 bits on some targets.
    #[allow(clippy::unnecessary_cast)]
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_of_the_temp_dir() {
        let free = free_bytes(&std::env::temp_dir()).unwrap();
        assert!(free > 0);
    }

    #[test]
    fn missing_path_is_not_found() {
        let e = free_bytes(Path::new("/no/such/dir/anywhere")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
