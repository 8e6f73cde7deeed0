//! The page schedule of one epoch: which pages each batch needs, when each page may be
//! fetched and released, and which slot it lives in.
//!
//! The rules are FFCV's (`compute_schedule`): a page enters at the first batch that
//! needs it, may be prefetched `prefetch_ahead` batches earlier, and leaves after the
//! last batch that needs it; slots are handed out greedily at prefetch time, reusing a
//! slot freed at that same batch before opening a new one. This module is pure
//! (no I/O), so the slot count of a schedule can be checked on its own.

/// One page of the epoch's schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduledPage {
    /// Page index in the file (`offset / page_size`).
    pub page: u64,
    /// Slot the page is read into.
    pub slot: u32,
    /// First batch at which the page may be fetched (`first - prefetch_ahead`, at least 0).
    pub prefetch_at: usize,
    /// First batch that needs the page.
    pub first: usize,
    /// Last batch that needs the page; its slot is free from batch `last + 1` on.
    pub last: usize,
}

/// Where every page of an epoch lives and when it moves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageSchedule {
    /// Number of slots the epoch needs (the most pages alive at any batch).
    pub num_slots: usize,
    /// Every page the epoch touches, ordered by `(prefetch_at, first, page)`, which is
    /// the order their reads are queued in.
    pub pages: Vec<ScheduledPage>,
    /// Per batch: the range of `pages` whose `prefetch_at` is that batch.
    pub prefetch_ranges: Vec<std::ops::Range<usize>>,
    /// Per batch: indices into `pages` of the pages that batch needs first (`first == b`).
    pub entering: Vec<Vec<usize>>,
    /// Per batch: indices into `pages` of the pages released before that batch
    /// (`last + 1 == b`).
    pub leaving: Vec<Vec<usize>>,
}

impl PageSchedule {
    /// Computes the schedule from the pages each batch needs.
    ///
    /// `pages_in_batch[b]` lists the pages batch `b` reads (any order, duplicates
    /// allowed). Pages are scheduled the same way FFCV does; `prefetch_ahead = 0`
    /// fetches each page only when the batch that needs it starts.
    pub fn compute(pages_in_batch: &[Vec<u64>], prefetch_ahead: usize) -> PageSchedule {
        let num_batches = pages_in_batch.len();
        // (page, batch) pairs sorted by page then batch give each page's first and
        // last batch without a hash map.
        let mut pairs: Vec<(u64, usize)> = pages_in_batch
            .iter()
            .enumerate()
            .flat_map(|(b, pages)| pages.iter().map(move |&p| (p, b)))
            .collect();
        pairs.sort_unstable();
        let mut pages: Vec<ScheduledPage> = Vec::new();
        for &(page, b) in &pairs {
            match pages.last_mut() {
                Some(last) if last.page == page => last.last = b,
                _ => pages.push(ScheduledPage {
                    page,
                    slot: 0,
                    prefetch_at: b.saturating_sub(prefetch_ahead),
                    first: b,
                    last: b,
                }),
            }
        }
        pages.sort_unstable_by_key(|p| (p.prefetch_at, p.first, p.page));

        let mut prefetch_ranges = vec![0..0; num_batches];
        let mut entering = vec![Vec::new(); num_batches];
        let mut leaving = vec![Vec::new(); num_batches];
        let mut start = 0;
        while start < pages.len() {
            let b = pages[start].prefetch_at;
            let mut end = start;
            while end < pages.len() && pages[end].prefetch_at == b {
                end += 1;
            }
            prefetch_ranges[b] = start..end;
            start = end;
        }
        for (i, p) in pages.iter().enumerate() {
            entering[p.first].push(i);
            if p.last + 1 < num_batches {
                leaving[p.last + 1].push(i);
            }
        }

        // Greedy slot assignment in batch order: free the slots of the pages leaving at
        // b, then give the pages that may be prefetched at b a free slot (the most
        // recently freed first) or a new one.
        let mut free: Vec<u32> = Vec::new();
        let mut num_slots: u32 = 0;
        for b in 0..num_batches {
            for &i in &leaving[b] {
                free.push(pages[i].slot);
            }
            for i in prefetch_ranges[b].clone() {
                pages[i].slot = free.pop().unwrap_or_else(|| {
                    num_slots += 1;
                    num_slots - 1
                });
            }
        }
        PageSchedule {
            num_slots: num_slots as usize,
            pages,
            prefetch_ranges,
            entering,
            leaving,
        }
    }

    /// Number of batches the schedule covers.
    pub fn num_batches(&self) -> usize {
        self.entering.len()
    }

    /// Bytes of slot memory the schedule needs with pages of `page_size` bytes
    /// (saturating, so an absurd schedule reads as "too large", never wraps).
    pub fn slot_bytes(&self, page_size: u64) -> u64 {
        (self.num_slots as u64).saturating_mul(page_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The most pages alive at any batch, counted directly: the slot count a greedy
    /// schedule that reuses freed slots must reach and never exceed.
    fn max_alive(s: &PageSchedule) -> usize {
        (0..s.num_batches())
            .map(|b| {
                s.pages
                    .iter()
                    .filter(|p| p.prefetch_at <= b && b <= p.last)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn sequential_pages_reuse_two_slots_without_prefetch() {
        let batches = vec![vec![1], vec![1, 2], vec![2], vec![3], vec![4]];
        let s = PageSchedule::compute(&batches, 0);
        assert_eq!(s.num_slots, 2);
        let find = |page| *s.pages.iter().find(|p| p.page == page).unwrap();
        assert_eq!((find(1).first, find(1).last), (0, 1));
        assert_eq!((find(2).first, find(2).last), (1, 2));
        // Freed slots are reused most recently freed first: at batch 3 both slots are
        // free (page 1 left at batch 2, page 2 at batch 3), page 3 takes page 2's, and
        // page 4 takes it again after page 3 leaves.
        assert_eq!((find(1).slot, find(2).slot), (0, 1));
        assert_eq!((find(3).slot, find(4).slot), (1, 1));
        assert_eq!(s.leaving[2], vec![0]);
        assert_eq!(s.entering[1], vec![1]);
    }

    #[test]
    fn prefetch_window_adds_slots_and_clamps_at_zero() {
        let batches: Vec<Vec<u64>> = (0..6).map(|b| vec![b as u64 + 10]).collect();
        let s = PageSchedule::compute(&batches, 3);
        // At batch 0, pages 10..=13 may all be fetched: four slots, then steady state.
        assert_eq!(s.num_slots, 4);
        assert_eq!(s.prefetch_ranges[0], 0..4);
        assert_eq!(s.pages[5].prefetch_at, 2);
        assert_eq!(max_alive(&s), 4);
    }

    #[test]
    fn empty_batches_need_no_slots() {
        let s = PageSchedule::compute(&[vec![], vec![]], 3);
        assert_eq!(s.num_slots, 0);
        assert!(s.pages.is_empty());
        assert_eq!(s.num_batches(), 2);
        let s = PageSchedule::compute(&[], 3);
        assert_eq!(s.num_slots, 0);
    }

    #[test]
    fn slot_count_equals_most_pages_alive_and_slots_never_overlap() {
        // A small deterministic pseudo-random schedule generator (xorshift), many cases.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..300 {
            let nb = 1 + next(12) as usize;
            let np = 1 + next(20);
            let ahead = next(5) as usize;
            let batches: Vec<Vec<u64>> = (0..nb)
                .map(|_| (0..next(5)).map(|_| next(np)).collect())
                .collect();
            let s = PageSchedule::compute(&batches, ahead);
            assert_eq!(s.num_slots, max_alive(&s), "{batches:?} ahead {ahead}");
            // Two pages sharing a slot never have overlapping lifetimes.
            for a in &s.pages {
                for c in &s.pages {
                    if a.page != c.page && a.slot == c.slot {
                        assert!(
                            a.last < c.prefetch_at || c.last < a.prefetch_at,
                            "{a:?} {c:?}"
                        );
                    }
                }
            }
            // Every needed page is scheduled, entering at its first batch.
            for (b, pages) in batches.iter().enumerate() {
                for p in pages {
                    let sp = s.pages.iter().find(|x| x.page == *p).unwrap();
                    assert!(sp.first <= b && b <= sp.last);
                    assert!(sp.prefetch_at + ahead >= sp.first);
                }
            }
        }
    }
}
