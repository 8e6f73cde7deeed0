//! `ffcv dump FILE [--fields a,b] [--start I] [--count N] [--raw]`: every sample as one JSON line.
//!
//! Each field is decoded by its default decoder and printed in the shape the design's CLI
//! contract fixes (scripts compare these lines with FFCV's own dump). Lines are written in
//! Python's `json.dumps` style ([`JsonValue::to_python_json`]: `", "` separators, ASCII
//! escapes, float `repr`), so they can be diffed textually with FFCV's dump too.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use beton_io::{FieldMetadata, FieldType, IMAGE_MODE_JPEG, IMAGE_MODE_RAW, JsonValue, Reader};

use crate::error::{CliError, Result};
use field::{SampleField, float_value, int, sha256_hex, shape, string};

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
mod field;
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
            metadata => row.push((field.name.clone(), decode(&value, metadata)?)),
        }
    }
    Ok(JsonValue::Object(row))
}

/// The printed value of one field of one sample: the built-in types here, the others
/// through [`print_extension`].
fn decode(field: &SampleField<'_>, metadata: FieldMetadata) -> Result<JsonValue> {
    let mut object = Vec::new();
    match metadata {
        FieldMetadata::Int(value) => return Ok(int(value)),
        FieldMetadata::Float(x) => return Ok(float_value(x)),
        FieldMetadata::Json { .. } => {
            let bytes = field.stored()?;
            // FFCV stores `json.dumps(value)` followed by one NUL byte.
            let text = bytes.strip_suffix(b"\0").unwrap_or(bytes);
            let text = std::str::from_utf8(text)
                .map_err(|err| field.bad(format!("stored JSON is not UTF-8: {err}")))?;
            // Python's json.loads semantics: key order, big ints, NaN/Infinity literals.
            return JsonValue::parse(text)
                .map_err(|err| field.bad(format!("stored JSON is invalid: {err}")));
        }
        FieldMetadata::Bytes { .. } => {
            let bytes = field.stored()?;
            object.push(("len".into(), int(bytes.len() as u64)));
            field.digest_into(&mut object, "", bytes);
        }
        FieldMetadata::NdArray { .. } | FieldMetadata::TorchTensor { .. } => {
            let args = field.field.field_type.ndarray_args().ok_or_else(|| {
                field.bad("array metadata on a field without array arguments".into())
            })?;
            object.push(("dtype".into(), string(args.dtype.descr())));
            object.push(("shape".into(), shape(&args.shape)));
            field.digest_into(&mut object, "", field.stored()?);
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
                    return Err(field.bad(format!(
                        "unknown image mode {other} ({IMAGE_MODE_JPEG} = jpg, {IMAGE_MODE_RAW} = raw)"
                    )));
                }
            };
            object.push(("mode".into(), string(mode_name)));
            object.push(("height".into(), int(h)));
            object.push(("width".into(), int(w)));
            object.push(("shape".into(), shape(&[h, w, 3])));
            let stored = field.stored()?;
            if mode == IMAGE_MODE_RAW {
                // Raw images are stored as the decoded HxWx3 u8 pixels already.
                field.digest_into(&mut object, "", stored);
            } else {
                // The stored stream (`jpeg_len`, `jpeg_sha256`) identifies the file's
                // bytes; `sha256` is of the full-resolution RGB decode.
                object.push(("jpeg_len".into(), int(stored.len() as u64)));
                object.push(("jpeg_sha256".into(), string(sha256_hex(stored))));
                let pixels = field.decode_jpeg(stored, height, width)?;
                field.digest_into(&mut object, "", &pixels);
            }
        }
        FieldMetadata::Custom => {
            // A custom field's meaning is known only to its handler: show its raw metadata.
            let bytes = field.reader.metadata_bytes(field.sample, field.index)?;
            object.push(("custom_metadata_len".into(), int(bytes.len() as u64)));
            field.digest_into(&mut object, "custom_metadata_", bytes);
        }
        _ => return print_extension(field).unwrap_or_else(|| field.generic()),
    }
    Ok(JsonValue::Object(object))
}
