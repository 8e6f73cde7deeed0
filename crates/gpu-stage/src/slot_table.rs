//! Slot bookkeeping, free of CUDA so it can be tested anywhere: which slot the producer may
//! fill next, and the order a slot must move through its life.
//!
//! ```text
//!   Free ──acquire──▶ Filling ──stage──▶ Staged ──release──▶ Releasing ──complete──▶ Free
//!     ▲                  │                                      │
//!     └────abandon───────┘         acquire (after waiting on the release event)──▶ Filling
//! ```
//!
//! A `Releasing` slot is one whose consumer dropped its batch: the consumer's recorded work on
//! it may still be running, so whoever acquires it must first wait on its release event.

use std::collections::VecDeque;

use crate::{Error, Result, SlotState};

/// A slot handed to the producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    /// The slot index.
    pub slot: usize,
    /// True when the slot was `Releasing`: wait on its release event before writing.
    pub wait_for_release: bool,
}

/// The states of all slots, and the order in which available slots are reused.
#[derive(Debug, Clone)]
pub struct SlotTable {
    states: Vec<SlotState>,
    /// Free and releasing slots, least recently released first: the oldest release is the
    /// most likely to have completed, so waiting on it costs least.
    available: VecDeque<usize>,
}

impl SlotTable {
    /// `slots` free slots.
    pub fn new(slots: usize) -> Self {
        SlotTable {
            states: vec![SlotState::Free; slots],
            available: (0..slots).collect(),
        }
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// True when there are no slots at all.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// State of slot `slot`, if it exists.
    pub fn state(&self, slot: usize) -> Option<SlotState> {
        self.states.get(slot).copied()
    }

    /// How many slots are in `state`.
    pub fn count(&self, state: SlotState) -> usize {
        self.states.iter().filter(|&&s| s == state).count()
    }

    /// Takes the least recently released available slot for filling, or `None` when every
    /// slot is being filled or held (the caller may then [`grow`](Self::grow)).
    pub fn acquire(&mut self) -> Option<Acquired> {
        let slot = self.available.pop_front()?;
        let was = self.states[slot];
        debug_assert!(matches!(was, SlotState::Free | SlotState::Releasing));
        self.states[slot] = SlotState::Filling;
        Some(Acquired {
            slot,
            wait_for_release: was == SlotState::Releasing,
        })
    }

    /// Adds a free slot and returns its index.
    pub fn grow(&mut self) -> usize {
        self.states.push(SlotState::Free);
        let slot = self.states.len() - 1;
        self.available.push_back(slot);
        slot
    }

    /// `Filling → Staged`: the copy was enqueued and the batch handed out.
    pub fn stage(&mut self, slot: usize) -> Result<()> {
        self.transition(slot, "stage", SlotState::Filling, SlotState::Staged)
    }

    /// `Filling → Free`: the producer gave the slot back without staging it.
    pub fn abandon(&mut self, slot: usize) -> Result<()> {
        self.transition(slot, "abandon", SlotState::Filling, SlotState::Free)?;
        // Reused first: nothing is pending on it.
        self.available.push_front(slot);
        Ok(())
    }

    /// `Staged → Releasing`: the consumer dropped the batch after recording its release event.
    pub fn release(&mut self, slot: usize) -> Result<()> {
        self.transition(slot, "release", SlotState::Staged, SlotState::Releasing)?;
        self.available.push_back(slot);
        Ok(())
    }

    /// `Releasing → Free`: the release event is known to have completed.
    pub fn complete(&mut self, slot: usize) -> Result<()> {
        self.transition(slot, "complete", SlotState::Releasing, SlotState::Free)
    }

    /// Slots still `Releasing`, in index order.
    pub fn releasing(&self) -> Vec<usize> {
        (0..self.states.len())
            .filter(|&s| self.states[s] == SlotState::Releasing)
            .collect()
    }

    fn transition(
        &mut self,
        slot: usize,
        action: &'static str,
        from: SlotState,
        to: SlotState,
    ) -> Result<()> {
        match self.states.get_mut(slot) {
            Some(state) if *state == from => {
                *state = to;
                Ok(())
            }
            Some(state) => Err(Error::SlotState {
                slot,
                action,
                state: *state,
            }),
            None => Err(Error::UnknownSlot {
                slot,
                slots: self.states.len(),
            }),
        }
    }
}
