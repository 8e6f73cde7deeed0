//! Full-resolution JPEG decode throughput on one thread, in megapixels per second, over the
//! JPEG images of a `.beton` file (the bench's `photos` set), to set beside libjpeg-turbo's
//! on the same images (`--dump DIR` writes them as `N.jpg` for PIL or OpenCV).
//!
//! Run: `cargo run --release -p rgb-image --example photo_decode_speed FILE.beton [--dump DIR]`

use std::time::Instant;

use beton_io::{FieldMetadata, IMAGE_MODE_JPEG, Reader};
use rgb_image::JpegDecoder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: photo_decode_speed FILE.beton [--dump DIR]")?;
    let dump = match (args.get(2).map(String::as_str), args.get(3)) {
        (Some("--dump"), Some(dir)) => Some(dir.clone()),
        _ => None,
    };
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
    Ok(())
}
