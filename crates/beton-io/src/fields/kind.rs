//! The [`FieldKind`] trait every built-in field type implements, and what it describes:
//! where a sample's stored bytes are ([`ExtentRule`], [`Extent`], [`StoredLen`]), plus the
//! little helpers the kinds share. The kinds (this folder's other modules) and the reader
//! and writer build on it; the table of kinds ([`super::BUILTIN`]) sits above them all.

use std::borrow::Cow;

use extension_error::ExtensionError;

use crate::format::{ARGS_SIZE, FieldMetadata, FieldType};
use crate::json::JsonValue;
use crate::value::FieldValue;

/// Where a field keeps a sample's stored bytes, as far as it can be said without reading
/// the sample: lets a hot loop find them from the metadata bytes without a call per sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtentRule {
    /// Nothing stored in the data region (the value is in the metadata).
    None,
    /// The pointer is metadata bytes 0..8 (little-endian u64), the length is fixed.
    Fixed {
        /// Bytes stored per sample.
        len: u64,
    },
    /// The pointer is metadata bytes 0..8, the length bytes 8..16.
    Sized,
    /// Depends on the sample's metadata in a type-specific way: ask
    /// [`FieldKind::extent`] / [`CustomHandler::extent`] (or [`crate::Reader::stored_extent`]).
    Computed,
}

impl ExtentRule {
    /// `(ptr, len)` for the two layouts read from fixed places (`Fixed`, `Sized`), `None`
    /// for the others or metadata too short: the hot path of a loader, inlined.
    #[inline]
    pub fn fixed_extent(self, metadata: &[u8]) -> Option<(u64, u64)> {
        match self {
            ExtentRule::Fixed { len } => Some((u64_at(metadata, 0)?, len)),
            ExtentRule::Sized => Some((u64_at(metadata, 0)?, u64_at(metadata, 8)?)),
            ExtentRule::None | ExtentRule::Computed => None,
        }
    }

    /// The extent this rule gives for `metadata` (`Computed` gives `None`: ask the kind).
    pub fn apply(self, metadata: &[u8]) -> Option<Extent> {
        match self {
            ExtentRule::None | ExtentRule::Computed => None,
            ExtentRule::Fixed { len } => Some(Extent {
                ptr: u64_at(metadata, 0)?,
                len: StoredLen::Bytes(len),
            }),
            ExtentRule::Sized => Some(Extent {
                ptr: u64_at(metadata, 0)?,
                len: StoredLen::Bytes(u64_at(metadata, 8)?),
            }),
        }
    }
}

/// The stored bytes of one field of one sample: where they start and how long they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Byte offset in the file (it starts an allocation-table row).
    pub ptr: u64,
    /// How many bytes.
    pub len: StoredLen,
}

/// The length of an [`Extent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredLen {
    /// Exactly this many bytes (at most the allocation's size).
    Bytes(u64),
    /// The whole allocation starting at the pointer (JPEG images: the stream's length is
    /// not in the metadata).
    WholeAllocation,
}

/// Everything beton-io knows about one built-in field type. Implementations are unit
/// structs in this module's children; [`FieldType::kind`] returns them.
///
/// The fallible methods say why with an [`ExtensionError`] (the reader and writer report it
/// as the `reason` of their [`crate::Error`], its cause as that error's source).
///
/// The methods taking metadata bytes get exactly the field's metadata bytes of one sample
/// (its `metadata_layout().0` bytes), except [`FieldKind::metadata`]'s callers outside the
/// reader may pass more.
pub trait FieldKind: Sync + std::fmt::Debug {
    /// FFCV's type id in the field descriptor.
    fn type_id(&self) -> u8;

    /// FFCV's class name (`"IntField"`, ...).
    fn class_name(&self) -> &'static str;

    /// The field type a descriptor of this type id with the 1024-byte argument block `args`
    /// describes, or why the block is malformed.
    fn parse_arguments(&self, args: &[u8]) -> Result<FieldType, ExtensionError>;

    /// The argument block written for `field_type` (FFCV writes zeros for types without
    /// arguments), or why it cannot be stored.
    fn encode_arguments(&self, field_type: &FieldType) -> Result<[u8; ARGS_SIZE], ExtensionError> {
        let _ = field_type;
        Ok([0; ARGS_SIZE])
    }

    /// The arguments as named values, for tools that print a field (`ffcv inspect`).
    fn describe_arguments(&self, field_type: &FieldType) -> Vec<(&'static str, JsonValue)> {
        let _ = field_type;
        Vec::new()
    }

    /// `(itemsize, alignment)` of the field's metadata as numpy lays out its
    /// `metadata_type` (structs built without `align=True` have alignment 1).
    fn metadata_layout(&self) -> (u64, u64);

    /// The typed metadata of one sample.
    fn metadata(&self, metadata: &[u8]) -> FieldMetadata;

    /// Where the stored bytes are, for every sample of `field_type`.
    fn extent_rule(&self, field_type: &FieldType) -> ExtentRule;

    /// The stored bytes of one sample, or why its metadata is invalid. The default applies
    /// [`FieldKind::extent_rule`]; kinds whose rule is `Computed` override it.
    fn extent(
        &self,
        field_type: &FieldType,
        metadata: &[u8],
    ) -> Result<Option<Extent>, ExtensionError> {
        Ok(self.extent_rule(field_type).apply(metadata))
    }

    /// The value of one sample, from its metadata and its stored bytes (`None` when the
    /// type stores nothing), as a [`crate::DatasetWriter`] takes it back.
    fn read(
        &self,
        field_type: &FieldType,
        metadata: &[u8],
        data: Option<&[u8]>,
    ) -> Result<FieldValue, ExtensionError>;

    /// The bytes `value` stores in a page (`None` for a type that stores nothing), after
    /// checking the value fits `field_type`.
    fn payload<'v>(
        &self,
        field_type: &FieldType,
        value: &'v FieldValue,
    ) -> Result<Option<Cow<'v, [u8]>>, ExtensionError>;

    /// Writes `value`'s metadata into `out` (the field's bytes of the row), given where its
    /// payload was placed (`ptr`, `len`; 0 and 0 without a payload).
    fn write_metadata(&self, value: &FieldValue, ptr: u64, len: u64, out: &mut [u8]);
}

/// The little-endian u64 at `metadata[at..at + 8]`, if there.
#[inline]
pub fn u64_at(metadata: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        metadata.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Writes `x` little-endian at `out[at..at + 8]`.
pub(crate) fn put_u64(out: &mut [u8], at: usize, x: u64) {
    out[at..at + 8].copy_from_slice(&x.to_le_bytes());
}

/// The writer's error for a value of the wrong kind.
pub(crate) fn wrong_value(value: &FieldValue, class_name: &str) -> ExtensionError {
    format!("a {} value for a {class_name} field", value.kind_name()).into()
}

/// The stored bytes, which a kind with data always gets from the reader.
pub(crate) fn stored(data: Option<&[u8]>) -> Vec<u8> {
    data.unwrap_or_default().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_read_their_words_and_refuse_short_metadata() {
        let mut m = [0u8; 16];
        m[..8].copy_from_slice(&4096u64.to_le_bytes());
        m[8..].copy_from_slice(&17u64.to_le_bytes());
        assert_eq!(ExtentRule::Sized.fixed_extent(&m), Some((4096, 17)));
        assert_eq!(
            ExtentRule::Fixed { len: 3 }.fixed_extent(&m),
            Some((4096, 3))
        );
        assert_eq!(ExtentRule::Sized.fixed_extent(&m[..15]), None);
        assert_eq!(ExtentRule::Fixed { len: 3 }.fixed_extent(&m[..7]), None);
        assert_eq!(ExtentRule::Computed.fixed_extent(&m), None);
        assert_eq!(
            ExtentRule::Sized.apply(&m),
            Some(Extent {
                ptr: 4096,
                len: StoredLen::Bytes(17)
            })
        );
        assert_eq!(ExtentRule::None.apply(&m), None);
    }
}
