//! Sizing QuasiRandom's buffer to the process cache's memory budget.
//!
//! FFCV's buffer is `2 * batch_size` pages. With the process cache, the pages a schedule
//! keeps open at once (its slots) grow with the buffer, so at a large batch size or with a
//! small memory budget (a container's limit) FFCV's buffer needs more slot memory than the
//! process may have, and the memory guard refuses the epoch. The loader's default is then
//! the largest buffer whose schedules fit the budget, found by planning them: no formula
//! bounds the slots usefully (in the worst case every page of `prefetch_ahead + 1` batches
//! opens at once, far more than the walk opens in practice), while planning the actual
//! schedules of the first epochs is cheap and exact for them.
//!
//! A buffer "fits" when the largest schedule of epochs `0..PROBE_EPOCHS` plus a margin of
//! an eighth (at least [`MIN_MARGIN_SLOTS`] slots) fits the budget: later epochs draw other
//! walks, whose slot counts differ from these by a few slots; the margin covers that, and
//! the memory guard still checks every epoch.

use beton_io::Reader;
use page_cache::{BudgetFix, PageSchedule};
use traversal::{Distributed, OrderKind, OrderSpec, SamplePages};

/// Epochs whose schedules are planned for each candidate buffer.
pub const PROBE_EPOCHS: u64 = 3;

/// The least headroom, in slots, a fitting buffer leaves over the planned schedules.
pub const MIN_MARGIN_SLOTS: usize = 2;

/// What a QuasiRandom epoch over the loader's samples needs of the process cache.
#[derive(Clone, Copy)]
pub struct QuasiPlan<'a> {
    /// The file.
    pub reader: &'a Reader,
    /// Its page map, as QuasiRandom groups samples.
    pub pages: &'a SamplePages,
    /// The sample ids the loader draws from.
    pub indices: &'a [u64],
    /// The order's seed.
    pub seed: u64,
    /// This rank's share, when distributed.
    pub distributed: Option<Distributed>,
    /// Samples per batch.
    pub batch_size: usize,
    /// Whether the last partial batch is dropped.
    pub drop_last: bool,
    /// The process cache's `prefetch_ahead`.
    pub prefetch_ahead: usize,
}

/// The sizing decision for one loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferSizing {
    /// The buffer chosen, in pages.
    pub buffer_pages: usize,
    /// FFCV's buffer for the batch size (`2 * batch_size`).
    pub ffcv_pages: usize,
    /// Slots the chosen buffer's planned schedules need, margin included.
    pub slots_needed: usize,
    /// `false` when not even a buffer of one page fits: `buffer_pages` is then FFCV's and
    /// the memory guard will refuse the epoch.
    pub fits: bool,
}

/// What one epoch's order costs the process cache on one rank, by the page schedule of
/// its batches (FFCV's rules, `page_cache::PageSchedule`) with no page kept from an
/// earlier epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochPages {
    /// Slots the schedule needs: the most pages alive at once.
    pub slots: usize,
    /// Pages the epoch reads: each page its batches touch, once (a page stays in its
    /// slot from its first batch to its last).
    pub pages_read: usize,
}

/// The schedule cost of an epoch whose order is `samples`, cut into batches of
/// `batch_size` (the last partial one dropped with `drop_last`), pages read up to
/// `prefetch_ahead` batches ahead.
pub fn epoch_pages(
    reader: &Reader,
    samples: &[u64],
    batch_size: usize,
    drop_last: bool,
    prefetch_ahead: usize,
) -> EpochPages {
    let map = reader.page_map();
    let batch_size = batch_size.max(1);
    let mut pages_in_batch: Vec<Vec<u64>> = samples
        .chunks(batch_size)
        .map(|batch| {
            let mut pages: Vec<u64> = batch
                .iter()
                .flat_map(|&s| map.pages_of_sample(s).iter().copied())
                .collect();
            pages.sort_unstable();
            pages.dedup();
            pages
        })
        .collect();
    if drop_last && !samples.len().is_multiple_of(batch_size) {
        pages_in_batch.pop();
    }
    let schedule = PageSchedule::compute(&pages_in_batch, prefetch_ahead);
    EpochPages {
        slots: schedule.num_slots,
        pages_read: schedule.pages.len(),
    }
}

impl QuasiPlan<'_> {
    /// Slots the schedules of epochs `0..PROBE_EPOCHS` need at most with a buffer of
    /// `buffer_pages`, plus the margin.
    pub fn slots_needed(&self, buffer_pages: usize) -> traversal::Result<usize> {
        let spec = OrderSpec {
            seed: self.seed,
            distributed: self.distributed,
            buffer_pages,
            ..OrderSpec::new(OrderKind::QuasiRandom, self.batch_size)
        };
        let order = spec.build(self.indices.to_vec(), Some(self.pages))?;
        let mut most = 0;
        for epoch in 0..PROBE_EPOCHS {
            let samples = order.order(epoch);
            let cost = epoch_pages(
                self.reader,
                &samples,
                self.batch_size,
                self.drop_last,
                self.prefetch_ahead,
            );
            most = most.max(cost.slots);
        }
        Ok(most + (most / 8).max(MIN_MARGIN_SLOTS))
    }

    /// Whether a buffer of `buffer_pages` fits `budget` bytes of slots of `page_size`.
    fn fits(
        &self,
        buffer_pages: usize,
        page_size: u64,
        budget: u64,
    ) -> traversal::Result<(bool, usize)> {
        let slots = self.slots_needed(buffer_pages)?;
        Ok(((slots as u64).saturating_mul(page_size) <= budget, slots))
    }

    /// FFCV's buffer when it fits `budget`, else the largest buffer below it that fits
    /// (a binary search over the planned schedules; the returned buffer was checked).
    pub fn size_buffer(&self, budget: u64) -> traversal::Result<BufferSizing> {
        let page_size = self.reader.page_size();
        let ffcv_pages = traversal::default_buffer_pages(self.batch_size).max(1);
        let (fits, slots) = self.fits(ffcv_pages, page_size, budget)?;
        if fits {
            return Ok(BufferSizing {
                buffer_pages: ffcv_pages,
                ffcv_pages,
                slots_needed: slots,
                fits: true,
            });
        }
        // Invariant: `good` fits (or is 0: none found yet), `bad` does not.
        let (mut good, mut good_slots, mut bad) = (0usize, 0usize, ffcv_pages);
        while bad - good > 1 {
            let mid = good + (bad - good) / 2;
            let (fits, slots) = self.fits(mid, page_size, budget)?;
            if fits {
                (good, good_slots) = (mid, slots);
            } else {
                bad = mid;
            }
        }
        Ok(if good == 0 {
            BufferSizing {
                buffer_pages: ffcv_pages,
                ffcv_pages,
                slots_needed: slots,
                fits: false,
            }
        } else {
            BufferSizing {
                buffer_pages: good,
                ffcv_pages,
                slots_needed: good_slots,
                fits: true,
            }
        })
    }
}

/// A memory-guard error of `shared`'s epoch with the advice that fits its order: for
/// QuasiRandom the buffer (and the largest one that fits the error's budget), for the
/// others QuasiRandom; never the order in use.
pub(crate) fn with_budget_fix(
    shared: &crate::run_state::Shared,
    error: page_cache::Error,
) -> page_cache::Error {
    let page_cache::Error::MemoryBudget { budget, .. } = &error else {
        return error;
    };
    let budget = *budget;
    let fix = match shared.resume.order_name() {
        "quasi-random" => {
            let pages = SamplePages::from_fn(shared.reader.num_samples(), |s| {
                shared.reader.page_map().pages_of_sample(s).first().copied()
            });
            let plan = QuasiPlan {
                reader: &shared.reader,
                pages: &pages,
                indices: &shared.indices,
                seed: shared.seed,
                distributed: shared.resume.distributed(),
                batch_size: shared.batch_size,
                drop_last: shared.drop_last,
                prefetch_ahead: shared.prefetch_ahead,
            };
            let fitting = plan
                .size_buffer(budget)
                .ok()
                .filter(|s| s.fits)
                .map(|s| s.buffer_pages);
            BudgetFix::QuasiRandomBuffer {
                buffer_pages: shared.resume.buffer_pages(),
                fitting,
            }
        }
        "random" => BudgetFix::OtherOrder("Random"),
        "sequential" => BudgetFix::OtherOrder("Sequential"),
        _ => BudgetFix::OtherOrder("custom"),
    };
    error.with_budget_fix(fix)
}
