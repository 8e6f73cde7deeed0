//! Opening a `.beton` that is not a local file (an object in a store) from byte ranges:
//! only its structure (header, field descriptors, metadata, allocation table) is read, and
//! it is validated exactly as [`Reader::open`] validates a mapped file.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::format::{self, FIELD_DESC_SIZE, HEADER_SIZE, Header, VERSION};
use crate::mapping::Mapping;
use crate::reader::{Reader, ReaderOptions, parse_fields};

/// Reads bytes `start..end` of the file: exactly `end - start` bytes or an error.
pub type ReadRange<'a> = dyn FnMut(u64, u64) -> std::io::Result<Vec<u8>> + 'a;

impl Reader {
    /// Opens a file of `file_size` bytes that `read` serves by byte range (an object in
    /// a store: `name` is its URL and names it in errors).
    ///
    /// Reads the header, then the field descriptors, then the metadata rows they imply,
    /// then the allocation table (at most four requests, each bounded by `file_size`),
    /// and validates them with the same code as [`Reader::open`], so a damaged object
    /// gives the error a damaged local file gives. The data region is never read here:
    /// the reader's [`Reader::bytes`], [`Reader::data_at`] and [`Reader::field_data`]
    /// are [`Error::NotInMemory`] for it (sample data comes through a page cache), and
    /// [`Reader::current_file_size`] is `None`.
    pub fn open_ranges(
        name: impl Into<PathBuf>,
        file_size: u64,
        read: &mut ReadRange<'_>,
        options: &ReaderOptions,
    ) -> Result<Reader> {
        let path = name.into();
        if file_size < HEADER_SIZE {
            return Err(Error::Truncated {
                path,
                what: "header".into(),
                start: 0,
                end: HEADER_SIZE,
                file_size,
            });
        }
        let mut fetch = |start: u64, end: u64| -> Result<Vec<u8>> {
            let io = |source| Error::Io {
                path: path.clone(),
                op: format!("read bytes {start}..{end}"),
                source,
            };
            let bytes = read(start, end).map_err(io)?;
            if bytes.len() as u64 != end - start {
                return Err(io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("got {} bytes", bytes.len()),
                )));
            }
            Ok(bytes)
        };
        let mut head = fetch(0, HEADER_SIZE)?;
        let header = Header::decode(head[..].try_into().expect("HEADER_SIZE bytes"));
        let mut table = None;
        // Read further only while the header makes sense; otherwise the parser below
        // reports the first problem from what is held, as it would for a local file.
        if header.version == VERSION && header.num_fields > 0 {
            let metadata_offset = HEADER_SIZE + u64::from(header.num_fields) * FIELD_DESC_SIZE;
            let descriptors_end = metadata_offset.min(file_size);
            head.extend(fetch(HEADER_SIZE, descriptors_end)?);
            let so_far = Mapping::Regions {
                len: file_size,
                parts: vec![(0, head)],
            };
            let fields = parse_fields(&path, &so_far, usize::from(header.num_fields), options);
            head = so_far
                .into_regions()
                .pop()
                .map(|(_, h)| h)
                .unwrap_or_default();
            let metadata_end = fields.ok().and_then(|fields| {
                let members: Vec<(u64, u64)> = fields
                    .iter()
                    .map(|p| (p.field.metadata_itemsize, p.align))
                    .collect();
                let (_, itemsize) = format::row_layout(&members)?;
                metadata_offset.checked_add(header.num_samples.checked_mul(itemsize)?)
            });
            if let Some(end) = metadata_end.filter(|&end| end <= file_size) {
                if end > descriptors_end {
                    head.extend(fetch(descriptors_end, end)?);
                }
                let t = header.alloc_table_ptr;
                if (end..=file_size).contains(&t) && t < file_size {
                    table = Some((t, fetch(t, file_size)?));
                }
            }
        }
        let mut parts = vec![(0, head)];
        parts.extend(table);
        let map = Mapping::Regions {
            len: file_size,
            parts,
        };
        Reader::from_mapping(path, map, options)
    }
}
