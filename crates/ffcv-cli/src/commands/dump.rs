//! `ffcv dump FILE [--fields a,b] [--start I] [--count N] [--raw]`: every sample as one JSON line.
//!
//! Each field is decoded by its default decoder and printed in the shape the design's CLI
//! contract fixes (scripts compare these lines with FFCV's own dump). Lines are written in
//! Python's `json.dumps` style (see [`crate::pyjson`]) so they can be diffed textually too.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use base64::Engine as _;
use beton_io::{Field, FieldMetadata, IMAGE_MODE_JPEG, IMAGE_MODE_RAW, Reader};
use serde_json::{Map, Number, Value, json};
use sha2::{Digest, Sha256};

use crate::error::{CliError, Result};
use crate::pyjson;

/// Arguments of `ffcv dump`.
#[derive(clap::Args, Debug)]
pub struct DumpArgs {
    /// The .beton file.
    pub file: PathBuf,
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
}

/// Runs `ffcv dump`.
pub fn run(args: &DumpArgs) -> Result<()> {
    let reader = Reader::open(&args.file)?;
    let selected = select_fields(&reader, args.fields.as_deref())?;
    let num_samples = reader.num_samples();
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
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for sample in args.start..end {
        let row = sample_row(&reader, &selected, sample, args.raw)?;
        let line = pyjson::to_line(&row).map_err(|err| CliError::BadValue {
            path: reader.path().to_path_buf(),
            sample,
            field: String::new(),
            reason: format!("cannot format as JSON: {err}"),
        })?;
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

/// One output line: `{"sample": ID, FIELD: VALUE, ...}`.
pub fn sample_row(reader: &Reader, fields: &[usize], sample: u64, raw: bool) -> Result<Value> {
    let mut row = Map::new();
    row.insert("sample".into(), json!(sample));
    for &index in fields {
        let field = &reader.fields()[index];
        let value = FieldValue {
            reader,
            index,
            field,
            sample,
            raw,
        };
        match reader.metadata(sample, index)? {
            FieldMetadata::Float(x) => {
                row.insert(field.name.clone(), float_value(x));
                // FFCV's dump prints the bit pattern too, so NaN payloads and -0.0 compare exactly.
                row.insert(format!("{}.bits", field.name), json!(x.to_bits()));
            }
            metadata => {
                row.insert(field.name.clone(), value.decode(metadata)?);
            }
        }
    }
    Ok(Value::Object(row))
}

/// A float as a JSON number, or `"NaN"`, `"inf"`, `"-inf"`, which JSON cannot hold.
fn float_value(x: f64) -> Value {
    match Number::from_f64(x) {
        Some(number) => Value::Number(number),
        None if x.is_nan() => json!("NaN"),
        None if x > 0.0 => json!("inf"),
        None => json!("-inf"),
    }
}

/// The context needed to decode one field of one sample, and to name it in errors.
struct FieldValue<'a> {
    reader: &'a Reader,
    index: usize,
    field: &'a Field,
    sample: u64,
    raw: bool,
}

impl FieldValue<'_> {
    fn decode(&self, metadata: FieldMetadata) -> Result<Value> {
        let mut object = Map::new();
        match metadata {
            FieldMetadata::Int(value) => return Ok(json!(value)),
            FieldMetadata::Float(x) => return Ok(float_value(x)),
            FieldMetadata::Json { .. } => {
                let bytes = self.stored()?;
                // FFCV stores `json.dumps(value)` followed by one NUL byte.
                let text = bytes.strip_suffix(b"\0").unwrap_or(bytes);
                return serde_json::from_slice(text).map_err(|source| CliError::InvalidJson {
                    path: self.reader.path().to_path_buf(),
                    sample: self.sample,
                    field: self.field.name.clone(),
                    source,
                });
            }
            FieldMetadata::Bytes { .. } => {
                let bytes = self.stored()?;
                object.insert("len".into(), json!(bytes.len()));
                self.digest_into(&mut object, "", bytes);
            }
            FieldMetadata::NdArray { .. } | FieldMetadata::TorchTensor { .. } => {
                let args = self.field.field_type.ndarray_args().ok_or_else(|| {
                    self.bad("array metadata on a field without array arguments".into())
                })?;
                object.insert("dtype".into(), json!(args.dtype.descr()));
                object.insert("shape".into(), json!(args.shape));
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
                object.insert("mode".into(), json!(mode_name));
                object.insert("height".into(), json!(h));
                object.insert("width".into(), json!(w));
                object.insert("shape".into(), json!([h, w, 3]));
                let stored = self.stored()?;
                if mode == IMAGE_MODE_RAW {
                    // Raw images are stored as the decoded HxWx3 u8 pixels already.
                    self.digest_into(&mut object, "", stored);
                } else {
                    // Seam for the JPEG decoder (the facade's image decoding): until it lands,
                    // the stored JPEG stream is reported (`jpeg_len`, `jpeg_sha256`, and
                    // `jpeg_b64` with --raw) instead of the decoded pixels' `sha256`.
                    object.insert("jpeg_len".into(), json!(stored.len()));
                    self.digest_into(&mut object, "jpeg_", stored);
                }
            }
            FieldMetadata::Custom => {
                // A custom field's meaning is known only to its handler: show its raw metadata.
                let bytes = self.reader.metadata_bytes(self.sample, self.index)?;
                object.insert("custom_metadata_len".into(), json!(bytes.len()));
                self.digest_into(&mut object, "custom_metadata_", bytes);
            }
        }
        Ok(Value::Object(object))
    }

    /// The field's stored bytes for this sample (validated against the allocation table).
    fn stored(&self) -> Result<&[u8]> {
        Ok(self
            .reader
            .field_data(self.sample, self.index)?
            .unwrap_or_default())
    }

    /// Adds `{prefix}sha256` and, with `--raw`, `{prefix}b64` of `bytes`.
    fn digest_into(&self, object: &mut Map<String, Value>, prefix: &str, bytes: &[u8]) {
        object.insert(format!("{prefix}sha256"), json!(sha256_hex(bytes)));
        if self.raw {
            let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
            object.insert(format!("{prefix}b64"), json!(b64));
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

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}
