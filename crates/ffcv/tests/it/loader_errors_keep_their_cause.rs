//! Errors that keep their cause: a panic inside a user's native operation (a closure
//! kernel) ends the epoch with an error carrying the panic's message instead of aborting
//! the process; a panic on the producer thread (here in a user's slot stage) reaches the
//! consumer as `ProducerGone` with the message; a file truncated after the loader opened
//! it is refused at the next epoch's start, naming the file and both sizes, instead of
//! dying of SIGBUS. A user's decoder (decoding or declaring), slot stage, operation or
//! custom field handler that fails with an `ExtensionError` carrying a cause gives the
//! loader's error with that cause as its source.
//! Every loader thread still ends.

use crate::loader_support;

use std::sync::Arc;

use ffcv::decode::IntDecoder;
use ffcv::format::{
    ByteOrder, CustomHandler, DatasetWriter, Extent, ExtentRule, FieldSpec, FieldValue, NumpyDtype,
    NumpyKind, Reader, ReaderOptions, StoredLen,
};
use ffcv::jit::{KernelCall, Lowered, NativeKernel, Operation, State};
use ffcv::{Attachment, Error, Loader, Order, PipelineSpec, SlotOutput, SlotStage};
use loader_support::write_blobs;

/// Copies its input; panics on sample 5.
struct PanicsOnFive;

impl Operation for PanicsOnFive {
    fn name(&self) -> String {
        "PanicsOnFive".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, ffcv::jit::ExtensionError> {
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
    ) -> Result<Option<Attachment>, ffcv::ExtensionError> {
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

/// The error every extension below returns: a message and an I/O error behind it.
fn lookup_failed() -> ffcv::ExtensionError {
    let cause = std::io::Error::new(std::io::ErrorKind::NotFound, "labels.csv");
    ffcv::ExtensionError::with_source("cannot look up the label", cause)
}

/// The I/O error at the end of `e`'s chain of sources, if any.
fn io_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut next = e.source();
    while let Some(c) = next {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        next = c.source();
    }
    None
}

/// Asserts that `e`'s chain of sources holds [`lookup_failed`]'s I/O error.
fn assert_lookup_is_the_cause(e: &(dyn std::error::Error + 'static)) {
    assert_eq!(
        io_cause(e).map(|io| io.to_string()),
        Some("labels.csv".into()),
        "{e}"
    );
}

/// Runs one epoch of `loader`, which must end with an error before any batch, and returns
/// that error once every loader thread has ended.
fn the_epochs_only_error(loader: &mut Loader) -> Error {
    let mut items: Vec<_> = loader.iter().collect();
    assert_eq!(items.len(), 1, "one item, the error");
    let Some(Err(e)) = items.pop() else {
        panic!("the epoch's first item is a batch")
    };
    drop(items);
    assert_eq!(loader.live_threads(), 0);
    e
}

/// `IntDecoder`, failing on sample 3 with [`lookup_failed`].
struct FailsOnThree;

impl ffcv::Decoder for FailsOnThree {
    fn name(&self) -> String {
        "FailsOnThree".into()
    }
    fn declare(
        &self,
        field: &ffcv::decode::FieldInfo<'_>,
    ) -> Result<ffcv::DecoderOutput, ffcv::ExtensionError> {
        IntDecoder.declare(field)
    }
    fn decode(
        &self,
        input: &ffcv::decode::SampleInput<'_>,
        output: &mut [u8],
        scratch: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        if input.sample == 3 {
            return Err(lookup_failed());
        }
        IntDecoder.decode(input, output, scratch)
    }
}

#[test]
fn a_users_decoder_error_keeps_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "decoder", 40);
    for compile in [true, false] {
        let mut loader = Loader::builder(&path)
            .batch_size(8)
            .num_workers(2)
            .compile(compile)
            .order(Order::Sequential)
            .disable("blob")
            .pipeline("index", PipelineSpec::new(FailsOnThree))
            .build()
            .unwrap();
        let e = the_epochs_only_error(&mut loader);
        match &e {
            Error::Decode {
                sample: 3,
                message,
                decoder,
                ..
            } => assert_eq!(
                (message.as_str(), decoder.as_str()),
                ("cannot look up the label", "FailsOnThree")
            ),
            other => panic!("compile={compile}: {other:?}"),
        }
        assert_lookup_is_the_cause(&e);
    }
}

/// A slot stage that fails on its first batch with [`lookup_failed`].
struct FailingStage;

impl SlotStage for FailingStage {
    fn process(
        &self,
        _slot: usize,
        _outputs: &mut [SlotOutput<'_>],
    ) -> Result<Option<Attachment>, ffcv::ExtensionError> {
        Err(lookup_failed())
    }
}

#[test]
fn a_slot_stage_error_keeps_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "stage_error", 16);
    let mut loader = Loader::builder(&path)
        .batch_size(8)
        .slot_stage(Arc::new(FailingStage))
        .build()
        .unwrap();
    let e = the_epochs_only_error(&mut loader);
    assert!(
        matches!(&e, Error::SlotStage { batch: 0, message, .. } if message == "cannot look up the label"),
        "{e:?}"
    );
    assert_lookup_is_the_cause(&e);
}

/// An operation that refuses every state with [`lookup_failed`].
struct RefusesWithCause;

impl Operation for RefusesWithCause {
    fn name(&self) -> String {
        "RefusesWithCause".into()
    }
    fn lower(&self, _input: &State) -> Result<Lowered, ffcv::jit::ExtensionError> {
        Err(lookup_failed())
    }
}

#[test]
fn an_operations_refusal_keeps_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "refusal", 16);
    let built = Loader::builder(&path)
        .batch_size(8)
        .disable("blob")
        .pipeline(
            "index",
            PipelineSpec::new(IntDecoder).then(RefusesWithCause),
        )
        .build();
    let Err(err) = built else {
        panic!("the pipeline is refused")
    };
    assert!(err.to_string().contains("RefusesWithCause"), "{err}");
    assert!(
        err.to_string().contains("cannot look up the label"),
        "{err}"
    );
    assert_lookup_is_the_cause(&err);
}

/// `IntDecoder`, refusing every field with [`lookup_failed`] when the loader is built.
struct RefusesToDeclare;

impl ffcv::Decoder for RefusesToDeclare {
    fn name(&self) -> String {
        "RefusesToDeclare".into()
    }
    fn declare(
        &self,
        _field: &ffcv::decode::FieldInfo<'_>,
    ) -> Result<ffcv::DecoderOutput, ffcv::ExtensionError> {
        Err(lookup_failed())
    }
    fn decode(
        &self,
        input: &ffcv::decode::SampleInput<'_>,
        output: &mut [u8],
        scratch: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        IntDecoder.decode(input, output, scratch)
    }
}

#[test]
fn a_decoders_refusal_keeps_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "declare", 16);
    let built = Loader::builder(&path)
        .batch_size(8)
        .disable("blob")
        .pipeline("index", PipelineSpec::new(RefusesToDeclare))
        .build();
    match built {
        Err(e @ Error::Config { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("RefusesToDeclare") && text.contains("cannot look up the label"),
                "{text}"
            );
            assert_lookup_is_the_cause(&e);
        }
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("the decoder refused the field"),
    }
}

/// A custom field handler (values: the stored bytes, metadata `{ptr, len}`, located by
/// the handler) that fails with [`lookup_failed`] once `broken` is set: when it checks the
/// argument block, or locates a sample's bytes.
#[derive(Debug, Default)]
struct Located {
    broken: std::sync::atomic::AtomicBool,
}

impl Located {
    fn check(&self) -> Result<(), ffcv::ExtensionError> {
        match self.broken.load(std::sync::atomic::Ordering::SeqCst) {
            true => Err(lookup_failed()),
            false => Ok(()),
        }
    }
}

impl CustomHandler for Located {
    fn metadata_layout(&self) -> (u64, u64) {
        (16, 1)
    }
    fn accept_arguments(&self, _: &[u8]) -> Result<(), ffcv::ExtensionError> {
        self.check()
    }
    fn extent_rule(&self) -> ExtentRule {
        ExtentRule::Computed
    }
    fn extent(&self, m: &[u8]) -> Result<Option<Extent>, ffcv::ExtensionError> {
        self.check()?;
        let word = |i: usize| u64::from_le_bytes(m[i..i + 8].try_into().unwrap());
        Ok(Some(Extent {
            ptr: word(0),
            len: StoredLen::Bytes(word(8)),
        }))
    }
    fn payload<'v>(
        &self,
        value: &'v [u8],
    ) -> Result<Option<std::borrow::Cow<'v, [u8]>>, ffcv::ExtensionError> {
        Ok(Some(std::borrow::Cow::Borrowed(value)))
    }
    fn write_metadata(
        &self,
        _: &[u8],
        ptr: u64,
        len: u64,
        out: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        out[..8].copy_from_slice(&ptr.to_le_bytes());
        out[8..].copy_from_slice(&len.to_le_bytes());
        Ok(())
    }
}

/// The user's decoder of a [`Located`] field: the sample's first stored byte.
struct FirstByte;

impl ffcv::Decoder for FirstByte {
    fn name(&self) -> String {
        "FirstByte".into()
    }
    fn declare(
        &self,
        _field: &ffcv::decode::FieldInfo<'_>,
    ) -> Result<ffcv::DecoderOutput, ffcv::ExtensionError> {
        let u8_dtype = NumpyDtype::numeric(NumpyKind::UInt, 1, ByteOrder::NotApplicable)
            .ok_or("no u8 dtype")?;
        Ok(ffcv::DecoderOutput::new(
            vec![1],
            u8_dtype,
            ffcv::OutputKind::Array,
        ))
    }
    fn decode(
        &self,
        input: &ffcv::decode::SampleInput<'_>,
        output: &mut [u8],
        _scratch: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        output[0] = input.data.first().copied().unwrap_or(0);
        Ok(())
    }
}

#[test]
fn a_custom_handlers_error_keeps_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("located.beton");
    let handler = Arc::new(Located::default());
    let samples: Vec<Vec<FieldValue>> = (0..16u8)
        .map(|i| vec![FieldValue::Custom(vec![i; 5])])
        .collect();
    DatasetWriter::new(&path, vec![FieldSpec::custom("located", handler.clone())])
        .unwrap()
        .write(&samples)
        .unwrap();
    let options = ReaderOptions::new().custom_handler("located", handler.clone());
    let reader = Arc::new(Reader::open_with(&path, &options).unwrap());
    handler
        .broken
        .store(true, std::sync::atomic::Ordering::SeqCst);

    // Opening: the argument check fails; the facade's error is beton-io's, cause kept.
    let Err(e) = ffcv::Dataset::open_with(&path, &options, &ffcv::RemoteConfig::default()) else {
        panic!("the handler refuses the arguments")
    };
    assert!(
        matches!(&e, Error::Format(ffcv::format::Error::InvalidFieldArguments { reason, .. })
            if reason == "cannot look up the label"),
        "{e:?}"
    );
    assert_lookup_is_the_cause(&e);

    // An epoch: locating sample 0's bytes fails; the decode error carries the cause.
    let mut loader = Loader::builder(&path)
        .reader(reader)
        .batch_size(8)
        .order(Order::Sequential)
        .pipeline("located", PipelineSpec::new(FirstByte))
        .build()
        .unwrap();
    let e = the_epochs_only_error(&mut loader);
    assert!(
        matches!(&e, Error::Decode { sample: 0, message, .. }
            if message == "invalid metadata: cannot look up the label"),
        "{e:?}"
    );
    assert_lookup_is_the_cause(&e);
}
