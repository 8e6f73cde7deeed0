//! Deterministic synthetic images for `ffcv write synthetic --kind jpeg`:
//! gradients, a solid rectangle and mild noise, like the fixtures' sources.

use super::{Result, RgbImage, encode_jpeg, rgb_len};
use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// Size range of synthetic images (inclusive, per side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyntheticImageSpec {
    /// Smallest side length.
    pub min_side: u32,
    /// Largest side length.
    pub max_side: u32,
}

impl Default for SyntheticImageSpec {
    /// 160..=256 px, the benchmark's JPEG dataset.
    fn default() -> Self {
        Self {
            min_side: 160,
            max_side: 256,
        }
    }
}

/// Mixes the dataset seed and the sample index into one generator seed, so
/// each sample is independent of how many were generated before it.
fn sample_rng(seed: u64, index: u64) -> Pcg64Mcg {
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Pcg64Mcg::seed_from_u64(z ^ (z >> 31))
}

fn below(rng: &mut impl RngCore, n: u32) -> u32 {
    // n is small; the modulo bias is irrelevant for test images.
    (rng.next_u64() % u64::from(n.max(1))) as u32
}

/// Sample `index` of a synthetic dataset: sides drawn from `spec`, two
/// colour gradients, a solid rectangle and ±8 of uniform noise, all
/// determined by `(seed, index)`.
pub fn synthetic_image(seed: u64, index: u64, spec: SyntheticImageSpec) -> Result<RgbImage> {
    let (lo, hi) = (
        spec.min_side.max(1),
        spec.max_side.max(spec.min_side.max(1)),
    );
    let mut rng = sample_rng(seed, index);
    let w = lo + below(&mut rng, hi - lo + 1);
    let h = lo + below(&mut rng, hi - lo + 1);
    let start: [u32; 3] = [
        below(&mut rng, 256),
        below(&mut rng, 256),
        below(&mut rng, 256),
    ];
    let dx: [i32; 3] = [0, 1, 2].map(|_| below(&mut rng, 200) as i32 - 100);
    let dy: [i32; 3] = [0, 1, 2].map(|_| below(&mut rng, 200) as i32 - 100);
    let (rw, rh) = (1 + below(&mut rng, w / 2), 1 + below(&mut rng, h / 2));
    let (rx, ry) = (below(&mut rng, w - rw + 1), below(&mut rng, h - rh + 1));
    let rect: [u8; 3] = [0, 1, 2].map(|_| below(&mut rng, 256) as u8);
    let mut pixels = Vec::with_capacity(rgb_len(h, w));
    for y in 0..h {
        for x in 0..w {
            let in_rect = (rx..rx + rw).contains(&x) && (ry..ry + rh).contains(&y);
            let noise = rng.next_u32();
            for c in 0..3 {
                let v = if in_rect {
                    i32::from(rect[c])
                } else {
                    start[c] as i32 + dx[c] * x as i32 / w as i32 + dy[c] * y as i32 / h as i32
                };
                let n = ((noise >> (8 * c)) & 15) as i32 - 8;
                pixels.push((v + n).clamp(0, 255) as u8);
            }
        }
    }
    RgbImage::new(w, h, pixels)
}

/// [`synthetic_image`] encoded as a JPEG at `quality`: `(jpeg, width, height)`.
pub fn synthetic_jpeg(
    seed: u64,
    index: u64,
    spec: SyntheticImageSpec,
    quality: u8,
) -> Result<(Vec<u8>, u32, u32)> {
    let image = synthetic_image(seed, index, spec)?;
    Ok((encode_jpeg(&image, quality)?, image.width(), image.height()))
}
