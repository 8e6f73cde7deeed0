//! Shared loading of the `images_jpg` fixture for the image tests.

use base64::Engine;
use beton_io::{FieldMetadata, Reader};
use serde_json::Value;

pub const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/ffcv-1.0.2"
);

pub fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("fixture base64")
}

/// One image of `images_jpg.beton` with what FFCV 1.0.2 recorded for it.
pub struct JpegSample {
    pub sample: u64,
    pub width: u32,
    pub height: u32,
    /// The stored JPEG bytes, read through beton-io.
    pub jpeg: Vec<u8>,
    /// libjpeg-turbo TJFLAG_FASTDCT decode, HxWx3.
    pub full_decode: Vec<u8>,
    /// `[i, j, h, w]` of CenterCropRGBImageDecoder((32, 32), 224/256).
    pub crop: [u32; 4],
    /// The loader's 32x32x3 output.
    pub output: Vec<u8>,
}

pub fn jpeg_samples() -> Vec<JpegSample> {
    let text = std::fs::read_to_string(format!("{FIXTURES}/images_jpg.expected.json"))
        .expect("read images_jpg.expected.json");
    let doc: Value = serde_json::from_str(&text).expect("parse images_jpg.expected.json");
    let reader =
        Reader::open(format!("{FIXTURES}/images_jpg.beton")).expect("open images_jpg.beton");
    let field = reader.field_index("image").expect("image field");
    let outputs = doc["outputs"].as_array().expect("outputs");
    let image_out = outputs
        .iter()
        .find(|o| o["name"] == "image")
        .expect("image output");
    assert_eq!(image_out["sample_shape"], serde_json::json!([32, 32, 3]));
    let out_samples = image_out["samples"].as_array().expect("output samples");
    let jpeg = doc["jpeg"]["samples"].as_array().expect("jpeg samples");
    assert_eq!(jpeg.len(), 24);
    jpeg.iter()
        .map(|s| {
            let sample = s["sample"].as_u64().unwrap();
            let FieldMetadata::RgbImage {
                mode,
                width,
                height,
                data_ptr,
            } = reader.metadata(sample, field).expect("metadata")
            else {
                panic!("image field of sample {sample} is not RgbImage metadata");
            };
            assert_eq!(mode, 0, "images_jpg stores JPEGs");
            assert_eq!(u64::from(width), s["width"].as_u64().unwrap());
            assert_eq!(u64::from(height), s["height"].as_u64().unwrap());
            let data = reader.data_at(data_ptr).expect("data_at");
            assert_eq!(data.len() as u64, s["jpeg_size"].as_u64().unwrap());
            let crop: Vec<u32> = s["crop"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            // The loader ran SEQUENTIAL, so output row k is sample k.
            let output = b64(out_samples[sample as usize]["b64"].as_str().unwrap());
            JpegSample {
                sample,
                width: width.into(),
                height: height.into(),
                jpeg: data.to_vec(),
                full_decode: b64(s["full_decode_b64"].as_str().unwrap()),
                crop: [crop[0], crop[1], crop[2], crop[3]],
                output,
            }
        })
        .collect()
}

/// Per-channel mean and max absolute difference of two packed RGB buffers.
pub fn channel_diff(a: &[u8], b: &[u8]) -> ([f64; 3], [u8; 3]) {
    assert_eq!(a.len(), b.len());
    let mut sum = [0u64; 3];
    let mut max = [0u8; 3];
    for (pa, pb) in a.chunks_exact(3).zip(b.chunks_exact(3)) {
        for c in 0..3 {
            let d = pa[c].abs_diff(pb[c]);
            sum[c] += u64::from(d);
            max[c] = max[c].max(d);
        }
    }
    let n = (a.len() / 3) as f64;
    (sum.map(|s| s as f64 / n), max)
}
