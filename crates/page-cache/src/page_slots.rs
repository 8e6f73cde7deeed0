//! Page slots shared between the consumer and the page-reader threads: the only
//! `unsafe` of the process cache.
//!
//! One anonymous mapping holds `num_slots × slot_size` bytes (page-aligned, so it also
//! serves `O_DIRECT` reads). Each slot has its own atomic state, and the protocol that
//! makes handing raw memory to several threads sound is:
//!
//! * Exactly one [`SlotOwner`] exists per arena (it is not `Clone`). It is the only
//!   party that moves a slot to `Queued` ([`SlotOwner::assign`], which takes
//!   `&mut self`), and the only one that hands out shared views
//!   ([`SlotOwner::read`], borrowing `&self`). So no view of a slot is alive when the
//!   slot is reassigned: the borrow checker enforces it.
//! * Writers ([`SlotWriters::fill`]) may only touch a slot they moved from
//!   `Queued(page)` to `Writing(page)` with a compare-exchange, so at most one writer
//!   holds a slot, and never one that a view can see: views are only handed out for
//!   `Ready(page)`, a state only the writer itself sets, after its last write
//!   (release), and that only `assign` (needing `&mut SlotOwner`) leaves.
//!
//! With zero-sized slots the same states track pages that live elsewhere (the reader's
//! map, for `map_pages`): a writer then only makes the page resident.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use memmap2::MmapMut;

const EMPTY: u64 = 0;
const QUEUED: u64 = 1;
const WRITING: u64 = 2;
const READY: u64 = 3;
const FAILED: u64 = 4;
const STATUS_BITS: u32 = 3;

/// What a slot holds, as seen at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Never assigned since the arena was (re)set.
    Empty,
    /// Assigned to a page whose read has not started.
    Queued(u64),
    /// A reader thread is filling the slot with the page.
    Writing(u64),
    /// The page is in the slot and may be read.
    Ready(u64),
    /// Reading the page failed; the slot holds nothing usable.
    Failed(u64),
}

fn encode(status: u64, page: u64) -> u64 {
    (page << STATUS_BITS) | status
}

fn decode(word: u64) -> SlotState {
    let page = word >> STATUS_BITS;
    match word & ((1 << STATUS_BITS) - 1) {
        QUEUED => SlotState::Queued(page),
        WRITING => SlotState::Writing(page),
        READY => SlotState::Ready(page),
        FAILED => SlotState::Failed(page),
        _ => SlotState::Empty,
    }
}

/// The memory of `num_slots` page slots and their states.
pub(crate) struct SlotArena {
    /// Keeps the mapping alive; all access goes through `base`.
    _map: Option<MmapMut>,
    base: *mut u8,
    slot_size: usize,
    num_slots: usize,
    states: Box<[AtomicU64]>,
    /// Bytes of the page held by each slot (the file's last page may be short).
    lens: Box<[AtomicUsize]>,
    /// Why a slot's last read failed (set before the Failed state is published).
    errors: Box<[Mutex<Option<Arc<io::Error>>>]>,
}

// SAFETY: `base` points into `_map`, which the arena owns and never moves or frees
// before it drops. Concurrent access to the bytes follows the module's protocol: a slot
// is written by at most one writer (compare-exchange Queued -> Writing) and read only in
// the Ready state, which no writer touches.
unsafe impl Send for SlotArena {}
// SAFETY: as above; every shared method either touches only atomics or follows the
// Ready/Writing protocol.
unsafe impl Sync for SlotArena {}

impl SlotArena {
    /// Maps `num_slots × slot_size` zeroed bytes (lazily: untouched slots cost nothing).
    pub(crate) fn new(num_slots: usize, slot_size: usize) -> io::Result<SlotArena> {
        let len = num_slots
            .checked_mul(slot_size)
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "slot memory overflows"))?;
        let (map, base) = if len == 0 {
            (None, std::ptr::NonNull::<u8>::dangling().as_ptr())
        } else {
            let mut map = MmapMut::map_anon(len)?;
            // Huge pages (where the OS grants them) cut TLB misses in both copies of
            // every byte: the page reader's write and the consumer's read. Best effort.
            #[cfg(target_os = "linux")]
            let _ = map.advise(memmap2::Advice::HugePage);
            let base = map.as_mut_ptr();
            (Some(map), base)
        };
        Ok(SlotArena {
            _map: map,
            base,
            slot_size,
            num_slots,
            states: (0..num_slots).map(|_| AtomicU64::new(EMPTY)).collect(),
            lens: (0..num_slots).map(|_| AtomicUsize::new(0)).collect(),
            errors: (0..num_slots).map(|_| Mutex::new(None)).collect(),
        })
    }

    pub(crate) fn num_slots(&self) -> usize {
        self.num_slots
    }

    pub(crate) fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Bytes of slot memory held.
    pub(crate) fn bytes(&self) -> u64 {
        (self.num_slots as u64) * (self.slot_size as u64)
    }

    fn state(&self, slot: usize) -> SlotState {
        decode(self.states[slot].load(Ordering::Acquire))
    }
}

/// The consumer's unique handle on an arena: assigns slots and reads ready ones.
pub(crate) struct SlotOwner {
    arena: Arc<SlotArena>,
}

impl SlotOwner {
    /// Takes an arena for an epoch. With `retain`, slots whose read completed in the
    /// previous epoch stay `Ready` (their bytes are intact: no writer touches a Ready
    /// slot, and the previous epoch's readers were joined before the arena came back);
    /// every other slot (failed, queued but cancelled, never used) is forgotten.
    pub(crate) fn new(mut arena: SlotArena, retain: bool) -> SlotOwner {
        for s in arena.states.iter_mut() {
            let keep = retain && matches!(decode(*s.get_mut()), SlotState::Ready(_));
            if !keep {
                *s.get_mut() = EMPTY;
            }
        }
        for e in arena.errors.iter_mut() {
            *e.get_mut().unwrap_or_else(PoisonError::into_inner) = None;
        }
        SlotOwner {
            arena: Arc::new(arena),
        }
    }

    /// A handle for the page-reader threads.
    pub(crate) fn writers(&self) -> SlotWriters {
        SlotWriters {
            arena: Arc::clone(&self.arena),
        }
    }

    #[cfg(test)]
    fn num_slots(&self) -> usize {
        self.arena.num_slots
    }

    pub(crate) fn state(&self, slot: usize) -> SlotState {
        self.arena.state(slot)
    }

    /// Queues `page` for `slot`. Fails (returning the state found) unless the slot is
    /// empty or holds a finished read: a slot whose read is queued or in flight is
    /// never given away.
    pub(crate) fn assign(&mut self, slot: usize, page: u64) -> Result<(), SlotState> {
        let cell = &self.arena.states[slot];
        let current = cell.load(Ordering::Acquire);
        match decode(current) {
            SlotState::Empty | SlotState::Ready(_) | SlotState::Failed(_) => cell
                .compare_exchange(
                    current,
                    encode(QUEUED, page),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .map(|_| ())
                .map_err(decode),
            other => Err(other),
        }
    }

    /// Whether `slot` holds `page`, ready (for zero-sized slots, whose bytes live
    /// elsewhere).
    pub(crate) fn is_ready(&self, slot: usize, page: u64) -> bool {
        slot < self.arena.num_slots && self.arena.state(slot) == SlotState::Ready(page)
    }

    /// Why the slot's last read failed, if it did.
    pub(crate) fn error(&self, slot: usize) -> Option<Arc<io::Error>> {
        self.arena
            .errors
            .get(slot)?
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The bytes of `page` if `slot` holds it, ready.
    pub(crate) fn read(&self, slot: usize, page: u64) -> Option<&[u8]> {
        let arena = &*self.arena;
        if slot >= arena.num_slots || arena.state(slot) != SlotState::Ready(page) {
            return None;
        }
        let len = arena.lens[slot]
            .load(Ordering::Relaxed)
            .min(arena.slot_size);
        // SAFETY: the slot lies inside the mapping (slot < num_slots, len <= slot_size).
        // It is Ready(page) (acquire above, pairing with the writer's release), so the
        // writer's bytes are visible and no writer touches it any more; it stays Ready
        // while this `&self` borrow lives, because only `assign` (which needs
        // `&mut self`) moves a Ready slot to another state.
        Some(unsafe { std::slice::from_raw_parts(arena.base.add(slot * arena.slot_size), len) })
    }

    /// Bytes of slot memory behind this owner.
    pub(crate) fn bytes(&self) -> u64 {
        self.arena.bytes()
    }

    /// Gives the arena back once no reader thread holds it (for reuse next epoch),
    /// leaving this owner with no slots.
    pub(crate) fn release(&mut self) -> Option<SlotArena> {
        let empty = Arc::new(SlotArena {
            _map: None,
            base: std::ptr::NonNull::<u8>::dangling().as_ptr(),
            slot_size: self.arena.slot_size,
            num_slots: 0,
            states: Box::new([]),
            lens: Box::new([]),
            errors: Box::new([]),
        });
        Arc::into_inner(std::mem::replace(&mut self.arena, empty))
    }
}

/// The page-reader threads' handle on an arena.
#[derive(Clone)]
pub(crate) struct SlotWriters {
    arena: Arc<SlotArena>,
}

/// What became of a fill request.
#[derive(Debug)]
pub(crate) enum Fill {
    /// The page was read.
    Done,
    /// The read failed; the slot is marked failed and keeps the error.
    Failed(Arc<io::Error>),
    /// The slot was not queued for that page (the job is stale); nothing was touched.
    NotQueued,
}

impl SlotWriters {
    /// Claims `slot` for `page` if the owner queued it, runs `read` on the slot's bytes
    /// (it returns how many bytes it filled) and marks the slot ready or failed.
    ///
    /// `account` sees the outcome before it is published, so counters it updates are
    /// current by the time anyone can observe the slot ready or failed.
    pub(crate) fn fill(
        &self,
        slot: usize,
        page: u64,
        read: impl FnOnce(&mut [u8]) -> io::Result<usize>,
        account: &dyn Fn(bool),
    ) -> Fill {
        let arena = &*self.arena;
        if !self.claim(slot, page) {
            return Fill::NotQueued;
        }
        // SAFETY: the slot lies inside the mapping. This thread won the Queued -> Writing exchange, so it is the only writer; the
        // owner hands out views only of Ready slots and cannot reassign a Writing one, so
        // nobody else reads or writes these bytes until this thread stores Ready/Failed.
        let buf = unsafe {
            std::slice::from_raw_parts_mut(arena.base.add(slot * arena.slot_size), arena.slot_size)
        };
        let result = read(buf);
        finish(arena, slot, page, result, account)
    }

    /// Moves `slot` from Queued(page) to Writing(page); false if it was not queued so.
    fn claim(&self, slot: usize, page: u64) -> bool {
        slot < self.arena.num_slots
            && self.arena.states[slot]
                .compare_exchange(
                    encode(QUEUED, page),
                    encode(WRITING, page),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
    }
}

/// Publishes the outcome of a write: accounts for it, stores the valid length or the
/// error, then the Ready or Failed state (release).
fn finish(
    arena: &SlotArena,
    slot: usize,
    page: u64,
    result: io::Result<usize>,
    account: &dyn Fn(bool),
) -> Fill {
    account(result.is_ok());
    let cell = &arena.states[slot];
    match result {
        Ok(n) => {
            arena.lens[slot].store(n.min(arena.slot_size), Ordering::Relaxed);
            cell.store(encode(READY, page), Ordering::Release);
            Fill::Done
        }
        Err(e) => {
            let e = Arc::new(e);
            *arena.errors[slot]
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&e));
            arena.lens[slot].store(0, Ordering::Relaxed);
            cell.store(encode(FAILED, page), Ordering::Release);
            Fill::Failed(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_readable_only_when_ready_for_that_page() {
        let mut owner = SlotOwner::new(SlotArena::new(2, 8).unwrap(), false);
        let w = owner.writers();
        assert!(owner.read(0, 5).is_none());
        // Not queued: the writer must not touch it.
        assert!(matches!(w.fill(0, 5, |_| Ok(8), &|_| {}), Fill::NotQueued));
        owner.assign(0, 5).unwrap();
        assert_eq!(owner.state(0), SlotState::Queued(5));
        assert!(owner.read(0, 5).is_none());
        // A stale job for another page does nothing.
        assert!(matches!(w.fill(0, 6, |_| Ok(8), &|_| {}), Fill::NotQueued));
        let f = w.fill(
            0,
            5,
            |buf| {
                buf[..3].copy_from_slice(b"abc");
                Ok(3)
            },
            &|ok| assert!(ok),
        );
        assert!(matches!(f, Fill::Done));
        assert_eq!(owner.read(0, 5), Some(&b"abc"[..]));
        assert!(owner.read(0, 6).is_none());
        assert!(owner.read(7, 5).is_none());
    }

    #[test]
    fn queued_or_writing_slots_cannot_be_reassigned_and_failures_are_kept() {
        let mut owner = SlotOwner::new(SlotArena::new(1, 4).unwrap(), false);
        owner.assign(0, 1).unwrap();
        assert_eq!(owner.assign(0, 2), Err(SlotState::Queued(1)));
        let w = owner.writers();
        let accounted = std::cell::Cell::new(None);
        let f = w.fill(0, 1, |_| Err(io::Error::other("boom")), &|ok| {
            accounted.set(Some(ok))
        });
        assert_eq!(accounted.get(), Some(false));
        assert!(matches!(f, Fill::Failed(_)));
        assert_eq!(owner.state(0), SlotState::Failed(1));
        assert_eq!(owner.error(0).unwrap().to_string(), "boom");
        assert!(owner.read(0, 1).is_none());
        // A failed slot may be reused.
        owner.assign(0, 2).unwrap();
        drop(w);
        let mut owner = owner;
        let arena = owner.release().expect("no writer left");
        assert_eq!(owner.num_slots(), 0);
        assert!(owner.read(0, 2).is_none());
        let owner = SlotOwner::new(arena, true);
        // Queued but never read: not retained, even when asked to retain.
        assert_eq!(owner.state(0), SlotState::Empty);
    }

    #[test]
    fn only_ready_slots_survive_into_a_retaining_owner() {
        let mut owner = SlotOwner::new(SlotArena::new(3, 4).unwrap(), false);
        let w = owner.writers();
        for (slot, page) in [(0, 10), (1, 11), (2, 12)] {
            owner.assign(slot, page).unwrap();
        }
        w.fill(
            0,
            10,
            |b| {
                b.copy_from_slice(b"wxyz");
                Ok(4)
            },
            &|_| {},
        );
        w.fill(1, 11, |_| Err(io::Error::other("bad")), &|_| {});
        drop(w);
        let arena = owner.release().unwrap();
        let owner = SlotOwner::new(arena, true);
        assert_eq!(owner.read(0, 10), Some(&b"wxyz"[..]));
        assert_eq!(owner.state(1), SlotState::Empty);
        assert_eq!(owner.state(2), SlotState::Empty);
        let mut owner = owner;
        let arena = owner.release().unwrap();
        let owner = SlotOwner::new(arena, false);
        assert_eq!(owner.state(0), SlotState::Empty);
    }

    #[test]
    fn arena_is_not_returned_while_a_writer_handle_lives() {
        let mut owner = SlotOwner::new(SlotArena::new(1, 4).unwrap(), false);
        let _w = owner.writers();
        assert!(owner.release().is_none());
    }

    #[test]
    fn zero_slots_is_a_valid_arena() {
        let owner = SlotOwner::new(SlotArena::new(0, 1 << 21).unwrap(), false);
        assert_eq!(owner.num_slots(), 0);
        assert!(owner.read(0, 0).is_none());
    }
}
