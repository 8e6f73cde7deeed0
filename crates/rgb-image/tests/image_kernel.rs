//! The per-sample image decoder kernel on both FFCV image fixtures:
//! `SimpleRGBImageDecoder` over raw images and `CenterCropRGBImageDecoder`
//! over JPEGs reproduce the recorded loader outputs exactly.

mod image_support;

use beton_io::{FieldMetadata, Reader};
use image_support::{FIXTURES, b64};
use rand_core::SeedableRng;
use rand_pcg::Pcg64Mcg;
use rgb_image::{RandomResizedCrop, RgbDecoderKernel, RgbDecoderKind};
use serde_json::Value;

fn fixture(name: &str) -> (Reader, Vec<Vec<u8>>) {
    let reader = Reader::open(format!("{FIXTURES}/{name}.beton")).unwrap();
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/{name}.expected.json")).unwrap(),
    )
    .unwrap();
    let out = doc["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "image")
        .unwrap();
    let samples = out["samples"].as_array().unwrap();
    (
        reader,
        samples
            .iter()
            .map(|s| b64(s["b64"].as_str().unwrap()))
            .collect(),
    )
}

fn meta(reader: &Reader, sample: u64) -> (u8, u16, u16, &[u8]) {
    let field = reader.field_index("image").unwrap();
    let FieldMetadata::RgbImage {
        mode,
        width,
        height,
        data_ptr,
    } = reader.metadata(sample, field).unwrap()
    else {
        panic!("not an image field");
    };
    (mode, width, height, reader.data_at(data_ptr).unwrap())
}

#[test]
fn simple_decoder_reproduces_images_raw() {
    let (reader, expected) = fixture("images_raw");
    assert_eq!(expected.len(), 50);
    let mut kernel = RgbDecoderKernel::new();
    let mut out = vec![0u8; 32 * 32 * 3];
    let mut rng = Pcg64Mcg::seed_from_u64(0);
    for (i, exp) in expected.iter().enumerate() {
        let (mode, w, h, data) = meta(&reader, i as u64);
        assert_eq!(mode, 1);
        kernel
            .decode_sample(
                &RgbDecoderKind::Simple,
                mode,
                w,
                h,
                data,
                &mut rng,
                &mut out,
                32,
                32,
            )
            .unwrap();
        assert_eq!(&out, exp, "sample {i}");
    }
}

#[test]
fn center_crop_decoder_reproduces_images_jpg() {
    let (reader, expected) = fixture("images_jpg");
    let kind = RgbDecoderKind::CenterCrop {
        ratio: 224.0 / 256.0,
    };
    let mut kernel = RgbDecoderKernel::new();
    let mut out = vec![0u8; 32 * 32 * 3];
    let mut rng = Pcg64Mcg::seed_from_u64(0);
    for (i, exp) in expected.iter().enumerate() {
        let (mode, w, h, data) = meta(&reader, i as u64);
        kernel
            .decode_sample(&kind, mode, w, h, data, &mut rng, &mut out, 32, 32)
            .unwrap();
        assert_eq!(&out, exp, "sample {i}");
    }
}

#[test]
fn random_resized_crop_is_reproducible_per_seed() {
    let (reader, _) = fixture("images_jpg");
    let kind = RgbDecoderKind::RandomResizedCrop(RandomResizedCrop::default());
    let run = |seed: u64| {
        let mut kernel = RgbDecoderKernel::new();
        let mut all = Vec::new();
        for i in 0..24u64 {
            // A generator per sample, as the loader derives from (seed, epoch, sample).
            let mut rng = Pcg64Mcg::seed_from_u64(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let (mode, w, h, data) = meta(&reader, i);
            let mut out = vec![0u8; 24 * 40 * 3];
            kernel
                .decode_sample(&kind, mode, w, h, data, &mut rng, &mut out, 24, 40)
                .unwrap();
            all.push(out);
        }
        all
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn bad_metadata_and_payloads_are_errors() {
    let (reader, _) = fixture("images_jpg");
    let (mode, w, h, data) = meta(&reader, 0);
    let mut kernel = RgbDecoderKernel::new();
    let mut out = vec![0u8; 32 * 32 * 3];
    let mut rng = Pcg64Mcg::seed_from_u64(0);
    let cc = RgbDecoderKind::CenterCrop { ratio: 0.875 };
    let mut call = |kind: &RgbDecoderKind, mode, w, h, data: &[u8], oh, ow| {
        kernel.decode_sample(kind, mode, w, h, data, &mut rng, &mut out, oh, ow)
    };
    // Metadata size disagreeing with the JPEG header.
    assert!(call(&cc, mode, w + 1, h, data, 32, 32).is_err());
    // Unknown mode byte.
    assert!(call(&cc, 7, w, h, data, 32, 32).is_err());
    // Raw payload of the wrong length.
    assert!(call(&cc, 1, w, h, &data[..10], 32, 32).is_err());
    // Simple decoder with a size other than the output.
    assert!(call(&RgbDecoderKind::Simple, mode, w, h, data, 32, 32).is_err());
    // Output buffer too small for the requested size.
    assert!(call(&cc, mode, w, h, data, 40, 40).is_err());
    // Truncated JPEG.
    assert!(call(&cc, mode, w, h, &data[..data.len() / 2], 32, 32).is_err());
    // The kernel still works after the errors.
    assert!(call(&cc, mode, w, h, data, 32, 32).is_ok());
}
