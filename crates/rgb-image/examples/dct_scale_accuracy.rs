//! Accuracy and speed of the opt-in DCT-domain downscaling against the exact decode, over
//! a folder of JPEGs (the bench photos: `photo_decode_speed FILE.beton --dump DIR`).
//!
//! For centre crops (ratio 224/256) and random-resized crops (FFCV's defaults, the box
//! drawn from a generator seeded by the image's index, the same for both paths) at each
//! output size, it prints the share of images the option reduces; the PSNR against the
//! exact output of the same crop rounding and resize run from the exact image's box means
//! (`box dB`: what the reduction costs even with perfect reduced pixels); the option's
//! PSNR (over all images' pixels, and the worst image's) and largest byte difference;
//! then decode+crop+resize samples per second on one thread, exact and reduced
//! alternating image by image (summed over the rounds).
//!
//! Run: `cargo run --release -p rgb-image --example dct_scale_accuracy DIR [SIZE...]`

use std::time::Instant;

use rand_core::SeedableRng;
use rand_pcg::Pcg64;
use rgb_image::{
    AreaResizer, ImageOut, JpegDecoder, JpegFrame, RandomResizedCrop, RgbDecoderKernel,
    RgbDecoderKind, StoredImage, center_crop_box, dct_scaled_crop, random_resized_crop_box,
};

/// `RGBImageField`'s mode byte for a JPEG.
const JPEG: u8 = 0;
/// Timed rounds per path.
const ROUNDS: usize = 5;

struct Photo {
    jpeg: Vec<u8>,
    h: u16,
    w: u16,
}

impl Photo {
    /// Decodes the photo with `kernel` into the `size x size` image `pixels`, a random
    /// crop's box drawn from a generator seeded by `seed` (the photo's index, so that the
    /// exact and reduced paths crop the same box).
    fn decode(
        &self,
        kernel: &mut RgbDecoderKernel,
        kind: &RgbDecoderKind,
        seed: u64,
        pixels: &mut [u8],
        size: u32,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let stored = StoredImage {
            mode: JPEG,
            width: self.w,
            height: self.h,
            data: &self.jpeg,
        };
        let out = ImageOut {
            pixels,
            height: size,
            width: size,
        };
        kernel.decode_sample(kind, stored, &mut Pcg64::seed_from_u64(seed), out)?;
        Ok(())
    }
}

/// The `f x f` box means of a `h x w` RGB image (edge groups over the pixels they
/// have), rounded: the ideal reduced image the DCT-domain one approximates.
fn box_mean(full: &[u8], h: usize, w: usize, f: usize) -> Vec<u8> {
    let (rh, rw) = (h.div_ceil(f), w.div_ceil(f));
    let mut out = vec![0u8; rh * rw * 3];
    for y in 0..rh {
        for x in 0..rw {
            for c in 0..3 {
                let (mut sum, mut n) = (0u32, 0u32);
                for yy in y * f..((y + 1) * f).min(h) {
                    for xx in x * f..((x + 1) * f).min(w) {
                        sum += u32::from(full[(yy * w + xx) * 3 + c]);
                        n += 1;
                    }
                }
                out[(y * rw + x) * 3 + c] = ((sum + n / 2) / n) as u8;
            }
        }
    }
    out
}

fn psnr(mse: f64) -> f64 {
    if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (255.0f64 * 255.0 / mse).log10()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .ok_or("usage: dct_scale_accuracy DIR [SIZE...]")?;
    let sizes: Vec<u32> = if args.len() > 2 {
        args[2..]
            .iter()
            .map(|s| s.parse())
            .collect::<Result<_, _>>()?
    } else {
        vec![224, 112, 64]
    };
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jpg"))
        .collect();
    names.sort();
    let mut photos = Vec::new();
    for p in &names {
        let jpeg = std::fs::read(p)?;
        let frame = JpegFrame::find(&jpeg).ok_or("a file without a JPEG frame header")?;
        let (h, w) = (frame.height, frame.width);
        photos.push(Photo { jpeg, h, w });
    }
    println!("{} JPEGs from {dir}", photos.len());
    let mut jpeg = JpegDecoder::new();
    let mut resizer = AreaResizer::new();
    let mut exact = RgbDecoderKernel::new();
    let mut fast = RgbDecoderKernel::new();
    fast.set_dct_downscale(true);
    let kinds = [
        (
            "center-crop",
            RgbDecoderKind::CenterCrop {
                ratio: 224.0 / 256.0,
            },
        ),
        (
            "random-resized-crop",
            RgbDecoderKind::RandomResizedCrop(RandomResizedCrop::default()),
        ),
    ];
    println!(
        "{:<20} {:>4} {:>8} {:>9} {:>9} {:>10} {:>7} {:>10} {:>10} {:>6}",
        "decoder",
        "out",
        "reduced",
        "box dB",
        "PSNR dB",
        "worst dB",
        "maxabs",
        "exact/s",
        "dct/s",
        "ratio"
    );
    for &size in &sizes {
        for (label, kind) in &kinds {
            let n = (size * size * 3) as usize;
            let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
            let (mut sq, mut count, mut worst, mut maxabs, mut reduced) =
                (0f64, 0f64, f64::INFINITY, 0u8, 0usize);
            // The same crop rounding and resize from the exact image's box means.
            let (mut box_sq, mut c) = (0f64, vec![0u8; n]);
            for (k, p) in photos.iter().enumerate() {
                let (h, w) = (u32::from(p.h), u32::from(p.w));
                let crop = match kind {
                    RgbDecoderKind::CenterCrop { ratio } => center_crop_box(h, w, *ratio),
                    RgbDecoderKind::RandomResizedCrop(params) => {
                        random_resized_crop_box(h, w, params, &mut Pcg64::seed_from_u64(k as u64))
                    }
                    RgbDecoderKind::Simple => unreachable!("only crop decoders are measured"),
                };
                let scaled = dct_scaled_crop(h, w, crop, size, size);
                reduced += usize::from(scaled.is_some());
                p.decode(&mut exact, kind, k as u64, &mut a, size)?;
                p.decode(&mut fast, kind, k as u64, &mut b, size)?;
                if let Some((shift, rcrop)) = scaled {
                    let (hu, wu) = (h as usize, w as usize);
                    let mut full = vec![0u8; hu * wu * 3];
                    jpeg.decode_into(&p.jpeg, &mut full)?;
                    let f = 1usize << shift;
                    let ideal = box_mean(&full, hu, wu, f);
                    let (rh, rw) = (h.div_ceil(f as u32), w.div_ceil(f as u32));
                    resizer.resize_crop_into(&ideal, rh, rw, rcrop, &mut c, size, size)?;
                } else {
                    c.copy_from_slice(&a);
                }
                box_sq += a
                    .iter()
                    .zip(&c)
                    .map(|(&x, &y)| f64::from(x.abs_diff(y)).powi(2))
                    .sum::<f64>();
                let mut img_sq = 0f64;
                for (&x, &y) in a.iter().zip(&b) {
                    let d = x.abs_diff(y);
                    maxabs = maxabs.max(d);
                    img_sq += f64::from(d) * f64::from(d);
                }
                sq += img_sq;
                count += n as f64;
                worst = worst.min(psnr(img_sq / n as f64));
            }
            // Per image, exact then reduced, summed over the rounds: the machine's load
            // changes slower than one image, so both paths see the same load.
            let (mut t_exact, mut t_fast) = (0f64, 0f64);
            for _ in 0..ROUNDS {
                for (k, p) in photos.iter().enumerate() {
                    for (kernel, total) in [(&mut exact, &mut t_exact), (&mut fast, &mut t_fast)] {
                        let t = Instant::now();
                        p.decode(kernel, kind, k as u64, &mut a, size)?;
                        *total += t.elapsed().as_secs_f64();
                    }
                }
            }
            let m = photos.len() as f64;
            let per_s = |t: f64| m * ROUNDS as f64 / t;
            println!(
                "{label:<20} {size:>4} {:>7.1}% {:>9.2} {:>9.2} {:>10.2} {maxabs:>7} {:>10.0} {:>10.0} {:>5.2}x",
                100.0 * reduced as f64 / m,
                psnr(box_sq / count),
                psnr(sq / count),
                worst,
                per_s(t_exact),
                per_s(t_fast),
                t_exact / t_fast
            );
        }
    }
    Ok(())
}
