//! One epoch: the iterator the consumer holds and the producer thread's loop (order →
//! batches → page schedule → per-batch fill (`batch_fill.rs`) → slot stage → queue).

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::batch::{Batch, OutputInfo};
use crate::batch_fill::BatchFill;
use crate::batch_slots::SlotOutput;
use crate::error::{Error, Result};
use crate::run_state::{Shared, lock, slot_sizes};

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
    /// The borrow of the loader that started the epoch ([`crate::Loader::iter`] ties `'a`
    /// to it), so that a second epoch cannot start while this one runs; the iterator
    /// itself only needs the run state.
    _loader: PhantomData<&'a mut ()>,
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

/// [`EpochIter::next_timeout`] found no batch within its timeout; the epoch goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimedOut;

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
            return crate::resume::state_at(&self.shared.resume_facts(), self.epoch + 1, &[], None);
        }
        crate::resume::state_at(
            &self.shared.resume_facts(),
            self.epoch,
            &self.earlier,
            Some(consumed as u64),
        )
    }

    /// [`Iterator::next`] that waits at most `timeout`: `Err(WaitTimedOut)` when no batch
    /// came in time (call again to keep waiting; nothing is lost). A front end waits in
    /// short slices this way so that it can look at its signals between them.
    pub fn next_timeout(
        &mut self,
        timeout: Duration,
    ) -> std::result::Result<Option<Result<Batch>>, WaitTimedOut> {
        if self.done {
            return Ok(None);
        }
        let Some(rx) = self.rx.as_ref() else {
            return Ok(None);
        };
        let t = Instant::now();
        let received =
            tracing::debug_span!("consumer_wait", epoch = self.epoch, batch = self.yielded)
                .in_scope(|| rx.recv_timeout(timeout));
        self.shared
            .counters
            .consumer_wait_ns
            .fetch_add(nanos(t), Ordering::Relaxed);
        match received {
            Ok(r) => Ok(self.received(Ok(r))),
            Err(RecvTimeoutError::Timeout) => Err(WaitTimedOut),
            Err(RecvTimeoutError::Disconnected) => Ok(self.received(Err(()))),
        }
    }

    /// Tells the producer to stop without waiting for it: it ends after the step it is in
    /// (a page read in flight included), and dropping the iterator then joins it at once.
    /// The iterator yields nothing more. [`EpochIter::is_finished`] says when it is over.
    pub fn request_stop(&mut self) {
        self.done = true;
        self.stop.store(true, Ordering::SeqCst);
        // Dropping the receiver wakes a producer blocked on a full queue.
        drop(self.rx.take());
    }

    /// Whether the epoch's producer thread has ended (so that dropping the iterator does
    /// not wait); its page readers are joined before it ends.
    pub fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// What the consumer does with a batch, an error or the end of the queue.
    fn received(
        &mut self,
        received: std::result::Result<Result<Batch>, ()>,
    ) -> Option<Result<Batch>> {
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
            Err(()) => {
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
        self.received(received.map_err(|_| ()))
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
    let mut batch_fill = BatchFill::new(&shared.reader, &fields, bs);
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
        let filled = tracing::debug_span!("fill", epoch, batch = b, samples = ids.len())
            .in_scope(|| batch_fill.fill(shared, &fields, &ctx, epoch, ids, &mut slot));
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
                Err(e) => {
                    drop(views);
                    shared.slots.give_back(slot);
                    let (message, cause) = crate::error::extension_parts(e);
                    return Err(Error::SlotStage {
                        path: shared.path.clone(),
                        batch: first + b,
                        message,
                        cause,
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
