//! The on-disk structures of a `.beton` v2 file and the metadata row layout rules, shared by the
//! reader and the writer.

use crate::dtype::NumpyDtype;

/// The only file version FFCV 1.0.2 writes and reads.
pub const VERSION: u16 = 2;
/// Bytes of the header: u16 version, u16 num_fields, u32 page_size, u64 num_samples,
/// u64 alloc_table_ptr.
pub const HEADER_SIZE: u64 = 24;
/// Bytes of one field descriptor: u8 type id, 16 name bytes, 1024 argument bytes.
pub const FIELD_DESC_SIZE: u64 = 1041;
/// Bytes of a field name in a descriptor.
pub const NAME_SIZE: usize = 16;
/// Bytes of a field's argument block.
pub const ARGS_SIZE: usize = 1024;
/// Bytes of one allocation-table row: u64 sample_id, u64 ptr, u64 size.
pub const ALLOC_ROW_SIZE: u64 = 24;
/// Dimensions in the NDArray argument block's shape array.
pub const MAX_DIMS: usize = 32;
/// Bytes of the NDArray argument header (32 x u64 shape + u64 descr length).
pub const NDARRAY_ARGS_HEADER: usize = MAX_DIMS * 8 + 8;
/// FFCV's smallest page size for writing (2 MiB).
pub const MIN_PAGE_SIZE: u64 = 1 << 21;
/// The smallest page size [`crate::Reader`] opens (4 KiB). FFCV writes pages of at least
/// [`MIN_PAGE_SIZE`]; a file claiming tiny pages would make per-page tables (the process
/// cache's page-to-slot tables) nearly as long as the file has bytes, so it is refused.
pub const MIN_READ_PAGE_SIZE: u64 = 1 << 12;
/// FFCV's page-size bound for writing (exclusive): the page size must fit a u32.
pub const MAX_PAGE_SIZE: u64 = 1 << 32;
/// `RGBImage` metadata `mode` for JPEG-encoded data.
pub const IMAGE_MODE_JPEG: u8 = 0;
/// `RGBImage` metadata `mode` for raw H x W x 3 u8 pixels.
pub const IMAGE_MODE_RAW: u8 = 1;

/// The header at byte 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// File format version (2).
    pub version: u16,
    /// Number of fields.
    pub num_fields: u16,
    /// Page size in bytes.
    pub page_size: u32,
    /// Number of samples (metadata rows).
    pub num_samples: u64,
    /// Byte offset of the allocation table, which runs to the end of the file.
    pub alloc_table_ptr: u64,
}

impl Header {
    /// Decodes the first 24 bytes.
    pub(crate) fn decode(b: &[u8; 24]) -> Header {
        Header {
            version: u16::from_le_bytes([b[0], b[1]]),
            num_fields: u16::from_le_bytes([b[2], b[3]]),
            page_size: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            num_samples: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            alloc_table_ptr: u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
        }
    }

    /// Encodes as the 24 header bytes.
    pub(crate) fn encode(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0..2].copy_from_slice(&self.version.to_le_bytes());
        b[2..4].copy_from_slice(&self.num_fields.to_le_bytes());
        b[4..8].copy_from_slice(&self.page_size.to_le_bytes());
        b[8..16].copy_from_slice(&self.num_samples.to_le_bytes());
        b[16..24].copy_from_slice(&self.alloc_table_ptr.to_le_bytes());
        b
    }
}

/// Where the regions of a file are, computed from the header and the field list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Byte offset of the first metadata row (right after the field descriptors; unaligned).
    pub metadata_offset: u64,
    /// Bytes of one metadata row.
    pub metadata_itemsize: u64,
    /// Bytes of all metadata rows.
    pub metadata_size: u64,
    /// `align_up(metadata_offset + metadata_size, page_size)`: where the first data page starts
    /// (may be past the end of a file without allocations).
    pub data_region_start: u64,
    /// Rows in the allocation table.
    pub alloc_table_rows: u64,
    /// Size of the file.
    pub file_size: u64,
}

/// The arguments of an NDArray or TorchTensor field: item dtype and fixed shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NdArrayArgs {
    /// The item type.
    pub dtype: NumpyDtype,
    /// The shape (1 to 32 dimensions; the last one is not 0, because FFCV strips trailing zeros).
    pub shape: Vec<u64>,
}

/// The arguments of a VarArrayField: the element dtype and the shape of one row (the
/// array's shape without its leading dimension; empty for 1-D arrays). Checked, encoded
/// and decoded in `fields/var_array.rs`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VarArrayArgs {
    /// The element type: bool, integer, unsigned or float.
    pub dtype: NumpyDtype,
    /// The shape of one row (0 to 31 dimensions, each at least 1).
    pub inner_shape: Vec<u64>,
}

/// The arguments of an ImageField (an ffcv-rs image kind beyond FFCV's RGB8): the
/// channels and the bits per channel sample of every image of the field. Checked, encoded
/// and decoded in `fields/image.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImageArgs {
    /// Channels per pixel: 1 (gray), 3 (RGB) or 4 (RGBA).
    pub channels: u8,
    /// Bits per channel sample: 8 or 16.
    pub bits: u8,
}

impl NdArrayArgs {
    /// `dtype` and `shape` together.
    pub fn new(dtype: NumpyDtype, shape: Vec<u64>) -> NdArrayArgs {
        NdArrayArgs { dtype, shape }
    }

    /// Bytes of one array (`item_size * prod(shape)`), `None` on overflow.
    pub fn byte_len(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(self.dtype.item_size(), |acc, &d| acc.checked_mul(d))
    }

    /// Encodes as FFCV's 1024-byte argument block; `Err` with the reason when the shape or the
    /// dtype JSON does not fit or would not read back identically.
    pub(crate) fn encode(&self) -> Result<[u8; ARGS_SIZE], String> {
        if self.shape.is_empty() || self.shape.len() > MAX_DIMS {
            return Err(format!(
                "shape {:?} must have 1 to {MAX_DIMS} dimensions",
                self.shape
            ));
        }
        if self.shape.last() == Some(&0) {
            return Err(format!(
                "shape {:?} ends in 0, which FFCV drops when reading",
                self.shape
            ));
        }
        if self.byte_len().is_none() {
            return Err(format!("shape {:?} overflows the array size", self.shape));
        }
        let json = self.dtype.descr_json();
        if json.len() > ARGS_SIZE - NDARRAY_ARGS_HEADER {
            return Err(format!("dtype description {json:?} is too long"));
        }
        let mut b = [0u8; ARGS_SIZE];
        for (i, d) in self.shape.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&d.to_le_bytes());
        }
        b[MAX_DIMS * 8..NDARRAY_ARGS_HEADER].copy_from_slice(&(json.len() as u64).to_le_bytes());
        b[NDARRAY_ARGS_HEADER..NDARRAY_ARGS_HEADER + json.len()].copy_from_slice(json.as_bytes());
        Ok(b)
    }

    /// Decodes an argument block; `Err` with the reason when malformed.
    pub(crate) fn decode(b: &[u8]) -> Result<NdArrayArgs, String> {
        if b.len() != ARGS_SIZE {
            return Err(format!("argument block is {} bytes, not 1024", b.len()));
        }
        let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let mut shape: Vec<u64> = (0..MAX_DIMS).map(word).collect();
        // FFCV pads the shape with zeros and strips all trailing zeros when reading.
        while shape.last() == Some(&0) {
            shape.pop();
        }
        if shape.is_empty() {
            return Err("shape is all zeros (FFCV cannot read a 0-dimensional array)".into());
        }
        let len = word(MAX_DIMS);
        let room = (ARGS_SIZE - NDARRAY_ARGS_HEADER) as u64;
        if len > room {
            return Err(format!(
                "dtype description length {len} exceeds the {room} bytes left in the argument block"
            ));
        }
        if len == 0 {
            return Err("dtype description is empty".into());
        }
        let json = &b[NDARRAY_ARGS_HEADER..NDARRAY_ARGS_HEADER + len as usize];
        let dtype = NumpyDtype::from_descr_json(json)?;
        let args = NdArrayArgs { dtype, shape };
        if args.byte_len().is_none() {
            return Err(format!(
                "shape {:?} with item size {} overflows 64 bits",
                args.shape,
                args.dtype.item_size()
            ));
        }
        Ok(args)
    }
}

/// The type of a field, from its descriptor's type id and arguments.
///
/// What each type means (layout, stored bytes, values) lives in its module under
/// [`crate::fields`]; [`FieldType::kind`] finds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FieldType {
    /// Type id 0: a float64 scalar in the metadata.
    Float,
    /// Type id 1: an int64 scalar in the metadata.
    Int,
    /// Type id 2: an RGB image (raw pixels or JPEG) in the data region.
    RgbImage,
    /// Type id 3: variable-length bytes in the data region.
    Bytes,
    /// Type id 4: a fixed-shape numpy array in the data region.
    NdArray(NdArrayArgs),
    /// Type id 5: `json.dumps(value)` + NUL in the data region.
    Json,
    /// Type id 6: a fixed-shape torch tensor (stored exactly like an NDArray).
    TorchTensor(NdArrayArgs),
    /// Type id 128 (an ffcv-rs extension FFCV cannot read): exactly this many bytes per
    /// sample in the data region.
    FixedBytes(u64),
    /// Type id 3 with tagged arguments (an ffcv-rs extension FFCV reads as a `BytesField`):
    /// an array per sample with a variable leading dimension.
    VarArray(VarArrayArgs),
    /// Type id 3 with tagged arguments (an ffcv-rs extension FFCV reads as a `BytesField`):
    /// an image per sample with 1, 3 or 4 channels of 8 or 16 bits, stored as a JPEG, a
    /// PNG or raw pixels behind a small header (`docs/format.md`, "Image arguments").
    Image(ImageArgs),
    /// Type id 255 (or a field overridden by name): a user-registered field type, read and
    /// written through its [`crate::CustomHandler`].
    Custom,
}

impl FieldType {
    /// The NDArray/TorchTensor arguments, if any.
    pub fn ndarray_args(&self) -> Option<&NdArrayArgs> {
        match self {
            FieldType::NdArray(a) | FieldType::TorchTensor(a) => Some(a),
            _ => None,
        }
    }
}

/// Lays out a metadata row as numpy's `align=True` struct of the given `(itemsize, alignment)`
/// members: returns each member's offset and the row's itemsize.
pub(crate) fn row_layout(members: &[(u64, u64)]) -> Option<(Vec<u64>, u64)> {
    let mut offsets = Vec::with_capacity(members.len());
    let mut total: u64 = 0;
    let mut max_align: u64 = 1;
    for &(size, align) in members {
        let align = align.max(1);
        total = align_up(total, align)?;
        offsets.push(total);
        total = total.checked_add(size)?;
        max_align = max_align.max(align);
    }
    Some((offsets, align_up(total, max_align)?))
}

/// Rounds `x` up to a multiple of `align` (a power of two or any positive number); `None` on
/// overflow.
pub(crate) fn align_up(x: u64, align: u64) -> Option<u64> {
    let rem = x % align;
    if rem == 0 {
        Some(x)
    } else {
        x.checked_add(align - rem)
    }
}

/// Typed metadata of one field of one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum FieldMetadata {
    /// A float64 value.
    Float(f64),
    /// An int64 value.
    Int(i64),
    /// Bytes stored at `ptr`, `size` bytes long.
    Bytes {
        /// Offset in the file.
        ptr: u64,
        /// Length in bytes.
        size: u64,
    },
    /// JSON text + NUL stored at `ptr`, `size` bytes long (NUL included).
    Json {
        /// Offset in the file.
        ptr: u64,
        /// Length in bytes.
        size: u64,
    },
    /// An array stored at `ptr` (length from the field's arguments).
    NdArray {
        /// Offset in the file.
        ptr: u64,
    },
    /// A tensor stored at `ptr` (length from the field's arguments).
    TorchTensor {
        /// Offset in the file.
        ptr: u64,
    },
    /// An image stored at `data_ptr`.
    RgbImage {
        /// [`IMAGE_MODE_JPEG`] (0) or [`IMAGE_MODE_RAW`] (1).
        mode: u8,
        /// Width in pixels.
        width: u16,
        /// Height in pixels.
        height: u16,
        /// Offset in the file.
        data_ptr: u64,
    },
    /// Fixed-size bytes stored at `ptr` (length from the field's arguments).
    FixedBytes {
        /// Offset in the file.
        ptr: u64,
    },
    /// A variable-length array stored at `ptr`, `size` bytes long (a whole number of rows).
    VarArray {
        /// Offset in the file.
        ptr: u64,
        /// Length in bytes.
        size: u64,
    },
    /// An ImageField's stored image (JPEG, PNG or raw) at `ptr`, `size` bytes long.
    Image {
        /// Offset in the file.
        ptr: u64,
        /// Length in bytes.
        size: u64,
    },
    /// A custom field: read its bytes with [`crate::Reader::metadata_bytes`].
    Custom,
}

impl FieldMetadata {
    /// The data pointer, for fields that store data in pages.
    pub fn ptr(&self) -> Option<u64> {
        match *self {
            FieldMetadata::Bytes { ptr, .. }
            | FieldMetadata::Json { ptr, .. }
            | FieldMetadata::VarArray { ptr, .. }
            | FieldMetadata::Image { ptr, .. }
            | FieldMetadata::NdArray { ptr }
            | FieldMetadata::TorchTensor { ptr }
            | FieldMetadata::FixedBytes { ptr } => Some(ptr),
            FieldMetadata::RgbImage { data_ptr, .. } => Some(data_ptr),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_layout_matches_numpy_align_true() {
        // image (13, align 1) then i8 -> 16; itemsize padded to 8.
        assert_eq!(
            row_layout(&[(13, 1), (8, 8), (8, 8)]),
            Some((vec![0, 16, 24], 32))
        );
        // bytes struct is packed with alignment 1: follows an image directly.
        assert_eq!(row_layout(&[(13, 1), (16, 1)]), Some((vec![0, 13], 29)));
        assert_eq!(row_layout(&[(8, 8), (13, 1)]), Some((vec![0, 8], 24)));
        assert_eq!(row_layout(&[(13, 1)]), Some((vec![0], 13)));
    }

    #[test]
    fn ndarray_args_round_trip() {
        let a = NdArrayArgs::new("<f4".parse().unwrap(), vec![3, 4]);
        let b = a.encode().unwrap();
        assert_eq!(NdArrayArgs::decode(&b).unwrap(), a);
        assert_eq!(a.byte_len(), Some(48));
        assert!(
            NdArrayArgs::new(NumpyDtype::f32(), vec![])
                .encode()
                .is_err()
        );
        assert!(
            NdArrayArgs::new(NumpyDtype::f32(), vec![2, 0])
                .encode()
                .is_err()
        );
        assert!(
            NdArrayArgs::new(NumpyDtype::f32(), vec![u64::MAX, 2])
                .encode()
                .is_err()
        );
    }
}
