//! The `.beton` writer: FFCV 1.0.2's `DatasetWriter`, page allocation rules included, on threads.

use std::borrow::Cow;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use extension_error::ExtensionError;

use crate::error::{Error, Result, handler_parts};
use crate::fields::{CustomHandler, FieldKind};
use crate::format::{
    self, ALLOC_ROW_SIZE, ARGS_SIZE, FIELD_DESC_SIZE, FieldType, HEADER_SIZE, Header,
    MAX_PAGE_SIZE, MIN_PAGE_SIZE, NAME_SIZE, VERSION,
};
use crate::reader::AllocRow;
use crate::source::SampleSource;
use crate::value::FieldValue;

/// FFCV's default page size (4 x 2 MiB).
pub const DEFAULT_PAGE_SIZE: u64 = 4 * MIN_PAGE_SIZE;

/// A field to write: its name (ASCII, at most 16 bytes) and type.
#[derive(Debug, Clone)]
pub struct FieldSpec {
    /// The name.
    pub name: String,
    /// The type ([`FieldType::Custom`] only with a handler: [`FieldSpec::custom`]).
    pub field_type: FieldType,
    custom: Option<Arc<dyn CustomHandler>>,
}

impl PartialEq for FieldSpec {
    fn eq(&self, other: &FieldSpec) -> bool {
        // Handlers have no value equality: the same handler object is the same type.
        let same_handler = match (&self.custom, &other.custom) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        self.name == other.name && self.field_type == other.field_type && same_handler
    }
}

impl Eq for FieldSpec {}

impl FieldSpec {
    /// A field named `name` of type `field_type`.
    pub fn new(name: impl Into<String>, field_type: FieldType) -> FieldSpec {
        FieldSpec {
            name: name.into(),
            field_type,
            custom: None,
        }
    }

    /// A custom field named `name` written by `handler` (type id 255): its values are
    /// [`FieldValue::Custom`] bytes the handler turns into a payload and metadata.
    pub fn custom(name: impl Into<String>, handler: Arc<dyn CustomHandler>) -> FieldSpec {
        FieldSpec {
            name: name.into(),
            field_type: FieldType::Custom,
            custom: Some(handler),
        }
    }

    /// The handler of a custom field.
    pub fn custom_handler(&self) -> Option<&Arc<dyn CustomHandler>> {
        self.custom.as_ref()
    }

    /// Who encodes this field's values (checked in [`DatasetWriter::new`]: one of the two).
    fn codec(&self) -> Codec<'_> {
        match (self.field_type.kind(), &self.custom) {
            (Some(kind), _) => Codec::Kind(kind),
            (None, Some(handler)) => Codec::Custom(handler.as_ref()),
            (None, None) => {
                unreachable!("DatasetWriter::new refuses custom fields without a handler")
            }
        }
    }
}

/// A field's encoder: its built-in kind or its custom handler.
#[derive(Clone, Copy)]
enum Codec<'a> {
    Kind(&'static dyn FieldKind),
    Custom(&'a dyn CustomHandler),
}

/// What a finished write produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteSummary {
    /// Samples written.
    pub num_samples: u64,
    /// Data pages written.
    pub num_pages: u64,
    /// Rows in the allocation table.
    pub alloc_table_rows: u64,
    /// Size of the file.
    pub file_size: u64,
}

pub(crate) type Progress = Arc<dyn Fn(u64) + Send + Sync>;

/// Writes a `.beton` file the way FFCV 1.0.2's `DatasetWriter.from_indexed_dataset` does.
///
/// Samples are taken in chunks (default 100) by `num_workers` threads; each thread fills its
/// own page and books the next free page number when an allocation does not fit. With one
/// worker the output is byte-identical to FFCV's with `num_workers=1`. The file is written
/// under a temporary name next to the target, header last, and renamed when complete.
#[derive(Clone)]
pub struct DatasetWriter {
    pub(crate) path: PathBuf,
    fields: Vec<FieldSpec>,
    page_size: u64,
    pub(crate) num_workers: usize,
    chunk_size: usize,
    pub(crate) progress: Option<Progress>,
}

impl std::fmt::Debug for DatasetWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetWriter")
            .field("path", &self.path)
            .field("fields", &self.fields)
            .field("page_size", &self.page_size)
            .field("num_workers", &self.num_workers)
            .field("chunk_size", &self.chunk_size)
            .finish_non_exhaustive()
    }
}

impl DatasetWriter {
    /// A writer of `fields` (in this order) to `path`, with FFCV's defaults: page size 8 MiB,
    /// one worker per available core, chunks of 100 samples.
    ///
    /// Fails when there are no fields or more than 65535, a name is not ASCII, longer than 16
    /// bytes or repeated, a field is custom without a handler, or its arguments (an NDArray
    /// shape, ...) cannot be stored.
    pub fn new(path: impl AsRef<Path>, fields: Vec<FieldSpec>) -> Result<DatasetWriter> {
        let path = path.as_ref().to_path_buf();
        let config = |reason: String| Error::InvalidConfig {
            path: path.clone(),
            reason,
        };
        if fields.is_empty() || fields.len() > usize::from(u16::MAX) {
            return Err(config(format!(
                "{} fields; a .beton holds 1 to 65535",
                fields.len()
            )));
        }
        for (index, f) in fields.iter().enumerate() {
            let bad_name = |reason: &str| Error::InvalidFieldName {
                path: path.clone(),
                index,
                offset: 0,
                name: f.name.clone(),
                reason: reason.into(),
            };
            if !f.name.is_ascii() || f.name.contains('\0') {
                return Err(bad_name("field names are ASCII without NUL"));
            }
            if f.name.len() > NAME_SIZE {
                return Err(bad_name(
                    "longer than 16 bytes (FFCV would silently truncate it)",
                ));
            }
            if fields[..index].iter().any(|g| g.name == f.name) {
                return Err(bad_name("used by an earlier field too"));
            }
            match (f.field_type.kind(), &f.custom) {
                (Some(kind), _) => {
                    kind.encode_arguments(&f.field_type)
                        .map_err(|e| config(format!("field {index} {:?}: {e}", f.name)))?;
                }
                (None, Some(handler)) => {
                    let (size, align) = handler.metadata_layout();
                    if size == 0 || !align.is_power_of_two() {
                        return Err(config(format!(
                            "field {index} {:?}: custom layout ({size}, {align}) needs a non-zero itemsize and a power-of-two alignment",
                            f.name
                        )));
                    }
                }
                (None, None) => {
                    return Err(config(format!(
                        "field {index} {:?}: custom fields are written through a handler (FieldSpec::custom)",
                        f.name
                    )));
                }
            }
        }
        let num_workers = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(DatasetWriter {
            path,
            fields,
            page_size: DEFAULT_PAGE_SIZE,
            num_workers,
            chunk_size: 100,
            progress: None,
        })
    }

    /// Sets the page size: a power of two, at least 2 MiB and below 4 GiB, as FFCV requires.
    pub fn with_page_size(mut self, page_size: u64) -> Result<DatasetWriter> {
        let reason = if !page_size.is_power_of_two() {
            Some("not a power of two".to_string())
        } else if page_size < MIN_PAGE_SIZE {
            Some(format!("below FFCV's minimum of {MIN_PAGE_SIZE} bytes"))
        } else if page_size >= MAX_PAGE_SIZE {
            Some(format!("must be below {MAX_PAGE_SIZE} bytes (a u32)"))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(Error::InvalidPageSize {
                path: self.path,
                page_size,
                reason,
            });
        }
        self.page_size = page_size;
        Ok(self)
    }

    /// Sets the number of writer threads (0 means one per available core).
    pub fn with_num_workers(mut self, num_workers: usize) -> DatasetWriter {
        self.num_workers = if num_workers == 0 {
            std::thread::available_parallelism().map_or(1, usize::from)
        } else {
            num_workers
        };
        self
    }

    /// Sets how many consecutive samples a thread takes at a time (FFCV's `chunksize`; at
    /// least 1).
    pub fn with_chunk_size(mut self, chunk_size: usize) -> DatasetWriter {
        self.chunk_size = chunk_size.max(1);
        self
    }

    /// Calls `progress(samples_done)` after every chunk, from the writer threads.
    pub fn with_progress(
        mut self,
        progress: impl Fn(u64) + Send + Sync + 'static,
    ) -> DatasetWriter {
        self.progress = Some(Arc::new(progress));
        self
    }

    /// The output path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The page size.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// The fields.
    pub fn fields(&self) -> &[FieldSpec] {
        &self.fields
    }

    /// Writes every sample of `source` and renames the finished file into place.
    ///
    /// On error the temporary file is removed and `path` is left untouched.
    pub fn write<S: SampleSource + ?Sized>(&self, source: &S) -> Result<WriteSummary> {
        let (summary, tmp) = self.write_unrenamed(source)?;
        match rename_into_place(&tmp, &self.path) {
            Ok(()) => {
                tracing::debug!(path = %self.path.display(), ?summary, "wrote .beton");
                Ok(summary)
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Writes every sample of `source` into the temporary file next to `path` and returns
    /// it, complete but not renamed: the shard writer renames all its files only once every
    /// shard succeeded. On error (or a panic of the source) the temporary file is removed.
    pub(crate) fn write_unrenamed<S: SampleSource + ?Sized>(
        &self,
        source: &S,
    ) -> Result<(WriteSummary, PathBuf)> {
        let tmp = temp_path(&self.path);
        // A panicking source must not leave the temporary file behind either.
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.write_to(&tmp, source)));
        match result {
            Ok(Ok(summary)) => Ok((summary, tmp)),
            Ok(Err(e)) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
            Err(panic) => {
                let _ = std::fs::remove_file(&tmp);
                std::panic::resume_unwind(panic);
            }
        }
    }

    fn write_to<S: SampleSource + ?Sized>(&self, tmp: &Path, source: &S) -> Result<WriteSummary> {
        let path = &self.path;
        let io = |op: String| {
            move |source| Error::Io {
                path: path.clone(),
                op,
                source,
            }
        };
        let num_samples = source.num_samples();
        let members: Vec<(u64, u64)> = self
            .fields
            .iter()
            .map(|f| match f.codec() {
                Codec::Kind(kind) => kind.metadata_layout(),
                Codec::Custom(handler) => handler.metadata_layout(),
            })
            .collect();
        let (offsets, itemsize) =
            format::row_layout(&members).ok_or_else(|| Error::InvalidConfig {
                path: path.clone(),
                reason: format!("the metadata row of layout {members:?} overflows"),
            })?;
        let too_big = || Error::InvalidConfig {
            path: path.clone(),
            reason: format!("{num_samples} samples x {itemsize}-byte metadata rows is too large"),
        };
        let metadata_size = num_samples.checked_mul(itemsize).ok_or_else(too_big)?;
        let metadata_offset = HEADER_SIZE + self.fields.len() as u64 * FIELD_DESC_SIZE;
        let metadata_end = metadata_offset
            .checked_add(metadata_size)
            .ok_or_else(too_big)?;
        let data_start = format::align_up(metadata_end, self.page_size).ok_or_else(too_big)?;
        let mut metadata = Vec::new();
        usize::try_from(metadata_size)
            .ok()
            .and_then(|n| metadata.try_reserve_exact(n).ok())
            .ok_or_else(too_big)?;
        metadata.resize(metadata_size as usize, 0u8);

        let mut file = File::create(tmp).map_err(io(format!("create {}", tmp.display())))?;
        // A zeroed header (version 0) until the end: an interrupted file never looks valid.
        let mut head = vec![0u8; metadata_offset as usize];
        for (i, f) in self.fields.iter().enumerate() {
            let d = &mut head[HEADER_SIZE as usize + i * FIELD_DESC_SIZE as usize..]
                [..FIELD_DESC_SIZE as usize];
            d[0] = f.field_type.type_id();
            d[1..1 + f.name.len()].copy_from_slice(f.name.as_bytes());
            let args: [u8; ARGS_SIZE] = match f.codec() {
                Codec::Kind(kind) => kind
                    .encode_arguments(&f.field_type)
                    .expect("checked in new()"),
                Codec::Custom(handler) => handler.arguments(),
            };
            d[1 + NAME_SIZE..].copy_from_slice(&args);
        }
        file.write_all(&head)
            .map_err(io("write the field descriptors".into()))?;

        let shared = Shared {
            writer: self,
            source,
            file: Mutex::new(file),
            offsets: &offsets,
            itemsize,
            data_start,
            next_page: AtomicU64::new(0),
            done: Mutex::new(0),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
        };
        let chunk_bytes = (self.chunk_size as u64 * itemsize).max(1) as usize;
        let queue = Mutex::new(metadata.chunks_mut(chunk_bytes).enumerate());
        let workers = self.num_workers.max(1);
        let tables: Vec<Vec<AllocRow>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|_| scope.spawn(|| shared.worker(&queue)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        if let Some(e) = shared
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            return Err(e);
        }
        let num_pages = shared.next_page.load(Ordering::SeqCst);
        let mut file = shared.file.into_inner().unwrap_or_else(|p| p.into_inner());

        file.seek(SeekFrom::Start(metadata_offset))
            .and_then(|_| file.write_all(&metadata))
            .map_err(io("write the metadata".into()))?;
        let alloc_table_ptr = if num_pages > 0 {
            data_start + num_pages * self.page_size
        } else {
            metadata_end
        };
        let rows: Vec<AllocRow> = tables.into_iter().flatten().collect();
        let mut table = Vec::with_capacity(rows.len() * ALLOC_ROW_SIZE as usize);
        for r in &rows {
            table.extend_from_slice(&r.sample_id.to_le_bytes());
            table.extend_from_slice(&r.ptr.to_le_bytes());
            table.extend_from_slice(&r.size.to_le_bytes());
        }
        file.seek(SeekFrom::Start(alloc_table_ptr))
            .and_then(|_| file.write_all(&table))
            .map_err(io("write the allocation table".into()))?;
        let header = Header {
            version: VERSION,
            num_fields: self.fields.len() as u16,
            page_size: self.page_size as u32,
            num_samples,
            alloc_table_ptr,
        };
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(&header.encode()))
            .and_then(|_| file.sync_all())
            .map_err(io("write the header".into()))?;
        Ok(WriteSummary {
            num_samples,
            num_pages,
            alloc_table_rows: rows.len() as u64,
            file_size: alloc_table_ptr + table.len() as u64,
        })
    }
}

/// Renames a finished temporary file `tmp` to `path`.
pub(crate) fn rename_into_place(tmp: &Path, path: &Path) -> Result<()> {
    std::fs::rename(tmp, path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        op: format!("rename {} into place", tmp.display()),
        source,
    })
}

/// `PATH.tmp-PID`: next to the target so the final rename stays on one file system.
fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".tmp-{}", std::process::id()));
    PathBuf::from(name)
}

/// State shared by the writer threads.
struct Shared<'a, S: ?Sized> {
    writer: &'a DatasetWriter,
    source: &'a S,
    file: Mutex<File>,
    offsets: &'a [u64],
    itemsize: u64,
    data_start: u64,
    next_page: AtomicU64,
    done: Mutex<u64>,
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
}

type Queue<'m> = Mutex<std::iter::Enumerate<std::slice::ChunksMut<'m, u8>>>;

impl<S: SampleSource + ?Sized> Shared<'_, S> {
    /// One writer thread: takes chunks until none are left, returns its allocations.
    fn worker(&self, queue: &Queue<'_>) -> Vec<AllocRow> {
        let mut alloc = PageAllocator::new(self.writer.page_size, self.data_start);
        let result = (|| -> Result<()> {
            loop {
                if self.failed.load(Ordering::Relaxed) {
                    return Ok(());
                }
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).next();
                let Some((chunk, rows)) = next else { break };
                let first = chunk as u64 * self.writer.chunk_size as u64;
                let count = rows.len() / self.itemsize.max(1) as usize;
                for (i, row) in rows.chunks_exact_mut(self.itemsize as usize).enumerate() {
                    self.write_sample(&mut alloc, first + i as u64, row)?;
                }
                // Counting and reporting under one lock keeps the reported numbers increasing.
                let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
                *done += count as u64;
                if let Some(p) = &self.writer.progress {
                    p(*done);
                }
            }
            alloc.flush(self)
        })();
        if let Err(e) = result {
            self.failed.store(true, Ordering::Relaxed);
            let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert(e);
        }
        alloc.allocations
    }

    fn write_sample(&self, alloc: &mut PageAllocator, sample: u64, row: &mut [u8]) -> Result<()> {
        let path = &self.writer.path;
        let fields = &self.writer.fields;
        let values = self.source.sample(sample).map_err(|source| Error::Source {
            path: path.clone(),
            sample,
            source,
        })?;
        if values.len() != fields.len() {
            return Err(Error::InvalidValue {
                path: path.clone(),
                sample,
                field: String::new(),
                reason: format!(
                    "the source gave {} values for {} fields",
                    values.len(),
                    fields.len()
                ),
                cause: None,
            });
        }
        let payloads: Vec<Option<Cow<'_, [u8]>>> = fields
            .iter()
            .zip(&values)
            .map(|(f, v)| payload(path, sample, f, v))
            .collect::<Result<_>>()?;
        let ptrs = alloc.place_sample(self, sample, &payloads)?;
        for (i, (f, v)) in fields.iter().zip(&values).enumerate() {
            let at = self.offsets[i] as usize;
            let (size, _) = match f.codec() {
                Codec::Kind(kind) => kind.metadata_layout(),
                Codec::Custom(handler) => handler.metadata_layout(),
            };
            let out = &mut row[at..at + size as usize];
            let len = payloads[i].as_ref().map_or(0, |p| p.len() as u64);
            match f.codec() {
                Codec::Kind(kind) => kind.write_metadata(v, ptrs[i], len, out),
                Codec::Custom(handler) => {
                    let FieldValue::Custom(value) = v else {
                        unreachable!("payload() checked the value's kind")
                    };
                    handler
                        .write_metadata(value, ptrs[i], len, out)
                        .map_err(|e| {
                            let (reason, cause) = handler_parts(e);
                            Error::InvalidValue {
                                path: path.clone(),
                                sample,
                                field: f.name.clone(),
                                reason,
                                cause,
                            }
                        })?;
                }
            }
        }
        Ok(())
    }

    fn write_page(&self, page: u64, data: &[u8]) -> Result<()> {
        let offset = self.data_start + page * self.writer.page_size;
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.write_all(data))
            .map_err(|source| Error::Io {
                path: self.writer.path.clone(),
                op: format!("write page {page} at byte {offset}"),
                source,
            })
    }
}

/// The bytes a field stores in a page (`None` for scalars), after checking the value fits the
/// field.
fn payload<'v>(
    path: &Path,
    sample: u64,
    field: &FieldSpec,
    value: &'v FieldValue,
) -> Result<Option<Cow<'v, [u8]>>> {
    let bad = |reason: ExtensionError| {
        let (reason, cause) = handler_parts(reason);
        Error::InvalidValue {
            path: path.to_path_buf(),
            sample,
            field: field.name.clone(),
            reason,
            cause,
        }
    };
    match field.codec() {
        Codec::Kind(kind) => kind.payload(&field.field_type, value).map_err(bad),
        Codec::Custom(handler) => match value {
            FieldValue::Custom(bytes) => handler.payload(bytes).map_err(bad),
            other => Err(bad(format!(
                "a {} value for a {} field",
                other.kind_name(),
                handler.class_name()
            )
            .into())),
        },
    }
}

/// Why an allocation failed.
enum AllocFailure {
    /// Larger than a page.
    TooLarge,
    /// The sample had to move to a fresh page; its earlier allocations were dropped.
    Restart,
}

/// One thread's page and allocation list: FFCV's `MemoryAllocator`, rule for rule.
struct PageAllocator {
    page_size: u64,
    data_start: u64,
    /// The page being filled (`None` before the first).
    page: Option<u64>,
    offset: u64,
    data: Vec<u8>,
    current_sample: u64,
    allocations: Vec<AllocRow>,
}

impl PageAllocator {
    fn new(page_size: u64, data_start: u64) -> PageAllocator {
        PageAllocator {
            page_size,
            data_start,
            page: None,
            offset: 0,
            data: Vec::new(),
            current_sample: 0,
            allocations: Vec::new(),
        }
    }

    /// Allocates every payload of `sample`, retrying once from a fresh page like FFCV's
    /// `handle_sample`; returns the pointer of each field (0 for scalars).
    fn place_sample<S: SampleSource + ?Sized>(
        &mut self,
        shared: &Shared<'_, S>,
        sample: u64,
        payloads: &[Option<Cow<'_, [u8]>>],
    ) -> Result<Vec<u64>> {
        let fields = &shared.writer.fields;
        let total: u64 = payloads.iter().flatten().map(|p| p.len() as u64).sum();
        for attempt in 0..2 {
            self.current_sample = sample;
            let mut ptrs = vec![0u64; payloads.len()];
            let mut restarted = false;
            for (i, p) in payloads.iter().enumerate() {
                let Some(p) = p else { continue };
                match self.malloc(shared, p.len() as u64)? {
                    Ok((ptr, at)) => {
                        self.data[at..at + p.len()].copy_from_slice(p);
                        ptrs[i] = ptr;
                    }
                    Err(failure) => {
                        let size = match failure {
                            AllocFailure::TooLarge => p.len() as u64,
                            AllocFailure::Restart if attempt == 1 => total,
                            AllocFailure::Restart => {
                                restarted = true;
                                break;
                            }
                        };
                        return Err(Error::SampleTooLarge {
                            path: shared.writer.path.clone(),
                            sample,
                            field: fields[i].name.clone(),
                            size,
                            page_size: self.page_size,
                            page_size_that_fits: size.next_power_of_two().max(MIN_PAGE_SIZE),
                        });
                    }
                }
            }
            if !restarted {
                return Ok(ptrs);
            }
        }
        unreachable!("the second attempt either succeeds or returns an error")
    }

    /// FFCV's `malloc`: `Ok(Ok((ptr, offset in the page buffer)))`, or why it failed.
    fn malloc<S: SampleSource + ?Sized>(
        &mut self,
        shared: &Shared<'_, S>,
        size: u64,
    ) -> Result<std::result::Result<(u64, usize), AllocFailure>> {
        if size > self.page_size {
            return Ok(Err(AllocFailure::TooLarge));
        }
        let space_left = match self.page {
            None => 0,
            Some(_) => self.page_size - self.offset,
        };
        if size > space_left {
            self.flush(shared)?;
            self.page = Some(shared.next_page.fetch_add(1, Ordering::SeqCst));
            self.offset = 0;
            if self.data.is_empty() {
                self.data = vec![0; self.page_size as usize];
            } else {
                self.data.fill(0);
            }
            // Allocations this sample made on the page just flushed are given up; the whole
            // sample starts again on the fresh page (their bytes stay in the file as orphans).
            let mut dropped = false;
            while self
                .allocations
                .last()
                .is_some_and(|a| a.sample_id == self.current_sample)
            {
                self.allocations.pop();
                dropped = true;
            }
            if dropped {
                return Ok(Err(AllocFailure::Restart));
            }
        }
        let at = self.offset;
        self.offset += size;
        // Before the first page FFCV computes the pointer with page index -1; only zero-sized
        // allocations get there (see docs/format.md, "zero-length allocations").
        let ptr = match self.page {
            Some(page) => self.data_start + page * self.page_size + at,
            None => self.data_start - self.page_size + at,
        };
        self.allocations.push(AllocRow {
            sample_id: self.current_sample,
            ptr,
            size,
        });
        Ok(Ok((ptr, at as usize)))
    }

    /// Writes the current page whole (zero-filled past what was allocated).
    fn flush<S: SampleSource + ?Sized>(&mut self, shared: &Shared<'_, S>) -> Result<()> {
        if let Some(page) = self.page {
            shared.write_page(page, &self.data)?;
        }
        Ok(())
    }
}
