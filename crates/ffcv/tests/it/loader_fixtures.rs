//! End to end over every non-image FFCV 1.0.2 fixture: the loader's outputs equal the
//! values FFCV recorded (scalars by bits, bytes by length and content, arrays by hash, JSON
//! by value), with the OS cache and the process cache, with 1 and 2 workers, compiled and
//! interpreted.

use std::collections::HashMap;

use ffcv::{DecoderChoice, Loader, OutputKind};
use serde_json::Value;
use sha2::{Digest, Sha256};

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

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn numpy_name(descr: &str) -> &'static str {
    match descr {
        "<i8" => "int64",
        "<f8" => "float64",
        "|u1" => "uint8",
        "<f4" => "float32",
        "<i2" => "int16",
        other => panic!("unexpected dtype {other}"),
    }
}

/// Per output: per sample id, (row bytes as defined, length if any, JSON value if any).
type Rows = HashMap<String, HashMap<u64, (Vec<u8>, Option<u64>, Option<Value>)>>;

fn load_all(
    name: &str,
    os_cache: bool,
    workers: i64,
    compile: bool,
    decoders: &[(&str, DecoderChoice)],
) -> Rows {
    let mut builder = Loader::builder(fixture(&format!("{name}.beton")))
        .batch_size(7)
        .drop_last(false)
        .os_cache(os_cache)
        .num_workers(workers)
        .compile(compile);
    for (field, choice) in decoders {
        builder = builder.decoder(*field, choice.clone());
    }
    let mut loader = builder.build().unwrap();
    let mut rows: Rows = HashMap::new();
    let mut count = 0;
    for batch in &mut loader {
        let batch = batch.unwrap();
        count += 1;
        for info in batch.outputs().to_vec() {
            let out = batch.output(&info.name).unwrap();
            let shape = out.shape();
            assert_eq!(shape[0], batch.len());
            assert_eq!(&shape[1..], &info.shape[..]);
            for (i, &sample) in batch.sample_ids().iter().enumerate() {
                let json = (info.kind == OutputKind::Json).then(|| out.json(i).unwrap());
                let len = out.lengths().map(|l| l[i]);
                rows.entry(info.name.clone())
                    .or_default()
                    .insert(sample, (out.value(i).to_vec(), len, json));
            }
        }
    }
    assert_eq!(count, loader.len());
    rows
}

fn check(name: &str, rows: &Rows, skip: &[&str]) {
    let exp = expected(name);
    let n = exp["header"]["num_samples"].as_u64().unwrap();
    for out in exp["outputs"].as_array().unwrap() {
        let oname = out["name"].as_str().unwrap();
        if skip.contains(&oname) {
            continue;
        }
        let got = &rows[oname];
        assert_eq!(got.len() as u64, n, "{name}/{oname}: every sample once");
        for s in 0..n {
            let (bytes, len, json) = &got[&s];
            let i = s as usize;
            match out["kind"].as_str().unwrap() {
                "scalar" if out["dtype"] == "int64" => {
                    let v = i64::from_ne_bytes(bytes[..8].try_into().unwrap());
                    assert_eq!(v, out["values"][i].as_i64().unwrap(), "{name}/{oname}[{s}]");
                }
                "scalar" => {
                    let v = u64::from_ne_bytes(bytes[..8].try_into().unwrap());
                    assert_eq!(
                        v,
                        out["bits"][i].as_u64().unwrap(),
                        "{name}/{oname}[{s}] bits"
                    );
                }
                "bytes" => {
                    let e = &out["samples"][i];
                    assert_eq!(
                        len.unwrap(),
                        e["len"].as_u64().unwrap(),
                        "{name}/{oname}[{s}] len"
                    );
                    assert_eq!(
                        hex(bytes),
                        e["sha256"].as_str().unwrap(),
                        "{name}/{oname}[{s}]"
                    );
                    if let Some(j) = json {
                        assert_eq!(j, &exp["json_values"][i], "{name}/{oname}[{s}] JSON");
                    }
                }
                "array" => {
                    let e = &out["samples"][i];
                    assert_eq!(
                        hex(bytes),
                        e["sha256"].as_str().unwrap(),
                        "{name}/{oname}[{s}]"
                    );
                }
                other => panic!("unknown kind {other}"),
            }
        }
    }
}

fn check_outputs_declared(name: &str, decoders: &[(&str, DecoderChoice)], skip: &[&str]) {
    let mut builder = Loader::builder(fixture(&format!("{name}.beton"))).batch_size(7);
    for (field, choice) in decoders {
        builder = builder.decoder(*field, choice.clone());
    }
    let loader = builder.build().unwrap();
    let exp = expected(name);
    let outputs = loader.outputs();
    for out in exp["outputs"].as_array().unwrap() {
        let oname = out["name"].as_str().unwrap();
        if skip.contains(&oname) {
            continue;
        }
        let info = outputs.iter().find(|o| o.name == oname).unwrap();
        assert_eq!(
            numpy_name(&info.dtype.descr()),
            out["dtype"],
            "{name}/{oname} dtype"
        );
        let shape: Vec<usize> = out["sample_shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(info.shape, shape, "{name}/{oname} shape");
    }
}

fn every_configuration(name: &str, decoders: &[(&str, DecoderChoice)], skip: &[&str]) {
    check_outputs_declared(name, decoders, skip);
    for os_cache in [true, false] {
        for workers in [1, 2] {
            let rows = load_all(name, os_cache, workers, true, decoders);
            check(name, &rows, skip);
        }
    }
    let rows = load_all(name, false, 2, false, decoders);
    check(name, &rows, skip);
}

#[test]
fn scalars_match_ffcv_bit_for_bit() {
    every_configuration("scalars", &[], &[]);
}

#[test]
fn bytes_and_ndarrays_match_ffcv_including_the_tied_pointer_sample() {
    every_configuration("bytes_ndarray", &[], &[]);
}

#[test]
fn json_rows_unpack_to_the_recorded_values() {
    every_configuration("json", &[], &[]);
}

#[test]
fn multipage_blobs_match_ffcv() {
    every_configuration("multipage", &[], &[]);
}

#[test]
fn page_retry_blobs_match_ffcv() {
    every_configuration("page_retry", &[], &[]);
}

#[test]
fn images_raw_labels_with_the_image_field_disabled() {
    every_configuration(
        "images_raw",
        &[("image", DecoderChoice::Disabled)],
        &["image"],
    );
}

#[test]
fn images_raw_stored_pixels_equal_ffcv_simple_decoder_output() {
    // Raw images are stored as the H x W x 3 pixels SimpleRGBImageDecoder returns, so the
    // stored bytes must hash like FFCV's decoded images.
    let raw: DecoderChoice = "raw-bytes".parse().unwrap();
    let rows = load_all("images_raw", false, 2, true, &[("image", raw)]);
    check("images_raw", &rows, &[]);
}

#[test]
fn an_image_field_of_varying_sizes_needs_a_crop_decoder() {
    // The default is FFCV's SimpleRGBImageDecoder, which serves constant-size images only:
    // images_jpg's sizes vary, so the build fails and says so.
    let err = Loader::builder(fixture("images_jpg.beton"))
        .batch_size(7)
        .build()
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("\"image\"") || text.contains("image"),
        "{text}"
    );
    assert!(text.contains("one size"), "{text}");
    // Disabling the field (or choosing a crop decoder) makes the rest loadable.
    let loader = Loader::builder(fixture("images_jpg.beton"))
        .batch_size(7)
        .disable("image")
        .build()
        .unwrap();
    assert_eq!(loader.len(), 3);
}
