//! JsonValue reproduces CPython's `json.dumps` exactly, checked against vectors CPython 3.11
//! produced (`tests/data/python_json.json`, made by `tests/data/gen_python_json.py`): float
//! reprs by bit pattern, strings by code point (ensure_ascii escapes, surrogate pairs), and
//! whole documents through parse-then-dump.

use beton_io::{JsonValue, python_float_repr};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/python_json.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn float_reprs_match_cpython_for_every_vector() {
    let v = vectors();
    let floats = v["floats"].as_array().unwrap();
    assert!(floats.len() > 3000);
    for f in floats {
        let x = f64::from_bits(f["bits"].as_u64().unwrap());
        assert_eq!(
            python_float_repr(x),
            f["repr"].as_str().unwrap(),
            "bits {}",
            f["bits"]
        );
        assert_eq!(
            JsonValue::Float(x).to_python_json(),
            f["repr"].as_str().unwrap()
        );
    }
}

#[test]
fn strings_escape_like_cpython() {
    let v = vectors();
    for s in v["strings"].as_array().unwrap() {
        let text: String = s["code_points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| char::from_u32(c.as_u64().unwrap() as u32).unwrap())
            .collect();
        let dumped = JsonValue::String(text.clone()).to_python_json();
        assert_eq!(dumped, s["dumps"].as_str().unwrap());
        assert_eq!(JsonValue::parse(&dumped).unwrap(), JsonValue::String(text));
    }
}

#[test]
fn documents_survive_parse_then_dump_byte_for_byte() {
    let v = vectors();
    for d in v["documents"].as_array().unwrap() {
        let text = d.as_str().unwrap();
        assert_eq!(JsonValue::parse(text).unwrap().to_python_json(), text);
    }
}
