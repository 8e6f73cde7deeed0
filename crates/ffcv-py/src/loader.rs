//! `_native.Loader`: the facade's [`ffcv::Loader`] behind a lock, with at most one running
//! epoch. `ffcv_rs/loader.py` wraps it in FFCV's `Loader` signature.
//!
//! Waiting for a batch happens with the GIL released, in slices of [`WAIT_SLICE`]: between
//! two slices the GIL is taken back to run Python's signal handlers, so a
//! `KeyboardInterrupt` (or any handler's exception) is raised within a slice even when the
//! producer is stalled (a remote read that gets no answer). The epoch is stopped first: its
//! producer is told to stop and joined if it ends within [`STOP_GRACE`]; one that is still
//! inside a read is kept aside and joined before the next epoch starts, so the loader
//! stays usable and two epochs never share its state.
//!
//! Used in a process forked from the one that built it, every method raises an
//! `FFCVError` naming the fix ([`crate::fork`]); the threads it would wait on are the
//! parent's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ffcv::format::{FieldType, ReaderOptions};
use ffcv::{DecoderChoice, EpochIter, Loader, Order};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::batch::{OutputView, hand_over, views};
use crate::errors;
use crate::fork::{ForkSafe, Origin};
use crate::mixture::MixtureArgs;
use crate::spec::{self, Op};

/// How long one wait for a batch lasts before signals are looked at: the bound on how late
/// a Ctrl-C is raised while no batch comes.
const WAIT_SLICE: Duration = Duration::from_millis(10);

/// How long an interrupted epoch's producer is given to end before the interrupt is
/// raised anyway (then it is joined before the next epoch starts).
const STOP_GRACE: Duration = Duration::from_millis(20);

/// One output as `outputs()` describes it: name, row shape, typestr, kind.
type OutputRow = (String, Vec<usize>, String, String);

/// The running epoch: its id (so a stale Python iterator cannot stop a newer epoch) and
/// the facade iterator.
struct Running {
    id: u64,
    iter: EpochIter<'static>,
}

/// A Python `TraversalOrder`'s orders, pushed by `ffcv_rs/loader.py` before each epoch
/// starts (`push_order`). The facade asks for an epoch's order from its own threads;
/// calling back into Python there could wait for the GIL while the thread holding it waits
/// for the loader's lock, so Python computes the order first and hands it over.
#[derive(Default)]
struct PushedOrder {
    orders: Mutex<HashMap<u64, Arc<Vec<u64>>>>,
}

impl ffcv::traversal::TraversalOrder for PushedOrder {
    fn order(&self, epoch: u64) -> Vec<u64> {
        let orders = lock(&self.orders);
        // Python pushes every epoch it starts (and epoch 0 at construction, for the
        // length); an epoch it did not push runs empty rather than another epoch's order.
        orders.get(&epoch).map(|o| o.to_vec()).unwrap_or_default()
    }
}

/// The native loader. Build it through `ffcv_rs.loader.Loader`.
#[pyclass(frozen, module = "ffcv_rs._native", name = "Loader")]
pub struct NativeLoader {
    loader: ForkSafe<Mutex<Loader>>,
    running: ForkSafe<Mutex<Option<Running>>>,
    /// Epochs stopped by a signal whose producer was still inside a step (a page read in
    /// flight): joined before the next epoch starts.
    retired: ForkSafe<Mutex<Vec<EpochIter<'static>>>>,
    /// The process that built the loader (its threads are this process's).
    origin: Origin,
    /// Ids handed out by `start_epoch`.
    epochs_started: Mutex<u64>,
    /// The orders of a Python `TraversalOrder` (order `"CUSTOM"`), else `None`.
    pushed: Option<Arc<PushedOrder>>,
}

/// Reader options with FFCV's `custom_fields`: `{name: (metadata itemsize, alignment)}`
/// of each field a Python `Field` class decodes. The native loader only needs their
/// metadata layout to open the file; their pipelines run in Python.
pub fn reader_options(custom_fields: Option<HashMap<String, (u64, u64)>>) -> ReaderOptions {
    let mut options = ReaderOptions::new();
    for (name, (itemsize, alignment)) in custom_fields.unwrap_or_default() {
        options = options.custom_field(name, itemsize, alignment);
    }
    options
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; carry on with it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[pymethods]
impl NativeLoader {
    /// Opens `paths` (one file or URL, or several shards read as one; glob patterns and
    /// `s3://` prefixes expand) and builds the loader; `pipelines` maps field names to `None`
    /// (disabled) or `[(decoder, params), (transform, params), ...]`. `cuda_device`: stage
    /// every output on that CUDA device through gpu-stage (an error without CUDA).
    ///
    /// Every argument is keyword-only: with this many, a positional call would let one
    /// inserted or misplaced argument silently shift the meaning of all that follow.
    #[new]
    #[pyo3(signature = (
        *, paths, batch_size, num_workers, os_cache, order, distributed, rank, world_size, seed,
        indices, pipelines, drop_last, batches_ahead, recompile, compile, max_memory,
        prefetch_ahead, reader_threads, direct_io, retain_pages, hold_all_pages, max_image_pixels, resume=None,
        cuda_device=None, page_cache_dir=None, page_cache_size=None, custom_order=None,
        custom_fields=None, mixture=None, views=None
    ))]
    // PyO3 maps Python keywords to parameters one for one: these are the keywords of
    // `ffcv_rs.loader.Loader` (FFCV's `Loader` and ours), all keyword-only (above).
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        paths: Vec<String>,
        batch_size: usize,
        num_workers: i64,
        os_cache: bool,
        order: &str,
        distributed: bool,
        rank: usize,
        world_size: usize,
        seed: Option<u64>,
        indices: Option<Vec<u64>>,
        pipelines: HashMap<String, Option<Vec<Op<'_>>>>,
        drop_last: bool,
        batches_ahead: usize,
        recompile: bool,
        compile: bool,
        max_memory: Option<u64>,
        prefetch_ahead: Option<usize>,
        reader_threads: Option<usize>,
        direct_io: bool,
        retain_pages: bool,
        hold_all_pages: bool,
        max_image_pixels: Option<u64>,
        resume: Option<String>,
        cuda_device: Option<usize>,
        page_cache_dir: Option<String>,
        page_cache_size: Option<u64>,
        custom_order: Option<Vec<u64>>,
        custom_fields: Option<HashMap<String, (u64, u64)>>,
        mixture: Option<MixtureArgs>,
        views: Option<Vec<(String, String)>>,
    ) -> PyResult<NativeLoader> {
        let mut pushed = None;
        let order = match order {
            "SEQUENTIAL" => Order::Sequential,
            "RANDOM" => Order::Random,
            "QUASI_RANDOM" => Order::QuasiRandom,
            "CUSTOM" => {
                let p = Arc::new(PushedOrder::default());
                // Epoch 0's order is needed for the length before any epoch starts.
                lock(&p.orders).insert(0, Arc::new(custom_order.unwrap_or_default()));
                pushed = Some(Arc::clone(&p));
                Order::Custom(p)
            }
            other => {
                return Err(errors::config(
                    py,
                    format!("order {other:?} is not SEQUENTIAL, RANDOM or QUASI_RANDOM"),
                ));
            }
        };
        // Opened here (once: the builder takes it) to see the fields' types.
        let options = reader_options(custom_fields);
        // A mixture (`weights=`): its sources opened as one dataset, run by its own order.
        let mixture = match mixture {
            Some(m) => {
                let spec = m.spec(
                    &order,
                    seed,
                    resume.as_deref(),
                    (distributed, rank, world_size),
                );
                let opened = spec.and_then(|spec| py.detach(|| spec.open()));
                Some(opened.map_err(|e| errors::from_ffcv(py, e))?)
            }
            None => None,
        };
        let dataset = match &mixture {
            Some(m) => m.dataset().clone(),
            None => py
                .detach(|| {
                    ffcv::Dataset::open_shards_with(
                        &paths,
                        &options,
                        &ffcv::RemoteConfig::default(),
                    )
                })
                .map_err(|e| errors::from_ffcv(py, e))?,
        };
        let reader = std::sync::Arc::clone(&dataset.reader);
        let mut b = Loader::builder(reader.path())
            .dataset(dataset)
            .batch_size(batch_size)
            .num_workers(num_workers)
            .os_cache(os_cache)
            .order(order)
            .distributed(distributed)
            .rank(rank)
            .world_size(world_size)
            .drop_last(drop_last)
            .batches_ahead(batches_ahead)
            .recompile(recompile)
            .compile(compile)
            .direct_io(direct_io)
            .retain_pages(retain_pages)
            .hold_all_pages(hold_all_pages);
        if let Some(s) = seed {
            b = b.seed(s);
        }
        if let Some(m) = &mixture {
            b = crate::mixture::apply(m, b);
        }
        if let Some(i) = indices {
            b = b.indices(i);
        }
        if let Some(pixels) = max_image_pixels {
            b = b.max_image_pixels(pixels);
        }
        if let Some(text) = resume {
            let state =
                ffcv::LoaderState::from_json(&text).map_err(|e| errors::from_ffcv(py, e))?;
            b = b.resume(state);
        }
        if let Some(m) = max_memory {
            b = b.max_memory(m);
        }
        if let Some(p) = prefetch_ahead {
            b = b.prefetch_ahead(p);
        }
        if let Some(t) = reader_threads {
            b = b.reader_threads(t);
        }
        if let Some(dir) = page_cache_dir {
            b = b.page_cache_dir(dir);
        }
        if let Some(bytes) = page_cache_size {
            b = b.page_cache_size(bytes);
        }
        if let Some(n) = cuda_device {
            // gpu-stage copies every output to the device; batches carry a `GpuBatch`.
            b = b.to_device(ffcv::gpu::ToDevice::new(ffcv::gpu::DeviceSpec::Cuda(n)));
        }
        // Views (`custom_field_mapper`): `(name, source)` in the mapper's order, each with
        // the pipeline of its name (none: the source type's default decoder).
        let mut pipelines = pipelines;
        for (name, source) in views.unwrap_or_default() {
            b = match pipelines.remove(&name) {
                Some(None) => b.view(name, source, DecoderChoice::Disabled),
                Some(Some(ops)) => {
                    let json = reader
                        .field_index(&source)
                        .is_some_and(|i| reader.fields()[i].field_type == FieldType::Json);
                    let p = spec::pipeline(&name, &ops, json)?;
                    b.view(name, source, p)
                }
                None => b.view(name, source, DecoderChoice::Default),
            };
        }
        // Sorted, so that errors about several fields always name the same one first.
        let mut fields: Vec<_> = pipelines.into_iter().collect();
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        for (field, ops) in fields {
            b = match ops {
                None => b.decoder(field, DecoderChoice::Disabled),
                Some(ops) => {
                    let json = reader
                        .field_index(&field)
                        .is_some_and(|i| reader.fields()[i].field_type == FieldType::Json);
                    let p = spec::pipeline(&field, &ops, json)?;
                    b.pipeline(field, p)
                }
            };
        }
        // Building opens the file, plans and compiles: no Python object is touched.
        let loader = py
            .detach(|| b.build())
            .map_err(|e| errors::from_ffcv(py, e))?;
        Ok(NativeLoader {
            loader: ForkSafe::new(Mutex::new(loader)),
            running: ForkSafe::new(Mutex::new(None)),
            retired: ForkSafe::new(Mutex::new(Vec::new())),
            origin: Origin::here(),
            epochs_started: Mutex::new(0),
            pushed,
        })
    }

    /// Hands over a Python `TraversalOrder`'s order for `epoch` (order `"CUSTOM"` only).
    fn push_order(&self, py: Python<'_>, epoch: u64, ids: Vec<u64>) -> PyResult<()> {
        self.here(py)?;
        let Some(p) = &self.pushed else {
            return Err(errors::config(
                py,
                "push_order: this loader's order is not a custom TraversalOrder",
            ));
        };
        let mut orders = lock(&p.orders);
        // Keep epoch 0 (the length) and the few most recent: an epoch's order is read
        // when it starts, and a long run must not keep every epoch's.
        orders.retain(|&e, _| e == 0 || e + 4 > epoch);
        orders.insert(epoch, Arc::new(ids));
        Ok(())
    }

    /// Batches per epoch.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.here(py)?;
        Ok(lock(&self.loader).len())
    }

    /// The seed in use (given, or drawn when the loader was built).
    #[getter]
    fn seed(&self, py: Python<'_>) -> PyResult<u64> {
        self.here(py)?;
        Ok(lock(&self.loader).seed())
    }

    /// Samples per batch.
    #[getter]
    fn batch_size(&self, py: Python<'_>) -> PyResult<usize> {
        self.here(py)?;
        Ok(lock(&self.loader).batch_size())
    }

    /// Worker threads.
    #[getter]
    fn num_workers(&self, py: Python<'_>) -> PyResult<usize> {
        self.here(py)?;
        Ok(lock(&self.loader).num_workers())
    }

    /// The epoch the next `start_epoch` runs.
    #[getter]
    fn get_next_epoch(&self, py: Python<'_>) -> PyResult<u64> {
        self.here(py)?;
        Ok(lock(&self.loader).next_epoch())
    }

    /// Sets the epoch the next `start_epoch` runs.
    #[setter]
    fn set_next_epoch(&self, py: Python<'_>, epoch: u64) -> PyResult<()> {
        self.here(py)?;
        lock(&self.loader).set_next_epoch(epoch);
        Ok(())
    }

    /// `[(name, row shape, typestr, kind)]` of each output, in the order batches hold them.
    fn outputs(&self, py: Python<'_>) -> PyResult<Vec<OutputRow>> {
        self.here(py)?;
        Ok(lock(&self.loader)
            .outputs()
            .iter()
            .map(|o| {
                (
                    o.name.clone(),
                    o.shape.clone(),
                    o.dtype.descr(),
                    format!("{:?}", o.kind).to_lowercase(),
                )
            })
            .collect())
    }

    /// The sample order of `epoch`, as the loader visits it (this rank's share).
    fn order(&self, py: Python<'_>, epoch: u64) -> PyResult<Vec<u64>> {
        self.here(py)?;
        // The lock is taken and released without the GIL (see `stats`).
        Ok(py.detach(|| lock(&self.loader).order(epoch)))
    }

    /// Stops any running epoch (joining its threads), then starts the next one; returns it
    /// as an `Epoch`, whose `id` `next_batch` and `stop_epoch` take, and whose freeing
    /// stops the epoch.
    fn start_epoch(slf: &Bound<'_, Self>) -> PyResult<EpochHandle> {
        let py = slf.py();
        let this = slf.get();
        this.here(py)?;
        let id = this.start_next(py);
        Ok(EpochHandle {
            loader: slf.clone().unbind(),
            id,
        })
    }

    /// The next batch of epoch `id` as one view per output, or `None` when the epoch is
    /// over (or was stopped). Waits with the GIL released.
    fn next_batch(&self, py: Python<'_>, id: u64) -> PyResult<Option<Vec<OutputView>>> {
        Ok(self.next_raw(py, id)?.map(views))
    }

    /// As `next_batch`, with the batch's sample ids (for operations that take `indices`).
    fn next_batch_with_ids(
        &self,
        py: Python<'_>,
        id: u64,
    ) -> PyResult<Option<(Vec<OutputView>, Vec<u64>)>> {
        self.next_batch_ids(py, id)
    }

    /// The next batch of epoch `id` handed over in one call: a tuple of `convert(x)` for
    /// each `(index, how, convert)` of `plan`, `x` being a DLPack capsule (`how` 0) or the
    /// view (`how` 1) of output `index` (`batch::hand_over`); `None` when the epoch is over.
    /// Host batches only. Waits as `next_batch` does.
    fn next_outputs<'py>(
        &self,
        py: Python<'py>,
        id: u64,
        plan: &Bound<'py, PyTuple>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        match self.next_raw(py, id)? {
            Some(batch) => hand_over(py, batch, plan).map(Some),
            None => Ok(None),
        }
    }

    /// Stops epoch `id` if it is still the running one: its producer and page readers are
    /// joined before this returns. Held batches stay valid.
    fn stop_epoch(&self, py: Python<'_>, id: u64) {
        // In a forked child there is nothing of this process's to stop (and `__del__`
        // calls this: it must not raise).
        if self.origin.is_here() {
            self.stop(py, id);
        }
    }

    /// The loader's position as `LoaderState` JSON: after the batches handed out by the
    /// running epoch, or the start of the next epoch when none runs.
    fn state_json(&self, py: Python<'_>) -> PyResult<String> {
        self.here(py)?;
        // Both locks are taken and released without the GIL (see `stats`); `running`
        // first, as `start_next`, the other place that holds both.
        Ok(py.detach(|| {
            let running = lock(&self.running);
            match running.as_ref() {
                Some(r) => r.iter.state().to_json(),
                None => lock(&self.loader).state().to_json(),
            }
        }))
    }

    /// Whether epoch `id` is the running one.
    fn is_running(&self, py: Python<'_>, id: u64) -> PyResult<bool> {
        self.here(py)?;
        Ok(py.detach(|| lock(&self.running).as_ref().is_some_and(|r| r.id == id)))
    }

    /// Threads the loader runs besides its worker pool (producers, page readers), those of
    /// an epoch stopped by a signal and not joined yet included.
    fn live_threads(&self, py: Python<'_>) -> PyResult<usize> {
        self.here(py)?;
        Ok(py.detach(|| lock(&self.loader).live_threads()))
    }

    /// Counters summed over every epoch so far (durations in seconds).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.here(py)?;
        // Taken and released inside the detached closure: holding the lock while the GIL
        // is taken back could deadlock against a thread that holds the GIL and wants it.
        let s = py.detach(|| lock(&self.loader).stats());
        let d = PyDict::new(py);
        d.set_item("epochs", s.epochs)?;
        d.set_item("batches", s.batches)?;
        d.set_item("samples", s.samples)?;
        d.set_item("payload_bytes", s.payload_bytes)?;
        d.set_item("wait_pages", s.wait_pages.as_secs_f64())?;
        d.set_item("decode", s.decode.as_secs_f64())?;
        d.set_item("wait_slot", s.wait_slot.as_secs_f64())?;
        d.set_item("slot_stage", s.slot_stage.as_secs_f64())?;
        d.set_item("consumer_wait", s.consumer_wait.as_secs_f64())?;
        d.set_item("h2d_bytes", s.h2d_bytes)?;
        d.set_item("storage_bytes_read", s.storage_bytes_read)?;
        d.set_item("slots", s.slots)?;
        d.set_item("slot_allocations", s.slot_allocations)?;
        Ok(d)
    }

    /// The sample ids the loader draws from (before ordering and distribution).
    fn indices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.here(py)?;
        PyList::new(py, lock(&self.loader).indices())
    }

    /// Replaces the sample ids from the next epoch on (`Loader::set_indices`; `None`:
    /// every sample). A `ConfigError` while an epoch runs (started and neither finished
    /// nor stopped), for an id out of range, or with a custom order.
    fn set_indices(&self, py: Python<'_>, indices: Option<Vec<u64>>) -> PyResult<()> {
        self.here(py)?;
        // Without the GIL, `running` first, as `state_json` takes the locks.
        let result = py.detach(|| {
            let running = lock(&self.running);
            if running.is_some() {
                return Err(None);
            }
            // An epoch stopped by a signal still shares the run state until joined.
            let retired = std::mem::take(&mut *lock(&self.retired));
            drop(retired);
            let mut loader = lock(&self.loader);
            let ids = indices.unwrap_or_else(|| (0..loader.reader().num_samples()).collect());
            loader.set_indices(ids).map_err(Some)
        });
        result.map_err(|e| match e {
            Some(e) => errors::from_ffcv(py, e),
            None => errors::config(
                py,
                "set_indices: an epoch is running; finish it or stop it (leave its loop) \
                 before changing the set",
            ),
        })
    }
}

impl NativeLoader {
    /// `start_epoch`'s work: stops the running epoch, starts the next; returns its id.
    fn start_next(&self, py: Python<'_>) -> u64 {
        // All of it without the GIL: `running` is held by `next_batch` for as long as it
        // waits for a batch slice (another thread's wait must not hold the GIL meanwhile),
        // and joining the previous epoch's producer can wait for a batch in progress.
        py.detach(|| {
            let previous = lock(&self.running).take();
            drop(previous);
            // An epoch stopped by a signal ends its read in flight before this one starts.
            let retired = std::mem::take(&mut *lock(&self.retired));
            drop(retired);
            // `running` is held from before the epoch is made (which moves the loader on to
            // the next epoch) until it is in place: `state_json` would otherwise see no
            // epoch running and the loader already past this one, a checkpoint that skips
            // it. Same lock order as `state_json`: `running`, then the loader.
            let mut running = lock(&self.running);
            let iter = lock(&self.loader).iter_unbound();
            let id = {
                let mut n = lock(&self.epochs_started);
                *n += 1;
                *n
            };
            // Another thread may have started an epoch since the `take` above: this one
            // replaces it, and it is joined once the lock is released.
            let replaced = running.replace(Running { id, iter });
            drop(running);
            drop(replaced);
            id
        })
    }

    /// The next batch of epoch `id` with its sample ids; see `next_batch`.
    fn next_batch_ids(
        &self,
        py: Python<'_>,
        id: u64,
    ) -> PyResult<Option<(Vec<OutputView>, Vec<u64>)>> {
        Ok(self.next_raw(py, id)?.map(|batch| {
            let ids = batch.sample_ids().to_vec();
            (views(batch), ids)
        }))
    }

    /// The next batch of epoch `id`, or `None` when the epoch is over (or was stopped);
    /// see `next_batch`.
    fn next_raw(&self, py: Python<'_>, id: u64) -> PyResult<Option<ffcv::Batch>> {
        self.here(py)?;
        let next = loop {
            // One slice without the GIL; `running` is released between slices.
            let step = py.detach(|| {
                let mut running = lock(&self.running);
                match running.as_mut() {
                    Some(r) if r.id == id => Some(r.iter.next_timeout(WAIT_SLICE)),
                    _ => None,
                }
            });
            match step {
                None => return Ok(None),
                Some(Ok(next)) => break next,
                Some(Err(ffcv::WaitTimedOut)) => {
                    if let Err(interrupt) = py.check_signals() {
                        self.interrupt(py, id);
                        return Err(interrupt);
                    }
                }
            }
        };
        let result = match next {
            None => {
                self.stop(py, id);
                Ok(None)
            }
            Some(Ok(batch)) => Ok(Some(batch)),
            Some(Err(e)) => {
                self.stop(py, id);
                Err(errors::from_ffcv(py, e))
            }
        };
        // A Ctrl-C that arrived during the last slice: end the epoch, then raise it.
        if let Err(interrupt) = py.check_signals() {
            drop(result);
            self.interrupt(py, id);
            return Err(interrupt);
        }
        result
    }

    /// `Ok` in the process that built the loader, the fork error elsewhere.
    fn here(&self, py: Python<'_>) -> PyResult<()> {
        self.origin.check(py, "loader")
    }

    /// Stops epoch `id` for a signal without waiting longer than [`STOP_GRACE`]: a
    /// producer still inside a step then is kept in `retired`, joined by the next
    /// `start_epoch` (or, after the loader is freed, by a thread of its own).
    fn interrupt(&self, py: Python<'_>, id: u64) {
        py.detach(|| {
            let Some(Running { mut iter, .. }) = self.take_running(id) else {
                return;
            };
            iter.request_stop();
            let until = Instant::now() + STOP_GRACE;
            while !iter.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            if iter.is_finished() {
                drop(iter);
            } else {
                lock(&self.retired).push(iter);
            }
        });
    }

    fn stop(&self, py: Python<'_>, id: u64) {
        // The lock is taken without the GIL (another thread's `next_batch` holds it while it
        // waits for a batch).
        py.detach(|| self.stop_running(id));
    }

    /// Stops epoch `id` if it is the running one, joining its threads after the lock is
    /// released.
    fn stop_running(&self, id: u64) {
        drop(self.take_running(id));
    }

    /// Epoch `id` taken out of `running` if it is the running one; the lock is released
    /// on return, so the caller can stop the epoch without holding it.
    fn take_running(&self, id: u64) -> Option<Running> {
        let mut running = lock(&self.running);
        if running.as_ref().is_some_and(|r| r.id == id) {
            running.take()
        } else {
            None
        }
    }
}

/// One started epoch of a [`NativeLoader`], as `start_epoch` returns it: freeing it stops
/// the epoch. Its end hangs on a native object rather than on a Python `__del__` because
/// of Ctrl-C: a `KeyboardInterrupt` raised inside a Python finalizer is printed and lost,
/// and one raised as `start_epoch` returns, before the caller has stored the result,
/// would leave nothing to stop the epoch; here it frees the handle, which stops it.
#[pyclass(frozen, module = "ffcv_rs._native", name = "Epoch")]
pub struct EpochHandle {
    loader: Py<NativeLoader>,
    /// The id that `next_batch`, `next_outputs` and `stop_epoch` take.
    #[pyo3(get)]
    id: u64,
}

#[pymethods]
impl EpochHandle {
    /// Stops the epoch now, joining its threads (held batches stay valid).
    fn stop(&self, py: Python<'_>) {
        self.loader.get().stop_epoch(py, self.id);
    }
}

impl Drop for EpochHandle {
    fn drop(&mut self) {
        let loader = self.loader.get();
        // Freed by the interpreter, so attached to it: `stop_epoch` lets go of the GIL
        // while it joins the epoch's threads. An interpreter that is shutting down cannot
        // be attached to, and nothing waits for the GIL then: the epoch stops directly.
        let stopped = Python::try_attach(|py| loader.stop_epoch(py, self.id));
        if stopped.is_none() && loader.origin.is_here() {
            loader.stop_running(self.id);
        }
    }
}

impl Drop for NativeLoader {
    fn drop(&mut self) {
        if !self.origin.is_here() {
            return; // leaked by `ForkSafe`: the threads are the parent's
        }
        // Freed with the GIL held: an epoch still inside a read (a stalled remote source)
        // is joined on a thread of its own instead of blocking the interpreter until the
        // read's timeout.
        let retired = std::mem::take(&mut *lock(&self.retired));
        if retired.iter().all(EpochIter::is_finished) {
            return;
        }
        let joiner = std::thread::Builder::new().name("ffcv-epoch-join".into());
        if let Err(e) = joiner.spawn(move || drop(retired)) {
            tracing::warn!("no thread to join an interrupted epoch ({e}); joining it here");
        }
    }
}
