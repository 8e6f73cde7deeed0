//! Photograph-like JPEG samples for benchmarks (`ffcv write synthetic --kind photos`).
//!
//! Decode speed depends on image content: noise costs the entropy decoder far more than a
//! photograph, flat colour far less. A training set is photographs, so these samples are
//! cut from four public-domain photographs embedded in the binary (scikit-image's
//! astronaut, chelsea, coffee and rocket; licences in `crates/rgb-image/tests/data/photos`).
//! Each sample is a 2×2 mosaic of crops, each tile from a random photo at a random place,
//! mirrored at random, at the photos' native resolution (no resampling, so the detail per
//! pixel is a photograph's), then encoded as a 4:2:0 JPEG. Sample `i` depends only on
//! `(seed, i)`.

use std::sync::OnceLock;

use ffcv::image::{RgbImage, encode_jpeg, read_image_bytes};

/// The embedded photographs, as stored (JPEG bytes).
const PHOTO_FILES: [(&str, &[u8]); 4] = [
    (
        "astronaut.jpg",
        include_bytes!("../../rgb-image/tests/data/photos/astronaut.jpg"),
    ),
    (
        "chelsea.jpg",
        include_bytes!("../../rgb-image/tests/data/photos/chelsea.jpg"),
    ),
    (
        "coffee.jpg",
        include_bytes!("../../rgb-image/tests/data/photos/coffee.jpg"),
    ),
    (
        "rocket.jpg",
        include_bytes!("../../rgb-image/tests/data/photos/rocket.jpg"),
    ),
];

/// Default side range of photo samples: ImageNet-like, a typical `max_resolution`.
pub const DEFAULT_SIDES: (u32, u32) = (350, 500);

/// The largest tile a sample needs (three quarters of the largest side) must fit in some
/// photograph; rocket.jpg is 640×427, so sides up to 560 are served.
pub const MAX_SIDE: u32 = 560;

fn photos() -> Result<&'static [RgbImage], String> {
    static DECODED: OnceLock<Result<Vec<RgbImage>, String>> = OnceLock::new();
    DECODED
        .get_or_init(|| {
            PHOTO_FILES
                .iter()
                .map(|(name, bytes)| {
                    read_image_bytes(bytes).map_err(|e| format!("embedded photo {name}: {e}"))
                })
                .collect()
        })
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

/// SplitMix64 over `(seed, index)`: independent per sample, whatever the writer's threads.
struct Draw(u64);

impl Draw {
    fn new(seed: u64, index: u64) -> Draw {
        Draw(seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ 0x5048_4f54_4f53)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi` (`lo <= hi`); the modulo bias is irrelevant here.
    fn between(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % u64::from(hi - lo + 1)) as u32
    }
}

/// Sample `index`'s pixels: `width × height` with sides in `min_side..=max_side`.
pub fn photo_image(
    seed: u64,
    index: u64,
    min_side: u32,
    max_side: u32,
) -> Result<RgbImage, String> {
    if !(1..=max_side).contains(&min_side) || max_side > MAX_SIDE {
        return Err(format!(
            "photo sides {min_side}..={max_side} are not MIN,MAX with 1 <= MIN <= MAX <= {MAX_SIDE}"
        ));
    }
    let sources = photos()?;
    let mut draw = Draw::new(seed, index);
    let width = draw.between(min_side, max_side);
    let height = draw.between(min_side, max_side);
    // The mosaic's split point, away from the edges so that every tile shows content.
    let split_x = draw.between(width / 4, (3 * width / 4).max(width / 4));
    let split_y = draw.between(height / 4, (3 * height / 4).max(height / 4));
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    let columns = [(0, split_x), (split_x, width)];
    let rows = [(0, split_y), (split_y, height)];
    for &(y0, y1) in &rows {
        for &(x0, x1) in &columns {
            let (tw, th) = (x1 - x0, y1 - y0);
            if tw == 0 || th == 0 {
                continue;
            }
            let fitting: Vec<&RgbImage> = sources
                .iter()
                .filter(|p| p.width() >= tw && p.height() >= th)
                .collect();
            let pick = draw.next() as usize % fitting.len().max(1);
            let photo = fitting
                .get(pick)
                .ok_or_else(|| format!("no embedded photo holds a {tw}x{th} tile"))?;
            let ox = draw.between(0, photo.width() - tw);
            let oy = draw.between(0, photo.height() - th);
            let mirror = draw.next() & 1 == 1;
            let src = photo.pixels();
            let stride = photo.width() as usize * 3;
            for ty in 0..th as usize {
                let src_row = &src[(oy as usize + ty) * stride..][..stride];
                let dst_row = &mut pixels[(y0 as usize + ty) * width as usize * 3..]
                    [x0 as usize * 3..x1 as usize * 3];
                for tx in 0..tw as usize {
                    let sx = if mirror {
                        ox as usize + tw as usize - 1 - tx
                    } else {
                        ox as usize + tx
                    };
                    dst_row[tx * 3..tx * 3 + 3].copy_from_slice(&src_row[sx * 3..sx * 3 + 3]);
                }
            }
        }
    }
    RgbImage::new(width, height, pixels).map_err(|e| e.to_string())
}

/// Sample `index` as a JPEG at `quality`: `(jpeg, width, height)`.
pub fn photo_jpeg(
    seed: u64,
    index: u64,
    sides: (u32, u32),
    quality: u8,
) -> Result<(Vec<u8>, u32, u32), String> {
    let image = photo_image(seed, index, sides.0, sides.1)?;
    let bytes = encode_jpeg(&image, quality).map_err(|e| e.to_string())?;
    Ok((bytes, image.width(), image.height()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_photographs_decode() {
        let p = photos().unwrap();
        assert_eq!(p.len(), 4);
        assert!(p.iter().all(|i| i.width() >= 300 && i.height() >= 300));
        assert!(p.iter().any(|i| i.width() * 3 / 4 >= MAX_SIDE * 3 / 4));
    }

    #[test]
    fn a_sample_depends_only_on_seed_and_index_and_is_a_photo_crop() {
        let a = photo_image(7, 3, 350, 500).unwrap();
        let b = photo_image(7, 3, 350, 500).unwrap();
        assert_eq!(a.pixels(), b.pixels());
        assert!((350..=500).contains(&a.width()) && (350..=500).contains(&a.height()));
        assert_ne!(photo_image(7, 4, 350, 500).unwrap().pixels(), a.pixels());
        // Photographs, not noise: neighbouring pixels are close on average.
        let px = a.pixels();
        let mean_step: f64 = px
            .chunks_exact(3)
            .zip(px.chunks_exact(3).skip(1))
            .map(|(p, q)| (f64::from(p[1]) - f64::from(q[1])).abs())
            .sum::<f64>()
            / (px.len() / 3) as f64;
        assert!(mean_step < 20.0, "mean horizontal step {mean_step}");
        // ... and not flat colour.
        let distinct = px.iter().collect::<std::collections::HashSet<_>>().len();
        assert!(distinct > 200, "{distinct} distinct byte values");
    }

    #[test]
    fn every_allowed_size_is_served_and_bad_sides_are_refused() {
        for (i, sides) in [(1, 1), (1, 8), (MAX_SIDE, MAX_SIDE), (350, 500)]
            .into_iter()
            .enumerate()
        {
            let img = photo_image(1, i as u64, sides.0, sides.1).unwrap();
            assert!((sides.0..=sides.1).contains(&img.width()));
        }
        assert!(photo_image(1, 0, 0, 10).is_err());
        assert!(photo_image(1, 0, 20, 10).is_err());
        assert!(photo_image(1, 0, 10, MAX_SIDE + 1).is_err());
    }

    #[test]
    fn jpeg_samples_decode_to_their_stated_size() {
        let (bytes, w, h) = photo_jpeg(2, 9, DEFAULT_SIDES, 90).unwrap();
        let decoded = read_image_bytes(&bytes).unwrap();
        assert_eq!((decoded.width(), decoded.height()), (w, h));
        // A photograph at quality 90 is far smaller than its pixels, and far from empty.
        let raw = (w * h * 3) as usize;
        assert!(
            bytes.len() < raw / 3 && bytes.len() > raw / 60,
            "{} of {raw}",
            bytes.len()
        );
    }
}
