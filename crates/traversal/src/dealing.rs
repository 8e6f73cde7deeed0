//! Dealing page groups to ranks so that the ranks' shares differ by at most one sample:
//! whole pages where they fit, a page cut at sample level where none does. QuasiRandom's
//! distributed mode deals an epoch's pages this way, and the elastic split of a resumed
//! epoch deals its pool's pages this way.
//!
//! Bin `b` of `bins` holds exactly [`quota`]`(total, bins, b)` samples: `total / bins`,
//! one more for the first `total % bins` bins. So every rank pads at most one sample to
//! the common length `ceil(total / bins)`, fewer than `bins` in all, as PyTorch's
//! `DistributedSampler` pads.
//!
//! The groups are dealt in the order given: each goes whole to the bin with the least
//! room that still holds it (best fit, lowest bin on ties). When no bin holds it, the
//! bin with the most room (highest bin on ties) takes as many of its samples as it has
//! room for, and the rest is dealt the same way. Every cut fills a bin, and the last open
//! bin's room is exactly what is left, so an epoch cuts at most `bins - 1` times: the
//! pages of the file are read at most `bins - 1` extra times in all, less than one extra
//! page read per rank.

use std::collections::BTreeSet;

/// Samples `start..end` of group `group` (positions in the group's sample list), dealt to
/// one bin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Piece {
    pub(crate) group: usize,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl Piece {
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }
}

/// The samples bin `bin` of `bins` holds when `total` samples are dealt.
pub(crate) fn quota(total: usize, bins: usize, bin: usize) -> usize {
    total / bins + usize::from(bin < total % bins)
}

/// Deals `groups` (indices into `sizes`, in dealing order; empty groups are skipped) to
/// `bins` bins of [`quota`] samples each. Returns each bin's pieces in the order dealt.
/// `bins` must not be zero.
pub(crate) fn deal_balanced(sizes: &[usize], groups: &[usize], bins: usize) -> Vec<Vec<Piece>> {
    let total: usize = groups.iter().map(|&g| sizes[g]).sum();
    let mut dealt = vec![Vec::new(); bins];
    // (room left, bin) of every bin that still has room.
    let mut open: BTreeSet<(usize, usize)> = (0..bins)
        .map(|b| (quota(total, bins, b), b))
        .filter(|&(room, _)| room > 0)
        .collect();
    for &group in groups {
        let size = sizes[group];
        let mut start = 0;
        while start < size {
            let left = size - start;
            let fit = open.range((left, 0)..).next().copied();
            // The rooms add up to the samples not dealt yet, so some bin is open.
            let Some((room, bin)) = fit.or_else(|| open.last().copied()) else {
                break;
            };
            open.remove(&(room, bin));
            let take = left.min(room);
            dealt[bin].push(Piece {
                group,
                start,
                end: start + take,
            });
            if room > take {
                open.insert((room - take, bin));
            }
            start += take;
        }
    }
    dealt
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loads(dealt: &[Vec<Piece>]) -> Vec<usize> {
        dealt
            .iter()
            .map(|bin| bin.iter().map(Piece::len).sum())
            .collect()
    }

    /// Every sample of every group lands in exactly one piece.
    fn assert_covers(sizes: &[usize], dealt: &[Vec<Piece>]) {
        let mut pieces: Vec<Piece> = dealt.iter().flatten().copied().collect();
        pieces.sort_unstable();
        for (group, &size) in sizes.iter().enumerate() {
            let mut next = 0;
            for piece in pieces.iter().filter(|p| p.group == group) {
                assert_eq!(piece.start, next, "{sizes:?}: {dealt:?}");
                assert!(piece.end > piece.start);
                next = piece.end;
            }
            assert_eq!(next, size, "{sizes:?}: {dealt:?}");
        }
    }

    #[test]
    fn shares_differ_by_at_most_one_sample_with_at_most_bins_minus_one_cuts() {
        let layouts: [&[usize]; 6] = [
            &[64],
            &[4, 2],
            &[300; 12],
            &[7, 7, 7, 3],
            &[1, 1, 1],
            &[257, 257, 257, 257, 257, 257, 257, 257, 257, 257, 257, 253],
        ];
        for sizes in layouts {
            for bins in 1..=9 {
                let groups: Vec<usize> = (0..sizes.len()).collect();
                let dealt = deal_balanced(sizes, &groups, bins);
                let total: usize = sizes.iter().sum();
                let expected: Vec<usize> = (0..bins).map(|b| quota(total, bins, b)).collect();
                assert_eq!(loads(&dealt), expected, "{sizes:?} over {bins}");
                assert_covers(sizes, &dealt);
                let pieces = dealt.iter().map(Vec::len).sum::<usize>();
                let cuts = pieces - sizes.len();
                assert!(cuts < bins, "{sizes:?} over {bins}: {cuts} cuts");
            }
        }
    }

    #[test]
    fn pages_that_fit_are_dealt_whole() {
        // 4 pages of 3 over 2 bins of 6: no cut.
        let dealt = deal_balanced(&[3, 3, 3, 3], &[0, 1, 2, 3], 2);
        assert!(dealt.iter().flatten().all(|p| p.len() == 3), "{dealt:?}");
        // One page of 64 over 2 bins: cut once, 32 each.
        let dealt = deal_balanced(&[64], &[0], 2);
        assert_eq!(
            dealt,
            vec![
                vec![Piece {
                    group: 0,
                    start: 32,
                    end: 64
                }],
                vec![Piece {
                    group: 0,
                    start: 0,
                    end: 32
                }],
            ]
        );
    }

    #[test]
    fn fewer_samples_than_bins_leave_the_last_bins_empty() {
        let dealt = deal_balanced(&[2, 1], &[0, 1], 5);
        assert_eq!(loads(&dealt), vec![1, 1, 1, 0, 0]);
        assert_covers(&[2, 1], &dealt);
        assert!(deal_balanced(&[0], &[0], 3).iter().all(Vec::is_empty));
    }
}
