//! The order of a weighted mixture ([`MixtureOrder`]): how many positions of an epoch
//! each source gets (largest remainder of the weights), which source each position
//! draws from (smooth weighted round robin, the same every epoch), and each source's
//! own walk without replacement, pass after pass, in a built-in order seeded from
//! `(seed, source, pass)`. Pure computation over global sample ids; `docs/mixtures.md`
//! is the definition.

use sha2::{Digest, Sha256};
use traversal::{Distributed, OrderKind, OrderSpec, SamplePages, TraversalOrder};

/// What a source does when its pass runs out inside an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenExhausted {
    /// Start a new pass over the source, in a fresh order from `(seed, epoch, pass)`
    /// (the default): every epoch has exactly the weighted counts.
    #[default]
    Cycle,
    /// End the epoch at the first position whose source has no sample left in its
    /// first pass: no sample repeats within an epoch.
    Stop,
}

impl WhenExhausted {
    /// The name front ends use: `cycle` or `stop`.
    pub fn name(self) -> &'static str {
        match self {
            WhenExhausted::Cycle => "cycle",
            WhenExhausted::Stop => "stop",
        }
    }
}

impl std::str::FromStr for WhenExhausted {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cycle" => Ok(WhenExhausted::Cycle),
            "stop" => Ok(WhenExhausted::Stop),
            other => Err(format!("{other:?} is not cycle or stop")),
        }
    }
}

/// One source as the order sees it: its global sample ids, in file order.
#[derive(Debug, Clone)]
pub(crate) struct SourceIds {
    pub(crate) first: u64,
    pub(crate) len: u64,
}

impl SourceIds {
    fn ids(&self) -> Vec<u64> {
        (self.first..self.first + self.len).collect()
    }
}

/// The mixture's knobs the order needs, already checked.
#[derive(Debug, Clone)]
pub(crate) struct PlanKnobs {
    pub(crate) kind: OrderKind,
    pub(crate) seed: u64,
    pub(crate) buffer_pages: usize,
    pub(crate) samples_per_epoch: u64,
    pub(crate) when_exhausted: WhenExhausted,
    pub(crate) rank: usize,
    pub(crate) world_size: usize,
}

/// The order of a weighted mixture over global sample ids (see the module docs); a
/// [`TraversalOrder`], so the loader runs it as any order.
pub struct MixtureOrder {
    sources: Vec<SourceIds>,
    knobs: PlanKnobs,
    pages: Option<SamplePages>,
    /// The source of each position of an epoch (before the split among ranks), the same
    /// every epoch.
    pattern: Vec<u32>,
    /// Positions per epoch drawn from each source.
    counts: Vec<u64>,
}

impl std::fmt::Debug for MixtureOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixtureOrder")
            .field("counts", &self.counts)
            .field("knobs", &self.knobs)
            .finish_non_exhaustive()
    }
}

/// Positions per source for an epoch of `n` positions: the largest-remainder split of
/// `n` by `weights` (ties to the lower source index), so the counts sum to `n` and each
/// is within one of `n * w / sum(w)`.
pub(crate) fn weighted_counts(weights: &[f64], n: u64) -> Vec<u64> {
    let total: f64 = weights.iter().sum();
    let quotas: Vec<f64> = weights.iter().map(|w| n as f64 * w / total).collect();
    let mut counts: Vec<u64> = quotas.iter().map(|q| q.floor() as u64).collect();
    let assigned: u64 = counts.iter().sum();
    let mut by_remainder: Vec<usize> = (0..weights.len()).filter(|&s| weights[s] > 0.0).collect();
    by_remainder.sort_by(|&a, &b| {
        let (ra, rb) = (quotas[a] - quotas[a].floor(), quotas[b] - quotas[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    // Rounding of the quotas can leave the floors a little off `n` either way.
    let mut left = n.saturating_sub(assigned);
    for &s in by_remainder.iter().cycle().take(by_remainder.len() * 2) {
        if left == 0 {
            break;
        }
        counts[s] += 1;
        left -= 1;
    }
    let mut over = assigned.saturating_sub(n);
    for s in (0..counts.len()).rev() {
        let cut = over.min(counts[s]);
        counts[s] -= cut;
        over -= cut;
    }
    counts
}

/// The source of each of `sum(counts)` positions: smooth weighted round robin (each
/// step adds every source's count to its credit, takes the source of largest credit,
/// ties to the lower index, and charges it the total), which spreads each source evenly
/// over the epoch and gives each exactly its count.
fn interleave(counts: &[u64]) -> Vec<u32> {
    let total: u64 = counts.iter().sum();
    let mut credit = vec![0i128; counts.len()];
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        let mut best: Option<usize> = None;
        for (s, &c) in counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            credit[s] += i128::from(c);
            if best.is_none_or(|b| credit[s] > credit[b]) {
                best = Some(s);
            }
        }
        let Some(b) = best else { break };
        credit[b] -= i128::from(total);
        out.push(b as u32);
    }
    out
}

/// SplitMix64's finalizer: a well-mixed 64-bit value from any input.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of pass `pass` of source `source`: 32 bits (a valid NumPy seed), from the
/// mixture's seed, the source and the pass.
pub(crate) fn pass_seed(seed: u64, source: usize, pass: u64) -> u64 {
    mix64(mix64(mix64(seed) ^ source as u64) ^ pass) & 0xFFFF_FFFF
}

impl MixtureOrder {
    /// The order over `sources` with `weights` (checked by the caller: one per source,
    /// finite, non-negative, positive sum, every weighted source non-empty). Fails as
    /// [`OrderSpec::build`] fails (QuasiRandom over a source without data pages).
    pub(crate) fn new(
        sources: Vec<SourceIds>,
        weights: &[f64],
        knobs: PlanKnobs,
        pages: Option<SamplePages>,
    ) -> traversal::Result<MixtureOrder> {
        let counts_full = weighted_counts(weights, knobs.samples_per_epoch);
        let mut pattern = interleave(&counts_full);
        if knobs.when_exhausted == WhenExhausted::Stop {
            let mut taken = vec![0u64; sources.len()];
            let end = pattern.iter().position(|&s| {
                let s = s as usize;
                taken[s] += 1;
                taken[s] > sources[s].len
            });
            if let Some(end) = end {
                pattern.truncate(end);
            }
        }
        let mut counts = vec![0u64; sources.len()];
        for &s in &pattern {
            counts[s as usize] += 1;
        }
        let order = MixtureOrder {
            sources,
            knobs,
            pages,
            pattern,
            counts,
        };
        // Build the first pass of every source drawn from once, so that an order that
        // cannot be built fails here and never inside an epoch.
        for s in (0..order.sources.len()).filter(|&s| order.counts[s] > 0) {
            order
                .spec(s, 0)
                .build(order.sources[s].ids(), order.pages.as_ref())?;
        }
        Ok(order)
    }

    fn spec(&self, source: usize, pass: u64) -> OrderSpec {
        OrderSpec {
            kind: self.knobs.kind,
            seed: pass_seed(self.knobs.seed, source, pass),
            distributed: None,
            buffer_pages: self.knobs.buffer_pages,
        }
    }

    /// Source `source`'s pass `pass` of `epoch`: its samples, each once, in the order
    /// kind's order seeded from `(seed, source, pass)`.
    pub fn pass(&self, source: usize, epoch: u64, pass: u64) -> Vec<u64> {
        let ids = self.sources[source].ids();
        match self
            .spec(source, pass)
            .build(ids.clone(), self.pages.as_ref())
        {
            Ok(order) => order.order(epoch),
            // `new` built this spec already; the build does not depend on the seed.
            Err(_) => ids,
        }
    }

    /// Positions per epoch drawn from each source (over all ranks).
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Positions per epoch over all ranks (before any padding).
    pub fn positions(&self) -> usize {
        self.pattern.len()
    }

    /// The source of each position of an epoch (the same every epoch).
    pub fn pattern(&self) -> &[u32] {
        &self.pattern
    }

    /// Every position of `epoch`, over all ranks: the source's next sample in its walk.
    pub fn global_order(&self, epoch: u64) -> Vec<u64> {
        let n = self.sources.len();
        let mut walks: Vec<(u64, Vec<u64>, usize)> = vec![(0, Vec::new(), 0); n];
        let mut started = vec![false; n];
        let mut out = Vec::with_capacity(self.pattern.len());
        for &s in &self.pattern {
            let s = s as usize;
            let (pass, order, next) = &mut walks[s];
            if !started[s] || *next == order.len() {
                if started[s] {
                    *pass += 1;
                }
                started[s] = true;
                *order = self.pass(s, epoch, *pass);
                *next = 0;
            }
            out.push(order[*next]);
            *next += 1;
        }
        out
    }
}

impl TraversalOrder for MixtureOrder {
    /// Everything that decides the global order besides the file and the seed (which
    /// states record anyway): the sources' sizes, the order kind, QuasiRandom's buffer, the
    /// epoch length, the policy, the counts per source and a hash of the source pattern
    /// (which the weights decide). A state saved under other weights or another epoch
    /// length is then refused, not resumed as another order. The world and rank are not
    /// part of it: states record them as for every order ([`Self::strided_world`]), and
    /// an epoch resumes under another world size elastically.
    fn identity(&self) -> Option<String> {
        let mut pattern = Sha256::new();
        for &s in &self.pattern {
            pattern.update(s.to_le_bytes());
        }
        let pattern: String = pattern.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let sizes: Vec<u64> = self.sources.iter().map(|s| s.len).collect();
        let k = &self.knobs;
        Some(format!(
            "mixture(sources={sizes:?}, order={}, buffer_pages={}, samples_per_epoch={}, \
             when_exhausted={}, counts={:?}, pattern={pattern})",
            k.kind.name(),
            k.buffer_pages,
            k.samples_per_epoch,
            k.when_exhausted.name(),
            self.counts
        ))
    }

    /// This rank's positions of `epoch`: positions `rank, rank + W, ...` of the global
    /// order padded to a multiple of the world size `W` by repeating its first positions.
    fn order(&self, epoch: u64) -> Vec<u64> {
        let global = self.global_order(epoch);
        match self.strided_world() {
            Some(world) if world.world_size() > 1 => world.select(&global),
            _ => global,
        }
    }

    /// The mixture's ranks: its positions are dealt as [`Distributed::select`] deals them.
    fn strided_world(&self) -> Option<Distributed> {
        Distributed::new(self.knobs.world_size, self.knobs.rank).ok()
    }

    fn strided_order(&self, epoch: u64) -> Option<Vec<u64>> {
        Some(self.global_order(epoch))
    }

    fn samples_per_epoch(&self) -> usize {
        let n = self.pattern.len();
        if n == 0 {
            0
        } else {
            n.div_ceil(self.knobs.world_size)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{interleave, pass_seed, weighted_counts};

    #[test]
    fn counts_sum_to_the_epoch_and_stay_within_one_of_each_share() {
        for (weights, n) in [
            (vec![0.7, 0.3], 10),
            (vec![1.0, 1.0, 1.0], 100),
            (vec![0.5, 0.0, 0.25, 0.25], 7),
            (vec![1e-9, 1.0], 3),
            (vec![3.0, 1.0, 2.0], 1_000_003),
        ] {
            let c = weighted_counts(&weights, n);
            assert_eq!(c.iter().sum::<u64>(), n, "{weights:?}");
            let total: f64 = weights.iter().sum();
            for (s, &w) in weights.iter().enumerate() {
                let share = n as f64 * w / total;
                assert!((c[s] as f64 - share).abs() < 1.0, "{weights:?} {c:?}");
                if w == 0.0 {
                    assert_eq!(c[s], 0);
                }
            }
        }
        assert_eq!(weighted_counts(&[1.0, 1.0, 1.0], 100), vec![34, 33, 33]);
    }

    #[test]
    fn the_round_robin_gives_each_source_its_count_spread_evenly() {
        let pattern = interleave(&[6, 3, 0, 1]);
        assert_eq!(pattern, vec![0, 1, 0, 0, 1, 0, 3, 0, 1, 0]);
        let pattern = interleave(&[500, 300, 200]);
        for s in 0..3u32 {
            let positions: Vec<usize> = (0..pattern.len()).filter(|&p| pattern[p] == s).collect();
            assert_eq!(positions.len(), [500, 300, 200][s as usize]);
            // Every prefix holds its share to within one position.
            let share = [0.5, 0.3, 0.2][s as usize];
            for (k, &p) in positions.iter().enumerate() {
                assert!(((k + 1) as f64 - (p + 1) as f64 * share).abs() < 1.0 + 1e-9);
            }
        }
    }

    #[test]
    fn pass_seeds_are_32_bit_and_differ_by_source_and_pass() {
        let seeds = [
            pass_seed(7, 0, 0),
            pass_seed(7, 1, 0),
            pass_seed(7, 0, 1),
            pass_seed(8, 0, 0),
        ];
        for (i, a) in seeds.iter().enumerate() {
            assert!(*a <= u64::from(u32::MAX));
            for b in &seeds[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
