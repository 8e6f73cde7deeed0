//! Which members of a WebDataset record become which `.beton` fields, and their values.
//!
//! A field is `NAME=EXT:KIND`: the member with extension EXT, stored as KIND. Without
//! `--field` flags the fields are the first record's members in tar order, each named by
//! its extension (non-alphanumeric characters as `_`, at most 16 bytes) and typed by it:
//! `jpg`/`jpeg`/`png` images, `cls` ints, `json` JSON, `npy` arrays, anything else bytes.
//! An `array` field's dtype and shape are the first record's `.npy` header's; every
//! record must match them. Values follow the Python loaders WebDataset uses: a `cls`
//! member is an integer in ASCII (surrounding whitespace allowed, as Python's `int`), a
//! `json` member is UTF-8 JSON (kept as `json.loads` keeps it), an image is decoded as
//! `PIL.Image.open(f).convert("RGB")` and stored by the image options.

use beton_io::{FieldSpec, FieldType, FieldValue, JsonValue, NdArrayArgs, NumpyDtype};
use ffcv::image::{ImageMode, read_image_bytes};

use crate::error::{Error, Result};
use crate::jpeg_passthrough::{ImageStore, StoreError};
use crate::webdataset::{Record, Shards};

/// How a member is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An RGB image (`RGBImageField`).
    Image,
    /// An integer (`IntField`).
    Int,
    /// A JSON value (`JSONField`).
    Json,
    /// A `.npy` array of fixed dtype and shape (`NDArrayField`).
    Array,
    /// The member's bytes (`BytesField`).
    Bytes,
}

impl Kind {
    /// The kind's name in `--field`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Image => "image",
            Kind::Int => "int",
            Kind::Json => "json",
            Kind::Array => "array",
            Kind::Bytes => "bytes",
        }
    }

    fn parse(text: &str) -> Option<Kind> {
        [Kind::Image, Kind::Int, Kind::Json, Kind::Array, Kind::Bytes]
            .into_iter()
            .find(|k| k.name() == text)
    }

    /// The kind an extension gets when the fields are inferred.
    pub fn of_extension(ext: &str) -> Kind {
        match ext {
            "jpg" | "jpeg" | "png" => Kind::Image,
            "cls" => Kind::Int,
            "json" => Kind::Json,
            "npy" => Kind::Array,
            _ => Kind::Bytes,
        }
    }
}

/// One field: its name, the extension it comes from, its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldMap {
    /// The field's name in the `.beton` file.
    pub name: String,
    /// The member's extension.
    pub ext: String,
    /// How it is stored.
    pub kind: Kind,
}

impl FieldMap {
    /// Parses `NAME=EXT:KIND` (a usage error otherwise).
    pub fn parse(text: &str) -> Result<FieldMap> {
        let bad = |why: &str| {
            Error::Usage(format!(
                "--field {text}: {why} (expected NAME=EXT:KIND, KIND one of image, int, json, \
                 array, bytes)"
            ))
        };
        let (name, rest) = text.split_once('=').ok_or_else(|| bad("no `=`"))?;
        let (ext, kind) = rest.rsplit_once(':').ok_or_else(|| bad("no `:`"))?;
        if name.is_empty() || ext.is_empty() {
            return Err(bad("empty name or extension"));
        }
        let kind = Kind::parse(kind).ok_or_else(|| bad(&format!("unknown kind `{kind}`")))?;
        Ok(FieldMap {
            name: name.to_owned(),
            ext: ext.to_ascii_lowercase(),
            kind,
        })
    }

    /// The flag that gives this field: `NAME=EXT:KIND`.
    pub fn flag(&self) -> String {
        format!("{}={}:{}", self.name, self.ext, self.kind.name())
    }
}

/// The fields inferred from `record` (see the module docs).
pub fn infer(record: &Record) -> Vec<FieldMap> {
    record
        .members
        .iter()
        .map(|m| {
            let mut name: String = m
                .ext
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            name.truncate(16);
            FieldMap {
                name,
                ext: m.ext.clone(),
                kind: Kind::of_extension(&m.ext),
            }
        })
        .collect()
}

/// The fields with their types, as the writer takes them; `array` fields take the dtype
/// and shape of `first`'s member.
pub fn field_specs(maps: &[FieldMap], shards: &Shards, first: &Record) -> Result<Vec<FieldSpec>> {
    maps.iter()
        .map(|map| {
            let field_type = match map.kind {
                Kind::Image => FieldType::RgbImage,
                Kind::Int => FieldType::Int,
                Kind::Json => FieldType::Json,
                Kind::Bytes => FieldType::Bytes,
                Kind::Array => {
                    let fail = |reason: String| {
                        crate::webdataset::shard_error(
                            shards.path_of(first),
                            format!(
                                "record `{}`: field `{}` (from `{}`): {reason}",
                                first.key, map.name, map.ext
                            ),
                        )
                    };
                    let member = first
                        .member(&map.ext)
                        .ok_or_else(|| fail("the first record has no such member".into()))?;
                    let bytes = shards.read(first, member).map_err(fail)?;
                    let npy = parse_npy(&bytes).map_err(fail)?;
                    FieldType::NdArray(NdArrayArgs::new(npy.dtype, npy.shape))
                }
            };
            Ok(FieldSpec::new(map.name.clone(), field_type))
        })
        .collect()
}

/// What converting a record needs besides the record.
pub struct Converter<'a> {
    /// The scanned shards.
    pub shards: &'a Shards,
    /// The fields.
    pub maps: &'a [FieldMap],
    /// Their types (for the arrays' dtype and shape).
    pub specs: &'a [FieldSpec],
    /// How images are stored (the image options, `--seed`, `--jpeg-passthrough`).
    pub images: &'a ImageStore,
}

impl Converter<'_> {
    /// The values of `record`, written as sample `index` of the dataset (which picks its
    /// `proportion` draw); with `check_only`, images are decoded but not encoded (the
    /// values are then not for writing). An error names the shard and the record key.
    pub fn convert(
        &self,
        record: &Record,
        index: u64,
        check_only: bool,
    ) -> std::result::Result<(Vec<FieldValue>, Option<ImageMode>), String> {
        let context = |reason: String| {
            format!(
                "{}: record `{}`: {reason}",
                // A fetched shard is named by its URL, not its staging copy.
                crate::object_io::display_name(self.shards.path_of(record)),
                record.key
            )
        };
        if let Some(problem) = &record.problem {
            return Err(context(problem.clone()));
        }
        let mut values = Vec::with_capacity(self.maps.len());
        let mut mode = None;
        for (map, spec) in self.maps.iter().zip(self.specs) {
            let field = |reason: String| {
                context(format!(
                    "field `{}` (from `{}`): {reason}",
                    map.name, map.ext
                ))
            };
            let member = record.member(&map.ext).ok_or_else(|| {
                let has: Vec<&str> = record.members.iter().map(|m| m.ext.as_str()).collect();
                context(format!(
                    "no `{}` member for field `{}` (the record has: {})",
                    map.ext,
                    map.name,
                    has.join(", ")
                ))
            })?;
            let bytes = self.shards.read(record, member).map_err(context)?;
            let value = match map.kind {
                Kind::Bytes => FieldValue::Bytes(bytes),
                Kind::Int => FieldValue::Int(parse_int(&bytes).map_err(field)?),
                Kind::Json => {
                    let text = std::str::from_utf8(&bytes)
                        .map_err(|e| field(format!("not UTF-8: {e}")))?;
                    FieldValue::Json(
                        JsonValue::parse(text).map_err(|e| field(format!("bad JSON: {e}")))?,
                    )
                }
                Kind::Array => {
                    let npy = parse_npy(&bytes).map_err(field)?;
                    let want = spec.field_type.ndarray_args();
                    if want.is_none_or(|a| a.dtype != npy.dtype || a.shape != npy.shape) {
                        return Err(field(format!(
                            "array of dtype {} and shape {:?}, the field's is {}",
                            npy.dtype.descr(),
                            npy.shape,
                            want.map_or_else(String::new, |a| format!(
                                "dtype {} and shape {:?}",
                                a.dtype.descr(),
                                a.shape
                            ))
                        )));
                    }
                    FieldValue::NdArray(bytes[npy.data_start..].to_vec())
                }
                Kind::Image => {
                    if check_only {
                        read_image_bytes(&bytes)
                            .map_err(|e| field(format!("cannot decode the image: {e}")))?;
                        FieldValue::Int(0)
                    } else {
                        let encoded = self.images.store(&bytes, index).map_err(|e| match e {
                            StoreError::Decode(e) => field(format!("cannot decode the image: {e}")),
                            StoreError::Encode(e) => field(format!("cannot encode the image: {e}")),
                        })?;
                        mode.get_or_insert(encoded.mode);
                        encoded.into()
                    }
                }
            };
            values.push(value);
        }
        Ok((values, mode))
    }
}

/// A `cls` member: an ASCII decimal integer, optionally signed, with surrounding
/// whitespace (Python's `int(text)` without underscores).
pub fn parse_int(bytes: &[u8]) -> std::result::Result<i64, String> {
    let preview = || {
        let shown: String = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned();
        format!("{shown:?}{}", if bytes.len() > 40 { "…" } else { "" })
    };
    let text = std::str::from_utf8(bytes)
        .map_err(|_| format!("not an integer: {}", preview()))?
        .trim();
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("not an integer: {}", preview()));
    }
    text.strip_prefix('+')
        .unwrap_or(text)
        .parse::<i64>()
        .map_err(|_| format!("integer out of the int64 range: {}", preview()))
}

/// What a `.npy` header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Npy {
    /// The dtype (`descr`).
    pub dtype: NumpyDtype,
    /// The shape (C order).
    pub shape: Vec<u64>,
    /// Where the data starts in the member.
    pub data_start: usize,
}

/// Parses a `.npy` file (format versions 1 to 3): a C-ordered array of a plain dtype with
/// 1 to 32 dimensions, the last one non-zero (what an `NDArrayField` can hold), whose
/// data is exactly the rest of the file.
pub fn parse_npy(bytes: &[u8]) -> std::result::Result<Npy, String> {
    let rest = bytes
        .strip_prefix(b"\x93NUMPY")
        .ok_or("not a .npy file (no \\x93NUMPY magic)")?;
    let (&major, rest) = rest.split_first().ok_or("truncated .npy header")?;
    let rest = rest.get(1..).ok_or("truncated .npy header")?;
    let (header_len, rest, prefix) = match major {
        1 => {
            let len = rest.get(..2).ok_or("truncated .npy header")?;
            (
                u16::from_le_bytes([len[0], len[1]]) as usize,
                &rest[2..],
                10,
            )
        }
        2 | 3 => {
            let len = rest.get(..4).ok_or("truncated .npy header")?;
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
            (
                usize::try_from(len).map_err(|_| "bad .npy header length")?,
                &rest[4..],
                12,
            )
        }
        v => return Err(format!(".npy format version {v} is not supported")),
    };
    let header = rest
        .get(..header_len)
        .ok_or_else(|| format!(".npy header of {header_len} bytes runs past the member"))?;
    let header = std::str::from_utf8(header).map_err(|_| ".npy header is not text")?;
    let descr = dict_value(header, "descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.strip_suffix('\''))
        .ok_or_else(|| format!("structured dtype {descr} is not supported"))?;
    let dtype = NumpyDtype::from_numpy_name(descr).map_err(|e| format!("dtype {descr}: {e}"))?;
    if dict_value(header, "fortran_order")? != "False" {
        return Err("Fortran-ordered arrays are not supported (save a C-ordered array)".into());
    }
    let shape_text = dict_value(header, "shape")?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("bad shape {shape_text}"))?;
    let shape = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u64>()
                .map_err(|_| format!("bad shape {shape_text}"))
        })
        .collect::<std::result::Result<Vec<u64>, String>>()?;
    if shape.is_empty() || shape.len() > 32 || shape.last() == Some(&0) {
        return Err(format!(
            "shape {shape_text} cannot be an array field (1 to 32 dimensions, the last one \
             non-zero; store it with KIND bytes instead)"
        ));
    }
    let data_start = prefix + header_len;
    let expected = shape
        .iter()
        .try_fold(dtype.item_size(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format!("shape {shape_text} is too large"))?;
    let actual = (bytes.len() - data_start) as u64;
    if actual != expected {
        return Err(format!(
            ".npy data is {actual} bytes, its header's dtype {descr} and shape {shape_text} \
             need {expected}"
        ));
    }
    Ok(Npy {
        dtype,
        shape,
        data_start,
    })
}

/// The text of `'key': VALUE` in a `.npy` header's Python dict literal, up to the next
/// top-level comma or the closing brace.
fn dict_value<'a>(header: &'a str, key: &str) -> std::result::Result<&'a str, String> {
    let pattern = format!("'{key}':");
    let start = header
        .find(&pattern)
        .ok_or_else(|| format!(".npy header has no `{key}`"))?
        + pattern.len();
    let text = &header[start..];
    let mut depth = 0usize;
    let mut in_quote = false;
    for (i, c) in text.char_indices() {
        match c {
            '\'' => in_quote = !in_quote,
            '(' | '[' if !in_quote => depth += 1,
            ')' | ']' if !in_quote => depth = depth.saturating_sub(1),
            ',' | '}' if !in_quote && depth == 0 => return Ok(text[..i].trim()),
            _ => {}
        }
    }
    Err(format!(".npy header's `{key}` is not closed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str, data: &[u8]) -> Vec<u8> {
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn npy_headers() {
        let a = npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
            &[0; 24],
        );
        let parsed = parse_npy(&a).unwrap();
        assert_eq!(parsed.shape, [2, 3]);
        assert_eq!(parsed.dtype, NumpyDtype::f32());
        let one = npy(
            "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }",
            &[1; 5],
        );
        assert_eq!(parse_npy(&one).unwrap().shape, [5]);
        let short = npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            &[0; 7],
        );
        assert!(parse_npy(&short).unwrap_err().contains("need 8"));
        let f = npy(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
            &[0; 4],
        );
        assert!(parse_npy(&f).unwrap_err().contains("Fortran"));
        let scalar = npy(
            "{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
            &[0; 8],
        );
        assert!(parse_npy(&scalar).is_err());
        assert!(parse_npy(b"\x93NUMPY\x01\x00\xff\xff{").is_err());
    }

    #[test]
    fn ints_and_field_flags() {
        assert_eq!(parse_int(b" 42\n"), Ok(42));
        assert_eq!(parse_int(b"-7"), Ok(-7));
        assert!(parse_int(b"4.2").is_err());
        assert!(parse_int(b"").is_err());
        assert!(
            parse_int(b"99999999999999999999")
                .unwrap_err()
                .contains("range")
        );
        let f = FieldMap::parse("label=cls:int").unwrap();
        assert_eq!(
            (f.name.as_str(), f.ext.as_str(), f.kind),
            ("label", "cls", Kind::Int)
        );
        assert_eq!(FieldMap::parse("seg=seg.png:image").unwrap().ext, "seg.png");
        assert!(FieldMap::parse("x=jpg").is_err());
        assert!(FieldMap::parse("x=jpg:picture").is_err());
    }
}
