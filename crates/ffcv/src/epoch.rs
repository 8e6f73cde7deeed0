//! One epoch: the producer thread (order → batches → page schedule → pipelines → queue)
//! and the iterator the consumer holds.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Instant;

use std::panic::{AssertUnwindSafe, catch_unwind};

use beton_io::ExtentRule;
use page_cache::EpochContext;
use rayon::prelude::*;

use crate::batch::{Batch, OutputInfo};
use crate::batch_slots::{OutputBuffer, Slot, SlotOutput};
use crate::decode::kernel::{RECORD_BYTES, RECORD_METADATA, write_record};
use crate::decode::{CopyRule, SampleInput};
use crate::error::{Error, Result};
use crate::loader::Loader;
use crate::run_state::{FieldRunner, Shared, lock};

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
    /// Batches handed to the consumer so far (the index of the next one).
    yielded: usize,
    /// Batches of the epoch's current stint consumed before this iterator started (a
    /// resumed epoch), and the stints before it.
    skipped: usize,
    earlier: Vec<crate::resume::StintRecord>,
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
    pub(crate) fn start(
        shared: Arc<Shared>,
        epoch: u64,
        start: crate::resume::EpochStart,
    ) -> EpochIter<'a> {
        let order = start.order.unwrap_or_else(|| shared.order.order(epoch));
        let b = shared.batch_size;
        let mut batches: Vec<Vec<u64>> = order.chunks(b).map(<[u64]>::to_vec).collect();
        if shared.drop_last && batches.last().is_some_and(|l| l.len() < b) {
            batches.pop();
        }
        // A resumed epoch skips the batches its state says were consumed; the others
        // keep their index in the epoch.
        let skipped = start.skip.min(batches.len());
        batches.drain(..skipped);
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
            yielded: 0,
            skipped,
            earlier: start.earlier,
            done: false,
            _loader: PhantomData,
        };
        shared.live_producers.fetch_add(1, Ordering::SeqCst);
        let guard = LiveGuard(Arc::clone(&shared.live_producers));
        let spawned = std::thread::Builder::new()
            .name(format!("ffcv-producer-{epoch}"))
            .spawn(move || {
                let _guard = guard;
                // The loop runs on one of the loader's own workers (this thread waits for
                // it), so each batch's parallel fill starts from inside the pool instead of
                // waking a worker and then this thread again: 5-10 % more raw samples/s on
                // 2 CPUs. It cannot starve the pool: a pool belongs to one loader, whose
                // epochs run one at a time, and what the loop blocks on (the consumer, page
                // readers, a GPU stage) never needs a pool worker.
                let pool = Arc::clone(&shared.pool);
                let run = catch_unwind(AssertUnwindSafe(|| {
                    pool.install(|| produce(&shared, epoch, skipped, &batches, &tx, &stop))
                }));
                // A panic (a bug, or a user's stage) ends the epoch with its message
                // instead of a bare disconnect.
                let result = run.unwrap_or_else(|panic| {
                    Err(Error::ProducerGone {
                        path: shared.path.clone(),
                        epoch,
                        cause: format!("panicked: {}", pipeline_jit::panic_message(&*panic)),
                    })
                });
                if let Err(e) = result {
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

    /// Batches this epoch yields when nothing fails (in a resumed epoch, those left).
    pub fn num_batches(&self) -> usize {
        self.num_batches
    }

    /// The loader's position after the batches this iterator has handed out (batches
    /// prepared ahead and not yet received do not count): give it to
    /// [`crate::LoaderBuilder::resume`] to continue from the next batch. After the
    /// epoch's last batch it is the start of the next epoch. O(world size): it copies
    /// the loader's fixed part of a state, which the first call of a loader computes
    /// (hashing the file's tables and the index list once).
    pub fn state(&self) -> crate::resume::LoaderState {
        let consumed = self.skipped + self.yielded;
        if consumed >= self.skipped + self.num_batches {
            return crate::resume::state_at(&self.shared, self.epoch + 1, &[], None);
        }
        crate::resume::state_at(
            &self.shared,
            self.epoch,
            &self.earlier,
            Some(consumed as u64),
        )
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
        let rx = self.rx.as_ref()?;
        let t = Instant::now();
        let received =
            tracing::debug_span!("consumer_wait", epoch = self.epoch, batch = self.yielded)
                .in_scope(|| rx.recv());
        self.shared
            .counters
            .consumer_wait_ns
            .fetch_add(nanos(t), Ordering::Relaxed);
        match received {
            Ok(Ok(batch)) => {
                self.yielded += 1;
                Some(Ok(batch))
            }
            Ok(Err(e)) => {
                self.done = true;
                self.stop_and_join();
                Some(Err(e))
            }
            Err(_) => {
                // The producer finished (or died without a word).
                self.done = true;
                let panicked = self.handle.take().and_then(|h| h.join().err());
                self.stop_and_join();
                panicked.map(|panic| {
                    Err(Error::ProducerGone {
                        path: self.shared.path.clone(),
                        epoch: self.epoch,
                        cause: format!("panicked: {}", pipeline_jit::panic_message(&*panic)),
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

/// The mapped file must still have the size it had when opened: a file truncated in
/// place would kill the process with SIGBUS at the first read past its new end, so each
/// epoch starts by comparing the two (`fstat` of the open file) and refuses to run.
fn check_file_size(shared: &Shared) -> Result<()> {
    let Some(now) = shared.reader.current_file_size() else {
        return Ok(());
    };
    let now = now.map_err(|source| Error::Setup {
        path: shared.path.clone(),
        what: "file size check",
        source,
    })?;
    let opened = shared.reader.file_size();
    if now != opened {
        return Err(Error::FileSizeChanged {
            path: shared.path.clone(),
            opened,
            now,
        });
    }
    Ok(())
}

fn nanos(t: Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

/// Runs `batches`, the epoch's batches from index `first` on.
fn produce(
    shared: &Arc<Shared>,
    epoch: u64,
    first: usize,
    batches: &[Vec<u64>],
    tx: &SyncSender<Result<Batch>>,
    stop: &AtomicBool,
) -> Result<()> {
    let span = tracing::debug_span!("epoch", epoch, batches = batches.len());
    let _e = span.enter();
    check_file_size(shared)?;
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
    let mut ctx = shared
        .cache
        .schedule_epoch(batches)
        .map_err(|e| crate::quasi_buffer::with_budget_fix(shared, e))?;
    let plans: Vec<FieldPlan> = fields
        .iter()
        .map(|f| FieldPlan::of(&shared.reader, f))
        .collect();
    // Records only for the fields that run through their executor.
    let mut records: Vec<Vec<u8>> = plans
        .iter()
        .map(|p| {
            if p.copy.is_some() {
                Vec::new()
            } else {
                vec![0u8; bs * RECORD_BYTES]
            }
        })
        .collect();
    let c = &shared.counters;

    for (b, ids) in batches.iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let t = Instant::now();
        ctx.start_batch(b)?;
        c.wait_pages_ns.fetch_add(nanos(t), Ordering::Relaxed);

        let mut slot = shared.slots.take(&sizes).map_err(|source| Error::Setup {
            path: shared.path.clone(),
            what: "batch slot memory",
            source,
        })?;
        let t = Instant::now();
        let filled =
            tracing::debug_span!("fill", epoch, batch = b, samples = ids.len()).in_scope(|| {
                fill(
                    shared,
                    &fields,
                    &plans,
                    &ctx,
                    epoch,
                    ids,
                    &mut records,
                    &mut slot,
                )
            });
        if let Err(e) = filled {
            // Rows may hold bytes the dirty marks do not know about.
            slot.outputs.iter_mut().for_each(|o| o.dirty.clear());
            shared.slots.give_back(slot);
            return Err(e);
        }
        c.decode_ns.fetch_add(nanos(t), Ordering::Relaxed);

        if let Some(stage) = shared.slots.stage() {
            // The stage may write the rows in place.
            slot.outputs.iter_mut().for_each(|o| o.dirty.clear());
            let n = ids.len();
            let mut views: Vec<SlotOutput<'_>> = slot
                .outputs
                .iter_mut()
                .zip(outputs.iter())
                .map(|(buf, o)| SlotOutput {
                    name: &o.name,
                    bytes: &mut buf.memory.as_bytes_mut()[..n * o.row_bytes],
                    samples: n,
                })
                .collect();
            let t = Instant::now();
            let processed = tracing::debug_span!("slot_stage", epoch, batch = b, slot = slot.index)
                .in_scope(|| stage.process(slot.index, &mut views));
            c.slot_stage_ns.fetch_add(nanos(t), Ordering::Relaxed);
            match processed {
                Ok(attachment) => {
                    drop(views);
                    slot.attachment = attachment;
                }
                Err(message) => {
                    drop(views);
                    shared.slots.give_back(slot);
                    return Err(Error::SlotStage {
                        path: shared.path.clone(),
                        batch: first + b,
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
            first + b,
        );
        let t = Instant::now();
        let sent = tracing::debug_span!("slot_wait", epoch, batch = b)
            .in_scope(|| tx.send(Ok(batch)).is_ok());
        if !sent {
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

/// How one field of a batch is filled; worked out once per epoch so that the per-sample
/// loop only reads numbers.
#[derive(Debug, Clone, Copy)]
struct FieldPlan {
    /// `Some` when the pipeline is a copying decoder alone: the rows are copied straight
    /// into the slot, without records or a kernel call per sample.
    copy: Option<CopyRule>,
    /// Where the stored bytes are (beton-io's rule for the field's type or handler).
    extent: ExtentRule,
    /// The field's metadata bytes inside a metadata row.
    meta_start: usize,
    meta_len: usize,
    row_bytes: usize,
    /// Int and Float count 8 payload bytes per sample (their value), others their data.
    scalar: bool,
    lengths: bool,
}

impl FieldPlan {
    fn of(reader: &beton_io::Reader, f: &FieldRunner) -> FieldPlan {
        let field = &reader.fields()[f.field];
        let extent = reader.extent_rule(f.field);
        let copy = if f.spec.transforms.is_empty() {
            f.spec.decoder.copy_rule()
        } else {
            None
        };
        FieldPlan {
            copy,
            extent,
            meta_start: field.metadata_offset as usize,
            meta_len: field.metadata_itemsize as usize,
            row_bytes: f.output.row_bytes,
            scalar: f.field_type.value_in_metadata(),
            lengths: f.output.kind.has_lengths(),
        }
    }
}

/// Samples per fill task: about 256 KiB of output rows (enough to amortise scheduling,
/// small enough to balance), at most [`GATHER_CHUNK`], and at least four tasks per
/// worker when the batch allows.
fn chunk_samples(plans: &[FieldPlan], n: usize, workers: usize) -> usize {
    let row: usize = plans
        .iter()
        .map(|p| {
            if p.copy.is_some() {
                p.row_bytes
            } else {
                RECORD_BYTES
            }
        })
        .sum();
    let by_bytes = (256 * 1024 / row.max(1)).clamp(1, GATHER_CHUNK);
    let by_tasks = n.div_ceil(4 * workers.max(1)).max(1);
    by_bytes.min(by_tasks)
}

/// One field's part of a fill task.
struct Dest<'a> {
    /// Output rows (copied fields) or records (fields run by their executor).
    rows: &'a mut [u8],
    lengths: Option<&'a mut [u64]>,
    /// The slot's dirty marks of these rows (padded copies only).
    dirty: Option<&'a mut [u64]>,
}

/// Fills the slot for batch `ids`: copied fields straight into their rows, other fields
/// as records then through their pipelines; and the slot's lengths and sample ids.
#[allow(clippy::too_many_arguments)]
fn fill(
    shared: &Shared,
    fields: &[FieldRunner],
    plans: &[FieldPlan],
    ctx: &EpochContext,
    epoch: u64,
    ids: &[u64],
    records: &mut [Vec<u8>],
    slot: &mut Slot,
) -> Result<()> {
    let n = ids.len();
    let chunk = chunk_samples(plans, n, shared.pool.current_num_threads());
    for (out, p) in slot.outputs.iter_mut().zip(plans) {
        out.lengths.clear();
        if p.lengths {
            out.lengths.resize(n, 0);
        }
        if p.copy == Some(CopyRule::Padded) && p.row_bytes > 0 {
            let rows = out.memory.as_bytes().len() / p.row_bytes;
            if out.dirty.len() != rows {
                out.dirty.clear();
                out.dirty.resize(rows, p.row_bytes as u64);
            }
        } else {
            out.dirty.clear();
        }
    }
    // Split every field's destination into chunks, then group the chunks by sample range
    // so that one task reads each sample's metadata row once for all fields.
    let mut tasks: Vec<Vec<Dest<'_>>> = Vec::with_capacity(n.div_ceil(chunk));
    for ((p, out), rec) in plans
        .iter()
        .zip(slot.outputs.iter_mut())
        .zip(records.iter_mut())
    {
        let OutputBuffer {
            memory,
            lengths,
            dirty,
        } = out;
        let (rows, width) = if p.copy.is_some() {
            (&mut memory.as_bytes_mut()[..n * p.row_bytes], p.row_bytes)
        } else {
            (&mut rec[..n * RECORD_BYTES], RECORD_BYTES)
        };
        let mut lens = lengths.chunks_mut(chunk);
        let dirty_rows = dirty.len().min(n);
        let mut dirt = dirty[..dirty_rows].chunks_mut(chunk);
        for (ci, rows) in rows.chunks_mut(chunk * width).enumerate() {
            if tasks.len() <= ci {
                tasks.push(Vec::with_capacity(plans.len()));
            }
            tasks[ci].push(Dest {
                rows,
                lengths: lens.next(),
                dirty: dirt.next(),
            });
        }
    }
    let payload: u64 = shared.pool.install(|| {
        tasks
            .into_par_iter()
            .enumerate()
            .map(|(ci, mut dests)| {
                let start = ci * chunk;
                let end = (start + chunk).min(n);
                fill_chunk(
                    shared,
                    fields,
                    plans,
                    ctx,
                    epoch,
                    &ids[start..end],
                    &mut dests,
                )
            })
            .try_reduce(|| 0, |a, b| Ok(a + b))
    })?;

    // The executor fields run side by side in one parallel region (each splits its batch
    // into chunks too), so a batch costs at most two fork-joins however many fields it has.
    let run: Vec<usize> = (0..fields.len())
        .filter(|&i| plans[i].copy.is_none())
        .collect();
    if !run.is_empty() {
        let mut bufs: Vec<Option<&mut [u8]>> = slot
            .outputs
            .iter_mut()
            .zip(plans)
            .map(|(b, p)| {
                p.copy
                    .is_none()
                    .then(|| &mut b.memory.as_bytes_mut()[..n * p.row_bytes])
            })
            .collect();
        let jobs: Vec<(usize, &mut [u8])> = bufs
            .iter_mut()
            .enumerate()
            .filter_map(|(i, b)| b.take().map(|b| (i, b)))
            .collect();
        let runs: Vec<Result<()>> = shared.pool.install(|| {
            jobs.into_par_iter()
                .map(|(i, out)| {
                    let f = &fields[i];
                    f.executor
                        .run(pipeline_jit::BatchBuffers {
                            sample_ids: ids,
                            input: &records[i][..n * RECORD_BYTES],
                            output: out,
                            seed: shared.seed,
                            epoch,
                        })
                        .map_err(|e| field_error(shared, f, e))
                })
                .collect()
        });
        runs.into_iter().collect::<Result<()>>()?;
    }
    shared
        .counters
        .payload_bytes
        .fetch_add(payload, Ordering::Relaxed);
    slot.sample_ids.clear();
    slot.sample_ids.extend_from_slice(ids);
    Ok(())
}

/// One sample's field, resolved: its stored bytes and its metadata (zero-padded to the
/// 16 bytes a decoder sees).
struct Resolved<'c> {
    data: &'c [u8],
    metadata: [u8; RECORD_METADATA],
}

/// Fills samples `ids` (one chunk of the batch) of every field into `dests`; returns the
/// payload bytes. Two passes: the first reads every metadata row and asks for every
/// sample's first data lines, so that the misses of the chunk overlap; the second copies.
fn fill_chunk(
    shared: &Shared,
    fields: &[FieldRunner],
    plans: &[FieldPlan],
    ctx: &EpochContext,
    epoch: u64,
    ids: &[u64],
    dests: &mut [Dest<'_>],
) -> Result<u64> {
    let nf = fields.len();
    let mut resolved: Vec<Resolved<'_>> = Vec::with_capacity(ids.len() * nf);
    let mut payload = 0u64;
    for (k, &sample) in ids.iter().enumerate() {
        let row = shared.reader.metadata_row(sample)?;
        for (i, (f, p)) in fields.iter().zip(plans).enumerate() {
            let r = resolve(shared, f, p, ctx, sample, row)?;
            let len = r.data.len() as u64;
            payload += if p.scalar { 8 } else { len };
            let d = &mut dests[i];
            if let Some(l) = d.lengths.as_deref_mut() {
                l[k] = len;
            }
            if p.copy.is_some() {
                crate::memory::prefetch(r.data);
                resolved.push(r);
            } else {
                write_record(
                    &mut d.rows[k * RECORD_BYTES..(k + 1) * RECORD_BYTES],
                    r.data,
                    &r.metadata,
                );
            }
        }
    }
    let mut next = resolved.iter();
    for (k, &sample) in ids.iter().enumerate() {
        for (i, p) in plans.iter().enumerate() {
            let Some(rule) = p.copy else { continue };
            let r = next
                .next()
                .expect("one resolved entry per copied field and sample");
            let d = &mut dests[i];
            let out = &mut d.rows[k * p.row_bytes..(k + 1) * p.row_bytes];
            let mark = d.dirty.as_deref_mut().map(|m| &mut m[k]);
            let covered = match rule {
                CopyRule::Metadata => match r.metadata.get(..out.len()) {
                    Some(m) => {
                        out.copy_from_slice(m);
                        true
                    }
                    None => false,
                },
                CopyRule::Exact if r.data.len() == out.len() => {
                    out.copy_from_slice(r.data);
                    true
                }
                CopyRule::Padded if r.data.len() <= out.len() => {
                    let len = r.data.len();
                    // Only the bytes an earlier batch may have left past `len` need zeros.
                    let was = mark
                        .as_deref()
                        .map_or(out.len(), |&m| (m as usize).min(out.len()));
                    out[..len].copy_from_slice(r.data);
                    if was > len {
                        out[len..was].fill(0);
                    }
                    if let Some(m) = mark {
                        *m = len as u64;
                    }
                    true
                }
                _ => false,
            };
            if !covered {
                let d = &mut dests[i];
                let out = &mut d.rows[k * p.row_bytes..(k + 1) * p.row_bytes];
                decode_one(shared, &fields[i], epoch, sample, r, out)?;
                if let Some(m) = d.dirty.as_deref_mut() {
                    m[k] = p.row_bytes as u64;
                }
            }
        }
    }
    Ok(payload)
}

/// A sample the copy rule does not cover goes through the decoder itself, so that its
/// result (usually an error naming what is wrong) is the decoder's.
fn decode_one(
    shared: &Shared,
    f: &FieldRunner,
    epoch: u64,
    sample: u64,
    r: &Resolved<'_>,
    out: &mut [u8],
) -> Result<()> {
    let input = SampleInput {
        sample,
        data: r.data,
        metadata: &r.metadata,
        // The decoder is operation 0 of its pipeline, as in the kernel path.
        seed: pipeline_jit::rng::sample_seed(shared.seed, epoch, sample, 0),
        max_image_pixels: f.context.max_image_pixels,
    };
    let decoder = &f.spec.decoder;
    let result = catch_unwind(AssertUnwindSafe(|| decoder.decode(&input, out, &mut [])))
        .unwrap_or_else(|_| Err("decoder panicked".into()));
    result.map_err(|message| Error::Decode {
        path: shared.path.clone(),
        field: f.output.name.clone(),
        sample,
        decoder: decoder.name(),
        message,
    })
}

/// Reads one field of one sample: its stored bytes (from the epoch's cache, without an
/// allocation lookup) and its metadata.
fn resolve<'c>(
    shared: &Shared,
    f: &FieldRunner,
    p: &FieldPlan,
    ctx: &'c EpochContext,
    sample: u64,
    row: &[u8],
) -> Result<Resolved<'c>> {
    let meta = row
        .get(p.meta_start..p.meta_start + p.meta_len)
        .unwrap_or(&[]);
    let mut metadata = [0u8; RECORD_METADATA];
    let m = meta.len().min(RECORD_METADATA);
    metadata[..m].copy_from_slice(&meta[..m]);
    // The two fixed layouts are applied inline (no call into the reader per sample);
    // beton-io computes the others.
    let extent = match p.extent {
        ExtentRule::None => None,
        ExtentRule::Fixed { .. } | ExtentRule::Sized => p.extent.fixed_extent(meta),
        ExtentRule::Computed => shared
            .reader
            .stored_extent(f.field, meta)
            .map_err(|reason| Error::Decode {
                path: shared.path.clone(),
                field: f.output.name.clone(),
                sample,
                decoder: f.spec.decoder.name(),
                message: format!("invalid metadata: {reason}"),
            })?,
    };
    let data = match extent {
        None => &[][..],
        Some((ptr, len)) => ctx.read_extent(ptr, len).map_err(|e| Error::Decode {
            path: shared.path.clone(),
            field: f.output.name.clone(),
            sample,
            decoder: f.spec.decoder.name(),
            message: format!("the field stores {len} bytes at {ptr}: {e}"),
        })?,
    };
    Ok(Resolved { data, metadata })
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
