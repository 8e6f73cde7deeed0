//! RGBImageField encoding (FFCV's write modes and max_resolution), image
//! file reading and the synthetic generator.

use crate::image_support;

use image_support::channel_diff;
use rand_core::SeedableRng;
use rand_pcg::Pcg64Mcg;
use rgb_image::{
    AreaResizer, EncodedImage, ImageError, ImageMode, JpegDecoder, RgbImage, RgbImageEncoder,
    SyntheticImageSpec, WriteMode, downscale_to_max_resolution, read_image_bytes, read_image_file,
    synthetic_image, synthetic_jpeg,
};

/// `sample_generator(0, i).next_u64()` for `i` in 0..3.
const PINNED_FIRST_DRAWS: [u64; 3] = [
    17_717_663_737_571_682_641,
    4_326_240_854_629_059_074,
    16_876_035_588_876_793_617,
];

fn gradient(w: u32, h: u32) -> RgbImage {
    let mut px = Vec::new();
    for y in 0..h {
        for x in 0..w {
            px.extend_from_slice(&[
                (x * 200 / w) as u8,
                (y * 200 / h) as u8,
                ((x + y) * 100 / (w + h) + 50) as u8,
            ]);
        }
    }
    RgbImage::new(w, h, px).unwrap()
}

fn decode(e: &EncodedImage) -> Vec<u8> {
    let mut out = vec![0u8; usize::from(e.width) * usize::from(e.height) * 3];
    let (h, w) = JpegDecoder::new().decode_into(&e.data, &mut out).unwrap();
    assert_eq!((h, w), (u32::from(e.height), u32::from(e.width)));
    out
}

fn rng() -> Pcg64Mcg {
    Pcg64Mcg::seed_from_u64(7)
}

#[test]
fn raw_mode_stores_the_pixels() {
    let img = gradient(30, 20);
    let e = RgbImageEncoder::default().encode(&img, &mut rng()).unwrap();
    assert_eq!((e.mode, e.width, e.height), (ImageMode::Raw, 30, 20));
    assert_eq!(e.mode.as_byte(), 1);
    assert_eq!(e.data, img.pixels());
}

#[test]
fn jpg_mode_round_trips_close_to_the_source() {
    let img = gradient(64, 48);
    let enc = RgbImageEncoder {
        write_mode: WriteMode::Jpg,
        ..Default::default()
    };
    assert_eq!(enc.jpeg_quality, 90);
    let e = enc.encode(&img, &mut rng()).unwrap();
    assert_eq!(
        (e.mode, e.mode.as_byte(), e.width, e.height),
        (ImageMode::Jpeg, 0, 64, 48)
    );
    assert!(e.data.starts_with(&[0xFF, 0xD8]) && e.data.len() < img.pixels().len());
    let (mean, max) = channel_diff(&decode(&e), img.pixels());
    assert!(mean.iter().all(|&m| m < 2.0), "{mean:?}");
    assert!(max.iter().all(|&m| m <= 16), "{max:?}");
    // Lower quality, smaller file.
    let low = RgbImageEncoder {
        jpeg_quality: 30,
        ..enc.clone()
    }
    .encode(&img, &mut rng())
    .unwrap();
    assert!(low.data.len() < e.data.len());
    let bad = RgbImageEncoder {
        jpeg_quality: 0,
        ..enc
    };
    assert!(matches!(
        bad.encode(&img, &mut rng()),
        Err(ImageError::BadSetting(_))
    ));
}

#[test]
fn smart_mode_compresses_only_above_the_threshold() {
    let img = gradient(20, 10); // 600 raw bytes
    let at = |threshold| {
        RgbImageEncoder {
            write_mode: WriteMode::Smart { threshold },
            ..Default::default()
        }
        .encode(&img, &mut rng())
        .unwrap()
        .mode
    };
    // FFCV: JPEG iff image.nbytes > smart_threshold; no threshold -> raw.
    assert_eq!(at(None), ImageMode::Raw);
    assert_eq!(at(Some(600)), ImageMode::Raw);
    assert_eq!(at(Some(599)), ImageMode::Jpeg);
}

#[test]
fn proportion_mode_compresses_about_that_fraction() {
    let img = gradient(8, 8);
    let enc = |p| RgbImageEncoder {
        write_mode: WriteMode::Proportion {
            compress_probability: p,
        },
        ..Default::default()
    };
    let mut r = rng();
    let jpegs = (0..2000)
        .filter(|_| enc(0.25).encode(&img, &mut r).unwrap().mode == ImageMode::Jpeg)
        .count();
    assert!((420..=580).contains(&jpegs), "{jpegs}");
    assert_eq!(enc(0.0).encode(&img, &mut r).unwrap().mode, ImageMode::Raw);
    assert_eq!(enc(1.0).encode(&img, &mut r).unwrap().mode, ImageMode::Jpeg);
    assert!(enc(1.5).encode(&img, &mut r).is_err());
    // Same generator state, same decisions.
    let a: Vec<_> = {
        let mut r = rng();
        (0..50)
            .map(|_| enc(0.5).encode(&img, &mut r).unwrap().mode)
            .collect()
    };
    let b: Vec<_> = {
        let mut r = rng();
        (0..50)
            .map(|_| enc(0.5).encode(&img, &mut r).unwrap().mode)
            .collect()
    };
    assert_eq!(a, b);
}

#[test]
fn encode_sample_draws_from_the_samples_own_generator() {
    use rand_core::RngCore;
    use rgb_image::sample_generator;
    let img = gradient(8, 8);
    let enc = RgbImageEncoder {
        write_mode: WriteMode::Proportion {
            compress_probability: 0.5,
        },
        ..Default::default()
    };
    let modes = |seed: u64| -> Vec<ImageMode> {
        (0..16)
            .map(|i| enc.encode_sample(&img, seed, i).unwrap().mode)
            .collect()
    };
    // A sample's choice depends on (seed, sample) only: not on the order of encoding.
    let mut backwards: Vec<ImageMode> = (0..16)
        .rev()
        .map(|i| enc.encode_sample(&img, 0, i).unwrap().mode)
        .collect();
    backwards.reverse();
    assert_eq!(modes(0), backwards);
    assert_ne!(modes(0), modes(1));
    for i in 0..16 {
        assert_eq!(
            enc.encode_sample(&img, 7, i).unwrap(),
            enc.encode(&img, &mut sample_generator(7, i)).unwrap()
        );
    }
    // The rule itself, pinned: files written with it keep their bytes.
    let first: Vec<u64> = (0..3).map(|i| sample_generator(0, i).next_u64()).collect();
    assert_eq!(first, PINNED_FIRST_DRAWS);
}

#[test]
fn max_resolution_downscales_like_ffcv_resizer() {
    let img = gradient(300, 200);
    // ratio = 128 / 300; new size = (int(300 * r), int(200 * r)) = (128, 85).
    let small = downscale_to_max_resolution(&img, 128).unwrap().unwrap();
    assert_eq!((small.width(), small.height()), (128, 85));
    // The pixels are INTER_AREA of the whole image.
    let mut expected = vec![0u8; 128 * 85 * 3];
    AreaResizer::new()
        .resize_into(img.pixels(), 900, 200, 300, &mut expected, 85, 128)
        .unwrap();
    assert_eq!(small.pixels(), &expected[..]);
    // Not larger than max_resolution: untouched.
    assert!(downscale_to_max_resolution(&img, 300).unwrap().is_none());
    assert!(downscale_to_max_resolution(&img, 1000).unwrap().is_none());
    // Through the encoder, the metadata sizes are the downscaled ones.
    let e = RgbImageEncoder {
        max_resolution: Some(128),
        ..Default::default()
    }
    .encode(&img, &mut rng())
    .unwrap();
    assert_eq!((e.width, e.height, e.data.len()), (128, 85, 128 * 85 * 3));
    // A side that would become zero is an error.
    let thin = gradient(400, 1);
    assert!(downscale_to_max_resolution(&thin, 100).is_err());
}

#[test]
fn images_wider_than_u16_need_max_resolution() {
    let img = RgbImage::new(70000, 1, vec![9u8; 70000 * 3]).unwrap();
    let err = RgbImageEncoder::default()
        .encode(&img, &mut rng())
        .unwrap_err();
    assert!(matches!(err, ImageError::BadSize { .. }), "{err}");
}

#[test]
fn rgb_image_checks_its_buffer() {
    assert!(RgbImage::new(2, 2, vec![0; 11]).is_err());
    assert!(RgbImage::new(0, 2, vec![]).is_err());
    assert!(RgbImage::new(2, 2, vec![0; 12]).is_ok());
}

fn png_bytes(img: &RgbImage, color: png::ColorType) -> Vec<u8> {
    let data: Vec<u8> = match color {
        png::ColorType::Rgb => img.pixels().to_vec(),
        png::ColorType::Rgba => img
            .pixels()
            .chunks(3)
            .flat_map(|p| [p[0], p[1], p[2], 77])
            .collect(),
        png::ColorType::Grayscale => img.pixels().chunks(3).map(|p| p[0]).collect(),
        _ => unreachable!(),
    };
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, img.width(), img.height());
    enc.set_color(color);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header().unwrap().write_image_data(&data).unwrap();
    out
}

#[test]
fn png_and_jpeg_files_read_to_rgb() {
    let img = gradient(23, 17);
    let dir = std::env::temp_dir().join(format!("ffcv-image-encode-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // RGB and RGBA PNGs read back exactly (alpha dropped).
    for color in [png::ColorType::Rgb, png::ColorType::Rgba] {
        let path = dir.join(format!("{color:?}.png"));
        std::fs::write(&path, png_bytes(&img, color)).unwrap();
        assert_eq!(read_image_file(&path).unwrap(), img);
    }
    // Grayscale expands to three equal channels.
    let gray = read_image_bytes(&png_bytes(&img, png::ColorType::Grayscale)).unwrap();
    for (g, p) in gray.pixels().chunks(3).zip(img.pixels().chunks(3)) {
        assert_eq!(g, [p[0], p[0], p[0]]);
    }
    // A JPEG file decodes to its size, close to the source.
    let e = RgbImageEncoder {
        write_mode: WriteMode::Jpg,
        ..Default::default()
    }
    .encode(&img, &mut rng())
    .unwrap();
    let path = dir.join("a.jpg");
    std::fs::write(&path, &e.data).unwrap();
    let back = read_image_file(&path).unwrap();
    assert_eq!((back.width(), back.height()), (23, 17));
    // Errors name the file.
    std::fs::write(dir.join("x.gif"), b"GIF89a....").unwrap();
    let err = read_image_file(dir.join("x.gif")).unwrap_err();
    assert!(
        err.to_string().contains("x.gif") && err.to_string().contains("not a JPEG or PNG"),
        "{err}"
    );
    let err = read_image_file(dir.join("missing.png")).unwrap_err();
    assert!(matches!(err, ImageError::Io { .. }), "{err}");
    let mut truncated = png_bytes(&img, png::ColorType::Rgb);
    truncated.truncate(truncated.len() / 2);
    assert!(read_image_bytes(&truncated).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn synthetic_images_are_deterministic_and_in_range() {
    let spec = SyntheticImageSpec {
        min_side: 40,
        max_side: 72,
    };
    let a = synthetic_image(3, 10, spec).unwrap();
    assert_eq!(a, synthetic_image(3, 10, spec).unwrap());
    assert_ne!(a, synthetic_image(3, 11, spec).unwrap());
    assert_ne!(a, synthetic_image(4, 10, spec).unwrap());
    let mut sizes = std::collections::BTreeSet::new();
    for i in 0..40 {
        let img = synthetic_image(1, i, spec).unwrap();
        assert!((40..=72).contains(&img.width()) && (40..=72).contains(&img.height()));
        sizes.insert((img.width(), img.height()));
    }
    assert!(sizes.len() > 20, "sizes vary: {}", sizes.len());
    let (jpeg, w, h) = synthetic_jpeg(3, 10, spec, 90).unwrap();
    assert_eq!((w, h), (a.width(), a.height()));
    let mut out = vec![0u8; (w * h * 3) as usize];
    JpegDecoder::new().decode_into(&jpeg, &mut out).unwrap();
    // The +-8 noise is what JPEG loses most; a channel mix-up would be far off.
    let (mean, _) = channel_diff(&out, a.pixels());
    assert!(mean.iter().all(|&m| m < 10.0), "{mean:?}");
    assert_eq!(synthetic_jpeg(3, 10, spec, 90).unwrap().0, jpeg);
}

/// Encoded images written by beton-io's DatasetWriter read back with the
/// right metadata mode and sizes, and decode to what was encoded.
#[test]
fn encoded_images_round_trip_through_a_beton_file() {
    use beton_io::{
        DatasetWriter, FieldMetadata, FieldSpec, FieldType, FieldValue, Reader, from_fn,
    };
    let dir = std::env::temp_dir().join(format!("ffcv-image-beton-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("images.beton");
    let spec = SyntheticImageSpec {
        min_side: 20,
        max_side: 60,
    };
    let encoder = RgbImageEncoder {
        write_mode: WriteMode::Smart {
            threshold: Some(6000),
        },
        ..Default::default()
    };
    let encoded = |i: u64| {
        let img = synthetic_image(9, i, spec).unwrap();
        encoder.encode(&img, &mut rng()).unwrap()
    };
    DatasetWriter::new(&path, vec![FieldSpec::new("image", FieldType::RgbImage)])
        .unwrap()
        .write(&from_fn(12, |i| Ok(vec![FieldValue::from(encoded(i))])))
        .unwrap();
    let reader = Reader::open(&path).unwrap();
    let (mut raw, mut jpg) = (0, 0);
    let mut decoder = JpegDecoder::new();
    for i in 0..12u64 {
        let e = encoded(i);
        let FieldMetadata::RgbImage {
            mode,
            width,
            height,
            data_ptr,
        } = reader.metadata(i, 0).unwrap()
        else {
            panic!("not an image");
        };
        assert_eq!(
            (ImageMode::from_byte(mode), width, height),
            (Some(e.mode), e.width, e.height)
        );
        let data = reader.data_at(data_ptr).unwrap();
        assert_eq!(data, &e.data[..]);
        let pixels = usize::from(width) * usize::from(height) * 3;
        if e.mode == ImageMode::Jpeg {
            jpg += 1;
            let mut out = vec![0u8; pixels];
            decoder.decode_into(data, &mut out).unwrap();
        } else {
            raw += 1;
            assert_eq!(data.len(), pixels);
        }
    }
    assert!(
        raw > 0 && jpg > 0,
        "smart threshold splits the set: {raw} raw, {jpg} jpg"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
