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

    /// Re-runs the slot assignment so that pages still held in a slot from the previous
    /// epoch keep that slot, and returns, per entry of `pages`, whether it did.
    ///
    /// `held(page)` names the slot holding `page` intact, if any (slots at or beyond
    /// `num_slots` are ignored). The assignment stays greedy in batch order with the
    /// same slot count. A page keeps its held slot if, at the page's prefetch batch, that
    /// slot is free and no other page has been put in it this epoch (which would have
    /// overwritten it). Other pages take, in order of preference, a free slot that holds
    /// nothing still wanted, then one whose held page is wanted later (losing it).
    pub fn keep_held_slots(&mut self, held: impl Fn(u64) -> Option<u32>) -> Vec<bool> {
        let n = self.num_slots;
        let mut kept = vec![false; self.pages.len()];
        if n == 0 {
            return kept;
        }
        // wanted[s]: slot s still holds, intact, a page of this epoch not placed yet;
        // wanted_at[s]: the batch at which that page will be placed.
        let mut wanted = vec![false; n];
        let mut wanted_at = vec![usize::MAX; n];
        let mut holder = vec![None; self.pages.len()];
        for (i, p) in self.pages.iter().enumerate() {
            if let Some(s) = held(p.page).filter(|&s| (s as usize) < n) {
                wanted[s as usize] = true;
                wanted_at[s as usize] = wanted_at[s as usize].min(p.prefetch_at);
                holder[i] = Some(s);
            }
        }
        let original: Vec<u32> = self.pages.iter().map(|p| p.slot).collect();
        let mut is_free = vec![true; n];
        // Free slots holding nothing wanted, as a stack checked lazily on pop (an entry
        // may be stale: the slot was taken since). Pushed in reverse so that, without
        // held pages, slots open in index order.
        let mut plain: Vec<u32> = (0..n as u32)
            .rev()
            .filter(|&s| !wanted[s as usize])
            .collect();
        // Slots holding a wanted page, the one wanted last on top: when a page must
        // overwrite one, losing the page needed furthest ahead costs least (Belady).
        // A slot never re-enters this list: once its page is placed or lost, it is
        // an ordinary slot and returns to `plain` when freed.
        let mut spoken: Vec<u32> = (0..n as u32).filter(|&s| wanted[s as usize]).collect();
        spoken.sort_by_key(|&s| wanted_at[s as usize]);
        let pop_free = |stack: &mut Vec<u32>, is_free: &[bool]| loop {
            match stack.pop() {
                Some(s) if is_free[s as usize] => break Some(s),
                Some(_) => continue,
                None => break None,
            }
        };
        for b in 0..self.num_batches() {
            for &i in &self.leaving[b] {
                // A page leaving was placed this epoch, so its slot is wanted by nobody.
                let s = self.pages[i].slot;
                is_free[s as usize] = true;
                plain.push(s);
            }
            for i in self.prefetch_ranges[b].clone() {
                if let Some(h) = holder[i] {
                    // `wanted[h]` is still true only if no other page took slot h.
                    if wanted[h as usize] && is_free[h as usize] {
                        wanted[h as usize] = false;
                        is_free[h as usize] = false;
                        self.pages[i].slot = h;
                        kept[i] = true;
                        continue;
                    }
                }
                // Greedy counting guarantees a free slot (at most `num_slots` pages are
                // alive at any batch, and kept pages only take free slots); should that
                // ever fail, the original assignment stands and nothing is kept.
                let Some(s) =
                    pop_free(&mut plain, &is_free).or_else(|| pop_free(&mut spoken, &is_free))
                else {
                    for (p, slot) in self.pages.iter_mut().zip(original) {
                        p.slot = slot;
                    }
                    return vec![false; self.pages.len()];
                };
                // Whatever slot s held is overwritten now.
                wanted[s as usize] = false;
                is_free[s as usize] = false;
                self.pages[i].slot = s;
            }
        }
        kept
    }

    /// Gives every page of the epoch a slot of its own for the whole epoch (growing
    /// `num_slots` to at least the number of pages), so that after the epoch the slots
    /// hold every page; returns, per entry of `pages`, whether it kept its held slot.
    ///
    /// `held(page)` names the slot holding `page` intact, if any. A page keeps it unless
    /// the slot is out of range or another page claimed it first; the other pages take
    /// the lowest slots nobody keeps. Lifetimes no longer matter: no slot is shared.
    pub fn one_slot_per_page(&mut self, held: impl Fn(u64) -> Option<u32>) -> Vec<bool> {
        let n = self.num_slots.max(self.pages.len());
        self.num_slots = n;
        let mut taken = vec![false; n];
        let mut kept = vec![false; self.pages.len()];
        for (i, p) in self.pages.iter_mut().enumerate() {
            if let Some(h) = held(p.page).filter(|&h| (h as usize) < n && !taken[h as usize]) {
                taken[h as usize] = true;
                p.slot = h;
                kept[i] = true;
            }
        }
        let mut next_free = (0..n as u32).filter(|&s| !taken[s as usize]);
        for (p, _) in self.pages.iter_mut().zip(&kept).filter(|(_, k)| !**k) {
            // n >= pages.len(): there are at least as many free slots as pages left.
            p.slot = next_free.next().unwrap_or(0);
        }
        kept
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

    /// A small deterministic pseudo-random generator (xorshift): `next(m)` is in `0..m`.
    fn xorshift(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed;
        move |m| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        }
    }

    /// `nb` batches of up to four pages each, drawn from `0..np`.
    fn random_batches(next: &mut impl FnMut(u64) -> u64, nb: usize, np: u64) -> Vec<Vec<u64>> {
        (0..nb)
            .map(|_| (0..next(5)).map(|_| next(np)).collect())
            .collect()
    }

    /// Two pages sharing a slot never have overlapping lifetimes.
    fn assert_slots_never_overlap(s: &PageSchedule) {
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
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..300 {
            let nb = 1 + next(12) as usize;
            let np = 1 + next(20);
            let ahead = next(5) as usize;
            let batches = random_batches(&mut next, nb, np);
            let s = PageSchedule::compute(&batches, ahead);
            assert_eq!(s.num_slots, max_alive(&s), "{batches:?} ahead {ahead}");
            assert_slots_never_overlap(&s);
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

    #[test]
    fn one_slot_per_page_keeps_held_pages_and_shares_no_slot() {
        let batches: Vec<Vec<u64>> = (0..6).map(|b| vec![b as u64 + 10]).collect();
        let mut s = PageSchedule::compute(&batches, 0);
        assert_eq!(s.num_slots, 1);
        // Page 12 is held in slot 4, page 13 claims slot 9 (out of range once grown to
        // six), page 14 claims slot 4 too (already kept for 12).
        let held = |p: u64| match p {
            12 => Some(4),
            13 => Some(9),
            14 => Some(4),
            _ => None,
        };
        let kept = s.one_slot_per_page(held);
        assert_eq!(s.num_slots, 6);
        let by_page: Vec<(u64, u32, bool)> = s
            .pages
            .iter()
            .zip(&kept)
            .map(|(p, &k)| (p.page, p.slot, k))
            .collect();
        assert_eq!(
            by_page,
            vec![
                (10, 0, false),
                (11, 1, false),
                (12, 4, true),
                (13, 2, false),
                (14, 3, false),
                (15, 5, false)
            ]
        );
        // The next epoch over the same pages keeps all of them.
        let mut again = PageSchedule::compute(&batches, 0);
        let slots: Vec<(u64, u32)> = s.pages.iter().map(|p| (p.page, p.slot)).collect();
        let kept = again.one_slot_per_page(|p| slots.iter().find(|x| x.0 == p).map(|x| x.1));
        assert!(kept.iter().all(|&k| k));
        assert_eq!(again.pages, s.pages);
    }

    #[test]
    fn held_slots_are_kept_when_free_and_the_assignment_stays_valid() {
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        for _ in 0..300 {
            let nb = 1 + next(12) as usize;
            let np = 1 + next(20);
            let ahead = next(5) as usize;
            let first = PageSchedule::compute(&random_batches(&mut next, nb, np), ahead);
            let batches = random_batches(&mut next, nb, np);
            let mut s = PageSchedule::compute(&batches, ahead);
            let before = s.clone();
            // What the slots hold after `first`: each slot's last page.
            let last_in_slot = |sched: &PageSchedule| {
                let mut last = std::collections::BTreeMap::new();
                for p in &sched.pages {
                    last.insert(p.slot, p.page);
                }
                last.into_iter()
                    .map(|(slot, page)| (page, slot))
                    .collect::<std::collections::BTreeMap<u64, u32>>()
            };
            let held_after_first = last_in_slot(&first);
            let held = |p: u64| held_after_first.get(&p).copied();
            let kept = s.keep_held_slots(held);
            // Only slots change; the count and lifetimes stay.
            assert_eq!(s.num_slots, before.num_slots);
            for (a, c) in s.pages.iter().zip(&before.pages) {
                assert_eq!(
                    (a.page, a.first, a.last, a.prefetch_at),
                    (c.page, c.first, c.last, c.prefetch_at)
                );
                assert!((a.slot as usize) < s.num_slots);
            }
            for (i, p) in s.pages.iter().enumerate() {
                if kept[i] {
                    assert_eq!(Some(p.slot), held(p.page));
                }
            }
            assert_slots_never_overlap(&s);
            // When the epoch's pages all fit in its slots, every held page is kept.
            if s.pages.len() <= s.num_slots {
                for (i, p) in s.pages.iter().enumerate() {
                    let fits = held(p.page).is_some_and(|h| (h as usize) < s.num_slots);
                    assert_eq!(kept[i], fits, "{p:?}");
                }
            }
            // The same epoch again: when every page had a slot of its own, the slots
            // end holding all of them, and all are kept.
            let mut again = s.clone();
            let held_after_s = last_in_slot(&s);
            let kept_again = again.keep_held_slots(|p| held_after_s.get(&p).copied());
            if s.pages.len() == s.num_slots {
                assert!(kept_again.iter().all(|&k| k));
            }
        }
    }
}
