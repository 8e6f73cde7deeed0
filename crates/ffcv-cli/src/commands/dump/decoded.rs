//! `ffcv dump --decoder FIELD=SPEC [--seed S]`: fields decoded by a chosen loader decoder.
//!
//! The chosen fields go through the real [`ffcv::Loader`] (sequential order over the
//! dumped range, epoch 0, the given seed), so a random decoder's output is exactly what a
//! loader with that seed yields in its first epoch, and any decoder's output can be
//! compared with FFCV's. Each such field prints as
//! `{"decoder", "dtype", "shape", "sha256"}` (+ `"len"` for byte rows, `"b64"` with `--raw`).

use std::collections::HashMap;
use std::ops::Range;

use base64::Engine as _;
use beton_io::{JsonValue, Reader};
use ffcv::{DecoderChoice, Loader, Order};

use super::field::sha256_hex;
use crate::error::{CliError, Result};

/// The decoded values of the chosen fields, per sample.
pub(super) type Decoded = HashMap<u64, Vec<(String, JsonValue)>>;

/// Samples per loader batch (small: dump is not a benchmark).
const BATCH: usize = 16;

/// Decodes the `--decoder` fields of the samples in `range`.
pub(super) fn decode_range(
    reader: &std::sync::Arc<Reader>,
    decoders: &[(String, DecoderChoice)],
    seed: u64,
    range: Range<u64>,
    raw: bool,
    max_image_pixels: u64,
) -> Result<Decoded> {
    let mut decoded = Decoded::new();
    let enabled: Vec<&(String, DecoderChoice)> = decoders
        .iter()
        .filter(|(_, c)| !matches!(c, DecoderChoice::Disabled))
        .collect();
    if enabled.is_empty() || range.is_empty() {
        return Ok(decoded);
    }
    // The reader already opened (a local map, a remote object or shards read whole):
    // its path may name a shard set or a URL that opening again would cost.
    let mut builder = Loader::builder(reader.path())
        .reader(std::sync::Arc::clone(reader))
        .batch_size(BATCH)
        .drop_last(false)
        .order(Order::Sequential)
        .num_workers(1)
        .seed(seed)
        .max_image_pixels(max_image_pixels)
        .indices(range.collect::<Vec<u64>>());
    for field in reader.fields() {
        builder = match enabled.iter().find(|(name, _)| *name == field.name) {
            Some((name, choice)) => builder.decoder(name.clone(), choice.clone()),
            None => builder.disable(field.name.clone()),
        };
    }
    let mut loader = builder.build()?;
    let names: HashMap<String, String> = enabled
        .iter()
        .map(|(name, choice)| {
            let decoder = match choice {
                DecoderChoice::Decoder(d) => d.name(),
                _ => "default".to_owned(),
            };
            (name.clone(), decoder)
        })
        .collect();
    for batch in loader.iter() {
        let batch = batch?;
        for info in batch.outputs() {
            let output = batch.output(&info.name)?;
            for (row, &sample) in batch.sample_ids().iter().enumerate() {
                let bytes = output.value(row);
                let mut value = vec![
                    (
                        "decoder".to_owned(),
                        JsonValue::String(names.get(&info.name).cloned().unwrap_or_default()),
                    ),
                    (
                        "dtype".to_owned(),
                        JsonValue::String(info.dtype.descr().to_string()),
                    ),
                    (
                        "shape".to_owned(),
                        JsonValue::Array(
                            info.shape
                                .iter()
                                .map(|&d| JsonValue::Int(d as i128))
                                .collect(),
                        ),
                    ),
                ];
                if info.kind.has_lengths() {
                    value.push(("len".to_owned(), JsonValue::Int(bytes.len() as i128)));
                }
                value.push(("sha256".to_owned(), JsonValue::String(sha256_hex(bytes))));
                if raw {
                    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                    value.push(("b64".to_owned(), JsonValue::String(b64)));
                }
                decoded
                    .entry(sample)
                    .or_default()
                    .push((info.name.clone(), JsonValue::Object(value)));
            }
        }
    }
    Ok(decoded)
}

/// Replaces (or adds) the chosen fields' values in a dump row, and drops the fields
/// given `none`.
pub(super) fn patch(
    row: &mut JsonValue,
    values: Option<Vec<(String, JsonValue)>>,
    decoders: &[(String, DecoderChoice)],
) {
    let JsonValue::Object(entries) = row else {
        return;
    };
    for (name, choice) in decoders {
        if matches!(choice, DecoderChoice::Disabled) {
            entries.retain(|(key, _)| key != name && *key != format!("{name}.bits"));
        }
    }
    for (name, value) in values.unwrap_or_default() {
        entries.retain(|(key, _)| *key != format!("{name}.bits"));
        match entries.iter_mut().find(|(key, _)| *key == name) {
            Some(entry) => entry.1 = value,
            None => entries.push((name, value)),
        }
    }
}

/// Checks every `--decoder` field exists.
pub(super) fn check_fields(reader: &Reader, decoders: &[(String, DecoderChoice)]) -> Result<()> {
    for (name, _) in decoders {
        if reader.field_index(name).is_none() {
            return Err(CliError::UnknownField {
                path: reader.path().to_path_buf(),
                name: name.clone(),
                available: reader
                    .fields()
                    .iter()
                    .map(|field| field.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(())
}
