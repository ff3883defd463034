#![allow(dead_code)]

use std::path::PathBuf;

/// Path of the `nvsoak` binary built for this test run.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nvsoak"))
}

/// A scratch directory in /dev/shm (tmpfs supports O_DIRECT on current kernels), removed on drop.
pub fn shm_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("nvsoak-test-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("creating a scratch directory")
}
