//! Reading a file nvsoak did not write itself (a results file handed to `nvsoak report`):
//! only a regular file, opened without blocking (a FIFO in its place cannot hang the reader),
//! and never more than a limit (a link to `/dev/zero` or a sparse giant cannot exhaust memory).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The whole of `path` as text, refused when it is not a regular file or is larger than
/// `limit` bytes.
pub fn read_to_string(path: &Path, limit: u64) -> io::Result<String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if meta.len() > limit {
        return Err(too_large(limit));
    }
    read_limited(file, limit)
}

fn read_limited(file: File, limit: u64) -> io::Result<String> {
    let mut text = String::new();
    // One byte past the limit tells a file that grew after the fstat from one that did not.
    file.take(limit + 1).read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(text)
}

fn too_large(limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("larger than {limit} bytes, more than any file of its kind nvsoak writes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_within_the_limit_is_read() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("r.json");
        std::fs::write(&p, "{}").expect("write");
        assert_eq!(read_to_string(&p, 2).expect("read"), "{}");
        let e = read_to_string(&p, 1).expect_err("over the limit");
        assert!(e.to_string().contains("larger than 1 bytes"), "{e}");
    }

    #[test]
    fn a_fifo_dev_zero_a_directory_and_a_sparse_giant_are_refused_without_blocking() {
        let d = tempfile::tempdir().expect("tempdir");
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo on a NUL-terminated path we own; no memory is shared.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for p in [fifo.as_path(), Path::new("/dev/zero"), d.path()] {
            let e = read_to_string(p, 1 << 20).expect_err("refused");
            assert!(
                e.to_string().contains("not a regular file") || e.raw_os_error().is_some(),
                "{}: {e}",
                p.display()
            );
        }
        let sparse = d.path().join("sparse");
        let f = File::create(&sparse).expect("create");
        f.set_len(20 << 30).expect("20 GiB sparse");
        let e = read_to_string(&sparse, 1 << 20).expect_err("too large");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    }
}
