//! Forged image sizes cannot exhaust memory: a file whose metadata and JPEG frame headers
//! claim 65000x65000 (8 bytes patched per sample of an FFCV-written fixture) ends the
//! epoch with an error naming the file, field and sample, before anything is sized from
//! the claim; a claim under the cap whose stream is far too short to code it is refused
//! the same way; `max_image_pixels` is exact at its boundary. The process's peak
//! resident memory (`VmHWM`, which does not depend on timing; the test runs in its own
//! process) stays under 200 MB.

use crate::loader_support;

use ffcv::decode::{
    CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder, SimpleRGBImageDecoder,
};
use ffcv::format::{FieldMetadata, Reader};
use ffcv::{DecoderChoice, Error, Loader, Order};
use loader_support::fixture;

fn forged(dir: &std::path::Path, name: &str, height: u16, width: u16) -> std::path::PathBuf {
    let original = std::fs::read(fixture("images_jpg.beton")).unwrap();
    let bytes = ffcv_testkit::corrupt::forge_image_size(&original, "image", height, width).unwrap();
    let path = dir.join(format!("{name}.beton"));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// This process's peak resident set, in bytes (`VmHWM` of `/proc/self/status`).
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Runs one epoch with `decoder` on the image field and returns its error.
fn epoch_error(
    path: &std::path::Path,
    decoder: DecoderChoice,
    os_cache: bool,
    cap: Option<u64>,
) -> Error {
    let mut builder = Loader::builder(path)
        .batch_size(8)
        .num_workers(4)
        .os_cache(os_cache)
        .order(Order::Random)
        .seed(3)
        .decoder("image", decoder);
    if let Some(cap) = cap {
        builder = builder.max_image_pixels(cap);
    }
    let mut loader = builder.build().unwrap();
    let mut items = loader.iter();
    let err = match items.next() {
        Some(Err(e)) => e,
        Some(Ok(_)) => panic!("a forged batch decoded"),
        None => panic!("no batch"),
    };
    assert!(items.next().is_none(), "the error ends the epoch");
    drop(items);
    assert_eq!(loader.live_threads(), 0);
    err
}

fn crop() -> DecoderChoice {
    DecoderChoice::Decoder(std::sync::Arc::new(CenterCropRGBImageDecoder::new(
        (64, 64),
        CenterCropRGBImageDecoder::DEFAULT_RATIO,
    )))
}

fn random_crop() -> DecoderChoice {
    DecoderChoice::Decoder(std::sync::Arc::new(RandomResizedCropRGBImageDecoder::new(
        (64, 64),
    )))
}

#[test]
fn forged_sizes_end_the_epoch_naming_the_sample_without_allocating_for_them() {
    ffcv_testkit::own_process(
        module_path!(),
        "forged_sizes_end_the_epoch_naming_the_sample_without_allocating_for_them",
        || {
            let dir = tempfile::tempdir().unwrap();
            let huge = forged(dir.path(), "huge", 65000, 65000);
            // Under the default cap (10^8 < 2^27 pixels), but a few KiB of JPEG cannot code it.
            let large = forged(dir.path(), "large", 10000, 10000);
            for os_cache in [true, false] {
                for decoder in [crop(), random_crop()] {
                    match epoch_error(&huge, decoder.clone(), os_cache, None) {
                        Error::Decode {
                            path,
                            field,
                            sample,
                            message,
                            ..
                        } => {
                            assert!(path.ends_with("huge.beton"));
                            assert_eq!(field, "image");
                            assert!(sample < 24);
                            assert!(
                                message.contains("65000x65000 = 4225000000 pixels")
                                    && message.contains("max_image_pixels of 134217728"),
                                "{message}"
                            );
                        }
                        other => panic!("{other}"),
                    }
                    // A raised cap leaves the stream-length check: still nothing allocated.
                    let err = epoch_error(&huge, decoder.clone(), os_cache, Some(u64::MAX));
                    assert!(
                        err.to_string().contains("cannot code a 65000x65000 frame"),
                        "{err}"
                    );
                    let err = epoch_error(&large, decoder, os_cache, None);
                    let text = err.to_string();
                    assert!(
                        matches!(err, Error::Decode { .. })
                            && text.contains("large.beton")
                            && text.contains("cannot code a 10000x10000 frame"),
                        "{text}"
                    );
                }
            }
            // SimpleRGBImageDecoder reads every size when the loader is built: refused there.
            let err = Loader::builder(&huge)
                .batch_size(8)
                .decoder(
                    "image",
                    DecoderChoice::Decoder(std::sync::Arc::new(SimpleRGBImageDecoder)),
                )
                .build()
                .unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains("huge.beton")
                    && text.contains("sample 0")
                    && text.contains("max_image_pixels"),
                "{text}"
            );
            let peak = peak_rss();
            assert!(peak < 200 << 20, "peak resident memory {} MiB", peak >> 20);
        },
    );
}

#[test]
fn the_cap_is_exact_at_the_largest_image() {
    let path = fixture("images_jpg.beton");
    let reader = Reader::open(&path).unwrap();
    let image = reader.field_index("image").unwrap();
    let (largest, area) = (0..reader.num_samples())
        .map(|s| match reader.metadata(s, image).unwrap() {
            FieldMetadata::RgbImage { width, height, .. } => {
                (s, u64::from(width) * u64::from(height))
            }
            other => panic!("{other:?}"),
        })
        .max_by_key(|&(s, a)| (a, std::cmp::Reverse(s)))
        .unwrap();
    let run = |cap: u64| {
        let mut loader = Loader::builder(&path)
            .batch_size(1)
            .num_workers(1)
            .drop_last(false)
            .indices(vec![largest])
            .decoder("image", crop())
            .max_image_pixels(cap)
            .build()
            .unwrap();
        let result: Result<Vec<_>, _> = loader.iter().collect();
        result.map(|batches| batches.len())
    };
    assert_eq!(run(area).unwrap(), 1);
    match run(area - 1) {
        Err(Error::Decode {
            sample, message, ..
        }) => {
            assert_eq!(sample, largest);
            assert!(message.contains(&format!("{area} pixels")), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
