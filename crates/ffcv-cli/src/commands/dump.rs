//! `ffcv dump FILE [--fields a,b] [--start I] [--count N] [--raw]`: every sample as one JSON line.
//!
//! Each field is decoded by its default decoder and printed in the shape the design's CLI
//! contract fixes (scripts compare these lines with FFCV's own dump). Lines are written in
//! Python's `json.dumps` style ([`JsonValue::to_python_json`]: `", "` separators, ASCII
//! escapes, float `repr`), so they can be diffed textually with FFCV's dump too.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use base64::Engine as _;
use beton_io::{
    Field, FieldMetadata, FieldType, IMAGE_MODE_JPEG, IMAGE_MODE_RAW, JsonValue, Reader,
};
use sha2::{Digest, Sha256};

use crate::error::{CliError, Result};

/// Arguments of `ffcv dump`.
#[derive(clap::Args, Debug)]
pub struct DumpArgs {
    /// The .beton file (a path, `file://`, `s3://` or `http(s)://` URL), or the first of
    /// several read as one dataset (shards); a glob pattern (`'data/train-*.beton'`) or an
    /// `s3://` prefix (`s3://bucket/train-`) names every match, sorted.
    pub file: PathBuf,
    /// More shards of the same dataset, after FILE (global sample ids run through the
    /// files in the order given).
    #[arg(value_name = "MORE")]
    pub more: Vec<PathBuf>,
    /// Only these fields, in this order (comma-separated names); all fields by default.
    #[arg(long, value_delimiter = ',')]
    pub fields: Option<Vec<String>>,
    /// The first sample to print.
    #[arg(long, default_value_t = 0)]
    pub start: u64,
    /// How many samples to print (default: all from --start on).
    #[arg(long)]
    pub count: Option<u64>,
    /// Also print the decoded bytes of bytes, ndarray and image fields as base64 (`b64`).
    #[arg(long)]
    pub raw: bool,
    /// Decode FIELD with a loader decoder instead, FIELD=SPEC (the help lists the SPECs).
    #[arg(long, value_name = "FIELD=SPEC", value_parser = ffcv::decode::parse_field_decoder,
          help = crate::pipeline_args::decoder_help())]
    pub decoder: Vec<(String, ffcv::DecoderChoice)>,
    /// Seed of random decoders (their output equals a loader's first epoch with this seed).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The largest image area (height x width pixels) decoded; a sample claiming more is
    /// an error naming it, before memory is sized from the claim.
    #[arg(long, value_name = "PIXELS", default_value_t = ffcv::decode::DEFAULT_MAX_IMAGE_PIXELS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_image_pixels: u64,
}

mod decoded;
mod fixed_bytes;
mod sparse;

/// How `dump` prints a field type its `SampleField::decode` does not know: one module per
/// type. A type with no entry is printed generically (`SampleField::generic`).
fn print_extension(field: &SampleField<'_>) -> Option<Result<JsonValue>> {
    match field.field.field_type {
        FieldType::FixedBytes(_) => Some(fixed_bytes::print(field)),
        _ => None,
    }
}

/// The most bytes of remote shards `dump` reads into memory (4 GiB).
const DUMP_MAX_REMOTE_BYTES: u64 = 1 << 32;

/// Runs `ffcv dump`.
pub fn run(args: &DumpArgs) -> Result<()> {
    let dataset = crate::dataset_args::open(&args.file, &args.more)?;
    let num_samples = dataset.reader.num_samples();
    let reader = if dataset.shards.is_empty() {
        // One remote object: only its structure and the samples asked for are fetched.
        let asked = args.start..args.count.map_or(num_samples, |c| {
            args.start.saturating_add(c).min(num_samples)
        });
        sparse::reader_for(dataset, asked)?
    } else {
        // A shard set's structure is synthetic (no shard holds it), so remote shards are
        // read whole, once.
        dataset.into_whole(DUMP_MAX_REMOTE_BYTES)?
    };
    let selected = select_fields(&reader, args.fields.as_deref())?;
    if args.start > num_samples {
        return Err(CliError::StartPastEnd {
            path: reader.path().to_path_buf(),
            start: args.start,
            num_samples,
        });
    }
    let end = match args.count {
        Some(count) => args.start.saturating_add(count).min(num_samples),
        None => num_samples,
    };
    decoded::check_fields(&reader, &args.decoder)?;
    let mut chosen = decoded::decode_range(
        &reader,
        &args.decoder,
        args.seed,
        args.start..end,
        args.raw,
        args.max_image_pixels,
    )?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for sample in args.start..end {
        let mut row = sample_row(&reader, &selected, sample, args.raw, args.max_image_pixels)?;
        decoded::patch(&mut row, chosen.remove(&sample), &args.decoder);
        let line = row.to_python_json();
        out.write_all(line.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .map_err(CliError::Stdout)?;
    }
    out.flush().map_err(CliError::Stdout)
}

/// The indices of the fields to print, in the order asked for.
fn select_fields(reader: &Reader, names: Option<&[String]>) -> Result<Vec<usize>> {
    let Some(names) = names else {
        return Ok((0..reader.fields().len()).collect());
    };
    names
        .iter()
        .map(|name| {
            reader
                .field_index(name)
                .ok_or_else(|| CliError::UnknownField {
                    path: reader.path().to_path_buf(),
                    name: name.clone(),
                    available: reader
                        .fields()
                        .iter()
                        .map(|field| field.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        })
        .collect()
}

/// One output line: `{"sample": ID, FIELD: VALUE, ...}`; images of more than
/// `max_image_pixels` pixels are refused.
pub fn sample_row(
    reader: &Reader,
    fields: &[usize],
    sample: u64,
    raw: bool,
    max_image_pixels: u64,
) -> Result<JsonValue> {
    let mut row = vec![("sample".to_owned(), int(sample))];
    for &index in fields {
        let field = &reader.fields()[index];
        let value = SampleField {
            reader,
            index,
            field,
            sample,
            raw,
            max_image_pixels,
        };
        match reader.metadata(sample, index)? {
            FieldMetadata::Float(x) => {
                row.push((field.name.clone(), float_value(x)));
                // FFCV's dump prints the bit pattern too, so NaN payloads and -0.0 compare exactly.
                row.push((format!("{}.bits", field.name), int(x.to_bits())));
            }
            metadata => row.push((field.name.clone(), value.decode(metadata)?)),
        }
    }
    Ok(JsonValue::Object(row))
}

/// An integer value.
fn int(value: impl Into<i128>) -> JsonValue {
    JsonValue::Int(value.into())
}

/// A string value.
fn string(value: impl Into<String>) -> JsonValue {
    JsonValue::String(value.into())
}

/// A float as a JSON number, or `"NaN"`, `"inf"`, `"-inf"`, which JSON cannot hold.
fn float_value(x: f64) -> JsonValue {
    if x.is_nan() {
        string("NaN")
    } else if x.is_infinite() {
        string(if x > 0.0 { "inf" } else { "-inf" })
    } else {
        JsonValue::Float(x)
    }
}

/// The context needed to decode one field of one sample, and to name it in errors.
struct SampleField<'a> {
    reader: &'a Reader,
    index: usize,
    field: &'a Field,
    sample: u64,
    raw: bool,
    max_image_pixels: u64,
}

impl SampleField<'_> {
    fn decode(&self, metadata: FieldMetadata) -> Result<JsonValue> {
        let mut object = Vec::new();
        match metadata {
            FieldMetadata::Int(value) => return Ok(int(value)),
            FieldMetadata::Float(x) => return Ok(float_value(x)),
            FieldMetadata::Json { .. } => {
                let bytes = self.stored()?;
                // FFCV stores `json.dumps(value)` followed by one NUL byte.
                let text = bytes.strip_suffix(b"\0").unwrap_or(bytes);
                let text = std::str::from_utf8(text)
                    .map_err(|err| self.bad(format!("stored JSON is not UTF-8: {err}")))?;
                // Python's json.loads semantics: key order, big ints, NaN/Infinity literals.
                return JsonValue::parse(text)
                    .map_err(|err| self.bad(format!("stored JSON is invalid: {err}")));
            }
            FieldMetadata::Bytes { .. } => {
                let bytes = self.stored()?;
                object.push(("len".into(), int(bytes.len() as u64)));
                self.digest_into(&mut object, "", bytes);
            }
            FieldMetadata::NdArray { .. } | FieldMetadata::TorchTensor { .. } => {
                let args = self.field.field_type.ndarray_args().ok_or_else(|| {
                    self.bad("array metadata on a field without array arguments".into())
                })?;
                object.push(("dtype".into(), string(args.dtype.descr())));
                object.push(("shape".into(), shape(&args.shape)));
                self.digest_into(&mut object, "", self.stored()?);
            }
            FieldMetadata::RgbImage {
                mode,
                width,
                height,
                ..
            } => {
                let (h, w) = (u64::from(height), u64::from(width));
                let mode_name = match mode {
                    IMAGE_MODE_RAW => "raw",
                    IMAGE_MODE_JPEG => "jpg",
                    other => {
                        return Err(self.bad(format!(
                            "unknown image mode {other} ({IMAGE_MODE_JPEG} = jpg, {IMAGE_MODE_RAW} = raw)"
                        )));
                    }
                };
                object.push(("mode".into(), string(mode_name)));
                object.push(("height".into(), int(h)));
                object.push(("width".into(), int(w)));
                object.push(("shape".into(), shape(&[h, w, 3])));
                let stored = self.stored()?;
                if mode == IMAGE_MODE_RAW {
                    // Raw images are stored as the decoded HxWx3 u8 pixels already.
                    self.digest_into(&mut object, "", stored);
                } else {
                    // The stored stream (`jpeg_len`, `jpeg_sha256`) identifies the file's
                    // bytes; `sha256` is of the full-resolution RGB decode.
                    object.push(("jpeg_len".into(), int(stored.len() as u64)));
                    object.push(("jpeg_sha256".into(), string(sha256_hex(stored))));
                    let pixels = self.decode_jpeg(stored, height, width)?;
                    self.digest_into(&mut object, "", &pixels);
                }
            }
            FieldMetadata::Custom => {
                // A custom field's meaning is known only to its handler: show its raw metadata.
                let bytes = self.reader.metadata_bytes(self.sample, self.index)?;
                object.push(("custom_metadata_len".into(), int(bytes.len() as u64)));
                self.digest_into(&mut object, "custom_metadata_", bytes);
            }
            _ => return print_extension(self).unwrap_or_else(|| self.generic()),
        }
        Ok(JsonValue::Object(object))
    }

    /// A field type this command has no printer for: its class name, its stored bytes'
    /// length and digest (if it stores any) and its metadata's digest.
    fn generic(&self) -> Result<JsonValue> {
        let mut object = vec![("type".into(), string(self.field.field_type.type_name()))];
        if let Some(stored) = self.reader.field_data(self.sample, self.index)? {
            object.push(("len".into(), int(stored.len() as u64)));
            self.digest_into(&mut object, "", stored);
        }
        let metadata = self.reader.metadata_bytes(self.sample, self.index)?;
        self.digest_into(&mut object, "metadata_", metadata);
        Ok(JsonValue::Object(object))
    }

    /// The full-resolution RGB pixels of a stored JPEG, which must have the size its
    /// metadata records (checked from the JPEG header before anything is allocated), at
    /// most `--max-image-pixels`.
    fn decode_jpeg(&self, jpeg: &[u8], height: u16, width: u16) -> Result<Vec<u8>> {
        // The loader's checks (area cap, header against metadata, a stream long enough for
        // its frame) before anything is sized from the claimed size.
        ffcv::decode::check_stored_image(
            jpeg,
            IMAGE_MODE_JPEG,
            height,
            width,
            self.max_image_pixels,
        )
        .map_err(|reason| self.bad(format!("cannot decode the JPEG: {reason}")))?;
        let cannot =
            |err: ffcv::image::ImageError| self.bad(format!("cannot decode the JPEG: {err}"));
        let pixels = usize::from(height) * usize::from(width) * 3;
        let image = ffcv::image::decode_jpeg(jpeg, pixels).map_err(cannot)?;
        Ok(image.into_pixels())
    }

    /// The field's stored bytes for this sample (validated against the allocation table).
    fn stored(&self) -> Result<&[u8]> {
        Ok(self
            .reader
            .field_data(self.sample, self.index)?
            .unwrap_or_default())
    }

    /// Adds `{prefix}sha256` and, with `--raw`, `{prefix}b64` of `bytes`.
    fn digest_into(&self, object: &mut Vec<(String, JsonValue)>, prefix: &str, bytes: &[u8]) {
        object.push((format!("{prefix}sha256"), string(sha256_hex(bytes))));
        if self.raw {
            let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
            object.push((format!("{prefix}b64"), string(b64)));
        }
    }

    fn bad(&self, reason: String) -> CliError {
        CliError::BadValue {
            path: self.reader.path().to_path_buf(),
            sample: self.sample,
            field: self.field.name.clone(),
            reason,
        }
    }
}

/// A shape as a JSON list of integers.
fn shape(dims: &[u64]) -> JsonValue {
    JsonValue::Array(dims.iter().map(|&d| int(d)).collect())
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}
