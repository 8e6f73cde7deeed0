//! A crop decoder with flip / normalize / convert / CHW folded into its output pass gives
//! the same batches, bit for bit, as the same pipeline run step by step, compiled or
//! interpreted, on photographs and on synthetic images of many sizes (every resize path:
//! area, integer blocks, upscaling).

use std::path::{Path, PathBuf};

use ffcv::decode::{CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder};
use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, RgbImage, from_fn};
use ffcv::image::{JpegFrame, SyntheticImageSpec, synthetic_jpeg};
use ffcv::jit::ElemType;
use ffcv::jit::ops::{Convert, Cutout, NormalizeImage, RandomHorizontalFlip, Scale, ToChw};
use ffcv::{Loader, PipelineSpec};

const PHOTOS: &[&str] = &["astronaut.jpg", "chelsea.jpg", "coffee.jpg", "rocket.jpg"];

/// 40 JPEG samples: the four test photographs (several times each, so the random crops
/// and flips differ) and synthetic images of 16 to 300 pixels a side.
fn write_photos(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rgb-image/tests/data/photos");
    let mut images: Vec<(Vec<u8>, u16, u16)> = Vec::new();
    for name in PHOTOS {
        let bytes = std::fs::read(root.join(name)).unwrap();
        let (width, height) = {
            let frame = JpegFrame::find(&bytes).unwrap();
            (frame.width, frame.height)
        };
        images.push((bytes, width, height));
    }
    let spec = SyntheticImageSpec {
        min_side: 16,
        max_side: 300,
    };
    for i in 0..8 {
        let (bytes, w, h) = synthetic_jpeg(3, i, spec, 90).unwrap();
        images.push((bytes, w as u16, h as u16));
    }
    let path = dir.join("photos.beton");
    DatasetWriter::new(&path, vec![FieldSpec::new("image", FieldType::RgbImage)])
        .unwrap()
        .write(&from_fn(40, |i| {
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

fn imagenet(dtype: ElemType) -> NormalizeImage {
    NormalizeImage {
        mean: vec![0.485 * 255.0, 0.456 * 255.0, 0.406 * 255.0],
        std: vec![0.229 * 255.0, 0.224 * 255.0, 0.225 * 255.0],
        dtype,
    }
}

/// Two epochs of the field's bytes, batch after batch.
fn run(path: &Path, spec: PipelineSpec, compile: bool, workers: i64) -> Vec<u8> {
    let mut loader = Loader::builder(path)
        .batch_size(6)
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

/// The fused pipeline (`fuse(true)`) against the same pipeline unfused (the default),
/// compiled and interpreted.
fn check(path: &Path, make: impl Fn() -> PipelineSpec) {
    let fused = run(path, make().fuse(true), true, 2);
    assert_eq!(fused, run(path, make(), true, 2), "{:?}", make());
    assert_eq!(fused, run(path, make(), false, 1), "{:?}", make());
    let interpreted = run(path, make().fuse(true), false, 1);
    assert_eq!(fused, interpreted, "{:?}", make());
}

#[test]
fn the_imagenet_chain_folded_into_the_resizer_equals_it_step_by_step() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_photos(dir.path());
    for dtype in [ElemType::F32, ElemType::F16] {
        check(&path, || {
            PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((224, 224)))
                .then(RandomHorizontalFlip(0.5))
                .then(imagenet(dtype))
                .then(ToChw)
        });
    }
}

#[test]
fn every_foldable_prefix_equals_it_step_by_step() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_photos(dir.path());
    let rrc = || RandomResizedCropRGBImageDecoder::new((48, 64));
    let center = || CenterCropRGBImageDecoder::new((40, 40), 224.0 / 256.0);
    // HWC normalize, no flip.
    check(&path, || {
        PipelineSpec::new(rrc()).then(imagenet(ElemType::F64))
    });
    // Flip and CHW on u8 (the identity table).
    check(&path, || {
        PipelineSpec::new(center())
            .then(RandomHorizontalFlip(0.5))
            .then(ToChw)
    });
    // Convert instead of normalize; a flip that always fires; CHW.
    check(&path, || {
        PipelineSpec::new(rrc())
            .then(Convert(ElemType::F32))
            .then(RandomHorizontalFlip(1.0))
            .then(ToChw)
    });
    // A deterministic transform after the folded prefix stays a step of its own.
    check(&path, || {
        PipelineSpec::new(rrc())
            .then(RandomHorizontalFlip(0.5))
            .then(imagenet(ElemType::F32))
            .then(Scale { mul: 2.0, add: 1.0 })
    });
    // A random transform after the prefix keeps its position: nothing is folded, and the
    // batches still agree.
    check(&path, || {
        PipelineSpec::new(rrc())
            .then(RandomHorizontalFlip(0.5))
            .then(Cutout {
                size: 8,
                fill: vec![0.0],
            })
            .then(imagenet(ElemType::F32))
    });
}

#[test]
fn a_folded_pipeline_declares_the_transforms_output() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_photos(dir.path());
    let loader = Loader::builder(&path)
        .batch_size(4)
        .pipeline(
            "image",
            PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((32, 24)))
                .then(RandomHorizontalFlip(0.5))
                .then(imagenet(ElemType::F16))
                .then(ToChw)
                .fuse(true),
        )
        .build()
        .unwrap();
    let outputs = loader.outputs();
    let info = outputs.iter().find(|o| o.name == "image").unwrap();
    assert_eq!(info.shape, vec![3, 32, 24]);
    assert_eq!(info.dtype.descr(), "<f2");
    assert_eq!(info.row_bytes, 3 * 32 * 24 * 2);
}

#[test]
fn dct_downscaled_crops_fold_and_stay_close_to_the_exact_crops() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_photos(dir.path());
    // Folded or not, compiled or interpreted, one worker or two: the same pixels.
    check(&path, || {
        PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((64, 64)).dct_downscale(true))
            .then(RandomHorizontalFlip(0.5))
            .then(imagenet(ElemType::F32))
            .then(ToChw)
    });
    let exact = run(
        &path,
        PipelineSpec::new(CenterCropRGBImageDecoder::new((56, 56), 0.875)),
        true,
        2,
    );
    let centre = || CenterCropRGBImageDecoder::new((56, 56), 0.875).dct_downscale(true);
    let reduced = run(&path, PipelineSpec::new(centre()), true, 2);
    assert_eq!(
        reduced,
        run(&path, PipelineSpec::new(centre()).fuse(true), false, 1)
    );
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
