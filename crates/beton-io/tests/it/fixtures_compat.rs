//! Every FFCV 1.0.2 fixture opens and reproduces, exactly, the facts and values recorded in its
//! `expected.json`: header, layout, field descriptors, every metadata column, the allocation
//! table, the page map with its orphan regions, tied pointers, and the decoded values.

use base64::Engine as _;
use beton_io::{FieldMetadata, FieldType, JsonValue, Reader};
use serde_json::Value;
use sha2::{Digest, Sha256};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/ffcv-1.0.2"
);
const NAMES: [&str; 7] = [
    "scalars",
    "bytes_ndarray",
    "json",
    "images_raw",
    "images_jpg",
    "multipage",
    "page_retry",
];

fn load(name: &str) -> (Reader, Value) {
    let reader = Reader::open(format!("{FIXTURES}/{name}.beton")).unwrap();
    let text = std::fs::read_to_string(format!("{FIXTURES}/{name}.expected.json")).unwrap();
    (reader, serde_json::from_str(&text).unwrap())
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn b64(s: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s.as_str().unwrap())
        .unwrap()
}

/// numpy's `descr` of a field's metadata type, as the fixtures record it.
fn metadata_descr(t: &FieldType) -> Value {
    let pairs: &[(&str, &str)] = match t {
        FieldType::Int => &[("", "<i8")],
        FieldType::Float => &[("", "<f8")],
        FieldType::Bytes | FieldType::Json => &[("ptr", "<u8"), ("size", "<u8")],
        FieldType::NdArray(_) | FieldType::TorchTensor(_) => &[("", "<u8")],
        FieldType::RgbImage => &[
            ("mode", "|u1"),
            ("width", "<u2"),
            ("height", "<u2"),
            ("data_ptr", "<u8"),
        ],
        other => panic!("no {} fields in the fixtures", other.type_name()),
    };
    Value::Array(
        pairs
            .iter()
            .map(|(n, t)| Value::Array(vec![Value::from(*n), Value::from(*t)]))
            .collect(),
    )
}

#[test]
fn header_and_layout_match() {
    for name in NAMES {
        let (r, e) = load(name);
        let h = &e["header"];
        assert_eq!(u64::from(r.header().version), u(&h["version"]));
        assert_eq!(u64::from(r.header().num_fields), u(&h["num_fields"]));
        assert_eq!(r.page_size(), u(&h["page_size"]));
        assert_eq!(r.num_samples(), u(&h["num_samples"]));
        assert_eq!(r.header().alloc_table_ptr, u(&h["alloc_table_ptr"]));
        let l = &e["layout"];
        assert_eq!(beton_io::HEADER_SIZE, u(&l["header_size"]));
        assert_eq!(beton_io::FIELD_DESC_SIZE, u(&l["field_desc_size"]));
        assert_eq!(beton_io::ALLOC_ROW_SIZE, u(&l["alloc_table_row_size"]));
        assert_eq!(
            r.layout().metadata_offset,
            u(&l["metadata_offset"]),
            "{name}"
        );
        assert_eq!(r.layout().metadata_itemsize, u(&l["metadata_itemsize"]));
        assert_eq!(r.layout().metadata_size, u(&l["metadata_size"]));
        assert_eq!(r.layout().data_region_start, u(&l["data_region_start"]));
        assert_eq!(r.layout().alloc_table_rows, u(&l["alloc_table_rows"]));
        assert_eq!(
            r.layout().alloc_table_rows * 24,
            u(&l["alloc_table_size_bytes"])
        );
        assert_eq!(r.file_size(), u(&e["file_size"]));
        assert_eq!(sha(r.bytes().unwrap()), e["file_sha256"].as_str().unwrap());
    }
}

#[test]
fn field_descriptors_match() {
    for name in NAMES {
        let (r, e) = load(name);
        let expected = e["fields"].as_array().unwrap();
        assert_eq!(r.fields().len(), expected.len());
        for (i, (f, x)) in r.fields().iter().zip(expected).enumerate() {
            assert_eq!(u(&x["index"]), i as u64);
            assert_eq!(f.name, x["name"].as_str().unwrap());
            assert_eq!(r.field_index(&f.name), Some(i));
            assert_eq!(u64::from(f.type_id), u(&x["type_id"]));
            assert_eq!(f.field_type.type_id(), f.type_id);
            assert_eq!(f.field_type.type_name(), x["type_name"].as_str().unwrap());
            assert_eq!(
                f.metadata_offset,
                u(&x["metadata_offset"]),
                "{name}.{}",
                f.name
            );
            assert_eq!(f.metadata_itemsize, u(&x["metadata_itemsize"]));
            assert_eq!(metadata_descr(&f.field_type), x["metadata_descr"]);
            let args = r.field_arguments(i).unwrap();
            let trimmed = &args[..args.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1)];
            assert_eq!(hex(trimmed), x["arguments_hex"].as_str().unwrap());
        }
        // NDArray parameters from the writer settings.
        for (f, w) in r
            .fields()
            .iter()
            .zip(e["writer"]["fields"].as_array().unwrap())
        {
            if let Some(a) = f.field_type.ndarray_args() {
                assert_eq!(a.dtype.descr(), w["params"]["dtype"].as_str().unwrap());
                let shape: Vec<u64> = w["params"]["shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(u)
                    .collect();
                assert_eq!(a.shape, shape);
            }
        }
    }
}

#[test]
fn metadata_region_and_every_column_match() {
    for name in NAMES {
        let (r, e) = load(name);
        let l = r.layout();
        let region = &r.bytes().unwrap()[l.metadata_offset as usize..][..l.metadata_size as usize];
        assert_eq!(region, b64(&e["metadata_b64"]).as_slice());
        let cols = &e["metadata_columns"];
        for (fi, f) in r.fields().iter().enumerate() {
            let c = &cols[&f.name];
            for s in 0..r.num_samples() {
                let at = s as usize;
                let row = r.metadata_row(s).unwrap();
                let own = &row[f.metadata_offset as usize..][..f.metadata_itemsize as usize];
                assert_eq!(own, r.metadata_bytes(s, fi).unwrap());
                match r.metadata(s, fi).unwrap() {
                    FieldMetadata::Int(v) => assert_eq!(v, c["value"][at].as_i64().unwrap()),
                    FieldMetadata::Float(v) => {
                        assert_eq!(v.to_bits(), u(&c["value_bits"][at]), "{name} {s}");
                        if let Some(x) = c["value"][at].as_f64() {
                            assert_eq!(v.to_bits(), x.to_bits());
                        } else {
                            assert!(!v.is_finite());
                        }
                    }
                    FieldMetadata::Bytes { ptr, size } | FieldMetadata::Json { ptr, size } => {
                        assert_eq!(ptr, u(&c["ptr"][at]));
                        assert_eq!(size, u(&c["size"][at]));
                    }
                    FieldMetadata::NdArray { ptr } | FieldMetadata::TorchTensor { ptr } => {
                        assert_eq!(ptr, u(&c["value"][at]));
                    }
                    FieldMetadata::RgbImage {
                        mode,
                        width,
                        height,
                        data_ptr,
                    } => {
                        assert_eq!(u64::from(mode), u(&c["mode"][at]));
                        assert_eq!(u64::from(width), u(&c["width"][at]));
                        assert_eq!(u64::from(height), u(&c["height"][at]));
                        assert_eq!(data_ptr, u(&c["data_ptr"][at]));
                    }
                    other => unreachable!("no such field in the fixtures: {other:?}"),
                }
            }
        }
    }
}

#[test]
fn alloc_table_matches_in_file_order() {
    for name in NAMES {
        let (r, e) = load(name);
        let rows: Vec<[u64; 3]> = r
            .alloc_rows()
            .map(|a| [a.sample_id, a.ptr, a.size])
            .collect();
        let expected: Vec<[u64; 3]> = e["alloc_table"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| [u(&row[0]), u(&row[1]), u(&row[2])])
            .collect();
        assert_eq!(rows, expected, "{name}");
    }
}

#[test]
fn scalars_has_an_empty_alloc_table_at_the_end_of_the_file() {
    let (r, _) = load("scalars");
    assert_eq!(r.header().alloc_table_ptr, r.file_size());
    assert_eq!(r.alloc_rows().count(), 0);
    assert!(r.page_map().data_pages().is_empty());
    assert!(r.page_map().pages_of_sample(0).is_empty());
    assert_eq!(r.page_map().num_pages(), 1);
    assert_eq!(r.field_data(0, 0).unwrap(), None);
}

#[test]
fn page_map_matches() {
    for name in NAMES {
        let (r, e) = load(name);
        let Some(p) = e.get("pages") else { continue };
        let log2 = u(&p["page_size_log2"]);
        assert_eq!(r.page_map().page_size(), 1 << log2);
        assert_eq!(r.page_map().num_pages(), r.file_size().div_ceil(1 << log2));
        let mut by_sample: Vec<Vec<u64>> = vec![Vec::new(); r.num_samples() as usize];
        for s in p["samples"].as_array().unwrap() {
            let sample = u(&s["sample"]);
            let rows: Vec<_> = r.alloc_rows().filter(|a| a.sample_id == sample).collect();
            let allocs = s["allocs"].as_array().unwrap();
            assert_eq!(rows.len(), allocs.len());
            for (row, a) in rows.iter().zip(allocs) {
                assert_eq!(row.ptr, u(&a["ptr"]));
                assert_eq!(row.size, u(&a["size"]));
                assert_eq!(row.ptr >> log2, u(&a["page"]));
                assert_eq!(u(&a["page"]), u(&a["last_page"]), "never crosses a page");
                assert_eq!(row.ptr % (1 << log2), u(&a["offset_in_page"]));
                by_sample[sample as usize].push(u(&a["page"]));
            }
        }
        for (s, pages) in by_sample.iter_mut().enumerate() {
            pages.sort_unstable();
            pages.dedup();
            assert_eq!(r.page_map().pages_of_sample(s as u64), pages.as_slice());
        }
        let p2s = p["page_to_samples"].as_object().unwrap();
        let mut data_pages: Vec<u64> = p2s.keys().map(|k| k.parse().unwrap()).collect();
        data_pages.sort_unstable();
        assert_eq!(r.page_map().data_pages(), data_pages.as_slice(), "{name}");
        for (page, samples) in p2s {
            let samples: Vec<u64> = samples.as_array().unwrap().iter().map(u).collect();
            assert_eq!(r.page_map().samples_of_page(page.parse().unwrap()), samples);
        }
    }
}

/// Non-zero bytes of data pages that no allocation covers, as
/// `(page, gap_start, gap_end, nonzero_start, nonzero_end)` within the page.
fn orphan_regions(r: &Reader) -> Vec<[u64; 5]> {
    let ps = r.page_size();
    let mut out = Vec::new();
    for &page in r.page_map().data_pages() {
        let base = page * ps;
        let page_bytes =
            &r.bytes().unwrap()[base as usize..(base + ps).min(r.file_size()) as usize];
        let mut covered: Vec<(u64, u64)> = r
            .alloc_rows()
            .filter(|a| a.ptr / ps == page && a.size > 0)
            .map(|a| (a.ptr - base, a.ptr - base + a.size))
            .collect();
        covered.sort_unstable();
        let mut gaps = Vec::new();
        let mut at = 0;
        for (s, e) in covered {
            if s > at {
                gaps.push((at, s));
            }
            at = at.max(e);
        }
        gaps.push((at, page_bytes.len() as u64));
        for (gs, ge) in gaps {
            let gap = &page_bytes[gs as usize..ge as usize];
            if let Some(first) = gap.iter().position(|&b| b != 0) {
                let last = gap.iter().rposition(|&b| b != 0).unwrap();
                out.push([page, gs, ge, gs + first as u64, gs + last as u64 + 1]);
            }
        }
    }
    out
}

#[test]
fn orphan_regions_are_exactly_the_recorded_ones() {
    for name in NAMES {
        let (r, e) = load(name);
        let Some(p) = e.get("pages") else { continue };
        let expected = p["orphan_regions"].as_array().unwrap();
        let found = orphan_regions(&r);
        assert_eq!(found.len(), expected.len(), "{name}");
        for (f, x) in found.iter().zip(expected) {
            let want = [
                u(&x["page"]),
                u(&x["gap_start"]),
                u(&x["gap_end"]),
                u(&x["nonzero_start"]),
                u(&x["nonzero_end"]),
            ];
            assert_eq!(*f, want);
            // The orphan is a byte-identical copy of the sample's allocation at copy_of_ptr.
            let base = f[0] * r.page_size();
            let orphan = &r.bytes().unwrap()
                [(base + u(&x["start"])) as usize..(base + u(&x["end"])) as usize];
            assert_eq!(orphan, r.data_at(u(&x["copy_of_ptr"])).unwrap());
            let rows: Vec<_> = r
                .alloc_rows()
                .filter(|a| a.ptr == u(&x["copy_of_ptr"]))
                .collect();
            assert_eq!(rows.len(), 1);
            assert_eq!(rows[0].sample_id, u(&x["sample"]));
        }
    }
    // The README's page_retry facts: one orphan, a copy of sample 7's field `a`, in page 2.
    let (r, _) = load("page_retry");
    assert_eq!(
        orphan_regions(&r),
        vec![[2, 1722683, 2097152, 1722683, 1931937]]
    );
}

#[test]
fn tied_ptrs_resolve_to_the_largest_size() {
    for name in NAMES {
        let (r, e) = load(name);
        let expected = e
            .get("tied_ptrs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut counts = std::collections::BTreeMap::new();
        for a in r.alloc_rows() {
            *counts.entry(a.ptr).or_insert(0) += 1;
        }
        let tied: Vec<u64> = counts
            .iter()
            .filter(|&(_, &n)| n > 1)
            .map(|(&p, _)| p)
            .collect();
        let want: Vec<u64> = expected.iter().map(|t| u(&t["ptr"])).collect();
        assert_eq!(tied, want, "{name}");
        for t in &expected {
            let ptr = u(&t["ptr"]);
            assert_eq!(
                r.alloc_size(ptr),
                Some(u(&t["size_resolved_by_reference_run"]))
            );
            assert_eq!(
                r.data_at(ptr).unwrap().len() as u64,
                u(&t["size_resolved_by_reference_run"])
            );
        }
    }
}

#[test]
fn decoded_outputs_match() {
    for name in NAMES {
        let (r, e) = load(name);
        for out in e["outputs"].as_array().unwrap() {
            let fi = r.field_index(out["name"].as_str().unwrap()).unwrap();
            let field = &r.fields()[fi];
            if matches!(field.field_type, FieldType::RgbImage) && name == "images_jpg" {
                continue; // decoded pixels need a JPEG decoder; the stored bytes are checked below
            }
            let mut all = Vec::new();
            match out["kind"].as_str().unwrap() {
                "scalar" => {
                    for s in 0..r.num_samples() {
                        let at = s as usize;
                        match r.metadata(s, fi).unwrap() {
                            FieldMetadata::Int(v) => {
                                assert_eq!(v, out["values"][at].as_i64().unwrap());
                                all.extend_from_slice(&v.to_le_bytes());
                            }
                            FieldMetadata::Float(v) => {
                                assert_eq!(v.to_bits(), u(&out["bits"][at]));
                                all.extend_from_slice(&v.to_le_bytes());
                            }
                            other => panic!("{other:?}"),
                        }
                    }
                }
                "bytes" | "array" => {
                    let samples = out["samples"].as_array().unwrap();
                    assert_eq!(samples.len() as u64, r.num_samples());
                    for (s, x) in samples.iter().enumerate() {
                        let data = r.field_data(s as u64, fi).unwrap().unwrap();
                        if let Some(len) = x.get("len") {
                            assert_eq!(data.len() as u64, u(len));
                            let head = &data[..data.len().min(32)];
                            let tail = &data[data.len().saturating_sub(32)..];
                            assert_eq!(hex(head), x["head_hex"].as_str().unwrap());
                            assert_eq!(hex(tail), x["tail_hex"].as_str().unwrap());
                        }
                        assert_eq!(sha(data), x["sha256"].as_str().unwrap(), "{name} {s}");
                        if let Some(b) = x.get("b64") {
                            assert_eq!(data, b64(b).as_slice());
                        }
                        all.extend_from_slice(data);
                    }
                }
                other => panic!("unknown kind {other}"),
            }
            assert_eq!(sha(&all), out["all_sha256"].as_str().unwrap(), "{name}");
        }
    }
}

#[test]
fn the_tied_zero_length_sample_reads_the_written_vec() {
    let (r, e) = load("bytes_ndarray");
    let vec = r.field_index("vec").unwrap();
    let blob = r.field_index("blob").unwrap();
    assert_eq!(r.field_data(0, blob).unwrap().unwrap().len(), 0);
    let data = r.field_data(0, vec).unwrap().unwrap();
    assert_eq!(data.len(), 48);
    let undefined = &e["reference_output_undefined"][0];
    assert_eq!(undefined["output"], "vec");
    assert_eq!(u(&undefined["sample"]), 0);
    assert_eq!(
        sha(data),
        e["outputs"][2]["samples"][0]["sha256"].as_str().unwrap()
    );
}

/// Compares a parsed JSON value with the fixture's (key order is checked separately through
/// the stored text).
fn same_json(a: &JsonValue, b: &Value) -> bool {
    match (a, b) {
        (JsonValue::Null, Value::Null) => true,
        (JsonValue::Bool(x), Value::Bool(y)) => x == y,
        (JsonValue::Int(x), Value::Number(y)) => y.as_i64().map(i128::from) == Some(*x),
        (JsonValue::Float(x), Value::Number(y)) => {
            y.as_f64().map(f64::to_bits) == Some(x.to_bits())
        }
        (JsonValue::String(x), Value::String(y)) => x == y,
        (JsonValue::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        (JsonValue::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => false,
    }
}

#[test]
fn json_values_match_and_re_encode_to_the_stored_bytes() {
    let (r, e) = load("json");
    let meta = r.field_index("meta").unwrap();
    let values = e["json_values"].as_array().unwrap();
    assert_eq!(values.len() as u64, r.num_samples());
    for (s, want) in values.iter().enumerate() {
        let v = r.json_value(s as u64, meta).unwrap();
        assert!(same_json(&v, want), "sample {s}: {v:?} != {want}");
        let stored = r.field_data(s as u64, meta).unwrap().unwrap();
        let mut text = v.to_python_json().into_bytes();
        text.push(0);
        assert_eq!(stored, text.as_slice());
    }
}

#[test]
fn raw_images_are_mode_1_and_jpegs_mode_0_with_the_stored_bytes() {
    let (r, e) = load("images_raw");
    let image = r.field_index("image").unwrap();
    for s in 0..r.num_samples() {
        let FieldMetadata::RgbImage {
            mode,
            width,
            height,
            ..
        } = r.metadata(s, image).unwrap()
        else {
            panic!()
        };
        assert_eq!((mode, width, height), (beton_io::IMAGE_MODE_RAW, 32, 32));
        let pixels = r.field_data(s, image).unwrap().unwrap();
        assert_eq!(pixels.len(), 32 * 32 * 3);
        assert_eq!(
            sha(pixels),
            e["outputs"][0]["samples"][s as usize]["sha256"]
                .as_str()
                .unwrap()
        );
    }
    let (r, e) = load("images_jpg");
    let image = r.field_index("image").unwrap();
    for x in e["jpeg"]["samples"].as_array().unwrap() {
        let s = u(&x["sample"]);
        let FieldMetadata::RgbImage {
            mode,
            width,
            height,
            ..
        } = r.metadata(s, image).unwrap()
        else {
            panic!()
        };
        assert_eq!(mode, beton_io::IMAGE_MODE_JPEG);
        assert_eq!(u64::from(width), u(&x["width"]));
        assert_eq!(u64::from(height), u(&x["height"]));
        let jpeg = r.field_data(s, image).unwrap().unwrap();
        assert_eq!(jpeg.len() as u64, u(&x["jpeg_size"]));
        assert_eq!(sha(jpeg), x["jpeg_sha256"].as_str().unwrap());
        assert!(jpeg.starts_with(&[0xFF, 0xD8]));
    }
}

#[test]
fn accessors_reject_out_of_range_requests() {
    let (r, _) = load("bytes_ndarray");
    assert!(matches!(
        r.metadata(64, 0),
        Err(beton_io::Error::SampleOutOfRange {
            sample: 64,
            num_samples: 64,
            ..
        })
    ));
    assert!(matches!(
        r.metadata(0, 4),
        Err(beton_io::Error::FieldOutOfRange {
            field: 4,
            num_fields: 4,
            ..
        })
    ));
    assert!(matches!(
        r.data_at(2097153),
        Err(beton_io::Error::NoAllocation { ptr: 2097153, .. })
    ));
    assert!(r.metadata_row(u64::MAX).is_err());
    assert_eq!(r.alloc_size(0), None);
}
