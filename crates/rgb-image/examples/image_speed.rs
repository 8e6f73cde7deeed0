//! Speed of the image kernels on this machine (one thread): JPEG decode
//! (the libjpeg-turbo-compatible path and, for comparison, `jpeg-decoder`),
//! the INTER_AREA resizer, and decode + RandomResizedCrop + resize per
//! sample, and JPEG encoding (ours and the `jpeg-encoder` crate), on
//! synthetic JPEGs of 160–256 px (the benchmark's JPEG dataset).
//!
//! Run: `cargo run --release -p rgb-image --example image_speed`

use rand_core::SeedableRng;
use rgb_image::{
    AreaResizer, ImageOut, JpegDecoder, RandomResizedCrop, RgbDecoderKernel, RgbDecoderKind,
    StoredImage, SyntheticImageSpec, center_crop_box, encode_like_libjpeg, random_resized_crop_box,
    synthetic_jpeg,
};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = SyntheticImageSpec {
        min_side: 160,
        max_side: 256,
    };
    let images: Vec<(Vec<u8>, u32, u32)> = (0..200)
        .map(|i| synthetic_jpeg(0, i, spec, 90))
        .collect::<Result<_, _>>()?;
    let pixels: u64 = images.iter().map(|(_, w, h)| u64::from(w * h)).sum();
    let mut full = vec![0u8; 256 * 256 * 3];
    let rounds = 10;

    let mut decoder = JpegDecoder::new();
    let t = Instant::now();
    for _ in 0..rounds {
        for (jpeg, _, _) in &images {
            decoder.decode_into(jpeg, &mut full)?;
        }
    }
    let turbo = t.elapsed().as_secs_f64() / f64::from(rounds);
    report(
        "decode (fast-DCT baseline path)",
        turbo,
        images.len(),
        pixels,
    );

    let t = Instant::now();
    for _ in 0..rounds {
        for (jpeg, _, _) in &images {
            let mut d = jpeg_decoder::Decoder::new(&jpeg[..]);
            std::hint::black_box(d.decode()?);
        }
    }
    let general = t.elapsed().as_secs_f64() / f64::from(rounds);
    report("decode (jpeg-decoder crate)", general, images.len(), pixels);

    // Decoded sources for the resize timings.
    let decoded: Vec<(Vec<u8>, u32, u32)> = images
        .iter()
        .map(|(jpeg, w, h)| {
            let mut out = vec![0u8; (w * h * 3) as usize];
            decoder.decode_into(jpeg, &mut out).map(|_| (out, *w, *h))
        })
        .collect::<Result<_, _>>()?;
    // Encoding as the writer does it (quality 90, 4:2:0): the
    // libjpeg-compatible encoder, and the `jpeg-encoder` crate it replaced.
    let t = Instant::now();
    for _ in 0..rounds {
        for (img, w, h) in &decoded {
            std::hint::black_box(encode_like_libjpeg(img, *w, *h, 90)?);
        }
    }
    report(
        "encode q90 (libjpeg-compatible, the writer's)",
        t.elapsed().as_secs_f64() / f64::from(rounds),
        decoded.len(),
        pixels,
    );
    let t = Instant::now();
    for _ in 0..rounds {
        for (img, w, h) in &decoded {
            let mut jpg = Vec::new();
            let mut enc = jpeg_encoder::Encoder::new(&mut jpg, 90);
            enc.set_sampling_factor(jpeg_encoder::SamplingFactor::F_2_2);
            enc.encode(img, *w as u16, *h as u16, jpeg_encoder::ColorType::Rgb)?;
            std::hint::black_box(jpg);
        }
    }
    report(
        "encode q90 (jpeg-encoder crate)",
        t.elapsed().as_secs_f64() / f64::from(rounds),
        decoded.len(),
        pixels,
    );

    let mut resizer = AreaResizer::new();
    let mut out = vec![0u8; 64 * 64 * 3];
    let t = Instant::now();
    for _ in 0..rounds {
        for (img, w, h) in &decoded {
            let crop = center_crop_box(*h, *w, 224.0 / 256.0);
            resizer.resize_crop_into(img, *h, *w, crop, &mut out, 64, 64)?;
        }
    }
    report(
        "center crop + INTER_AREA to 64x64",
        t.elapsed().as_secs_f64() / f64::from(rounds),
        decoded.len(),
        0,
    );

    let params = RandomResizedCrop::default();
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(0);
    let t = Instant::now();
    for _ in 0..rounds {
        for (img, w, h) in &decoded {
            let crop = random_resized_crop_box(*h, *w, &params, &mut rng);
            resizer.resize_crop_into(img, *h, *w, crop, &mut out, 64, 64)?;
        }
    }
    report(
        "random resized crop + INTER_AREA to 64x64",
        t.elapsed().as_secs_f64() / f64::from(rounds),
        decoded.len(),
        0,
    );

    let t = Instant::now();
    for _ in 0..rounds {
        for (jpeg, _, _) in &images {
            let (h, w) = decoder.decode_into(jpeg, &mut full)?;
            let crop = random_resized_crop_box(h, w, &params, &mut rng);
            resizer.resize_crop_into(&full, h, w, crop, &mut out, 64, 64)?;
        }
    }
    report(
        "decode + RRC + resize (one sample, one thread)",
        t.elapsed().as_secs_f64() / f64::from(rounds),
        images.len(),
        pixels,
    );

    // The loader's kernel: the crop box first, then only the part of the
    // JPEG it needs.
    let mut kernel = RgbDecoderKernel::new();
    let kind = RgbDecoderKind::RandomResizedCrop(params);
    let t = Instant::now();
    for _ in 0..rounds {
        for (jpeg, w, h) in &images {
            kernel.decode_sample(
                &kind,
                StoredImage {
                    mode: 0,
                    width: *w as u16,
                    height: *h as u16,
                    data: jpeg,
                },
                &mut rng,
                ImageOut {
                    pixels: &mut out,
                    height: 64,
                    width: 64,
                },
            )?;
        }
    }
    report(
        "kernel: region decode + RRC + resize",
        t.elapsed().as_secs_f64() / f64::from(rounds),
        images.len(),
        pixels,
    );
    Ok(())
}

fn report(what: &str, seconds: f64, n: usize, pixels: u64) {
    let per = seconds / n as f64;
    let mpx = if pixels > 0 {
        format!(", {:.0} Mpx/s", pixels as f64 / seconds / 1e6)
    } else {
        String::new()
    };
    println!(
        "{what:48} {:8.1} us/image, {:8.0} images/s{mpx}",
        per * 1e6,
        1.0 / per
    );
}
