//! Several `.beton` files with the same fields read as one (shards): [`Reader::concat`]
//! builds a reader of a virtual file whose samples are the shards' samples end to end.
//!
//! The virtual file is laid out like a real one, so everything above the reader (page
//! maps, page schedules, orders, the OS cache's slices) works on it unchanged:
//!
//! ```text
//! [header | descriptors | every shard's metadata rows] [shard 0's file] [shard 1's file] … [allocation table]
//! 0                                                    base 0           base 1               table
//! ```
//!
//! Shard `i`'s whole file sits at `base i` (a multiple of the page size and of 64 KiB,
//! so shard pages stay pages and any OS page size divides it), its samples get the global
//! ids `first_sample i ..`, and every data pointer in its metadata and allocation rows is
//! moved by `base i`. The synthetic parts are built here and validated by the same parser
//! as any file, so a reader over shards keeps every guarantee of a reader over one file.
//! When every shard is a mapped local file, the files are mapped side by side into one
//! range (`Mapping::Stitched`) and the reader holds every byte; otherwise (a shard read by
//! ranges) it holds the synthetic structure only and sample bytes come through a page
//! source that sends each read to its shard.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::fields::{ExtentRule, u64_at};
use crate::format::{ALLOC_ROW_SIZE, FieldType, HEADER_SIZE, Header, VERSION, align_up};
use crate::mapping::{Mapping, Stitched, StitchedFile};
use crate::reader::{Reader, ReaderOptions};

/// The alignment of each shard's base in the virtual file, beyond the page size: large
/// enough for any OS page size, so the shards can be memory-mapped at their bases.
pub const SHARD_ALIGN: u64 = 1 << 16;

/// Where one shard of a [`Reader::concat`] reader sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSpan {
    /// The shard's path or URL.
    pub path: PathBuf,
    /// Offset of the shard's byte 0 in the virtual file.
    pub base: u64,
    /// The shard's size in bytes.
    pub len: u64,
    /// Global id of the shard's sample 0.
    pub first_sample: u64,
    /// The shard's samples.
    pub num_samples: u64,
}

impl ShardSpan {
    /// Whether virtual bytes `start..end` lie inside this shard.
    pub fn contains(&self, start: u64, end: u64) -> bool {
        start >= self.base && end <= self.base + self.len && start <= end
    }
}

impl Reader {
    /// A reader of `shards` read as one file named `name`: samples in shard order, each
    /// shard validated already (it is a [`Reader`]) and the result validated again.
    ///
    /// Errors: no shards; a shard whose fields (names, types, arguments, order) differ
    /// from the first shard's ([`Error::ShardMismatch`], naming both files and the field);
    /// a different page size (also `ShardMismatch`); a custom field whose extent is
    /// computed by its handler (its data pointer cannot be moved). `options` are those
    /// the shards were opened with (custom field layouts).
    pub fn concat(
        name: impl Into<PathBuf>,
        shards: &[Reader],
        options: &ReaderOptions,
    ) -> Result<(Reader, Vec<ShardSpan>)> {
        let path = name.into();
        let invalid = |reason: String| Error::InvalidShards {
            path: path.clone(),
            reason,
        };
        let Some(first) = shards.first() else {
            return Err(invalid("no shards given".into()));
        };
        for other in &shards[1..] {
            check_same_fields(first, other)?;
        }
        let page_size = first.page_size();
        let fields = first.fields();
        let itemsize = first.layout().metadata_itemsize;
        let mut num_samples = 0u64;
        for s in shards {
            num_samples = num_samples
                .checked_add(s.num_samples())
                .ok_or_else(|| invalid("the total sample count overflows 64 bits".into()))?;
        }
        // Where each data field keeps its pointer inside its metadata.
        let mut ptr_at = Vec::new();
        for (i, f) in fields.iter().enumerate() {
            let at = match (first.extent_rule(i), &f.field_type) {
                (ExtentRule::None, _) => continue,
                (ExtentRule::Fixed { .. } | ExtentRule::Sized, _) => 0,
                (ExtentRule::Computed, FieldType::RgbImage) => 5,
                (ExtentRule::Computed, FieldType::VarArray(_)) => 0,
                (ExtentRule::Computed, _) => {
                    return Err(invalid(format!(
                        "field {:?} of {} finds its bytes through its handler, so its data \
                         pointers cannot be moved; such a field cannot be read from shards",
                        f.name,
                        first.path().display()
                    )));
                }
            };
            ptr_at.push(f.metadata_offset as usize + at);
        }
        let too_big = || invalid("the shards' total size overflows 64 bits".into());
        let descriptors_end = first.layout().metadata_offset;
        let metadata_end = num_samples
            .checked_mul(itemsize)
            .and_then(|m| m.checked_add(descriptors_end))
            .ok_or_else(too_big)?;
        let align = page_size.max(SHARD_ALIGN);
        let mut spans = Vec::with_capacity(shards.len());
        let mut next = align_up(metadata_end, align).ok_or_else(too_big)?;
        let mut first_sample = 0;
        for s in shards {
            spans.push(ShardSpan {
                path: s.path().to_owned(),
                base: next,
                len: s.file_size(),
                first_sample,
                num_samples: s.num_samples(),
            });
            first_sample += s.num_samples();
            next = next
                .checked_add(s.file_size())
                .and_then(|end| align_up(end, align))
                .ok_or_else(too_big)?;
        }
        let table_ptr = next;
        let rows: u64 = shards.iter().map(|s| s.layout().alloc_table_rows).sum();
        let file_size = rows
            .checked_mul(ALLOC_ROW_SIZE)
            .and_then(|t| t.checked_add(table_ptr))
            .ok_or_else(too_big)?;

        // The structure: header and descriptors from the first shard, metadata rows with
        // moved pointers, then the allocation rows with global ids and moved pointers.
        // Their sizes are sums of the shards' own validated regions.
        let mut head = Vec::with_capacity(metadata_end as usize);
        let header = Header {
            version: VERSION,
            num_fields: first.header().num_fields,
            page_size: first.header().page_size,
            num_samples,
            alloc_table_ptr: table_ptr,
        };
        head.extend_from_slice(&header.encode());
        head.extend_from_slice(first.range(HEADER_SIZE, descriptors_end)?);
        let mut table = Vec::with_capacity((rows * ALLOC_ROW_SIZE) as usize);
        for (s, span) in shards.iter().zip(&spans) {
            let start = s.layout().metadata_offset;
            let rows_at = head.len();
            head.extend_from_slice(s.range(start, start + s.layout().metadata_size)?);
            for sample in 0..s.num_samples() {
                let row_start = rows_at + (sample * itemsize) as usize;
                for &at in &ptr_at {
                    let row = &mut head[row_start..row_start + itemsize as usize];
                    let Some(ptr) = u64_at(row, at) else { continue };
                    // Checked at the shard's open: the pointer starts an allocation, so
                    // it is below the shard's size and the sum stays inside the file.
                    let moved = ptr + span.base;
                    row[at..at + 8].copy_from_slice(&moved.to_le_bytes());
                }
            }
            for r in s.alloc_rows() {
                table.extend_from_slice(&(r.sample_id + span.first_sample).to_le_bytes());
                table.extend_from_slice(&(r.ptr + span.base).to_le_bytes());
                table.extend_from_slice(&r.size.to_le_bytes());
            }
        }
        let mapped: Option<Vec<StitchedFile>> = shards
            .iter()
            .zip(&spans)
            .map(|(s, span)| {
                let file = s.mapping().file()?.try_clone().ok()?;
                Some(StitchedFile {
                    file,
                    base: span.base,
                    len: span.len,
                })
            })
            .collect();
        let map = match mapped {
            Some(files) => Mapping::Stitched(
                Stitched::new(file_size, &[(0, &head[..]), (table_ptr, &table[..])], files)
                    .map_err(|source| Error::Io {
                        path: path.clone(),
                        op: "map the shards side by side".into(),
                        source,
                    })?,
            ),
            // Shards in memory (a tool read them whole): one buffer of the virtual file.
            None if shards.iter().all(Reader::holds_data) => {
                let mut bytes = vec![0u8; file_size as usize];
                bytes[..head.len()].copy_from_slice(&head);
                let t = table_ptr as usize;
                bytes[t..t + table.len()].copy_from_slice(&table);
                for (s, span) in shards.iter().zip(&spans) {
                    let b = span.base as usize;
                    bytes[b..b + span.len as usize].copy_from_slice(s.bytes()?);
                }
                Mapping::Owned(bytes)
            }
            None => Mapping::Regions {
                len: file_size,
                parts: vec![(0, head), (table_ptr, table)],
            },
        };
        tracing::debug!(
            path = %path.display(),
            shards = shards.len(),
            samples = num_samples,
            stitched = map.whole().is_some(),
            "opened shards as one dataset"
        );
        let reader = Reader::from_mapping(path, map, options)?;
        Ok((reader, spans))
    }
}

/// Checks that `other` has the fields and page size of `first`.
fn check_same_fields(first: &Reader, other: &Reader) -> Result<()> {
    let mismatch = |field: &str, reason: String| Error::ShardMismatch {
        first: first.path().to_owned(),
        other: other.path().to_owned(),
        what: if field.is_empty() {
            "the page size".into()
        } else {
            format!("field {field:?}")
        },
        reason,
    };
    if first.page_size() != other.page_size() {
        return Err(mismatch(
            "",
            format!(
                "{} bytes against {}; rewrite the shards with one page size",
                other.page_size(),
                first.page_size()
            ),
        ));
    }
    let (a, b) = (first.fields(), other.fields());
    for (i, fa) in a.iter().enumerate() {
        let Some(fb) = b.get(i) else {
            return Err(mismatch(
                &fa.name,
                format!("missing (it has {} fields)", b.len()),
            ));
        };
        if fa.name != fb.name {
            return Err(mismatch(
                &fa.name,
                format!("field {i} is {:?} there", fb.name),
            ));
        }
        if fa.type_id != fb.type_id || fa.field_type != fb.field_type {
            return Err(mismatch(
                &fa.name,
                format!("type {:?} against {:?}", fb.field_type, fa.field_type),
            ));
        }
        // Built-in types are compared by their parsed arguments above; a custom field's
        // type says nothing of them, so its argument blocks must match byte for byte.
        if fa.field_type == FieldType::Custom
            && first.field_arguments(i)? != other.field_arguments(i)?
        {
            return Err(mismatch(&fa.name, "its argument blocks differ".into()));
        }
    }
    if let Some(extra) = b.get(a.len()) {
        return Err(mismatch(
            &extra.name,
            format!("only there (the first has {} fields)", a.len()),
        ));
    }
    Ok(())
}
