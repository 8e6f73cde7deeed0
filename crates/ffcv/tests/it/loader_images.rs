//! The image decoders in the loader, end to end over FFCV 1.0.2's image fixtures: every
//! output equals what FFCV recorded, byte for byte (raw images with
//! `SimpleRGBImageDecoder`, JPEGs with `CenterCropRGBImageDecoder((32, 32), 224/256)`),
//! with both caches and 1 or 2 workers; the opt-in DCT-domain downscaling through the
//! loader; and the errors of image decoding.

use base64::Engine as _;
use ffcv::decode::{
    CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder, SimpleRGBImageDecoder,
    parse_field_decoder,
};
use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, RgbImage, from_fn};
use ffcv::{DecoderChoice, Error, Loader, PipelineSpec};
use serde_json::Value;

fn fixture(name: &str) -> String {
    format!(
        "{}/../../tests/fixtures/ffcv-1.0.2/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn expected(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(&format!("{name}.expected.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn output<'a>(expected: &'a Value, name: &str) -> &'a Value {
    expected["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == name)
        .unwrap()
}

/// Loads every sample of `name` with `image` decoding the image field (sequential, batch
/// 7, no drop_last, as the fixtures were recorded) and checks every output against the
/// recorded values.
fn check_fixture(name: &str, image: PipelineSpec, os_cache: bool, workers: i64) {
    let exp = expected(name);
    let images = output(&exp, "image")["samples"].as_array().unwrap();
    let labels = output(&exp, "label")["values"].as_array().unwrap();
    let indices = output(&exp, "index")["values"].as_array().unwrap();
    let mut loader = Loader::builder(fixture(&format!("{name}.beton")))
        .batch_size(7)
        .drop_last(false)
        .os_cache(os_cache)
        .num_workers(workers)
        .pipeline("image", image)
        .build()
        .unwrap();
    let mut seen = 0;
    for batch in loader.iter() {
        let batch = batch.unwrap();
        let img = batch.get::<u8>("image").unwrap();
        assert_eq!(img.shape(), &[batch.len(), 32, 32, 3]);
        let label = batch.get::<i64>("label").unwrap();
        let index = batch.get::<i64>("index").unwrap();
        for (row, &sample) in batch.sample_ids().iter().enumerate() {
            let s = sample as usize;
            let want = base64::engine::general_purpose::STANDARD
                .decode(images[s]["b64"].as_str().unwrap())
                .unwrap();
            let got = &img.as_slice()[row * 3072..(row + 1) * 3072];
            assert!(
                got == &want[..],
                "{name} sample {sample} image differs (os_cache {os_cache}, workers {workers})"
            );
            assert_eq!(label[row], labels[s].as_i64().unwrap(), "label of {sample}");
            assert_eq!(
                index[row],
                indices[s].as_i64().unwrap(),
                "index of {sample}"
            );
            seen += 1;
        }
    }
    assert_eq!(seen, images.len());
}

#[test]
fn raw_images_with_simple_decoder_equal_ffcv() {
    for os_cache in [true, false] {
        for workers in [1, 2] {
            check_fixture(
                "images_raw",
                PipelineSpec::new(SimpleRGBImageDecoder),
                os_cache,
                workers,
            );
        }
    }
}

#[test]
fn raw_images_with_the_default_decoder_equal_ffcv() {
    // No pipeline given: RGB image fields default to SimpleRGBImageDecoder, as in FFCV.
    let exp = expected("images_raw");
    let samples = exp["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "image")
        .unwrap()["samples"]
        .as_array()
        .unwrap()
        .clone();
    let mut loader = Loader::builder(fixture("images_raw.beton"))
        .batch_size(7)
        .drop_last(false)
        .build()
        .unwrap();
    let mut seen = 0;
    for batch in loader.iter() {
        let batch = batch.unwrap();
        let image = batch.get::<u8>("image").unwrap();
        assert_eq!(&image.shape()[1..], &[32, 32, 3]);
        for (row, &sample) in batch.sample_ids().iter().enumerate() {
            let want = base64::engine::general_purpose::STANDARD
                .decode(samples[sample as usize]["b64"].as_str().unwrap())
                .unwrap();
            let got = &image.as_slice()[row * 3072..(row + 1) * 3072];
            assert!(got == &want[..], "sample {sample} differs");
            seen += 1;
        }
    }
    assert_eq!(seen, samples.len());
}

#[test]
fn jpeg_center_crop_equals_ffcv_bit_for_bit() {
    for os_cache in [true, false] {
        for workers in [1, 2] {
            let d = CenterCropRGBImageDecoder::new((32, 32), 224.0 / 256.0);
            check_fixture("images_jpg", PipelineSpec::new(d), os_cache, workers);
        }
    }
}

#[test]
fn decoder_specs_parse_to_the_same_decoders() {
    let (field, choice) = parse_field_decoder("image=center-crop:32x32:0.875").unwrap();
    assert_eq!(field, "image");
    let DecoderChoice::Decoder(d) = choice else {
        panic!("expected a decoder")
    };
    check_fixture("images_jpg", PipelineSpec::from_arc(d), true, 2);
    // The default ratio is FFCV's 224/256 = 0.875.
    let DecoderChoice::Decoder(d) = "center-crop:32x32".parse::<DecoderChoice>().unwrap() else {
        panic!("expected a decoder")
    };
    check_fixture("images_jpg", PipelineSpec::from_arc(d), false, 1);
    let DecoderChoice::Decoder(d) = "simple".parse::<DecoderChoice>().unwrap() else {
        panic!("expected a decoder")
    };
    check_fixture("images_raw", PipelineSpec::from_arc(d), true, 1);
    let DecoderChoice::Decoder(d) = "random-resized-crop:24x16:0.5,1:1,1"
        .parse::<DecoderChoice>()
        .unwrap()
    else {
        panic!("expected a decoder")
    };
    assert_eq!(d.name(), "RandomResizedCropRGBImageDecoder");
    assert!(!d.dct_downscale());
    // A last `dct-scale` word turns on the opt-in DCT-domain downscaling.
    for spec in [
        "center-crop:32x32:dct-scale",
        "center-crop:32x32:0.875:DCT-Scale",
        "random-resized-crop:24x16:dct-scale",
        "random-resized-crop:24x16:0.5,1:1,1:dct-scale",
    ] {
        let DecoderChoice::Decoder(d) = spec.parse::<DecoderChoice>().unwrap() else {
            panic!("expected a decoder")
        };
        assert!(d.dct_downscale(), "{spec}");
    }
}

#[test]
fn malformed_decoder_specs_are_refused_with_the_reason() {
    for (spec, reason) in [
        ("center-crop", "needs an output size"),
        ("center-crop:32", "not HxW"),
        ("center-crop:0x32", "zero side"),
        ("center-crop:32x32:-1", "not a positive number"),
        ("center-crop:32x32:1:2", "at most 2"),
        ("random-resized-crop:8x8:1,0.5", "LO above HI"),
        ("random-resized-crop:8x8:0.5", "not LO,HI"),
        ("simple:3", "at most 0"),
        ("simple:dct-scale", "not simple"),
        ("center-crop:32x32:dct-scale:0.9", "not a positive number"),
        ("center-crop:32x32:0.9:1:dct-scale", "at most 2"),
        ("random-resized-crop:8x8:dct", "not LO,HI"),
        ("int:3", "takes no parameters"),
        ("sharpen", "no decoder has this name"),
    ] {
        let err = spec.parse::<DecoderChoice>().unwrap_err();
        assert!(err.to_string().contains(reason), "{spec}: {err}");
        assert_eq!(err.spec, spec);
    }
    let err = parse_field_decoder("center-crop:32x32").unwrap_err();
    assert!(err.to_string().contains("FIELD=SPEC"), "{err}");
}

#[test]
fn simple_decoder_refuses_images_of_varying_sizes_at_build_time() {
    let err = Loader::builder(fixture("images_jpg.beton"))
        .batch_size(4)
        .pipeline("image", PipelineSpec::new(SimpleRGBImageDecoder))
        .build()
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("images_jpg.beton"), "{text}");
    assert!(text.contains("image"), "{text}");
    assert!(text.contains("one size"), "{text}");
}

#[test]
fn image_decoders_refuse_non_image_fields() {
    let err = Loader::builder(fixture("images_raw.beton"))
        .batch_size(4)
        .pipeline(
            "label",
            PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((8, 8))),
        )
        .disable("image")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("RGBImageField"), "{err}");
}

/// 20 JPEG samples (16x16, made by the image module), sample `bad` holding garbage.
fn write_with_corrupt_jpeg(dir: &std::path::Path, bad: u64) -> std::path::PathBuf {
    let path = dir.join("corrupt.beton");
    let spec = ffcv::image::SyntheticImageSpec {
        min_side: 16,
        max_side: 16,
    };
    let (good, w, h) = ffcv::image::synthetic_jpeg(7, 0, spec, 90).unwrap();
    assert_eq!((w, h), (16, 16));
    DatasetWriter::new(
        &path,
        vec![
            FieldSpec::new("image", FieldType::RgbImage),
            FieldSpec::new("label", FieldType::Int),
        ],
    )
    .unwrap()
    .write(&from_fn(20, |i| {
        let bytes = if i == bad {
            // A JPEG start marker, then noise.
            let mut b = vec![0xFF, 0xD8, 0xFF, 0xDB];
            b.extend((0..400u32).map(|k| (k.wrapping_mul(2_654_435_761) >> 13) as u8));
            b
        } else {
            good.clone()
        };
        Ok(vec![
            FieldValue::RgbImage(RgbImage::Jpeg {
                width: 16,
                height: 16,
                bytes,
            }),
            FieldValue::Int(i as i64),
        ])
    }))
    .unwrap();
    path
}

#[test]
fn a_corrupt_jpeg_ends_the_epoch_with_an_error_naming_field_and_sample() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_with_corrupt_jpeg(dir.path(), 13);
    for workers in [1, 2] {
        let mut loader = Loader::builder(&path)
            .batch_size(4)
            .num_workers(workers)
            .pipeline(
                "image",
                PipelineSpec::new(CenterCropRGBImageDecoder::new((8, 8), 1.0)),
            )
            .build()
            .unwrap();
        let results: Vec<_> = loader.iter().collect();
        // Batches 0..3 decode; batch 3 (samples 12..16) fails, and the epoch ends there.
        assert_eq!(results.len(), 4, "workers {workers}");
        assert!(results[..3].iter().all(Result::is_ok));
        let err = results[3].as_ref().unwrap_err();
        match err {
            Error::Decode {
                field,
                sample,
                decoder,
                ..
            } => {
                assert_eq!(field, "image");
                assert_eq!(*sample, 13);
                assert_eq!(decoder, "CenterCropRGBImageDecoder");
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
        assert!(err.to_string().contains("sample 13"), "{err}");
    }
}

/// The four test photographs, each three times (so the random crops differ).
fn write_photos(dir: &std::path::Path) -> std::path::PathBuf {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rgb-image/tests/data/photos");
    let mut images = Vec::new();
    for name in ["astronaut.jpg", "chelsea.jpg", "coffee.jpg", "rocket.jpg"] {
        let bytes = std::fs::read(root.join(name)).unwrap();
        let (width, height) = {
            let frame = ffcv::image::JpegFrame::find(&bytes).unwrap();
            (frame.width, frame.height)
        };
        images.push((bytes, width, height));
    }
    let path = dir.join("photos.beton");
    DatasetWriter::new(&path, vec![FieldSpec::new("image", FieldType::RgbImage)])
        .unwrap()
        .write(&from_fn(12, |i| {
            let (bytes, width, height) = images[i as usize % images.len()].clone();
            Ok(vec![FieldValue::RgbImage(RgbImage::Jpeg {
                width,
                height,
                bytes,
            })])
        }))
        .unwrap();
    path
}

/// Two epochs of the image field's bytes, batch after batch.
fn image_bytes(path: &std::path::Path, spec: PipelineSpec, compile: bool, workers: i64) -> Vec<u8> {
    let mut loader = Loader::builder(path)
        .batch_size(5)
        .drop_last(false)
        .seed(11)
        .num_workers(workers)
        .compile(compile)
        .pipeline("image", spec)
        .build()
        .unwrap();
    let mut out = Vec::new();
    for _ in 0..2 {
        for batch in loader.iter() {
            out.extend_from_slice(batch.unwrap().output("image").unwrap().bytes());
        }
    }
    out
}

#[test]
fn dct_downscaled_crops_do_not_depend_on_workers_and_stay_close_to_the_exact_crops() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_photos(dir.path());
    let random =
        || PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((64, 64)).dct_downscale(true));
    assert_eq!(
        image_bytes(&path, random(), true, 2),
        image_bytes(&path, random(), false, 1)
    );
    let exact = image_bytes(
        &path,
        PipelineSpec::new(CenterCropRGBImageDecoder::new((56, 56), 0.875)),
        true,
        2,
    );
    let centre =
        || PipelineSpec::new(CenterCropRGBImageDecoder::new((56, 56), 0.875).dct_downscale(true));
    let reduced = image_bytes(&path, centre(), true, 2);
    assert_eq!(reduced, image_bytes(&path, centre(), false, 1));
    // The photos' crops (262 px and up) are reduced, so the pixels move, a little.
    assert_ne!(exact, reduced);
    let sq: f64 = exact
        .iter()
        .zip(&reduced)
        .map(|(&a, &b)| f64::from(a.abs_diff(b)).powi(2))
        .sum();
    let psnr = 10.0 * (255.0f64.powi(2) * exact.len() as f64 / sq).log10();
    assert!(psnr > 27.0, "PSNR {psnr:.2} dB");
}
