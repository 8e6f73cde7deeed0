//! The `ffcv` facade: FFCV's data loader in Rust — a [`Loader`] with every FFCV knob,
//! decoders for each field type, and the image functions — over the ffcv-rs crates.
//!
//! # Overview
//!
//! - [`Loader::builder`] takes a `.beton` path and FFCV's knobs ([`LoaderBuilder`]:
//!   `batch_size`, `num_workers`, `os_cache`, `order`, `distributed`/`rank`/`world_size`,
//!   `seed`, `indices`, per-field pipelines, `drop_last`, `batches_ahead`, `recompile`,
//!   plus the process-cache knobs, a memory budget and the compiler switch).
//! - [`Loader::iter`] runs one epoch: a producer thread orders the samples
//!   ([`traversal`]), schedules their pages ([`page_cache`]), decodes each batch with the
//!   fields' compiled pipelines ([`jit`]) on a pool of `num_workers` threads, and queues up
//!   to `batches_ahead` batches. Each [`Batch`] owns its slot until dropped; views per
//!   output come from [`Batch::get`] and [`Batch::output`].
//! - A field's pipeline is a [`Decoder`] followed by pipeline-jit operations
//!   ([`PipelineSpec`]). Default decoders: Int → `i64 [B,1]`, Float → `f64 [B,1]`,
//!   Bytes → `u8 [B,max_size]` + lengths, NDArray/TorchTensor → stored dtype and shape,
//!   JSON → bytes + lengths + [`BatchOutput::json`], VarArray (ffcv-rs) →
//!   [`decode::VarArrayDecoder`]'s `[B,K_max,...inner]` + rows per sample
//!   ([`BatchOutput::packed`] for the packed form), RGB images →
//!   [`decode::SimpleRGBImageDecoder`] (constant-size datasets, as FFCV; for varying sizes
//!   choose [`decode::CenterCropRGBImageDecoder`] or
//!   [`decode::RandomResizedCropRGBImageDecoder`], a `--decoder`-style spec
//!   ([`decode::parse_field_decoder`]), or [`LoaderBuilder::disable`] the field).
//! - [`transforms`] names FFCV's transforms (`ToTensor`, `NormalizeImage`,
//!   `RandomHorizontalFlip`, `Cutout`, `RandomTranslate`, `ReplaceLabel`, `Poison`, ...).
//! - [`image`] (the `rgb-image` crate) holds JPEG decoding, FFCV's crop rules,
//!   `INTER_AREA` resizing and `RGBImageField` encoding.
//! - [`LoaderState`] is the loader's position inside an epoch ([`EpochIter::state`],
//!   [`Loader::state`]), JSON-serializable; [`LoaderBuilder::resume`] continues from it
//!   byte for byte with the same world size, or splits the epoch's remaining samples among
//!   another number of ranks (`docs/resume.md`).
//! - [`Loader::builder_mixture`] mixes several datasets by weight ([`Mixture`]: per-source
//!   counts exact per epoch, each source walked in its own order; `docs/mixtures.md`).
//! - [`Loader::set_indices`] replaces the sample ids between epochs (a curriculum, active
//!   learning); states record the current set's [`indices_hash`].
//! - The lower crates are re-exported: [`mod@format`] (beton-io), [`traversal`],
//!   [`page_cache`], [`jit`] (pipeline-jit), [`image`] (rgb-image).
//!
//! # Example
//!
//! ```
//! use ffcv::{Loader, Order};
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/ffcv-1.0.2/scalars.beton");
//! let mut loader = Loader::builder(path)
//!     .batch_size(32)
//!     .num_workers(2)
//!     .order(Order::Random)
//!     .seed(0)
//!     .build()?;
//! assert_eq!(loader.len(), 3); // 100 samples, drop_last
//!
//! let mut seen = Vec::new();
//! for batch in &mut loader {
//!     let batch = batch?;
//!     let index = batch.get::<i64>("index")?;
//!     assert_eq!(index.shape(), &[32, 1]);
//!     let value = batch.get::<f64>("value")?;
//!     assert_eq!(value.len(), 32);
//!     seen.extend_from_slice(index.as_slice());
//! }
//! assert_eq!(seen.len(), 96);
//! assert_eq!(loader.next_epoch(), 1);
//! # Ok::<(), ffcv::Error>(())
//! ```

mod batch;
mod batch_fill;
mod batch_slots;
mod builder;
mod cpus;
pub mod dataset;
pub mod decode;
mod epoch;
mod error;
pub mod gpu;
mod loader;
mod memory;
pub mod mixture;
mod order;
pub mod quasi_buffer;
mod resume;
mod run_state;
pub mod shards;
pub mod transform_spec;
pub mod transforms;
mod views;

pub use beton_io as format;
pub use dataset::{DEFAULT_PAGE_CACHE_SIZE, Dataset, Location, RemoteConfig};
pub use page_cache;
pub use pipeline_jit as jit;
pub use rgb_image as image;
pub use traversal;

pub use batch::{Batch, BatchOutput, OutputInfo, TypedView};
pub use batch_slots::{Attachment, SlotOutput, SlotStage};
pub use builder::LoaderBuilder;
pub use cpus::affinity_cpus;
pub use decode::views::view_seed;
pub use decode::{Decoder, DecoderChoice, DecoderOutput, OutputKind, PipelineSpec};
pub use epoch::{EpochIter, WaitTimedOut};
pub use error::{Error, Result, message_with_causes};
pub use loader::{FilterValue, Loader, LoaderStats};
pub use memory::{Element, HeapAllocator, HeapMemory, SlotAllocator, SlotMemory};
pub use mixture::{Mixture, MixtureSource, MixtureSpec, WhenExhausted};
pub use order::Order;
pub use pipeline_jit::ExtensionError;
pub use resume::{LoaderState, STATE_FORMAT_VERSION, indices_hash};
pub use views::ViewPipeline;
