//! The decoder of `VarArrayField` (beton-io's `fields/var_array.rs`): each sample's array of
//! `K` rows as one padded row of the output, `(K_max, ...inner shape)` in the field's dtype,
//! zeros past the sample's `K` rows, and the per-sample `K` as the output's lengths
//! ([`OutputKind::Rows`]).
//!
//! Batch buffers have a fixed row size (slots are allocated once), so `K_max` is fixed
//! when the loader is built: a cap the user gives (at least 1), or else the largest `K`
//! in the whole file (at least 1), computed from the metadata alone. [`crate::BatchOutput::batch_max_rows`] is the
//! largest `K` of one batch, and [`crate::BatchOutput::packed`] gives the packed
//! `(values, offsets)` form.

use beton_io::{FieldType, VarArrayArgs};

use super::copy::copy_padded;
use super::{CopyRule, Decoder, DecoderOutput, FieldInfo, OutputKind, SampleInput};

/// What a sample with more rows than the cap gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverCap {
    /// The loader refuses to build, naming the first such sample (default).
    #[default]
    Error,
    /// Its first `cap` rows; its length is then `cap`.
    Truncate,
}

/// A `VarArrayField` as `[B, K_max, ...inner]` rows padded with zeros plus `K` per sample.
///
/// ```
/// use ffcv::decode::{OverCap, VarArrayDecoder};
/// let whole_file = VarArrayDecoder::new();
/// let capped = VarArrayDecoder::new().cap(50).over_cap(OverCap::Truncate);
/// assert_eq!(capped.max_rows(), Some(50));
/// assert_eq!(whole_file.max_rows(), None);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct VarArrayDecoder {
    cap: Option<u64>,
    over_cap: OverCap,
}

impl VarArrayDecoder {
    /// `K_max` the largest `K` of the file.
    pub fn new() -> VarArrayDecoder {
        VarArrayDecoder::default()
    }

    /// `K_max` = `cap` rows; what happens to longer samples is [`VarArrayDecoder::over_cap`].
    pub fn cap(mut self, cap: u64) -> VarArrayDecoder {
        self.cap = Some(cap);
        self
    }

    /// What samples with more than the cap's rows get (no effect without a cap).
    pub fn over_cap(mut self, rule: OverCap) -> VarArrayDecoder {
        self.over_cap = rule;
        self
    }

    /// The cap, if one was given.
    pub fn max_rows(&self) -> Option<u64> {
        self.cap
    }

    /// The over-cap rule.
    pub fn over_cap_rule(&self) -> OverCap {
        self.over_cap
    }
}

fn var_args<'a>(info: &FieldInfo<'a>) -> Result<&'a VarArrayArgs, String> {
    match &info.field.field_type {
        FieldType::VarArray(a) => Ok(a),
        other => Err(format!(
            "decodes VarArrayField fields, but {:?} is a {}",
            info.field.name,
            other.type_name()
        )),
    }
}

impl Decoder for VarArrayDecoder {
    fn name(&self) -> String {
        "VarArrayDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        let args = var_args(info)?;
        if self.cap == Some(0) {
            return Err("a cap of 0 rows leaves nothing to decode (the cap is at least 1)".into());
        }
        // The file's largest K, from the metadata alone (a remote file is not read here);
        // with a cap and `OverCap::Error`, the first sample over it is named now, before
        // any epoch runs.
        let mut largest = 0u64;
        for sample in 0..info.reader.num_samples() {
            let meta = info
                .reader
                .metadata_bytes(sample, info.index)
                .map_err(|e| e.to_string())?;
            let size = info
                .reader
                .stored_extent(info.index, meta)
                .map_err(|reason| format!("sample {sample}: invalid metadata: {reason}"))?
                .map_or(0, |(_, len)| len);
            let rows = args
                .rows_of(size)
                .map_err(|reason| format!("sample {sample}: {reason}"))?;
            if let (Some(cap), OverCap::Error) = (self.cap, self.over_cap)
                && rows > cap
            {
                return Err(format!(
                    "sample {sample} has {rows} rows, more than the cap of {cap} \
                     (truncate instead, or raise the cap)"
                )
                .into());
            }
            largest = largest.max(rows);
        }
        // At least one row even when every array is empty: batch rows are never 0 bytes.
        let width = self.cap.unwrap_or(largest.max(1));
        let mut shape = vec![width];
        shape.extend_from_slice(&args.inner_shape);
        let shape = shape
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|_| format!("rows of shape {shape:?} exceed memory"))?;
        let out = DecoderOutput::new(shape, args.dtype.clone(), OutputKind::Rows);
        if out.row_bytes().is_none() {
            return Err(format!("rows of shape {:?} exceed memory", out.shape).into());
        }
        Ok(out)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        if input.data.len() <= out.len() {
            return copy_padded(input.data, out).map_err(Into::into);
        }
        match (self.cap, self.over_cap) {
            // The row holds exactly `cap` rows, so its first bytes are the first rows.
            (Some(_), OverCap::Truncate) => {
                out.copy_from_slice(&input.data[..out.len()]);
                Ok(())
            }
            _ => Err(format!(
                "{} stored bytes are more rows than the {}-byte padded row holds",
                input.data.len(),
                out.len()
            )
            .into()),
        }
    }

    fn copy_rule(&self) -> Option<CopyRule> {
        // Samples that fit are copied batch-wide; longer ones go through `decode`.
        Some(CopyRule::Padded)
    }
}
