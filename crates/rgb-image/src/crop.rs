//! FFCV's crop rules: `get_center_crop` and `get_random_crop` (torchvision's
//! RandomResizedCrop box with 10 tries and a center fallback).

use rand_core::RngCore;

/// A crop rectangle inside an image: rows `i..i + h`, columns `j..j + w`
/// (FFCV's `(i, j, h, w)` tuple).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CropBox {
    /// Top row.
    pub i: u32,
    /// Left column.
    pub j: u32,
    /// Height in rows.
    pub h: u32,
    /// Width in columns.
    pub w: u32,
}

impl CropBox {
    /// Whether the box is non-empty and lies inside a `height x width` image.
    pub fn fits(&self, height: u32, width: u32) -> bool {
        self.h > 0
            && self.w > 0
            && u64::from(self.i) + u64::from(self.h) <= u64::from(height)
            && u64::from(self.j) + u64::from(self.w) <= u64::from(width)
    }
}

/// `CenterCropRGBImageDecoder`'s box: a square of side
/// `c = int(ratio * min(h, w))` centred with floor division, as FFCV's
/// `get_center_crop`. `ratio` is FFCV's `224/256` by default; the side is
/// clamped to the image so a `ratio > 1` cannot leave it.
pub fn center_crop_box(height: u32, width: u32, ratio: f64) -> CropBox {
    let s = height.min(width);
    // Python's int() truncates toward zero; `as` does the same and saturates
    // NaN/negative products to 0.
    let c = ((ratio * f64::from(s)) as u32).min(s);
    CropBox {
        i: (height - c) / 2,
        j: (width - c) / 2,
        h: c,
        w: c,
    }
}

/// Parameters of `RandomResizedCropRGBImageDecoder`: the area fraction range
/// `scale` and the aspect ratio (`w / h`) range `ratio`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomResizedCrop {
    /// Range of the crop's area as a fraction of the image area.
    pub scale: (f64, f64),
    /// Range of the crop's aspect ratio `w / h`, sampled log-uniformly.
    pub ratio: (f64, f64),
}

impl Default for RandomResizedCrop {
    /// FFCV's defaults: `scale=(0.08, 1.0)`, `ratio=(3/4, 4/3)`.
    fn default() -> Self {
        Self {
            scale: (0.08, 1.0),
            ratio: (0.75, 4.0 / 3.0),
        }
    }
}

/// A uniform `f64` in `[0, 1)` from the top 53 bits of one `u64`.
fn unit_f64(rng: &mut impl RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// numpy's `uniform(low, high)`: `low + (high - low) * random()`.
fn uniform(rng: &mut impl RngCore, low: f64, high: f64) -> f64 {
    low + (high - low) * unit_f64(rng)
}

/// `int(round(x))` for a numpy float: round half to even, then truncate into
/// the integer type (non-finite or negative values become 0 and fail the
/// bounds checks that follow).
fn round_half_even(x: f64) -> u64 {
    x.round_ties_even() as u64
}

/// `RandomResizedCropRGBImageDecoder`'s box, FFCV's `get_random_crop`: up to
/// 10 tries of an area drawn uniformly from `scale * h * w` and an aspect
/// ratio drawn log-uniformly from `ratio`; the first box that fits gets a
/// uniform position. If none fits, the fallback takes the whole image
/// clipped to the nearest bound of `ratio`, centred.
///
/// The rules and the rounding are FFCV's; the random stream is `rng` (numba's
/// generator cannot be reproduced), so pass a per-sample generator seeded
/// from (seed, epoch, sample) for results independent of thread count.
pub fn random_resized_crop_box(
    height: u32,
    width: u32,
    params: &RandomResizedCrop,
    rng: &mut impl RngCore,
) -> CropBox {
    let area = f64::from(height) * f64::from(width);
    let (log_lo, log_hi) = (params.ratio.0.ln(), params.ratio.1.ln());
    for _ in 0..10 {
        let target_area = area * uniform(rng, params.scale.0, params.scale.1);
        let aspect = uniform(rng, log_lo, log_hi).exp();
        let w = round_half_even((target_area * aspect).sqrt());
        let h = round_half_even((target_area / aspect).sqrt());
        if 0 < w && w <= u64::from(width) && 0 < h && h <= u64::from(height) {
            // int(uniform(0, n)) truncates; the draw is < n so the offset is at most n - 1.
            let i = uniform(rng, 0.0, (u64::from(height) - h + 1) as f64) as u64;
            let j = uniform(rng, 0.0, (u64::from(width) - w + 1) as f64) as u64;
            // Guard against a draw rounding up to exactly n.
            let i = i.min(u64::from(height) - h);
            let j = j.min(u64::from(width) - w);
            return CropBox {
                i: i as u32,
                j: j as u32,
                h: h as u32,
                w: w as u32,
            };
        }
    }
    random_crop_fallback(height, width, params)
}

/// The fallback of `get_random_crop` once the 10 tries failed.
fn random_crop_fallback(height: u32, width: u32, params: &RandomResizedCrop) -> CropBox {
    let min_ratio = params.ratio.0.min(params.ratio.1);
    let max_ratio = params.ratio.0.max(params.ratio.1);
    let in_ratio = f64::from(width) / f64::from(height);
    let (h, w) = if in_ratio < min_ratio {
        let h = round_half_even(f64::from(width) / min_ratio).min(u64::from(height));
        (h as u32, width)
    } else if in_ratio > max_ratio {
        let w = round_half_even(f64::from(height) * max_ratio).min(u64::from(width));
        (height, w as u32)
    } else {
        (height, width)
    };
    CropBox {
        i: (height - h) / 2,
        j: (width - w) / 2,
        h,
        w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RNG that always returns the same word, to force every try to fail.
    struct Constant(u64);
    impl RngCore for Constant {
        fn next_u32(&mut self) -> u32 {
            self.0 as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            dst.fill(self.0 as u8);
        }
    }

    #[test]
    fn round_half_even_matches_numpy() {
        assert_eq!(round_half_even(2.5), 2);
        assert_eq!(round_half_even(3.5), 4);
        assert_eq!(round_half_even(-0.4), 0);
        assert_eq!(round_half_even(f64::NAN), 0);
    }

    #[test]
    fn fallback_clips_to_the_nearest_ratio_bound() {
        let p = RandomResizedCrop {
            scale: (2.0, 2.0),
            ratio: (0.75, 4.0 / 3.0),
        };
        // An area twice the image never fits: every try fails.
        let tall = random_resized_crop_box(400, 100, &p, &mut Constant(0));
        // w / min_ratio = 133.33 -> 133 rows, centred: (400 - 133) // 2 = 133.
        assert_eq!(
            tall,
            CropBox {
                i: 133,
                j: 0,
                h: 133,
                w: 100
            }
        );
        let wide = random_resized_crop_box(90, 300, &p, &mut Constant(u64::MAX));
        // h * max_ratio = 120 columns, centred: (300 - 120) // 2 = 90.
        assert_eq!(
            wide,
            CropBox {
                i: 0,
                j: 90,
                h: 90,
                w: 120
            }
        );
        let square = random_resized_crop_box(50, 60, &p, &mut Constant(7));
        assert_eq!(
            square,
            CropBox {
                i: 0,
                j: 0,
                h: 50,
                w: 60
            }
        );
    }
}
