//! Several views of one stored image (self-supervised learning's two or more crops of a
//! sample): [`ViewsKernel::decode_views`] draws every view's crop box, then either decodes
//! the JPEG once over the union of the boxes and resizes each view from it, or runs
//! [`RgbDecoderKernel::decode_sample`] once per view, whichever the per-sample rule
//! ([`ViewsPolicy::Auto`], [`prefers_once`]) expects to be cheaper.
//!
//! Both ways give the same bytes: a region decode's pixels inside its region are the full
//! decode's ([`crate::JpegDecoder::decode_region_into`]), so a view's box cut from the
//! union's decode is the box a decode of that view alone gives, and the resize is the
//! same call. The choice is speed only.
//!
//! The per-view path replays each view's recorded draws into `decode_sample`, so it is the
//! single-view decoder exactly (its checks and its opt-in DCT-domain downscaling included).

use rand_core::RngCore;

use super::{
    AreaResizer, CropBox, ImageError, ImageMode, JpegDecoder, Result, RgbDecoderKernel,
    RgbDecoderKind, center_crop_box, random_resized_crop_box, rgb_len,
};
use crate::{ImageOut, StoredImage};

/// The relative cost of entropy-decoding one pixel of a JPEG (every pixel above a crop's
/// bottom edge, whatever its column, since the scan is one bit stream) against
/// reconstructing one pixel inside the crop (IDCT, upsampling, colour conversion): on the
/// test photographs the second costs 0.8 to 1.2 times the first (1.2 to 2.6 ns a pixel;
/// `cargo run --release -p rgb-image --example views_cost`, figures in
/// `docs/benchmarking.md`, "Several views of one field"), so they weigh the same.
pub const ENTROPY_COST: u64 = 1;
/// See [`ENTROPY_COST`].
pub const PIXEL_COST: u64 = 1;

/// How [`ViewsKernel::decode_views`] decodes a sample's views.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ViewsPolicy {
    /// Per sample, whichever [`prefers_once`] expects to be cheaper.
    #[default]
    Auto,
    /// One decode over the union of the boxes whenever it is possible (a baseline JPEG,
    /// crop decoders, no DCT-domain downscaling).
    Once,
    /// One decode per view (what independent decoders do).
    PerView,
}

/// What [`ViewsKernel::decode_views`] did for a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewsDecode {
    /// The JPEG was decoded once over the union of the views' boxes.
    Once,
    /// Each view was decoded on its own.
    PerView,
}

/// One view of a sample: its decoder, its own generator and its output.
pub struct ImageView<'a> {
    /// The view's decoder (its crop rule and parameters).
    pub kind: RgbDecoderKind,
    /// The view's generator (drawn from by a random crop only).
    pub rng: &'a mut dyn RngCore,
    /// Where the view's pixels go.
    pub out: ImageOut<'a>,
}

impl std::fmt::Debug for ImageView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageView")
            .field("kind", &self.kind)
            .field("out", &(self.out.height, self.out.width))
            .finish_non_exhaustive()
    }
}

/// The box covering every box of `boxes` (`None` for none).
pub fn union_box(boxes: &[CropBox]) -> Option<CropBox> {
    let first = boxes.first()?;
    let (mut top, mut left) = (first.i, first.j);
    let (mut bottom, mut right) = (first.i + first.h, first.j + first.w);
    for b in &boxes[1..] {
        top = top.min(b.i);
        left = left.min(b.j);
        bottom = bottom.max(b.i + b.h);
        right = right.max(b.j + b.w);
    }
    Some(CropBox {
        i: top,
        j: left,
        h: bottom - top,
        w: right - left,
    })
}

/// The estimated cost of a region decode of `b` in an image `width` pixels wide: the
/// entropy decoding of every row down to the box's bottom, then the box's pixels.
fn region_cost(b: &CropBox, width: u32) -> u64 {
    let rows = u64::from(b.i + b.h);
    ENTROPY_COST * rows * u64::from(width) + PIXEL_COST * u64::from(b.h) * u64::from(b.w)
}

/// The per-sample rule of [`ViewsPolicy::Auto`]: decode once over the union of `boxes`
/// when its estimated cost is at most the sum of the boxes' own region decodes. The
/// union's entropy decoding (down to the lowest bottom edge) is never more than one
/// view's, so the union loses only when the boxes are far apart and its area is much
/// more than theirs while one of them ends near the top (small crops in the top-left and
/// bottom-right corners).
pub fn prefers_once(boxes: &[CropBox], width: u32) -> bool {
    let Some(union) = union_box(boxes) else {
        return false;
    };
    let each: u64 = boxes.iter().map(|b| region_cost(b, width)).sum();
    boxes.len() > 1 && region_cost(&union, width) <= each
}

/// A generator that plays back recorded words (the per-view path's copy of a view's
/// draws), then zeros.
struct Replay<'a> {
    words: &'a [u64],
}

impl RngCore for Replay<'_> {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        match self.words.split_first() {
            Some((&w, rest)) => {
                self.words = rest;
                w
            }
            None => 0,
        }
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let w = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
    }
}

/// A generator that records the words it passes on.
struct Recorder<'a> {
    inner: &'a mut dyn RngCore,
    words: &'a mut Vec<u64>,
}

impl RngCore for Recorder<'_> {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        let w = self.inner.next_u64();
        self.words.push(w);
        w
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let w = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
    }
}

/// Per-thread state of a multi-view decode: the single-view kernel for the per-view path,
/// and for the decode-once path a JPEG decoder, a resizer and the union's scratch image,
/// all reused between samples.
#[derive(Debug, Default)]
pub struct ViewsKernel {
    single: RgbDecoderKernel,
    jpeg: JpegDecoder,
    resizer: AreaResizer,
    full: Vec<u8>,
    boxes: Vec<CropBox>,
    draws: Vec<Vec<u64>>,
    policy: ViewsPolicy,
}

impl ViewsKernel {
    /// Empty buffers; they grow to the largest image seen.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how the following samples are decoded (default [`ViewsPolicy::Auto`]).
    pub fn set_policy(&mut self, policy: ViewsPolicy) {
        self.policy = policy;
    }

    /// Turns the opt-in DCT-domain downscaling on or off
    /// ([`RgbDecoderKernel::set_dct_downscale`]); when on, every view is decoded on its
    /// own, since the reduced decode depends on each view's box.
    pub fn set_dct_downscale(&mut self, on: bool) {
        self.single.set_dct_downscale(on);
    }

    /// Decodes every view of one stored image, each exactly as
    /// [`RgbDecoderKernel::decode_sample`] decodes it alone with the same generator, and
    /// says which way it went. Errors are `decode_sample`'s.
    pub fn decode_views(
        &mut self,
        image: StoredImage<'_>,
        views: &mut [ImageView<'_>],
    ) -> Result<ViewsDecode> {
        let (h, w) = (u32::from(image.height), u32::from(image.width));
        if self.draws.len() < views.len() {
            self.draws.resize_with(views.len(), Vec::new);
        }
        // Draw every box first, recording each view's words for the per-view path. A box
        // depends only on the metadata size (as in `decode_sample`). With a view that is
        // not a crop (`Simple`) or an empty size there is nothing to share: each view
        // decodes with its own generator, untouched.
        self.boxes.clear();
        let croppable = h > 0
            && w > 0
            && views.iter().all(|v| {
                matches!(
                    v.kind,
                    RgbDecoderKind::CenterCrop { .. } | RgbDecoderKind::RandomResizedCrop(_)
                )
            });
        if croppable {
            for (view, words) in views.iter_mut().zip(&mut self.draws) {
                words.clear();
                let mut rng = Recorder {
                    inner: &mut *view.rng,
                    words,
                };
                self.boxes.push(match &view.kind {
                    RgbDecoderKind::CenterCrop { ratio } => center_crop_box(h, w, *ratio),
                    RgbDecoderKind::RandomResizedCrop(p) => {
                        random_resized_crop_box(h, w, p, &mut rng)
                    }
                    // Not reached (`croppable`): other decoders' box is the whole image.
                    _ => CropBox { i: 0, j: 0, h, w },
                });
            }
        }
        let once = croppable
            && views.len() > 1
            && ImageMode::from_byte(image.mode) == Some(ImageMode::Jpeg)
            && !self.single.dct_downscale()
            && match self.policy {
                ViewsPolicy::Auto => prefers_once(&self.boxes, w),
                ViewsPolicy::Once => true,
                ViewsPolicy::PerView => false,
            };
        if once && let Some(union) = union_box(&self.boxes) {
            self.decode_once(image, union, views)?;
            return Ok(ViewsDecode::Once);
        }
        for (view, words) in views.iter_mut().zip(&self.draws) {
            let out = ImageOut {
                pixels: &mut *view.out.pixels,
                height: view.out.height,
                width: view.out.width,
            };
            if croppable {
                let mut replay = Replay { words };
                self.single
                    .decode_sample(&view.kind, image, &mut replay, out)?;
            } else {
                self.single
                    .decode_sample(&view.kind, image, &mut view.rng, out)?;
            }
        }
        Ok(ViewsDecode::PerView)
    }

    /// The decode-once path: the checks of `decode_sample`, one region decode of `union`,
    /// each view's box resized from it.
    fn decode_once(
        &mut self,
        image: StoredImage<'_>,
        union: CropBox,
        views: &mut [ImageView<'_>],
    ) -> Result<()> {
        let (h, w) = (u32::from(image.height), u32::from(image.width));
        for view in views.iter() {
            let needed = rgb_len(view.out.height, view.out.width);
            if view.out.pixels.len() < needed {
                return Err(ImageError::BufferTooSmall {
                    height: view.out.height,
                    width: view.out.width,
                    needed,
                    got: view.out.pixels.len(),
                });
            }
        }
        let needed = rgb_len(h, w);
        if self.full.len() < needed {
            // Sized from the file: reserved fallibly, as the single-view kernel does.
            self.full
                .try_reserve_exact(needed - self.full.len())
                .map_err(|_| ImageError::BadSize {
                    height: h.into(),
                    width: w.into(),
                    reason: "not enough memory for the decoded image",
                })?;
            self.full.resize(needed, 0);
        }
        let full = &mut self.full[..needed];
        let (dh, dw) = self.jpeg.decode_region_into(image.data, union, full)?;
        if (dh, dw) != (h, w) {
            return Err(ImageError::JpegDecode {
                len: image.data.len(),
                message: format!("JPEG is {dh}x{dw} but the metadata says {h}x{w}"),
            });
        }
        for (view, crop) in views.iter_mut().zip(&self.boxes) {
            let (oh, ow) = (view.out.height, view.out.width);
            self.resizer.resize_crop_into(
                &self.full[..needed],
                h,
                w,
                *crop,
                view.out.pixels,
                oh,
                ow,
            )?;
        }
        Ok(())
    }
}
