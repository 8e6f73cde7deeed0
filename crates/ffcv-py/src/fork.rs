//! What a `fork` leaves behind: the child has a copy of every object but only the thread
//! that forked. A loader's worker pool, producer and page readers, a remote source's
//! runtime threads and any lock one of them held at that instant are copies with no
//! thread behind them, so waiting on them in the child would wait forever.
//!
//! An object that owns threads records the process that built it ([`Origin`]). Used in
//! another process it raises an `FFCVError` naming the fix instead of touching its
//! threads or locks, and when the child frees it, it is leaked rather than dropped: a
//! drop would join threads that do not exist there. The leak is of the child's private
//! copy (fork copies memory on write), so the parent's loader is untouched. Objects
//! built in the child have the child's own threads and work normally.

use pyo3::prelude::*;

use crate::errors;

/// The process an object was built in.
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    pid: u32,
}

impl Origin {
    /// This process.
    pub fn here() -> Origin {
        Origin {
            pid: std::process::id(),
        }
    }

    /// Whether this is still the process the object was built in (not a forked child).
    pub fn is_here(&self) -> bool {
        // `getpid` is a system call of a few tens of nanoseconds: cheap next to a batch.
        std::process::id() == self.pid
    }

    /// `Ok` in the process the object was built in; in a forked child, the error that
    /// says what to do instead. `what` names the object (`"loader"`).
    pub fn check(&self, py: Python<'_>, what: &str) -> PyResult<()> {
        if self.is_here() {
            return Ok(());
        }
        Err(errors::make(
            py,
            errors::Kind::Base,
            format!(
                "this ffcv_rs {what} was created in process {} and is used in process {} \
                 after a fork; its threads do not exist here: create the {what} in the \
                 child process (for example in a torch DataLoader's worker_init_fn or \
                 lazily in Dataset.__getitem__), or use the 'spawn' or 'forkserver' \
                 start method",
                self.pid,
                std::process::id()
            ),
            None,
            None,
        ))
    }
}

/// A value that is dropped only in the process that built it: in a forked child it is
/// leaked instead (see the module docs), because dropping it would join the parent's
/// threads or take locks that one of them may have held at the fork.
pub struct ForkSafe<T> {
    /// `None` only inside `drop`.
    inner: Option<T>,
    origin: Origin,
}

impl<T> ForkSafe<T> {
    /// `value`, owned by this process.
    pub fn new(value: T) -> ForkSafe<T> {
        ForkSafe {
            inner: Some(value),
            origin: Origin::here(),
        }
    }
}

impl<T> std::ops::Deref for ForkSafe<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.inner
            .as_ref()
            .expect("a ForkSafe value is taken only by its drop")
    }
}

impl<T> Drop for ForkSafe<T> {
    fn drop(&mut self) {
        if !self.origin.is_here() {
            std::mem::forget(self.inner.take());
        }
    }
}
