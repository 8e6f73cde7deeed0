//! The per-sample image decoder kernel on both FFCV image fixtures:
//! `SimpleRGBImageDecoder` over raw images and `CenterCropRGBImageDecoder`
//! over JPEGs reproduce the recorded loader outputs exactly.

use crate::image_support;
use ffcv_testkit::image_variants;

use beton_io::{FieldMetadata, Reader};
use image_support::{FIXTURES, b64};
use rand_core::SeedableRng;
use rand_pcg::Pcg64Mcg;
use rgb_image::{ImageOut, RandomResizedCrop, RgbDecoderKernel, RgbDecoderKind, StoredImage};
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

/// The stored image of `sample`'s `image` field, as the decoders read it.
fn meta(reader: &Reader, sample: u64) -> StoredImage<'_> {
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
    StoredImage {
        mode,
        width,
        height,
        data: reader.data_at(data_ptr).unwrap(),
    }
}

#[test]
fn simple_decoder_reproduces_images_raw() {
    let (reader, expected) = fixture("images_raw");
    assert_eq!(expected.len(), 50);
    let mut kernel = RgbDecoderKernel::new();
    let mut out = vec![0u8; 32 * 32 * 3];
    let mut rng = Pcg64Mcg::seed_from_u64(0);
    for (i, exp) in expected.iter().enumerate() {
        let image = meta(&reader, i as u64);
        assert_eq!(image.mode, 1);
        kernel
            .decode_sample(
                &RgbDecoderKind::Simple,
                image,
                &mut rng,
                ImageOut {
                    pixels: &mut out,
                    height: 32,
                    width: 32,
                },
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
        let image = meta(&reader, i as u64);
        kernel
            .decode_sample(
                &kind,
                image,
                &mut rng,
                ImageOut {
                    pixels: &mut out,
                    height: 32,
                    width: 32,
                },
            )
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
            let image = meta(&reader, i);
            let mut out = vec![0u8; 24 * 40 * 3];
            kernel
                .decode_sample(
                    &kind,
                    image,
                    &mut rng,
                    ImageOut {
                        pixels: &mut out,
                        height: 24,
                        width: 40,
                    },
                )
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
    let image = meta(&reader, 0);
    let mut kernel = RgbDecoderKernel::new();
    let mut out = vec![0u8; 32 * 32 * 3];
    let mut rng = Pcg64Mcg::seed_from_u64(0);
    let cc = RgbDecoderKind::CenterCrop { ratio: 0.875 };
    let mut call = |kind: &RgbDecoderKind, image: StoredImage<'_>, height, width| {
        let out = ImageOut {
            pixels: &mut out,
            height,
            width,
        };
        kernel.decode_sample(kind, image, &mut rng, out)
    };
    let data = image.data;
    // Metadata size disagreeing with the JPEG header.
    let wider = StoredImage {
        width: image.width + 1,
        ..image
    };
    assert!(call(&cc, wider, 32, 32).is_err());
    // Unknown mode byte.
    assert!(call(&cc, StoredImage { mode: 7, ..image }, 32, 32).is_err());
    // Raw payload of the wrong length.
    let raw = StoredImage {
        mode: 1,
        data: &data[..10],
        ..image
    };
    assert!(call(&cc, raw, 32, 32).is_err());
    // Simple decoder with a size other than the output.
    assert!(call(&RgbDecoderKind::Simple, image, 32, 32).is_err());
    // Output buffer too small for the requested size.
    assert!(call(&cc, image, 40, 40).is_err());
    // Truncated JPEG.
    let cut = StoredImage {
        data: &data[..data.len() / 2],
        ..image
    };
    assert!(call(&cc, cut, 32, 32).is_err());
    // The kernel still works after the errors.
    assert!(call(&cc, image, 32, 32).is_ok());
}

/// The scikit-image photos (4:2:0, and `rocket` 4:4:4) with their sizes (also the
/// views tests').
pub(crate) fn photos() -> Vec<(String, Vec<u8>, u16, u16)> {
    [
        "astronaut",
        "chelsea",
        "coffee",
        "rocket",
        "chelsea_progressive",
    ]
    .iter()
    .map(|name| {
        let path = format!(
            "{}/tests/data/photos/{name}.jpg",
            env!("CARGO_MANIFEST_DIR")
        );
        let jpeg = std::fs::read(&path).unwrap();
        let frame = rgb_image::JpegFrame::find(&jpeg).unwrap();
        let (h, w) = (frame.height, frame.width);
        (name.to_string(), jpeg, h, w)
    })
    .collect()
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let sq: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x.abs_diff(y)).powi(2))
        .sum();
    10.0 * (255.0f64.powi(2) * a.len() as f64 / sq).log10()
}

/// One photo through a kernel with the option `dct` at `out x out`, the generator seeded
/// by `seed`.
fn decode_photo(
    kernel: &mut RgbDecoderKernel,
    dct: bool,
    kind: &RgbDecoderKind,
    (jpeg, h, w): (&[u8], u16, u16),
    seed: u64,
    out: u32,
) -> Vec<u8> {
    kernel.set_dct_downscale(dct);
    let mut pixels = vec![0u8; (out * out * 3) as usize];
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    kernel
        .decode_sample(
            kind,
            StoredImage {
                mode: 0,
                width: w,
                height: h,
                data: jpeg,
            },
            &mut rng,
            ImageOut {
                pixels: &mut pixels,
                height: out,
                width: out,
            },
        )
        .unwrap();
    pixels
}

#[test]
fn dct_downscale_stays_close_to_the_exact_output() {
    let mut kernel = RgbDecoderKernel::new();
    let center = RgbDecoderKind::CenterCrop { ratio: 0.875 };
    let random = RgbDecoderKind::RandomResizedCrop(RandomResizedCrop::default());
    for (name, jpeg, h, w) in photos().iter().filter(|p| p.0 != "chelsea_progressive") {
        let img = (jpeg.as_slice(), *h, *w);
        // Centre crops of these photos are at least 262 px: 1/2 scale at 112, 1/4 at 64,
        // 1/8 at 24. Bounds about 2 dB under the lowest photo's (32.3, 32.1, 23.1 and 37.2
        // dB): at 1/8 a reduced pixel is 8 source pixels, so the crop's rounding to it
        // (up to half of one per edge) shows most.
        let cases = [
            (&center, 112, 0, 30.0),
            (&center, 64, 0, 30.0),
            (&center, 24, 0, 21.0),
            (&random, 64, 3, 35.0),
        ];
        for (kind, out, seed, bound) in cases {
            let exact = decode_photo(&mut kernel, false, kind, img, seed, out);
            let fast = decode_photo(&mut kernel, true, kind, img, seed, out);
            let db = psnr(&exact, &fast);
            // Reduced (the pixels moved) yet close.
            assert!(exact != fast, "{name} {out}: the option did not apply");
            assert!(db > bound, "{name} {kind:?} {out}: PSNR {db:.2} dB");
            // Deterministic: the same sample again gives the same pixels.
            assert_eq!(fast, decode_photo(&mut kernel, true, kind, img, seed, out));
        }
    }
}

#[test]
fn dct_downscale_changes_nothing_where_it_does_not_apply() {
    let mut kernel = RgbDecoderKernel::new();
    let center = RgbDecoderKind::CenterCrop { ratio: 0.875 };
    for (name, jpeg, h, w) in photos() {
        let img = (jpeg.as_slice(), h, w);
        // A 224 output of a crop under 448 px: no reduction keeps 224, so the exact path.
        let exact = decode_photo(&mut kernel, false, &center, img, 0, 224);
        assert_eq!(
            exact,
            decode_photo(&mut kernel, true, &center, img, 0, 224),
            "{name}"
        );
    }
    // A progressive JPEG has no baseline decode here: exact even where a crop would reduce.
    let (_, jpeg, h, w) = photos().pop().unwrap();
    let img = (jpeg.as_slice(), h, w);
    let exact = decode_photo(&mut kernel, false, &center, img, 0, 64);
    assert_eq!(exact, decode_photo(&mut kernel, true, &center, img, 0, 64));
    // Off again after on: FFCV's pixels (the fixture tests above pin those).
    assert!(!RgbDecoderKernel::new().dct_downscale());
}

#[test]
fn dct_downscale_does_not_depend_on_the_thread_count() {
    let photos = photos();
    let random = RgbDecoderKind::RandomResizedCrop(RandomResizedCrop::default());
    let jobs: Vec<(usize, u64)> = (0..photos.len())
        .flat_map(|p| (0..6u64).map(move |s| (p, s)))
        .collect();
    let run = |job: &(usize, u64), kernel: &mut RgbDecoderKernel| {
        let (_, jpeg, h, w) = &photos[job.0];
        decode_photo(kernel, true, &random, (jpeg, *h, *w), job.1, 48)
    };
    let mut one = RgbDecoderKernel::new();
    let serial: Vec<Vec<u8>> = jobs.iter().map(|j| run(j, &mut one)).collect();
    // Four threads, each its own kernel, taking every fourth job from the back.
    let mut parallel = vec![Vec::new(); jobs.len()];
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (jobs, run) = (&jobs, &run);
                s.spawn(move || {
                    let mut kernel = RgbDecoderKernel::new();
                    (0..jobs.len())
                        .rev()
                        .filter(|k| k % 4 == t)
                        .map(|k| (k, run(&jobs[k], &mut kernel)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (k, px) in h.join().unwrap() {
                parallel[k] = px;
            }
        }
    });
    assert_eq!(serial, parallel);
}

#[test]
fn dct_downscale_reports_damaged_jpegs_without_panicking() {
    let center = RgbDecoderKind::CenterCrop { ratio: 0.875 };
    let mut kernel = RgbDecoderKernel::new();
    kernel.set_dct_downscale(true);
    let mut out = vec![0u8; 32 * 32 * 3];
    let mut state = 1u64;
    for (name, jpeg, h, w) in photos().iter().take(4) {
        for k in 0..40usize {
            let mut bad = jpeg.clone();
            // Truncations, and runs of overwritten bytes past the headers.
            if k % 2 == 0 {
                bad.truncate(jpeg.len() * (k + 1) / 42);
            } else {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                let at = 600 + (state >> 33) as usize % (jpeg.len() - 700);
                for b in &mut bad[at..at + 16] {
                    *b ^= (state >> 20) as u8;
                }
            }
            let mut rng = Pcg64Mcg::seed_from_u64(0);
            // An error or some pixels, never a panic or an out-of-bounds write.
            let _ = kernel.decode_sample(
                &center,
                StoredImage {
                    mode: 0,
                    width: *w,
                    height: *h,
                    data: &bad,
                },
                &mut rng,
                ImageOut {
                    pixels: &mut out,
                    height: 32,
                    width: 32,
                },
            );
        }
        // The kernel still decodes the intact photo afterwards.
        let mut rng = Pcg64Mcg::seed_from_u64(0);
        kernel
            .decode_sample(
                &center,
                StoredImage {
                    mode: 0,
                    width: *w,
                    height: *h,
                    data: jpeg,
                },
                &mut rng,
                ImageOut {
                    pixels: &mut out,
                    height: 32,
                    width: 32,
                },
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn dct_downscale_handles_every_baseline_layout() {
    let center = RgbDecoderKind::CenterCrop { ratio: 0.875 };
    let mut kernel = RgbDecoderKernel::new();
    let mut reduced = Vec::new();
    for v in image_variants::variants() {
        // The layouts the loader's decoder reads (the folder also holds CMYK and YCCK,
        // which only the writer's source reader takes).
        let layouts = ["444", "422", "440", "411", "gray", "restart", "progressive"];
        if !layouts.iter().any(|l| v.name == format!("coffee_{l}.jpg")) {
            continue;
        }
        let frame = rgb_image::JpegFrame::find(&v.bytes).unwrap();
        let img = (v.bytes.as_slice(), frame.height, frame.width);
        let exact = decode_photo(&mut kernel, false, &center, img, 0, 64);
        let fast = decode_photo(&mut kernel, true, &center, img, 0, 64);
        if exact != fast {
            let db = psnr(&exact, &fast);
            // coffee at 4:2:0 gives 34 dB here.
            assert!(db > 30.0, "{}: PSNR {db:.2} dB", v.name);
            reduced.push(v.name);
        }
    }
    // 4:4:4, 4:2:2 and 4:4:0 chroma, grayscale and restart markers all take the reduced
    // path (4:1:1 and progressive files have no baseline decode here: exact).
    for name in ["444", "422", "440", "gray", "restart"] {
        let want = format!("coffee_{name}.jpg");
        assert!(reduced.contains(&want), "{want} not reduced: {reduced:?}");
    }
}
