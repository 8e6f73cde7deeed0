//! TFRecord files of `tf.train.Example` records as a [`Table`], for `ffcv write tfrecord`.
//!
//! A TFRecord file is a sequence of records, each `u64` length (little-endian), the
//! masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the data. Opening
//! a file reads only the 12-byte headers, seeking over the data, and checks each length's
//! checksum: a file whose framing breaks (a length checksum mismatch, a record running
//! past the end) fails the command, or with `--skip-unreadable` keeps its records before
//! the break. A record's data checksum is checked when the record is read; a mismatch,
//! like data that is not an `Example`, is an error naming the file and the record.
//!
//! The `Example` messages are decoded with `prost` from the structs below, declared by
//! hand after TensorFlow's `example.proto` and `feature.proto` (field numbers and types),
//! so no protobuf compiler is needed. A feature is a list: `bytes_list` gives a list of
//! byte strings, `float_list` a float32 array, `int64_list` an int64 array (a
//! one-element list stands for its element, as TFDS stores scalars). The columns are the
//! first record's feature keys, sorted (an `Example`'s features are a map).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use beton_io::NumpyKind;
use prost::Message as _;

use crate::error::Result;
use crate::table_fields::{Array, Cell, Table, dtype, input_error};

/// `tf.train.Example`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Example {
    /// The features.
    #[prost(message, optional, tag = "1")]
    pub features: Option<Features>,
}

/// `tf.train.Features`: a map from keys to features.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Features {
    /// The features by key.
    #[prost(btree_map = "string, message", tag = "1")]
    pub feature: BTreeMap<String, Feature>,
}

/// `tf.train.Feature`: one of three lists.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Feature {
    /// The list.
    #[prost(oneof = "FeatureKind", tags = "1, 2, 3")]
    pub kind: Option<FeatureKind>,
}

/// The `kind` oneof of `tf.train.Feature`.
// The variants are named after the proto's fields, which all end in `_list`.
#[allow(clippy::enum_variant_names)]
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum FeatureKind {
    /// `bytes_list`.
    #[prost(message, tag = "1")]
    BytesList(BytesList),
    /// `float_list`.
    #[prost(message, tag = "2")]
    FloatList(FloatList),
    /// `int64_list`.
    #[prost(message, tag = "3")]
    Int64List(Int64List),
}

/// `tf.train.BytesList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BytesList {
    /// The byte strings.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub value: Vec<Vec<u8>>,
}

/// `tf.train.FloatList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FloatList {
    /// The floats (packed).
    #[prost(float, repeated, tag = "1")]
    pub value: Vec<f32>,
}

/// `tf.train.Int64List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Int64List {
    /// The integers (packed).
    #[prost(int64, repeated, tag = "1")]
    pub value: Vec<i64>,
}

/// TFRecord's masked CRC-32C: the checksum rotated right by 15 bits plus a constant, so
/// that a checksum of data holding checksums is not trivially zero.
pub fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One record: where its data is.
#[derive(Debug, Clone, Copy)]
struct Record {
    file: usize,
    /// Its number in the file.
    index: u64,
    /// Offset of its data (after the 12-byte header).
    offset: u64,
    /// Length of its data.
    len: u64,
}

/// TFRecord files, opened.
pub struct TfRecordTable {
    paths: Vec<PathBuf>,
    files: Vec<File>,
    records: Vec<Record>,
    columns: Vec<String>,
    broken: Vec<(PathBuf, String)>,
}

/// The records of `file` (of `size` bytes), and where its framing broke, if it did.
fn scan(file: &File, index: usize, size: u64, records: &mut Vec<Record>) -> Option<String> {
    let mut magic = [0u8; 2];
    if size >= 2 && file.read_exact_at(&mut magic, 0).is_ok() && magic == [0x1f, 0x8b] {
        return Some(
            "a gzip-compressed TFRecord file, which is not supported: decompress it first".into(),
        );
    }
    let (mut pos, mut n) = (0u64, 0u64);
    while pos < size {
        let at = |what: String| format!("record {n} (offset {pos}): {what}");
        let mut header = [0u8; 12];
        if pos + 12 > size {
            return Some(at(format!(
                "the header is cut off ({} bytes left)",
                size - pos
            )));
        }
        if let Err(e) = file.read_exact_at(&mut header, pos) {
            return Some(at(format!("cannot read the header: {e}")));
        }
        let (len_bytes, crc) = header.split_at(8);
        let len = u64::from_le_bytes(len_bytes.try_into().unwrap_or_default());
        let stored = u32::from_le_bytes(crc.try_into().unwrap_or_default());
        let computed = masked_crc(len_bytes);
        if stored != computed {
            return Some(at(format!(
                "length checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): not a TFRecord file, or damaged from here"
            )));
        }
        let end = len
            .checked_add(16)
            .and_then(|l| pos.checked_add(l))
            .filter(|&end| end <= size);
        let Some(end) = end else {
            return Some(at(format!(
                "claims {len} bytes of data, past the end of the file ({size} bytes)"
            )));
        };
        records.push(Record {
            file: index,
            index: n,
            offset: pos + 12,
            len,
        });
        pos = end;
        n += 1;
    }
    None
}

impl TfRecordTable {
    /// Opens `paths` (reading their record headers). A file whose framing breaks fails
    /// the command, or with `keep_going` keeps its records before the break and is
    /// listed as broken.
    pub fn open(paths: Vec<PathBuf>, keep_going: bool) -> Result<Self> {
        let mut table = TfRecordTable {
            paths: Vec::new(),
            files: Vec::new(),
            records: Vec::new(),
            columns: Vec::new(),
            broken: Vec::new(),
        };
        for path in paths {
            let opened = File::open(&path)
                .and_then(|f| Ok((f.metadata()?.len(), f)))
                .map_err(|e| format!("cannot open: {e}"));
            let problem = match &opened {
                Ok((size, file)) => scan(file, table.files.len(), *size, &mut table.records),
                Err(e) => Some(e.clone()),
            };
            if let Some(reason) = problem {
                if !keep_going {
                    return Err(input_error(&path, reason));
                }
                table.broken.push((path.clone(), reason));
            }
            if let Ok((_, file)) = opened {
                table.paths.push(path);
                table.files.push(file);
            }
        }
        // The columns: the first record that reads (with `keep_going`, bad ones before
        // it are found again, and reported, when the records are checked).
        for i in 0..table.records.len() {
            match table.example(i) {
                Ok(example) => {
                    table.columns = example
                        .features
                        .map(|f| f.feature.into_keys().collect())
                        .unwrap_or_default();
                    break;
                }
                Err(_) if keep_going => {}
                Err(reason) => {
                    let (path, _, place) = table.locate(i);
                    return Err(input_error(path, format!("{place}: {reason}")));
                }
            }
        }
        Ok(table)
    }

    /// Record `i`'s `Example`, its data checksum checked.
    fn example(&self, i: usize) -> std::result::Result<Example, String> {
        let r = self.records[i];
        // The length was checked against the file's size when it was scanned.
        let mut data = vec![0u8; usize::try_from(r.len + 4).map_err(|_| "record too large")?];
        self.files[r.file]
            .read_exact_at(&mut data, r.offset)
            .map_err(|e| format!("cannot read the record: {e}"))?;
        let (data, crc) = data.split_at(data.len() - 4);
        let stored = u32::from_le_bytes(crc.try_into().unwrap_or_default());
        let computed = masked_crc(data);
        if stored != computed {
            return Err(format!(
                "data checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the record is damaged"
            ));
        }
        Example::decode(data).map_err(|e| format!("not a tf.train.Example: {e}"))
    }
}

/// A feature as a cell (a feature without a list is null).
fn feature_cell(feature: Feature) -> Cell {
    match feature.kind {
        None => Cell::Null,
        Some(FeatureKind::BytesList(list)) => {
            Cell::List(list.value.into_iter().map(Cell::Bytes).collect())
        }
        Some(FeatureKind::FloatList(list)) => Cell::Array(Array {
            dtype: dtype(NumpyKind::Float, 4),
            shape: vec![list.value.len() as u64],
            data: list.value.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }),
        Some(FeatureKind::Int64List(list)) => Cell::Array(Array {
            dtype: dtype(NumpyKind::Int, 8),
            shape: vec![list.value.len() as u64],
            data: list.value.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }),
    }
}

impl Table for TfRecordTable {
    fn format(&self) -> &'static str {
        "TFRecord"
    }

    fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    fn num_records(&self) -> usize {
        self.records.len()
    }

    fn locate(&self, i: usize) -> (&Path, u64, String) {
        let r = self.records[i];
        (
            &self.paths[r.file],
            r.index,
            format!("record {} (offset {})", r.index, r.offset - 12),
        )
    }

    fn columns(&self) -> Vec<String> {
        self.columns.clone()
    }

    fn cells(&self, i: usize, columns: &[&str]) -> std::result::Result<Vec<Cell>, String> {
        let mut features = self
            .example(i)?
            .features
            .map(|f| f.feature)
            .unwrap_or_default();
        Ok(columns
            .iter()
            .map(|c| features.remove(*c).map_or(Cell::Null, feature_cell))
            .collect())
    }

    fn broken(&self) -> &[(PathBuf, String)] {
        &self.broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_crc_of_tensorflows_framing() {
        // CRC-32C of "123456789" is 0xE3069283 (the standard check value).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(
            masked_crc(b"123456789"),
            0xE306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8)
        );
        // An Example encodes and decodes through the declared structs.
        let mut feature = BTreeMap::new();
        feature.insert(
            "label".to_owned(),
            Feature {
                kind: Some(FeatureKind::Int64List(Int64List { value: vec![-3] })),
            },
        );
        let example = Example {
            features: Some(Features { feature }),
        };
        let bytes = example.encode_to_vec();
        // Field 1 (features), field 1 (map entry), key "label", value: field 3 (int64_list), packed [-3].
        assert_eq!(&bytes[..2], [0x0a, bytes.len() as u8 - 2]);
        assert_eq!(Example::decode(bytes.as_slice()).unwrap(), example);
    }
}
