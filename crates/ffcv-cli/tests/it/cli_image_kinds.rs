//! `ffcv write image-folder --keep-pixels`: 16-bit gray PNGs and gray copies of the test
//! photographs kept as they are in an ImageField (PNG bytes unchanged, the field's kind the
//! first image's), the loader giving the exact samples back, `inspect` and `dump
//! --decoder image=image-center-crop:HxW` reading it; a folder mixing kinds, or
//! the option with `--max-resolution`, exits 1 naming the file.

use crate::support;

use std::path::Path;

use ffcv::decode::ImageDecoder;
use ffcv::format::{FieldType, ImageArgs, Reader};
use ffcv::image::{PixelImage, encode_png};
use ffcv::{Loader, PipelineSpec};
use support::ffcv;

fn gray16(k: u32) -> PixelImage {
    let px = (0..20u32)
        .flat_map(|i| ((i * 3001 + k * 17) as u16).to_le_bytes())
        .collect();
    PixelImage::new(5, 4, ImageArgs::new(1, 16).unwrap(), px).unwrap()
}

fn folder(dir: &Path, extra: Option<PixelImage>) -> std::path::PathBuf {
    let src = dir.join("src");
    for (class, ks) in [("a", [0, 1]), ("b", [2, 3])] {
        std::fs::create_dir_all(src.join(class)).unwrap();
        for k in ks {
            let png = encode_png(&gray16(k)).unwrap();
            std::fs::write(src.join(class).join(format!("{k}.png")), png).unwrap();
        }
    }
    if let Some(img) = extra {
        std::fs::write(src.join("b").join("9.png"), encode_png(&img).unwrap()).unwrap();
    }
    src
}

fn write(src: &Path, out: &Path, more: &[&str]) -> support::Run {
    let mut args: Vec<std::ffi::OsString> = vec!["write".into(), "image-folder".into()];
    args.extend([src.as_os_str().to_owned(), out.as_os_str().to_owned()]);
    args.push("--keep-pixels".into());
    args.extend(more.iter().map(|a| a.into()));
    ffcv(args)
}

#[test]
fn sixteen_bit_pngs_are_kept_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let src = folder(dir.path(), None);
    let out = dir.path().join("depth.beton");
    let run = write(&src, &out, &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout
            .contains("(1 channels, 16 bits): 4 JPEG/PNG files byte for byte + 0 raw"),
        "{}",
        run.stdout
    );
    let r = Reader::open(&out).unwrap();
    assert_eq!(
        r.fields()[0].field_type,
        FieldType::Image(ImageArgs::new(1, 16).unwrap())
    );
    for k in 0..4u32 {
        assert_eq!(
            r.field_data(u64::from(k), 0).unwrap().unwrap(),
            &encode_png(&gray16(k)).unwrap()[..]
        );
    }
    // `inspect` prints the kind; `dump` decodes with the ImageField crop decoder's spec.
    let run = ffcv([std::ffi::OsStr::new("inspect"), out.as_os_str()]);
    assert!(
        run.stdout.contains("ImageField (3)") && run.stdout.contains("channels 1 bits 16"),
        "{}",
        run.stdout
    );
    let run = ffcv([
        std::ffi::OsStr::new("dump"),
        out.as_os_str(),
        "--decoder".as_ref(),
        "image=image-center-crop:2x2".as_ref(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 4);
    assert!(
        run.stdout
            .contains(r#""decoder": "CenterCropImageDecoder", "dtype": "<u2", "shape": [2, 2, 1]"#),
        "{}",
        run.stdout
    );
    let mut loader = Loader::builder(&out)
        .batch_size(4)
        .pipeline("image", PipelineSpec::new(ImageDecoder::simple()))
        .build()
        .unwrap();
    for batch in loader.iter() {
        let batch = batch.unwrap();
        let out = batch.output("image").unwrap();
        assert_eq!(out.info().shape, vec![4, 5, 1]);
        for (k, &id) in batch.sample_ids().iter().enumerate() {
            assert_eq!(out.row(k), &gray16(id as u32).pixels[..]);
        }
    }
}

#[test]
fn a_folder_mixing_kinds_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let rgb = PixelImage::new(1, 1, ImageArgs::new(3, 8).unwrap(), vec![1, 2, 3]).unwrap();
    let src = folder(dir.path(), Some(rgb));
    let out = dir.path().join("mixed.beton");
    let run = write(&src, &out, &[]);
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert!(
        run.stderr.contains("9.png")
            && run
                .stderr
                .contains("3 channels of 8 bits, the field 1 of 16"),
        "{}",
        run.stderr
    );
    let run = write(&src, &out, &["--max-resolution", "8"]);
    assert_eq!(run.code, Some(1));
    assert!(
        run.stderr.contains("takes neither --max-resolution"),
        "{}",
        run.stderr
    );
}
