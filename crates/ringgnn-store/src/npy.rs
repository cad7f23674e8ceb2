//! Reading NumPy `.npy` headers (format versions 1-3) and checking them against what the caller
//! needs. The data itself is streamed by the callers; nothing here loads an array.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::excerpt::excerpt;
use crate::{Error, IoContext, Result};

/// Element type of an array, from the header's `descr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NpyDtype {
    /// 'i' signed integer, 'u' unsigned integer, 'f' float, 'b' bool, or another numpy kind.
    pub kind: char,
    /// Bytes per element.
    pub size: u64,
}

impl NpyDtype {
    pub fn name(&self) -> String {
        match self.kind {
            'i' => format!("int{}", self.size * 8),
            'u' => format!("uint{}", self.size * 8),
            'f' => format!("float{}", self.size * 8),
            k => format!("{k}{}", self.size),
        }
    }
}

#[derive(Clone, Debug)]
pub struct NpyHeader {
    pub path: PathBuf,
    pub dtype: NpyDtype,
    pub fortran_order: bool,
    pub shape: Vec<u64>,
    /// Byte offset of the first element.
    pub data_offset: u64,
}

impl NpyHeader {
    pub fn len(&self) -> u64 {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn err<T>(&self, what: impl std::fmt::Display) -> Result<T> {
        Err(Error::Input(format!("{}: {what}", self.path.display())))
    }
    /// Require one of the dtypes in `allowed` (e.g. ["int32", "int64"]).
    pub fn expect_dtype(&self, allowed: &[&str], what: &str) -> Result<()> {
        let name = self.dtype.name();
        if allowed.contains(&name.as_str()) {
            Ok(())
        } else {
            self.err(format!(
                "{what} must have dtype {}, found {name}; convert it with numpy's astype",
                allowed.join(" or ")
            ))
        }
    }
}

/// Parse the header of `path` and check that the file holds exactly the data it declares.
pub fn read_header(path: &Path) -> Result<NpyHeader> {
    let mut f = File::open(path).at(path)?;
    let file_len = f.metadata().at(path)?.len();
    let bad =
        |what: String| Error::Input(format!("{}: not a valid .npy file: {what}", path.display()));
    let mut pre = [0u8; 10];
    f.read_exact(&mut pre)
        .map_err(|_| bad("shorter than the 10-byte preamble".into()))?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err(bad("missing the \\x93NUMPY magic".into()));
    }
    let (hlen, start) = match pre[6] {
        1 => (u16::from_le_bytes([pre[8], pre[9]]) as u64, 10u64),
        2 | 3 => {
            let mut more = [0u8; 2];
            f.read_exact(&mut more)
                .map_err(|_| bad("truncated header length".into()))?;
            (
                u32::from_le_bytes([pre[8], pre[9], more[0], more[1]]) as u64,
                12u64,
            )
        }
        v => return Err(bad(format!("unsupported format version {v}"))),
    };
    if start + hlen > file_len || hlen > 1 << 20 {
        return Err(bad("header runs past the end of the file".into()));
    }
    let mut h = vec![0u8; hlen as usize];
    f.read_exact(&mut h).at(path)?;
    let h = String::from_utf8_lossy(&h).into_owned();
    let descr = dict_value(&h, "descr").ok_or_else(|| bad("header has no 'descr'".into()))?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let fortran = dict_value(&h, "fortran_order")
        .ok_or_else(|| bad("header has no 'fortran_order'".into()))?;
    let shape = dict_value(&h, "shape").ok_or_else(|| bad("header has no 'shape'".into()))?;
    let bytes = descr.as_bytes();
    if bytes.len() < 3 {
        return Err(bad(format!(
            "unsupported dtype '{}' (structured or object arrays are not supported)",
            excerpt(descr.as_bytes())
        )));
    }
    let order = bytes[0] as char;
    let kind = bytes[1] as char;
    let size: u64 = descr[2..]
        .parse()
        .map_err(|_| bad(format!("unsupported dtype '{}'", excerpt(descr.as_bytes()))))?;
    if order == '>' && size > 1 {
        return Err(Error::Input(format!(
            "{}: big-endian dtype '{descr}'; save it little-endian, e.g. np.save(path, a.astype(a.dtype.newbyteorder('<')))",
            path.display()
        )));
    }
    let shape: Vec<u64> = shape
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<u64>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| bad(format!("cannot read shape {}", excerpt(shape.as_bytes()))))?;
    let header = NpyHeader {
        path: path.to_path_buf(),
        dtype: NpyDtype { kind, size },
        fortran_order: fortran.trim() == "True",
        shape,
        data_offset: start + hlen,
    };
    let need = header
        .len()
        .checked_mul(size)
        .and_then(|n| n.checked_add(header.data_offset))
        .ok_or_else(|| bad("shape is too large".into()))?;
    if need != file_len {
        return Err(bad(format!(
            "the header declares shape {:?} of {} ({} bytes with the header) but the file has {file_len} bytes; it is truncated or corrupt",
            header.shape,
            header.dtype.name(),
            need
        )));
    }
    Ok(header)
}

/// The text of `'key': value` in a numpy header dict, up to the next top-level comma.
fn dict_value<'a>(h: &'a str, key: &str) -> Option<&'a str> {
    let k1 = format!("'{key}'");
    let k2 = format!("\"{key}\"");
    let at = h
        .find(&k1)
        .map(|i| i + k1.len())
        .or_else(|| h.find(&k2).map(|i| i + k2.len()))?;
    let rest = h[at..].trim_start().strip_prefix(':')?.trim_start();
    let mut depth = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&rest[..=i]);
                }
            }
            ',' | '}' if depth == 0 => return Some(rest[..i].trim()),
            _ => {}
        }
    }
    None
}

/// Write a little-endian `.npy` version-1 file (used by tests and generators' debug output).
pub fn write_npy(
    path: &Path,
    descr: &str,
    shape: &[u64],
    fortran: bool,
    data: &[u8],
) -> Result<()> {
    use std::io::Write;
    let shape_s = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut h = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape_s}, }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut f = File::create(path).at(path)?;
    f.write_all(b"\x93NUMPY\x01\x00").at(path)?;
    f.write_all(&(h.len() as u16).to_le_bytes()).at(path)?;
    f.write_all(h.as_bytes()).at(path)?;
    f.write_all(data).at(path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_validation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let data: Vec<u8> = (0..6i64).flat_map(|x| x.to_le_bytes()).collect();
        write_npy(&p, "<i8", &[2, 3], false, &data).unwrap();
        let h = read_header(&p).unwrap();
        assert_eq!(h.shape, vec![2, 3]);
        assert_eq!(h.dtype, NpyDtype { kind: 'i', size: 8 });
        assert!(!h.fortran_order);
        assert_eq!(h.data_offset % 64, 0);
        // Truncated data is caught.
        write_npy(&p, "<i8", &[2, 4], false, &data).unwrap();
        let e = read_header(&p).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
        // Big-endian is refused with advice.
        write_npy(&p, ">i8", &[2, 3], false, &data).unwrap();
        let e = read_header(&p).unwrap_err().to_string();
        assert!(e.contains("big-endian"), "{e}");
        std::fs::write(&p, b"hello").unwrap();
        assert!(read_header(&p)
            .unwrap_err()
            .to_string()
            .contains("not a valid .npy"));
    }
}
