//! A decoder as a pipeline-jit native kernel: the per-sample record the loader builds, the
//! operation that lowers a [`Decoder`] to a kernel, and the one `extern "C"` entry point
//! that turns the kernel's raw arguments back into safe slices.
//!
//! The record of a sample (`RECORD_BYTES`, native-endian words) holds the address and
//! length of the sample's stored bytes inside the page cache, and the field's metadata
//! bytes. The loader builds records from `EpochContext::read_extent` for batch `b` and
//! runs the pipelines before it calls `start_batch(b + 1)`, so every address stays
//! readable while the kernel runs. Records are only ever built by the loader:
//! [`DecoderOp`] is private to this crate. Pipelines of a copying decoder alone
//! ([`super::Decoder::copy_rule`]) need no records: the loader copies their rows itself.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};

use pipeline_jit::{ElemType, KernelArgs, Lowered, NativeKernel, Operation, State};

use super::{Decoder, DecoderOutput, SampleInput};

/// Bytes of one sample's record: data address, data length, 16 metadata bytes.
pub(crate) const RECORD_BYTES: usize = 32;
/// Metadata bytes a record carries (every built-in field's metadata fits).
pub(crate) const RECORD_METADATA: usize = 16;

/// The pipeline state of a batch of records.
pub(crate) fn record_state() -> State {
    State::cpu([RECORD_BYTES], ElemType::U8)
}

/// Writes a sample's record.
pub(crate) fn write_record(record: &mut [u8], data: &[u8], metadata: &[u8]) {
    record[0..8].copy_from_slice(&(data.as_ptr() as usize as u64).to_ne_bytes());
    record[8..16].copy_from_slice(&(data.len() as u64).to_ne_bytes());
    let n = metadata.len().min(RECORD_METADATA);
    record[16..16 + n].copy_from_slice(&metadata[..n]);
    record[16 + n..RECORD_BYTES].fill(0);
}

/// The length field of a record.
pub(crate) fn record_len(record: &[u8]) -> u64 {
    u64::from_ne_bytes(record[8..16].try_into().expect("8 bytes"))
}

/// What the kernel's context pointer points to.
pub(crate) struct DecoderContext {
    decoder: Arc<dyn Decoder>,
    row_bytes: usize,
    /// The loader's cap on decoded image area, passed to every call.
    pub(crate) max_image_pixels: u64,
    /// The first failure of the current run: (sample, the decoder's error).
    failure: Mutex<Option<(u64, pipeline_jit::ExtensionError)>>,
}

impl DecoderContext {
    /// Takes the failure recorded by the kernel, if any.
    pub(crate) fn take_failure(&self) -> Option<(u64, pipeline_jit::ExtensionError)> {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn fail(&self, sample: u64, error: pipeline_jit::ExtensionError) {
        let mut f = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        if f.is_none() {
            *f = Some((sample, error));
        }
    }
}

/// A decoder as the first operation of a pipeline over records.
pub(crate) struct DecoderOp {
    context: Arc<DecoderContext>,
    output: DecoderOutput,
}

impl DecoderOp {
    pub(crate) fn new(
        decoder: Arc<dyn Decoder>,
        output: DecoderOutput,
        row_bytes: usize,
        max_image_pixels: u64,
    ) -> Self {
        DecoderOp {
            context: Arc::new(DecoderContext {
                decoder,
                row_bytes,
                max_image_pixels,
                failure: Mutex::new(None),
            }),
            output,
        }
    }

    pub(crate) fn context(&self) -> Arc<DecoderContext> {
        Arc::clone(&self.context)
    }
}

impl Operation for DecoderOp {
    fn name(&self) -> String {
        self.context.decoder.name()
    }

    fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        if *input != record_state() {
            return Err(
                format!("a decoder reads the loader's sample records, not {input:?}").into(),
            );
        }
        Ok(Lowered::Native(
            NativeKernel::new(
                self.output.state.clone(),
                decode_kernel,
                Arc::clone(&self.context),
            )
            .with_scratch(self.output.scratch_bytes),
        ))
    }
}

/// Error codes of [`decode_kernel`] (the message is kept in the context).
const FAILED: i32 = 1;
const PANICKED: i32 = 2;
const BAD_ARGS: i32 = 3;

/// The native kernel of every decoder.
///
/// # Safety
/// `args` satisfies pipeline-jit's `KernelFn` contract, its context is the
/// `DecoderContext` of the `DecoderOp` that lowered to this kernel, and its input is a
/// record written by [`write_record`] whose data range is readable for the whole call.
unsafe extern "C" fn decode_kernel(args: *const KernelArgs) -> i32 {
    // SAFETY: pipeline-jit passes a valid, live `KernelArgs` (the `KernelFn` contract).
    let args = unsafe { &*args };
    // SAFETY: the context pointer is `Arc::as_ptr` of the `DecoderContext` this kernel was
    // lowered with (see `DecoderOp::lower`); the `NativeKernel` keeps that Arc alive.
    let ctx = unsafe { &*(args.context as *const DecoderContext) };
    if args.input_len != RECORD_BYTES || args.output_len != ctx.row_bytes {
        ctx.fail(
            args.sample,
            format!(
                "kernel called with {} input and {} output bytes, expected {RECORD_BYTES} and {}",
                args.input_len, args.output_len, ctx.row_bytes
            )
            .into(),
        );
        return BAD_ARGS;
    }
    // SAFETY: `input` is readable for `input_len` (= RECORD_BYTES, non-zero) bytes.
    let record = unsafe { std::slice::from_raw_parts(args.input, RECORD_BYTES) };
    let addr = u64::from_ne_bytes(record[0..8].try_into().expect("8 bytes")) as usize;
    let len = record_len(record) as usize;
    let data: &[u8] = if len == 0 {
        &[]
    } else {
        // SAFETY: the loader wrote this record from a slice of `len` bytes returned by the
        // epoch's page cache for the current batch, and runs the pipeline before the batch
        // advances, so the range is live and not written during the call.
        unsafe { std::slice::from_raw_parts(addr as *const u8, len) }
    };
    let output: &mut [u8] = if args.output_len == 0 {
        &mut []
    } else {
        // SAFETY: `output` is writable for `output_len` bytes and only this call writes it.
        unsafe { std::slice::from_raw_parts_mut(args.output, args.output_len) }
    };
    let scratch: &mut [u8] = if args.scratch_len == 0 {
        &mut []
    } else {
        // SAFETY: `scratch` is writable for `scratch_len` bytes and only this call uses it.
        unsafe { std::slice::from_raw_parts_mut(args.scratch, args.scratch_len) }
    };
    let input = SampleInput {
        sample: args.sample,
        data,
        metadata: &record[16..RECORD_BYTES],
        seed: args.seed,
        max_image_pixels: ctx.max_image_pixels,
    };
    // A panic must not unwind through `extern "C"`: report it as a decode failure.
    match catch_unwind(AssertUnwindSafe(|| {
        ctx.decoder.decode(&input, output, scratch)
    })) {
        Ok(Ok(())) => 0,
        Ok(Err(error)) => {
            ctx.fail(args.sample, error);
            FAILED
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            ctx.fail(args.sample, format!("decoder panicked: {what}").into());
            PANICKED
        }
    }
}
