//! The `INTER_AREA` resizer's speed on the bench photos, one thread: with `--rrc SIZE`,
//! FFCV's RandomResizedCrop to `SIZE x SIZE`, timed as the resize alone (µs per sample per
//! path, upscaled and downscaled crops, on crops drawn once from a fixed seed out of the fully
//! decoded photos) and as the whole decoder (region decode + resize, samples/s); without it,
//! the full-resolution decode rate (`photo_decode_speed` measures the decoder's own modes).
//!
//! Run: `cargo run --release -p rgb-image --example resize_speed FILE.beton
//! [--dump DIR] [--rrc SIZE]`

use std::time::Instant;

use beton_io::{FieldMetadata, IMAGE_MODE_JPEG, Reader};
use rand_core::SeedableRng;
use rgb_image::{
    AreaResizer, CropBox, ImageOut, JpegDecoder, RandomResizedCrop, RgbDecoderKernel,
    RgbDecoderKind, StoredImage, random_resized_crop_box,
};

const USAGE: &str = "usage: resize_speed FILE.beton [--dump DIR] [--rrc SIZE]";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().ok_or(USAGE)?;
    let (mut dump, mut rrc) = (None, None);
    let mut rest = args[1..].iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or(USAGE)?;
        match flag.as_str() {
            "--dump" => dump = Some(value.clone()),
            "--rrc" => rrc = Some(value.parse::<u32>().map_err(|_| USAGE)?),
            _ => return Err(USAGE.into()),
        }
    }
    let reader = Reader::open(path)?;
    let field = reader.field_index("image").ok_or("no field named image")?;
    let mut images = Vec::new();
    for sample in 0..reader.num_samples() {
        let FieldMetadata::RgbImage {
            mode,
            width,
            height,
            ..
        } = reader.metadata(sample, field)?
        else {
            return Err("the image field is not an RGB image field".into());
        };
        if mode != IMAGE_MODE_JPEG {
            continue;
        }
        let Some(bytes) = reader.field_data(sample, field)? else {
            continue;
        };
        if let Some(dir) = &dump {
            std::fs::write(format!("{dir}/{sample}.jpg"), bytes)?;
        }
        images.push((bytes, usize::from(height), usize::from(width)));
    }
    let pixels: usize = images.iter().map(|(_, h, w)| h * w).sum();
    let largest = images.iter().map(|(_, h, w)| h * w * 3).max().unwrap_or(0);
    let mut out = vec![0u8; largest];
    let mut decoder = JpegDecoder::new();
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for (jpeg, h, w) in &images {
            decoder.decode_into(jpeg, &mut out[..h * w * 3])?;
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{} JPEGs, {:.1} Mpx: best of 3 rounds {:.3} s, {:.1} Mpx/s, {:.0} images/s (one thread)",
        images.len(),
        pixels as f64 / 1e6,
        best,
        pixels as f64 / 1e6 / best,
        images.len() as f64 / best
    );
    if let Some(size) = rrc {
        random_resized_crop_speed(&images, size, &mut decoder)?;
    }
    Ok(())
}

/// Seconds this thread has run on a CPU (Linux's `/proc/thread-self/schedstat`), which other
/// processes on a loaded machine disturb far less than wall time; wall time elsewhere.
fn thread_cpu_seconds(start: Instant) -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or_else(|| start.elapsed().as_secs_f64(), |ns| ns as f64 * 1e-9)
}

/// The best of `rounds` runs of `body`, in thread CPU seconds.
fn best_of(
    rounds: usize,
    mut body: impl FnMut() -> Result<(), Box<dyn std::error::Error>>,
) -> Result<f64, Box<dyn std::error::Error>> {
    let origin = Instant::now();
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = thread_cpu_seconds(origin);
        body()?;
        best = best.min(thread_cpu_seconds(origin) - t);
    }
    Ok(best)
}

/// The `--rrc SIZE` timings: resize alone, then the whole decoder, best of 5 rounds each
/// in thread CPU time.
fn random_resized_crop_speed(
    images: &[(&[u8], usize, usize)],
    size: u32,
    decoder: &mut JpegDecoder,
) -> Result<(), Box<dyn std::error::Error>> {
    let params = RandomResizedCrop::default();
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(0);
    let mut decoded: Vec<(Vec<u8>, u32, u32, CropBox)> = Vec::with_capacity(images.len());
    for (jpeg, h, w) in images {
        let mut px = vec![0u8; h * w * 3];
        let (h, w) = decoder.decode_into(jpeg, &mut px)?;
        let crop = random_resized_crop_box(h, w, &params, &mut rng);
        decoded.push((px, h, w, crop));
    }
    // OpenCV's bilinear ("any axis upscaled") path runs when a crop side is below SIZE.
    let mut resizer = AreaResizer::new();
    let mut out = vec![0u8; (size * size * 3) as usize];
    for (what, linear) in [("upscaled on some axis", true), ("downscaled", false)] {
        let subset: Vec<_> = decoded
            .iter()
            .filter(|(.., c)| (c.h < size || c.w < size) == linear)
            .collect();
        // Each crop 4 times in a row: mostly from cache, as in the decoder, where the
        // crop has just been decoded.
        let best = best_of(5, || {
            for (px, h, w, crop) in &subset {
                for _ in 0..4 {
                    resizer.resize_crop_into(px, *h, *w, *crop, &mut out, size, size)?;
                }
            }
            Ok(())
        })?;
        println!(
            "RandomResizedCrop {size}: INTER_AREA resize alone, {} crops {what}: \
             {:.1} µs/sample (4 in a row, best of 5, thread CPU time)",
            subset.len(),
            best * 1e6 / (4 * subset.len().max(1)) as f64,
        );
    }
    let mut kernel = RgbDecoderKernel::new();
    let kind = RgbDecoderKind::RandomResizedCrop(params);
    let best = best_of(5, || {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
        for (jpeg, h, w) in images {
            kernel.decode_sample(
                &kind,
                StoredImage {
                    mode: IMAGE_MODE_JPEG,
                    width: *w as u16,
                    height: *h as u16,
                    data: jpeg,
                },
                &mut rng,
                ImageOut {
                    pixels: &mut out,
                    height: size,
                    width: size,
                },
            )?;
        }
        Ok(())
    })?;
    println!(
        "RandomResizedCrop {size}: region decode + resize {:.0} samples/s, {:.0} µs/sample \
         (best of 5, thread CPU time)",
        images.len() as f64 / best,
        best * 1e6 / images.len() as f64,
    );
    Ok(())
}
