//! The per-loader run state that the loader, its epochs and its resume states share: each
//! enabled field's runner (decoder context, executor, output), the counters, and
//! [`Shared`], what the producer thread of an epoch reads, and the built-in order over an
//! index set ([`order_over`], for a build and for `Loader::set_indices`). The builder
//! (`builder.rs`) makes it; the epoch iterator (`epoch.rs`), the per-batch fill
//! (`batch_fill.rs`) and `resume.rs` (through [`Shared::resume_facts`]) read it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, PoisonError};

use beton_io::{FieldType, Reader};
use page_cache::PageCache;
use pipeline_jit::{Executor, Pipeline};
use traversal::{OrderKind, OrderSpec, SamplePages, TraversalOrder};

use crate::batch::OutputInfo;
use crate::batch_slots::SlotPool;
use crate::decode::kernel::{DecoderContext, DecoderOp, record_state};
use crate::decode::{FieldInfo, OutputKind, PipelineSpec, numpy_dtype};
use crate::error::{Error, Result};

/// One enabled field: its decoder's kernel context, its executor and its output.
pub(crate) struct FieldRunner {
    pub(crate) field: usize,
    pub(crate) field_type: FieldType,
    pub(crate) spec: PipelineSpec,
    pub(crate) context: Arc<DecoderContext>,
    pub(crate) executor: Executor,
    pub(crate) output: OutputInfo,
    max_image_pixels: u64,
    /// `Some` for a view of the field (`views.rs`), or for the field itself in a group.
    pub(crate) view: Option<crate::decode::views::ViewOf>,
}

impl FieldRunner {
    /// Declares the decoder for the field and builds the pipeline over records.
    fn declare(
        reader: &Reader,
        field: usize,
        spec: &PipelineSpec,
        max_image_pixels: u64,
        view: Option<&crate::decode::views::ViewOf>,
    ) -> Result<(Pipeline, Arc<DecoderContext>, OutputInfo)> {
        let f = &reader.fields()[field];
        let name = view.map_or(&f.name, |v| &v.name);
        let info = FieldInfo {
            reader,
            index: field,
            field: f,
            max_image_pixels,
        };
        let refused = |reason: String, cause: Option<Box<crate::ExtensionError>>| Error::Config {
            path: reader.path().to_owned(),
            reason: format!("field {name:?}: {}: {reason}", spec.decoder.name()),
            cause,
        };
        let bad = |reason: String| refused(reason, None);
        // The decoder's cause stays reachable as the configuration error's source.
        let out = spec.decoder.declare(&info).map_err(|e| {
            let (message, cause) = crate::error::extension_parts(e);
            refused(message, cause)
        })?;
        let row_bytes = out
            .row_bytes()
            .ok_or_else(|| bad(format!("output shape {:?} exceeds memory", out.shape)))?;
        if out.state.bytes().ok() != Some(row_bytes) {
            return Err(bad(format!(
                "declared state {:?} does not hold the {row_bytes} bytes of shape {:?} {}",
                out.state,
                out.shape,
                out.dtype.descr()
            )));
        }
        // A grouped view's decoder takes the row the group decode wrote for it.
        let decoder: Arc<dyn crate::decode::Decoder> = match view.and_then(|v| v.group.as_ref()) {
            Some(_) => Arc::new(crate::decode::views::GroupedRows::new(Arc::clone(
                &spec.decoder,
            ))),
            None => Arc::clone(&spec.decoder),
        };
        let op = DecoderOp::new(decoder, out.clone(), row_bytes, max_image_pixels);
        let context = op.context();
        let mut pipeline = Pipeline::new(record_state()).then(op);
        for t in &spec.transforms {
            pipeline.push(Arc::clone(t));
        }
        let output = if spec.transforms.is_empty() {
            OutputInfo {
                name: name.clone(),
                field,
                shape: out.shape,
                dtype: out.dtype,
                kind: out.kind,
                row_bytes,
            }
        } else {
            let plan = pipeline.plan().map_err(|source| Error::Pipeline {
                path: reader.path().to_owned(),
                field: name.clone(),
                source,
            })?;
            let state = plan.output();
            OutputInfo {
                name: name.clone(),
                field,
                shape: state.shape.clone(),
                dtype: numpy_dtype(state.dtype),
                kind: OutputKind::Array,
                row_bytes: plan.output_bytes(),
            }
        };
        Ok((pipeline, context, output))
    }

    pub(crate) fn new(
        reader: &Reader,
        field: usize,
        spec: PipelineSpec,
        compile: bool,
        pool: &Arc<rayon::ThreadPool>,
        max_image_pixels: u64,
    ) -> Result<FieldRunner> {
        FieldRunner::with_view(reader, field, spec, (compile, pool, max_image_pixels), None)
    }

    /// A runner for view `view` of field `field` (`views.rs`).
    pub(crate) fn new_view(
        reader: &Reader,
        field: usize,
        spec: PipelineSpec,
        knobs: (bool, &Arc<rayon::ThreadPool>, u64),
        view: crate::decode::views::ViewOf,
    ) -> Result<FieldRunner> {
        FieldRunner::with_view(reader, field, spec, knobs, Some(view))
    }

    fn with_view(
        reader: &Reader,
        field: usize,
        spec: PipelineSpec,
        (compile, pool, max_image_pixels): (bool, &Arc<rayon::ThreadPool>, u64),
        view: Option<crate::decode::views::ViewOf>,
    ) -> Result<FieldRunner> {
        let (pipeline, context, output) =
            FieldRunner::declare(reader, field, &spec, max_image_pixels, view.as_ref())?;
        let executor =
            Executor::with_pool(&pipeline, compile, Arc::clone(pool)).map_err(|source| {
                Error::Pipeline {
                    path: reader.path().to_owned(),
                    field: output.name.clone(),
                    source,
                }
            })?;
        Ok(FieldRunner {
            field,
            field_type: reader.fields()[field].field_type.clone(),
            spec,
            context,
            executor,
            output,
            max_image_pixels,
            view,
        })
    }

    /// Which view of its field the runner is (0: the field under its own name).
    pub(crate) fn view_index(&self) -> usize {
        self.view.as_ref().map_or(0, |v| v.index)
    }

    /// The group whose decode writes this runner's rows, if any.
    pub(crate) fn group(&self) -> Option<&crate::decode::views::ViewGroup> {
        self.view.as_ref().and_then(|v| v.group.as_deref())
    }

    /// Makes the runner view `view` (a group member) and rebuilds its pipeline.
    pub(crate) fn set_view(
        &mut self,
        reader: &Reader,
        view: crate::decode::views::ViewOf,
    ) -> Result<()> {
        self.view = Some(view);
        self.rebuild(reader)
    }

    /// `recompile`: declares again and regenerates the code.
    pub(crate) fn rebuild(&mut self, reader: &Reader) -> Result<()> {
        let (pipeline, context, output) = FieldRunner::declare(
            reader,
            self.field,
            &self.spec,
            self.max_image_pixels,
            self.view.as_ref(),
        )?;
        self.executor
            .rebuild(&pipeline)
            .map_err(|source| Error::Pipeline {
                path: reader.path().to_owned(),
                field: output.name.clone(),
                source,
            })?;
        self.context = context;
        self.output = output;
        Ok(())
    }
}

/// Counters the producer updates.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) epochs: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) samples: AtomicU64,
    pub(crate) payload_bytes: AtomicU64,
    pub(crate) wait_pages_ns: AtomicU64,
    pub(crate) decode_ns: AtomicU64,
    pub(crate) wait_slot_ns: AtomicU64,
    pub(crate) slot_stage_ns: AtomicU64,
    /// Updated by the consumer's thread ([`crate::EpochIter`]'s `next`), not the producer's.
    pub(crate) consumer_wait_ns: AtomicU64,
}

/// What the producer thread of an epoch shares with the loader.
pub(crate) struct Shared {
    pub(crate) path: PathBuf,
    pub(crate) reader: Arc<Reader>,
    pub(crate) cache: PageCache,
    pub(crate) order: Arc<dyn TraversalOrder>,
    /// What built `order` (`None`: a custom order), so that
    /// [`crate::Loader::set_indices`] can build it again over another set.
    pub(crate) order_spec: Option<OrderSpec>,
    pub(crate) indices: Vec<u64>,
    pub(crate) batch_size: usize,
    pub(crate) num_workers: usize,
    pub(crate) seed: u64,
    pub(crate) drop_last: bool,
    pub(crate) batches_ahead: usize,
    pub(crate) recompile: bool,
    pub(crate) pool: Arc<rayon::ThreadPool>,
    pub(crate) fields: Mutex<Vec<FieldRunner>>,
    pub(crate) outputs: Mutex<Arc<[OutputInfo]>>,
    pub(crate) slots: Arc<SlotPool>,
    /// The GPU stage built from [`crate::LoaderBuilder::device`], kept for its copy counters.
    pub(crate) gpu: Option<crate::gpu::GpuStage>,
    pub(crate) counters: Counters,
    pub(crate) live_producers: Arc<AtomicUsize>,
    /// What a [`crate::LoaderState`] records of this loader.
    pub(crate) resume: crate::resume::ResumeContext,
    /// The process cache's `prefetch_ahead` (for the memory guard's advice).
    pub(crate) prefetch_ahead: usize,
}

impl Shared {
    /// What a [`crate::LoaderState`] of this loader records, for `resume.rs`.
    pub(crate) fn resume_facts(&self) -> crate::resume::LoaderFacts<'_> {
        crate::resume::LoaderFacts {
            reader: &self.reader,
            indices: &self.indices,
            seed: self.seed,
            batch_size: self.batch_size,
            drop_last: self.drop_last,
            samples_per_epoch: self.order.samples_per_epoch(),
            ctx: &self.resume,
        }
    }
}

/// The first page of every sample of `reader`, as QuasiRandom groups samples.
pub(crate) fn sample_pages(reader: &Reader) -> SamplePages {
    let map = reader.page_map();
    SamplePages::from_fn(reader.num_samples(), |s| {
        map.pages_of_sample(s).first().copied()
    })
}

/// A built-in order `spec` over `indices` ([`crate::Loader::set_indices`]): the same
/// spec (seed, distributed share, QuasiRandom buffer) as the loader was built with, so an
/// epoch's order is the one a loader built over `indices` with that buffer would have.
pub(crate) fn order_over(
    spec: &OrderSpec,
    reader: &Reader,
    indices: Vec<u64>,
) -> Result<Arc<dyn TraversalOrder>> {
    let pages = (spec.kind == OrderKind::QuasiRandom).then(|| sample_pages(reader));
    Ok(Arc::from(spec.build(indices, pages.as_ref())?))
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Bytes of each output buffer of a slot, checked against overflow.
pub(crate) fn slot_sizes(
    path: &std::path::Path,
    outputs: &[OutputInfo],
    batch_size: usize,
) -> Result<Vec<usize>> {
    outputs
        .iter()
        .map(|o| {
            o.row_bytes
                .checked_mul(batch_size)
                .ok_or_else(|| Error::Config {
                    path: path.to_owned(),
                    reason: format!(
                        "output {:?}: {} samples of {} bytes exceed the address space",
                        o.name, batch_size, o.row_bytes
                    ),
                    cause: None,
                })
        })
        .collect()
}
