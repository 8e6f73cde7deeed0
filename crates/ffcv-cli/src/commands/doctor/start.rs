//! Where `ffcv doctor`'s search starts and what it may try: the knobs the decision rules
//! chose, overridden by those the user gave ([`starting_knobs`]); the process cache's
//! memory budget and QuasiRandom buffer when the start reads through it
//! ([`size_process_cache`]); and the alternative values of each knob ([`candidates`]).

use beton_io::Reader;

use super::rules::{self, Needs, Recommendation, Situation, human_bytes};
use super::tune::{Candidates, Knobs};
use crate::commands::order::OrderChoice;
use crate::loader_args::LoaderArgs;

/// The process cache's share of the memory it may use when the doctor picks the budget:
/// the rest is left to the batches, the pipelines and the OS.
pub const PROCESS_CACHE_SHARE_NUM: u64 = 1;
/// Denominator of that share (1/2).
pub const PROCESS_CACHE_SHARE_DEN: u64 = 2;

/// For a start from the process cache with QuasiRandom: a memory budget (the user's
/// `--max-memory`, else half the memory the process may use) and the largest QuasiRandom
/// buffer up to FFCV's whose page schedules fit it (the user's `--quasi-buffer-pages` if
/// given), recorded in `start` and as rules that fired.
pub fn size_process_cache(
    args: &LoaderArgs,
    reader: &Reader,
    situation: &Situation,
    recommendation: &mut Recommendation,
    start: &mut Knobs,
) {
    if start.os_cache || start.order != OrderChoice::QuasiRandom {
        return;
    }
    let budget = match (args.cache.max_memory, situation.memory) {
        (Some(given), _) => given,
        (None, Some(memory)) => {
            let budget = memory.available / PROCESS_CACHE_SHARE_DEN * PROCESS_CACHE_SHARE_NUM;
            recommendation.fired.push(rules::Fired {
                id: "process-cache-budget",
                because: format!(
                    "the process cache gets half of the memory this process may use ({} of {}), leaving the rest to batches, pipelines and the OS: --max-memory {budget}",
                    human_bytes(budget),
                    human_bytes(memory.available)
                ),
            });
            start.max_memory = Some(budget);
            budget
        }
        (None, None) => return,
    };
    if args.cache.quasi_buffer_pages.is_some() {
        return;
    }
    let map = reader.page_map();
    let pages = traversal::SamplePages::from_fn(reader.num_samples(), |s| {
        map.pages_of_sample(s).first().copied()
    });
    let indices: Vec<u64> = (0..reader.num_samples()).collect();
    // The loader's rule: distributed when --world-size and --rank are given.
    let distributed = args.distributed().and_then(|(world_size, rank)| {
        traversal::Distributed::new(
            usize::try_from(world_size).ok()?,
            usize::try_from(rank).ok()?,
        )
        .ok()
    });
    let plan = ffcv::quasi_buffer::QuasiPlan {
        reader,
        pages: &pages,
        indices: &indices,
        seed: recommendation.seed.or(args.seed).unwrap_or(0),
        distributed,
        batch_size: args.batch_size,
        drop_last: !args.no_drop_last,
        prefetch_ahead: args.cache.prefetch_ahead.map_or(3, |p| p as usize),
    };
    let Ok(sizing) = plan.size_buffer(budget) else {
        return;
    };
    let page = reader.page_size();
    recommendation.fired.push(rules::Fired {
        id: "quasi-buffer-fits",
        because: if !sizing.fits {
            format!(
                "no QuasiRandom buffer fits the process cache's {} (even 1 page of {}): raise --max-memory or lower --batch-size",
                human_bytes(budget),
                human_bytes(page)
            )
        } else if sizing.buffer_pages == sizing.ffcv_pages {
            format!(
                "QuasiRandom keeps FFCV's buffer of {} pages (2 x batch size): its page schedules need {} slots of {}, within the process cache's {}",
                sizing.buffer_pages,
                sizing.slots_needed,
                human_bytes(page),
                human_bytes(budget)
            )
        } else {
            format!(
                "QuasiRandom buffer of {} pages instead of FFCV's {} (2 x batch size), the largest whose page schedules fit the process cache's {} ({} slots of {}): --quasi-buffer-pages {}",
                sizing.buffer_pages,
                sizing.ffcv_pages,
                human_bytes(budget),
                sizing.slots_needed,
                human_bytes(page),
                sizing.buffer_pages
            )
        },
    });
    if sizing.fits {
        start.quasi_buffer_pages = Some(sizing.buffer_pages);
    }
}

/// The knobs the measurement starts from: the rules' choice, overridden by the knobs the
/// user gave explicitly.
pub fn starting_knobs(args: &LoaderArgs, recommendation: &Recommendation, cpus: usize) -> Knobs {
    Knobs {
        os_cache: recommendation.os_cache && !args.no_os_cache,
        order: args.order.unwrap_or(recommendation.order),
        num_workers: match args.num_workers {
            Some(n) if n > 0 => n as usize,
            Some(_) => cpus,
            None => recommendation.num_workers,
        },
        batches_ahead: args.batches_ahead,
        max_memory: None,
        quasi_buffer_pages: None,
    }
}

/// The values the search may try from `start`: worker counts 1, the rules' and all CPUs;
/// queue depths 1, 3 and 6; the OS cache when the run started from the process cache (the
/// file larger than memory: the A/B shows what the process cache gains over the OS cache
/// as it is used today, unless the file is larger only than a `--max-memory` budget and
/// fits the machine, where a run's page cache holds it all and the A/B would show a gain
/// the budget forbids; never the other way: a file that fits is best kept once in the
/// page cache, shared by every process, which a short run in one process cannot show); the other
/// shuffling order only when neither a repeatable nor an exactly uniform order is required
/// and the file fits memory (larger than memory, the rules' order is what keeps the working
/// set small, which a short run cannot show either). A remote source tries neither: it
/// cannot be memory-mapped (the OS cache would be the process cache with a warning), and
/// QuasiRandom is what keeps its requests to one per page.
pub fn candidates(
    start: &Knobs,
    recommendation: &Recommendation,
    cpus: usize,
    needs: Needs,
) -> Candidates {
    let mut num_workers: Vec<usize> = [1, recommendation.num_workers, cpus]
        .into_iter()
        .filter(|&n| n != start.num_workers)
        .collect();
    num_workers.sort_unstable();
    num_workers.dedup();
    let batches_ahead = [1, 3, 6]
        .into_iter()
        .filter(|&b| b != start.batches_ahead)
        .collect();
    let fits = !recommendation.larger_than_memory;
    let orders = if fits && !recommendation.remote && !needs.repeatable && !needs.uniform {
        [OrderChoice::Random, OrderChoice::QuasiRandom]
            .into_iter()
            .filter(|&o| o != start.order)
            .collect()
    } else {
        Vec::new()
    };
    Candidates {
        num_workers,
        batches_ahead,
        try_other_cache: !start.os_cache && !recommendation.remote && !recommendation.budget_only,
        orders,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: LoaderArgs,
    }

    fn args(extra: &[&str]) -> LoaderArgs {
        let mut argv = vec!["doctor", "f.beton"];
        argv.extend_from_slice(extra);
        Wrapper::parse_from(argv).args
    }

    fn recommendation(os_cache: bool, larger: bool) -> Recommendation {
        Recommendation {
            os_cache,
            order: if larger {
                OrderChoice::QuasiRandom
            } else {
                OrderChoice::Random
            },
            num_workers: 2,
            seed: None,
            larger_than_memory: larger,
            budget_only: false,
            remote: false,
            fired: Vec::new(),
        }
    }

    #[test]
    fn explicit_knobs_override_the_rules_start() {
        let r = recommendation(true, false);
        let start = starting_knobs(&args(&[]), &r, 4);
        assert_eq!(
            start,
            Knobs {
                os_cache: true,
                order: OrderChoice::Random,
                num_workers: 2,
                batches_ahead: 3,
                max_memory: None,
                quasi_buffer_pages: None,
            }
        );
        let given = args(&[
            "--no-os-cache",
            "--order",
            "sequential",
            "--num-workers",
            "-1",
            "--batches-ahead",
            "5",
        ]);
        let start = starting_knobs(&given, &r, 4);
        assert_eq!(
            start,
            Knobs {
                os_cache: false,
                order: OrderChoice::Sequential,
                num_workers: 4,
                batches_ahead: 5,
                max_memory: None,
                quasi_buffer_pages: None,
            }
        );
    }

    #[test]
    fn a_file_larger_than_memory_is_measured_against_the_os_cache_but_no_other_order() {
        let r = recommendation(false, true);
        let start = starting_knobs(&args(&[]), &r, 4);
        let c = candidates(&start, &r, 4, Needs::default());
        assert!(c.try_other_cache);
        assert!(c.orders.is_empty());
        assert_eq!(c.num_workers, [1, 4]);
        assert_eq!(c.batches_ahead, [1, 6]);
        // Larger only than a --max-memory budget, the machine holding it: no OS-cache trial.
        let budget = Recommendation {
            budget_only: true,
            ..recommendation(false, true)
        };
        assert!(!candidates(&start, &budget, 4, Needs::default()).try_other_cache);
    }

    #[test]
    fn a_file_that_fits_may_try_the_os_cache_and_another_order_unless_the_order_is_pinned() {
        let r = recommendation(true, false);
        let start = starting_knobs(&args(&[]), &r, 2);
        let c = candidates(&start, &r, 2, Needs::default());
        assert!(
            !c.try_other_cache,
            "the OS cache is never traded for the process cache"
        );
        assert_eq!(c.orders, [OrderChoice::QuasiRandom]);
        assert_eq!(c.num_workers, [1]);
        let from_process = starting_knobs(&args(&["--no-os-cache"]), &r, 2);
        assert!(candidates(&from_process, &r, 2, Needs::default()).try_other_cache);
        let pinned = Needs {
            repeatable: true,
            uniform: false,
        };
        assert!(candidates(&start, &r, 2, pinned).orders.is_empty());
    }

    #[test]
    fn a_remote_source_never_tries_the_os_cache_nor_another_order() {
        let mut r = recommendation(false, false);
        r.remote = true;
        r.order = OrderChoice::QuasiRandom;
        let start = starting_knobs(&args(&[]), &r, 4);
        assert!(!start.os_cache);
        let c = candidates(&start, &r, 4, Needs::default());
        assert!(!c.try_other_cache);
        assert!(c.orders.is_empty());
        assert_eq!(c.batches_ahead, [1, 6]);
    }
}
