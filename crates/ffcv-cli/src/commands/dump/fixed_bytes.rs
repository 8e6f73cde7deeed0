//! How `ffcv dump` prints a `FixedBytesField` (ffcv-rs's type id 128): `{"len", "sha256"}`
//! of the stored bytes, and `b64` with `--raw`, like a bytes field.

use beton_io::JsonValue;

use super::field::{SampleField, int};
use crate::error::Result;

/// The printed value of one sample of a `FixedBytesField`.
pub(super) fn print(field: &SampleField<'_>) -> Result<JsonValue> {
    let bytes = field.stored()?;
    let mut object = vec![("len".to_owned(), int(bytes.len() as u64))];
    field.digest_into(&mut object, "", bytes);
    Ok(JsonValue::Object(object))
}
