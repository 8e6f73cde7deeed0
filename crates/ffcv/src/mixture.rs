//! Weighted mixtures of datasets: [`Loader::builder_mixture`] takes several sources (each
//! one `.beton` file or a shard set, as [`Loader::builder_shards`] reads them) and their
//! weights, and makes a [`MixtureSpec`]; [`MixtureSpec::open`] opens every file as one
//! dataset ([`crate::Dataset::open_shards_with`]: global sample ids run through the
//! sources in the order given) and builds the [`MixtureOrder`] (`mixture/plan.rs`), and
//! [`Mixture::loader_builder`] gives the [`LoaderBuilder`] that runs it as a custom
//! order. `docs/mixtures.md` defines the semantics.

mod plan;

use std::path::Path;
use std::sync::Arc;

use traversal::OrderKind;

use crate::builder::LoaderBuilder;
use crate::dataset::{Dataset, RemoteConfig};
use crate::error::{Error, Result};
use crate::loader::Loader;
use crate::order::Order;

pub use plan::{MixtureOrder, WhenExhausted};

/// One source of a mixture: the names of its files (one path or URL, or a shard set:
/// several names, glob patterns, `s3://` prefixes, expanded as
/// [`crate::shards::expand_shard_names`] expands them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixtureSource(pub Vec<String>);

impl From<&str> for MixtureSource {
    fn from(name: &str) -> MixtureSource {
        MixtureSource(vec![name.to_owned()])
    }
}

impl From<String> for MixtureSource {
    fn from(name: String) -> MixtureSource {
        MixtureSource(vec![name])
    }
}

impl From<&Path> for MixtureSource {
    fn from(path: &Path) -> MixtureSource {
        MixtureSource(vec![path.to_string_lossy().into_owned()])
    }
}

impl From<Vec<String>> for MixtureSource {
    fn from(names: Vec<String>) -> MixtureSource {
        MixtureSource(names)
    }
}

impl Loader {
    /// A mixture of `sources` drawn with `weights` (one per source, finite,
    /// non-negative, with a positive sum; they need not sum to 1). Set its knobs on the
    /// returned [`MixtureSpec`] (order, seed, epoch length, what a source does when it
    /// runs out, distributed rank), then [`MixtureSpec::loader`] opens the sources and
    /// gives the loader's builder, for the batch size and the pipelines. See
    /// `docs/mixtures.md`.
    pub fn builder_mixture<S: Into<MixtureSource>>(
        sources: impl IntoIterator<Item = S>,
        weights: &[f64],
    ) -> MixtureSpec {
        MixtureSpec {
            sources: sources.into_iter().map(Into::into).collect(),
            weights: weights.to_vec(),
            kind: OrderKind::Sequential,
            custom_order: false,
            seed: None,
            samples_per_epoch: None,
            when_exhausted: WhenExhausted::default(),
            rank: 0,
            world_size: 1,
            buffer_pages: DEFAULT_MIXTURE_BUFFER_PAGES,
            remote: RemoteConfig::default(),
        }
    }
}

/// The QuasiRandom buffer of each source's walk unless set: 64 pages (FFCV's rule,
/// `2 * batch_size`, for a batch of 32; the mixture's order is made before the batch
/// size is known).
pub const DEFAULT_MIXTURE_BUFFER_PAGES: usize = 64;

/// The most positions an epoch of a mixture may have (2^32): the epoch's order and its
/// source pattern are held in memory, 12 bytes a position.
pub const MAX_MIXTURE_POSITIONS: u64 = 1 << 32;

/// The knobs of a mixture, before any file is opened ([`Loader::builder_mixture`]).
#[derive(Debug, Clone)]
pub struct MixtureSpec {
    sources: Vec<MixtureSource>,
    weights: Vec<f64>,
    kind: OrderKind,
    /// A custom order was asked for, which `open` refuses.
    custom_order: bool,
    seed: Option<u64>,
    samples_per_epoch: Option<u64>,
    when_exhausted: WhenExhausted,
    rank: usize,
    world_size: usize,
    buffer_pages: usize,
    remote: RemoteConfig,
}

impl MixtureSpec {
    /// The order each source is walked in (default Sequential); a custom order is
    /// refused by `open`, since the mixture decides the samples.
    pub fn order(mut self, order: impl Into<Order>) -> Self {
        self.kind = match order.into() {
            Order::Sequential => OrderKind::Sequential,
            Order::Random => OrderKind::Random,
            Order::QuasiRandom => OrderKind::QuasiRandom,
            Order::Custom(_) => {
                self.custom_order = true;
                OrderKind::Sequential
            }
        };
        self
    }

    /// The seed of every source's walk (and of the loader's augmentations); drawn when
    /// unset (0, with a warning, for distributed shuffled orders: the ranks must agree).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Positions per epoch over all ranks (default: the sum of the sources' lengths).
    pub fn samples_per_epoch(mut self, n: u64) -> Self {
        self.samples_per_epoch = Some(n);
        self
    }

    /// What a source does when its pass runs out inside an epoch (default
    /// [`WhenExhausted::Cycle`]).
    pub fn when_exhausted(mut self, when: WhenExhausted) -> Self {
        self.when_exhausted = when;
        self
    }

    /// This process is rank `rank` of `world_size` (every rank must use the same spec
    /// and seed); each takes every `world_size`-th position.
    pub fn distributed(mut self, rank: usize, world_size: usize) -> Self {
        self.rank = rank;
        self.world_size = world_size;
        self
    }

    /// QuasiRandom's buffer in pages for each source's walk (default
    /// [`DEFAULT_MIXTURE_BUFFER_PAGES`]).
    pub fn quasi_buffer_pages(mut self, pages: usize) -> Self {
        self.buffer_pages = pages;
        self
    }

    /// Timeouts and retries for remote sources.
    pub fn remote_config(mut self, config: RemoteConfig) -> Self {
        self.remote = config;
        self
    }

    /// Opens the sources and gives the loader's builder ([`Mixture::loader_builder`]).
    pub fn loader(self) -> Result<LoaderBuilder> {
        Ok(self.open()?.loader_builder())
    }

    fn refuse(&self, reason: impl Into<String>) -> Error {
        let path = self
            .sources
            .first()
            .and_then(|s| s.0.first())
            .map(Into::into)
            .unwrap_or_default();
        Error::Config {
            path,
            reason: format!("mixture: {}", reason.into()),
            cause: None,
        }
    }

    /// Checks the knobs and weights (before any file is opened).
    fn check(&self) -> Result<()> {
        if self.sources.is_empty() {
            return Err(self.refuse("no sources given"));
        }
        if self.weights.len() != self.sources.len() {
            return Err(self.refuse(format!(
                "{} weights for {} sources; give one weight per source",
                self.weights.len(),
                self.sources.len()
            )));
        }
        for (i, &w) in self.weights.iter().enumerate() {
            if !w.is_finite() || w < 0.0 {
                return Err(self.refuse(format!(
                    "weight {i} is {w}; weights must be finite and non-negative"
                )));
            }
        }
        if self.weights.iter().sum::<f64>() <= 0.0 {
            return Err(self.refuse("the weights sum to 0; give some source a positive weight"));
        }
        if self.custom_order {
            return Err(self.refuse(
                "a custom order cannot walk a source; use Sequential, Random or QuasiRandom",
            ));
        }
        if self.rank >= self.world_size {
            return Err(self.refuse(format!(
                "rank {} is not below world_size {}",
                self.rank, self.world_size
            )));
        }
        match self.samples_per_epoch {
            Some(0) => return Err(self.refuse("samples_per_epoch must be at least 1")),
            Some(n) if n > MAX_MIXTURE_POSITIONS => {
                return Err(self.refuse(format!(
                    "samples_per_epoch {n} is more than {MAX_MIXTURE_POSITIONS} positions \
                     (an epoch's order is held in memory)"
                )));
            }
            _ => {}
        }
        if self.buffer_pages == 0 {
            return Err(self.refuse("quasi_buffer_pages must be at least 1"));
        }
        Ok(())
    }

    /// Opens every source's files as one dataset, checks that their fields agree (the
    /// error names the first source and field that differ) and that every weighted
    /// source has samples, and builds the order.
    pub fn open(self) -> Result<Mixture> {
        self.check()?;
        let mut names = Vec::new();
        let mut files_per_source = Vec::with_capacity(self.sources.len());
        for (i, source) in self.sources.iter().enumerate() {
            let expanded = crate::shards::expand_shard_names(&source.0, &self.remote)
                .map_err(|e| self.refuse(format!("source {i}: {e}")))?;
            files_per_source.push(expanded.len());
            names.extend(expanded);
        }
        let options = beton_io::ReaderOptions::default();
        let dataset = Dataset::open_shards_with(&names, &options, &self.remote)
            .map_err(|e| self.field_mismatch(e, &names, &files_per_source))?;
        let mut spans = Vec::with_capacity(self.sources.len());
        let mut file = 0;
        for &files in &files_per_source {
            let (first, len) = if dataset.shards.is_empty() {
                (0, dataset.reader.num_samples())
            } else {
                // One span per name given: `open_shards_with` keeps expanded names as they are.
                let shards = dataset
                    .shards
                    .get(file..file + files)
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| self.refuse("the sources' files did not open one for one"))?;
                let len = shards.iter().map(|s| s.num_samples).sum();
                (shards[0].first_sample, len)
            };
            spans.push(plan::SourceIds { first, len });
            file += files;
        }
        for (i, s) in spans.iter().enumerate() {
            if s.len == 0 && self.weights[i] > 0.0 {
                return Err(self.refuse(format!(
                    "source {i} ({}) has no samples but weight {}",
                    self.sources[i].0.join(", "),
                    self.weights[i]
                )));
            }
        }
        let seed = match self.seed {
            Some(s) => s,
            None if self.world_size > 1 && self.kind != OrderKind::Sequential => {
                tracing::warn!(
                    "distributed mixture without a seed: using seed 0 so that every rank \
                     computes the same order (set a seed to silence this)"
                );
                0
            }
            None => crate::order::draw_seed(),
        };
        let total: u64 = spans.iter().map(|s| s.len).sum();
        if self.samples_per_epoch.is_none() && total > MAX_MIXTURE_POSITIONS {
            return Err(self.refuse(format!(
                "the sources hold {total} samples, more than {MAX_MIXTURE_POSITIONS} positions \
                 an epoch may have; set samples_per_epoch"
            )));
        }
        let knobs = plan::PlanKnobs {
            kind: self.kind,
            seed,
            buffer_pages: self.buffer_pages,
            samples_per_epoch: self.samples_per_epoch.unwrap_or(total),
            when_exhausted: self.when_exhausted,
            rank: self.rank,
            world_size: self.world_size,
        };
        let pages = (self.kind == OrderKind::QuasiRandom)
            .then(|| crate::run_state::sample_pages(&dataset.reader));
        let order = MixtureOrder::new(spans.clone(), &self.weights, knobs, pages)?;
        Ok(Mixture {
            dataset,
            order: Arc::new(order),
            spans,
            seed,
        })
    }

    /// Names the sources of a shard mismatch between files of the mixture.
    fn field_mismatch(&self, e: Error, names: &[String], files_per_source: &[usize]) -> Error {
        let Error::Format(beton_io::Error::ShardMismatch {
            first,
            other,
            what,
            reason,
        }) = &e
        else {
            return e;
        };
        let Some(file) = names.iter().position(|n| Path::new(n) == other) else {
            return e;
        };
        let mut source = 0;
        let mut end = 0;
        for (i, &files) in files_per_source.iter().enumerate() {
            end += files;
            if file < end {
                source = i;
                break;
            }
        }
        self.refuse(format!(
            "source {source} ({}) does not agree with source 0 ({}): {what}: {reason}",
            other.display(),
            first.display()
        ))
    }
}

/// An opened mixture: the dataset of every source's files, each source's global ids,
/// and the order ([`MixtureSpec::open`]).
#[derive(Debug, Clone)]
pub struct Mixture {
    dataset: Dataset,
    order: Arc<MixtureOrder>,
    spans: Vec<plan::SourceIds>,
    seed: u64,
}

impl Mixture {
    /// The order (per rank, as the loader runs it; [`MixtureOrder::global_order`] for
    /// all ranks).
    pub fn order(&self) -> &Arc<MixtureOrder> {
        &self.order
    }

    /// The seed in use (given or drawn).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The dataset of every source's files (global sample ids source after source).
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// Each source's first global sample id and number of samples.
    pub fn source_ranges(&self) -> Vec<(u64, u64)> {
        self.spans.iter().map(|s| (s.first, s.len)).collect()
    }

    /// The source and the sample within it of global sample id `id` (what
    /// [`crate::Batch::sample_ids`] reports); `None` past the last source.
    pub fn locate(&self, id: u64) -> Option<(usize, u64)> {
        self.spans
            .iter()
            .position(|s| id >= s.first && id - s.first < s.len)
            .map(|i| (i, id - self.spans[i].first))
    }

    /// The loader's builder over the mixture: its dataset, the mixture's order as a
    /// custom order and its seed. Set the batch size and pipelines on it; leave `order`,
    /// `indices`, `distributed` and `seed` alone (the mixture decides them).
    pub fn loader_builder(&self) -> LoaderBuilder {
        Loader::builder(self.dataset.reader.path())
            .dataset(self.dataset.clone())
            .order(Order::Custom(
                Arc::clone(&self.order) as Arc<dyn traversal::TraversalOrder>
            ))
            .seed(self.seed)
    }
}
