//! `ffcv dump --raw` on every FFCV 1.0.2 fixture reproduces the values FFCV's loader returned.

use crate::support;

use base64::Engine as _;
use serde_json::{Value, json};
use support::{FIXTURES, expected, ffcv, fixture};

fn dump(name: &str, extra: &[&str]) -> Vec<Value> {
    let path = fixture(name);
    let mut args = vec!["dump", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let run = ffcv(&args);
    assert_eq!(run.code, Some(0), "{name}: {}", run.stderr);
    run.json_lines()
}

fn field_class(want: &Value, field: &str) -> String {
    want["writer"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == field)
        .map(|f| f["class"].as_str().unwrap().to_owned())
        .unwrap()
}

#[test]
fn dump_raw_reproduces_every_recorded_value() {
    for name in FIXTURES {
        let want = expected(name);
        let lines = dump(name, &["--raw"]);
        assert_eq!(
            Value::from(lines.len()),
            want["header"]["num_samples"],
            "{name}: line count"
        );
        for (i, line) in lines.iter().enumerate() {
            assert_eq!(line["sample"], json!(i), "{name}: sample ids in order");
        }
        for output in want["outputs"].as_array().unwrap() {
            let field = output["name"].as_str().unwrap();
            let class = field_class(&want, field);
            for (i, line) in lines.iter().enumerate() {
                let got = &line[field];
                let at = format!("{name}: sample {i}, field {field}");
                match (output["kind"].as_str().unwrap(), class.as_str()) {
                    ("scalar", "FloatField") => {
                        // Floats by bit pattern: -0.0, NaN and subnormals included.
                        assert_eq!(line[format!("{field}.bits")], output["bits"][i], "{at}");
                        let bits = output["bits"][i].as_u64().unwrap();
                        let x = f64::from_bits(bits);
                        if x.is_nan() {
                            assert_eq!(got, "NaN", "{at}");
                        } else if x.is_infinite() {
                            assert_eq!(got, if x > 0.0 { "inf" } else { "-inf" }, "{at}");
                        } else {
                            assert_eq!(got.as_f64().unwrap().to_bits(), bits, "{at}");
                        }
                    }
                    ("scalar", _) => assert_eq!(got, &output["values"][i], "{at}"),
                    ("bytes", "JSONField") => assert_eq!(got, &want["json_values"][i], "{at}"),
                    ("bytes", _) => {
                        let sample = &output["samples"][i];
                        assert_eq!(got["len"], sample["len"], "{at}");
                        assert_eq!(got["sha256"], sample["sha256"], "{at}");
                        if let Some(b64) = sample.get("b64") {
                            assert_eq!(&got["b64"], b64, "{at}");
                        }
                    }
                    ("array", "NDArrayField") => {
                        let sample = &output["samples"][i];
                        assert_eq!(got["sha256"], sample["sha256"], "{at}");
                        assert_eq!(got["b64"], sample["b64"], "{at}");
                        assert_eq!(got["shape"], output["sample_shape"], "{at}");
                        let params = &want["writer"]["fields"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .find(|f| f["name"] == field)
                            .unwrap()["params"];
                        assert_eq!(got["dtype"], params["dtype"], "{at}");
                    }
                    ("array", "RGBImageField") if output["decoder"] == "SimpleRGBImageDecoder" => {
                        let sample = &output["samples"][i];
                        assert_eq!(got["mode"], "raw", "{at}");
                        assert_eq!(got["shape"], output["sample_shape"], "{at}");
                        assert_eq!(got["sha256"], sample["sha256"], "{at}");
                        assert_eq!(got["b64"], sample["b64"], "{at}");
                    }
                    ("array", "RGBImageField") => {
                        // JPEG: the full-resolution decode FFCV's libjpeg-turbo produced
                        // (before its center crop), and the stored stream.
                        let jpeg = &want["jpeg"]["samples"][i];
                        assert_eq!(got["mode"], "jpg", "{at}");
                        assert_eq!(got["width"], jpeg["width"], "{at}");
                        assert_eq!(got["height"], jpeg["height"], "{at}");
                        assert_eq!(
                            got["shape"],
                            json!([jpeg["height"], jpeg["width"], 3]),
                            "{at}"
                        );
                        assert_eq!(got["jpeg_len"], jpeg["jpeg_size"], "{at}");
                        assert_eq!(got["jpeg_sha256"], jpeg["jpeg_sha256"], "{at}");
                        assert_eq!(got["sha256"], jpeg["full_decode_sha256"], "{at}");
                        assert_eq!(got["b64"], jpeg["full_decode_b64"], "{at}");
                    }
                    other => panic!("{at}: unexpected output kind {other:?}"),
                }
            }
        }
    }
}

#[test]
fn without_raw_there_is_no_b64() {
    let lines = dump("bytes_ndarray", &["--count", "3"]);
    assert_eq!(lines.len(), 3);
    for line in &lines {
        for field in ["blob", "vec", "mat"] {
            assert!(line[field].get("sha256").is_some());
            assert!(line[field].get("b64").is_none(), "{line}");
        }
    }
}

#[test]
fn the_zero_length_blob_with_a_tied_ptr_reads_the_written_vector() {
    // bytes_ndarray sample 0: an empty blob and a 48-byte `vec` share ptr 2097152 in the
    // allocation table; the vector must come back as written (see the fixtures README).
    let want = expected("bytes_ndarray");
    let line = &dump("bytes_ndarray", &["--raw", "--count", "1"])[0];
    assert_eq!(
        line["blob"],
        json!({"len": 0, "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "b64": ""})
    );
    let vec_b64 = line["vec"]["b64"].as_str().unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(vec_b64)
        .unwrap();
    assert_eq!(bytes.len(), 48);
    assert_eq!(line["vec"]["b64"], want["outputs"][2]["samples"][0]["b64"]);
}

#[test]
fn json_values_print_exactly_as_python_stored_them() {
    // FFCV stores `json.dumps(value)` + NUL; dump prints the parsed value in the same style,
    // so the text after `"meta": ` is the stored text byte for byte.
    let want = expected("json");
    let path = fixture("json");
    let run = ffcv(["dump", path.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    for (i, line) in run.stdout.lines().enumerate() {
        let stored_b64 = want["outputs"][1]["samples"][i]["b64"].as_str().unwrap();
        let stored = base64::engine::general_purpose::STANDARD
            .decode(stored_b64)
            .unwrap();
        let stored = std::str::from_utf8(stored.strip_suffix(b"\0").unwrap()).unwrap();
        let prefix = format!("{{\"sample\": {i}, \"index\": {i}, \"meta\": ");
        assert_eq!(line, format!("{prefix}{stored}}}"), "sample {i}");
    }
}

#[test]
fn scalar_lines_match_the_python_reference_dump_text() {
    // What `ffcv_dump.py` (FFCV + json.dumps) prints for the first samples of scalars.beton.
    let path = fixture("scalars");
    let run = ffcv(["dump", path.to_str().unwrap(), "--count", "10"]);
    let expected = [
        r#"{"sample": 0, "index": 0, "value": 0.0, "value.bits": 0}"#,
        r#"{"sample": 1, "index": 1, "value": -0.0, "value.bits": 9223372036854775808}"#,
        r#"{"sample": 2, "index": 2, "value": "inf", "value.bits": 9218868437227405312}"#,
        r#"{"sample": 3, "index": 3, "value": "-inf", "value.bits": 18442240474082181120}"#,
        r#"{"sample": 4, "index": 4, "value": "NaN", "value.bits": 9221120237041090560}"#,
        r#"{"sample": 5, "index": 5, "value": 5e-324, "value.bits": 1}"#,
        r#"{"sample": 6, "index": 6, "value": 1.7976931348623157e+308, "value.bits": 9218868437227405311}"#,
        r#"{"sample": 7, "index": 7, "value": 2.2250738585072014e-308, "value.bits": 4503599627370496}"#,
        r#"{"sample": 8, "index": 8, "value": -1.5, "value.bits": 13832806255468478464}"#,
        r#"{"sample": 9, "index": 9, "value": 0.3333333333333333, "value.bits": 4599676419421066581}"#,
    ];
    assert_eq!(run.stdout.lines().collect::<Vec<_>>(), expected);
}

#[test]
fn fields_start_and_count_select_columns_and_rows() {
    let lines = dump(
        "bytes_ndarray",
        &["--fields", "mat,index", "--start", "5", "--count", "3"],
    );
    assert_eq!(lines.len(), 3);
    for (line, sample) in lines.iter().zip(5..) {
        let keys: Vec<&String> = line.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["sample", "mat", "index"], "requested order kept");
        assert_eq!(line["sample"], sample);
        assert_eq!(line["index"], sample);
    }
    // A count past the end stops at the last sample; start == num_samples prints nothing.
    assert_eq!(
        dump("scalars", &["--start", "98", "--count", "10"]).len(),
        2
    );
    assert!(dump("scalars", &["--start", "100"]).is_empty());
    assert!(dump("scalars", &["--count", "0"]).is_empty());
}

#[test]
fn a_start_past_the_end_or_an_unknown_field_is_a_runtime_error() {
    let path = fixture("scalars");
    let path = path.to_str().unwrap();
    ffcv(["dump", path, "--start", "101"])
        .assert_runtime_error("--start 101 is past the end (the file has 100 samples)");
    ffcv(["dump", path, "--fields", "index,nope"])
        .assert_runtime_error("no field named `nope` (the file has: index, value)");
}
