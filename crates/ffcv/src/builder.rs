//! The loader's builder: [`LoaderBuilder`], every FFCV knob with FFCV's defaults, and the
//! steps that turn the knobs into the per-loader run state (`run_state.rs`): check the
//! knobs, open the file, make the order, start the pool, plan each field's pipeline, set
//! up the cache and the slots. `loader.rs` wraps the run state in the [`crate::Loader`]
//! handle; the epoch order knob, [`Order`], is `order.rs`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use beton_io::Reader;
use page_cache::{CachePolicy, OsConfig, PageCache, ProcessConfig};
use traversal::{Distributed, OrderKind, OrderSpec, SamplePages, TraversalOrder};

use crate::batch::OutputInfo;
use crate::batch_slots::{SlotPool, SlotStage};
use crate::decode::{DecoderChoice, PipelineSpec, default_decoder};
use crate::error::{Error, Result};
use crate::memory::{HeapAllocator, SlotAllocator};
use crate::order::Order;
use crate::run_state::{Counters, FieldRunner, Shared, sample_pages};

/// Builds a [`crate::Loader`]; every knob has FFCV's default except `batch_size`.
#[derive(Clone)]
pub struct LoaderBuilder {
    path: PathBuf,
    reader: Option<Arc<Reader>>,
    /// The page source of a remote dataset given with [`LoaderBuilder::dataset`].
    source: Option<Arc<dyn page_cache::PageSource>>,
    remote: crate::dataset::RemoteConfig,
    /// The disk cache of a remote dataset's pages (`page_cache_dir`, `page_cache_size`).
    disk_cache: crate::dataset::DiskCacheKnobs,
    /// Shard names (paths, URLs, patterns) given to `Loader::builder_shards`.
    shards: Option<Vec<String>>,
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
    pub(crate) views: crate::views::Views,
    drop_last: bool,
    batches_ahead: usize,
    recompile: bool,
    compile: bool,
    /// FFCV's `os_cache`: which of the two configurations below the loader uses. Both
    /// are kept, so that a process-cache knob given before `os_cache(false)` counts.
    os_cache: bool,
    os: OsConfig,
    process: ProcessConfig,
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
            .field("cache", &self.cache_policy_in_use())
            .finish_non_exhaustive()
    }
}

impl LoaderBuilder {
    pub(crate) fn new(path: PathBuf) -> LoaderBuilder {
        LoaderBuilder {
            path,
            reader: None,
            source: None,
            remote: crate::dataset::RemoteConfig::default(),
            disk_cache: crate::dataset::DiskCacheKnobs::default(),
            shards: None,
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
            views: Default::default(),
            drop_last: true,
            batches_ahead: 3,
            recompile: false,
            compile: true,
            os_cache: true,
            os: OsConfig::default(),
            process: ProcessConfig::default(),
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

    /// `true` (default): read through the OS page cache; `false`: the process cache
    /// (FFCV's knob; [`LoaderBuilder::cache_policy`] sets a cache with all its knobs).
    pub fn os_cache(mut self, os_cache: bool) -> Self {
        self.os_cache = os_cache;
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

    /// Adds output `name`: field `source` of the file (or an earlier view) decoded again
    /// with `pipeline` (a [`PipelineSpec`] or a [`DecoderChoice`]), with its own random
    /// draws: FFCV-SSL's `pipelines={name: ...}, custom_field_mapper={name: source}`.
    /// The batch holds the fields, then the views in this order (`views.rs`).
    pub fn view(
        mut self,
        name: impl Into<String>,
        source: impl Into<String>,
        pipeline: impl Into<crate::views::ViewPipeline>,
    ) -> Self {
        self.views.push(name.into(), source.into(), pipeline.into());
        self
    }

    /// How views of one image field decode: [`crate::image::ViewsPolicy::Auto`] (default:
    /// the JPEG once per sample for all views where rgb-image's rule expects that to be
    /// cheaper), `Once` or `PerView` (each view alone). The bytes are the same.
    pub fn views_policy(mut self, policy: crate::image::ViewsPolicy) -> Self {
        self.views.set_policy(policy);
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
        self.process.prefetch_ahead = batches;
        self
    }

    /// Process cache: page-reader threads (default 12).
    pub fn reader_threads(mut self, threads: usize) -> Self {
        self.process.reader_threads = threads;
        self
    }

    /// Process cache: read pages with `O_DIRECT` (default `false`).
    pub fn direct_io(mut self, direct_io: bool) -> Self {
        self.process.direct_io = direct_io;
        self
    }

    /// Process cache: most bytes of page slots an epoch may use (default: the OS's
    /// available memory).
    pub fn max_memory(mut self, bytes: u64) -> Self {
        self.process.max_memory = Some(bytes);
        self
    }

    /// Process cache: keep pages still held in their slots from the previous epoch
    /// instead of reading them again (default `true`; `false` re-reads every page each
    /// epoch, as FFCV does).
    pub fn retain_pages(mut self, retain: bool) -> Self {
        self.process.retain_pages = retain;
        self
    }

    /// Process cache: give every page an epoch reads a slot of its own, so epochs after
    /// the first read nothing (default `false`: it costs slot memory for the whole
    /// dataset; an epoch over the memory budget uses the ordinary schedule instead).
    pub fn hold_all_pages(mut self, hold: bool) -> Self {
        self.process.hold_all_pages = hold;
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

    /// The cache and all its knobs at once ([`CachePolicy::Os`] with its `madvise`
    /// policy, or [`CachePolicy::Process`] with every process-cache knob); the same as
    /// [`LoaderBuilder::os_cache`] plus that cache's knobs.
    pub fn cache_policy(mut self, policy: CachePolicy) -> Self {
        match policy {
            CachePolicy::Os(config) => {
                self.os_cache = true;
                self.os = config;
            }
            CachePolicy::Process(config) => {
                self.os_cache = false;
                self.process = config;
            }
        }
        self
    }

    /// The cache the loader will use, with its knobs.
    pub fn cache_policy_in_use(&self) -> CachePolicy {
        if self.os_cache {
            CachePolicy::Os(self.os)
        } else {
            CachePolicy::Process(self.process.clone())
        }
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

    /// Reads the shards `names` stand for as one dataset (`Loader::builder_shards`).
    pub(crate) fn shards(mut self, names: Vec<String>) -> Self {
        self.path = names.first().map(Into::into).unwrap_or_default();
        self.shards = Some(names);
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

    /// Keeps a remote dataset's pages in `dir` too, for later epochs, loaders and other
    /// processes on the node (local files never: the OS caches them); see `docs/remote.md`.
    pub fn page_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.disk_cache.dir = Some(dir.into());
        self
    }

    /// The most bytes `page_cache_dir` may hold (default 10 GiB).
    pub fn page_cache_size(mut self, bytes: u64) -> Self {
        self.disk_cache.max_bytes = bytes;
        self
    }

    fn config_error(&self, reason: impl Into<String>) -> Error {
        Error::Config {
            path: self.path.clone(),
            reason: reason.into(),
            cause: None,
        }
    }

    /// The steps of [`LoaderBuilder::build`] up to the loader handle: checks the knobs,
    /// opens the file, makes the epoch order, starts the worker pool, declares and plans
    /// every field's pipeline, and sets up the page cache and the batch slots.
    pub(crate) fn run_state(mut self) -> Result<Built> {
        let knobs = self.check_knobs()?;
        let (reader, source) = self.open_reader()?;
        let source = crate::dataset::with_disk_cache(&reader, source, &self.disk_cache)?;
        if let Some(s) = &source
            && self.os_cache
            && crate::shards::needs_process_cache(&reader, Some(s))
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
            self.os_cache = false;
            self.check_knobs()?;
        }
        let path = reader.path().to_owned();
        let distributed = if self.distributed {
            Some(Distributed::new(self.world_size, self.rank)?)
        } else {
            None
        };
        let seed = self.choose_seed(distributed);
        let indices = self.check_indices(&reader)?;
        let mut resume =
            crate::resume::ResumeContext::new(&self.order, distributed, knobs.batch_size);
        let (order, order_spec) =
            self.traversal_order(&reader, &indices, seed, distributed, knobs, &mut resume)?;
        let pool = start_pool(&path, knobs.num_workers)?;
        let fields = plan_fields(&reader, &self, &pool)?;
        resume.set_pipelines(fields.iter().map(|f| (&f.spec, &f.output)));
        if fields.is_empty() {
            return Err(self.config_error("every field is disabled: a batch would be empty"));
        }
        let cache =
            PageCache::with_source(Arc::clone(&reader), source, &self.cache_policy_in_use())?;
        let outputs: Arc<[OutputInfo]> = fields.iter().map(|f| f.output.clone()).collect();
        let (slots, gpu) = self.slot_pool(&outputs, knobs.batch_size, seed)?;
        crate::run_state::slot_sizes(&path, &outputs, knobs.batch_size)?;
        tracing::debug!(
            path = %path.display(),
            batch_size = knobs.batch_size,
            num_workers = knobs.num_workers,
            seed,
            outputs = outputs.len(),
            "built loader"
        );
        let shared = Shared {
            path,
            reader,
            cache,
            order,
            order_spec,
            indices,
            batch_size: knobs.batch_size,
            num_workers: knobs.num_workers,
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
            prefetch_ahead: self.process.prefetch_ahead,
        };
        let resume = self.resume.clone();
        Ok(Built {
            shared,
            builder: LoaderBuilder {
                seed: Some(seed),
                resume: None,
                ..self
            },
            resume,
        })
    }

    /// Step 1: the knobs that need no file.
    fn check_knobs(&self) -> Result<Knobs> {
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
        if !self.os_cache && self.process.reader_threads == 0 {
            return Err(self.config_error("reader_threads must be at least 1"));
        }
        Ok(Knobs {
            batch_size,
            num_workers,
        })
    }

    /// Step 2: the reader (given or opened: a path, `file://` or a remote URL) and, for a
    /// remote dataset, its page source, with every field a pipeline names.
    #[allow(clippy::type_complexity)]
    fn open_reader(&self) -> Result<(Arc<Reader>, Option<Arc<dyn page_cache::PageSource>>)> {
        let (reader, source) = match &self.reader {
            Some(r) => (Arc::clone(r), self.source.clone()),
            None => {
                let options = beton_io::ReaderOptions::default();
                let d = match &self.shards {
                    Some(names) => crate::Dataset::open_shards_with(names, &options, &self.remote)?,
                    None => crate::Dataset::open_with(&self.path, &options, &self.remote)?,
                };
                (d.reader, d.source)
            }
        };
        for name in self.decoders.keys().chain(self.pipelines.keys()) {
            if reader.field_index(name).is_none() {
                let names: Vec<&str> = reader.fields().iter().map(|f| f.name.as_str()).collect();
                return Err(self.config_error(format!(
                    "a pipeline names field {name:?}, which the file does not have (fields: {})",
                    names.join(", ")
                )));
            }
        }
        Ok((reader, source))
    }

    /// Step 3: the seed, given or drawn.
    fn choose_seed(&self, distributed: Option<Distributed>) -> u64 {
        match self.seed {
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
            None => crate::order::draw_seed(),
        }
    }

    /// Step 4: the sample ids, checked against the file ([`check_index_list`]).
    fn check_indices(&self, reader: &Reader) -> Result<Vec<u64>> {
        let num_samples = reader.num_samples();
        Ok(match &self.indices {
            Some(ix) => {
                check_index_list(ix, num_samples).map_err(|reason| self.config_error(reason))?;
                ix.clone()
            }
            None => (0..num_samples).collect(),
        })
    }

    /// Step 5: the epoch order (a QuasiRandom order records its buffer in `resume`) and,
    /// for a built-in order, the spec that built it.
    fn traversal_order(
        &self,
        reader: &Reader,
        indices: &[u64],
        seed: u64,
        distributed: Option<Distributed>,
        knobs: Knobs,
        resume: &mut crate::resume::ResumeContext,
    ) -> Result<(Arc<dyn TraversalOrder>, Option<OrderSpec>)> {
        let kind = match &self.order {
            Order::Custom(o) => return Ok((Arc::clone(o), None)),
            built_in => built_in.kind().unwrap_or(OrderKind::QuasiRandom),
        };
        let mut spec = OrderSpec {
            seed,
            distributed,
            ..OrderSpec::new(kind, knobs.batch_size)
        };
        let pages = (kind == OrderKind::QuasiRandom).then(|| sample_pages(reader));
        if let Some(pages) = &pages {
            spec.buffer_pages = self.choose_quasi_buffer(
                reader,
                pages,
                indices,
                seed,
                distributed,
                knobs.batch_size,
            )?;
            resume.set_buffer_pages(spec.buffer_pages);
        }
        let order = Arc::from(spec.build(indices.to_vec(), pages.as_ref())?);
        Ok((order, Some(spec)))
    }

    /// Step 8: the batch slots, their memory and stage from the GPU stage when there is
    /// one, else from the builder's allocator and stage.
    fn slot_pool(
        &self,
        outputs: &[OutputInfo],
        batch_size: usize,
        seed: u64,
    ) -> Result<(Arc<SlotPool>, Option<crate::gpu::GpuStage>)> {
        let gpu = match &self.to_device {
            Some(td) => {
                crate::gpu::build_for_loader(td, outputs, batch_size, self.batches_ahead, seed)
                    .map_err(|e| self.config_error(e.to_string()))?
            }
            None => None,
        };
        let (allocator, stage): (Arc<dyn SlotAllocator>, Option<Arc<dyn SlotStage>>) = match &gpu {
            Some(g) => (Arc::new(g.clone()), Some(Arc::new(g.clone()))),
            None => (Arc::clone(&self.allocator), self.stage.clone()),
        };
        let slots = Arc::new(SlotPool::new(allocator, stage, self.batches_ahead + 2));
        Ok((slots, gpu))
    }

    /// Whether the order is a user's (which decides its own samples).
    pub(crate) fn has_custom_order(&self) -> bool {
        matches!(self.order, Order::Custom(_))
    }
}

/// The knobs [`LoaderBuilder::check_knobs`] resolved.
#[derive(Debug, Clone, Copy)]
struct Knobs {
    batch_size: usize,
    num_workers: usize,
}

/// What [`LoaderBuilder::run_state`] makes: the run state, the builder the loader keeps
/// for [`crate::Loader::filter`] (its seed fixed), and the state to resume from.
pub(crate) struct Built {
    pub(crate) shared: Shared,
    pub(crate) builder: LoaderBuilder,
    pub(crate) resume: Option<crate::resume::LoaderState>,
}

/// Checks an index list against a file of `num_samples` samples: every id must be one (the
/// reason names the first that is not, by position and value). Repeated ids (visited as
/// often as listed) and an empty list (epochs of no batch) are accepted.
pub(crate) fn check_index_list(
    indices: &[u64],
    num_samples: u64,
) -> std::result::Result<(), String> {
    match indices.iter().enumerate().find(|&(_, &s)| s >= num_samples) {
        Some((pos, &bad)) => Err(format!(
            "indices[{pos}] = {bad} is out of range: the file has {num_samples} samples"
        )),
        None => Ok(()),
    }
}

/// Step 6: the worker pool the epochs' pipelines run on.
fn start_pool(path: &Path, num_workers: usize) -> Result<Arc<rayon::ThreadPool>> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(num_workers)
        .thread_name(|i| format!("ffcv-worker-{i}"))
        .build()
        .map_err(|e| Error::Setup {
            path: path.to_owned(),
            what: "worker threads",
            source: std::io::Error::other(e.to_string()),
        })?;
    Ok(Arc::new(pool))
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
        if self.os_cache {
            return Ok(ffcv_pages);
        }
        let Some(budget) = self
            .process
            .max_memory
            .or_else(page_cache::available_memory)
        else {
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
            prefetch_ahead: self.process.prefetch_ahead,
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

/// Step 7: a runner for every enabled field (its pipeline, or its decoder choice, or its
/// type's default decoder), declared and planned or compiled on the worker pool.
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
    let knobs = (b.compile, b.max_image_pixels);
    crate::views::add_runners(runners, reader, &b.views, knobs, pool)
}
