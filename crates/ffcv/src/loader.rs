//! The [`Loader`] handle: what a built loader answers (length, seed, outputs, stats,
//! states), [`Loader::iter`] to run an epoch, [`Loader::filter`], and
//! [`LoaderBuilder::build`], which wraps the builder's run state (`builder.rs`) in it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use beton_io::{FieldMetadata, Reader};
use page_cache::PageCache;

use crate::batch::OutputInfo;
use crate::builder::{Built, LoaderBuilder};
use crate::epoch::EpochIter;
use crate::error::{Error, Result};
use crate::run_state::{Shared, lock};

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

impl LoaderBuilder {
    /// Checks the knobs, opens the file, declares every field's pipeline and plans (or
    /// compiles) it, and starts the worker pool.
    pub fn build(self) -> Result<Loader> {
        let Built {
            shared,
            builder,
            resume,
        } = self.run_state()?;
        let mut loader = Loader {
            shared: Arc::new(shared),
            builder,
            next_epoch: 0,
            pending: None,
        };
        if let Some(state) = resume {
            let (epoch, start) = crate::resume::plan(&loader.shared.resume_facts(), &state)?;
            loader.next_epoch = epoch;
            loader.pending = start;
        }
        Ok(loader)
    }
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

    /// A builder for a loader over several `.beton` files with the same fields read as
    /// one dataset (shards): global sample ids run through the files in the order given.
    /// Each name is a path, a URL, a glob pattern (`data/train-*.beton`, its matches
    /// sorted) or an `s3://` prefix (`s3://bucket/train-`, the `.beton` objects under it,
    /// sorted); see [`crate::Dataset::open_shards`]. The files are opened by `build`.
    pub fn builder_shards<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> LoaderBuilder {
        let names: Vec<String> = names.into_iter().map(|n| n.as_ref().to_owned()).collect();
        LoaderBuilder::new(PathBuf::new()).shards(names)
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
                &self.shared.resume_facts(),
                self.next_epoch,
                &start.earlier,
                Some(start.skip as u64),
            ),
            None => {
                crate::resume::state_at(&self.shared.resume_facts(), self.next_epoch, &[], None)
            }
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

    /// The sample ids the loader draws from (before ordering and distribution): the
    /// builder's `indices` (every sample without them), or the last
    /// [`Loader::set_indices`].
    pub fn indices(&self) -> &[u64] {
        &self.shared.indices
    }

    /// Replaces the sample ids the loader draws from, from the next epoch on: a
    /// curriculum that grows the subset, active learning that adds the samples it picked.
    ///
    /// Each later epoch's order is the built-in order over the new set: the same
    /// `(seed, epoch, indices, page map)` order as a loader built with
    /// [`LoaderBuilder::indices`] of this set and this loader's QuasiRandom buffer would
    /// run, so every epoch yields its current set exactly once (an id listed k times, k
    /// times). Distributed ranks split the new set as they split the first one
    /// (`DistributedSampler`'s padding included), so every rank must be given the same
    /// set. [`Loader::len`], [`Loader::order`] and the states follow the new set; a
    /// [`crate::LoaderState`] records its [`crate::indices_hash`], and resuming one
    /// needs a loader built over that set.
    ///
    /// What is rebuilt: only the epoch order (O(ids), plus for QuasiRandom the file's
    /// page map, O(samples)) and, if a state was taken already, the set's hash in the
    /// states (O(ids)). The worker pool, the compiled pipelines, the batch slots, the GPU
    /// stage and the page cache stay: the cache plans each epoch's pages from that
    /// epoch's batches anyway, and the process cache only grows its slot memory if the
    /// new set's schedule needs more slots than it holds. The QuasiRandom buffer stays
    /// the one chosen at build (states record it), so a process cache whose budget
    /// cannot hold the new set's schedules reports `page_cache::Error::MemoryBudget` at
    /// the epoch start, with its advice, as for any epoch.
    ///
    /// An empty set is accepted (epochs of no batch), as are repeated ids. The set given
    /// replaces any position a resumed state gave inside the next epoch (that position
    /// counts batches of the old set), unless it is the current set, which changes
    /// nothing. Errors (the loader is then unchanged): an id that is not a sample of the
    /// file (named by position and value, as `build` names it); a custom order, which
    /// decides its samples itself; an epoch still running from
    /// [`Loader::iter_unbound`] (with [`Loader::iter`] the borrow checker already
    /// refuses): finish or drop its iterator first.
    pub fn set_indices(&mut self, indices: impl Into<Vec<u64>>) -> Result<()> {
        let indices = indices.into();
        let path = self.shared.path.clone();
        let refuse = |reason: String| Error::Config {
            path: path.clone(),
            reason: format!("set_indices: {reason}"),
            cause: None,
        };
        let Some(spec) = self.shared.order_spec else {
            return Err(refuse(
                "a custom order decides the samples itself; it takes no indices".into(),
            ));
        };
        crate::builder::check_index_list(&indices, self.shared.reader.num_samples())
            .map_err(&refuse)?;
        // Only a running epoch's iterator (and its producer thread) shares the run state.
        let Some(shared) = Arc::get_mut(&mut self.shared) else {
            return Err(refuse(
                "an epoch is running; finish or drop its iterator before changing the set".into(),
            ));
        };
        if shared.indices == indices {
            return Ok(());
        }
        shared.order = crate::run_state::order_over(&spec, &shared.reader, indices.clone())?;
        shared.resume.set_indices(&indices);
        shared.indices = indices;
        self.pending = None;
        tracing::debug!(
            path = %shared.path.display(),
            samples = shared.indices.len(),
            "set_indices: new index set"
        );
        Ok(())
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
            cause: None,
        })?;
        if self.builder.has_custom_order() {
            return Err(Error::Config {
                path: self.shared.path.clone(),
                reason: "filter needs a built-in order (a custom order decides its own samples)"
                    .into(),
                cause: None,
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
        self.builder
            .clone()
            .indices(keep)
            .reader(Arc::clone(reader))
            .build()
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
