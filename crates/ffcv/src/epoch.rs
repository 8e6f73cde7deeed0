//! One epoch: the producer thread (order → batches → page schedule → pipelines → queue)
//! and the iterator the consumer holds.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Instant;

use beton_io::FieldMetadata;
use page_cache::EpochContext;
use rayon::prelude::*;

use crate::batch::{Batch, OutputInfo};
use crate::decode::kernel::{RECORD_BYTES, record_len, write_record};
use crate::decode::stored_extent;
use crate::error::{Error, Result};
use crate::loader::{FieldRunner, Loader, Shared, lock};
use crate::slots::{Slot, SlotOutput};

/// Samples per gather task: enough to amortise scheduling, small enough to balance.
const GATHER_CHUNK: usize = 64;

/// The batches of one epoch. Yields `Ok(batch)` in order, or one `Err` that ends the epoch.
/// Dropping it stops the producer and the page readers and joins them.
pub struct EpochIter<'a> {
    shared: Arc<Shared>,
    rx: Option<Receiver<Result<Batch>>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    epoch: u64,
    num_batches: usize,
    done: bool,
    _loader: PhantomData<&'a mut Loader>,
}

impl std::fmt::Debug for EpochIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpochIter")
            .field("epoch", &self.epoch)
            .field("num_batches", &self.num_batches)
            .field("done", &self.done)
            .finish()
    }
}

/// Counts a producer as live until it ends, however it ends.
struct LiveGuard(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<'a> EpochIter<'a> {
    pub(crate) fn start(shared: Arc<Shared>, epoch: u64) -> EpochIter<'a> {
        let order = shared.order.order(epoch);
        let b = shared.batch_size;
        let mut batches: Vec<Vec<u64>> = order.chunks(b).map(<[u64]>::to_vec).collect();
        if shared.drop_last && batches.last().is_some_and(|l| l.len() < b) {
            batches.pop();
        }
        let num_batches = batches.len();
        shared.counters.epochs.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = sync_channel(shared.batches_ahead);
        let stop = Arc::new(AtomicBool::new(false));
        let mut it = EpochIter {
            shared: Arc::clone(&shared),
            rx: Some(rx),
            stop: Arc::clone(&stop),
            handle: None,
            epoch,
            num_batches,
            done: false,
            _loader: PhantomData,
        };
        shared.live_producers.fetch_add(1, Ordering::SeqCst);
        let guard = LiveGuard(Arc::clone(&shared.live_producers));
        let spawned = std::thread::Builder::new()
            .name(format!("ffcv-producer-{epoch}"))
            .spawn(move || {
                let _guard = guard;
                if let Err(e) = produce(&shared, epoch, &batches, &tx, &stop) {
                    // The consumer may be gone already; nothing else to tell.
                    let _ = tx.send(Err(e));
                }
            });
        match spawned {
            Ok(h) => it.handle = Some(h),
            Err(source) => {
                // The closure (and its guard) was dropped with the failed spawn.
                let (tx, rx) = sync_channel(1);
                let _ = tx.send(Err(Error::Setup {
                    path: it.shared.path.clone(),
                    what: "producer thread",
                    source,
                }));
                it.rx = Some(rx);
            }
        }
        it
    }

    /// The epoch this iterator runs.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Batches this epoch yields when nothing fails.
    pub fn num_batches(&self) -> usize {
        self.num_batches
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Dropping the receiver wakes a producer blocked on a full queue.
        drop(self.rx.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Iterator for EpochIter<'_> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if self.done {
            return None;
        }
        let received = self.rx.as_ref()?.recv();
        match received {
            Ok(Ok(batch)) => Some(Ok(batch)),
            Ok(Err(e)) => {
                self.done = true;
                self.stop_and_join();
                Some(Err(e))
            }
            Err(_) => {
                // The producer finished (or died without a word).
                self.done = true;
                let panicked = self
                    .handle
                    .take()
                    .map(|h| h.join().is_err())
                    .unwrap_or(false);
                self.stop_and_join();
                panicked.then(|| {
                    Err(Error::ProducerGone {
                        path: self.shared.path.clone(),
                        epoch: self.epoch,
                    })
                })
            }
        }
    }
}

impl Drop for EpochIter<'_> {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

fn nanos(t: Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

fn produce(
    shared: &Arc<Shared>,
    epoch: u64,
    batches: &[Vec<u64>],
    tx: &SyncSender<Result<Batch>>,
    stop: &AtomicBool,
) -> Result<()> {
    let span = tracing::debug_span!("epoch", epoch, batches = batches.len());
    let _e = span.enter();
    let mut fields = lock(&shared.fields);
    if shared.recompile && epoch > 0 {
        for f in fields.iter_mut() {
            f.rebuild(&shared.reader)?;
        }
        let outputs: Arc<[OutputInfo]> = fields.iter().map(|f| f.output.clone()).collect();
        *lock(&shared.outputs) = outputs;
    }
    let outputs = Arc::clone(&lock(&shared.outputs));
    let bs = shared.batch_size;
    let sizes = slot_sizes(&shared.path, &outputs, bs)?;
    let with_lengths: Vec<bool> = outputs.iter().map(|o| o.kind.has_lengths()).collect();
    let mut ctx = shared.cache.schedule_epoch(batches)?;
    let mut records: Vec<Vec<u8>> = fields
        .iter()
        .map(|_| vec![0u8; bs * RECORD_BYTES])
        .collect();
    let c = &shared.counters;

    for (b, ids) in batches.iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let t = Instant::now();
        ctx.start_batch(b)?;
        c.wait_pages_ns.fetch_add(nanos(t), Ordering::Relaxed);

        let mut slot = shared
            .slots
            .take(&sizes, &with_lengths)
            .map_err(|source| Error::Setup {
                path: shared.path.clone(),
                what: "batch slot memory",
                source,
            })?;
        let t = Instant::now();
        if let Err(e) = fill(shared, &fields, &ctx, epoch, ids, &mut records, &mut slot) {
            shared.slots.give_back(slot);
            return Err(e);
        }
        c.decode_ns.fetch_add(nanos(t), Ordering::Relaxed);

        if let Some(stage) = shared.slots.stage() {
            let n = ids.len();
            let mut views: Vec<SlotOutput<'_>> = slot
                .buffers
                .iter_mut()
                .zip(outputs.iter())
                .map(|(buf, o)| SlotOutput {
                    name: &o.name,
                    bytes: &mut buf.as_bytes_mut()[..n * o.row_bytes],
                    samples: n,
                })
                .collect();
            match stage.process(slot.index, &mut views) {
                Ok(attachment) => {
                    drop(views);
                    slot.attachment = attachment;
                }
                Err(message) => {
                    drop(views);
                    shared.slots.give_back(slot);
                    return Err(Error::SlotStage {
                        path: shared.path.clone(),
                        batch: b,
                        message,
                    });
                }
            }
        }
        c.batches.fetch_add(1, Ordering::Relaxed);
        c.samples.fetch_add(ids.len() as u64, Ordering::Relaxed);

        let batch = Batch::new(
            slot,
            Arc::clone(&shared.slots),
            Arc::clone(&outputs),
            epoch,
            b,
        );
        let t = Instant::now();
        if tx.send(Ok(batch)).is_err() {
            // The consumer dropped the iterator; the batch went back to the pool.
            return Ok(());
        }
        c.wait_slot_ns.fetch_add(nanos(t), Ordering::Relaxed);
    }
    Ok(())
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
                })
        })
        .collect()
}

/// Gathers every field's sample records for batch `ids`, runs each field's pipeline into
/// the slot, and fills the slot's lengths and sample ids.
fn fill(
    shared: &Shared,
    fields: &[FieldRunner],
    ctx: &EpochContext,
    epoch: u64,
    ids: &[u64],
    records: &mut [Vec<u8>],
    slot: &mut Slot,
) -> Result<()> {
    let n = ids.len();
    // Split every field's record buffer into chunks, then group the chunks by sample range
    // so that one task gathers all fields of its samples.
    let mut tasks: Vec<Vec<&mut [u8]>> = Vec::new();
    for rec in records.iter_mut() {
        for (ci, chunk) in rec[..n * RECORD_BYTES]
            .chunks_mut(GATHER_CHUNK * RECORD_BYTES)
            .enumerate()
        {
            if tasks.len() <= ci {
                tasks.push(Vec::new());
            }
            tasks[ci].push(chunk);
        }
    }
    shared.pool.install(|| {
        tasks
            .into_par_iter()
            .enumerate()
            .try_for_each(|(ci, mut chunks)| {
                let start = ci * GATHER_CHUNK;
                for (f, chunk) in fields.iter().zip(chunks.iter_mut()) {
                    for (k, rec) in chunk.chunks_exact_mut(RECORD_BYTES).enumerate() {
                        gather_one(shared, f, ctx, ids[start + k], rec)?;
                    }
                }
                Ok::<(), Error>(())
            })
    })?;

    let mut payload = 0u64;
    for (i, f) in fields.iter().enumerate() {
        if matches!(
            f.field_type,
            beton_io::FieldType::Int | beton_io::FieldType::Float
        ) {
            payload += 8 * n as u64;
        }
        let lengths = &mut slot.lengths[i];
        lengths.clear();
        let want = f.output.kind.has_lengths();
        for r in records[i][..n * RECORD_BYTES].chunks_exact(RECORD_BYTES) {
            let len = record_len(r);
            payload += len;
            if want {
                lengths.push(len);
            }
        }
    }
    // The fields' pipelines run side by side in one parallel region (each splits its
    // batch into chunks too), so a batch costs two fork-joins however many fields it has.
    let runs: Vec<Result<()>> = shared.pool.install(|| {
        fields
            .par_iter()
            .zip(slot.buffers.par_iter_mut())
            .zip(records.par_iter())
            .map(|((f, buf), rec)| {
                let out = &mut buf.as_bytes_mut()[..n * f.output.row_bytes];
                f.executor
                    .run(pipeline_jit::Batch {
                        sample_ids: ids,
                        input: &rec[..n * RECORD_BYTES],
                        output: out,
                        seed: shared.seed,
                        epoch,
                    })
                    .map_err(|e| field_error(shared, f, e))
            })
            .collect()
    });
    runs.into_iter().collect::<Result<()>>()?;
    shared
        .counters
        .payload_bytes
        .fetch_add(payload, Ordering::Relaxed);
    slot.sample_ids.clear();
    slot.sample_ids.extend_from_slice(ids);
    Ok(())
}

/// The loader's error for a pipeline failure of field `f`: a decode error naming the
/// sample (with the decoder's message) when the decoder failed, a pipeline error otherwise.
fn field_error(shared: &Shared, f: &FieldRunner, e: pipeline_jit::Error) -> Error {
    let failure = f.context.take_failure();
    match (e, failure) {
        (
            pipeline_jit::Error::Kernel {
                index: 0, sample, ..
            },
            Some((_, message)),
        ) => Error::Decode {
            path: shared.path.clone(),
            field: f.output.name.clone(),
            sample,
            decoder: f.spec.decoder.name(),
            message,
        },
        (source, _) => Error::Pipeline {
            path: shared.path.clone(),
            field: f.output.name.clone(),
            source,
        },
    }
}

/// Writes the record of one sample of one field.
fn gather_one(
    shared: &Shared,
    f: &FieldRunner,
    ctx: &EpochContext,
    sample: u64,
    record: &mut [u8],
) -> Result<()> {
    let reader = &*shared.reader;
    let meta_bytes = reader.metadata_bytes(sample, f.field)?;
    let meta = reader.metadata(sample, f.field)?;
    let data: &[u8] = match stored_extent(reader, &f.field_type, &meta) {
        None => &[],
        Some((ptr, len)) => {
            let bytes = match ctx {
                // The OS cache serves slices of the map: cut the stored extent directly
                // rather than look the allocation up (a binary search per sample, a
                // quarter of the time for small samples). Bounds are still checked.
                EpochContext::Os(_) => usize::try_from(ptr)
                    .ok()
                    .zip(usize::try_from(len).ok())
                    .and_then(|(p, l)| reader.bytes().get(p..p.checked_add(l)?)),
                _ => {
                    let alloc = ctx.read(ptr)?;
                    usize::try_from(len).ok().and_then(|l| alloc.get(..l))
                }
            };
            match bytes {
                Some(d) => d,
                None => {
                    return Err(Error::Decode {
                        path: shared.path.clone(),
                        field: f.output.name.clone(),
                        sample,
                        decoder: f.spec.decoder.name(),
                        message: format!(
                            "the field stores {len} bytes at {ptr}, past its allocation"
                        ),
                    });
                }
            }
        }
    };
    debug_assert!(!matches!(meta, FieldMetadata::Custom) || data.is_empty());
    write_record(record, data, meta_bytes);
    Ok(())
}
