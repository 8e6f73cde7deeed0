//! Errors that keep their cause: a panic inside a user's native operation (a closure
//! kernel) ends the epoch with an error carrying the panic's message instead of aborting
//! the process; a panic on the producer thread (here in a user's slot stage) reaches the
//! consumer as `ProducerGone` with the message; a file truncated after the loader opened
//! it is refused at the next epoch's start, naming the file and both sizes, instead of
//! dying of SIGBUS. Every loader thread still ends.

use crate::loader_support;

use std::sync::Arc;

use ffcv::decode::IntDecoder;
use ffcv::jit::{KernelCall, Lowered, NativeKernel, Operation, State};
use ffcv::{Attachment, Error, Loader, Order, PipelineSpec, SlotOutput, SlotStage};
use loader_support::write_blobs;

/// Copies its input; panics on sample 5.
struct PanicsOnFive;

impl Operation for PanicsOnFive {
    fn name(&self) -> String {
        "PanicsOnFive".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, String> {
        Ok(Lowered::Native(NativeKernel::from_fn(
            input.clone(),
            |call: KernelCall<'_>| {
                if call.sample == 5 {
                    let v: Vec<u8> = Vec::new();
                    // An out-of-bounds index: the kind of bug a user's kernel has.
                    let _ = v[call.sample as usize];
                }
                call.output.copy_from_slice(call.input);
                Ok(())
            },
        )))
    }
}

#[test]
fn a_panic_in_a_users_kernel_ends_the_epoch_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "kernel", 40);
    for compile in [true, false] {
        let mut loader = Loader::builder(&path)
            .batch_size(8)
            .num_workers(2)
            .compile(compile)
            .order(Order::Sequential)
            .disable("blob")
            .pipeline("index", PipelineSpec::new(IntDecoder).then(PanicsOnFive))
            .build()
            .unwrap();
        let items: Vec<_> = loader.iter().collect();
        assert_eq!(items.len(), 1, "the first batch holds sample 5");
        match &items[0] {
            Err(Error::Pipeline { field, source, .. }) => {
                assert_eq!(field, "index");
                let text = source.to_string();
                assert!(
                    matches!(source, ffcv::jit::Error::KernelFailed { sample: 5, .. })
                        && text.contains("PanicsOnFive")
                        && text.contains("panicked: index out of bounds"),
                    "{text}"
                );
            }
            Err(other) => panic!("compile={compile}: {other}"),
            Ok(_) => panic!("compile={compile}: a batch with sample 5 succeeded"),
        }
        drop(items);
        assert_eq!(loader.live_threads(), 0);
    }
}

/// A slot stage that panics on its second batch.
#[derive(Default)]
struct PanickyStage {
    calls: std::sync::atomic::AtomicUsize,
}

impl SlotStage for PanickyStage {
    fn process(
        &self,
        _slot: usize,
        _outputs: &mut [SlotOutput<'_>],
    ) -> Result<Option<Attachment>, String> {
        if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            panic!("the stage lost its device");
        }
        Ok(None)
    }
}

#[test]
fn a_panic_on_the_producer_thread_is_reported_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "stage", 40);
    let mut loader = Loader::builder(&path)
        .batch_size(8)
        .num_workers(2)
        .slot_stage(Arc::new(PanickyStage::default()))
        .build()
        .unwrap();
    let items: Vec<_> = loader.iter().collect();
    assert_eq!(items.len(), 2, "one batch, then the error");
    assert!(items[0].is_ok());
    match &items[1] {
        Err(Error::ProducerGone { epoch, cause, path }) => {
            assert_eq!(*epoch, 0);
            assert!(path.ends_with("stage.beton"));
            assert_eq!(cause, "panicked: the stage lost its device");
        }
        other => panic!("{other:?}"),
    }
    drop(items);
    assert_eq!(loader.live_threads(), 0);
}

#[test]
fn a_file_truncated_after_opening_is_refused_at_the_epoch_start() {
    for os_cache in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let path = write_blobs(dir.path(), "shrunk", 100);
        let size = std::fs::metadata(&path).unwrap().len();
        let mut loader = Loader::builder(&path)
            .batch_size(8)
            .os_cache(os_cache)
            .order(Order::Random)
            .seed(1)
            .num_workers(2)
            .build()
            .unwrap();
        // A first epoch runs; then the file is cut in place (same inode).
        assert_eq!(loader.iter().filter(|b| b.is_ok()).count(), loader.len());
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(size / 2).unwrap();
        let items: Vec<_> = loader.iter().collect();
        assert_eq!(items.len(), 1, "os_cache={os_cache}");
        match &items[0] {
            Err(e @ Error::FileSizeChanged { opened, now, .. }) => {
                assert_eq!((*opened, *now), (size, size / 2));
                let text = e.to_string();
                assert!(
                    text.contains("shrunk.beton")
                        && text.contains(&size.to_string())
                        && text.contains(&(size / 2).to_string()),
                    "{text}"
                );
            }
            other => panic!("os_cache={os_cache}: {other:?}"),
        }
        drop(items);
        assert_eq!(loader.live_threads(), 0);
    }
}
