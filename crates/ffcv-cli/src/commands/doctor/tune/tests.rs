//! Unit tests of `tune.rs`.

use super::*;

fn measurement(rate: f64) -> Measurement {
    Measurement {
        samples_per_sec: rate,
        wall_seconds: 1.0,
        workers: 2,
        ..Measurement::default()
    }
}

fn start() -> Knobs {
    Knobs {
        os_cache: true,
        order: OrderChoice::Random,
        num_workers: 2,
        batches_ahead: 3,
        max_memory: None,
        quasi_buffer_pages: None,
    }
}

#[test]
fn a_memory_budget_error_is_recognised_by_its_variant_not_its_text() {
    let guard = ffcv::Error::Cache(ffcv::page_cache::Error::MemoryBudget {
        path: "f.beton".into(),
        needed: 167_772_160,
        budget: 1 << 20,
        num_slots: 20,
        page_size: 8 << 20,
        fix: ffcv::page_cache::BudgetFix::Unknown,
    });
    let e = RunError::from_loader(&guard);
    assert_eq!(e.memory_budget_needed, Some(167_772_160));
    assert!(e.message.contains("167772160 bytes of page slots"));
    // An error whose text talks about memory is not the guard.
    let other = ffcv::Error::Config {
        path: "f.beton".into(),
        reason: "not enough memory for the batch".into(),
        cause: None,
    };
    assert_eq!(RunError::from_loader(&other).memory_budget_needed, None);
}

#[test]
fn a_gain_inside_the_spread_is_rejected_and_one_beyond_it_kept() {
    // The case: 2,457 vs 2,099 samples/s is inside a +-30% noise.
    let v = judge(&[2099.0, 2700.0, 2300.0], &[2457.0, 2150.0, 2600.0]);
    assert_eq!(v.reference_median, 2300.0);
    assert_eq!(v.candidate_median, 2457.0);
    assert_eq!(v.gain, 157.0);
    assert_eq!(v.spread, 601.0);
    assert!(!v.kept);
    // A clear win: every candidate round above every reference round.
    let v = judge(&[100.0, 104.0, 102.0], &[150.0, 148.0, 153.0]);
    assert_eq!((v.gain, v.spread, v.rounds), (48.0, 5.0, 3));
    assert!(v.kept);
    // A loss is never kept, however steady.
    assert!(!judge(&[100.0, 100.0], &[90.0, 90.0]).kept);
    // Equal gain and spread is not enough.
    assert!(!judge(&[100.0, 110.0], &[110.0, 120.0]).kept);
}

#[test]
fn one_round_of_each_side_keeps_nothing_however_large_the_gain() {
    let v = judge(&[100.0], &[1000.0]);
    assert_eq!(v.rounds, 1);
    assert_eq!(v.spread, 0.0);
    assert!(!v.kept);
    assert!(!judge(&[], &[]).kept);
}

#[test]
fn knobs_target_the_resources_they_act_on() {
    assert_eq!(Change::Workers(4).targets(), [Resource::Cpu]);
    assert_eq!(
        Change::Ahead(1).targets(),
        [Resource::Storage, Resource::GpuLink]
    );
    assert_eq!(Change::OtherCache.targets(), [Resource::Storage]);
    assert_eq!(
        Change::Order(OrderChoice::QuasiRandom).targets(),
        [Resource::Storage]
    );
    for change in [
        Change::Workers(1),
        Change::Ahead(6),
        Change::OtherCache,
        Change::Order(OrderChoice::Random),
    ] {
        assert!(!change.targets().contains(&Resource::Memory));
        assert!(!change.targets().contains(&Resource::Consumer));
    }
}

fn all_candidates() -> Candidates {
    Candidates {
        num_workers: vec![1, 4],
        batches_ahead: vec![1, 6],
        try_other_cache: true,
        orders: vec![OrderChoice::QuasiRandom],
    }
}

/// A recorded machine: each configuration's rates, handed out in turn.
struct Recorded {
    rates: Vec<(Knobs, Vec<f64>)>,
    measured: Vec<Knobs>,
}

impl Recorded {
    fn measure(&mut self, knobs: &Knobs) -> Result<Measurement, RunError> {
        self.measured.push(*knobs);
        let (_, rates) = self
            .rates
            .iter_mut()
            .find(|(k, _)| k == knobs)
            .unwrap_or_else(|| panic!("unrecorded configuration {knobs:?}"));
        Ok(measurement(rates.remove(0)))
    }
}

#[test]
fn a_knob_not_targeting_the_scarce_resource_is_never_tried() {
    // The CPU is scarce: only worker counts are tried. The batches_ahead 1
    // "win" is never measured at all.
    let start = start();
    let more = Knobs {
        num_workers: 4,
        ..start
    };
    let fewer = Knobs {
        num_workers: 1,
        ..start
    };
    let mut machine = Recorded {
        rates: vec![
            (
                start,
                vec![2099.0, 2300.0, 2200.0, 2250.0, 2150.0, 2210.0, 2190.0],
            ),
            (fewer, vec![1200.0, 1250.0, 1190.0]),
            (more, vec![2457.0, 2100.0, 2350.0]),
        ],
        measured: Vec::new(),
    };
    let t = tune(
        start,
        &all_candidates(),
        &|_| Resource::Cpu,
        &mut || true,
        &mut |k| machine.measure(k),
    );
    assert!(
        machine
            .measured
            .iter()
            .all(|k| k.batches_ahead == 3 && k.os_cache)
    );
    assert!(
        machine
            .measured
            .iter()
            .all(|k| k.order == OrderChoice::Random)
    );
    let summary: Vec<(&str, usize, bool)> = t
        .trials
        .iter()
        .map(|t| (t.knob, t.knobs.num_workers, t.kept))
        .collect();
    assert_eq!(
        summary,
        [
            ("baseline", 2, true),
            ("num_workers", 1, false),
            ("num_workers", 4, false)
        ]
    );
    // 4 workers: median 2350 against 2190 (rounds 2150, 2210, 2190), a gain of 160
    // inside the spread of 357 (2457 - 2100): not kept.
    let v = t.trials[2].verdict.unwrap();
    assert_eq!((v.reference_median, v.candidate_median), (2190.0, 2350.0));
    assert_eq!(v.spread, 357.0);
    assert_eq!(t.best, start);
    assert_eq!(t.resource, Some(Resource::Cpu));
    let untried: Vec<(&str, &str)> = t
        .untried
        .iter()
        .map(|u| (u.knob, u.because.as_str()))
        .collect();
    assert_eq!(
        untried,
        [
            (
                "batches_ahead",
                "targets storage and gpu-link, not the scarce resource (cpu)"
            ),
            (
                "batches_ahead",
                "targets storage and gpu-link, not the scarce resource (cpu)"
            ),
            ("os_cache", "targets storage, not the scarce resource (cpu)"),
            ("order", "targets storage, not the scarce resource (cpu)"),
        ]
    );
}

#[test]
fn rounds_alternate_reference_and_candidate_and_a_clear_win_is_kept() {
    let start = start();
    let more = Knobs {
        num_workers: 4,
        ..start
    };
    let candidates = Candidates {
        num_workers: vec![4],
        ..Candidates::default()
    };
    let mut machine = Recorded {
        rates: vec![
            (start, vec![100.0, 101.0, 99.0, 102.0]),
            (more, vec![180.0, 178.0, 183.0]),
        ],
        measured: Vec::new(),
    };
    let t = tune(
        start,
        &candidates,
        &|m| {
            if m.samples_per_sec > 150.0 {
                Resource::Consumer
            } else {
                Resource::Cpu
            }
        },
        &mut || true,
        &mut |k| machine.measure(k),
    );
    assert_eq!(
        machine.measured,
        [start, start, more, start, more, start, more]
    );
    assert_eq!(t.trials[1].reference_rates, [101.0, 99.0, 102.0]);
    assert_eq!(t.trials[1].rates(), [180.0, 178.0, 183.0]);
    assert!(t.trials[1].kept);
    assert_eq!(t.best, more);
    assert_eq!(t.best_measurement.unwrap().samples_per_sec, 180.0);
    // Named again from the new best: the consumer, which no knob targets.
    assert_eq!(t.resource, Some(Resource::Consumer));
}

#[test]
fn the_time_budget_cuts_rounds_and_a_trial_without_two_of_each_keeps_nothing() {
    let start = start();
    let fewer = Knobs {
        num_workers: 1,
        ..start
    };
    let mut machine = Recorded {
        rates: vec![(start, vec![100.0, 100.0]), (fewer, vec![500.0])],
        measured: Vec::new(),
    };
    // Three runs fit: the baseline, then one round of A and B.
    let mut runs_left = 3;
    let mut time_left = || {
        runs_left -= 1;
        runs_left >= 0
    };
    let t = tune(
        start,
        &all_candidates(),
        &|_| Resource::Cpu,
        &mut time_left,
        &mut |k| machine.measure(k),
    );
    assert_eq!(machine.measured.len(), 3);
    assert_eq!(t.trials.len(), 2);
    assert_eq!(t.trials[1].knobs.num_workers, 1);
    assert!(!t.trials[1].kept, "one round of each is not evidence");
    assert_eq!(t.best, start);
    // The other worker count found no time at all.
    assert_eq!(t.skipped(), 1);
    let none = tune(
        start,
        &all_candidates(),
        &|_| Resource::Cpu,
        &mut || false,
        &mut |_| unreachable!(),
    );
    assert!(none.trials.is_empty());
    assert_eq!(none.skipped(), 6);
    assert_eq!(none.best, start);
}

#[test]
fn a_failed_baseline_tries_nothing() {
    let t = tune(
        start(),
        &all_candidates(),
        &|_| Resource::Cpu,
        &mut || true,
        &mut |_| Err(RunError::other("no such field")),
    );
    assert_eq!(t.trials.len(), 1);
    assert!(!t.trials[0].kept);
    assert_eq!(t.best_measurement, None);
    assert_eq!(t.resource, None);
    assert!(
        t.untried
            .iter()
            .all(|u| u.because == "the baseline could not be measured")
    );
}

#[test]
fn a_failing_candidate_is_not_kept_and_its_error_recorded() {
    let start = start();
    let candidates = Candidates {
        try_other_cache: true,
        ..Candidates::default()
    };
    let t = tune(
        start,
        &candidates,
        &|_| Resource::Storage,
        &mut || true,
        &mut |k| {
            if k.os_cache {
                Ok(measurement(100.0))
            } else {
                Err(RunError {
                    message: "budget".into(),
                    memory_budget_needed: Some(64),
                })
            }
        },
    );
    assert_eq!(t.trials[1].knob, "os_cache");
    assert!(!t.trials[1].kept);
    assert!(t.trials[1].memory_guard_fired());
    assert_eq!(t.best, start);
}

#[test]
fn the_budget_is_sliced_for_the_resource_with_the_most_changes() {
    // Storage: batches_ahead 1 and 6, the cache, one order = 4 changes, 3 rounds of 2.
    assert_eq!(planned_runs(&all_candidates()), 1 + 2 * 3 * 4);
    assert_eq!(planned_runs(&Candidates::default()), 1 + 2 * 3);
}
