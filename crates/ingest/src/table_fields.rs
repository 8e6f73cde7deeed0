//! Columns of a table (Parquet, Arrow IPC) or features of a TFRecord `Example` as
//! `.beton` fields, for `ffcv write parquet`, `arrow` and `tfrecord`.
//!
//! Each source reads a record as [`Cell`]s, one per column it is asked for, through the
//! [`Table`] trait; this module maps columns to fields and cells to values. A field is
//! `NAME=COLUMN:KIND`. Without `--field` flags the fields are inferred from the first
//! record's cells, column by column in the source's order ([`infer`]): an image struct
//! (`{bytes, path}`, Hugging Face's `Image` feature) or a byte string that starts like a
//! JPEG or PNG file is an image; integers and booleans are ints; floats are floats;
//! strings and other byte strings are bytes; numeric lists are arrays (the first
//! record's dtype and shape; a one-element TFRecord list is an int or a float); lists of
//! strings, and empty lists, are JSON. A column no kind takes, or null in the first record, is left out and
//! named. Values are kept exactly: integers as `IntField` (int64), floats as
//! `FloatField` (float64), array elements in their own dtype.
//!
//! A source with a schema (Parquet, Arrow IPC) says more than its first record: a column
//! whose type is a variable-size list (`List`, `LargeList`) of numbers, or of lists of
//! numbers, is `var_array` (a `VarArrayField`: each record any number of rows, 0 too),
//! whatever the first record's length; a `FixedSizeList` stays `array`. TFRecord has no
//! schema (every feature is a list), so its lists are inferred as above and are
//! `var_array` only when `--field` says so ([`Table::var_list_columns`]). A `var_array`
//! field's element dtype and row shape (the shape of one row: `[]` for a flat list, `[2]`
//! for lists of pairs) are the first record's; a record whose list is empty says nothing
//! of its rows, so the first record with a row gives them then. Every record must have
//! that dtype and row shape.

use std::path::Path;

use beton_io::{
    ByteOrder, FieldSpec, FieldType, FieldValue, JsonValue, NdArrayArgs, NumpyDtype, NumpyKind,
    VarArrayArgs,
};
use ffcv::image::{ImageMode, read_image_bytes};

use crate::error::{Error, Result};
use crate::jpeg_passthrough::{ImageStore, StoreError};

/// One value of a record's column, as the source holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// No value (a null, or a column the record lacks).
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A float (float16 and float32 widened exactly).
    Float(f64),
    /// A UTF-8 string.
    Str(String),
    /// A byte string.
    Bytes(Vec<u8>),
    /// An image struct (`{bytes, path}`): the encoded file.
    Image(Vec<u8>),
    /// A numeric list, possibly nested: a C-ordered array.
    Array(Array),
    /// A list of other values (strings, byte strings, structs).
    List(Vec<Cell>),
    /// A value of a type no kind takes (a timestamp, a struct that is not an image), as
    /// described in errors.
    Other(String),
}

/// A numeric array cell: elements of one numpy dtype, little-endian, C order.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// The element dtype.
    pub dtype: NumpyDtype,
    /// The shape (one entry per list level).
    pub shape: Vec<u64>,
    /// The elements' bytes.
    pub data: Vec<u8>,
}

impl Array {
    /// The one element of a one-element integer array.
    fn single_int(&self) -> Option<i64> {
        let n = self.dtype.item_size() as usize;
        if self.data.len() != n || self.shape.iter().product::<u64>() != 1 {
            return None;
        }
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&self.data);
        match self.dtype.kind() {
            // Sign-extend from the element's width.
            NumpyKind::Int => Some(i64::from_le_bytes(b) << (64 - 8 * n) >> (64 - 8 * n)),
            NumpyKind::UInt => i64::try_from(u64::from_le_bytes(b)).ok(),
            _ => None,
        }
    }

    /// The one element of a one-element float32/float64 array.
    fn single_float(&self) -> Option<f64> {
        if self.dtype.kind() != NumpyKind::Float || self.shape.iter().product::<u64>() != 1 {
            return None;
        }
        match self.data.as_slice() {
            [a, b, c, d] => Some(f64::from(f32::from_le_bytes([*a, *b, *c, *d]))),
            d if d.len() == 8 => Some(f64::from_le_bytes(d.try_into().ok()?)),
            _ => None,
        }
    }
}

/// The dtype of little-endian elements of `kind` and `size` bytes.
pub fn dtype(kind: NumpyKind, size: u64) -> NumpyDtype {
    NumpyDtype::numeric(kind, size, ByteOrder::Little).unwrap_or_else(NumpyDtype::u8)
}

/// A set of records with named columns: Parquet or Arrow IPC files, or TFRecord files.
pub trait Table: Sync {
    /// What the source's files are called in messages (`Parquet`, `TFRecord`).
    fn format(&self) -> &'static str;
    /// The files, sorted.
    fn paths(&self) -> &[std::path::PathBuf];
    /// Number of records in all files.
    fn num_records(&self) -> usize;
    /// The file of record `i`, its number in the file, and where it is in words (`row
    /// 12`, `record 3 (offset 4096)`).
    fn locate(&self, i: usize) -> (&Path, u64, String);
    /// The column names, in the source's order (a TFRecord's: its first record's keys).
    fn columns(&self) -> Vec<String>;
    /// Record `i`'s cells of `columns` (a column the record lacks is [`Cell::Null`]); an
    /// error says what is wrong with the record (its file and place are added).
    fn cells(&self, i: usize, columns: &[&str]) -> std::result::Result<Vec<Cell>, String>;
    /// Files whose structure broke off, with the reason: their records before the break
    /// were kept (only when the table was opened to keep going).
    fn broken(&self) -> &[(std::path::PathBuf, String)];
    /// The columns whose schema type is a variable-size list of numbers (or of lists of
    /// numbers), which inference stores as `var_array`; none for a source without a
    /// schema (TFRecord).
    fn var_list_columns(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The error of input file `path`, for the command line (exit status 1).
pub fn input_error(path: &Path, reason: impl Into<String>) -> Error {
    Error::Input {
        // A fetched object is named by its URL, not its staging copy.
        path: std::path::PathBuf::from(crate::object_io::display_name(path)),
        reason: reason.into(),
    }
}

/// How a column is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An RGB image (`RGBImageField`) from encoded JPEG or PNG bytes.
    Image,
    /// An integer (`IntField`).
    Int,
    /// A float (`FloatField`).
    Float,
    /// A JSON value (`JSONField`).
    Json,
    /// A numeric array of fixed dtype and shape (`NDArrayField`).
    Array,
    /// A numeric array of fixed dtype and row shape with any number of rows
    /// (`VarArrayField`).
    VarArray,
    /// Bytes (`BytesField`): a byte string, a string's UTF-8, an image's file.
    Bytes,
}

impl Kind {
    const ALL: [Kind; 7] = [
        Kind::Image,
        Kind::Int,
        Kind::Float,
        Kind::Json,
        Kind::Array,
        Kind::VarArray,
        Kind::Bytes,
    ];

    /// The kind's name in `--field`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Image => "image",
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Json => "json",
            Kind::Array => "array",
            Kind::VarArray => "var_array",
            Kind::Bytes => "bytes",
        }
    }
}

/// One field: its name, the column it comes from, its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldMap {
    /// The field's name in the `.beton` file.
    pub name: String,
    /// The column (TFRecord: the feature key), case kept.
    pub column: String,
    /// How it is stored.
    pub kind: Kind,
}

impl FieldMap {
    /// Parses `NAME=COLUMN:KIND` (a usage error otherwise); the column is everything
    /// between the first `=` and the last `:`.
    pub fn parse(text: &str) -> Result<FieldMap> {
        let bad = |why: &str| {
            let kinds: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
            Error::Usage(format!(
                "--field {text}: {why} (expected NAME=COLUMN:KIND, KIND one of {})",
                kinds.join(", ")
            ))
        };
        let (name, rest) = text.split_once('=').ok_or_else(|| bad("no `=`"))?;
        let (column, kind) = rest.rsplit_once(':').ok_or_else(|| bad("no `:`"))?;
        if name.is_empty() || column.is_empty() {
            return Err(bad("empty name or column"));
        }
        let kind = Kind::ALL
            .into_iter()
            .find(|k| k.name() == kind)
            .ok_or_else(|| bad(&format!("unknown kind `{kind}`")))?;
        Ok(FieldMap {
            name: name.to_owned(),
            column: column.to_owned(),
            kind,
        })
    }

    /// The flag that gives this field: `NAME=COLUMN:KIND`.
    pub fn flag(&self) -> String {
        format!("{}={}:{}", self.name, self.column, self.kind.name())
    }
}

/// Whether `bytes` start like a JPEG or PNG file.
fn looks_like_image(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0xFF, 0xD8, 0xFF]) || bytes.starts_with(b"\x89PNG\r\n\x1a\n")
}

/// The kind a first record's cell gets, or why none.
fn kind_of(cell: &Cell) -> std::result::Result<Kind, String> {
    Ok(match cell {
        Cell::Null => {
            return Err("null in the first record; give it with --field to store it".into());
        }
        Cell::Other(what) => return Err(format!("{what}: no kind takes it")),
        Cell::Bool(_) | Cell::Int(_) | Cell::UInt(_) => Kind::Int,
        Cell::Float(_) => Kind::Float,
        Cell::Image(_) => Kind::Image,
        Cell::Bytes(b) if looks_like_image(b) => Kind::Image,
        Cell::Str(_) | Cell::Bytes(_) => Kind::Bytes,
        Cell::Array(a) if a.single_int().is_some() => Kind::Int,
        Cell::Array(a) if a.single_float().is_some() => Kind::Float,
        // An empty list says nothing of the shape: JSON keeps any list.
        Cell::Array(a) if a.shape.contains(&0) => Kind::Json,
        Cell::Array(_) => Kind::Array,
        Cell::List(items) => match items.as_slice() {
            [Cell::Bytes(b)] if looks_like_image(b) => Kind::Image,
            [Cell::Bytes(_) | Cell::Str(_)] => Kind::Bytes,
            _ => Kind::Json,
        },
    })
}

/// The field name a column gets: letters and digits kept, anything else as `_`, at most
/// 16 bytes (the name's room in a `.beton` file).
fn field_name(column: &str) -> String {
    let mut name: String = column
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    name.truncate(16);
    name
}

/// The fields inferred from the first record's cells of `columns` and the schema's
/// variable-size numeric lists `var_lists` (see the module docs), and the columns left out
/// with the reason.
pub fn infer(
    columns: &[String],
    first: &[Cell],
    var_lists: &[String],
) -> (Vec<FieldMap>, Vec<(String, String)>) {
    let mut maps: Vec<FieldMap> = Vec::new();
    let mut left_out = Vec::new();
    for (column, cell) in columns.iter().zip(first) {
        let kind = match cell {
            Cell::Null => kind_of(cell),
            _ if var_lists.contains(column) => Ok(Kind::VarArray),
            _ => kind_of(cell),
        };
        match kind {
            Ok(kind) => {
                let mut name = field_name(column);
                // Two columns that sanitise to one name: number the later ones.
                let mut n = 1;
                while maps.iter().any(|m| m.name == name) {
                    let suffix = format!("_{n}");
                    name = field_name(column);
                    name.truncate(16 - suffix.len());
                    name.push_str(&suffix);
                    n += 1;
                }
                maps.push(FieldMap {
                    name,
                    column: column.clone(),
                    kind,
                });
            }
            Err(why) => left_out.push((column.clone(), why)),
        }
    }
    (maps, left_out)
}

/// The element dtype and row shape a `var_array` field takes from `cell`: `None` for an
/// empty list of lists, which has no row to tell (a flat list's rows are its elements,
/// so an empty one still tells); an error for a cell that is not a numeric list.
pub fn var_array_rows(cell: &Cell) -> std::result::Result<Option<(NumpyDtype, Vec<u64>)>, String> {
    match cell {
        Cell::Array(a) if a.shape.len() == 1 => Ok(Some((a.dtype.clone(), Vec::new()))),
        Cell::Array(a) if a.shape.first().is_none_or(|&rows| rows == 0) => Ok(None),
        Cell::Array(a) => Ok(Some((a.dtype.clone(), a.shape[1..].to_vec()))),
        Cell::List(items) if items.is_empty() => Ok(None),
        other => Err(format!("{}, not a numeric list", describe(other))),
    }
}

/// The fields with their types, as the writer takes them; `array` fields take the dtype
/// and shape of the first record's cell (`first`, one per map), `var_array` fields the
/// dtype and row shape ([`var_array_rows`]; the caller passes the first record with a row
/// when the first record's list is empty).
pub fn field_specs(
    maps: &[FieldMap],
    first: &[Cell],
) -> std::result::Result<Vec<FieldSpec>, String> {
    maps.iter()
        .zip(first)
        .map(|(map, cell)| {
            let field_type = match map.kind {
                Kind::Image => FieldType::RgbImage,
                Kind::Int => FieldType::Int,
                Kind::Float => FieldType::Float,
                Kind::Json => FieldType::Json,
                Kind::Bytes => FieldType::Bytes,
                Kind::VarArray => {
                    let field = |why: String| {
                        format!("field `{}` (from `{}`): {why}", map.name, map.column)
                    };
                    let rows = var_array_rows(cell)
                        .map_err(|e| field(format!("the first record holds {e}")))?;
                    let Some((dtype, inner)) = rows else {
                        return Err(field(
                            "every record's list is empty, so the row shape is unknown (store \
                             it as json instead)"
                                .into(),
                        ));
                    };
                    let args = VarArrayArgs::new(dtype, inner)
                        .map_err(|e| field(format!("cannot be a var_array field: {e}")))?;
                    FieldType::VarArray(args)
                }
                Kind::Array => match cell {
                    Cell::Array(a) if !a.shape.is_empty() && a.shape.last() != Some(&0) => {
                        FieldType::NdArray(NdArrayArgs::new(a.dtype.clone(), a.shape.clone()))
                    }
                    Cell::Array(a) => {
                        return Err(format!(
                            "field `{}` (from `{}`): the first record's array of shape {:?} \
                             cannot be an array field (the last dimension must be non-zero; \
                             store it as json instead)",
                            map.name, map.column, a.shape
                        ));
                    }
                    other => {
                        return Err(format!(
                            "field `{}` (from `{}`): the first record holds {}, not a numeric \
                             list",
                            map.name,
                            map.column,
                            describe(other)
                        ));
                    }
                },
            };
            Ok(FieldSpec::new(map.name.clone(), field_type))
        })
        .collect()
}

/// What a cell holds, for errors.
fn describe(cell: &Cell) -> String {
    match cell {
        Cell::Null => "null".into(),
        Cell::Bool(b) => format!("the boolean {b}"),
        Cell::Int(v) => format!("the integer {v}"),
        Cell::UInt(v) => format!("the integer {v}"),
        Cell::Float(v) => format!("the float {v}"),
        Cell::Str(s) => format!("a string of {} bytes", s.len()),
        Cell::Bytes(b) => format!("a byte string of {} bytes", b.len()),
        Cell::Image(b) => format!("an image struct of {} bytes", b.len()),
        Cell::Array(a) => format!("a {} array of shape {:?}", a.dtype.descr(), a.shape),
        Cell::List(items) => format!("a list of {} values", items.len()),
        Cell::Other(what) => what.clone(),
    }
}

/// A cell as JSON: numbers, strings, lists; byte strings must be UTF-8.
fn to_json(cell: &Cell) -> std::result::Result<JsonValue, String> {
    Ok(match cell {
        Cell::Null => JsonValue::Null,
        Cell::Bool(b) => JsonValue::Bool(*b),
        Cell::Int(v) => JsonValue::Int(i128::from(*v)),
        Cell::UInt(v) => JsonValue::Int(i128::from(*v)),
        Cell::Float(v) => JsonValue::Float(*v),
        Cell::Str(s) => JsonValue::String(s.clone()),
        Cell::Bytes(b) => JsonValue::String(
            String::from_utf8(b.clone()).map_err(|_| "a byte string that is not UTF-8")?,
        ),
        Cell::Image(_) => {
            return Err("an image struct has no JSON value (use image or bytes)".into());
        }
        Cell::Other(what) => return Err(format!("{what} has no JSON value")),
        Cell::List(items) => JsonValue::Array(
            items
                .iter()
                .map(to_json)
                .collect::<std::result::Result<_, _>>()?,
        ),
        Cell::Array(a) => array_json(a, 0, &mut 0)?,
    })
}

/// Level `level` of array `a` as nested JSON lists, from element `*next` on.
fn array_json(a: &Array, level: usize, next: &mut usize) -> std::result::Result<JsonValue, String> {
    let size = a.dtype.item_size() as usize;
    let Some(&len) = a.shape.get(level) else {
        let b = a
            .data
            .get(*next * size..(*next + 1) * size)
            .ok_or("array data too short")?;
        *next += 1;
        let mut w = [0u8; 8];
        w[..size].copy_from_slice(b);
        return Ok(match (a.dtype.kind(), size) {
            (NumpyKind::Float, 2) => {
                JsonValue::Float(f64::from(half_to_f32(u16::from_le_bytes([b[0], b[1]]))))
            }
            (NumpyKind::Float, 4) => {
                JsonValue::Float(f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            }
            (NumpyKind::Float, _) => JsonValue::Float(f64::from_le_bytes(w)),
            (NumpyKind::UInt, _) => JsonValue::Int(i128::from(u64::from_le_bytes(w))),
            (NumpyKind::Bool, _) => JsonValue::Bool(b[0] != 0),
            _ => JsonValue::Int(i128::from(
                i64::from_le_bytes(w) << (64 - 8 * size) >> (64 - 8 * size),
            )),
        });
    };
    let items = (0..len)
        .map(|_| array_json(a, level + 1, next))
        .collect::<std::result::Result<_, _>>()?;
    Ok(JsonValue::Array(items))
}

/// An IEEE half-precision float's value (exact in f32).
fn half_to_f32(bits: u16) -> f32 {
    let sign = if bits >> 15 == 1 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1F);
    let frac = f32::from(bits & 0x3FF);
    match exp {
        0 => sign * frac * 2f32.powi(-24),
        31 if frac == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f32.powi(e - 15),
    }
}

/// What converting a record needs besides the record.
pub struct Converter<'a> {
    /// The records.
    pub table: &'a dyn Table,
    /// The fields.
    pub maps: &'a [FieldMap],
    /// Their types (for the arrays' dtype and shape).
    pub specs: &'a [FieldSpec],
    /// How images are stored (the image options, `--seed`, `--jpeg-passthrough`).
    pub images: &'a ImageStore,
}

impl Converter<'_> {
    /// The values of record `record`, written as sample `index` of the dataset (which
    /// picks its `proportion` draw); with `check_only`, images are decoded but not encoded
    /// (the values are then not for writing). An error names the file and the record.
    pub fn convert(
        &self,
        record: usize,
        index: u64,
        check_only: bool,
    ) -> std::result::Result<(Vec<FieldValue>, Option<ImageMode>), String> {
        let context = |reason: String| {
            let (path, _, place) = self.table.locate(record);
            // A fetched file is named by its URL, not its staging copy.
            format!(
                "{}: {place}: {reason}",
                crate::object_io::display_name(path)
            )
        };
        let columns: Vec<&str> = self.maps.iter().map(|m| m.column.as_str()).collect();
        let cells = self.table.cells(record, &columns).map_err(context)?;
        let mut values = Vec::with_capacity(self.maps.len());
        let mut mode = None;
        for ((map, spec), cell) in self.maps.iter().zip(self.specs).zip(cells) {
            let field = |reason: String| {
                context(format!(
                    "field `{}` (from `{}`): {reason}",
                    map.name, map.column
                ))
            };
            let value = self.value(map, spec, cell, index, check_only, &mut mode);
            values.push(value.map_err(field)?);
        }
        Ok((values, mode))
    }

    /// One cell as the value of its field.
    fn value(
        &self,
        map: &FieldMap,
        spec: &FieldSpec,
        cell: Cell,
        index: u64,
        check_only: bool,
        mode: &mut Option<ImageMode>,
    ) -> std::result::Result<FieldValue, String> {
        let wrong =
            |cell: &Cell| format!("{} cannot be stored as {}", describe(cell), map.kind.name());
        // A TFRecord feature is always a list: one element stands for itself.
        let cell = match cell {
            Cell::List(mut items) if items.len() == 1 && map.kind != Kind::Json => items.remove(0),
            other => other,
        };
        if cell == Cell::Null {
            if map.kind == Kind::Json {
                return Ok(FieldValue::Json(JsonValue::Null));
            }
            return Err("no value (null or missing)".into());
        }
        Ok(match map.kind {
            Kind::Int => FieldValue::Int(match &cell {
                Cell::Int(v) => *v,
                Cell::Bool(b) => i64::from(*b),
                Cell::UInt(v) => {
                    i64::try_from(*v).map_err(|_| format!("{v} is beyond the int64 range"))?
                }
                Cell::Array(a) => a.single_int().ok_or_else(|| wrong(&cell))?,
                _ => return Err(wrong(&cell)),
            }),
            Kind::Float => FieldValue::Float(match &cell {
                Cell::Float(v) => *v,
                Cell::Array(a) => a.single_float().ok_or_else(|| wrong(&cell))?,
                _ => return Err(wrong(&cell)),
            }),
            Kind::Bytes => FieldValue::Bytes(match cell {
                Cell::Bytes(b) | Cell::Image(b) => b,
                Cell::Str(s) => s.into_bytes(),
                other => return Err(wrong(&other)),
            }),
            Kind::Json => FieldValue::Json(to_json(&cell)?),
            Kind::Array => {
                let Cell::Array(a) = cell else {
                    return Err(wrong(&cell));
                };
                let want = spec.field_type.ndarray_args();
                if want.is_none_or(|w| w.dtype != a.dtype || w.shape != a.shape) {
                    return Err(format!(
                        "array of dtype {} and shape {:?}, the field's is {}",
                        a.dtype.descr(),
                        a.shape,
                        want.map_or_else(String::new, |w| format!(
                            "dtype {} and shape {:?}",
                            w.dtype.descr(),
                            w.shape
                        ))
                    ));
                }
                FieldValue::NdArray(a.data)
            }
            Kind::VarArray => {
                let FieldType::VarArray(want) = &spec.field_type else {
                    return Err(wrong(&cell));
                };
                let a = match cell {
                    // An empty list of lists: no rows.
                    Cell::List(items) if items.is_empty() => {
                        return Ok(FieldValue::NdArray(vec![]));
                    }
                    Cell::Array(a) => a,
                    other => return Err(wrong(&other)),
                };
                if a.dtype != want.dtype {
                    return Err(format!(
                        "a list of {} elements, the field's are {}",
                        a.dtype.descr(),
                        want.dtype.descr()
                    ));
                }
                let empty = a.shape.first().is_none_or(|&rows| rows == 0);
                if !empty && a.shape[1..] != want.inner_shape[..] {
                    return Err(format!(
                        "rows of shape {:?} (a list of shape {:?}), the field's rows are {:?}",
                        &a.shape[1..],
                        a.shape,
                        want.inner_shape
                    ));
                }
                FieldValue::NdArray(if empty { Vec::new() } else { a.data })
            }
            Kind::Image => {
                let bytes = match cell {
                    Cell::Bytes(b) | Cell::Image(b) => b,
                    other => return Err(wrong(&other)),
                };
                if check_only {
                    read_image_bytes(&bytes)
                        .map_err(|e| format!("cannot decode the image: {e}"))?;
                    FieldValue::Int(0)
                } else {
                    let encoded = self.images.store(&bytes, index).map_err(|e| match e {
                        StoreError::Decode(e) => format!("cannot decode the image: {e}"),
                        StoreError::Encode(e) => format!("cannot encode the image: {e}"),
                    })?;
                    mode.get_or_insert(encoded.mode);
                    encoded.into()
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(values: &[i64]) -> Cell {
        Cell::Array(Array {
            dtype: dtype(NumpyKind::Int, 8),
            shape: vec![values.len() as u64],
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        })
    }

    #[test]
    fn inference_follows_the_first_record() {
        let columns: Vec<String> = [
            "image", "label", "score", "text", "ids", "tags", "gone", "a/b", "a.b",
        ]
        .map(String::from)
        .to_vec();
        let first = [
            Cell::Image(vec![1, 2]),
            Cell::Int(3),
            Cell::Float(0.5),
            Cell::Str("x".into()),
            ints(&[1, 2]),
            Cell::List(vec![Cell::Str("a".into()), Cell::Str("b".into())]),
            Cell::Null,
            ints(&[7]),
            Cell::List(vec![Cell::Bytes(b"\xFF\xD8\xFF\xE0".to_vec())]),
        ];
        let (maps, left_out) = infer(&columns, &first, &[]);
        let flags: Vec<String> = maps.iter().map(FieldMap::flag).collect();
        assert_eq!(
            flags,
            [
                "image=image:image",
                "label=label:int",
                "score=score:float",
                "text=text:bytes",
                "ids=ids:array",
                "tags=tags:json",
                "a_b=a/b:int",
                "a_b_1=a.b:image",
            ]
        );
        assert_eq!(
            left_out,
            [(
                "gone".to_owned(),
                "null in the first record; give it with --field to store it".to_owned()
            )]
        );
    }

    #[test]
    fn single_elements_and_json_of_arrays() {
        let a = Array {
            dtype: dtype(NumpyKind::Int, 2),
            shape: vec![1],
            data: (-5i16).to_le_bytes().to_vec(),
        };
        assert_eq!(a.single_int(), Some(-5));
        let m = Array {
            dtype: dtype(NumpyKind::Float, 4),
            shape: vec![2, 2],
            data: [1.5f32, -2.0, 0.25, 8.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        };
        assert_eq!(
            to_json(&Cell::Array(m)).unwrap().to_python_json(),
            "[[1.5, -2.0], [0.25, 8.0]]"
        );
        assert_eq!(half_to_f32(0x3C00), 1.0);
        assert_eq!(half_to_f32(0xC000), -2.0);
        assert_eq!(half_to_f32(0x0001), 2f32.powi(-24));
        let f = FieldMap::parse("label=a:b:int").unwrap();
        assert_eq!(
            (f.name.as_str(), f.column.as_str(), f.kind),
            ("label", "a:b", Kind::Int)
        );
        assert!(FieldMap::parse("x=col").is_err());
        assert!(FieldMap::parse("x=col:picture").is_err());
    }

    #[test]
    fn var_array_kind_from_the_schema_and_its_rows() {
        let columns: Vec<String> = ["ids", "boxes", "fixed", "none"].map(String::from).to_vec();
        let pairs = Cell::Array(Array {
            dtype: dtype(NumpyKind::Float, 4),
            shape: vec![1, 2],
            data: [0.5f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect(),
        });
        let first = [ints(&[]), pairs.clone(), ints(&[3, 4]), Cell::Null];
        let var = ["ids", "boxes", "none"].map(String::from);
        let (maps, left_out) = infer(&columns, &first, &var);
        let flags: Vec<String> = maps.iter().map(FieldMap::flag).collect();
        assert_eq!(
            flags,
            [
                "ids=ids:var_array",
                "boxes=boxes:var_array",
                "fixed=fixed:array"
            ]
        );
        assert_eq!(left_out.len(), 1);
        assert_eq!(
            FieldMap::parse("t=tok:var_array").unwrap().kind,
            Kind::VarArray
        );
        assert_eq!(
            var_array_rows(&ints(&[])),
            Ok(Some((dtype(NumpyKind::Int, 8), vec![])))
        );
        assert_eq!(
            var_array_rows(&pairs),
            Ok(Some((dtype(NumpyKind::Float, 4), vec![2])))
        );
        assert_eq!(var_array_rows(&Cell::List(vec![])), Ok(None));
        assert!(var_array_rows(&Cell::Int(1)).is_err());
        let specs = field_specs(&maps, &first[..3]).unwrap();
        assert_eq!(
            specs[1].field_type,
            FieldType::VarArray(VarArrayArgs::new(dtype(NumpyKind::Float, 4), vec![2]).unwrap())
        );
        let empty_nested = field_specs(&maps[1..2], &[Cell::List(vec![])]).unwrap_err();
        assert!(
            empty_nested.contains("row shape is unknown"),
            "{empty_nested}"
        );
    }
}
