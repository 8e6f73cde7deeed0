//! How `ffcv write image-folder` and `ffcv write webdataset` store one image given as its
//! file's bytes, with `--jpeg-passthrough`: a source JPEG that needs no change is stored
//! as it is, without a decode or an encode.
//!
//! A source is stored unchanged when all of these hold, read from its frame header alone
//! ([`JpegFrame::find`]):
//!
//! - the write mode would store the image as JPEG: always for `jpg`; for `smart` when its
//!   raw pixels (`height * width * 3`) exceed `--smart-threshold`; for `proportion` when
//!   the sample's draw says so. This is the decision [`RgbImageEncoder`] makes, taken on
//!   the header's size instead of on decoded pixels;
//! - it already fits `--max-resolution` (its longest side is at most the bound; FFCV's
//!   `resizer` leaves such an image as it is), or there is no bound;
//! - the loader's fast decoder takes it: Huffman sequential (SOF0 or SOF1), 8-bit, gray or
//!   three components each sampled once or twice per axis as often as the most sampled one
//!   (4:4:4, 4:2:2, 4:4:0, 4:2:0), a size in the header. That decoder reproduces
//!   libjpeg-turbo's `TJFLAG_FASTDCT` output, which FFCV 1.0.2 decodes with, so such a
//!   file decodes to the same pixels in our loader and in FFCV's.
//!
//! Anything else is decoded as `PIL.Image.open(f).convert("RGB")` and encoded by the
//! write mode, as without the flag: progressive, arithmetic-coded or 12-bit files, 4:1:1
//! and other samplings (which would need the loader's slower general decoder, whose
//! pixels differ from libjpeg-turbo's), CMYK and YCCK (which FFCV's RGB decode cannot
//! give as `convert("RGB")` does), PNGs, and JPEGs above the bound (resized, then
//! encoded). A file that does not end with its end-of-image marker, or is shorter than
//! its frame's smallest possible scan, is decoded too (a cut file then fails the write, as
//! without the flag). Otherwise a stored-unchanged JPEG is not decoded while writing, so
//! damage inside its compressed data shows when the loader decodes it;
//! `--skip-unreadable` decodes every image once before writing and so finds it.

use std::sync::atomic::{AtomicU64, Ordering};

use ffcv::image::{
    EncodedImage, ImageError, ImageMode, JpegFrame, RgbImageEncoder, WriteMode, read_image_bytes,
    sample_generator,
};
use rand_core::RngCore;

/// An image that could not be stored: the decode or the encode failed.
#[derive(Debug)]
pub enum StoreError {
    /// The source does not decode.
    Decode(ImageError),
    /// The decoded image cannot be encoded with the options.
    Encode(ImageError),
}

/// Stores images from their files' bytes by the image options, counting the JPEGs stored
/// unchanged. Shared by the writer's threads.
pub struct ImageStore {
    /// The write mode, `--max-resolution` and quality.
    pub encoder: RgbImageEncoder,
    /// `--seed`: the `proportion` mode's draws.
    pub seed: u64,
    /// `--jpeg-passthrough`.
    pub passthrough: bool,
    passed: AtomicU64,
}

impl ImageStore {
    /// A store for the given options.
    pub fn new(encoder: RgbImageEncoder, seed: u64, passthrough: bool) -> Self {
        Self {
            encoder,
            seed,
            passthrough,
            passed: AtomicU64::new(0),
        }
    }

    /// The image in `bytes` as sample `sample` of the dataset stores it.
    pub fn store(&self, bytes: &[u8], sample: u64) -> Result<EncodedImage, StoreError> {
        if self.passthrough
            && let Some(unchanged) = self.unchanged(bytes, sample)
        {
            self.passed.fetch_add(1, Ordering::Relaxed);
            return Ok(unchanged);
        }
        let image = read_image_bytes(bytes).map_err(StoreError::Decode)?;
        self.encoder
            .encode_sample(&image, self.seed, sample)
            .map_err(StoreError::Encode)
    }

    /// How many images [`Self::store`] stored unchanged so far.
    pub fn passed_through(&self) -> u64 {
        self.passed.load(Ordering::Relaxed)
    }

    /// `bytes` as stored unchanged, if the rules of the module allow it.
    fn unchanged(&self, bytes: &[u8], sample: u64) -> Option<EncodedImage> {
        let (height, width) = fast_decodable_size(bytes)?;
        if self
            .encoder
            .max_resolution
            .is_some_and(|max| u32::from(height.max(width)) > max)
        {
            return None;
        }
        let raw_bytes = u64::from(height) * u64::from(width) * 3;
        if !stores_as_jpeg(self.encoder.write_mode, raw_bytes, self.seed, sample) {
            return None;
        }
        Some(EncodedImage {
            mode: ImageMode::Jpeg,
            width,
            height,
            data: bytes.to_vec(),
        })
    }
}

/// Whether `write_mode` stores an image of `raw_bytes` raw bytes (after any downscale) as
/// JPEG when it is sample `sample` of a dataset written with `seed`:
/// [`RgbImageEncoder::encode_sample`]'s decision, the same draw included.
pub fn stores_as_jpeg(write_mode: WriteMode, raw_bytes: u64, seed: u64, sample: u64) -> bool {
    match write_mode {
        WriteMode::Raw => false,
        WriteMode::Jpg => true,
        WriteMode::Smart { threshold } => threshold.is_some_and(|t| raw_bytes > t),
        WriteMode::Proportion {
            compress_probability,
        } => {
            let draw = sample_generator(seed, sample).next_u64();
            let u = (draw >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            u < compress_probability
        }
    }
}

/// `(height, width)` of a JPEG the loader's fast decoder takes, from its frame header;
/// `None` for anything else (see the module's rules).
pub fn fast_decodable_size(bytes: &[u8]) -> Option<(u16, u16)> {
    // A file that stops before its end-of-image marker is most often cut short, which a
    // decode would find: such files take the decoding path, which reports them.
    if !bytes.ends_with(&[0xFF, 0xD9]) {
        return None;
    }
    let frame = JpegFrame::find(bytes)?;
    if !frame.is_huffman_sequential() || frame.precision != 8 {
        return None;
    }
    if frame
        .min_scan_bytes()
        .is_none_or(|least| least > bytes.len() as u64)
    {
        return None;
    }
    if frame.height == 0 || frame.width == 0 {
        return None;
    }
    let components: Vec<_> = frame.components()?.collect();
    if !components.iter().all(|c| c.is_valid()) {
        return None;
    }
    match components.len() {
        1 => {}
        3 => {
            let hmax = components.iter().map(|c| c.h).max()?;
            let vmax = components.iter().map(|c| c.v).max()?;
            let fits = |max: u8, s: u8| max == s || max == 2 * s;
            if !components
                .iter()
                .all(|c| fits(hmax, c.h) && fits(vmax, c.v))
            {
                return None;
            }
        }
        _ => return None,
    }
    Some((frame.height, frame.width))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ffcv::image::{RgbImage, encode_jpeg};

    fn encoder(write_mode: WriteMode, max_resolution: Option<u32>) -> RgbImageEncoder {
        RgbImageEncoder {
            write_mode,
            max_resolution,
            jpeg_quality: 90,
        }
    }

    #[test]
    fn the_decision_is_the_encoders_for_every_mode() {
        let image = RgbImage::new(5, 4, vec![77; 60]).unwrap();
        let modes = [
            WriteMode::Raw,
            WriteMode::Jpg,
            WriteMode::Smart { threshold: None },
            WriteMode::Smart {
                threshold: Some(59),
            },
            WriteMode::Smart {
                threshold: Some(60),
            },
            WriteMode::Proportion {
                compress_probability: 0.3,
            },
        ];
        for mode in modes {
            for sample in 0..64 {
                let encoded = encoder(mode, None)
                    .encode_sample(&image, 11, sample)
                    .unwrap();
                assert_eq!(
                    stores_as_jpeg(mode, 60, 11, sample),
                    encoded.mode == ImageMode::Jpeg,
                    "{mode:?}, sample {sample}"
                );
            }
        }
    }

    #[test]
    fn a_fitting_baseline_jpeg_is_kept_and_others_are_encoded() {
        let image = RgbImage::new(40, 30, (0..3600).map(|i| (i % 251) as u8).collect()).unwrap();
        let jpeg = encode_jpeg(&image, 80).unwrap();
        let store = ImageStore::new(encoder(WriteMode::Jpg, Some(40)), 0, true);
        let kept = store.store(&jpeg, 0).unwrap();
        assert_eq!(
            (kept.mode, kept.width, kept.height),
            (ImageMode::Jpeg, 40, 30)
        );
        assert_eq!(kept.data, jpeg);
        assert_eq!(store.passed_through(), 1);
        // Above the bound: resized and encoded.
        let small = ImageStore::new(encoder(WriteMode::Jpg, Some(20)), 0, true);
        let resized = small.store(&jpeg, 0).unwrap();
        assert_eq!((resized.width, resized.height), (20, 15));
        assert_eq!(small.passed_through(), 0);
        // Raw mode never keeps a JPEG; without the flag nothing is kept.
        let raw = ImageStore::new(encoder(WriteMode::Raw, None), 0, true);
        assert_eq!(raw.store(&jpeg, 0).unwrap().mode, ImageMode::Raw);
        let off = ImageStore::new(encoder(WriteMode::Jpg, None), 0, false);
        assert_ne!(off.store(&jpeg, 0).unwrap().data, jpeg);
        // Not an image.
        assert!(matches!(
            off.store(b"not an image", 0),
            Err(StoreError::Decode(_))
        ));
    }

    #[test]
    fn headers_the_fast_decoder_does_not_take_are_refused() {
        let image = RgbImage::new(16, 16, vec![9; 768]).unwrap();
        let jpeg = encode_jpeg(&image, 80).unwrap();
        assert_eq!(fast_decodable_size(&jpeg), Some((16, 16)));
        let sof = jpeg.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        let mut progressive = jpeg.clone();
        progressive[sof + 1] = 0xC2;
        assert_eq!(fast_decodable_size(&progressive), None);
        let mut no_height = jpeg.clone();
        no_height[sof + 5..sof + 7].copy_from_slice(&[0, 0]);
        assert_eq!(fast_decodable_size(&no_height), None);
        assert_eq!(fast_decodable_size(&jpeg[..sof]), None);
        assert_eq!(fast_decodable_size(&jpeg[..jpeg.len() - 1]), None);
        let mut trailing = jpeg.clone();
        trailing.push(0);
        assert_eq!(fast_decodable_size(&trailing), None);
        assert_eq!(fast_decodable_size(b"\x89PNG\r\n\x1a\n"), None);
    }
}
