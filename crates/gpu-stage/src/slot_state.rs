//! Where a slot is in its life ([`SlotState`]): what the slot table tracks and what an
//! error about a slot in the wrong state names, below both.

use std::fmt;

/// Where a slot is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlotState {
    /// Unused; its buffers may be written at once.
    Free,
    /// Owned by the producer, which writes its host buffers.
    Filling,
    /// Copy (and kernels) enqueued; owned by the batch handed to the consumer.
    Staged,
    /// The consumer let go; its recorded work may still read the device buffers.
    Releasing,
}

impl fmt::Display for SlotState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SlotState::Free => "free",
            SlotState::Filling => "filling",
            SlotState::Staged => "staged",
            SlotState::Releasing => "releasing",
        })
    }
}
