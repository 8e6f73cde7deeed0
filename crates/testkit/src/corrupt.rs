//! A corpus of corrupted `.beton` files generated from a valid one, for tests and fuzzing.
//!
//! [`corpus`] derives, from the bytes of any valid file, a list of damaged copies — truncations
//! at every structural boundary and at spread-out offsets, and targeted edits of the header,
//! field descriptors, NDArray arguments, metadata and allocation table — each with the error
//! [`Reader`] must report for it. beton-io's `corrupt_files` test runs it over the FFCV
//! fixtures; the command line's tests can write the same files out and check the exit code.

use beton_io::{
    ALLOC_ROW_SIZE, Error, FIELD_DESC_SIZE, FieldMetadata, FieldType, HEADER_SIZE, IMAGE_MODE_RAW,
    MAX_DIMS, NAME_SIZE, NDARRAY_ARGS_HEADER, Reader, ReaderOptions,
};

/// Which error a corrupted file must produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// [`Error::Truncated`].
    Truncated,
    /// [`Error::UnsupportedVersion`].
    UnsupportedVersion,
    /// [`Error::NoFields`].
    NoFields,
    /// [`Error::InvalidPageSize`].
    InvalidPageSize,
    /// [`Error::Overflow`].
    Overflow,
    /// [`Error::InvalidAllocTable`].
    InvalidAllocTable,
    /// [`Error::InvalidAllocRow`].
    InvalidAllocRow,
    /// [`Error::UnknownTypeId`].
    UnknownTypeId,
    /// [`Error::InvalidFieldName`].
    InvalidFieldName,
    /// [`Error::InvalidFieldArguments`].
    InvalidFieldArguments,
    /// [`Error::MissingCustomHandler`].
    MissingCustomHandler,
    /// [`Error::InvalidMetadata`].
    InvalidMetadata,
}

impl Expected {
    /// Whether `error` is the expected variant.
    pub fn matches(self, error: &Error) -> bool {
        matches!(
            (self, error),
            (Expected::Truncated, Error::Truncated { .. })
                | (
                    Expected::UnsupportedVersion,
                    Error::UnsupportedVersion { .. }
                )
                | (Expected::NoFields, Error::NoFields { .. })
                | (Expected::InvalidPageSize, Error::InvalidPageSize { .. })
                | (Expected::Overflow, Error::Overflow { .. })
                | (Expected::InvalidAllocTable, Error::InvalidAllocTable { .. })
                | (Expected::InvalidAllocRow, Error::InvalidAllocRow { .. })
                | (Expected::UnknownTypeId, Error::UnknownTypeId { .. })
                | (Expected::InvalidFieldName, Error::InvalidFieldName { .. })
                | (
                    Expected::InvalidFieldArguments,
                    Error::InvalidFieldArguments { .. }
                )
                | (
                    Expected::MissingCustomHandler,
                    Error::MissingCustomHandler { .. }
                )
                | (Expected::InvalidMetadata, Error::InvalidMetadata { .. })
        )
    }
}

/// One damaged copy of a file.
#[derive(Debug, Clone)]
pub struct CorruptFile {
    /// What was done, e.g. `"truncate to 3147 (metadata offset)"`.
    pub name: String,
    /// The damaged bytes.
    pub bytes: Vec<u8>,
    /// The error opening it must give.
    pub expected: Expected,
}

/// Damaged copies of `original`, which must be a valid `.beton` without custom fields.
///
/// Returns an error when `original` itself does not open.
pub fn corpus(original: &[u8]) -> Result<Vec<CorruptFile>, Error> {
    let r = Reader::from_vec("original", original.to_vec(), &ReaderOptions::default())?;
    let mut out = Vec::new();
    let file_size = original.len() as u64;
    let table = r.header().alloc_table_ptr;
    let l = *r.layout();
    let metadata_end = l.metadata_offset + l.metadata_size;

    // Truncations: structural boundaries, then spread-out offsets.
    let mut cuts: Vec<(u64, String)> = vec![
        (0, "empty".into()),
        (1, "inside version".into()),
        (12, "inside num_samples".into()),
        (23, "one byte short of the header".into()),
        (HEADER_SIZE, "header only".into()),
        (HEADER_SIZE + 1, "one descriptor byte".into()),
        (
            l.metadata_offset - 1,
            "one byte short of the descriptors".into(),
        ),
        (l.metadata_offset, "metadata offset".into()),
        (table - 1, "one byte short of the allocation table".into()),
    ];
    for i in 1..u64::from(r.header().num_fields) {
        let at = HEADER_SIZE + i * FIELD_DESC_SIZE;
        cuts.push((at, format!("descriptor {i} start")));
        cuts.push((
            at + 1 + NAME_SIZE as u64,
            format!("descriptor {i} arguments"),
        ));
    }
    if l.metadata_size > 0 {
        cuts.push((l.metadata_offset + 1, "one metadata byte".into()));
        cuts.push((
            l.metadata_offset + l.metadata_itemsize,
            "one metadata row".into(),
        ));
        cuts.push((metadata_end - 1, "one byte short of the metadata".into()));
        cuts.push((
            metadata_end - l.metadata_itemsize,
            "one metadata row short".into(),
        ));
    }
    if l.data_region_start < table {
        cuts.push((metadata_end, "metadata end".into()));
        cuts.push((l.data_region_start, "data region start".into()));
        cuts.push((l.data_region_start + 1, "one data byte".into()));
    }
    if table < file_size {
        for k in 1..=l.alloc_table_rows.min(4) {
            cuts.push((file_size - k * ALLOC_ROW_SIZE, format!("{k} rows short")));
        }
        cuts.push((table + 1, "one table byte".into()));
        cuts.push((file_size - 1, "one byte short".into()));
        cuts.push((
            table + ALLOC_ROW_SIZE / 2,
            "half of the first allocation row".into(),
        ));
    }
    for k in 1..64 {
        cuts.push((file_size * k / 64, format!("{k}/64 of the file")));
    }
    let mut seed = 0x5EED_u64;
    for _ in 0..32 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        cuts.push(((seed >> 11) % file_size, "a pseudo-random offset".into()));
    }
    cuts.sort_by_key(|c| c.0);
    cuts.dedup_by_key(|c| c.0);
    for (len, why) in cuts {
        if len >= file_size {
            continue;
        }
        let expected = if len < HEADER_SIZE || len < metadata_end {
            Expected::Truncated
        } else if len < table || !(len - table).is_multiple_of(ALLOC_ROW_SIZE) {
            Expected::InvalidAllocTable
        } else {
            // Whole rows are gone: the metadata points at allocations the table no longer has.
            Expected::InvalidMetadata
        };
        out.push(CorruptFile {
            name: format!("truncate to {len} ({why})"),
            bytes: original[..len as usize].to_vec(),
            expected,
        });
    }

    let edit = |name: String, at: u64, bytes: &[u8], expected: Expected| {
        let mut b = original.to_vec();
        b[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
        CorruptFile {
            name,
            bytes: b,
            expected,
        }
    };

    // Header.
    for v in [0u16, 1, 3, u16::MAX] {
        out.push(edit(
            format!("version {v}"),
            0,
            &v.to_le_bytes(),
            Expected::UnsupportedVersion,
        ));
    }
    out.push(edit(
        "num_fields 0".into(),
        2,
        &0u16.to_le_bytes(),
        Expected::NoFields,
    ));
    out.push(edit(
        "num_fields 65535".into(),
        2,
        &u16::MAX.to_le_bytes(),
        Expected::Truncated,
    ));
    let ps = r.page_size() as u32;
    // Not powers of two, then powers of two below the reader's 4 KiB minimum.
    for p in [
        0u32,
        3,
        ps + 1,
        ps - 1,
        0x8000_0001,
        u32::MAX,
        1,
        2,
        1024,
        2048,
    ] {
        out.push(edit(
            format!("page_size {p}"),
            4,
            &p.to_le_bytes(),
            Expected::InvalidPageSize,
        ));
    }
    for (n, expected) in [
        (u64::MAX, Expected::Overflow),
        (1 << 62, Expected::Overflow),
        (1 << 40, Expected::Truncated),
        (file_size, Expected::Truncated),
    ] {
        out.push(edit(
            format!("num_samples {n}"),
            8,
            &n.to_le_bytes(),
            expected,
        ));
    }
    if r.alloc_rows().next().is_some() {
        // The last rows now name a sample past the end.
        out.push(edit(
            "num_samples - 1".into(),
            8,
            &(r.num_samples() - 1).to_le_bytes(),
            Expected::InvalidAllocRow,
        ));
    }
    for (p, why) in [
        (file_size + 1, "past the end"),
        (u64::MAX, "u64::MAX"),
        (0, "inside the header"),
        (l.metadata_offset, "inside the metadata"),
        (table + 1, "leaving a partial row"),
        (file_size - 1, "leaving one byte"),
    ] {
        if p == table || (p == l.metadata_offset && l.metadata_size == 0) {
            continue;
        }
        out.push(edit(
            format!("alloc_table_ptr {p} ({why})"),
            16,
            &p.to_le_bytes(),
            Expected::InvalidAllocTable,
        ));
    }

    // Field descriptors.
    for (i, f) in r.fields().iter().enumerate() {
        let at = HEADER_SIZE + i as u64 * FIELD_DESC_SIZE;
        for t in [7u8, 100, 254] {
            out.push(edit(
                format!("field {i} type id {t}"),
                at,
                &[t],
                Expected::UnknownTypeId,
            ));
        }
        out.push(edit(
            format!("field {i} type id 255"),
            at,
            &[255],
            Expected::MissingCustomHandler,
        ));
        out.push(edit(
            format!("field {i} name starts with 0xFF"),
            at + 1,
            &[0xFF],
            Expected::InvalidFieldName,
        ));
        out.push(edit(
            format!("field {i} name ends with 0x80 after its NUL padding"),
            at + NAME_SIZE as u64,
            &[0x80],
            Expected::InvalidFieldName,
        ));
        if i > 0 {
            let first = &original[HEADER_SIZE as usize + 1..][..NAME_SIZE];
            out.push(edit(
                format!("field {i} renamed to field 0's name"),
                at + 1,
                first,
                Expected::InvalidFieldName,
            ));
        }
        let Some(a) = f.field_type.ndarray_args() else {
            continue;
        };
        let args = at + 1 + NAME_SIZE as u64;
        let len_at = args + (MAX_DIMS * 8) as u64;
        let json_at = args + NDARRAY_ARGS_HEADER as u64;
        let json_len = a.dtype.descr_json().len();
        let bad_args = |what: &str, off: u64, bytes: &[u8]| {
            edit(
                format!("field {i} {what}"),
                off,
                bytes,
                Expected::InvalidFieldArguments,
            )
        };
        out.push(bad_args("shape all zeros", args, &[0; MAX_DIMS * 8]));
        let huge: Vec<u8> = [1u64 << 40, 1 << 40, 1 << 40]
            .iter()
            .flat_map(|d| d.to_le_bytes())
            .collect();
        out.push(bad_args("shape overflowing 64 bits", args, &huge));
        out.push(bad_args("dtype length 0", len_at, &0u64.to_le_bytes()));
        out.push(bad_args("dtype length 761", len_at, &761u64.to_le_bytes()));
        out.push(bad_args(
            "dtype length u64::MAX",
            len_at,
            &u64::MAX.to_le_bytes(),
        ));
        out.push(bad_args(
            "dtype length one short",
            len_at,
            &(json_len as u64 - 1).to_le_bytes(),
        ));
        out.push(bad_args(
            "dtype JSON garbage",
            json_at,
            &vec![b'x'; json_len],
        ));
        out.push(bad_args("dtype JSON non-ASCII", json_at + 1, &[0xC3]));
        // `[["", "<f4"]]`: the kind character sits 8 bytes in, the name's closing quote 3.
        out.push(bad_args("dtype kind 'x'", json_at + 8, b"x"));
        out.push(bad_args(
            "dtype JSON with a broken quote",
            json_at + 3,
            b"x",
        ));
        if r.num_samples() > 0 {
            let mut shape = a.shape.clone();
            shape[0] += 1;
            let bytes: Vec<u8> = shape.iter().flat_map(|d| d.to_le_bytes()).collect();
            out.push(edit(
                format!("field {i} shape grown past its allocations"),
                args,
                &bytes,
                Expected::InvalidMetadata,
            ));
        }
    }

    // Metadata of the last sample.
    if r.num_samples() > 0 {
        let s = r.num_samples() - 1;
        for (i, f) in r.fields().iter().enumerate() {
            let at = l.metadata_offset + s * l.metadata_itemsize + f.metadata_offset;
            let meta = r.metadata(s, i)?;
            let bad = |what: &str, off: u64, bytes: &[u8]| {
                edit(
                    format!("sample {s} field {i} {what}"),
                    at + off,
                    bytes,
                    Expected::InvalidMetadata,
                )
            };
            match (meta, &f.field_type) {
                (FieldMetadata::Bytes { ptr, .. } | FieldMetadata::Json { ptr, .. }, _) => {
                    let size = r.alloc_size(ptr).expect("valid file") + 1;
                    out.push(bad(
                        "ptr past the end",
                        0,
                        &(file_size + 1000).to_le_bytes(),
                    ));
                    out.push(bad("size past its allocation", 8, &size.to_le_bytes()));
                }
                (FieldMetadata::VarArray { ptr, size }, FieldType::VarArray(a)) => {
                    let row = a.row_bytes().expect("valid file");
                    let past = (r.alloc_size(ptr).expect("valid file") / row + 1) * row;
                    out.push(bad(
                        "ptr past the end",
                        0,
                        &(file_size + 1000).to_le_bytes(),
                    ));
                    out.push(bad("size past its allocation", 8, &past.to_le_bytes()));
                    out.push(bad(
                        "absurd size, a whole number of rows",
                        8,
                        &(u64::MAX / row * row).to_le_bytes(),
                    ));
                    if row > 1 {
                        out.push(bad(
                            "size not a whole number of rows",
                            8,
                            &(size + 1).to_le_bytes(),
                        ));
                    }
                }
                (FieldMetadata::NdArray { .. } | FieldMetadata::TorchTensor { .. }, _) => {
                    out.push(bad(
                        "ptr past the end",
                        0,
                        &(file_size + 1000).to_le_bytes(),
                    ));
                }
                (FieldMetadata::RgbImage { mode, width, .. }, FieldType::RgbImage) => {
                    out.push(bad("image mode 7", 0, &[7]));
                    out.push(bad(
                        "ptr past the end",
                        5,
                        &(file_size + 1000).to_le_bytes(),
                    ));
                    if mode == IMAGE_MODE_RAW {
                        out.push(bad("raw width grown", 1, &(width + 1).to_le_bytes()));
                    }
                }
                _ => {}
            }
        }
    }

    // Allocation-table rows: the first and the last.
    let rows: Vec<_> = r.alloc_rows().collect();
    let n = rows.len() as u64;
    for (k, row) in [(0, rows.first()), (n.saturating_sub(1), rows.last())] {
        let Some(row) = row else { continue };
        let at = table + k * ALLOC_ROW_SIZE;
        let bad = |what: &str, off: u64, v: u64| {
            edit(
                format!("row {k} {what}"),
                at + off,
                &v.to_le_bytes(),
                Expected::InvalidAllocRow,
            )
        };
        out.push(bad("sample_id = num_samples", 0, r.num_samples()));
        out.push(bad("sample_id u64::MAX", 0, u64::MAX));
        out.push(bad("ptr at the end of the file", 8, file_size));
        out.push(bad("ptr u64::MAX", 8, u64::MAX));
        out.push(bad("size u64::MAX", 16, u64::MAX));
        out.push(bad("size reaching past the table", 16, table - row.ptr + 1));
        if row.size > 0 {
            out.push(bad("ptr inside the header", 8, 1));
            if row.size >= 2 {
                out.push(bad(
                    "crossing a page boundary",
                    8,
                    l.data_region_start + r.page_size() - 1,
                ));
            }
        }
    }
    Ok(out)
}

/// A copy of `original` whose every image of the RGB-image field `field` claims
/// `height x width`: in its metadata row and, for JPEG images, in the stream's frame
/// header (SOF0..SOF15), 8 bytes per sample. The file stays structurally valid (it opens);
/// it is what a forged dataset looks like to the decoders, which must refuse it without
/// allocating for the claimed size.
///
/// Returns why not when `original` does not open, the field is not an RGB image field, or
/// a JPEG has no frame header.
pub fn forge_image_size(
    original: &[u8],
    field: &str,
    height: u16,
    width: u16,
) -> Result<Vec<u8>, String> {
    let r = Reader::from_vec("original", original.to_vec(), &ReaderOptions::default())
        .map_err(|e| e.to_string())?;
    let index = r
        .field_index(field)
        .ok_or_else(|| format!("no field {field:?}"))?;
    let base = r.bytes().map_err(|e| e.to_string())?.as_ptr() as usize;
    let mut out = original.to_vec();
    for sample in 0..r.num_samples() {
        let meta = r.metadata_bytes(sample, index).map_err(|e| e.to_string())?;
        let FieldMetadata::RgbImage { mode, .. } =
            r.metadata(sample, index).map_err(|e| e.to_string())?
        else {
            return Err(format!("field {field:?} is not an RGB image field"));
        };
        // Packed metadata: mode u8, width u16, height u16 (little-endian).
        let at = meta.as_ptr() as usize - base;
        out[at + 1..at + 3].copy_from_slice(&width.to_le_bytes());
        out[at + 3..at + 5].copy_from_slice(&height.to_le_bytes());
        if mode == IMAGE_MODE_RAW {
            continue;
        }
        let data = r
            .field_data(sample, index)
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        let sof = sof_offset(data).ok_or_else(|| format!("sample {sample}: no frame header"))?;
        let at = data.as_ptr() as usize - base + sof;
        // SOFn: FF Cn, length u16, precision u8, height u16, width u16 (big-endian).
        out[at + 5..at + 7].copy_from_slice(&height.to_be_bytes());
        out[at + 7..at + 9].copy_from_slice(&width.to_be_bytes());
    }
    Ok(out)
}

/// Where the frame header's `FF Cn` marker starts in a JPEG stream.
fn sof_offset(jpeg: &[u8]) -> Option<usize> {
    let mut at = 2;
    loop {
        while *jpeg.get(at)? == 0xFF {
            at += 1;
        }
        let marker = *jpeg.get(at)?;
        let len = usize::from(u16::from_be_bytes([*jpeg.get(at + 1)?, *jpeg.get(at + 2)?]));
        if matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            return (at + 8 < jpeg.len()).then_some(at - 1);
        }
        if marker == 0xDA || len < 2 {
            return None;
        }
        at += 1 + len;
        if *jpeg.get(at)? != 0xFF {
            return None;
        }
    }
}
