//! The loader: the builder with every FFCV knob, which plans the per-field pipelines and
//! builds the run state (`run_state.rs`) the epoch iterator's producer thread works on,
//! and the [`Loader`] handle.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use beton_io::{FieldMetadata, Reader};
use page_cache::{CacheConfig, PageCache};
use traversal::{Distributed, OrderKind, OrderSpec, SamplePages, TraversalOrder};

use crate::batch::OutputInfo;
use crate::batch_slots::{SlotPool, SlotStage};
use crate::decode::{DecoderChoice, PipelineSpec, default_decoder};
use crate::epoch::EpochIter;
use crate::error::{Error, Result};
use crate::memory::{HeapAllocator, SlotAllocator};
use crate::run_state::{Counters, FieldRunner, Shared, lock};

/// The sample order of each epoch.
#[derive(Clone)]
pub enum Order {
    /// The indices in order (FFCV `OrderOption.SEQUENTIAL`).
    Sequential,
    /// NumPy's `default_rng(seed + epoch).permutation(indices)` (FFCV `RANDOM`).
    Random,
    /// Page-aware shuffle (FFCV `QUASI_RANDOM`); works with both caches and distributed.
    QuasiRandom,
    /// A user order; it decides the samples itself (`indices` and `distributed` do not
    /// apply to it).
    Custom(Arc<dyn TraversalOrder>),
}

impl std::fmt::Debug for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Order::Sequential => f.write_str("Sequential"),
            Order::Random => f.write_str("Random"),
            Order::QuasiRandom => f.write_str("QuasiRandom"),
            Order::Custom(_) => f.write_str("Custom"),
        }
    }
}

impl Order {
    /// Whether the built-in order's samples depend on the seed (Random and QuasiRandom
    /// shuffle with it; Sequential does not; a custom order was built with its own).
    pub fn depends_on_seed(&self) -> bool {
        matches!(self, Order::Random | Order::QuasiRandom)
    }
}

impl From<OrderKind> for Order {
    fn from(kind: OrderKind) -> Order {
        match kind {
            OrderKind::Sequential => Order::Sequential,
            OrderKind::Random => Order::Random,
            OrderKind::QuasiRandom => Order::QuasiRandom,
        }
    }
}

/// A field's value as [`Loader::filter`]'s predicate sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FilterValue<'a> {
    /// An Int field.
    Int(i64),
    /// A Float field.
    Float(f64),
    /// Any other field: its stored bytes (Bytes, JSON text with its NUL, NDArray
    /// elements, raw pixels or JPEG file).
    Data(&'a [u8]),
}

/// Builds a [`Loader`]; every knob has FFCV's default except `batch_size`.
#[derive(Clone)]
pub struct LoaderBuilder {
    path: PathBuf,
    reader: Option<Arc<Reader>>,
    /// The page source of a remote dataset given with [`LoaderBuilder::dataset`].
    source: Option<Arc<dyn page_cache::PageSource>>,
    remote: crate::dataset::RemoteConfig,
    batch_size: Option<usize>,
    num_workers: i64,
    order: Order,
    distributed: bool,
    rank: usize,
    world_size: usize,
    seed: Option<u64>,
    indices: Option<Vec<u64>>,
    decoders: HashMap<String, DecoderChoice>,
    pipelines: HashMap<String, PipelineSpec>,
    drop_last: bool,
    batches_ahead: usize,
    recompile: bool,
    compile: bool,
    cache: CacheConfig,
    allocator: Arc<dyn SlotAllocator>,
    stage: Option<Arc<dyn SlotStage>>,
    to_device: Option<crate::gpu::ToDevice>,
    resume: Option<crate::resume::LoaderState>,
    max_image_pixels: u64,
    quasi_buffer_pages: Option<usize>,
}

impl std::fmt::Debug for LoaderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoaderBuilder")
            .field("path", &self.path)
            .field("batch_size", &self.batch_size)
            .field("num_workers", &self.num_workers)
            .field("order", &self.order)
            .field("distributed", &self.distributed)
            .field("seed", &self.seed)
            .field("drop_last", &self.drop_last)
            .field("batches_ahead", &self.batches_ahead)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl LoaderBuilder {
    fn new(path: PathBuf) -> LoaderBuilder {
        LoaderBuilder {
            path,
            reader: None,
            source: None,
            remote: crate::dataset::RemoteConfig::default(),
            batch_size: None,
            num_workers: -1,
            order: Order::Sequential,
            distributed: false,
            rank: 0,
            world_size: 1,
            seed: None,
            indices: None,
            decoders: HashMap::new(),
            pipelines: HashMap::new(),
            drop_last: true,
            batches_ahead: 3,
            recompile: false,
            compile: true,
            cache: CacheConfig::default(),
            allocator: Arc::new(HeapAllocator),
            stage: None,
            to_device: None,
            resume: None,
            max_image_pixels: crate::decode::DEFAULT_MAX_IMAGE_PIXELS,
            quasi_buffer_pages: None,
        }
    }

    /// Continue from `state` ([`crate::EpochIter::state`] or [`Loader::state`], maybe of
    /// another process or another world size): the built loader's next [`Loader::iter`]
    /// runs the rest of the state's epoch, later epochs run as usual. The seed is the
    /// state's unless [`LoaderBuilder::seed`] gives one (which must then be the same).
    /// `build` refuses a state of another file, order, seed, batch size, `drop_last` or
    /// index list (`docs/resume.md`).
    pub fn resume(mut self, state: crate::resume::LoaderState) -> Self {
        self.seed = self.seed.or(Some(state.seed()));
        self.resume = Some(state);
        self
    }

    /// The largest decoded image area (height x width pixels) an image decoder accepts;
    /// default [`crate::decode::DEFAULT_MAX_IMAGE_PIXELS`] (134,217,728). A sample whose
    /// metadata or JPEG header claims more ends the epoch with [`Error::Decode`] naming it
    /// (`SimpleRGBImageDecoder` refuses the field when the loader is built), before any
    /// memory is sized from the claim, so a forged file cannot exhaust memory.
    pub fn max_image_pixels(mut self, pixels: u64) -> Self {
        self.max_image_pixels = pixels;
        self
    }

    /// Where batches go: `cpu` (default) or `cuda:N`, where every output is copied to the
    /// device by a GPU stage ([`crate::gpu`]; `--device cuda:N`). Building fails with "no
    /// CUDA driver found" on a machine without CUDA.
    pub fn device(mut self, device: crate::gpu::DeviceSpec) -> Self {
        self.to_device = Some(crate::gpu::ToDevice::new(device));
        self
    }

    /// A GPU stage with on-device image normalization ([`crate::gpu::ToDevice`]); it
    /// replaces [`LoaderBuilder::slot_allocator`] and [`LoaderBuilder::slot_stage`].
    pub fn to_device(mut self, to_device: crate::gpu::ToDevice) -> Self {
        self.to_device = Some(to_device);
        self
    }

    /// Samples per batch (required, at least 1).
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = Some(batch_size);
        self
    }

    /// Threads decoding a batch; -1 (the default) = the CPUs in this process's affinity mask.
    pub fn num_workers(mut self, num_workers: i64) -> Self {
        self.num_workers = num_workers;
        self
    }

    /// `true` (default): read through the OS page cache; `false`: the process cache.
    pub fn os_cache(mut self, os_cache: bool) -> Self {
        self.cache.os_cache = os_cache;
        self
    }

    /// The sample order (default [`Order::Sequential`]).
    pub fn order(mut self, order: impl Into<Order>) -> Self {
        self.order = order.into();
        self
    }

    /// Emulate PyTorch's `DistributedSampler` with [`LoaderBuilder::rank`] and
    /// [`LoaderBuilder::world_size`].
    pub fn distributed(mut self, distributed: bool) -> Self {
        self.distributed = distributed;
        self
    }

    /// This process's rank (with `distributed`).
    pub fn rank(mut self, rank: usize) -> Self {
        self.rank = rank;
        self
    }

    /// Number of ranks (with `distributed`).
    pub fn world_size(mut self, world_size: usize) -> Self {
        self.world_size = world_size;
        self
    }

    /// The seed of random orders and augmentations (default: drawn, see [`Loader::seed`];
    /// a distributed Random or QuasiRandom loader uses 0 so that every rank agrees).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Only these sample ids (in this order for Sequential; repeats are visited twice).
    pub fn indices(mut self, indices: impl Into<Vec<u64>>) -> Self {
        self.indices = Some(indices.into());
        self
    }

    /// The pipeline of field `field`: a decoder and transforms.
    pub fn pipeline(mut self, field: impl Into<String>, spec: PipelineSpec) -> Self {
        let field = field.into();
        self.decoders.remove(&field);
        self.pipelines.insert(field, spec);
        self
    }

    /// The decoder of field `field` by choice (default, disabled or a decoder, no
    /// transforms); what `--decoder FIELD=SPEC` sets.
    pub fn decoder(mut self, field: impl Into<String>, choice: DecoderChoice) -> Self {
        let field = field.into();
        self.pipelines.remove(&field);
        self.decoders.insert(field, choice);
        self
    }

    /// Leave field `field` out of the batches.
    pub fn disable(self, field: impl Into<String>) -> Self {
        self.decoder(field, DecoderChoice::Disabled)
    }

    /// Drop the final partial batch (default `true`).
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Batches prepared ahead of the consumer (default 3); the loader keeps
    /// `batches_ahead + 2` slots.
    pub fn batches_ahead(mut self, batches_ahead: usize) -> Self {
        self.batches_ahead = batches_ahead;
        self
    }

    /// Re-declare decoders and regenerate pipeline code at every epoch (default `false`).
    pub fn recompile(mut self, recompile: bool) -> Self {
        self.recompile = recompile;
        self
    }

    /// Compile pipelines with Cranelift (default `true`); `false` interprets them.
    pub fn compile(mut self, compile: bool) -> Self {
        self.compile = compile;
        self
    }

    /// Process cache: batches ahead at which a page may be fetched (default 3).
    pub fn prefetch_ahead(mut self, batches: usize) -> Self {
        self.cache.prefetch_ahead = batches;
        self
    }

    /// Process cache: page-reader threads (default 12).
    pub fn reader_threads(mut self, threads: usize) -> Self {
        self.cache.reader_threads = threads;
        self
    }

    /// Process cache: read pages with `O_DIRECT` (default `false`).
    pub fn direct_io(mut self, direct_io: bool) -> Self {
        self.cache.direct_io = direct_io;
        self
    }

    /// Process cache: most bytes of page slots an epoch may use (default: the OS's
    /// available memory).
    pub fn max_memory(mut self, bytes: u64) -> Self {
        self.cache.max_memory = Some(bytes);
        self
    }

    /// Process cache: keep pages still held in their slots from the previous epoch
    /// instead of reading them again (default `true`; `false` re-reads every page each
    /// epoch, as FFCV does).
    pub fn retain_pages(mut self, retain: bool) -> Self {
        self.cache.retain_pages = retain;
        self
    }

    /// Process cache: give every page an epoch reads a slot of its own, so epochs after
    /// the first read nothing (default `false`: it costs slot memory for the whole
    /// dataset; an epoch over the memory budget uses the ordinary schedule instead).
    pub fn hold_all_pages(mut self, hold: bool) -> Self {
        self.cache.hold_all_pages = hold;
        self
    }

    /// QuasiRandom: the buffer of pages the walk draws from (default: FFCV's
    /// `2 * batch_size` when the process cache's schedules fit its memory budget with it,
    /// else the largest buffer that fits, with a warning; always FFCV's with the OS
    /// cache). A smaller buffer keeps fewer pages open and shuffles less (see
    /// `docs/tuning.md`). A resumed loader takes the state's buffer unless this is set.
    pub fn quasi_buffer_pages(mut self, pages: usize) -> Self {
        self.quasi_buffer_pages = Some(pages);
        self
    }

    /// Every page-cache knob at once.
    pub fn cache_config(mut self, config: CacheConfig) -> Self {
        self.cache = config;
        self
    }

    /// Where slot buffers come from (default: 64-byte aligned heap memory). A GPU stage
    /// supplies pinned host memory here.
    pub fn slot_allocator(mut self, allocator: Arc<dyn SlotAllocator>) -> Self {
        self.allocator = allocator;
        self
    }

    /// A hook run on every batch after the CPU pipelines (e.g. a GPU copy).
    pub fn slot_stage(mut self, stage: Arc<dyn SlotStage>) -> Self {
        self.stage = Some(stage);
        self
    }

    /// Uses an already opened reader instead of opening the path.
    pub fn reader(mut self, reader: Arc<Reader>) -> Self {
        self.path = reader.path().to_owned();
        self.reader = Some(reader);
        self.source = None;
        self
    }

    /// Uses an already opened dataset (a local file, or a remote object with its page
    /// source) instead of opening the path.
    pub fn dataset(mut self, dataset: crate::Dataset) -> Self {
        self.path = dataset.reader.path().to_owned();
        self.reader = Some(dataset.reader);
        self.source = dataset.source;
        self
    }

    /// Timeouts, retries and requests in flight for a remote dataset (`s3://`,
    /// `http(s)://`); see `docs/remote.md`.
    pub fn remote_config(mut self, config: crate::dataset::RemoteConfig) -> Self {
        self.remote = config;
        self
    }

    fn config_error(&self, reason: impl Into<String>) -> Error {
        Error::Config {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }

    /// Checks the knobs, opens the file, declares every field's pipeline and plans (or
    /// compiles) it, and starts the worker pool.
    pub fn build(mut self) -> Result<Loader> {
        let batch_size = match self.batch_size {
            None => return Err(self.config_error("batch_size is required")),
            Some(0) => return Err(self.config_error("batch_size must be at least 1")),
            Some(b) => b,
        };
        let num_workers = match self.num_workers {
            -1 => crate::cpus::affinity_cpus(),
            n if n >= 1 => n as usize,
            n => {
                return Err(self.config_error(format!(
                    "num_workers must be -1 (all CPUs of this process) or at least 1, got {n}"
                )));
            }
        };
        if self.batches_ahead == 0 {
            return Err(self.config_error("batches_ahead must be at least 1"));
        }
        if !self.distributed && (self.rank != 0 || self.world_size != 1) {
            return Err(self.config_error(format!(
                "rank {} / world_size {} given without distributed(true)",
                self.rank, self.world_size
            )));
        }
        if let Order::Custom(_) = self.order {
            if self.distributed {
                return Err(self.config_error(
                    "a custom order decides each rank's samples itself; do not set distributed",
                ));
            }
            if self.indices.is_some() {
                return Err(self.config_error(
                    "a custom order decides the samples itself; do not set indices",
                ));
            }
        }
        if self.quasi_buffer_pages == Some(0) {
            return Err(self.config_error("quasi_buffer_pages must be at least 1"));
        }
        if !self.cache.os_cache && self.cache.reader_threads == 0 {
            return Err(self.config_error("reader_threads must be at least 1"));
        }
        let known: Vec<&String> = self.decoders.keys().chain(self.pipelines.keys()).collect();

        let (reader, source) = match &self.reader {
            Some(r) => (Arc::clone(r), self.source.clone()),
            None => {
                let d = crate::Dataset::open_with(
                    &self.path,
                    &beton_io::ReaderOptions::default(),
                    &self.remote,
                )?;
                (d.reader, d.source)
            }
        };
        if let Some(s) = &source
            && self.cache.os_cache
        {
            // A remote object cannot be mapped: serve os_cache=True from the process
            // cache (docs/remote.md), decided here so that every later choice (the
            // QuasiRandom buffer, the memory budget) sees the cache that runs.
            tracing::warn!(
                "{}: os_cache=True needs a memory-mapped local file; this {} source is read \
                 through the process cache instead (set os_cache=False to silence this)",
                s.name(),
                s.kind().name()
            );
            self.cache.os_cache = false;
        }
        let path = reader.path().to_owned();
        for name in known {
            if reader.field_index(name).is_none() {
                let names: Vec<&str> = reader.fields().iter().map(|f| f.name.as_str()).collect();
                return Err(self.config_error(format!(
                    "a pipeline names field {name:?}, which the file does not have (fields: {})",
                    names.join(", ")
                )));
            }
        }
        let num_samples = reader.num_samples();
        let distributed = if self.distributed {
            Some(Distributed::new(self.world_size, self.rank)?)
        } else {
            None
        };
        let seed = match self.seed {
            Some(s) => s,
            None if distributed.is_some() && self.order.depends_on_seed() => {
                // Every rank must compute the same global order, or the ranks' shares
                // overlap and samples go missing; a seed drawn per process cannot agree.
                tracing::warn!(
                    "distributed {:?} order without a seed: using seed 0 so that every rank \
                     computes the same order (set a seed to silence this)",
                    self.order
                );
                0
            }
            None => draw_seed(),
        };
        let indices = match &self.indices {
            Some(ix) => {
                if let Some((pos, &bad)) = ix.iter().enumerate().find(|&(_, &s)| s >= num_samples) {
                    return Err(self.config_error(format!(
                        "indices[{pos}] = {bad} is out of range: the file has {num_samples} samples"
                    )));
                }
                ix.clone()
            }
            None => (0..num_samples).collect(),
        };
        let mut resume = crate::resume::ResumeContext::new(
            match &self.order {
                Order::Sequential => Some(OrderKind::Sequential),
                Order::Random => Some(OrderKind::Random),
                Order::QuasiRandom => Some(OrderKind::QuasiRandom),
                Order::Custom(_) => None,
            },
            distributed,
            batch_size,
        );
        let order: Arc<dyn TraversalOrder> = match &self.order {
            Order::Custom(o) => Arc::clone(o),
            built_in => {
                let kind = match built_in {
                    Order::Sequential => OrderKind::Sequential,
                    Order::Random => OrderKind::Random,
                    _ => OrderKind::QuasiRandom,
                };
                let mut spec = OrderSpec {
                    seed,
                    distributed,
                    ..OrderSpec::new(kind, batch_size)
                };
                let pages = (kind == OrderKind::QuasiRandom).then(|| {
                    let map = reader.page_map();
                    SamplePages::from_fn(num_samples, |s| map.pages_of_sample(s).first().copied())
                });
                if let Some(pages) = &pages {
                    spec.buffer_pages = self.choose_quasi_buffer(
                        &reader,
                        pages,
                        &indices,
                        seed,
                        distributed,
                        batch_size,
                    )?;
                    resume.set_buffer_pages(spec.buffer_pages);
                }
                Arc::from(spec.build(indices.clone(), pages.as_ref())?)
            }
        };

        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(num_workers)
            .thread_name(|i| format!("ffcv-worker-{i}"))
            .build()
            .map_err(|e| Error::Setup {
                path: path.clone(),
                what: "worker threads",
                source: std::io::Error::other(e.to_string()),
            })?;
        let pool = Arc::new(pool);
        let fields = plan_fields(&reader, &self, &pool)?;
        resume.set_pipelines(&fields);
        if fields.is_empty() {
            return Err(self.config_error("every field is disabled: a batch would be empty"));
        }
        let cache = PageCache::with_source(Arc::clone(&reader), source, &self.cache)?;
        let outputs: Arc<[OutputInfo]> = fields.iter().map(|f| f.output.clone()).collect();
        let gpu = match &self.to_device {
            Some(td) => {
                crate::gpu::build_for_loader(td, &outputs, batch_size, self.batches_ahead, seed)
                    .map_err(|e| self.config_error(e.to_string()))?
            }
            None => None,
        };
        let (allocator, stage): (Arc<dyn SlotAllocator>, Option<Arc<dyn SlotStage>>) = match &gpu {
            Some(g) => (Arc::new(g.clone()), Some(Arc::new(g.clone()))),
            None => (Arc::clone(&self.allocator), self.stage.clone()),
        };
        let slots = Arc::new(SlotPool::new(allocator, stage, self.batches_ahead + 2));
        crate::epoch::slot_sizes(&path, &outputs, batch_size)?;
        tracing::debug!(
            path = %path.display(),
            batch_size, num_workers, seed,
            outputs = outputs.len(),
            "built loader"
        );
        let shared = Shared {
            path,
            reader,
            cache,
            order,
            indices,
            batch_size,
            num_workers,
            seed,
            drop_last: self.drop_last,
            batches_ahead: self.batches_ahead,
            recompile: self.recompile,
            pool,
            fields: Mutex::new(fields),
            outputs: Mutex::new(outputs),
            slots,
            gpu,
            counters: Counters::default(),
            live_producers: Arc::new(AtomicUsize::new(0)),
            resume,
            prefetch_ahead: self.cache.prefetch_ahead,
        };
        let state = self.resume.clone();
        let mut loader = Loader {
            shared: Arc::new(shared),
            builder: LoaderBuilder {
                seed: Some(seed),
                resume: None,
                ..self
            },
            next_epoch: 0,
            pending: None,
        };
        if let Some(state) = state {
            let (epoch, start) = crate::resume::plan(&loader.shared, &state)?;
            loader.next_epoch = epoch;
            loader.pending = start;
        }
        Ok(loader)
    }
}

impl LoaderBuilder {
    /// QuasiRandom's buffer: the one given, else a resumed state's, else FFCV's when the
    /// process cache's budget holds its schedules (or the OS cache is used), else the
    /// largest that fits ([`crate::quasi_buffer`]).
    fn choose_quasi_buffer(
        &self,
        reader: &Reader,
        pages: &SamplePages,
        indices: &[u64],
        seed: u64,
        distributed: Option<Distributed>,
        batch_size: usize,
    ) -> Result<usize> {
        if let Some(given) = self.quasi_buffer_pages {
            return Ok(given);
        }
        if let Some(state) = &self.resume
            && state.buffer_pages() > 0
        {
            return Ok(state.buffer_pages());
        }
        let ffcv_pages = traversal::default_buffer_pages(batch_size);
        if self.cache.os_cache {
            return Ok(ffcv_pages);
        }
        let Some(budget) = self.cache.max_memory.or_else(page_cache::available_memory) else {
            return Ok(ffcv_pages);
        };
        let plan = crate::quasi_buffer::QuasiPlan {
            reader,
            pages,
            indices,
            seed,
            distributed,
            batch_size,
            drop_last: self.drop_last,
            prefetch_ahead: self.cache.prefetch_ahead,
        };
        let sizing = plan.size_buffer(budget)?;
        if !sizing.fits {
            tracing::warn!(
                path = %self.path.display(),
                budget,
                "no QuasiRandom buffer fits the process cache's memory budget of {budget} bytes \
                 (even 1 page); keeping FFCV's {ffcv_pages} pages: raise max_memory or use the OS cache"
            );
        } else if sizing.buffer_pages < ffcv_pages {
            tracing::warn!(
                path = %self.path.display(),
                budget,
                buffer_pages = sizing.buffer_pages,
                "QuasiRandom buffer: FFCV's {ffcv_pages} pages (2 x batch_size) would need more \
                 page slots than the memory budget of {budget} bytes holds; using {} pages \
                 ({} slots), which fit (set quasi_buffer_pages or max_memory to choose)",
                sizing.buffer_pages,
                sizing.slots_needed
            );
        }
        Ok(sizing.buffer_pages)
    }
}

/// A seed drawn from the standard library's per-process random keys (32 bits, so that it
/// is also a valid NumPy/PyTorch seed when reproduced there).
fn draw_seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    h.finish() & 0xFFFF_FFFF
}

fn plan_fields(
    reader: &Reader,
    b: &LoaderBuilder,
    pool: &Arc<rayon::ThreadPool>,
) -> Result<Vec<FieldRunner>> {
    let mut runners = Vec::new();
    for (index, field) in reader.fields().iter().enumerate() {
        let spec = if let Some(spec) = b.pipelines.get(&field.name) {
            spec.clone()
        } else {
            let decoder = match b.decoders.get(&field.name) {
                Some(DecoderChoice::Disabled) => continue,
                Some(DecoderChoice::Decoder(d)) => Arc::clone(d),
                Some(DecoderChoice::Default) | None => default_decoder(&field.field_type)
                    .ok_or_else(|| Error::NoDecoder {
                        path: reader.path().to_owned(),
                        field: field.name.clone(),
                        field_type: field.field_type.type_name(),
                    })?,
            };
            PipelineSpec::from_arc(decoder)
        };
        runners.push(FieldRunner::new(
            reader,
            index,
            spec,
            b.compile,
            pool,
            b.max_image_pixels,
        )?);
    }
    Ok(runners)
}

/// Counters of a loader, summed over its epochs.
///
/// The durations are wall-clock time on one thread each, so they say who waited on whom:
/// the producer thread's time splits into `wait_pages` (storage), `decode` (the CPU
/// pipelines), `slot_stage` (the slot stage's host side, e.g. enqueueing GPU copies) and
/// `wait_slot` (the consumer was behind); the consumer's time in the iterator is
/// `consumer_wait` (the loader was behind). The GPU copy itself runs on the device and is
/// counted apart (`h2d_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LoaderStats {
    /// Epochs started.
    pub epochs: u64,
    /// Batches produced.
    pub batches: u64,
    /// Samples produced.
    pub samples: u64,
    /// Stored bytes of the produced samples' enabled fields (data plus 8 bytes per
    /// Int/Float value).
    pub payload_bytes: u64,
    /// Producer's view: time it waited for pages (`start_batch`).
    pub wait_pages: Duration,
    /// Producer's view: time spent gathering and running the CPU pipelines.
    pub decode: Duration,
    /// Producer's view: time it waited for room in the queue of ready batches (the
    /// consumer was behind; `batches_ahead` batches were already waiting for it).
    pub wait_slot: Duration,
    /// Producer's view: time in the slot stage's `process` (with a GPU stage: the host
    /// side of enqueueing the host → device copies and kernels, and whatever the stage
    /// waits for there). Zero without a slot stage.
    pub slot_stage: Duration,
    /// Consumer's view: time the consumer spent inside the epoch iterator's `next`
    /// waiting for a batch (the producer was behind), including the final call that
    /// ends the epoch.
    pub consumer_wait: Duration,
    /// GPU stage: bytes copied host → device (0 without a GPU stage).
    pub h2d_bytes: u64,
    /// GPU stage: batches whose device time was measured (all but the first batch staged
    /// in each stage slot; 0 without a GPU stage).
    pub h2d_timed_batches: u64,
    /// GPU stage: device time of the timed batches' copies and kernels, measured with CUDA
    /// events ([`crate::gpu::GpuStats::device_time`]; zero without a GPU stage). Divide by
    /// `h2d_timed_batches` for the device time of one batch.
    pub h2d_time: Duration,
    /// Bytes the process cache read from storage (0 with the OS cache, which reads
    /// through the kernel).
    pub storage_bytes_read: u64,
    /// Batch slots in existence.
    pub slots: usize,
    /// Slot allocations so far (stays at `slots` unless sizes changed).
    pub slot_allocations: usize,
}

/// The FFCV loader over one `.beton` file.
///
/// Build it with [`Loader::builder`]; iterate an epoch with [`Loader::iter`] (or `for batch in
/// &mut loader`). Each epoch advances [`Loader::next_epoch`].
pub struct Loader {
    pub(crate) shared: Arc<Shared>,
    builder: LoaderBuilder,
    next_epoch: u64,
    /// Where the next epoch starts when the loader resumes a state.
    pending: Option<crate::resume::EpochStart>,
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("path", &self.shared.path)
            .field("batch_size", &self.shared.batch_size)
            .field("num_workers", &self.shared.num_workers)
            .field("seed", &self.shared.seed)
            .field("next_epoch", &self.next_epoch)
            .finish_non_exhaustive()
    }
}

impl Loader {
    /// A builder for a loader over the `.beton` file at `path`.
    pub fn builder(path: impl AsRef<Path>) -> LoaderBuilder {
        LoaderBuilder::new(path.as_ref().to_owned())
    }

    /// Batches per epoch, as FFCV's `len(loader)`: with `drop_last`, full batches only.
    pub fn len(&self) -> usize {
        let n = self.shared.order.samples_per_epoch();
        let b = self.shared.batch_size;
        if self.shared.drop_last {
            n / b
        } else {
            n.div_ceil(b)
        }
    }

    /// Whether an epoch yields no batch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The seed in use (given, or drawn at build: pass it to `seed` to repeat a run).
    pub fn seed(&self) -> u64 {
        self.shared.seed
    }

    /// The epoch the next [`Loader::iter`] runs.
    pub fn next_epoch(&self) -> u64 {
        self.next_epoch
    }

    /// Sets the epoch the next [`Loader::iter`] runs (to resume a run); another epoch
    /// than a resumed state's drops the position the state gave inside its epoch.
    pub fn set_next_epoch(&mut self, epoch: u64) {
        if epoch != self.next_epoch {
            self.pending = None;
        }
        self.next_epoch = epoch;
    }

    /// The position between epochs: the start of [`Loader::next_epoch`], or, before the
    /// first [`Loader::iter`] of a resumed loader, where its state resumes.
    /// [`crate::EpochIter::state`] gives the position inside a running epoch.
    pub fn state(&self) -> crate::resume::LoaderState {
        match &self.pending {
            Some(start) => crate::resume::state_at(
                &self.shared,
                self.next_epoch,
                &start.earlier,
                Some(start.skip as u64),
            ),
            None => crate::resume::state_at(&self.shared, self.next_epoch, &[], None),
        }
    }

    /// Samples per batch.
    pub fn batch_size(&self) -> usize {
        self.shared.batch_size
    }

    /// Worker threads.
    pub fn num_workers(&self) -> usize {
        self.shared.num_workers
    }

    /// QuasiRandom's buffer in pages (the knob, or the default chosen at build); `None`
    /// for other orders.
    pub fn quasi_buffer_pages(&self) -> Option<usize> {
        let pages = self.shared.resume.buffer_pages();
        (pages > 0).then_some(pages)
    }

    /// The file's reader.
    pub fn reader(&self) -> &Arc<Reader> {
        &self.shared.reader
    }

    /// The sample ids the loader draws from (before ordering and distribution).
    pub fn indices(&self) -> &[u64] {
        &self.shared.indices
    }

    /// The outputs of each batch (one per enabled field, in field order).
    pub fn outputs(&self) -> Arc<[OutputInfo]> {
        Arc::clone(&lock(&self.shared.outputs))
    }

    /// The sample order of `epoch`, as the loader will visit it.
    pub fn order(&self, epoch: u64) -> Vec<u64> {
        self.shared.order.order(epoch)
    }

    /// Runs one epoch: returns an iterator of batches and advances [`Loader::next_epoch`].
    /// Dropping the iterator early stops the epoch and joins its threads.
    pub fn iter(&mut self) -> EpochIter<'_> {
        self.iter_unbound()
    }

    /// [`Loader::iter`] for front ends that keep the loader and its running epoch in one
    /// object (the Python binding): the iterator does not borrow the loader. The caller
    /// keeps [`Loader::iter`]'s rule by hand: one epoch at a time, so drop (or exhaust) the
    /// previous iterator before starting another, because the producer of a second epoch
    /// would wait on the first one's fields inside the same worker pool.
    pub fn iter_unbound(&mut self) -> EpochIter<'static> {
        let epoch = self.next_epoch;
        self.next_epoch += 1;
        let start = self.pending.take().unwrap_or_default();
        EpochIter::start(Arc::clone(&self.shared), epoch, start)
    }

    /// A loader over the samples whose field `field` satisfies `predicate` (FFCV's
    /// `Loader.filter`), with every other knob (and the seed) of this one.
    pub fn filter(
        &self,
        field: &str,
        mut predicate: impl FnMut(FilterValue<'_>) -> bool,
    ) -> Result<Loader> {
        let reader = &self.shared.reader;
        let index = reader.field_index(field).ok_or_else(|| Error::Config {
            path: self.shared.path.clone(),
            reason: format!("filter: no field named {field:?}"),
        })?;
        if let Order::Custom(_) = self.builder.order {
            return Err(Error::Config {
                path: self.shared.path.clone(),
                reason: "filter needs a built-in order (a custom order decides its own samples)"
                    .into(),
            });
        }
        let mut keep = Vec::new();
        for &sample in &self.shared.indices {
            let value = match reader.metadata(sample, index)? {
                FieldMetadata::Int(v) => FilterValue::Int(v),
                FieldMetadata::Float(v) => FilterValue::Float(v),
                _ => FilterValue::Data(reader.field_data(sample, index)?.unwrap_or_default()),
            };
            if predicate(value) {
                keep.push(sample);
            }
        }
        let builder = LoaderBuilder {
            indices: Some(keep),
            reader: Some(Arc::clone(reader)),
            ..self.builder.clone()
        };
        builder.build()
    }

    /// Counters summed over every epoch so far. With a GPU stage this waits for the copies
    /// still in flight, so that their device time counts.
    pub fn stats(&self) -> LoaderStats {
        let c = &self.shared.counters;
        let gpu = self
            .shared
            .gpu
            .as_ref()
            .map(crate::gpu::GpuStage::stats)
            .unwrap_or_default();
        let ns = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        LoaderStats {
            epochs: c.epochs.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            samples: c.samples.load(Ordering::Relaxed),
            payload_bytes: c.payload_bytes.load(Ordering::Relaxed),
            wait_pages: ns(&c.wait_pages_ns),
            decode: ns(&c.decode_ns),
            wait_slot: ns(&c.wait_slot_ns),
            slot_stage: ns(&c.slot_stage_ns),
            consumer_wait: ns(&c.consumer_wait_ns),
            h2d_bytes: gpu.h2d_bytes,
            h2d_timed_batches: gpu.timed_batches,
            h2d_time: gpu.device_time,
            storage_bytes_read: self.shared.cache.stats().storage_bytes_read,
            slots: self.shared.slots.total(),
            slot_allocations: self.shared.slots.allocations(),
        }
    }

    /// Threads the loader runs besides its worker pool: producer threads and page
    /// readers (0 when no epoch is running).
    pub fn live_threads(&self) -> usize {
        let readers = match &self.shared.cache {
            PageCache::Process(c) => c.live_reader_threads(),
            PageCache::Os(_) => 0,
        };
        self.shared.live_producers.load(Ordering::SeqCst) + readers
    }
}

impl<'a> IntoIterator for &'a mut Loader {
    type Item = Result<crate::Batch>;
    type IntoIter = EpochIter<'a>;

    fn into_iter(self) -> EpochIter<'a> {
        self.iter()
    }
}
