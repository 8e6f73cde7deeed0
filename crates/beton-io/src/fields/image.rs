//! `ImageField` (an ffcv-rs extension stored as FFCV's `BytesField`, type id 3): images
//! with 1, 3 or 4 channels of 8 or 16 bits, the kinds FFCV's `RGBImageField` (RGB, 8 bits)
//! cannot hold. The metadata is the Bytes field's packed `{ptr: u64, size: u64}`; each
//! sample's stored bytes are one self-describing image:
//!
//! - a JPEG stream (8 bits, 1 or 3 channels), kept as the source file had it;
//! - a PNG stream whose colour type and depth are the field's, kept as it was;
//! - raw pixels behind [`RAW_HEADER_LEN`] bytes of header ([`RawHeader`]): `height x width
//!   x channels` samples in row-major order, 16-bit samples little-endian.
//!
//! FFCV's `BytesField` ignores its argument block, so the channels and depth live there
//! behind a magic tag: FFCV 1.0.2 opens such a file and reads each image's stored bytes,
//! and our reader recognises the tag (`docs/format.md`, "Image arguments").
//!
//! Argument block (1024 bytes, little-endian):
//!
//! | bytes | content |
//! |---|---|
//! | 0..8 | [`IMAGE_MAGIC`] |
//! | 8..12 | u32 layout version, 1 |
//! | 12..16 | u32 channels: 1, 3 or 4 |
//! | 16..20 | u32 bits per channel sample: 8 or 16 |
//! | 20.. | zeros |

use std::borrow::Cow;

use extension_error::ExtensionError;

use super::{ExtentRule, FieldKind, put_u64, stored, u64_at, wrong_value};
use crate::format::{ARGS_SIZE, FieldMetadata, FieldType, ImageArgs};
use crate::json::JsonValue;
use crate::value::FieldValue;

/// The tag opening an ImageField's argument block. FFCV writes zeros there for a
/// `BytesField`, so an FFCV file never carries it.
pub const IMAGE_MAGIC: [u8; 8] = *b"FFRSIMAG";
/// The argument block's layout version.
pub const IMAGE_LAYOUT: u32 = 1;
/// The tag opening a raw sample's header.
pub const RAW_MAGIC: [u8; 4] = *b"FRAW";
/// Bytes of a raw sample's header ([`RawHeader`]).
pub const RAW_HEADER_LEN: usize = 16;
/// The signature opening a PNG stream.
pub const PNG_SIGNATURE: [u8; 8] = *b"\x89PNG\r\n\x1a\n";

impl ImageArgs {
    /// `channels` (1, 3 or 4) and `bits` (8 or 16), checked.
    pub fn new(channels: u8, bits: u8) -> Result<ImageArgs, String> {
        let args = ImageArgs { channels, bits };
        args.check()?;
        Ok(args)
    }

    fn check(&self) -> Result<(), String> {
        if !matches!(self.channels, 1 | 3 | 4) {
            return Err(format!(
                "{} channels (an ImageField has 1, 3 or 4)",
                self.channels
            ));
        }
        if !matches!(self.bits, 8 | 16) {
            return Err(format!(
                "{} bits per sample (an ImageField has 8 or 16)",
                self.bits
            ));
        }
        Ok(())
    }

    /// Bytes of one channel sample: 1 or 2.
    pub fn sample_bytes(&self) -> usize {
        usize::from(self.bits / 8)
    }

    /// Bytes of one pixel (`channels * sample_bytes`).
    pub fn pixel_bytes(&self) -> usize {
        usize::from(self.channels) * self.sample_bytes()
    }

    /// Bytes of a `height x width` image's pixels, `None` on overflow.
    pub fn pixels_len(&self, height: u32, width: u32) -> Option<u64> {
        u64::from(height)
            .checked_mul(u64::from(width))?
            .checked_mul(self.pixel_bytes() as u64)
    }

    /// Whether `args` (a type id 3 argument block) opens with [`IMAGE_MAGIC`].
    pub fn is_tagged(args: &[u8]) -> bool {
        args.get(..8) == Some(&IMAGE_MAGIC[..])
    }

    /// The 1024-byte argument block.
    pub fn encode(&self) -> Result<[u8; ARGS_SIZE], String> {
        self.check()?;
        let mut b = [0u8; ARGS_SIZE];
        b[..8].copy_from_slice(&IMAGE_MAGIC);
        b[8..12].copy_from_slice(&IMAGE_LAYOUT.to_le_bytes());
        b[12..16].copy_from_slice(&u32::from(self.channels).to_le_bytes());
        b[16..20].copy_from_slice(&u32::from(self.bits).to_le_bytes());
        Ok(b)
    }

    /// Decodes a tagged argument block; `Err` with the reason when any part is malformed.
    pub fn decode(b: &[u8]) -> Result<ImageArgs, String> {
        if b.len() != ARGS_SIZE || !ImageArgs::is_tagged(b) {
            return Err("argument block does not open with the ImageField tag".into());
        }
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let layout = u32_at(8);
        if layout != IMAGE_LAYOUT {
            return Err(format!(
                "ImageField layout version {layout} (this reader knows {IMAGE_LAYOUT})"
            ));
        }
        if b[20..].iter().any(|&x| x != 0) {
            return Err("bytes past the ImageField arguments are not zero".into());
        }
        let (channels, bits) = (u32_at(12), u32_at(16));
        let small = |v: u32| u8::try_from(v).unwrap_or(u8::MAX);
        ImageArgs::new(small(channels), small(bits))
    }

    /// Checks what a writer is about to store for this field: a raw sample whose header
    /// matches the field and whose length matches the header, a PNG whose header gives the
    /// field's colour type and depth, or (8-bit fields of 1 or 3 channels) a JPEG stream.
    /// The JPEG's frame is checked where it is decoded (rgb-image); here only its start.
    pub fn check_stored(&self, data: &[u8]) -> Result<(), String> {
        if data.starts_with(&RAW_MAGIC) {
            let h = RawHeader::parse(data)?;
            if (h.channels, h.bits) != (self.channels, self.bits) {
                return Err(format!(
                    "a raw image of {} channels and {} bits for a field of {} and {}",
                    h.channels, h.bits, self.channels, self.bits
                ));
            }
            return h.check_len(data.len());
        }
        if data.starts_with(&PNG_SIGNATURE) {
            let (width, height, channels, bits) = png_header(data)?;
            if (channels, bits) != (self.channels, self.bits) {
                return Err(format!(
                    "a {width}x{height} PNG of {channels} channels and {bits} bits for a field \
                     of {} and {}",
                    self.channels, self.bits
                ));
            }
            return Ok(());
        }
        if data.starts_with(&[0xFF, 0xD8]) {
            if self.bits != 8 || self.channels == 4 {
                return Err(format!(
                    "a JPEG for a field of {} channels and {} bits (JPEGs are kept only for \
                     8-bit fields of 1 or 3 channels)",
                    self.channels, self.bits
                ));
            }
            return Ok(());
        }
        Err(format!(
            "{} stored bytes are neither a raw image, a PNG nor a JPEG (they open with {:02x?})",
            data.len(),
            &data[..data.len().min(8)]
        ))
    }
}

/// The header of a raw sample (16 bytes, little-endian): `b"FRAW"`, u32 width, u32
/// height, u8 channels, u8 bits, two zero bytes; the pixels follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawHeader {
    /// Width in pixels (at least 1).
    pub width: u32,
    /// Height in pixels (at least 1).
    pub height: u32,
    /// Channels: 1, 3 or 4.
    pub channels: u8,
    /// Bits per channel sample: 8 or 16.
    pub bits: u8,
}

impl RawHeader {
    /// The header's 16 bytes.
    pub fn encode(&self) -> [u8; RAW_HEADER_LEN] {
        let mut b = [0u8; RAW_HEADER_LEN];
        b[..4].copy_from_slice(&RAW_MAGIC);
        b[4..8].copy_from_slice(&self.width.to_le_bytes());
        b[8..12].copy_from_slice(&self.height.to_le_bytes());
        b[12] = self.channels;
        b[13] = self.bits;
        b
    }

    /// Reads the header at the start of `data`, checked (magic, sizes, channels, bits).
    pub fn parse(data: &[u8]) -> Result<RawHeader, String> {
        let Some(b) = data.get(..RAW_HEADER_LEN) else {
            return Err(format!(
                "{} bytes, shorter than a raw image header",
                data.len()
            ));
        };
        if b[..4] != RAW_MAGIC || b[14..16] != [0, 0] {
            return Err("the raw image header is malformed".into());
        }
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let h = RawHeader {
            width: u32_at(4),
            height: u32_at(8),
            channels: b[12],
            bits: b[13],
        };
        ImageArgs::new(h.channels, h.bits).map_err(|e| format!("raw image header: {e}"))?;
        if h.width == 0 || h.height == 0 {
            return Err(format!(
                "the raw image header gives an empty {}x{} image",
                h.height, h.width
            ));
        }
        Ok(h)
    }

    /// The pixel bytes the header announces (`None` on overflow).
    pub fn pixels_len(&self) -> Option<u64> {
        ImageArgs {
            channels: self.channels,
            bits: self.bits,
        }
        .pixels_len(self.height, self.width)
    }

    /// Checks that a sample of `len` bytes holds the header and exactly its pixels.
    pub fn check_len(&self, len: usize) -> Result<(), String> {
        let want = self
            .pixels_len()
            .and_then(|p| p.checked_add(RAW_HEADER_LEN as u64));
        if want != Some(len as u64) {
            return Err(format!(
                "a raw {}x{}x{} image of {} bits takes {} bytes with its header, not {len}",
                self.height,
                self.width,
                self.channels,
                self.bits,
                want.map_or("more than 2^64".to_owned(), |w| w.to_string())
            ));
        }
        Ok(())
    }
}

/// `(width, height, channels, bits)` from a PNG's IHDR chunk, for the colour types an
/// ImageField keeps as they are (gray, RGB, RGBA; 8 or 16 bits, not interlaced or with
/// either interlacing). Other PNGs (palettes, gray+alpha, 1/2/4-bit gray) are refused:
/// a writer stores them raw after decoding.
pub fn png_header(data: &[u8]) -> Result<(u32, u32, u8, u8), String> {
    let ihdr = data
        .get(8..29)
        .filter(|h| &h[4..8] == b"IHDR")
        .ok_or("the PNG has no IHDR chunk where it belongs")?;
    let u32_at = |at: usize| u32::from_be_bytes(ihdr[at..at + 4].try_into().expect("4 bytes"));
    let (width, height, bits, color) = (u32_at(8), u32_at(12), ihdr[16], ihdr[17]);
    let channels = match color {
        0 => 1,
        2 => 3,
        6 => 4,
        other => {
            return Err(format!(
                "a PNG of colour type {other} (an ImageField keeps gray, RGB and RGBA PNGs)"
            ));
        }
    };
    if !matches!(bits, 8 | 16) {
        return Err(format!(
            "a {bits}-bit PNG (an ImageField keeps 8- and 16-bit PNGs)"
        ));
    }
    if width == 0 || height == 0 {
        return Err(format!("the PNG is an empty {height}x{width} image"));
    }
    Ok((width, height, channels, bits))
}

/// The kind of [`FieldType::Image`]. It shares type id 3 with `BytesKind`, which parses a
/// tagged argument block into this type; so it is not in the by-id table.
#[derive(Debug, Clone, Copy)]
pub struct ImageKind;

fn args(field_type: &FieldType) -> Result<&ImageArgs, String> {
    match field_type {
        FieldType::Image(a) => Ok(a),
        other => Err(format!(
            "a {} has no ImageField arguments",
            other.type_name()
        )),
    }
}

impl FieldKind for ImageKind {
    fn type_id(&self) -> u8 {
        // BytesField's id, so that FFCV opens the file and reads the field as bytes.
        3
    }
    fn class_name(&self) -> &'static str {
        "ImageField"
    }
    fn parse_arguments(&self, block: &[u8]) -> Result<FieldType, ExtensionError> {
        Ok(FieldType::Image(ImageArgs::decode(block)?))
    }
    fn encode_arguments(&self, field_type: &FieldType) -> Result<[u8; ARGS_SIZE], ExtensionError> {
        Ok(args(field_type)?.encode()?)
    }
    fn describe_arguments(&self, field_type: &FieldType) -> Vec<(&'static str, JsonValue)> {
        let Ok(a) = args(field_type) else {
            return Vec::new();
        };
        vec![
            ("channels", JsonValue::Int(a.channels.into())),
            ("bits", JsonValue::Int(a.bits.into())),
        ]
    }
    fn metadata_layout(&self) -> (u64, u64) {
        // BytesField's `{ptr: u64, size: u64}` rows, alignment 1.
        (16, 1)
    }
    fn metadata(&self, metadata: &[u8]) -> FieldMetadata {
        FieldMetadata::Image {
            ptr: u64_at(metadata, 0).expect("16 metadata bytes"),
            size: u64_at(metadata, 8).expect("16 metadata bytes"),
        }
    }
    fn extent_rule(&self, _: &FieldType) -> ExtentRule {
        // The stored image is checked where it is decoded, sample by sample.
        ExtentRule::Sized
    }
    fn read(
        &self,
        _: &FieldType,
        _: &[u8],
        data: Option<&[u8]>,
    ) -> Result<FieldValue, ExtensionError> {
        Ok(FieldValue::Bytes(stored(data)))
    }
    fn payload<'v>(
        &self,
        field_type: &FieldType,
        value: &'v FieldValue,
    ) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        let FieldValue::Bytes(b) = value else {
            return Err(wrong_value(value, self.class_name()));
        };
        args(field_type)?.check_stored(b)?;
        Ok(Some(Cow::Borrowed(b)))
    }
    fn write_metadata(&self, _: &FieldValue, ptr: u64, len: u64, out: &mut [u8]) {
        put_u64(out, 0, ptr);
        put_u64(out, 8, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_is_stored_as_bytesfield_is() {
        use super::super::bytes::BytesKind;
        assert_eq!(ImageKind.type_id(), BytesKind.type_id());
        assert_eq!(ImageKind.metadata_layout(), BytesKind.metadata_layout());
        let block = ImageArgs::new(1, 16).unwrap().encode().unwrap();
        assert_eq!(
            BytesKind.parse_arguments(&block).unwrap(),
            FieldType::Image(ImageArgs {
                channels: 1,
                bits: 16
            })
        );
    }

    #[test]
    fn arguments_round_trip_and_malformed_blocks_are_refused() {
        for (c, b) in [(1, 8), (1, 16), (3, 8), (3, 16), (4, 8), (4, 16)] {
            let a = ImageArgs::new(c, b).unwrap();
            assert_eq!(ImageArgs::decode(&a.encode().unwrap()), Ok(a));
        }
        assert!(ImageArgs::new(2, 8).unwrap_err().contains("2 channels"));
        assert!(ImageArgs::new(3, 12).unwrap_err().contains("12 bits"));
        let good = ImageArgs::new(3, 8).unwrap().encode().unwrap();
        let with = |at: usize, bytes: &[u8]| {
            let mut b = good;
            b[at..at + bytes.len()].copy_from_slice(bytes);
            ImageArgs::decode(&b).unwrap_err()
        };
        assert!(with(8, &2u32.to_le_bytes()).contains("layout version 2"));
        assert!(with(12, &300u32.to_le_bytes()).contains("channels"));
        assert!(with(16, &7u32.to_le_bytes()).contains("7 bits"));
        assert!(with(1000, &[1]).contains("not zero"));
    }

    #[test]
    fn stored_samples_are_checked_against_the_field() {
        let gray16 = ImageArgs::new(1, 16).unwrap();
        let header = RawHeader {
            width: 3,
            height: 2,
            channels: 1,
            bits: 16,
        };
        let mut raw = header.encode().to_vec();
        raw.extend_from_slice(&[0; 12]);
        assert_eq!(gray16.check_stored(&raw), Ok(()));
        assert!(
            gray16
                .check_stored(&raw[..27])
                .unwrap_err()
                .contains("takes 28 bytes with its header, not 27")
        );
        let rgb8 = ImageArgs::new(3, 8).unwrap();
        assert!(rgb8.check_stored(&raw).unwrap_err().contains("1 channels"));
        assert!(
            gray16
                .check_stored(&[0xFF, 0xD8, 0])
                .unwrap_err()
                .contains("JPEG")
        );
        assert!(
            gray16
                .check_stored(b"GIF89a")
                .unwrap_err()
                .contains("neither")
        );
        // A hostile header: sizes whose pixels overflow are refused, not allocated.
        let huge = RawHeader {
            width: u32::MAX,
            height: u32::MAX,
            channels: 4,
            bits: 16,
        };
        let err = huge.check_len(16).unwrap_err();
        assert!(err.contains("more than 2^64"), "{err}");
        let mut zero = header.encode();
        zero[4..8].copy_from_slice(&0u32.to_le_bytes());
        assert!(RawHeader::parse(&zero).unwrap_err().contains("empty"));
    }
}
