//! QuasiRandom's buffer and the process cache's memory budget: the default is FFCV's
//! `2 * batch_size` when it fits, else the largest buffer that fits; the chosen buffer's
//! epochs run within the budget, each sample exactly once, in the order QuasiRandom gives
//! for that buffer; the knob overrides the default, a state carries the buffer, and the
//! memory guard names the knob that fixes the case instead of the order already in use.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, from_fn};
use ffcv::quasi_buffer::QuasiPlan;
use ffcv::traversal::{OrderKind, OrderSpec, SamplePages};
use ffcv::{Loader, LoaderBuilder, Order};

const SAMPLES: u64 = 240;
const PAGE: u64 = 2 << 20;
const BATCH: usize = 4;
const SEED: u64 = 5;

/// 240 samples of 200..260 KiB in 2 MiB pages (FFCV's smallest): about eight a page.
fn dataset() -> &'static Path {
    static PATH: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &PATH
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("quasi.beton");
            let fields = vec![
                FieldSpec::new("index", FieldType::Int),
                FieldSpec::new("blob", FieldType::Bytes),
            ];
            DatasetWriter::new(&path, fields)
                .unwrap()
                .with_num_workers(1)
                .with_page_size(PAGE)
                .unwrap()
                .write(&from_fn(SAMPLES, |i| {
                    let len = (200 + (i % 60) as usize) * 1024;
                    Ok(vec![
                        FieldValue::Int(i as i64),
                        FieldValue::Bytes(vec![(i % 251) as u8; len]),
                    ])
                }))
                .unwrap();
            (dir, path)
        })
        .1
}

fn builder() -> LoaderBuilder {
    Loader::builder(dataset())
        .batch_size(BATCH)
        .num_workers(2)
        .order(Order::QuasiRandom)
        .seed(SEED)
        .disable("blob")
}

fn pages() -> SamplePages {
    let reader = ffcv::format::Reader::open(dataset()).unwrap();
    let map = reader.page_map();
    SamplePages::from_fn(reader.num_samples(), |s| {
        map.pages_of_sample(s).first().copied()
    })
}

fn quasi_order(buffer_pages: usize, epoch: u64) -> Vec<u64> {
    let spec = OrderSpec {
        seed: SEED,
        buffer_pages,
        ..OrderSpec::new(OrderKind::QuasiRandom, BATCH)
    };
    spec.build((0..SAMPLES).collect(), Some(&pages()))
        .unwrap()
        .order(epoch)
}

/// Runs `epochs` epochs and returns the sample ids of each, in delivery order.
fn run(loader: &mut Loader, epochs: u64) -> Vec<Vec<u64>> {
    (0..epochs)
        .map(|_| {
            let mut ids = Vec::new();
            for batch in loader.iter() {
                ids.extend_from_slice(batch.unwrap().sample_ids());
            }
            ids
        })
        .collect()
}

#[test]
fn the_os_cache_keeps_ffcvs_buffer() {
    let loader = builder().build().unwrap();
    assert_eq!(loader.quasi_buffer_pages(), Some(2 * BATCH));
    let random = builder().order(Order::Random).build().unwrap();
    assert_eq!(random.quasi_buffer_pages(), None);
}

#[test]
fn a_budget_that_holds_ffcvs_buffer_keeps_it() {
    let loader = builder()
        .os_cache(false)
        .max_memory(1 << 30)
        .build()
        .unwrap();
    assert_eq!(loader.quasi_buffer_pages(), Some(2 * BATCH));
}

#[test]
fn a_small_budget_gets_the_largest_buffer_that_fits_and_its_epochs_fit() {
    let budget = 9 * PAGE;
    let mut loader = builder()
        .os_cache(false)
        .max_memory(budget)
        .build()
        .unwrap();
    let chosen = loader.quasi_buffer_pages().unwrap();
    assert!(chosen < 2 * BATCH, "chose {chosen}");
    assert!(chosen >= 1);
    // The next buffer up does not fit by the same measure (largest that fits).
    let reader = ffcv::format::Reader::open(dataset()).unwrap();
    let pages = pages();
    let indices: Vec<u64> = (0..SAMPLES).collect();
    let plan = QuasiPlan {
        reader: &reader,
        pages: &pages,
        indices: &indices,
        seed: SEED,
        distributed: None,
        batch_size: BATCH,
        drop_last: true,
        prefetch_ahead: 3,
    };
    assert!(plan.slots_needed(chosen).unwrap() as u64 * PAGE <= budget);
    let sizing = plan.size_buffer(budget).unwrap();
    assert_eq!(sizing.buffer_pages, chosen);
    assert!(sizing.fits);

    // Ten epochs, beyond the planned ones: each within the budget (the guard would
    // refuse), each sample exactly once, in the order QuasiRandom gives for the chosen
    // buffer.
    let epochs = run(&mut loader, 10);
    for (epoch, ids) in epochs.iter().enumerate() {
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "epoch {epoch}: a sample repeated");
        assert_eq!(ids.len(), (SAMPLES as usize / BATCH) * BATCH);
        let expected = quasi_order(chosen, epoch as u64);
        assert_eq!(ids[..], expected[..ids.len()], "epoch {epoch}");
    }
    let slots = loader.stats().slots;
    assert!(slots > 0);
}

#[test]
fn the_knob_overrides_the_default_and_decides_the_order() {
    let mut loader = builder().quasi_buffer_pages(7).build().unwrap();
    assert_eq!(loader.quasi_buffer_pages(), Some(7));
    let ids = run(&mut loader, 2);
    for (epoch, ids) in ids.iter().enumerate() {
        assert_eq!(ids[..], quasi_order(7, epoch as u64)[..ids.len()]);
    }
    assert_ne!(quasi_order(7, 0), quasi_order(8, 0));
    let err = builder().quasi_buffer_pages(0).build().err().unwrap();
    assert!(
        err.to_string()
            .contains("quasi_buffer_pages must be at least 1"),
        "{err}"
    );
}

#[test]
fn a_state_carries_the_chosen_buffer_and_resumes_exactly() {
    let budget = 9 * PAGE;
    let mut loader = builder()
        .os_cache(false)
        .max_memory(budget)
        .build()
        .unwrap();
    let chosen = loader.quasi_buffer_pages().unwrap();
    let (state, rest) = {
        let mut it = loader.iter();
        for _ in 0..5 {
            it.next().unwrap().unwrap();
        }
        let state = it.state();
        let rest: Vec<u64> = it.flat_map(|b| b.unwrap().sample_ids().to_vec()).collect();
        (state, rest)
    };
    assert_eq!(state.buffer_pages(), chosen);
    // Resumed with another cache and no budget: the state's buffer, not a new default.
    let mut resumed = builder().resume(state.clone()).build().unwrap();
    assert_eq!(resumed.quasi_buffer_pages(), Some(chosen));
    let again: Vec<u64> = resumed
        .iter()
        .flat_map(|b| b.unwrap().sample_ids().to_vec())
        .collect();
    assert_eq!(again, rest);
    // An explicit other buffer is refused, naming both.
    let err = builder()
        .resume(state)
        .quasi_buffer_pages(chosen + 1)
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("QuasiRandom buffer"), "{err}");
}

#[test]
fn the_guard_names_the_buffer_for_quasi_random_and_quasi_random_for_the_others() {
    let budget = 9 * PAGE;
    let mut loader = builder()
        .os_cache(false)
        .max_memory(budget)
        .quasi_buffer_pages(2 * BATCH)
        .build()
        .unwrap();
    let err = loader.iter().next().unwrap().err().unwrap().to_string();
    assert!(err.contains("quasi_buffer_pages"), "{err}");
    assert!(err.contains("--quasi-buffer-pages"), "{err}");
    assert!(!err.contains("use the QuasiRandom order"), "{err}");
    let fitting = builder()
        .os_cache(false)
        .max_memory(budget)
        .build()
        .unwrap()
        .quasi_buffer_pages()
        .unwrap();
    assert!(err.contains(&format!("to {fitting}, which fits")), "{err}");

    let mut random = builder()
        .order(Order::Random)
        .os_cache(false)
        .max_memory(budget)
        .build()
        .unwrap();
    let err = random.iter().next().unwrap().err().unwrap().to_string();
    assert!(
        err.contains("the Random order keeps many pages open"),
        "{err}"
    );
    assert!(err.contains("use the QuasiRandom order"), "{err}");
}

#[test]
fn the_chosen_buffer_fits_for_every_budget_and_seed() {
    // From budgets where FFCV's buffer fits down to ones where no buffer does: every
    // chosen buffer's epochs (more than the planned ones) pass the memory guard and
    // deliver each sample once.
    for budget_pages in [4u64, 6, 8, 10, 12, 16, 24] {
        for seed in [1u64, 2, 3] {
            let mut loader = builder()
                .seed(seed)
                .os_cache(false)
                .max_memory(budget_pages * PAGE)
                .build()
                .unwrap();
            let chosen = loader.quasi_buffer_pages().unwrap();
            let reader = ffcv::format::Reader::open(dataset()).unwrap();
            let pages = pages();
            let indices: Vec<u64> = (0..SAMPLES).collect();
            let plan = QuasiPlan {
                reader: &reader,
                pages: &pages,
                indices: &indices,
                seed,
                distributed: None,
                batch_size: BATCH,
                drop_last: true,
                prefetch_ahead: 3,
            };
            if !plan.size_buffer(budget_pages * PAGE).unwrap().fits {
                assert_eq!(chosen, 2 * BATCH);
                continue;
            }
            for (epoch, ids) in run(&mut loader, 5).iter().enumerate() {
                let mut sorted = ids.clone();
                sorted.sort_unstable();
                assert_eq!(
                    sorted,
                    (0..SAMPLES).collect::<Vec<_>>(),
                    "budget {budget_pages} pages, seed {seed}, epoch {epoch}, buffer {chosen}"
                );
            }
        }
    }
}

/// Records the message of every warning.
#[derive(Default)]
struct Warnings(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() == tracing::Level::WARN
    }
    fn new_span(&self, _span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _span: &tracing::span::Id, _values: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _span: &tracing::span::Id, _follows: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = String::new();
        event.record(&mut Message(&mut message));
        self.0.lock().unwrap().push(message);
    }
    fn enter(&self, _span: &tracing::span::Id) {}
    fn exit(&self, _span: &tracing::span::Id) {}
}

#[test]
fn a_shrunk_default_buffer_is_warned_about_and_ffcvs_is_not() {
    // In its own process: tracing caches each call site's interest globally, and another
    // test's thread reaching the warning first, with no subscriber of its own, could cache
    // "never" while this thread's scoped subscriber was being registered (the warning was
    // then lost: a load-dependent failure).
    ffcv_testkit::own_process(
        module_path!(),
        "a_shrunk_default_buffer_is_warned_about_and_ffcvs_is_not",
        || {
            let warnings = Warnings::default();
            let seen = std::sync::Arc::clone(&warnings.0);
            let (small, large) = tracing::subscriber::with_default(warnings, || {
                let small = builder()
                    .os_cache(false)
                    .max_memory(9 * PAGE)
                    .build()
                    .unwrap()
                    .quasi_buffer_pages();
                let count = seen.lock().unwrap().len();
                let large = builder()
                    .os_cache(false)
                    .max_memory(1 << 30)
                    .build()
                    .unwrap()
                    .quasi_buffer_pages();
                assert_eq!(
                    seen.lock().unwrap().len(),
                    count,
                    "FFCV's buffer fits: no warning"
                );
                (small, large)
            });
            assert_eq!(large, Some(2 * BATCH));
            let seen = seen.lock().unwrap();
            let warning = seen
                .iter()
                .find(|w| w.contains("QuasiRandom buffer"))
                .unwrap_or_else(|| panic!("{seen:?}"));
            assert!(
                warning.contains(&format!("using {} pages", small.unwrap())),
                "{warning}"
            );
            assert!(warning.contains("FFCV's 8 pages"), "{warning}");
        },
    );
}
