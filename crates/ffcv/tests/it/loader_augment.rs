//! Augmentation through the loader: RandomResizedCrop + flip + cutout give the same batches
//! for 1 and 4 threads (and compiled or interpreted) with one seed, other batches with
//! another seed or in another epoch; the FFCV-named transforms compute what FFCV does.

use ffcv::decode::{CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder};
use ffcv::jit::ElemType;
use ffcv::transforms::{self, IMAGENET_MEAN, IMAGENET_STD, ReplaceLabel};
use ffcv::{Loader, Order, PipelineSpec};

fn fixture(name: &str) -> String {
    format!(
        "{}/../../tests/fixtures/ffcv-1.0.2/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Per epoch, per sample id (in id order): the augmented image bytes.
fn augmented(workers: i64, compile: bool, seed: u64, epochs: usize) -> Vec<Vec<Vec<u8>>> {
    let image = PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((24, 20)))
        .then(transforms::random_horizontal_flip(0.5).unwrap())
        .then(transforms::cutout(6, [255, 0, 128]));
    let mut loader = Loader::builder(fixture("images_jpg.beton"))
        .batch_size(5)
        .drop_last(false)
        .order(Order::Random)
        .num_workers(workers)
        .compile(compile)
        .seed(seed)
        .pipeline("image", image)
        .build()
        .unwrap();
    (0..epochs)
        .map(|_| {
            let mut rows = vec![Vec::new(); 24];
            for batch in loader.iter() {
                let batch = batch.unwrap();
                let img = batch.get::<u8>("image").unwrap();
                assert_eq!(img.shape(), &[batch.len(), 24, 20, 3]);
                for (row, &s) in batch.sample_ids().iter().enumerate() {
                    let n = 24 * 20 * 3;
                    rows[s as usize] = img.as_slice()[row * n..(row + 1) * n].to_vec();
                }
            }
            assert!(rows.iter().all(|r| !r.is_empty()), "every sample once");
            rows
        })
        .collect()
}

#[test]
fn random_crop_flip_cutout_do_not_depend_on_threads_or_the_compiler() {
    let one = augmented(1, true, 7, 2);
    assert_eq!(one, augmented(4, true, 7, 2), "1 vs 4 threads");
    assert_eq!(one, augmented(4, false, 7, 2), "compiled vs interpreted");
    // Another seed gives other crops, and so does the next epoch.
    let other = augmented(1, true, 8, 1);
    let differing = (0..24).filter(|&s| other[0][s] != one[0][s]).count();
    assert!(
        differing >= 20,
        "only {differing} of 24 samples changed with the seed"
    );
    let next = (0..24).filter(|&s| one[1][s] != one[0][s]).count();
    assert!(next >= 20, "only {next} of 24 samples changed in epoch 1");
    // The cutout's fill colour is present in every image (a 6x6 square inside 24x20).
    for (s, img) in one[0].iter().enumerate() {
        let filled = img.chunks(3).filter(|p| p == &[255, 0, 128]).count();
        assert!(filled >= 36, "sample {s}: {filled} fill pixels");
    }
}

/// The center-crop rows of every sample, in id order.
fn center_crops() -> Vec<Vec<u8>> {
    let mut loader = Loader::builder(fixture("images_jpg.beton"))
        .batch_size(24)
        .drop_last(false)
        .pipeline(
            "image",
            PipelineSpec::new(CenterCropRGBImageDecoder::new((32, 32), 0.875)),
        )
        .build()
        .unwrap();
    let batch = loader.iter().next().unwrap().unwrap();
    let img = batch.get::<u8>("image").unwrap();
    (0..24)
        .map(|r| img.as_slice()[r * 3072..(r + 1) * 3072].to_vec())
        .collect()
}

#[test]
fn normalize_then_to_torch_image_is_ffcvs_arithmetic_in_chw() {
    let crops = center_crops();
    let image = PipelineSpec::new(CenterCropRGBImageDecoder::new((32, 32), 0.875))
        .then(transforms::normalize_image(IMAGENET_MEAN, IMAGENET_STD, ElemType::F32).unwrap())
        .then(transforms::to_torch_image());
    let mut loader = Loader::builder(fixture("images_jpg.beton"))
        .batch_size(8)
        .drop_last(false)
        .num_workers(2)
        .pipeline("image", image)
        .pipeline(
            "label",
            PipelineSpec::new(ffcv::decode::IntDecoder).then(transforms::squeeze()),
        )
        .build()
        .unwrap();
    for batch in loader.iter() {
        let batch = batch.unwrap();
        let out = batch.get::<f32>("image").unwrap();
        assert_eq!(out.shape(), &[batch.len(), 3, 32, 32]);
        assert_eq!(batch.get::<i64>("label").unwrap().shape(), &[batch.len()]);
        for (row, &s) in batch.sample_ids().iter().enumerate() {
            let src = &crops[s as usize];
            for c in 0..3 {
                for y in 0..32 {
                    for x in 0..32 {
                        let v = f64::from(src[(y * 32 + x) * 3 + c]);
                        let want = ((v - IMAGENET_MEAN[c]) / IMAGENET_STD[c]) as f32;
                        let got = out[((row * 3 + c) * 32 + y) * 32 + x];
                        assert_eq!(got.to_bits(), want.to_bits(), "sample {s} c{c} y{y} x{x}");
                    }
                }
            }
        }
    }
}

#[test]
fn replace_label_changes_only_the_listed_samples() {
    let poisoned = [3u64, 4, 17];
    let run = |compile: bool, workers: i64| {
        let mut loader = Loader::builder(fixture("images_raw.beton"))
            .batch_size(7)
            .drop_last(false)
            .order(Order::Random)
            .seed(3)
            .compile(compile)
            .num_workers(workers)
            .disable("image")
            .pipeline(
                "label",
                PipelineSpec::new(ffcv::decode::IntDecoder)
                    .then(ReplaceLabel::new(poisoned, -5))
                    .then(transforms::squeeze()),
            )
            .build()
            .unwrap();
        let mut seen = 0;
        for batch in loader.iter() {
            let batch = batch.unwrap();
            let label = batch.get::<i64>("label").unwrap();
            let index = batch.get::<i64>("index").unwrap();
            for (row, &s) in batch.sample_ids().iter().enumerate() {
                assert_eq!(index[row], s as i64);
                let plain = expected_label(s);
                let want = if poisoned.contains(&s) { -5 } else { plain };
                assert_eq!(label[row], want, "sample {s}");
                seen += 1;
            }
        }
        assert_eq!(seen, 50);
    };
    run(true, 2);
    run(false, 1);
}

/// The recorded label of a sample of `images_raw`.
fn expected_label(sample: u64) -> i64 {
    let text = std::fs::read_to_string(fixture("images_raw.expected.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let labels = v["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "label")
        .unwrap()["values"]
        .as_array()
        .unwrap()
        .clone();
    labels[sample as usize].as_i64().unwrap()
}

#[test]
fn replace_label_refuses_rows_that_are_not_one_integer() {
    let err = Loader::builder(fixture("images_raw.beton"))
        .batch_size(7)
        .pipeline(
            "image",
            PipelineSpec::new(ffcv::decode::SimpleRGBImageDecoder).then(ReplaceLabel::new([1], 0)),
        )
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("one label per sample"), "{err}");
}

/// The stored pixels of every `images_raw` sample, in id order.
fn raw_images() -> Vec<Vec<u8>> {
    let mut loader = Loader::builder(fixture("images_raw.beton"))
        .batch_size(50)
        .drop_last(false)
        .pipeline(
            "image",
            PipelineSpec::new(ffcv::decode::SimpleRGBImageDecoder),
        )
        .build()
        .unwrap();
    let batch = loader.iter().next().unwrap().unwrap();
    let img = batch.get::<u8>("image").unwrap();
    (0..50)
        .map(|r| img.as_slice()[r * 3072..(r + 1) * 3072].to_vec())
        .collect()
}

#[test]
fn poison_blends_the_mask_into_the_listed_samples_only() {
    let plain = raw_images();
    // A white square in the top-left 8x8 at opacity 0.5, elsewhere opacity 0.
    let mut mask = vec![0.0; 32 * 32 * 3];
    let mut alpha = vec![0.0; 32 * 32];
    for y in 0..8 {
        for x in 0..8 {
            alpha[y * 32 + x] = 0.5;
            mask[(y * 32 + x) * 3..(y * 32 + x) * 3 + 3].fill(255.0);
        }
    }
    let poisoned = [0u64, 9, 31];
    let poison = transforms::Poison::new(32, 32, &mask, &alpha, poisoned, (0.0, 255.0)).unwrap();
    let mut loader = Loader::builder(fixture("images_raw.beton"))
        .batch_size(8)
        .drop_last(false)
        .num_workers(2)
        .pipeline(
            "image",
            PipelineSpec::new(ffcv::decode::SimpleRGBImageDecoder).then(poison),
        )
        .build()
        .unwrap();
    for batch in loader.iter() {
        let batch = batch.unwrap();
        let img = batch.get::<u8>("image").unwrap();
        for (row, &s) in batch.sample_ids().iter().enumerate() {
            let got = &img.as_slice()[row * 3072..(row + 1) * 3072];
            let src = &plain[s as usize];
            if !poisoned.contains(&s) {
                assert_eq!(got, &src[..], "sample {s} unchanged");
                continue;
            }
            for k in 0..3072 {
                let (y, x) = (k / 3 / 32, k / 3 % 32);
                // x * 0.5 + 127.5, truncated; pixels outside the square keep their value.
                let want = if y < 8 && x < 8 {
                    (f64::from(src[k]) * 0.5 + 127.5) as u8
                } else {
                    src[k]
                };
                assert_eq!(got[k], want, "sample {s} element {k}");
            }
        }
    }
    assert!(transforms::Poison::new(4, 4, &mask, &alpha, [0], (0.0, 255.0)).is_err());
}
