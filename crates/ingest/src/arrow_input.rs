//! Arrow IPC files as a [`Table`], for `ffcv write arrow`: the stream format (what
//! Hugging Face `datasets`' `save_to_disk` writes, `data-00000-of-00001.arrow`) and the
//! file format (`ARROW1` magic, pyarrow's `ipc.new_file`, Feather v2), which holds a
//! stream after its magic.
//!
//! Opening a file reads only its message headers, seeking over the bodies (as the tar
//! scan of WebDataset shards does): each message is a length-prefixed flatbuffer naming
//! its body's length, and a record batch's header its number of rows. The first schema
//! message gives the columns. A batch is read when its records are wanted: the schema
//! message, the dictionary batches before the batch (dictionary-encoded columns: pandas
//! categoricals as pyarrow writes them; a later dictionary batch replaces or extends an
//! earlier one, as the stream reader applies them in order) and the batch message, read
//! by positional reads, decoded by arrow-ipc's stream reader, and kept in a small cache.
//! Compressed bodies (lz4, zstd) are refused naming the file; `datasets` and pyarrow do
//! not write them by default.

use std::fs::File;
use std::io::Cursor;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::{MessageHeader, root_as_message};

use crate::arrow_cells::{BatchCache, Group, Groups, row_cells, var_list_columns};
use crate::error::Result;
use crate::table_fields::{Cell, Table, input_error};

/// Largest message header accepted (a flatbuffer; a schema of thousands of columns is
/// far below it), so a garbage length allocates nothing large.
const MAX_HEADER: u64 = 64 << 20;

/// One opened IPC file: its schema message and where each record batch is.
struct IpcFile {
    file: File,
    /// The schema message's bytes (prefix, header and body).
    schema_message: Vec<u8>,
    /// The columns.
    columns: Vec<String>,
    /// The columns of a variable-size numeric list type.
    var_lists: Vec<String>,
    /// Each dictionary batch's message: offset and length in the file.
    dictionaries: Vec<(u64, u64)>,
    /// Each record batch's message: offset and length in the file, and how many
    /// dictionary batches come before it.
    batches: Vec<(u64, u64, usize)>,
}

/// Arrow IPC files, opened.
pub struct ArrowTable {
    paths: Vec<PathBuf>,
    files: Vec<IpcFile>,
    groups: Groups,
    cache: BatchCache,
    broken: Vec<(PathBuf, String)>,
}

fn read_at(file: &File, offset: u64, len: u64) -> std::result::Result<Vec<u8>, String> {
    let mut buf = vec![0u8; usize::try_from(len).map_err(|_| "message too large")?];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| format!("cannot read {len} bytes at offset {offset}: {e}"))?;
    Ok(buf)
}

/// The messages of `file` (of `size` bytes): the schema and the record batches, with
/// each batch's rows. A problem after some batches keeps them and says where it broke.
fn scan(file: File, size: u64) -> (Option<IpcFile>, Vec<u64>, Option<String>) {
    let mut pos = 0u64;
    if size >= 8 && read_at(&file, 0, 6).is_ok_and(|m| m == b"ARROW1") {
        // The magic is padded to the writer's alignment (pyarrow: 8 bytes, arrow-rs: 64);
        // the first message starts with its continuation marker.
        pos = (8..=64)
            .step_by(8)
            .find(|&p| p + 4 <= size && read_at(&file, p, 4).is_ok_and(|w| w == [0xFF; 4]))
            .unwrap_or(8);
    }
    let mut schema: Option<(Vec<u8>, Vec<String>, Vec<String>)> = None;
    let (mut batches, mut rows, mut dictionaries) = (Vec::new(), Vec::new(), Vec::new());
    let problem = loop {
        if pos + 4 > size {
            // A stream may end without its end-of-stream marker.
            break None;
        }
        let word =
            |at: u64| read_at(&file, at, 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let first = match word(pos) {
            Ok(w) => w,
            Err(e) => break Some(e),
        };
        let (prefix, header_len) = if first == u32::MAX {
            if pos + 8 > size {
                break Some(format!("message at offset {pos} is cut off"));
            }
            match word(pos + 4) {
                Ok(len) => (8, u64::from(len)),
                Err(e) => break Some(e),
            }
        } else {
            (4, u64::from(first))
        };
        if header_len == 0 {
            break None;
        }
        if header_len > MAX_HEADER || pos + prefix + header_len > size {
            break Some(format!(
                "message at offset {pos} claims a {header_len}-byte header, past the end of the file ({size} bytes) or not an Arrow IPC file"
            ));
        }
        let header = match read_at(&file, pos + prefix, header_len) {
            Ok(h) => h,
            Err(e) => break Some(e),
        };
        let message = match root_as_message(&header) {
            Ok(m) => m,
            Err(e) => {
                break Some(format!(
                    "message at offset {pos} does not parse (not an Arrow IPC file?): {e}"
                ));
            }
        };
        let body = message.bodyLength();
        let end = u64::try_from(body)
            .ok()
            .and_then(|b| (pos + prefix + header_len).checked_add(b))
            .filter(|&end| end <= size);
        let Some(end) = end else {
            break Some(format!(
                "message at offset {pos} claims a body of {body} bytes, past the end of the file ({size} bytes)"
            ));
        };
        match message.header_type() {
            MessageHeader::Schema if schema.is_none() => {
                let decoded = message
                    .header_as_schema()
                    .and_then(|s| arrow_ipc::convert::try_fb_to_schema(s).ok());
                let columns = decoded
                    .as_ref()
                    .map(|s| s.fields().iter().map(|f| f.name().clone()).collect())
                    .unwrap_or_default();
                let var_lists = decoded.as_ref().map(var_list_columns).unwrap_or_default();
                match read_at(&file, pos, end - pos) {
                    Ok(bytes) => schema = Some((bytes, columns, var_lists)),
                    Err(e) => break Some(e),
                }
            }
            MessageHeader::RecordBatch => {
                if schema.is_none() {
                    break Some(format!("record batch at offset {pos} before the schema"));
                }
                let batch = message.header_as_record_batch();
                if batch.is_some_and(|b| b.compression().is_some()) {
                    break Some(format!(
                        "record batch {} is compressed (lz4 or zstd), which is not supported: write the file uncompressed",
                        batches.len()
                    ));
                }
                let n = batch.map_or(0, |b| b.length());
                let Ok(n) = u64::try_from(n) else {
                    break Some(format!("record batch at offset {pos} has {n} rows"));
                };
                batches.push((pos, end - pos, dictionaries.len()));
                rows.push(n);
            }
            MessageHeader::DictionaryBatch => {
                if schema.is_none() {
                    break Some(format!(
                        "dictionary batch at offset {pos} before the schema"
                    ));
                }
                let data = message.header_as_dictionary_batch().and_then(|d| d.data());
                if data.is_some_and(|b| b.compression().is_some()) {
                    break Some(format!(
                        "dictionary batch {} is compressed (lz4 or zstd), which is not supported: write the file uncompressed",
                        dictionaries.len()
                    ));
                }
                dictionaries.push((pos, end - pos));
            }
            _ => {}
        }
        pos = end;
    };
    let file = schema.map(|(schema_message, columns, var_lists)| IpcFile {
        file,
        schema_message,
        columns,
        var_lists,
        dictionaries,
        batches,
    });
    (file, rows, problem)
}

impl ArrowTable {
    /// Opens `paths` (reading their message headers); `threads` sizes the cache of
    /// decoded batches. A file that breaks off fails the command, or with `keep_going`
    /// keeps its batches before the break and is listed as broken.
    pub fn open(paths: Vec<PathBuf>, threads: usize, keep_going: bool) -> Result<Self> {
        let mut table = ArrowTable {
            paths: Vec::new(),
            files: Vec::new(),
            groups: Groups::default(),
            cache: BatchCache::new(2 * threads),
            broken: Vec::new(),
        };
        for path in paths {
            let opened = File::open(&path)
                .and_then(|f| Ok((f.metadata()?.len(), f)))
                .map_err(|e| format!("cannot open: {e}"));
            let (file, rows, problem) = match opened {
                Ok((size, file)) => scan(file, size),
                Err(e) => (None, Vec::new(), Some(e)),
            };
            let problem = match (&file, problem) {
                (None, None) => {
                    Some("no schema message: not an Arrow IPC stream or file".to_owned())
                }
                (_, p) => p,
            };
            if let Some(reason) = problem {
                if !keep_going {
                    return Err(input_error(&path, reason));
                }
                table.broken.push((path.clone(), reason));
            }
            let Some(file) = file else { continue };
            let index = table.paths.len();
            let mut first_row = 0u64;
            for (batch, &n) in rows.iter().enumerate() {
                let rows = usize::try_from(n).map_err(|_| input_error(&path, "too many rows"))?;
                table.groups.push(Group {
                    file: index,
                    index: batch,
                    first_row,
                    rows,
                });
                first_row += n;
            }
            table.paths.push(path);
            table.files.push(file);
        }
        Ok(table)
    }

    /// Record batch `group`, decoded.
    fn load(&self, group: &Group) -> std::result::Result<Vec<RecordBatch>, String> {
        let file = &self.files[group.file];
        let (offset, len, dictionaries) = file.batches[group.index];
        let mut bytes = file.schema_message.clone();
        for &(at, n) in &file.dictionaries[..dictionaries] {
            bytes.extend_from_slice(&read_at(&file.file, at, n)?);
        }
        bytes.extend_from_slice(&read_at(&file.file, offset, len)?);
        let fail = |e: arrow_schema::ArrowError| {
            format!(
                "cannot decode record batch {} (offset {offset}): {e}",
                group.index
            )
        };
        let mut reader = StreamReader::try_new(Cursor::new(bytes), None).map_err(fail)?;
        match reader.next() {
            Some(batch) => Ok(vec![batch.map_err(fail)?]),
            None => Err(format!(
                "record batch {} (offset {offset}) is empty",
                group.index
            )),
        }
    }
}

impl Table for ArrowTable {
    fn format(&self) -> &'static str {
        "Arrow IPC"
    }

    fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    fn num_records(&self) -> usize {
        self.groups.total
    }

    fn locate(&self, i: usize) -> (&Path, u64, String) {
        self.groups.locate(&self.paths, i)
    }

    fn columns(&self) -> Vec<String> {
        self.files
            .first()
            .map_or_else(Vec::new, |f| f.columns.clone())
    }

    fn cells(&self, i: usize, columns: &[&str]) -> std::result::Result<Vec<Cell>, String> {
        let (g, row) = self.groups.find(i);
        let group = &self.groups.groups[g];
        // Every column is decoded; the key is the group alone.
        let batches = self.cache.get(g, &[], || self.load(group))?;
        if batches.iter().map(RecordBatch::num_rows).sum::<usize>() != group.rows {
            return Err(format!(
                "record batch {} decoded to another number of rows than its header's {}",
                group.index, group.rows
            ));
        }
        row_cells(&batches, row, columns)
    }

    fn broken(&self) -> &[(PathBuf, String)] {
        &self.broken
    }

    fn var_list_columns(&self) -> Vec<String> {
        self.files
            .first()
            .map_or_else(Vec::new, |f| f.var_lists.clone())
    }
}
