//! `--write-mode proportion` follows the writers' one seeding rule
//! (`ffcv::image::sample_generator`): the CLI writes, byte for byte, the file that the
//! library entry point the Python writer calls (`RgbImageEncoder::encode_sample` with seed
//! 0, then beton-io's `DatasetWriter`) writes from the same images, and that file is the
//! one `tests/fixtures/proportion-mode/expected.json` pins, which the Python test
//! (`crates/ffcv-py/tests/test_writer_proportion.py`) checks its own output against.

use std::path::{Path, PathBuf};

use beton_io::{DatasetWriter, FieldSpec, FieldType, FieldValue, Reader, from_fn};
use ffcv::image::{RgbImage, RgbImageEncoder, WriteMode};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::support::ffcv;

/// Classes of the folder, in label order.
const CLASSES: [&str; 2] = ["a", "b"];
/// Images per class.
const PER_CLASS: usize = 6;

/// The pinned file: `tests/fixtures/proportion-mode/expected.json`.
fn expected() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/proportion-mode/expected.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Image `k` of class `c` (sample `6c + k`), as `expected.json`'s `folder` describes it.
fn image(c: usize, k: usize) -> RgbImage {
    let i = c * PER_CLASS + k;
    let (w, h) = (5 + 3 * k + c, 4 + 2 * k);
    let mut pixels = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            for ch in 0..3 {
                pixels.push(((7 * x + 13 * y + 29 * ch + 31 * i) % 256) as u8);
            }
        }
    }
    RgbImage::new(w as u32, h as u32, pixels).unwrap()
}

/// The folder as PNG files: `root/CLASS/K.png`.
fn write_folder(root: &Path) {
    for (c, class) in CLASSES.iter().enumerate() {
        let dir = root.join(class);
        std::fs::create_dir_all(&dir).unwrap();
        for k in 0..PER_CLASS {
            let img = image(c, k);
            let file = std::fs::File::create(dir.join(format!("{k}.png"))).unwrap();
            let mut encoder = png::Encoder::new(file, img.width(), img.height());
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            let mut writer = encoder.write_header().unwrap();
            writer.write_image_data(img.pixels()).unwrap();
        }
    }
}

/// The file written as the Python writer writes it: each image through
/// `encode_sample(image, 0, i)`, one writer thread, 2 MiB pages, chunks of 100.
fn write_as_python_does(out: &Path) {
    let encoder = RgbImageEncoder {
        write_mode: WriteMode::Proportion {
            compress_probability: 0.5,
        },
        max_resolution: None,
        jpeg_quality: 90,
    };
    let fields = vec![
        FieldSpec::new("image", FieldType::RgbImage),
        FieldSpec::new("label", FieldType::Int),
    ];
    let n = (CLASSES.len() * PER_CLASS) as u64;
    DatasetWriter::new(out, fields)
        .unwrap()
        .with_page_size(1 << 21)
        .unwrap()
        .with_num_workers(1)
        .with_chunk_size(100)
        .write(&from_fn(n, |i| {
            let (c, k) = (i as usize / PER_CLASS, i as usize % PER_CLASS);
            let encoded = encoder
                .encode_sample(&image(c, k), 0, i)
                .map_err(|e| e.to_string())?;
            Ok(vec![encoded.into(), FieldValue::Int(c as i64)])
        }))
        .unwrap();
}

/// The samples whose image is stored as JPEG.
fn jpeg_samples(path: &Path) -> Vec<u64> {
    let reader = Reader::open(path).unwrap();
    let field = reader.field_index("image").unwrap();
    (0..reader.num_samples())
        .filter(|&s| {
            matches!(
                reader.metadata(s, field).unwrap(),
                beton_io::FieldMetadata::RgbImage { mode, .. } if mode == beton_io::IMAGE_MODE_JPEG
            )
        })
        .collect()
}

#[test]
fn the_cli_writes_the_file_the_python_writers_entry_point_writes_and_the_pinned_one() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("images");
    write_folder(&src);
    let cli: PathBuf = dir.path().join("cli.beton");
    let run = ffcv([
        "write",
        "image-folder",
        src.to_str().unwrap(),
        cli.to_str().unwrap(),
        "--write-mode",
        "proportion",
        "--compress-probability",
        "0.5",
        "--page-size",
        "2MiB",
        "--workers",
        "1",
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let library = dir.path().join("library.beton");
    write_as_python_does(&library);
    let (cli_bytes, library_bytes) = (
        std::fs::read(&cli).unwrap(),
        std::fs::read(&library).unwrap(),
    );
    assert!(
        cli_bytes == library_bytes,
        "the CLI and the library entry point wrote different files"
    );

    let jpegs = jpeg_samples(&cli);
    let n = (CLASSES.len() * PER_CLASS) as u64;
    // Both outcomes occur, so the comparison covers the draws, not one mode.
    assert!(!jpegs.is_empty() && jpegs.len() < n as usize, "{jpegs:?}");
    let sha = format!("{:x}", Sha256::digest(&cli_bytes));
    let expected = expected();
    let pinned = (
        expected["samples"].as_u64(),
        expected["file_size"].as_u64(),
        expected["jpeg_samples"].clone(),
        expected["sha256"].as_str(),
    );
    assert_eq!(
        pinned,
        (
            Some(n),
            Some(cli_bytes.len() as u64),
            serde_json::json!(jpegs),
            Some(sha.as_str())
        ),
        "tests/fixtures/proportion-mode/expected.json no longer matches what the writers write \
         (a change of the seeding rule or of the encoder?)"
    );
}
