//! Arrow record batches as [`Cell`]s, and the record-group index and batch cache that
//! `ffcv write parquet` and `ffcv write arrow` share.
//!
//! Both formats hold records in groups (Parquet row groups, Arrow IPC record batches)
//! that are decoded whole; the writer asks for records from several threads, each for a
//! run of consecutive ones, so a few decoded groups are kept ([`BatchCache`]) and each
//! group is decoded about once. A group that fails to decode fails every record in it,
//! with the same error (kept too, so a broken group is not decoded again per record).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_schema::DataType;
use beton_io::NumpyKind;

use crate::table_fields::{Array, Cell, dtype};

/// A group of consecutive records of one file.
#[derive(Debug, Clone)]
pub struct Group {
    /// The file (an index into the table's paths).
    pub file: usize,
    /// The group's index in its file (row group, or record batch).
    pub index: usize,
    /// The group's first record's row number in its file.
    pub first_row: u64,
    /// Its number of records.
    pub rows: usize,
}

/// Every group of a list of files, in order, and where each record is.
#[derive(Debug, Default)]
pub struct Groups {
    /// The groups.
    pub groups: Vec<Group>,
    /// The global number of each group's first record.
    starts: Vec<usize>,
    /// Number of records.
    pub total: usize,
}

impl Groups {
    /// Adds the next group (empty groups hold no record and are not kept).
    pub fn push(&mut self, group: Group) {
        if group.rows == 0 {
            return;
        }
        self.starts.push(self.total);
        self.total += group.rows;
        self.groups.push(group);
    }

    /// Record `i`'s group (an index into [`Groups::groups`]) and its row in the group.
    pub fn find(&self, i: usize) -> (usize, usize) {
        let g = self.starts.partition_point(|&s| s <= i).saturating_sub(1);
        (g, i - self.starts.get(g).copied().unwrap_or(0))
    }

    /// Record `i`'s file (of `paths`, the files the groups index), its row in that file,
    /// and how messages name it (`row N`): what [`crate::table_fields::Table::locate`]
    /// gives for the Parquet and Arrow tables.
    pub fn locate<'a>(&self, paths: &'a [PathBuf], i: usize) -> (&'a Path, u64, String) {
        let (g, row) = self.find(i);
        let group = &self.groups[g];
        let row = group.first_row + row as u64;
        (&paths[group.file], row, format!("row {row}"))
    }
}

type Loaded = std::result::Result<Arc<Vec<RecordBatch>>, String>;

/// The last few decoded groups, by group and column selection.
pub struct BatchCache {
    slots: Mutex<VecDeque<(usize, Vec<String>, Loaded)>>,
    capacity: usize,
}

impl BatchCache {
    /// A cache of `capacity` groups (at least 2).
    pub fn new(capacity: usize) -> Self {
        BatchCache {
            slots: Mutex::new(VecDeque::new()),
            capacity: capacity.max(2),
        }
    }

    /// Group `group` decoded with `columns`, from the cache or by `load` (outside the
    /// lock, so threads on other groups do not wait; two threads may decode one group
    /// at once, and the later result is dropped).
    pub fn get(
        &self,
        group: usize,
        columns: &[&str],
        load: impl FnOnce() -> std::result::Result<Vec<RecordBatch>, String>,
    ) -> Loaded {
        let lock = || self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let same = |g: &usize, c: &Vec<String>| *g == group && c.iter().eq(columns.iter());
        if let Some((_, _, loaded)) = lock().iter().find(|(g, c, _)| same(g, c)) {
            return loaded.clone();
        }
        let loaded = load().map(Arc::new);
        let mut slots = lock();
        if !slots.iter().any(|(g, c, _)| same(g, c)) {
            if slots.len() >= self.capacity {
                slots.pop_front();
            }
            let columns = columns.iter().map(|c| (*c).to_owned()).collect();
            slots.push_back((group, columns, loaded.clone()));
        }
        loaded
    }
}

/// Row `row` of decoded group `batches`: the cells of `columns` (a column the batch
/// lacks is null).
pub fn row_cells(
    batches: &[RecordBatch],
    mut row: usize,
    columns: &[&str],
) -> std::result::Result<Vec<Cell>, String> {
    let batch = batches
        .iter()
        .find(|b| {
            let here = row < b.num_rows();
            if !here {
                row -= b.num_rows();
            }
            here
        })
        .ok_or("the group decoded to fewer rows than its header says")?;
    columns
        .iter()
        .map(|name| match batch.column_by_name(name) {
            Some(column) => cell(column.as_ref(), row).map_err(|e| format!("column `{name}`: {e}")),
            None => Ok(Cell::Null),
        })
        .collect()
}

/// The numpy kind and item size of a numeric Arrow type.
fn numeric(data_type: &DataType) -> Option<(NumpyKind, u64)> {
    Some(match data_type {
        DataType::Int8 => (NumpyKind::Int, 1),
        DataType::Int16 => (NumpyKind::Int, 2),
        DataType::Int32 => (NumpyKind::Int, 4),
        DataType::Int64 => (NumpyKind::Int, 8),
        DataType::UInt8 => (NumpyKind::UInt, 1),
        DataType::UInt16 => (NumpyKind::UInt, 2),
        DataType::UInt32 => (NumpyKind::UInt, 4),
        DataType::UInt64 => (NumpyKind::UInt, 8),
        DataType::Float16 => (NumpyKind::Float, 2),
        DataType::Float32 => (NumpyKind::Float, 4),
        DataType::Float64 => (NumpyKind::Float, 8),
        _ => return None,
    })
}

/// Whether a column of `data_type` is inferred as `var_array`: a variable-size list
/// (`List`, `LargeList`) whose items are numbers or lists of numbers (nested to any
/// depth, fixed-size or not). A `FixedSizeList` column is left to the first record
/// (an `array`).
pub fn is_var_numeric_list(data_type: &DataType) -> bool {
    fn numeric_items(data_type: &DataType) -> bool {
        match data_type {
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                numeric_items(f.data_type())
            }
            other => numeric(other).is_some(),
        }
    }
    match data_type {
        DataType::List(f) | DataType::LargeList(f) => numeric_items(f.data_type()),
        _ => false,
    }
}

/// The names of `schema`'s columns that [`is_var_numeric_list`] takes.
pub fn var_list_columns(schema: &arrow_schema::Schema) -> Vec<String> {
    schema
        .fields()
        .iter()
        .filter(|f| is_var_numeric_list(f.data_type()))
        .map(|f| f.name().clone())
        .collect()
}

/// The little-endian bytes of a numeric array's values.
fn numeric_bytes(array: &dyn arrow_array::Array) -> Vec<u8> {
    macro_rules! le {
        ($t:ty) => {
            array
                .as_primitive::<$t>()
                .values()
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect()
        };
    }
    match array.data_type() {
        DataType::Int8 => le!(Int8Type),
        DataType::Int16 => le!(Int16Type),
        DataType::Int32 => le!(Int32Type),
        DataType::Int64 => le!(Int64Type),
        DataType::UInt8 => le!(UInt8Type),
        DataType::UInt16 => le!(UInt16Type),
        DataType::UInt32 => le!(UInt32Type),
        DataType::UInt64 => le!(UInt64Type),
        DataType::Float16 => le!(Float16Type),
        DataType::Float32 => le!(Float32Type),
        DataType::Float64 => le!(Float64Type),
        _ => Vec::new(),
    }
}

/// Value `row` of `array` as a cell.
pub fn cell(array: &dyn arrow_array::Array, row: usize) -> std::result::Result<Cell, String> {
    if array.is_null(row) {
        return Ok(Cell::Null);
    }
    macro_rules! int {
        ($t:ty, $variant:ident) => {
            Cell::$variant(array.as_primitive::<$t>().value(row).into())
        };
    }
    Ok(match array.data_type() {
        DataType::Null => Cell::Null,
        DataType::Boolean => Cell::Bool(array.as_boolean().value(row)),
        DataType::Int8 => int!(Int8Type, Int),
        DataType::Int16 => int!(Int16Type, Int),
        DataType::Int32 => int!(Int32Type, Int),
        DataType::Int64 => int!(Int64Type, Int),
        DataType::UInt8 => int!(UInt8Type, UInt),
        DataType::UInt16 => int!(UInt16Type, UInt),
        DataType::UInt32 => int!(UInt32Type, UInt),
        DataType::UInt64 => int!(UInt64Type, UInt),
        DataType::Float16 => Cell::Float(array.as_primitive::<Float16Type>().value(row).to_f64()),
        DataType::Float32 => Cell::Float(array.as_primitive::<Float32Type>().value(row).into()),
        DataType::Float64 => Cell::Float(array.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => Cell::Str(array.as_string::<i32>().value(row).to_owned()),
        DataType::LargeUtf8 => Cell::Str(array.as_string::<i64>().value(row).to_owned()),
        DataType::Utf8View => Cell::Str(array.as_string_view().value(row).to_owned()),
        DataType::Binary => Cell::Bytes(array.as_binary::<i32>().value(row).to_vec()),
        DataType::LargeBinary => Cell::Bytes(array.as_binary::<i64>().value(row).to_vec()),
        DataType::BinaryView => Cell::Bytes(array.as_binary_view().value(row).to_vec()),
        DataType::FixedSizeBinary(_) => {
            Cell::Bytes(array.as_fixed_size_binary().value(row).to_vec())
        }
        DataType::Struct(_) => {
            let s = array.as_struct();
            let Some(bytes) = s.column_by_name("bytes") else {
                return Ok(Cell::Other(format!("a struct ({})", array.data_type())));
            };
            match cell(bytes.as_ref(), row)? {
                Cell::Bytes(b) => Cell::Image(b),
                Cell::Null => {
                    let path = match s.column_by_name("path").map(|p| cell(p.as_ref(), row)) {
                        Some(Ok(Cell::Str(p))) => {
                            format!(" (its path is {p:?}; files outside the table are not read)")
                        }
                        _ => String::new(),
                    };
                    return Err(format!("an image struct without bytes{path}"));
                }
                _ => Cell::Other(format!("a struct ({})", array.data_type())),
            }
        }
        DataType::Dictionary(_, _) => {
            // A dictionary-encoded column (a pandas categorical): the row's key picks its
            // value from the dictionary.
            let dict = array.as_any_dictionary();
            let values = dict.values();
            let key = match cell(dict.keys(), row)? {
                Cell::Int(k) => usize::try_from(k).ok(),
                Cell::UInt(k) => usize::try_from(k).ok(),
                _ => None,
            };
            match key.filter(|&k| k < values.len()) {
                Some(k) => cell(values.as_ref(), k)?,
                None => {
                    return Err(format!(
                        "a dictionary key outside its {} values",
                        values.len()
                    ));
                }
            }
        }
        DataType::List(_) => list(array.as_list::<i32>().value(row).as_ref())?,
        DataType::LargeList(_) => list(array.as_list::<i64>().value(row).as_ref())?,
        DataType::FixedSizeList(_, _) => list(array.as_fixed_size_list().value(row).as_ref())?,
        other => Cell::Other(format!("a value of type {other}")),
    })
}

/// One list value (its elements as `items`): a numeric array when the elements are
/// numbers or equally shaped numeric lists, else a list of cells.
fn list(items: &dyn arrow_array::Array) -> std::result::Result<Cell, String> {
    if let Some((kind, size)) = numeric(items.data_type()) {
        if items.null_count() > 0 {
            return Err("a list with a null element".into());
        }
        return Ok(Cell::Array(Array {
            dtype: dtype(kind, size),
            shape: vec![items.len() as u64],
            data: numeric_bytes(items),
        }));
    }
    let cells = (0..items.len())
        .map(|i| cell(items, i))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    // Nested numeric lists of one shape stack into one array.
    let arrays: Vec<&Array> = cells
        .iter()
        .filter_map(|c| match c {
            Cell::Array(a) => Some(a),
            _ => None,
        })
        .collect();
    if let Some(first) = arrays.first()
        && arrays.len() == cells.len()
    {
        if let Some(other) = arrays
            .iter()
            .find(|a| a.dtype != first.dtype || a.shape != first.shape)
        {
            return Err(format!(
                "nested lists of shapes {:?} and {:?} are not an array",
                first.shape, other.shape
            ));
        }
        let mut shape = vec![arrays.len() as u64];
        shape.extend_from_slice(&first.shape);
        return Ok(Cell::Array(Array {
            dtype: first.dtype.clone(),
            shape,
            data: arrays.iter().flat_map(|a| a.data.iter().copied()).collect(),
        }));
    }
    Ok(Cell::List(cells))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{Int16Builder, ListBuilder};
    use arrow_array::{ArrayRef, BinaryArray, Float32Array, StringArray, StructArray};
    use arrow_schema::{Field, Fields};

    #[test]
    fn values_of_each_type() {
        let f = Float32Array::from(vec![Some(1.5), None]);
        assert_eq!(cell(&f, 0), Ok(Cell::Float(1.5)));
        assert_eq!(cell(&f, 1), Ok(Cell::Null));
        let mut b = ListBuilder::new(ListBuilder::new(Int16Builder::new()));
        for rows in [[[1i16, -2], [3, 4]], [[5, 6], [7, 8]]] {
            for row in rows {
                b.values().append_value(row.map(Some));
            }
            b.append(true);
        }
        let nested = b.finish();
        let Ok(Cell::Array(a)) = cell(&nested, 1) else {
            panic!("{:?}", cell(&nested, 1))
        };
        assert_eq!(a.shape, [2, 2]);
        assert_eq!(a.dtype.descr(), "<i2");
        assert_eq!(
            a.data,
            [5i16, 6, 7, 8]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<_>>()
        );
        let fields = Fields::from(vec![
            Field::new("bytes", DataType::Binary, true),
            Field::new("path", DataType::Utf8, true),
        ]);
        let image = StructArray::new(
            fields,
            vec![
                Arc::new(BinaryArray::from(vec![Some(&b"jpeg"[..]), None])) as ArrayRef,
                Arc::new(StringArray::from(vec![Some("a.jpg"), Some("b.jpg")])),
            ],
            None,
        );
        assert_eq!(cell(&image, 0), Ok(Cell::Image(b"jpeg".to_vec())));
        assert!(cell(&image, 1).unwrap_err().contains("\"b.jpg\""));
    }

    #[test]
    fn a_dictionary_encoded_row_is_its_value() {
        use arrow_array::DictionaryArray;
        use arrow_array::types::Int8Type;
        let dict: DictionaryArray<Int8Type> = vec![Some("cat"), Some("dog"), None, Some("cat")]
            .into_iter()
            .collect();
        assert_eq!(cell(&dict, 0), Ok(Cell::Str("cat".into())));
        assert_eq!(cell(&dict, 1), Ok(Cell::Str("dog".into())));
        assert_eq!(cell(&dict, 2), Ok(Cell::Null));
        assert_eq!(cell(&dict, 3), Ok(Cell::Str("cat".into())));
    }

    #[test]
    fn variable_size_numeric_lists_are_var_lists() {
        let item = |t: DataType| Arc::new(Field::new("item", t, true));
        let f32_list = DataType::List(item(DataType::Float32));
        assert!(is_var_numeric_list(&f32_list));
        assert!(is_var_numeric_list(&DataType::LargeList(item(
            DataType::Int64
        ))));
        assert!(is_var_numeric_list(&DataType::List(item(f32_list.clone()))));
        assert!(is_var_numeric_list(&DataType::List(item(
            DataType::FixedSizeList(item(DataType::Float32), 2)
        ))));
        assert!(!is_var_numeric_list(&DataType::FixedSizeList(
            item(DataType::Float32),
            2
        )));
        assert!(!is_var_numeric_list(&DataType::FixedSizeList(
            item(f32_list),
            2
        )));
        assert!(!is_var_numeric_list(&DataType::List(item(DataType::Utf8))));
        assert!(!is_var_numeric_list(&DataType::Int64));
    }

    #[test]
    fn groups_locate_records() {
        let mut g = Groups::default();
        for (file, rows) in [(0, 3), (0, 0), (1, 2)] {
            g.push(Group {
                file,
                index: 0,
                first_row: 0,
                rows,
            });
        }
        assert_eq!(g.total, 5);
        assert_eq!(g.find(0), (0, 0));
        assert_eq!(g.find(2), (0, 2));
        assert_eq!(g.find(3), (1, 0));
        assert_eq!(g.find(4), (1, 1));
    }
}
