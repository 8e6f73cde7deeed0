//! The slot life cycle: order of reuse, waiting only where needed, growth, illegal moves.

use gpu_stage::{Acquired, Error, SlotState, SlotTable};

fn acquired(slot: usize, wait_for_release: bool) -> Option<Acquired> {
    Some(Acquired {
        slot,
        wait_for_release,
    })
}

#[test]
fn fresh_slots_are_handed_out_in_order_without_waiting() {
    let mut t = SlotTable::new(3);
    assert_eq!(t.len(), 3);
    assert_eq!(t.acquire(), acquired(0, false));
    assert_eq!(t.acquire(), acquired(1, false));
    assert_eq!(t.acquire(), acquired(2, false));
    assert_eq!(t.acquire(), None);
    assert_eq!(t.count(SlotState::Filling), 3);
}

#[test]
fn released_slots_are_reused_oldest_release_first_and_must_wait() {
    let mut t = SlotTable::new(3);
    for s in 0..3 {
        t.acquire().unwrap();
        t.stage(s).unwrap();
    }
    // The consumer drops batches 1 then 0 (out of order); 2 stays held.
    t.release(1).unwrap();
    t.release(0).unwrap();
    assert_eq!(t.state(1), Some(SlotState::Releasing));
    assert_eq!(t.acquire(), acquired(1, true));
    assert_eq!(t.acquire(), acquired(0, true));
    assert_eq!(t.acquire(), None, "slot 2 is held: never handed out");
    assert_eq!(t.state(2), Some(SlotState::Staged));
}

#[test]
fn an_abandoned_slot_is_reused_first_and_without_waiting() {
    let mut t = SlotTable::new(2);
    let a = t.acquire().unwrap();
    t.stage(a.slot).unwrap();
    t.release(a.slot).unwrap();
    let b = t.acquire().unwrap();
    assert_eq!(
        b,
        Acquired {
            slot: 1,
            wait_for_release: false
        }
    );
    t.abandon(b.slot).unwrap();
    assert_eq!(t.state(1), Some(SlotState::Free));
    assert_eq!(t.acquire(), acquired(1, false));
    assert_eq!(t.acquire(), acquired(0, true));
}

#[test]
fn growing_adds_a_free_slot_when_all_are_held() {
    let mut t = SlotTable::new(2);
    for s in 0..2 {
        t.acquire().unwrap();
        t.stage(s).unwrap();
    }
    assert_eq!(t.acquire(), None);
    assert_eq!(t.grow(), 2);
    assert_eq!(t.len(), 3);
    assert_eq!(t.acquire(), acquired(2, false));
}

#[test]
fn a_producer_consumer_run_never_hands_out_a_held_slot() {
    // batches_ahead = 2 → 4 slots; the consumer keeps the last 3 batches alive.
    let mut t = SlotTable::new(4);
    let mut held = std::collections::VecDeque::new();
    for _batch in 0..100 {
        let a = match t.acquire() {
            Some(a) => a,
            None => {
                t.grow();
                t.acquire().unwrap()
            }
        };
        assert!(
            !held.contains(&a.slot),
            "slot {} handed out while held",
            a.slot
        );
        t.stage(a.slot).unwrap();
        held.push_back(a.slot);
        if held.len() > 3 {
            t.release(held.pop_front().unwrap()).unwrap();
        }
    }
    assert_eq!(
        t.len(),
        4,
        "4 slots suffice for 3 held batches plus one filling"
    );
    assert_eq!(t.count(SlotState::Staged), 3);
}

#[test]
fn out_of_order_moves_are_typed_errors() {
    let mut t = SlotTable::new(1);
    let err = |r: Result<(), Error>| match r {
        Err(Error::SlotState {
            slot,
            action,
            state,
        }) => (slot, action, state),
        other => panic!("expected a slot-state error, got {other:?}"),
    };
    assert_eq!(err(t.stage(0)), (0, "stage", SlotState::Free));
    assert_eq!(err(t.release(0)), (0, "release", SlotState::Free));
    assert_eq!(err(t.abandon(0)), (0, "abandon", SlotState::Free));
    t.acquire().unwrap();
    assert_eq!(err(t.release(0)), (0, "release", SlotState::Filling));
    t.stage(0).unwrap();
    assert_eq!(err(t.stage(0)), (0, "stage", SlotState::Staged));
    assert_eq!(err(t.abandon(0)), (0, "abandon", SlotState::Staged));
    t.release(0).unwrap();
    assert_eq!(err(t.release(0)), (0, "release", SlotState::Releasing));
    assert!(matches!(
        t.stage(5),
        Err(Error::UnknownSlot { slot: 5, slots: 1 })
    ));
}
