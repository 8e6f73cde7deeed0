//! The JPEG writer is byte-identical to `cv2.imencode('.jpg')` (OpenCV 4.10,
//! libjpeg-turbo 3.0.3), and FFCV-written JPEG datasets are reproduced byte
//! for byte.
//!
//! The reference bytes in `tests/data/libjpeg_enc/` were made by
//! `make_vectors.py` there, with the reference FFCV 1.0.2 environment; the
//! sources are generated from splitmix64 streams by the same rules here.

use beton_io::{DatasetWriter, FieldSpec, FieldType, FieldValue};
use rand_core::SeedableRng;
use rgb_image::{
    ImageError, LibjpegEncodeError, RgbImage, RgbImageEncoder, WriteMode, encode_jpeg,
    encode_like_libjpeg,
};
use sha2::{Digest, Sha256};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/libjpeg_enc");
const KINDS: [&str; 4] = ["noise", "scene", "gray", "binary"];

/// The i-th (0-based) splitmix64 output for state `seed`.
fn sm64(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Little-endian bytes of `sm64(seed, 0), sm64(seed, 1), ...` cut to `n`.
fn gen_bytes(seed: u64, n: usize) -> Vec<u8> {
    (0..n.div_ceil(8) as u64)
        .flat_map(|i| sm64(seed, i).to_le_bytes())
        .take(n)
        .collect()
}

/// `source()` of make_vectors.py.
fn source(kind: &str, w: usize, h: usize, seed: u64) -> Vec<u8> {
    match kind {
        "noise" => gen_bytes(seed, w * h * 3),
        "gray" => gen_bytes(seed, w * h)
            .into_iter()
            .flat_map(|v| [v; 3])
            .collect(),
        "binary" => gen_bytes(seed, w * h * 3)
            .into_iter()
            .map(|v| (v & 1) * 255)
            .collect(),
        "scene" => {
            let noise = gen_bytes(seed, w * h * 3);
            let mut px = Vec::with_capacity(w * h * 3);
            for y in 0..h {
                for x in 0..w {
                    let inside = (h / 3..2 * h / 3).contains(&y) && (w / 4..3 * w / 4).contains(&x);
                    let base: [i64; 3] = if inside {
                        [200, 40, 90]
                    } else {
                        [
                            (x * 255 / (w - 1).max(1)) as i64,
                            (y * 255 / (h - 1).max(1)) as i64,
                            ((x + y) * 7 % 256) as i64,
                        ]
                    };
                    for (c, b) in base.iter().enumerate() {
                        let n = i64::from(noise[(y * w + x) * 3 + c]) % 7 - 3;
                        px.push((b + n).clamp(0, 255) as u8);
                    }
                }
            }
            px
        }
        other => panic!("unknown kind {other}"),
    }
}

fn seed_of(kind: &str, w: usize, h: usize) -> u64 {
    let k = KINDS.iter().position(|&x| x == kind).unwrap() as u64;
    k * 1_000_003 + w as u64 * 1000 + h as u64
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn manifest() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(format!("{DATA}/manifest.json")).unwrap())
        .unwrap()
}

/// Asserts equality with the offset of the first differing byte in the message.
fn assert_same_bytes(ours: &[u8], theirs: &[u8], what: &str) {
    if ours != theirs {
        let at = ours
            .iter()
            .zip(theirs)
            .position(|(a, b)| a != b)
            .unwrap_or(ours.len().min(theirs.len()));
        panic!(
            "{what}: {} bytes vs cv2's {}, first difference at byte {at}",
            ours.len(),
            theirs.len()
        );
    }
}

#[test]
fn every_manifest_case_hashes_like_cv2_imencode() {
    let m = manifest();
    let cases = m["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4 * 12 * 7);
    let mut mismatches = Vec::new();
    for c in cases {
        let kind = c["kind"].as_str().unwrap();
        let (w, h) = (c["width"].as_u64().unwrap(), c["height"].as_u64().unwrap());
        let q = c["quality"].as_u64().unwrap() as u8;
        let rgb = source(
            kind,
            w as usize,
            h as usize,
            seed_of(kind, w as usize, h as usize),
        );
        let jpg = encode_like_libjpeg(&rgb, w as u32, h as u32, q).unwrap();
        if jpg.len() as u64 != c["len"].as_u64().unwrap()
            || hex_sha256(&jpg) != c["sha256"].as_str().unwrap()
        {
            mismatches.push(format!("{kind} {w}x{h} q{q}"));
        }
    }
    assert!(mismatches.is_empty(), "differ from cv2: {mismatches:?}");
}

#[test]
fn stored_cv2_files_are_reproduced_byte_for_byte() {
    let files = [
        ("scene", 40, 120, 90),
        ("scene", 121, 47, 75),
        ("noise", 17, 15, 100),
        ("gray", 9, 7, 50),
        ("binary", 33, 31, 95),
        ("noise", 1, 1, 90),
    ];
    for (kind, w, h, q) in files {
        let name = format!("{kind}_{w}x{h}_q{q}.jpg");
        let theirs = std::fs::read(format!("{DATA}/{name}")).unwrap();
        let ours = encode_like_libjpeg(
            &source(kind, w, h, seed_of(kind, w, h)),
            w as u32,
            h as u32,
            q,
        )
        .unwrap();
        assert_same_bytes(&ours, &theirs, &name);
    }
}

#[test]
fn a_photograph_crop_encodes_like_cv2_at_three_qualities() {
    let rgb = std::fs::read(format!("{DATA}/chelsea_40x30.rgb")).unwrap();
    let image = RgbImage::new(40, 30, rgb).unwrap();
    for q in [75, 90, 100] {
        let theirs = std::fs::read(format!("{DATA}/chelsea_40x30_q{q}.jpg")).unwrap();
        // Through the writer's entry point, as RGBImageField uses it.
        assert_same_bytes(&encode_jpeg(&image, q).unwrap(), &theirs, &format!("q{q}"));
    }
}

/// `dataset_items()` of make_vectors.py written with one worker, 2 MiB pages
/// and chunks of 100, as FFCV 1.0.2 wrote the manifest's datasets.
fn write_dataset(encoder: &RgbImageEncoder) -> Vec<u8> {
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(0);
    let samples: Vec<Vec<FieldValue>> = (0..24u64)
        .map(|i| {
            let (w, h) = (
                (sm64(4242, 2 * i) % 81 + 40) as usize,
                (sm64(4242, 2 * i + 1) % 81 + 40) as usize,
            );
            let image = RgbImage::new(w as u32, h as u32, source("scene", w, h, 7000 + i)).unwrap();
            let encoded = encoder.encode(&image, &mut rng).unwrap();
            vec![encoded.into(), FieldValue::Int((i % 5) as i64)]
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.beton");
    let fields = vec![
        FieldSpec::new("image", FieldType::RgbImage),
        FieldSpec::new("label", FieldType::Int),
    ];
    DatasetWriter::new(&path, fields)
        .unwrap()
        .with_page_size(2 << 20)
        .unwrap()
        .with_num_workers(1)
        .with_chunk_size(100)
        .write(&samples)
        .unwrap();
    std::fs::read(&path).unwrap()
}

#[test]
fn a_jpeg_dataset_is_byte_identical_to_ffcv_1_0_2s() {
    let m = manifest();
    let expected = &m["datasets"]["jpg_q90"];
    let file = write_dataset(&RgbImageEncoder {
        write_mode: WriteMode::Jpg,
        max_resolution: None,
        jpeg_quality: 90,
    });
    assert_eq!(file.len() as u64, expected["file_size"].as_u64().unwrap());
    assert_eq!(hex_sha256(&file), expected["file_sha256"].as_str().unwrap());
}

#[test]
fn a_downscaled_jpeg_dataset_is_byte_identical_to_ffcv_1_0_2s() {
    let m = manifest();
    let expected = &m["datasets"]["jpg_q75_max64"];
    let file = write_dataset(&RgbImageEncoder {
        write_mode: WriteMode::Jpg,
        max_resolution: Some(64),
        jpeg_quality: 75,
    });
    assert_eq!(file.len() as u64, expected["file_size"].as_u64().unwrap());
    assert_eq!(hex_sha256(&file), expected["file_sha256"].as_str().unwrap());
}

#[test]
fn bad_arguments_are_refused_with_what_is_wrong() {
    let px = vec![0u8; 4 * 3 * 3];
    for q in [0, 101] {
        let e = encode_like_libjpeg(&px, 4, 3, q).unwrap_err();
        assert_eq!(e, LibjpegEncodeError::Quality(q));
        assert_eq!(e.to_string(), format!("jpeg_quality {q} is not in 1..=100"));
    }
    for (w, h) in [(0, 3), (4, 0), (65501, 1), (1, 65501), (65536, 1)] {
        assert_eq!(
            encode_like_libjpeg(&[], w, h, 90).unwrap_err(),
            LibjpegEncodeError::Size {
                width: w,
                height: h
            }
        );
    }
    let e = encode_like_libjpeg(&px[1..], 4, 3, 90).unwrap_err();
    assert_eq!(
        e,
        LibjpegEncodeError::PixelCount {
            width: 4,
            height: 3,
            got: 35
        }
    );
    assert!(e.to_string().contains("35 bytes"), "{e}");
    let image = RgbImage::new(4, 3, px).unwrap();
    assert!(matches!(
        encode_jpeg(&image, 0),
        Err(ImageError::BadSetting(m)) if m.contains("jpeg_quality 0")
    ));
}

#[test]
fn the_largest_frame_encodes_and_keeps_its_header() {
    // libjpeg's (and cv2's) widest image, one row: a final MCU that is
    // mostly edge replication.
    assert_eq!(rgb_image::JPEG_MAX_SIDE, 65500);
    let rgb = gen_bytes(5, 65500 * 3);
    let jpg = encode_like_libjpeg(&rgb, 65500, 1, 90).unwrap();
    let sof = jpg.windows(2).position(|p| p == [0xFF, 0xC0]).unwrap();
    assert_eq!(&jpg[sof + 5..sof + 9], &[0, 1, 0xFF, 0xDC]);
    assert_eq!(&jpg[jpg.len() - 2..], &[0xFF, 0xD9]);
    let info = rgb_image::jpeg_info(&jpg).unwrap();
    assert_eq!((info.width, info.height), (65500, 1));
}

#[test]
fn the_fixtures_jpegs_carry_exactly_our_markers() {
    // The images_jpg fixture's sources are not published, so its JPEGs cannot
    // be re-encoded; everything up to the entropy-coded data depends only on
    // size and quality, and must equal ours byte for byte.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/ffcv-1.0.2/images_jpg.beton"
    );
    let reader = beton_io::Reader::open(path).unwrap();
    let image = reader.field_index("image").unwrap();
    for i in 0..reader.num_samples() {
        let beton_io::FieldMetadata::RgbImage {
            mode,
            width,
            height,
            ..
        } = reader.metadata(i, image).unwrap()
        else {
            panic!("sample {i}: not an image");
        };
        assert_eq!(mode, 0, "sample {i} is stored as JPEG");
        let theirs = reader.field_data(i, image).unwrap().unwrap();
        let (w, h) = (u32::from(width), u32::from(height));
        let ours = encode_like_libjpeg(&vec![128; (w * h * 3) as usize], w, h, 90).unwrap();
        // SOI (2), APP0 (18), 2 DQT (69 each), SOF0 (19), 4 DHT (33, 183, 33,
        // 183), SOS (14).
        let header = 2 + 18 + 2 * 69 + 19 + 2 * 33 + 2 * 183 + 14;
        assert_eq!(&ours[header - 14..header - 12], &[0xFF, 0xDA]);
        assert_same_bytes(&ours[..header], &theirs[..header], &format!("sample {i}"));
        assert_eq!(&theirs[theirs.len() - 2..], &[0xFF, 0xD9]);
    }
}
