//! OpenCV's `cv::resize(src, dst, dsize, 0, 0, INTER_AREA)` for 8-bit RGB,
//! reproduced bit for bit (checked against OpenCV 4.10 and against the
//! fixture outputs FFCV 1.0.2 produced with OpenCV 4.6).
//!
//! OpenCV picks one of four paths from the scale factors
//! (`scale = src / dst` per axis, computed in `f64` as OpenCV does):
//!
//! - equal sizes: a copy;
//! - both scales integers (within `f64::EPSILON`): block averages, rounded
//!   `(sum + 2) >> 2` for 2x2 and `round_half_even(sum as f32 * (1/area))`
//!   otherwise;
//! - both scales `>= 1` otherwise: exact area weights (`f32` per source
//!   pixel), accumulated in `f32` row by row, rounded half to even;
//! - any axis upscaled: bilinear with area-style coefficients, in the 11-bit
//!   fixed point of OpenCV's `INTER_LINEAR` (with the 16-bit rounding of
//!   OpenCV's vector code in the vertical pass).

use super::resize_rows::{CN, COEF_BITS, hresize, hsum_area_row, sat_u8, scale_add_sat, vresize};
// Also the paths `simd_tests` reaches the row passes by.
#[cfg(all(test, target_arch = "x86_64"))]
pub(super) use super::resize_rows::hsum_area;
pub(super) use super::resize_rows::{pair_weights, sat_u8_row, scale_add};
use super::simd::Isa;
use super::simd_resize::{AreaWindows, HLinearGroup, hlinear_groups};
use super::{CropBox, ImageError, Result, rgb_len};

/// OpenCV's `INTER_RESIZE_COEF_SCALE`, for the bilinear path's coefficients.
const COEF_SCALE: f32 = (1 << COEF_BITS) as f32;

/// The terms of OpenCV's `DecimateAlpha` table for one output index: it
/// takes `weights[first..first + len]` of the `len` consecutive source
/// indices starting at `start` (the table lists them in that order, which
/// fixes the `f32` summation order).
#[derive(Clone, Copy, Debug, PartialEq)]
struct AreaGroup {
    start: u32,
    len: u32,
    first: u32,
}

#[derive(Clone, Debug, PartialEq)]
enum Plan {
    Copy,
    /// Integer block averaging.
    Fast {
        sx: usize,
        sy: usize,
    },
    /// General area weights (`xgroups`/`ygroups`).
    Area,
    /// Bilinear with area coefficients (some axis upscaled).
    Linear {
        xmax: usize,
    },
}

/// Resizes RGB images with OpenCV `INTER_AREA` semantics, keeping its
/// coefficient tables and row buffers between calls: after the first call
/// for a given `(src, dst)` size nothing is allocated, and a size change
/// refills the same buffers. One per worker thread.
#[derive(Clone, Debug)]
pub struct AreaResizer {
    key: Option<(u32, u32, u32, u32)>,
    plan: Plan,
    xgroups: Vec<AreaGroup>,
    xweights: Vec<f32>,
    ygroups: Vec<AreaGroup>,
    yweights: Vec<f32>,
    xofs: Vec<u32>,
    xalpha: Vec<[i16; 2]>,
    yofs: Vec<u32>,
    ybeta: Vec<[i16; 2]>,
    /// `xofs`/`xalpha` as the AVX2 horizontal pass reads them (its leading
    /// groups of 8 outputs).
    xgroups8: Vec<HLinearGroup>,
    /// The x table as `xtap` taps per output pixel: `(byte offset of the
    /// source pixel, weight)`, groups shorter than `xtap` padded with
    /// weight-0 taps on their first pixel. Adding `p * 0.0 = +0.0` to a
    /// non-negative sum leaves it unchanged, so the padding keeps OpenCV's
    /// sums bit for bit while every pixel runs the same loop.
    xtaps: Vec<(u32, f32)>,
    xtap: usize,
    /// Leading pairs of output pixels whose taps all have 4 bytes to read
    /// in a source row (the AVX2 horizontal pass reads RGB plus one).
    xpairs: usize,
    /// `xtaps`' weights for the AVX2 pass ([`pair_weights`]).
    xweights8: Vec<[f32; 8]>,
    /// `xtaps` as the windowed AVX2 pass reads them (its leading pairs).
    xwindows: AreaWindows,
    /// The horizontal sums of one source row, plus 2 floats of slack for
    /// the AVX2 pass's 8-lane stores.
    fbuf: Vec<f32>,
    fsum: Vec<f32>,
    irow0: Vec<i32>,
    irow1: Vec<i32>,
    /// The instruction set the kernels run with.
    isa: Isa,
}

impl Default for AreaResizer {
    fn default() -> Self {
        Self::new()
    }
}

fn cv_floor(x: f64) -> i64 {
    x.floor() as i64
}

/// `saturate_cast<short>(float)`.
fn sat_i16(x: f32) -> i16 {
    x.round_ties_even().clamp(i16::MIN as f32, i16::MAX as f32) as i16
}

/// OpenCV's `computeResizeAreaTab` for one axis, grouped per output index
/// (indices in pixels; the same weights in the same order).
fn area_tab(
    ssize: usize,
    dsize: usize,
    scale: f64,
    groups: &mut Vec<AreaGroup>,
    weights: &mut Vec<f32>,
) {
    groups.clear();
    weights.clear();
    for dx in 0..dsize {
        let fsx1 = dx as f64 * scale;
        let fsx2 = fsx1 + scale;
        let cell = scale.min(ssize as f64 - fsx1);
        let mut sx1 = fsx1.ceil() as i64;
        let mut sx2 = cv_floor(fsx2);
        sx2 = sx2.min(ssize as i64 - 1);
        sx1 = sx1.min(sx2);
        let first = weights.len() as u32;
        let mut start = sx1;
        if sx1 as f64 - fsx1 > 1e-3 {
            start = sx1 - 1;
            weights.push(((sx1 as f64 - fsx1) / cell) as f32);
        }
        for _ in sx1..sx2 {
            weights.push((1.0 / cell) as f32);
        }
        if fsx2 - sx2 as f64 > 1e-3 {
            weights.push(((fsx2 - sx2 as f64).min(1.0).min(cell) / cell) as f32);
        }
        let len = weights.len() as u32 - first;
        groups.push(AreaGroup {
            start: start as u32,
            len,
            first,
        });
    }
}

/// OpenCV's area-mode bilinear coefficient for output index `d`:
/// `(source index, fraction)`.
fn linear_area_coef(d: usize, scale: f64, inv_scale: f64) -> (i64, f32) {
    let s = cv_floor(d as f64 * scale);
    let f = ((d + 1) as f64 - (s + 1) as f64 * inv_scale) as f32;
    let f = if f <= 0.0 { 0.0 } else { f - f.floor() };
    (s, f)
}

impl AreaResizer {
    /// An empty resizer; tables are built on the first call.
    pub fn new() -> Self {
        Self {
            key: None,
            plan: Plan::Copy,
            xgroups: Vec::new(),
            xweights: Vec::new(),
            ygroups: Vec::new(),
            yweights: Vec::new(),
            xofs: Vec::new(),
            xalpha: Vec::new(),
            yofs: Vec::new(),
            ybeta: Vec::new(),
            xgroups8: Vec::new(),
            xtaps: Vec::new(),
            xtap: 0,
            xpairs: 0,
            xweights8: Vec::new(),
            xwindows: AreaWindows::default(),
            fbuf: Vec::new(),
            fsum: Vec::new(),
            irow0: Vec::new(),
            irow1: Vec::new(),
            isa: Isa::detect(),
        }
    }

    /// A resizer whose kernels run with `isa` (tests compare the paths);
    /// `Isa::Avx2` only where [`Isa::detect`] finds AVX2.
    #[cfg(all(test, target_arch = "x86_64"))]
    pub(crate) fn with_isa(isa: Isa) -> Self {
        Self { isa, ..Self::new() }
    }

    /// The leading output pixel pairs the AVX2 horizontal pass handles
    /// for the current tables.
    #[cfg(all(test, target_arch = "x86_64"))]
    pub(crate) fn simd_pairs(&self) -> usize {
        self.xpairs
    }

    /// The leading groups of 8 outputs the AVX2 horizontal bilinear pass
    /// handles for the current tables.
    #[cfg(all(test, target_arch = "x86_64"))]
    pub(crate) fn simd_linear_groups(&self) -> usize {
        self.xgroups8.len()
    }

    /// The leading pairs of output pixels the windowed AVX2 area pass
    /// handles for the current tables.
    #[cfg(all(test, target_arch = "x86_64"))]
    pub(crate) fn simd_area_windows(&self) -> usize {
        self.xwindows.pairs()
    }

    /// Builds (or keeps) the tables for `sh x sw -> dh x dw`; sizes are
    /// non-zero (checked by the callers).
    fn prepare(&mut self, sh: u32, sw: u32, dh: u32, dw: u32) {
        if self.key == Some((sh, sw, dh, dw)) {
            return;
        }
        let (shu, swu, dhu, dwu) = (sh as usize, sw as usize, dh as usize, dw as usize);
        let inv_x = f64::from(dw) / f64::from(sw);
        let inv_y = f64::from(dh) / f64::from(sh);
        let scale_x = 1.0 / inv_x;
        let scale_y = 1.0 / inv_y;
        // saturate_cast<int>(double) rounds half to even.
        let iscale_x = scale_x.round_ties_even();
        let iscale_y = scale_y.round_ties_even();
        let is_fast =
            (scale_x - iscale_x).abs() < f64::EPSILON && (scale_y - iscale_y).abs() < f64::EPSILON;

        self.plan = if (sh, sw) == (dh, dw) {
            Plan::Copy
        } else if scale_x >= 1.0 && scale_y >= 1.0 && is_fast {
            Plan::Fast {
                sx: iscale_x as usize,
                sy: iscale_y as usize,
            }
        } else if scale_x >= 1.0 && scale_y >= 1.0 {
            area_tab(swu, dwu, scale_x, &mut self.xgroups, &mut self.xweights);
            area_tab(shu, dhu, scale_y, &mut self.ygroups, &mut self.yweights);
            self.xtap = self
                .xgroups
                .iter()
                .map(|g| g.len as usize)
                .max()
                .unwrap_or(1);
            self.xtaps.clear();
            for g in &self.xgroups {
                let w = &self.xweights[g.first as usize..(g.first + g.len) as usize];
                for t in 0..self.xtap {
                    let (sx, wt) = match w.get(t) {
                        Some(&wt) => (g.start as usize + t, wt),
                        None => (g.start as usize, 0.0),
                    };
                    self.xtaps.push(((sx * CN) as u32, wt));
                }
            }
            let row_bytes = swu * CN;
            self.xpairs = self
                .xtaps
                .chunks_exact(2 * self.xtap)
                .take_while(|t| t.iter().all(|&(off, _)| off as usize + 4 <= row_bytes))
                .count();
            pair_weights(&self.xtaps, self.xtap, &mut self.xweights8);
            self.xwindows.rebuild(&self.xtaps, self.xtap, row_bytes);
            self.fbuf.clear();
            self.fbuf.resize(dwu * CN + 2, 0.0);
            self.fsum.clear();
            self.fsum.resize(dwu * CN, 0.0);
            Plan::Area
        } else {
            let mut xmax = dwu;
            self.xofs.clear();
            self.xalpha.clear();
            for dx in 0..dwu {
                let (mut sx, mut fx) = linear_area_coef(dx, scale_x, inv_x);
                if sx < 0 {
                    sx = 0;
                    fx = 0.0;
                }
                if sx + 1 >= i64::from(sw) {
                    xmax = xmax.min(dx);
                    if sx >= i64::from(sw) - 1 {
                        sx = i64::from(sw) - 1;
                        fx = 0.0;
                    }
                }
                let a = [sat_i16((1.0 - fx) * COEF_SCALE), sat_i16(fx * COEF_SCALE)];
                for k in 0..CN {
                    self.xofs.push((sx as usize * CN + k) as u32);
                    self.xalpha.push(a);
                }
            }
            hlinear_groups(
                &self.xofs,
                &self.xalpha,
                xmax * CN,
                swu * CN,
                &mut self.xgroups8,
            );
            self.yofs.clear();
            self.ybeta.clear();
            for dy in 0..dhu {
                let (sy, fy) = linear_area_coef(dy, scale_y, inv_y);
                // OpenCV clamps the two source rows when it reads them.
                self.yofs.push(sy.clamp(0, i64::from(sh) - 1) as u32);
                self.ybeta
                    .push([sat_i16((1.0 - fy) * COEF_SCALE), sat_i16(fy * COEF_SCALE)]);
            }
            self.irow0.clear();
            self.irow0.resize(dwu * CN, 0);
            self.irow1.clear();
            self.irow1.resize(dwu * CN, 0);
            Plan::Linear { xmax: xmax * CN }
        };
        self.key = Some((sh, sw, dh, dw));
    }

    /// Resizes the `sh x sw` RGB image whose rows start `src_stride` bytes
    /// apart in `src` (a crop of a larger image: pass the slice starting at
    /// the crop's first pixel and the full image's row length) into the
    /// packed `dh x dw` RGB image `dst`.
    #[allow(clippy::too_many_arguments)] // the shape of cv::resize on a strided view
    pub fn resize_into(
        &mut self,
        src: &[u8],
        src_stride: usize,
        sh: u32,
        sw: u32,
        dst: &mut [u8],
        dh: u32,
        dw: u32,
    ) -> Result<()> {
        Self::check_view(src, src_stride, sh, sw, dh, dw)?;
        let dst_needed = rgb_len(dh, dw);
        if dst.len() < dst_needed {
            return Err(ImageError::BufferTooSmall {
                height: dh,
                width: dw,
                needed: dst_needed,
                got: dst.len(),
            });
        }
        let dst = &mut dst[..dst_needed];
        self.prepare(sh, sw, dh, dw);
        let view = View {
            data: src,
            stride: src_stride,
            h: sh as usize,
            row: sw as usize * CN,
        };
        let dwidth = dw as usize * CN;
        match self.plan {
            Plan::Copy => {
                for (y, out) in dst.chunks_exact_mut(dwidth).enumerate() {
                    out.copy_from_slice(view.row(y));
                }
            }
            Plan::Fast { sx, sy } => resize_fast(&view, dst, dwidth, sx, sy),
            Plan::Area => self.resize_area(&view, dst, dwidth),
            Plan::Linear { xmax } => self.resize_linear(&view, dst, dwidth, xmax),
        }
        Ok(())
    }

    /// Checks a source view and its output size (the checks `resize_into` makes).
    fn check_view(src: &[u8], src_stride: usize, sh: u32, sw: u32, dh: u32, dw: u32) -> Result<()> {
        for (h, w) in [(sh, sw), (dh, dw)] {
            if h == 0 || w == 0 {
                return Err(ImageError::BadSize {
                    height: h.into(),
                    width: w.into(),
                    reason: "resize needs non-empty source and destination",
                });
            }
        }
        let row = sw as usize * CN;
        let src_needed = (sh as usize - 1)
            .saturating_mul(src_stride)
            .saturating_add(row);
        if src_stride < row || src.len() < src_needed {
            return Err(ImageError::PixelCount {
                height: sh,
                width: sw,
                needed: src_needed.max(rgb_len(sh, sw)),
                got: src.len(),
            });
        }
        Ok(())
    }

    /// Resizes the `crop` of the packed `height x width` RGB image `image`
    /// into the packed `dh x dw` image `dst`: FFCV's
    /// `resize_crop(image, i, i + h, j, j + w, dst)`.
    #[allow(clippy::too_many_arguments)] // mirrors FFCV's resize_crop kernel
    pub fn resize_crop_into(
        &mut self,
        image: &[u8],
        height: u32,
        width: u32,
        crop: CropBox,
        dst: &mut [u8],
        dh: u32,
        dw: u32,
    ) -> Result<()> {
        let (src, stride) = crop_view(image, height, width, crop)?;
        self.resize_into(src, stride, crop.h, crop.w, dst, dh, dw)
    }

    /// `ResizeArea_Invoker`: per source row, the horizontally weighted row in
    /// `f32`, accumulated into the output row with the row's weight; the
    /// same operations in the same order as OpenCV, so the same roundings.
    fn resize_area(&mut self, src: &View<'_>, dst: &mut [u8], dwidth: usize) {
        let Self {
            xtaps,
            xtap,
            xpairs,
            xweights8,
            xwindows,
            ygroups,
            yweights,
            fbuf,
            fsum,
            isa,
            ..
        } = self;
        let isa = *isa;
        // A source row straddling two output rows is weighted horizontally
        // once: `fbuf` keeps the last row's sums for the next output row.
        let mut cached = None;
        for (g, out) in ygroups.iter().zip(dst.chunks_exact_mut(dwidth)) {
            let rows = g.start as usize..(g.start + g.len) as usize;
            let betas = &yweights[g.first as usize..(g.first + g.len) as usize];
            for (k, (sy, &beta)) in rows.zip(betas).enumerate() {
                if cached != Some(sy) {
                    hsum_area_row(
                        isa,
                        src.row(sy),
                        xwindows,
                        xtaps,
                        xweights8,
                        *xtap,
                        *xpairs,
                        fbuf,
                    );
                    cached = Some(sy);
                }
                if k + 1 < betas.len() {
                    scale_add(isa, fsum, fbuf, beta, k > 0);
                } else {
                    // The last row's accumulation and the rounding in one pass.
                    scale_add_sat(isa, fsum, fbuf, beta, k > 0, out);
                }
            }
            if betas.is_empty() {
                sat_u8_row(isa, fsum, out);
            }
        }
    }

    /// `resizeGeneric_` with `HResizeLinear<uchar, int, short>` and
    /// `VResizeLinear` + `VResizeLinearVec_32s8u`. As in OpenCV, the two
    /// horizontally resized rows are kept from one output row to the next
    /// and a source row is only resized again when it was not among them:
    /// when upscaling, most output rows reuse both, and when `sy` advances
    /// by one the old second row becomes the first.
    fn resize_linear(&mut self, src: &View<'_>, dst: &mut [u8], dwidth: usize, xmax: usize) {
        let Self {
            xofs,
            xalpha,
            xgroups8,
            yofs,
            ybeta,
            irow0,
            irow1,
            isa,
            ..
        } = self;
        let isa = *isa;
        let hresize =
            |s: &[u8], out: &mut [i32]| hresize(isa, s, xofs, xalpha, xgroups8, xmax, out);
        let last = src.h - 1;
        // The source rows `irow0` and `irow1` hold (none yet).
        let mut held = [usize::MAX; 2];
        for (out, (&sy, &[b0, b1])) in dst
            .chunks_exact_mut(dwidth)
            .zip(yofs.iter().zip(ybeta.iter()))
        {
            let want = [sy as usize, (sy as usize + 1).min(last)];
            if held[0] != want[0] {
                if held[1] == want[0] {
                    std::mem::swap(irow0, irow1);
                    held.swap(0, 1);
                } else {
                    hresize(src.row(want[0]), irow0);
                    held[0] = want[0];
                }
            }
            if held[1] != want[1] {
                if want[1] == want[0] {
                    irow1.copy_from_slice(irow0);
                } else {
                    hresize(src.row(want[1]), irow1);
                }
                held[1] = want[1];
            }
            vresize(isa, irow0, irow1, b0, b1, out);
        }
    }
}

/// A strided read-only view of `h` rows of `row` bytes.
struct View<'a> {
    data: &'a [u8],
    stride: usize,
    h: usize,
    row: usize,
}

impl View<'_> {
    fn row(&self, y: usize) -> &[u8] {
        let start = y * self.stride;
        &self.data[start..start + self.row]
    }
}

/// `resizeAreaFast_`: integer `sx x sy` blocks.
fn resize_fast(src: &View<'_>, dst: &mut [u8], dwidth: usize, sx: usize, sy: usize) {
    if sx == 2 && sy == 2 {
        // ResizeAreaFastVec's 2x2 path: (a + b + c + d + 2) >> 2.
        for (dy, out) in dst.chunks_exact_mut(dwidth).enumerate() {
            let (r0, r1) = (src.row(2 * dy), src.row(2 * dy + 1));
            for (dx, o) in out.chunks_exact_mut(CN).enumerate() {
                let base = dx * 2 * CN;
                for c in 0..CN {
                    let s = u32::from(r0[base + c])
                        + u32::from(r0[base + CN + c])
                        + u32::from(r1[base + c])
                        + u32::from(r1[base + CN + c]);
                    o[c] = ((s + 2) >> 2) as u8;
                }
            }
        }
        return;
    }
    let scale = 1.0f32 / (sx * sy) as f32;
    for (dy, out) in dst.chunks_exact_mut(dwidth).enumerate() {
        for (dx, o) in out.chunks_exact_mut(CN).enumerate() {
            let mut sums = [0u32; CN];
            for yy in 0..sy {
                let r = src.row(dy * sy + yy);
                let px = &r[dx * sx * CN..(dx + 1) * sx * CN];
                for p in px.chunks_exact(CN) {
                    sums[0] += u32::from(p[0]);
                    sums[1] += u32::from(p[1]);
                    sums[2] += u32::from(p[2]);
                }
            }
            for c in 0..CN {
                o[c] = sat_u8(sums[c] as f32 * scale);
            }
        }
    }
}

/// The rows of `crop` in the packed `height x width` RGB `image`: the slice from the
/// crop's first pixel and the image's row length, after checking that the crop fits.
fn crop_view(image: &[u8], height: u32, width: u32, crop: CropBox) -> Result<(&[u8], usize)> {
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
    let needed = rgb_len(height, width);
    if image.len() < needed {
        return Err(ImageError::PixelCount {
            height,
            width,
            needed,
            got: image.len(),
        });
    }
    let stride = width as usize * CN;
    let start = crop.i as usize * stride + crop.j as usize * CN;
    Ok((&image[start..needed], stride))
}

/// One-shot [`AreaResizer::resize_into`] on packed images (allocates the
/// tables; keep an [`AreaResizer`] for repeated calls).
pub fn resize_area_into(
    src: &[u8],
    sh: u32,
    sw: u32,
    dst: &mut [u8],
    dh: u32,
    dw: u32,
) -> Result<()> {
    AreaResizer::new().resize_into(src, sw as usize * CN, sh, sw, dst, dh, dw)
}
