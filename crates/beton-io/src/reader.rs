//! The validated, zero-copy `.beton` reader.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::{
    self, ALLOC_ROW_SIZE, ARGS_SIZE, FIELD_DESC_SIZE, FieldMetadata, FieldType, HEADER_SIZE,
    Header, IMAGE_MODE_JPEG, IMAGE_MODE_RAW, Layout, MIN_PAGE_SIZE, MIN_READ_PAGE_SIZE, NAME_SIZE,
    NdArrayArgs, VERSION,
};
use crate::json::JsonValue;
use crate::mapping::Mapping;
use crate::page_map::PageMap;
use crate::writer::{FieldValue, RgbImage};

/// The metadata layout of a user-defined field type, registered with
/// [`ReaderOptions::custom_field`] (FFCV's `custom_handlers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CustomField {
    /// Bytes of the field's metadata in a row (numpy `metadata_type.itemsize`).
    pub metadata_itemsize: u64,
    /// Alignment of the field's metadata (numpy `metadata_type.alignment`: 1 for a struct
    /// built without `align=True`, the item size for a scalar).
    pub metadata_alignment: u64,
}

/// Options for [`Reader::open_with`].
#[derive(Debug, Clone, Default)]
pub struct ReaderOptions {
    custom: HashMap<String, CustomField>,
}

impl ReaderOptions {
    /// Default options: no custom fields.
    pub fn new() -> ReaderOptions {
        ReaderOptions::default()
    }

    /// Registers the metadata layout of the field named `name`, as FFCV's `custom_handlers`
    /// does: it applies to the field of that name whatever its type id (255 needs it), and the
    /// field is then read as [`FieldType::Custom`].
    pub fn custom_field(
        mut self,
        name: impl Into<String>,
        metadata_itemsize: u64,
        metadata_alignment: u64,
    ) -> ReaderOptions {
        self.custom.insert(
            name.into(),
            CustomField {
                metadata_itemsize,
                metadata_alignment,
            },
        );
        self
    }
}

/// One field of a file, from its descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The name (ASCII, at most 16 bytes).
    pub name: String,
    /// The decoded type.
    pub field_type: FieldType,
    /// The type id in the descriptor (255 for custom fields).
    pub type_id: u8,
    /// Offset of this field's metadata inside a metadata row.
    pub metadata_offset: u64,
    /// Bytes of this field's metadata.
    pub metadata_itemsize: u64,
}

/// One allocation-table row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AllocRow {
    /// The sample the allocation belongs to.
    pub sample_id: u64,
    /// Byte offset of the allocation in the file.
    pub ptr: u64,
    /// Bytes allocated.
    pub size: u64,
}

/// A validated `.beton` file, mapped read-only.
///
/// [`Reader::open`] checks the whole structure before returning; afterwards every accessor is
/// cheap and borrows from the map. `Reader` is `Send + Sync`.
#[derive(Debug)]
pub struct Reader {
    path: PathBuf,
    map: Mapping,
    header: Header,
    layout: Layout,
    fields: Vec<Field>,
    /// Distinct allocation pointers, sorted, with the largest size of the rows at each.
    allocs: Vec<(u64, u64)>,
    page_map: PageMap,
}

impl Reader {
    /// Opens and validates `path` with default options (custom fields are an error).
    ///
    /// The file is memory-mapped; it must not be truncated or rewritten while the `Reader`
    /// lives (writers in this crate write to a temporary name and rename).
    pub fn open(path: impl AsRef<Path>) -> Result<Reader> {
        Reader::open_with(path, &ReaderOptions::default())
    }

    /// Opens and validates `path`, with custom field layouts from `options`.
    pub fn open_with(path: impl AsRef<Path>, options: &ReaderOptions) -> Result<Reader> {
        let path = path.as_ref().to_path_buf();
        let io = |op: &str| {
            let path = path.clone();
            let op = op.to_string();
            move |source| Error::Io { path, op, source }
        };
        let file = File::open(&path).map_err(io("open"))?;
        let file_size = file.metadata().map_err(io("stat"))?.len();
        if file_size < HEADER_SIZE {
            return Err(Error::Truncated {
                path,
                what: "header".into(),
                start: 0,
                end: HEADER_SIZE,
                file_size,
            });
        }
        let map = Mapping::map(file).map_err(io("memory-map"))?;
        if map.len() != file_size {
            return Err(Error::Io {
                path,
                op: "memory-map".into(),
                source: std::io::Error::other("file size changed while opening"),
            });
        }
        Reader::from_mapping(path, map, options)
    }

    /// Validates a file that is already in memory, as [`Reader::open_with`] validates a file on
    /// disk; `path` only names it in errors. Useful for tests, fuzzing and embedded data.
    pub fn from_vec(
        path: impl Into<PathBuf>,
        bytes: Vec<u8>,
        options: &ReaderOptions,
    ) -> Result<Reader> {
        let path = path.into();
        if (bytes.len() as u64) < HEADER_SIZE {
            return Err(Error::Truncated {
                path,
                what: "header".into(),
                start: 0,
                end: HEADER_SIZE,
                file_size: bytes.len() as u64,
            });
        }
        Reader::from_mapping(path, Mapping::Owned(bytes), options)
    }

    pub(crate) fn from_mapping(
        path: PathBuf,
        map: Mapping,
        options: &ReaderOptions,
    ) -> Result<Reader> {
        let parsed = Parsed::parse(&path, &map, options)?;
        tracing::debug!(
            path = %path.display(),
            samples = parsed.header.num_samples,
            fields = parsed.fields.len(),
            alloc_rows = parsed.layout.alloc_table_rows,
            "opened .beton"
        );
        Ok(Reader {
            path,
            map,
            header: parsed.header,
            layout: parsed.layout,
            fields: parsed.fields,
            allocs: parsed.allocs,
            page_map: parsed.page_map,
        })
    }

    /// The size of the opened file now, from the open file itself (`fstat`), or `None` for
    /// a reader of bytes in memory. A mapped file must keep [`Reader::file_size`] bytes:
    /// callers that run long (the loader, each epoch) compare the two to report a file
    /// truncated in place instead of dying of SIGBUS when they read past its new end.
    pub fn current_file_size(&self) -> Option<std::io::Result<u64>> {
        self.map.current_len()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Region offsets and sizes.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Number of samples.
    pub fn num_samples(&self) -> u64 {
        self.header.num_samples
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> u64 {
        u64::from(self.header.page_size)
    }

    /// File size in bytes.
    pub fn file_size(&self) -> u64 {
        self.layout.file_size
    }

    /// The whole file, mapped or in memory. A reader opened from byte ranges
    /// ([`Reader::open_ranges`], a remote object) holds only the file's structure, so
    /// this is [`Error::NotInMemory`] there: its data is read through a page cache.
    pub fn bytes(&self) -> Result<&[u8]> {
        self.map.whole().ok_or_else(|| Error::NotInMemory {
            path: self.path.clone(),
            start: 0,
            end: self.layout.file_size,
        })
    }

    /// Whether every byte of the file is at hand ([`Reader::bytes`] succeeds): `false`
    /// only for a reader opened from byte ranges.
    pub fn holds_data(&self) -> bool {
        self.map.whole().is_some()
    }

    /// Bytes `start..end` of the file, from the map or, for a reader opened from byte
    /// ranges, the structural regions it holds ([`Error::NotInMemory`] elsewhere).
    pub fn range(&self, start: u64, end: u64) -> Result<&[u8]> {
        self.held(start, end)
    }

    fn held(&self, start: u64, end: u64) -> Result<&[u8]> {
        held(&self.map, &self.path, start, end)
    }

    /// The fields in file order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// Index of the field named `name`.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// The 1024-byte argument block of field `field`.
    pub fn field_arguments(&self, field: usize) -> Result<&[u8]> {
        self.check_field(field)?;
        let start = HEADER_SIZE + field as u64 * FIELD_DESC_SIZE + 1 + NAME_SIZE as u64;
        self.held(start, start + ARGS_SIZE as u64)
    }

    /// The whole metadata row of `sample`.
    pub fn metadata_row(&self, sample: u64) -> Result<&[u8]> {
        self.check_sample(sample)?;
        // In bounds: open() checked metadata_offset + num_samples * itemsize <= file size.
        let start = self.layout.metadata_offset + sample * self.layout.metadata_itemsize;
        self.held(start, start + self.layout.metadata_itemsize)
    }

    /// The metadata bytes of one field of one sample.
    pub fn metadata_bytes(&self, sample: u64, field: usize) -> Result<&[u8]> {
        self.check_field(field)?;
        let row = self.metadata_row(sample)?;
        let f = &self.fields[field];
        let start = f.metadata_offset as usize;
        Ok(&row[start..start + f.metadata_itemsize as usize])
    }

    /// Typed metadata of one field of one sample.
    pub fn metadata(&self, sample: u64, field: usize) -> Result<FieldMetadata> {
        let bytes = self.metadata_bytes(sample, field)?;
        Ok(FieldMetadata::decode(&self.fields[field].field_type, bytes))
    }

    /// The allocation table in file order.
    pub fn alloc_rows(&self) -> impl Iterator<Item = AllocRow> + '_ {
        // Every kind of reader holds the (validated) table, so the fallback never applies.
        let table = self
            .map
            .get(self.header.alloc_table_ptr, self.layout.file_size)
            .unwrap_or_default();
        table.chunks_exact(ALLOC_ROW_SIZE as usize).map(decode_row)
    }

    /// Size of the allocation starting at `ptr`: when several rows share the pointer (see
    /// `tied_ptrs` in docs/format.md), the largest, which is the data that was written.
    pub fn alloc_size(&self, ptr: u64) -> Option<u64> {
        self.allocs
            .binary_search_by_key(&ptr, |&(p, _)| p)
            .ok()
            .map(|i| self.allocs[i].1)
    }

    /// The bytes of the allocation starting at `ptr`, with its size from the allocation table.
    pub fn data_at(&self, ptr: u64) -> Result<&[u8]> {
        let size = self.alloc_size(ptr).ok_or_else(|| Error::NoAllocation {
            path: self.path.clone(),
            ptr,
        })?;
        // In the file: open() checked ptr + size <= alloc_table_ptr for every row.
        self.held(ptr, ptr + size)
    }

    /// The stored bytes of one field of one sample, exactly: Bytes/JSON `size` bytes (JSON
    /// includes its NUL), NDArray/TorchTensor `item_size * prod(shape)` bytes, raw images
    /// `height * width * 3` bytes, JPEG images the whole allocation. `Ok(None)` for fields kept
    /// in the metadata (Int, Float, custom).
    pub fn field_data(&self, sample: u64, field: usize) -> Result<Option<&[u8]>> {
        let meta = self.metadata(sample, field)?;
        let Some(ptr) = meta.ptr() else {
            return Ok(None);
        };
        let len = match meta {
            FieldMetadata::Bytes { size, .. } | FieldMetadata::Json { size, .. } => size,
            FieldMetadata::NdArray { .. } | FieldMetadata::TorchTensor { .. } => self.fields[field]
                .field_type
                .ndarray_args()
                .and_then(NdArrayArgs::byte_len)
                .expect("validated at open"),
            FieldMetadata::RgbImage {
                mode,
                width,
                height,
                ..
            } if mode == IMAGE_MODE_RAW => u64::from(width) * u64::from(height) * 3,
            _ => self.alloc_size(ptr).expect("validated at open"),
        };
        // open() checked that every pointer resolves and that len fits in its allocation.
        self.held(ptr, ptr + len).map(Some)
    }

    /// The JSON value of a JSON field: the stored text (up to its NUL) parsed as Python's
    /// `json.loads` would.
    pub fn json_value(&self, sample: u64, field: usize) -> Result<JsonValue> {
        let meta = self.metadata(sample, field)?;
        let data = self.field_data(sample, field)?;
        let bad = |reason: String| Error::InvalidMetadata {
            path: self.path.clone(),
            sample,
            field: self.fields[field].name.clone(),
            offset: self.metadata_file_offset(sample, field),
            reason,
        };
        let (FieldMetadata::Json { .. }, Some(data)) = (meta, data) else {
            return Err(bad(format!(
                "a {} field holds no JSON",
                self.fields[field].field_type.type_name()
            )));
        };
        let text = data.split(|&b| b == 0).next().unwrap_or_default();
        let text =
            std::str::from_utf8(text).map_err(|e| bad(format!("stored JSON is not UTF-8: {e}")))?;
        JsonValue::parse(text).map_err(|e| bad(format!("stored JSON does not parse: {e}")))
    }

    /// Every field of `sample` as the [`FieldValue`]s a [`crate::DatasetWriter`] takes, so that
    /// a file can be rewritten. Custom fields cannot be read this way.
    pub fn read_sample(&self, sample: u64) -> Result<Vec<FieldValue>> {
        (0..self.fields.len())
            .map(|field| {
                let data = || -> Result<Vec<u8>> {
                    Ok(self.field_data(sample, field)?.unwrap_or_default().to_vec())
                };
                Ok(match self.metadata(sample, field)? {
                    FieldMetadata::Float(x) => FieldValue::Float(x),
                    FieldMetadata::Int(x) => FieldValue::Int(x),
                    FieldMetadata::Bytes { .. } => FieldValue::Bytes(data()?),
                    FieldMetadata::Json { .. } => FieldValue::Json(self.json_value(sample, field)?),
                    FieldMetadata::NdArray { .. } | FieldMetadata::TorchTensor { .. } => {
                        FieldValue::NdArray(data()?)
                    }
                    FieldMetadata::RgbImage {
                        mode,
                        width,
                        height,
                        ..
                    } => FieldValue::RgbImage(if mode == IMAGE_MODE_RAW {
                        RgbImage::Raw {
                            width,
                            height,
                            pixels: data()?,
                        }
                    } else {
                        RgbImage::Jpeg {
                            width,
                            height,
                            bytes: data()?,
                        }
                    }),
                    FieldMetadata::Custom => {
                        return Err(Error::InvalidMetadata {
                            path: self.path.clone(),
                            sample,
                            field: self.fields[field].name.clone(),
                            offset: self.metadata_file_offset(sample, field),
                            reason: "custom fields have no FieldValue".into(),
                        });
                    }
                })
            })
            .collect()
    }

    fn metadata_file_offset(&self, sample: u64, field: usize) -> u64 {
        self.layout.metadata_offset
            + sample * self.layout.metadata_itemsize
            + self.fields[field].metadata_offset
    }

    /// The page map.
    pub fn page_map(&self) -> &PageMap {
        &self.page_map
    }

    fn check_sample(&self, sample: u64) -> Result<()> {
        if sample >= self.header.num_samples {
            return Err(Error::SampleOutOfRange {
                path: self.path.clone(),
                sample,
                num_samples: self.header.num_samples,
            });
        }
        Ok(())
    }

    fn check_field(&self, field: usize) -> Result<()> {
        if field >= self.fields.len() {
            return Err(Error::FieldOutOfRange {
                path: self.path.clone(),
                field,
                num_fields: self.fields.len(),
            });
        }
        Ok(())
    }
}

fn decode_row(b: &[u8]) -> AllocRow {
    let w = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    AllocRow {
        sample_id: w(0),
        ptr: w(8),
        size: w(16),
    }
}

/// Everything `open` derives from the bytes, before the reader exists.
struct Parsed {
    header: Header,
    layout: Layout,
    fields: Vec<Field>,
    allocs: Vec<(u64, u64)>,
    page_map: PageMap,
}

impl Parsed {
    fn parse(path: &Path, map: &Mapping, options: &ReaderOptions) -> Result<Parsed> {
        let p = || path.to_path_buf();
        let file_size = map.len();
        let header = Header::decode(
            held(map, path, 0, HEADER_SIZE)?
                .try_into()
                .expect("HEADER_SIZE bytes"),
        );
        if header.version != VERSION {
            return Err(Error::UnsupportedVersion {
                path: p(),
                version: header.version,
            });
        }
        if header.num_fields == 0 {
            return Err(Error::NoFields { path: p() });
        }
        let page_size = u64::from(header.page_size);
        if !page_size.is_power_of_two() {
            return Err(Error::InvalidPageSize {
                path: p(),
                page_size,
                reason: "not a power of two".into(),
            });
        }
        if page_size < MIN_READ_PAGE_SIZE {
            return Err(Error::InvalidPageSize {
                path: p(),
                page_size,
                reason: format!(
                    "below {MIN_READ_PAGE_SIZE} bytes (FFCV writes pages of at least \
                     {MIN_PAGE_SIZE}); tiny pages would cost memory in proportion to the file"
                ),
            });
        }
        let num_fields = usize::from(header.num_fields);
        // At most 65535 * 1041 + 24: no overflow.
        let metadata_offset = HEADER_SIZE + num_fields as u64 * FIELD_DESC_SIZE;
        if metadata_offset > file_size {
            return Err(Error::Truncated {
                path: p(),
                what: format!("{num_fields} field descriptors"),
                start: HEADER_SIZE,
                end: metadata_offset,
                file_size,
            });
        }

        let parsed_fields = parse_fields(path, map, num_fields, options)?;
        let members: Vec<(u64, u64)> = parsed_fields
            .iter()
            .map(|(f, align)| (f.metadata_itemsize, *align))
            .collect();
        let (offsets, itemsize) = format::row_layout(&members).ok_or_else(|| Error::Overflow {
            path: p(),
            what: "metadata row size".into(),
            detail: format!("{members:?}"),
        })?;
        let fields: Vec<Field> = parsed_fields
            .into_iter()
            .zip(offsets)
            .map(|((f, _), off)| Field {
                metadata_offset: off,
                ..f
            })
            .collect();

        let metadata_size =
            header
                .num_samples
                .checked_mul(itemsize)
                .ok_or_else(|| Error::Overflow {
                    path: p(),
                    what: "metadata size".into(),
                    detail: format!("num_samples {} x row size {itemsize}", header.num_samples),
                })?;
        let metadata_end = metadata_offset
            .checked_add(metadata_size)
            .filter(|&end| end <= file_size)
            .ok_or_else(|| Error::Truncated {
                path: p(),
                what: format!(
                    "metadata of {} samples x {itemsize} bytes",
                    header.num_samples
                ),
                start: metadata_offset,
                end: metadata_offset.saturating_add(metadata_size),
                file_size,
            })?;
        let data_region_start =
            format::align_up(metadata_end, page_size).ok_or_else(|| Error::Overflow {
                path: p(),
                what: "data region start".into(),
                detail: format!("align_up({metadata_end}, {page_size})"),
            })?;

        let table = header.alloc_table_ptr;
        let bad_table = |reason: String| Error::InvalidAllocTable {
            path: p(),
            alloc_table_ptr: table,
            reason,
        };
        if table > file_size {
            return Err(bad_table(format!(
                "past the end of the {file_size}-byte file"
            )));
        }
        if table < metadata_end {
            return Err(bad_table(format!(
                "inside the header/metadata, which end at byte {metadata_end}"
            )));
        }
        let table_bytes = file_size - table;
        if !table_bytes.is_multiple_of(ALLOC_ROW_SIZE) {
            return Err(bad_table(format!(
                "the {table_bytes} bytes to the end of the file are not a whole number of 24-byte rows"
            )));
        }
        let alloc_table_rows = table_bytes / ALLOC_ROW_SIZE;

        // Rows: the count is bounded by the file size, so these vectors are too.
        let mut allocs = Vec::with_capacity(alloc_table_rows as usize);
        let mut pairs = Vec::with_capacity(alloc_table_rows as usize);
        for (i, chunk) in held(map, path, table, file_size)?
            .chunks_exact(ALLOC_ROW_SIZE as usize)
            .enumerate()
        {
            let row = decode_row(chunk);
            let bad = |reason: String| Error::InvalidAllocRow {
                path: p(),
                row: i as u64,
                offset: table + i as u64 * ALLOC_ROW_SIZE,
                sample_id: row.sample_id,
                ptr: row.ptr,
                size: row.size,
                reason,
            };
            if row.sample_id >= header.num_samples {
                return Err(bad(format!(
                    "sample_id is not below num_samples {}",
                    header.num_samples
                )));
            }
            let end = row
                .ptr
                .checked_add(row.size)
                .ok_or_else(|| bad("ptr + size overflows 64 bits".into()))?;
            if end > table {
                return Err(bad(format!(
                    "ends at byte {end}, past the allocation table at {table}"
                )));
            }
            if row.size > 0 {
                if row.ptr < data_region_start {
                    return Err(bad(format!(
                        "starts before the data region at byte {data_region_start}"
                    )));
                }
                if row.ptr % page_size + row.size > page_size {
                    return Err(bad(format!(
                        "crosses a page boundary (page size {page_size}); FFCV never writes that"
                    )));
                }
            }
            allocs.push((row.ptr, row.size));
            pairs.push((row.sample_id, row.ptr / page_size));
        }
        allocs.sort_unstable();
        // Keep one entry per ptr, with the largest size (the sort put it last).
        allocs.reverse();
        allocs.dedup_by_key(|&mut (ptr, _)| ptr);
        allocs.reverse();

        let layout = Layout {
            metadata_offset,
            metadata_itemsize: itemsize,
            metadata_size,
            data_region_start,
            alloc_table_rows,
            file_size,
        };
        let num_pages = file_size.div_ceil(page_size);
        let page_map = PageMap::build(page_size, num_pages, pairs);
        let parsed = Parsed {
            header,
            layout,
            fields,
            allocs,
            page_map,
        };
        parsed.check_metadata(path, map)?;
        Ok(parsed)
    }

    /// Checks that every data pointer in the metadata starts an allocation large enough for
    /// what the field says it holds.
    fn check_metadata(&self, path: &Path, map: &Mapping) -> Result<()> {
        let data_fields: Vec<(usize, &Field)> = self
            .fields
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                !matches!(
                    f.field_type,
                    FieldType::Int | FieldType::Float | FieldType::Custom
                )
            })
            .collect();
        if data_fields.is_empty() {
            return Ok(());
        }
        let itemsize = self.layout.metadata_itemsize;
        let base = self.layout.metadata_offset;
        let region = held(map, path, base, base + self.layout.metadata_size)?;
        for sample in 0..self.header.num_samples {
            let row_start = self.layout.metadata_offset + sample * itemsize;
            for &(_, f) in &data_fields {
                let offset = row_start + f.metadata_offset;
                let b = &region
                    [(offset - base) as usize..(offset - base + f.metadata_itemsize) as usize];
                let meta = FieldMetadata::decode(&f.field_type, b);
                let bad = |reason: String| Error::InvalidMetadata {
                    path: path.to_path_buf(),
                    sample,
                    field: f.name.clone(),
                    offset,
                    reason,
                };
                let ptr = meta.ptr().expect("data field");
                let alloc = match self.allocs.binary_search_by_key(&ptr, |&(p, _)| p) {
                    Ok(i) => self.allocs[i].1,
                    Err(_) => {
                        return Err(bad(format!(
                            "data pointer {ptr} starts no allocation-table row"
                        )));
                    }
                };
                let needed = match meta {
                    FieldMetadata::Bytes { size, .. } | FieldMetadata::Json { size, .. } => size,
                    FieldMetadata::NdArray { .. } | FieldMetadata::TorchTensor { .. } => f
                        .field_type
                        .ndarray_args()
                        .and_then(NdArrayArgs::byte_len)
                        .expect("checked when parsing the field"),
                    FieldMetadata::RgbImage {
                        mode,
                        width,
                        height,
                        ..
                    } => match mode {
                        IMAGE_MODE_RAW => u64::from(width) * u64::from(height) * 3,
                        IMAGE_MODE_JPEG => 0,
                        other => {
                            return Err(bad(format!(
                                "image mode {other} is neither 0 (jpg) nor 1 (raw)"
                            )));
                        }
                    },
                    _ => 0,
                };
                if needed > alloc {
                    return Err(bad(format!(
                        "needs {needed} bytes at {ptr} but the allocation there has {alloc}"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Parses the field descriptors into fields (with `metadata_offset` still 0) and the alignment
/// of each field's metadata, from which the caller lays out the row.
pub(crate) fn parse_fields(
    path: &Path,
    map: &Mapping,
    num_fields: usize,
    options: &ReaderOptions,
) -> Result<Vec<(Field, u64)>> {
    let mut fields = Vec::with_capacity(num_fields);
    let mut seen = HashSet::new();
    for index in 0..num_fields {
        let offset = HEADER_SIZE + index as u64 * FIELD_DESC_SIZE;
        let desc = held(map, path, offset, offset + FIELD_DESC_SIZE)?;
        let type_id = desc[0];
        let name_bytes = &desc[1..1 + NAME_SIZE];
        let args = &desc[1 + NAME_SIZE..];
        let lossy = String::from_utf8_lossy(name_bytes)
            .trim_end_matches('\0')
            .to_string();
        let bad_name = |reason: &str| Error::InvalidFieldName {
            path: path.to_path_buf(),
            index,
            offset: offset + 1,
            name: lossy.clone(),
            reason: reason.into(),
        };
        // FFCV decodes all 16 bytes as ASCII, then cuts at the first NUL.
        if !name_bytes.is_ascii() {
            return Err(bad_name("field names are ASCII"));
        }
        let end = name_bytes.iter().position(|&b| b == 0).unwrap_or(NAME_SIZE);
        let name = String::from_utf8(name_bytes[..end].to_vec()).expect("ASCII");
        if !seen.insert(name.clone()) {
            return Err(bad_name(
                "used by an earlier field too (FFCV would merge them)",
            ));
        }
        let bad_args = |reason: String| Error::InvalidFieldArguments {
            path: path.to_path_buf(),
            index,
            name: name.clone(),
            offset: offset + 1 + NAME_SIZE as u64,
            reason,
        };
        let (field_type, itemsize, align) = if let Some(custom) = options.custom.get(&name) {
            if custom.metadata_itemsize == 0 || !custom.metadata_alignment.is_power_of_two() {
                return Err(bad_args(format!(
                    "registered custom layout {custom:?} needs a non-zero itemsize and a power-of-two alignment"
                )));
            }
            (
                FieldType::Custom,
                custom.metadata_itemsize,
                custom.metadata_alignment,
            )
        } else {
            let field_type = match type_id {
                0 => FieldType::Float,
                1 => FieldType::Int,
                2 => FieldType::RgbImage,
                3 => FieldType::Bytes,
                4 => FieldType::NdArray(NdArrayArgs::decode(args).map_err(bad_args)?),
                5 => FieldType::Json,
                6 => FieldType::TorchTensor(NdArrayArgs::decode(args).map_err(bad_args)?),
                255 => {
                    return Err(Error::MissingCustomHandler {
                        path: path.to_path_buf(),
                        index,
                        name,
                    });
                }
                other => {
                    return Err(Error::UnknownTypeId {
                        path: path.to_path_buf(),
                        index,
                        offset,
                        type_id: other,
                    });
                }
            };
            let (size, align) = field_type.metadata_layout().expect("built-in type");
            (field_type, size, align)
        };
        let field = Field {
            name,
            field_type,
            type_id,
            metadata_offset: 0,
            metadata_itemsize: itemsize,
        };
        fields.push((field, align));
    }
    Ok(fields)
}

/// Bytes `start..end` of `map`, or [`Error::NotInMemory`] when they are not held.
fn held<'a>(map: &'a Mapping, path: &Path, start: u64, end: u64) -> Result<&'a [u8]> {
    map.get(start, end).ok_or_else(|| Error::NotInMemory {
        path: path.to_path_buf(),
        start,
        end,
    })
}
