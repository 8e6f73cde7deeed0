//! The facts `ffcv doctor` records about the file and its pipeline: size, samples, pages,
//! each field's decoder and transforms, whether images are JPEG, and the decoder the doctor
//! falls back to where the default cannot batch a field (images of varying sizes).
//!
//! The machine's facts are in [`super::facts`].

use beton_io::{FieldType, Reader};
use ffcv::DecoderChoice;

use crate::error::CliError;
use crate::pipeline_args::DecoderArg;
use ffcv::transform_spec::FieldTransforms;

/// The facts about the file and the run (the machine's are in [`super::facts::MachineFacts`]).
#[derive(Debug, Clone)]
pub struct FileFacts {
    /// File size in bytes.
    pub bytes: u64,
    /// Samples in the file.
    pub samples: u64,
    /// Page size.
    pub page_size: u64,
    /// `name: decoder` per field.
    pub pipeline: Vec<String>,
    /// Whether any image field stores JPEG (judged from the first samples).
    pub has_jpeg: bool,
    /// Decoders the doctor chose because the default cannot serve a field, each with the
    /// reason.
    pub fallbacks: Vec<(DecoderArg, String)>,
}

/// The decoder an image field of varying sizes is measured with: FFCV's training decoder
/// (`RandomResizedCropRGBImageDecoder((224, 224))`, its ImageNet example's setting).
pub const TRAINING_DECODER: &str = "random-resized-crop:224x224";

/// Number of samples whose image metadata is looked at to tell raw from JPEG.
const MODE_PROBE_SAMPLES: u64 = 64;

/// A sample of an image field and its size: `(sample, height, width)`.
type SizedSample = (u64, u16, u16);

/// The first two samples of an image field whose sizes differ, or `None` when every image
/// has one size (the rule `SimpleRGBImageDecoder` applies).
fn varying_image_size(reader: &Reader, index: usize) -> Result<Option<[SizedSample; 2]>, CliError> {
    let mut first = None;
    for sample in 0..reader.num_samples() {
        if let beton_io::FieldMetadata::RgbImage { width, height, .. } =
            reader.metadata(sample, index)?
        {
            match first {
                None => first = Some((sample, height, width)),
                Some((s, h, w)) if (h, w) != (height, width) => {
                    return Ok(Some([(s, h, w), (sample, height, width)]));
                }
                Some(_) => {}
            }
        }
    }
    Ok(None)
}

/// Whether `choice` decodes an image field as `SimpleRGBImageDecoder` does (the default),
/// which needs every image of the field to have one size.
fn is_simple(choice: &DecoderChoice) -> bool {
    match choice {
        DecoderChoice::Default => true,
        DecoderChoice::Decoder(d) => d.name() == "SimpleRGBImageDecoder",
        DecoderChoice::Disabled => false,
    }
}

/// The facts of the file `reader` reads, with the decoders and transforms given. Errors: a
/// `--decoder` or `--transform` naming no field of the file, or transforms on a disabled
/// field (usage errors).
pub fn file_facts(
    reader: &Reader,
    decoders: &[DecoderArg],
    transforms: &[FieldTransforms],
) -> Result<FileFacts, CliError> {
    let mut pipeline = Vec::new();
    let mut has_jpeg = false;
    let mut fallbacks = Vec::new();
    for (index, field) in reader.fields().iter().enumerate() {
        // The last `--decoder` for a field is the one the loader uses.
        let given = decoders.iter().rev().find(|d| d.field == field.name);
        let mut chosen = given.map(|d| d.spec().to_owned());
        let default = match field.field_type {
            FieldType::RgbImage => "simple",
            _ => "default",
        };
        let mut note = String::new();
        if field.field_type == FieldType::RgbImage
            && given.is_none_or(|d| is_simple(&d.choice))
            && let Some([(s0, h0, w0), (s1, h1, w1)]) = varying_image_size(reader, index)?
        {
            let because = format!(
                "the images vary in size (sample {s0} is {h0}x{w0}, sample {s1} is {h1}x{w1}), \
                 which the default decoder (simple) cannot batch: measured with FFCV's \
                 training decoder {TRAINING_DECODER}"
            );
            note = format!(" ({because})");
            let fallback =
                crate::pipeline_args::parse_decoder(&format!("{}={TRAINING_DECODER}", field.name))
                    .map_err(CliError::Usage)?;
            fallbacks.push((fallback, because));
            chosen = Some(TRAINING_DECODER.to_owned());
        }
        let then: String = transforms
            .iter()
            .filter(|t| t.field == field.name)
            .map(|t| format!(" -> {}", t.describe()))
            .collect();
        pipeline.push(format!(
            "{} ({}): {}{then}{note}",
            field.name,
            field.field_type.type_name(),
            chosen.as_deref().unwrap_or(default)
        ));
        if field.field_type == FieldType::RgbImage {
            for sample in 0..reader.num_samples().min(MODE_PROBE_SAMPLES) {
                if let beton_io::FieldMetadata::RgbImage { mode, .. } =
                    reader.metadata(sample, index)?
                {
                    has_jpeg |= mode == beton_io::IMAGE_MODE_JPEG;
                }
            }
        }
    }
    for d in decoders {
        if d.source.is_none() && reader.field_index(&d.field).is_none() {
            return Err(CliError::Usage(format!(
                "--decoder `{}`: expected FIELD=SPEC with a field of {}",
                d.text,
                reader.path().display()
            )));
        }
    }
    for t in transforms {
        let disabled = decoders
            .iter()
            .rev()
            .find(|d| d.field == t.field)
            .is_some_and(|d| matches!(d.choice, DecoderChoice::Disabled));
        let view = decoders
            .iter()
            .any(|d| d.field == t.field && d.source.is_some());
        if (reader.field_index(&t.field).is_none() && !view) || disabled {
            return Err(CliError::Usage(format!(
                "--transform `{}`: expected FIELD=OPS with an enabled field of {}",
                t.text(),
                reader.path().display()
            )));
        }
    }
    Ok(FileFacts {
        bytes: reader.file_size(),
        samples: reader.num_samples(),
        page_size: reader.page_size(),
        pipeline,
        has_jpeg,
        fallbacks,
    })
}
