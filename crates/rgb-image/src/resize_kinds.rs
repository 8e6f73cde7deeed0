//! Resizing crops of images of any channel count (1, 3, 4) and 8- or 16-bit samples, for
//! the ImageField decoders. 8-bit RGB goes through [`super::AreaResizer`] (OpenCV-exact);
//! the other kinds through the separable resize here: OpenCV `INTER_AREA`'s rules (each
//! output pixel the area average of the source pixels its footprint overlaps when both
//! axes shrink; bilinear with `INTER_AREA`'s upscale coefficients when an axis grows),
//! computed in `f32` and rounded half to even. It is not bit-identical to OpenCV (whose
//! integer paths differ in their last bit), which no FFCV output depends on: FFCV has no
//! such images.

use super::{CropBox, ImageError, Result};

/// The taps of one axis: for output index `d`, `weights[first..first + len]` of the source
/// indices `start..start + len`.
#[derive(Clone, Debug, Default)]
struct Axis {
    taps: Vec<(u32, u32, u32)>,
    weights: Vec<f32>,
}

impl Axis {
    fn build(&mut self, src: u32, dst: u32, linear: bool) {
        self.taps.clear();
        self.weights.clear();
        let scale = f64::from(src) / f64::from(dst);
        for d in 0..dst {
            let first = self.weights.len() as u32;
            if linear {
                // OpenCV's INTER_AREA coefficients for an enlarged axis.
                let mut s = (f64::from(d) * scale).floor() as i64;
                let f = (f64::from(d) + 1.0) - (s as f64 + 1.0) / scale;
                let mut f = if f <= 0.0 { 0.0 } else { f - f.floor() };
                if s < 0 {
                    (s, f) = (0, 0.0);
                }
                if s >= i64::from(src) - 1 {
                    (s, f) = (i64::from(src) - 1, 0.0);
                }
                self.weights.push((1.0 - f) as f32);
                let mut len = 1;
                if f > 0.0 {
                    self.weights.push(f as f32);
                    len = 2;
                }
                self.taps.push((s as u32, len, first));
            } else {
                // The source pixels overlapping [d * scale, (d + 1) * scale), each weighted
                // by its overlap over the footprint (the last one may be cut by the edge).
                let lo = f64::from(d) * scale;
                let hi = (lo + scale).min(f64::from(src));
                let cell = hi - lo;
                let start = lo.floor() as u32;
                let end = (hi.ceil() as u32).min(src);
                for s in start..end {
                    let overlap = (f64::from(s + 1).min(hi) - f64::from(s).max(lo)).max(0.0);
                    self.weights.push((overlap / cell) as f32);
                }
                self.taps.push((start, end - start, first));
            }
        }
    }
}

/// Reusable tables and row buffers of [`KindResizer::resize_crop_into`]; one per worker.
#[derive(Clone, Debug, Default)]
pub struct KindResizer {
    x: Axis,
    y: Axis,
    rows: Vec<f32>,
}

fn sample(src: &[u8], at: usize, wide: bool) -> f32 {
    if wide {
        f32::from(u16::from_le_bytes([src[2 * at], src[2 * at + 1]]))
    } else {
        f32::from(src[at])
    }
}

impl KindResizer {
    /// An empty resizer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Resizes the `crop` of the packed `height x width x channels` image `image` (8-bit
    /// samples, or 16-bit little-endian ones when `bits` is 16) into the packed
    /// `dh x dw x channels` image `dst`.
    #[allow(clippy::too_many_arguments)] // the crop and both sizes, as AreaResizer's
    pub fn resize_crop_into(
        &mut self,
        image: &[u8],
        (height, width, channels, bits): (u32, u32, usize, u8),
        crop: CropBox,
        dst: &mut [u8],
        dh: u32,
        dw: u32,
    ) -> Result<()> {
        let wide = bits == 16;
        let sb = if wide { 2 } else { 1 };
        let src_len = height as usize * width as usize * channels * sb;
        let dst_len = dh as usize * dw as usize * channels * sb;
        if !crop.fits(height, width) {
            return Err(ImageError::BadCrop {
                i: crop.i,
                j: crop.j,
                h: crop.h,
                w: crop.w,
                height,
                width,
            });
        }
        if image.len() < src_len || dst.len() < dst_len || dh == 0 || dw == 0 {
            return Err(ImageError::BufferTooSmall {
                height: dh,
                width: dw,
                needed: dst_len,
                got: dst.len(),
            });
        }
        let row_samples = width as usize * channels;
        let out_row = dw as usize * channels;
        if (crop.h, crop.w) == (dh, dw) {
            for y in 0..dh as usize {
                let at = ((crop.i as usize + y) * row_samples + crop.j as usize * channels) * sb;
                dst[y * out_row * sb..(y + 1) * out_row * sb]
                    .copy_from_slice(&image[at..at + out_row * sb]);
            }
            return Ok(());
        }
        let linear = crop.h < dh || crop.w < dw;
        self.x.build(crop.w, dw, linear);
        self.y.build(crop.h, dh, linear);
        // Horizontal pass over every crop row, then the vertical one per output row.
        self.rows.clear();
        self.rows.resize(crop.h as usize * out_row, 0.0);
        for sy in 0..crop.h as usize {
            let base = (crop.i as usize + sy) * row_samples + crop.j as usize * channels;
            let row = &mut self.rows[sy * out_row..(sy + 1) * out_row];
            for (dx, &(start, len, first)) in self.x.taps.iter().enumerate() {
                let ws = &self.x.weights[first as usize..(first + len) as usize];
                for c in 0..channels {
                    let mut acc = 0.0f32;
                    for (k, &wgt) in ws.iter().enumerate() {
                        acc +=
                            wgt * sample(image, base + (start as usize + k) * channels + c, wide);
                    }
                    row[dx * channels + c] = acc;
                }
            }
        }
        let max = if wide { 65535.0 } else { 255.0 };
        for (dy, &(start, len, first)) in self.y.taps.iter().enumerate() {
            let ws = &self.y.weights[first as usize..(first + len) as usize];
            for i in 0..out_row {
                let mut acc = 0.0f32;
                for (k, &wgt) in ws.iter().enumerate() {
                    acc += wgt * self.rows[(start as usize + k) * out_row + i];
                }
                let v = acc.round_ties_even().clamp(0.0, max);
                let at = dy * out_row + i;
                if wide {
                    dst[2 * at..2 * at + 2].copy_from_slice(&(v as u16).to_le_bytes());
                } else {
                    dst[at] = v as u8;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn area_weights_of_a_shrunk_axis_sum_to_one_and_cover_the_footprint() {
        let mut a = Axis::default();
        a.build(10, 4, false);
        assert_eq!(a.taps.len(), 4);
        for &(start, len, first) in &a.taps {
            let sum: f32 = a.weights[first as usize..(first + len) as usize]
                .iter()
                .sum();
            assert!((sum - 1.0).abs() < 1e-6, "{sum}");
            assert!(start + len <= 10);
        }
        // 2.5 source pixels per output: the first takes pixels 0, 1 and half of 2.
        assert_eq!(a.taps[0], (0, 3, 0));
        assert_eq!(&a.weights[..3], &[0.4, 0.4, 0.2]);
    }

    #[test]
    fn a_two_by_two_block_average_and_a_constant_upscale_are_exact() {
        let mut r = KindResizer::new();
        // 4x4 gray u16 to 2x2: each output the mean of a 2x2 block.
        let px: Vec<u16> = (0..16).map(|v| v * 1000).collect();
        let src: Vec<u8> = px.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut dst = vec![0u8; 8];
        let crop = CropBox {
            i: 0,
            j: 0,
            h: 4,
            w: 4,
        };
        r.resize_crop_into(&src, (4, 4, 1, 16), crop, &mut dst, 2, 2)
            .unwrap();
        let got: Vec<u16> = dst
            .chunks(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(got, vec![2500, 4500, 10500, 12500]);
        // A flat 4-channel u8 image stays flat when enlarged.
        let src = [7u8, 8, 9, 10].repeat(6);
        let mut dst = vec![0u8; 5 * 5 * 4];
        let crop = CropBox {
            i: 0,
            j: 0,
            h: 2,
            w: 3,
        };
        r.resize_crop_into(&src, (2, 3, 4, 8), crop, &mut dst, 5, 5)
            .unwrap();
        assert_eq!(dst, [7u8, 8, 9, 10].repeat(25));
    }
}
