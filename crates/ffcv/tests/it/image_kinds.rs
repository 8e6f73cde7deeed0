//! `ImageField` (1, 3 or 4 channels of 8 or 16 bits) through the loader: written from
//! generated arrays and PNGs and from the test photographs converted to gray, decoded
//! kept as they are (`[H, W, C]` rows of `u8` or `<u2`), cropped, then flipped,
//! normalized per channel, moved to CHW and converted, with the compiled pipelines equal
//! to the interpreted ones; the decoders' refusals name the field and the sample.

use std::collections::BTreeMap;

use ffcv::decode::ImageDecoder;
use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, ImageArgs};
use ffcv::image::{
    PixelDecoderKernel, PixelImage, RgbDecoderKind, encode_png, encode_raw, read_image_file,
};
use ffcv::jit::ElemType;
use ffcv::{DecoderChoice, Loader, Order, PipelineSpec, transforms};

const N: u64 = 12;
const PHOTOS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../rgb-image/tests/data/photos"
);

fn args(channels: u8, bits: u8) -> ImageArgs {
    ImageArgs::new(channels, bits).unwrap()
}

/// Sample `i`'s 16-bit gray image, 6 x 5: every value different, up to the top of the range.
fn gray16(i: u64) -> PixelImage {
    let px: Vec<u8> = (0..30u64)
        .flat_map(|k| ((i * 5003 + k * 2111) as u16 | (0x8000 * (k as u16 & 1))).to_le_bytes())
        .collect();
    PixelImage::new(5, 6, args(1, 16), px).unwrap()
}

/// Sample `i`'s RGBA image, 4 x 3.
fn rgba8(i: u64) -> PixelImage {
    let px = (0..48u64).map(|k| ((i * 31 + k * 7) % 256) as u8).collect();
    PixelImage::new(3, 4, args(4, 8), px).unwrap()
}

/// The photographs as PIL decodes them, to gray with ITU-R 601 luma.
fn gray_photos() -> Vec<PixelImage> {
    ["astronaut.jpg", "chelsea.jpg", "coffee.jpg", "rocket.jpg"]
        .iter()
        .map(|name| {
            let rgb = read_image_file(format!("{PHOTOS}/{name}")).unwrap();
            let gray = rgb
                .pixels()
                .chunks_exact(3)
                .map(|p| {
                    let y = 299 * u32::from(p[0]) + 587 * u32::from(p[1]) + 114 * u32::from(p[2]);
                    ((y + 500) / 1000) as u8
                })
                .collect();
            PixelImage::new(rgb.width(), rgb.height(), args(1, 8), gray).unwrap()
        })
        .collect()
}

fn write(dir: &std::path::Path, photos: &[PixelImage]) -> std::path::PathBuf {
    let path = dir.join("kinds.beton");
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new("depth", FieldType::Image(args(1, 16))),
        FieldSpec::new("rgba", FieldType::Image(args(4, 8))),
        FieldSpec::new("photo", FieldType::Image(args(1, 8))),
    ];
    let samples: Vec<Vec<FieldValue>> = (0..N)
        .map(|i| {
            // Half of the 16-bit images as PNG, half raw: both decode to the same samples.
            let depth = if i % 2 == 0 {
                encode_png(&gray16(i)).unwrap()
            } else {
                encode_raw(&gray16(i))
            };
            vec![
                FieldValue::Int(i as i64),
                FieldValue::Bytes(depth),
                FieldValue::Bytes(encode_raw(&rgba8(i))),
                FieldValue::Bytes(encode_png(&photos[i as usize % photos.len()]).unwrap()),
            ]
        })
        .collect();
    DatasetWriter::new(&path, fields)
        .unwrap()
        .with_num_workers(2)
        .write(&samples)
        .unwrap();
    path
}

/// One epoch: per sample id, each field's row bytes; and each output's (shape, dtype).
type Rows = BTreeMap<u64, Vec<Vec<u8>>>;

fn epoch(
    path: &std::path::Path,
    depth: PipelineSpec,
    rgba: PipelineSpec,
    compile: bool,
) -> (Rows, Vec<(Vec<usize>, String)>) {
    let mut loader = Loader::builder(path)
        .batch_size(5)
        .num_workers(2)
        .drop_last(false)
        .order(Order::Random)
        .seed(3)
        .compile(compile)
        .pipeline("depth", depth)
        .pipeline("rgba", rgba)
        .decoder(
            "photo",
            DecoderChoice::Decoder(std::sync::Arc::new(ImageDecoder::center_crop(
                (24, 32),
                0.875,
            ))),
        )
        .disable("label")
        .build()
        .unwrap();
    let mut rows = Rows::new();
    let mut infos = Vec::new();
    for batch in loader.iter() {
        let batch = batch.unwrap();
        infos = ["depth", "rgba", "photo"]
            .iter()
            .map(|f| {
                let info = batch.output(f).unwrap().info().clone();
                (info.shape, info.dtype.descr())
            })
            .collect();
        for (k, &id) in batch.sample_ids().iter().enumerate() {
            let got = ["depth", "rgba", "photo"]
                .iter()
                .map(|f| batch.output(f).unwrap().row(k).to_vec())
                .collect();
            assert!(rows.insert(id, got).is_none(), "sample {id} twice");
        }
    }
    assert_eq!(rows.len() as u64, N, "every sample once");
    (rows, infos)
}

#[test]
fn image_kinds_decode_as_they_are_and_crop() {
    let dir = tempfile::tempdir().unwrap();
    let photos = gray_photos();
    let path = write(dir.path(), &photos);
    let plain = |d: ImageDecoder| PipelineSpec::new(d);
    let (rows, infos) = epoch(
        &path,
        plain(ImageDecoder::simple()),
        plain(ImageDecoder::simple()),
        true,
    );
    assert_eq!(
        infos,
        vec![
            (vec![6, 5, 1], "<u2".to_owned()),
            (vec![4, 3, 4], "|u1".to_owned()),
            (vec![24, 32, 1], "|u1".to_owned()),
        ]
    );
    let mut kernel = PixelDecoderKernel::new();
    for (&id, got) in &rows {
        assert_eq!(got[0], gray16(id).pixels, "depth of sample {id}");
        assert_eq!(got[1], rgba8(id).pixels, "rgba of sample {id}");
        // The photo's centre crop: what the kernel gives for the stored PNG.
        let png = encode_png(&photos[id as usize % photos.len()]).unwrap();
        let mut want = vec![0u8; 24 * 32];
        let kind = RgbDecoderKind::CenterCrop { ratio: 0.875 };
        kernel
            .decode_sample(
                &kind,
                args(1, 8),
                &png,
                u64::MAX,
                &mut ffcv::jit::rng::sample_rng(0),
                &mut want,
                (24, 32),
            )
            .unwrap();
        assert_eq!(got[2], want, "photo of sample {id}");
    }
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn flip_normalize_chw_and_convert_on_one_and_four_channels() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &gray_photos());
    let depth = || {
        PipelineSpec::new(ImageDecoder::simple())
            .then(transforms::random_horizontal_flip(1.0).unwrap())
            .then(transforms::normalize_channels(&[32768.0], &[8192.0], ElemType::F32).unwrap())
            .then(transforms::to_tensor())
    };
    let rgba = || {
        PipelineSpec::new(ImageDecoder::simple())
            .then(
                transforms::normalize_channels(
                    &[10.0, 20.0, 30.0, 40.0],
                    &[2.0, 4.0, 8.0, 16.0],
                    ElemType::F16,
                )
                .unwrap(),
            )
            .then(transforms::convert(ElemType::F32))
    };
    let (compiled, infos) = epoch(&path, depth(), rgba(), true);
    let (interpreted, _) = epoch(&path, depth(), rgba(), false);
    assert_eq!(
        compiled, interpreted,
        "the JIT gives the interpreter's bytes"
    );
    assert_eq!(infos[0], (vec![1, 6, 5], "<f4".to_owned()));
    assert_eq!(infos[1], (vec![4, 3, 4], "<f4".to_owned()));
    for (&id, got) in &compiled {
        // Flipped left-right, then normalized: exact in f32 (a power-of-two std).
        let src = gray16(id).pixels;
        let px = |y: usize, x: usize| {
            u16::from_le_bytes([src[2 * (y * 5 + x)], src[2 * (y * 5 + x) + 1]])
        };
        let want: Vec<f32> = (0..6)
            .flat_map(|y| (0..5).map(move |x| (y, x)))
            .map(|(y, x)| ((f64::from(px(y, 4 - x)) - 32768.0) / 8192.0) as f32)
            .collect();
        assert_eq!(f32s(&got[0]), want, "depth of sample {id}");
        // Per-channel statistics of four channels, through f16 (exact here: small
        // integers over powers of two).
        let rgba = rgba8(id).pixels;
        let mean = [10.0, 20.0, 30.0, 40.0];
        let std = [2.0, 4.0, 8.0, 16.0];
        for (k, (&v, &o)) in rgba.iter().zip(f32s(&got[1]).iter()).enumerate() {
            let c = k % 4;
            let exact = (f64::from(v) - mean[c]) / std[c];
            assert!(
                (f64::from(o) - exact).abs() <= exact.abs() / 1024.0,
                "{id} {k}: {o} vs {exact}"
            );
        }
    }
}

#[test]
fn the_decoders_refuse_other_fields_and_mixed_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let photos = gray_photos();
    let path = write(dir.path(), &photos);
    // The photos have four sizes: the simple decoder refuses them at build.
    let err = Loader::builder(&path)
        .batch_size(4)
        .decoder(
            "photo",
            DecoderChoice::Decoder(std::sync::Arc::new(ImageDecoder::simple())),
        )
        .build()
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("photo") && err.contains("sample 1 is"),
        "{err}"
    );
    // An ImageDecoder on an Int field, and an RGB decoder on an ImageField.
    let err = Loader::builder(&path)
        .batch_size(4)
        .decoder(
            "label",
            DecoderChoice::Decoder(std::sync::Arc::new(ImageDecoder::simple())),
        )
        .build()
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("decodes ImageField fields"), "{err}");
    let err = Loader::builder(&path)
        .batch_size(4)
        .pipeline(
            "depth",
            PipelineSpec::new(ffcv::decode::SimpleRGBImageDecoder),
        )
        .build()
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("decodes RGBImageField fields"), "{err}");
}

#[test]
fn a_forged_raw_header_fails_its_sample_before_anything_is_sized_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &gray_photos());
    // Sample 3's depth image is raw: claim 65535 x 65535 pixels in its header.
    let r = ffcv::format::Reader::open(&path).unwrap();
    let ptr = r.metadata(3, 1).unwrap().ptr().unwrap() as usize;
    drop(r);
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[ptr..ptr + 4], b"FRAW");
    bytes[ptr + 4..ptr + 12].copy_from_slice(&[0xff, 0xff, 0, 0, 0xff, 0xff, 0, 0]);
    std::fs::write(&path, &bytes).unwrap();
    let mut loader = Loader::builder(&path)
        .batch_size(4)
        .order(Order::Sequential)
        .pipeline(
            "depth",
            PipelineSpec::new(ImageDecoder::center_crop((4, 4), 1.0)),
        )
        .disable("photo")
        .build()
        .unwrap();
    let err = loader
        .iter()
        .find_map(|b| b.err())
        .expect("the forged sample fails")
        .to_string();
    assert!(
        err.contains("depth") && err.contains("sample 3") && err.contains("takes"),
        "{err}"
    );
}
