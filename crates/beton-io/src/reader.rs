//! The validated, zero-copy `.beton` reader.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use extension_error::ExtensionError;

use crate::error::{Error, Result, handler_parts};
use crate::fields::{CustomField, CustomHandler, ExtentRule, StoredLen, json::JsonKind};
use crate::format::{
    self, ALLOC_ROW_SIZE, ARGS_SIZE, FIELD_DESC_SIZE, FieldMetadata, FieldType, HEADER_SIZE,
    Header, Layout, MIN_PAGE_SIZE, MIN_READ_PAGE_SIZE, NAME_SIZE, VERSION,
};
use crate::json::JsonValue;
use crate::mapping::Mapping;
use crate::page_map::PageMap;
use crate::value::FieldValue;

/// Options for [`Reader::open_with`].
#[derive(Debug, Clone, Default)]
pub struct ReaderOptions {
    custom: HashMap<String, Arc<dyn CustomHandler>>,
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
            Arc::new(CustomField {
                metadata_itemsize,
                metadata_alignment,
            }),
        );
        self
    }

    /// Registers `handler` for the field named `name` (FFCV's `custom_handlers`): like
    /// [`ReaderOptions::custom_field`], and the handler also says where the field's stored
    /// bytes are and what a sample's value is ([`Reader::value`], [`Reader::field_data`],
    /// the loader's decoders).
    pub fn custom_handler(
        mut self,
        name: impl Into<String>,
        handler: Arc<dyn CustomHandler>,
    ) -> ReaderOptions {
        self.custom.insert(name.into(), handler);
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
    /// The handler of each custom field (`None` for built-in types).
    custom: Vec<Option<Arc<dyn CustomHandler>>>,
    /// Where each field's stored bytes are.
    rules: Vec<ExtentRule>,
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
            custom: parsed.custom,
            rules: parsed.rules,
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

    /// The bytes behind the reader (a shard set stitches the files of mapped shards).
    pub(crate) fn mapping(&self) -> &Mapping {
        &self.map
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

    /// The handler of field `field` when it is a custom field opened with
    /// [`ReaderOptions::custom_handler`] or [`ReaderOptions::custom_field`].
    pub fn custom_handler(&self, field: usize) -> Option<&Arc<dyn CustomHandler>> {
        self.custom.get(field)?.as_ref()
    }

    /// Where field `field` keeps a sample's stored bytes (its type's rule, or its custom
    /// handler's).
    pub fn extent_rule(&self, field: usize) -> ExtentRule {
        self.rules.get(field).copied().unwrap_or(ExtentRule::None)
    }

    /// Whether field `field` stores bytes in the data region.
    pub fn stores_data(&self, field: usize) -> bool {
        self.extent_rule(field) != ExtentRule::None
    }

    /// The stored extent `(ptr, len)` of field `field` given one sample's metadata bytes
    /// of it (`None` for fields kept in the metadata), or why the metadata is invalid. For a
    /// sample of this file the extent lies in an allocation (checked at open).
    pub fn stored_extent(
        &self,
        field: usize,
        metadata: &[u8],
    ) -> std::result::Result<Option<(u64, u64)>, ExtensionError> {
        let rule = self.extent_rule(field);
        let extent = match rule {
            ExtentRule::None => return Ok(None),
            ExtentRule::Fixed { .. } | ExtentRule::Sized => rule.apply(metadata),
            ExtentRule::Computed => {
                let f = self.fields.get(field).ok_or("no such field")?;
                match (f.field_type.kind(), self.custom_handler(field)) {
                    (Some(kind), _) => kind.extent(&f.field_type, metadata)?,
                    (None, Some(handler)) => handler.extent(metadata)?,
                    (None, None) => None,
                }
            }
        };
        let Some(extent) = extent else {
            return Ok(None);
        };
        let len = match extent.len {
            StoredLen::Bytes(len) => len,
            StoredLen::WholeAllocation => self.alloc_size(extent.ptr).ok_or_else(|| {
                format!("data pointer {} starts no allocation-table row", extent.ptr)
            })?,
        };
        Ok(Some((extent.ptr, len)))
    }

    /// The stored bytes of one field of one sample, exactly: Bytes/JSON `size` bytes (JSON
    /// includes its NUL), NDArray/TorchTensor `item_size * prod(shape)` bytes, raw images
    /// `height * width * 3` bytes, JPEG images the whole allocation, custom fields what
    /// their handler says. `Ok(None)` for fields kept in the metadata (Int, Float, custom
    /// fields without stored bytes).
    pub fn field_data(&self, sample: u64, field: usize) -> Result<Option<&[u8]>> {
        let meta = self.metadata_bytes(sample, field)?;
        let Some((ptr, len)) = self
            .stored_extent(field, meta)
            .map_err(|reason| self.bad_metadata(sample, field, reason))?
        else {
            return Ok(None);
        };
        // open() checked that every pointer resolves and that len fits in its allocation.
        self.held(ptr, ptr + len).map(Some)
    }

    /// The JSON value of a JSON field: the stored text (up to its NUL) parsed as Python's
    /// `json.loads` would.
    pub fn json_value(&self, sample: u64, field: usize) -> Result<JsonValue> {
        let meta = self.metadata(sample, field)?;
        let data = self.field_data(sample, field)?;
        let (FieldMetadata::Json { .. }, Some(data)) = (meta, data) else {
            return Err(self.bad_metadata(
                sample,
                field,
                format!(
                    "a {} field holds no JSON",
                    self.fields[field].field_type.type_name()
                )
                .into(),
            ));
        };
        JsonKind::parse_stored(data)
            .map_err(|reason| self.bad_metadata(sample, field, reason.into()))
    }

    /// The value of one field of one sample, as a [`crate::DatasetWriter`] takes it; for a
    /// custom field, what its handler reads ([`FieldValue::Custom`]).
    pub fn value(&self, sample: u64, field: usize) -> Result<FieldValue> {
        let meta = self.metadata_bytes(sample, field)?;
        let data = self.field_data(sample, field)?;
        let f = &self.fields[field];
        let value = match (f.field_type.kind(), self.custom_handler(field)) {
            (Some(kind), _) => kind.read(&f.field_type, meta, data),
            (None, Some(handler)) => handler.read(meta, data).map(FieldValue::Custom),
            (None, None) => Err("custom fields have no FieldValue".into()),
        };
        value.map_err(|reason| self.bad_metadata(sample, field, reason))
    }

    /// Every field of `sample` as the [`FieldValue`]s a [`crate::DatasetWriter`] takes, so that
    /// a file can be rewritten. Custom fields need a handler that reads values.
    pub fn read_sample(&self, sample: u64) -> Result<Vec<FieldValue>> {
        (0..self.fields.len())
            .map(|field| self.value(sample, field))
            .collect()
    }

    fn bad_metadata(&self, sample: u64, field: usize, reason: ExtensionError) -> Error {
        let (reason, cause) = handler_parts(reason);
        Error::InvalidMetadata {
            path: self.path.clone(),
            sample,
            field: self.fields[field].name.clone(),
            offset: self.metadata_file_offset(sample, field),
            reason,
            cause,
        }
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
    custom: Vec<Option<Arc<dyn CustomHandler>>>,
    rules: Vec<ExtentRule>,
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
            .map(|p| (p.field.metadata_itemsize, p.align))
            .collect();
        let (offsets, itemsize) = format::row_layout(&members).ok_or_else(|| Error::Overflow {
            path: p(),
            what: "metadata row size".into(),
            detail: format!("{members:?}"),
        })?;
        let rules: Vec<ExtentRule> = parsed_fields.iter().map(|p| p.rule).collect();
        let mut custom = Vec::with_capacity(parsed_fields.len());
        let mut fields = Vec::with_capacity(parsed_fields.len());
        for (p, off) in parsed_fields.into_iter().zip(offsets) {
            custom.push(p.custom);
            fields.push(Field {
                metadata_offset: off,
                ..p.field
            });
        }

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
            custom,
            rules,
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
            .filter(|&(i, _)| self.rules[i] != ExtentRule::None)
            .collect();
        if data_fields.is_empty() {
            return Ok(());
        }
        let itemsize = self.layout.metadata_itemsize;
        let base = self.layout.metadata_offset;
        let region = held(map, path, base, base + self.layout.metadata_size)?;
        for sample in 0..self.header.num_samples {
            let row_start = self.layout.metadata_offset + sample * itemsize;
            for &(i, f) in &data_fields {
                let offset = row_start + f.metadata_offset;
                let b = &region
                    [(offset - base) as usize..(offset - base + f.metadata_itemsize) as usize];
                let bad = |reason: ExtensionError| {
                    let (reason, cause) = handler_parts(reason);
                    Error::InvalidMetadata {
                        path: path.to_path_buf(),
                        sample,
                        field: f.name.clone(),
                        offset,
                        reason,
                        cause,
                    }
                };
                let rule = self.rules[i];
                let extent = match (rule, f.field_type.kind(), &self.custom[i]) {
                    (ExtentRule::Fixed { .. } | ExtentRule::Sized, _, _) => rule.apply(b),
                    (_, Some(kind), _) => kind.extent(&f.field_type, b).map_err(bad)?,
                    (_, None, Some(handler)) => handler.extent(b).map_err(bad)?,
                    (_, None, None) => None,
                };
                let Some(extent) = extent else { continue };
                let ptr = extent.ptr;
                let alloc = match self.allocs.binary_search_by_key(&ptr, |&(p, _)| p) {
                    Ok(i) => self.allocs[i].1,
                    Err(_) => {
                        return Err(bad(format!(
                            "data pointer {ptr} starts no allocation-table row"
                        )
                        .into()));
                    }
                };
                let needed = match extent.len {
                    StoredLen::Bytes(len) => len,
                    StoredLen::WholeAllocation => 0,
                };
                if needed > alloc {
                    return Err(bad(format!(
                        "needs {needed} bytes at {ptr} but the allocation there has {alloc}"
                    )
                    .into()));
                }
            }
        }
        Ok(())
    }
}

/// One parsed descriptor: the field (with `metadata_offset` still 0), the alignment of its
/// metadata (from which the caller lays out the row), its extent rule and custom handler.
pub(crate) struct ParsedField {
    pub(crate) field: Field,
    pub(crate) align: u64,
    pub(crate) rule: ExtentRule,
    pub(crate) custom: Option<Arc<dyn CustomHandler>>,
}

/// Parses the field descriptors.
pub(crate) fn parse_fields(
    path: &Path,
    map: &Mapping,
    num_fields: usize,
    options: &ReaderOptions,
) -> Result<Vec<ParsedField>> {
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
        let bad_args = |reason: ExtensionError| {
            let (reason, cause) = handler_parts(reason);
            Error::InvalidFieldArguments {
                path: path.to_path_buf(),
                index,
                name: name.clone(),
                offset: offset + 1 + NAME_SIZE as u64,
                reason,
                cause,
            }
        };
        let parsed = if let Some(custom) = options.custom.get(&name) {
            let (itemsize, align) = custom.metadata_layout();
            if itemsize == 0 || !align.is_power_of_two() {
                return Err(bad_args(format!(
                    "registered custom layout {custom:?} needs a non-zero itemsize and a power-of-two alignment"
                )
                .into()));
            }
            custom.accept_arguments(args).map_err(&bad_args)?;
            // The loader reads these two layouts' words without bounds checks per sample.
            let words = match custom.extent_rule() {
                ExtentRule::Fixed { .. } => 8,
                ExtentRule::Sized => 16,
                ExtentRule::None | ExtentRule::Computed => 0,
            };
            if itemsize < words {
                return Err(bad_args(format!(
                    "registered custom layout {custom:?} has {itemsize} metadata bytes, fewer than the {words} its extent rule reads"
                )
                .into()));
            }
            ParsedField {
                field: Field {
                    name,
                    field_type: FieldType::Custom,
                    type_id,
                    metadata_offset: 0,
                    metadata_itemsize: itemsize,
                },
                align,
                rule: custom.extent_rule(),
                custom: Some(Arc::clone(custom)),
            }
        } else {
            let Some(kind) = crate::fields::kind_by_id(type_id) else {
                if type_id == crate::fields::custom::CUSTOM_TYPE_ID {
                    return Err(Error::MissingCustomHandler {
                        path: path.to_path_buf(),
                        index,
                        name,
                    });
                }
                return Err(Error::UnknownTypeId {
                    path: path.to_path_buf(),
                    index,
                    offset,
                    type_id,
                });
            };
            let field_type = kind.parse_arguments(args).map_err(&bad_args)?;
            // One type id may parse into another kind (type id 3 with the VarArrayField
            // tag): the parsed type's own kind gives the layout and the extent rule.
            let kind = field_type.kind().unwrap_or(kind);
            let (itemsize, align) = kind.metadata_layout();
            ParsedField {
                rule: kind.extent_rule(&field_type),
                field: Field {
                    name,
                    field_type,
                    type_id,
                    metadata_offset: 0,
                    metadata_itemsize: itemsize,
                },
                align,
                custom: None,
            }
        };
        fields.push(parsed);
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
