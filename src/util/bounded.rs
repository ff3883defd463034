//! Reading a file: only a regular file, opened without blocking (a FIFO in its place cannot hang
//! the reader), and never more than a limit per kind of file (a link to `/dev/zero` or a sparse
//! giant cannot exhaust memory). The config, the checkpoint and its generation maps, results
//! files, the known-drives list, the ratings table, the web config and its certificates and
//! key are all read through here (the state directory's files opened beneath its descriptor by
//! [`crate::util::beneath`], then read by [`read_opened`]); `tests/it/boundaries.rs` keeps every other read of a file
//! nvsoak is handed out of the library.

/// The most a config file (or a ratings table) may hold.
pub const CONFIG_LIMIT: u64 = 16 << 20;
/// The most a checkpoint may hold (its JSON; the generation maps are sidecars).
pub const CHECKPOINT_LIMIT: u64 = 256 << 20;
/// The most a results file may hold.
pub const RESULTS_LIMIT: u64 = 256 << 20;
/// The most the known-drives list may hold.
pub const DRIVES_LIMIT: u64 = 16 << 20;
/// The most a web config file, a PEM certificate bundle or a TLS key file may hold.
pub const WEB_LIMIT: u64 = 4 << 20;

use std::fs::{File, FileType, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// What a file that is not a regular file is, in words.
pub fn kind_of(t: FileType) -> &'static str {
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "an unknown kind of file"
    }
}

/// The whole of `path` as text, refused when it is not a regular file or is larger than
/// `limit` bytes.
pub fn read_to_string(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// The whole of `path` as bytes, refused when it is not a regular file or is larger than
/// `limit` bytes. A symlink is followed (a config file may be one).
pub fn read(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    read_with(path, limit, 0)
}

/// [`read`], with the metadata of the file that was read (from the opened descriptor), for a
/// caller that also judges its owner or mode.
pub fn read_with_meta(path: &Path, limit: u64) -> io::Result<(Vec<u8>, Metadata)> {
    let (file, meta) = open_regular(path, limit, 0)?;
    Ok((read_limited(file, limit)?, meta))
}

/// The whole of a file already opened (beneath the state directory's descriptor, say), refused
/// when it is not a regular file or is larger than `limit` bytes.
pub fn read_opened(file: File, limit: u64) -> io::Result<Vec<u8>> {
    check_regular(&file, limit)?;
    read_limited(file, limit)
}

fn check_regular(file: &File, limit: u64) -> io::Result<Metadata> {
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}, not a regular file", kind_of(meta.file_type())),
        ));
    }
    if meta.len() > limit {
        return Err(too_large(limit));
    }
    Ok(meta)
}

fn read_with(path: &Path, limit: u64, flags: libc::c_int) -> io::Result<Vec<u8>> {
    let (file, _) = open_regular(path, limit, flags)?;
    read_limited(file, limit)
}

fn open_regular(path: &Path, limit: u64, flags: libc::c_int) -> io::Result<(File, Metadata)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY | flags)
        .open(path)?;
    let meta = check_regular(&file, limit)?;
    Ok((file, meta))
}

fn read_limited(file: File, limit: u64) -> io::Result<Vec<u8>> {
    let mut data = Vec::new();
    // One byte past the limit tells a file that grew after the fstat from one that did not.
    file.take(limit + 1).read_to_end(&mut data)?;
    if data.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(data)
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
