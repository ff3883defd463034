//! The process checks of many file targets, answered by one walk over `/proc`.
//!
//! Why (issue 35): checking whether another process holds or maps a file walks every process's
//! `/proc/<pid>/fd` and `/proc/<pid>/maps`, about 10 ms on a machine with 350 processes, so a
//! daemon with 200 file targets spent 2 s at start-up walking `/proc` 400 times. Within a
//! [`UseBatch`], a claim of a file that is nvsoak's own ([`Reach::OwnFile`]: created or marked
//! by nvsoak) does every other check at once and leaves its two process checks to
//! [`UseBatch::finish`], which walks `/proc` once, after every claim of the batch was made.
//!
//! The promise is the same as a check at claim time: each file's process check still happens
//! after the file was opened and locked, and before any of its I/O (the daemon holds every
//! target's plan at a gate until the batch finished; a finding cancels the whole start). A
//! file that may hold someone else's data ([`Reach::Every`]: not nvsoak's, named by
//! `allow_destroy`) is never deferred: it is checked before nvsoak marks it.
//!
//! The batch belongs to the thread that began it (the daemon's start-up opens its targets on
//! one thread); claims on other threads are checked at once, as without a batch.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::path::PathBuf;

use super::procs::{ProcTable, Reach};
use crate::safety::SafetyError;
use crate::util::sysroot::SysRoot;

/// A claim whose process checks wait for the batch's walk.
struct Pending {
    target: String,
    path: PathBuf,
    key: (u64, u64),
}

thread_local! {
    static BATCH: RefCell<Option<Vec<Pending>>> = const { RefCell::new(None) };
}

/// While this lives, file claims of nvsoak's own files on this thread defer their process
/// checks to [`UseBatch::finish`]. Dropped without finishing, the deferred checks are dropped
/// with it: the caller must then not run anything on those files (the daemon cancels the
/// start).
pub struct UseBatch {
    /// Not `Send`: the batch is this thread's.
    _thread: PhantomData<*const ()>,
}

/// A deferred check that found the file in use: the target's name and why.
#[derive(Debug)]
pub struct BatchRefusal {
    pub target: String,
    pub error: SafetyError,
}

impl UseBatch {
    pub fn begin() -> UseBatch {
        BATCH.with(|b| *b.borrow_mut() = Some(Vec::new()));
        UseBatch {
            _thread: PhantomData,
        }
    }

    /// How many claims wait for the walk.
    pub fn pending(&self) -> usize {
        BATCH.with(|b| b.borrow().as_ref().map_or(0, Vec::len))
    }

    /// One walk over `/proc` for every deferred claim; the first claim (in claim order) whose
    /// file another process maps or holds open, or every claim's refusal when the walk could
    /// not look at every process it must, is the error.
    pub fn finish(self) -> Result<(), Box<BatchRefusal>> {
        let pending = BATCH.with(|b| b.borrow_mut().take()).unwrap_or_default();
        finish_on(&SysRoot::host(), pending)
    }
}

impl Drop for UseBatch {
    fn drop(&mut self) {
        BATCH.with(|b| *b.borrow_mut() = None);
    }
}

fn finish_on(root: &SysRoot, pending: Vec<Pending>) -> Result<(), Box<BatchRefusal>> {
    let Some(first) = pending.first() else {
        return Ok(());
    };
    let table = ProcTable::walk(root, Reach::OwnFile).map_err(|why| {
        Box::new(BatchRefusal {
            target: first.target.clone(),
            error: SafetyError::Unverifiable {
                path: first.path.clone(),
                why,
            },
        })
    })?;
    for p in pending {
        let mapped = table.mappers(root, p.key);
        if !mapped.is_empty() {
            return Err(Box::new(BatchRefusal {
                target: p.target,
                error: SafetyError::Mapped {
                    path: p.path,
                    holders: mapped,
                },
            }));
        }
        let open = table.openers(root, p.key);
        if !open.is_empty() {
            return Err(Box::new(BatchRefusal {
                target: p.target,
                error: SafetyError::Busy {
                    what: p.path.display().to_string(),
                    path: p.path,
                    holders: open,
                },
            }));
        }
    }
    Ok(())
}

/// Whether a claim of a file with this reach, on this thread, is deferred now.
pub(in crate::safety) fn defers(reach: Reach) -> bool {
    reach == Reach::OwnFile && BATCH.with(|b| b.borrow().is_some())
}

/// Leave the process checks of the claimed file `key` (at `path`, target `target`) to the
/// batch's walk. Only after [`defers`] said yes.
pub(in crate::safety) fn defer(target: &str, path: &std::path::Path, key: (u64, u64)) {
    BATCH.with(|b| {
        if let Some(v) = b.borrow_mut().as_mut() {
            v.push(Pending {
                target: target.to_string(),
                path: path.to_path_buf(),
                key,
            });
        }
    });
}
