//! `VarArrayField` (type id 3 with tagged arguments): arrays with a variable leading
//! dimension written, validated and read back exactly, empty arrays included; values that
//! are not whole rows, malformed argument blocks and hostile metadata (the corrupt corpus)
//! refused with errors naming the file, field and sample.

use beton_io::{
    DatasetWriter, Error, ExtentRule, FieldMetadata, FieldSpec, FieldType, FieldValue, HEADER_SIZE,
    JsonValue, NAME_SIZE, NumpyDtype, Reader, ReaderOptions, VarArrayArgs,
};
use ffcv_testkit::corrupt;

/// Sample `i`'s boxes: `i % 4` rows of four f32 (sample 0, 4, 8... are empty).
fn boxes(i: u64) -> Vec<u8> {
    (0..(i % 4) * 4)
        .flat_map(|k| (i as f32 * 10.0 + k as f32 * 0.5).to_le_bytes())
        .collect()
}

/// Sample `i`'s tokens: `i % 7` int32.
fn tokens(i: u64) -> Vec<u8> {
    (0..i % 7)
        .flat_map(|k| (i as i32 * 100 - k as i32).to_le_bytes())
        .collect()
}

fn box_args() -> VarArrayArgs {
    VarArrayArgs::new(NumpyDtype::f32(), vec![4]).unwrap()
}

fn token_args() -> VarArrayArgs {
    VarArrayArgs::new("<i4".parse().unwrap(), vec![]).unwrap()
}

fn write(path: &std::path::Path, n: u64, workers: usize) {
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new("boxes", FieldType::VarArray(box_args())),
        FieldSpec::new("tokens", FieldType::VarArray(token_args())),
    ];
    let samples: Vec<Vec<FieldValue>> = (0..n)
        .map(|i| {
            vec![
                FieldValue::Int(i as i64),
                FieldValue::NdArray(boxes(i)),
                FieldValue::NdArray(tokens(i)),
            ]
        })
        .collect();
    DatasetWriter::new(path, fields)
        .unwrap()
        .with_num_workers(workers)
        .write(&samples)
        .unwrap();
}

#[test]
fn var_arrays_round_trip_exactly_with_empty_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("var.beton");
    write(&path, 500, 2);
    let r = Reader::open(&path).unwrap();
    let f = &r.fields()[1];
    assert_eq!(f.type_id, 3, "stored under FFCV's BytesField type id");
    assert_eq!(f.field_type, FieldType::VarArray(box_args()));
    assert_eq!(f.field_type.type_name(), "VarArrayField");
    assert_eq!((f.metadata_offset, f.metadata_itemsize), (8, 16));
    assert_eq!(r.extent_rule(1), ExtentRule::Computed);
    assert_eq!(
        f.field_type.describe_arguments(),
        vec![
            ("dtype", JsonValue::String("<f4".into())),
            ("inner_shape", JsonValue::Array(vec![JsonValue::Int(4)])),
        ]
    );
    assert_eq!(
        r.fields()[2].field_type.describe_arguments()[1],
        ("inner_shape", JsonValue::Array(vec![]))
    );
    let args = r.field_arguments(1).unwrap();
    assert_eq!(&args[..8], b"FFRSVARR");
    for i in 0..500 {
        let FieldMetadata::VarArray { ptr, size } = r.metadata(i, 1).unwrap() else {
            panic!("typed metadata of sample {i}");
        };
        assert_eq!(size, (i % 4) * 16, "sample {i}");
        assert_eq!(&r.data_at(ptr).unwrap()[..size as usize], &boxes(i)[..]);
        assert_eq!(r.field_data(i, 1).unwrap().unwrap(), &boxes(i)[..]);
        assert_eq!(r.field_data(i, 2).unwrap().unwrap(), &tokens(i)[..]);
        assert_eq!(
            r.read_sample(i).unwrap(),
            vec![
                FieldValue::Int(i as i64),
                FieldValue::NdArray(boxes(i)),
                FieldValue::NdArray(tokens(i)),
            ]
        );
    }
}

#[test]
fn one_worker_writes_the_same_bytes_as_a_bytes_field_apart_from_the_arguments() {
    // With the arguments zeroed the file is exactly a BytesField file of the same bytes:
    // what FFCV 1.0.2 sees.
    let dir = tempfile::tempdir().unwrap();
    let var = dir.path().join("var.beton");
    let plain = dir.path().join("plain.beton");
    let values = |i: u64| vec![FieldValue::Int(i as i64), FieldValue::NdArray(boxes(i))];
    let samples: Vec<Vec<FieldValue>> = (0..50).map(values).collect();
    DatasetWriter::new(
        &var,
        vec![
            FieldSpec::new("label", FieldType::Int),
            FieldSpec::new("boxes", FieldType::VarArray(box_args())),
        ],
    )
    .unwrap()
    .with_num_workers(1)
    .write(&samples)
    .unwrap();
    let as_bytes: Vec<Vec<FieldValue>> = (0..50)
        .map(|i| vec![FieldValue::Int(i as i64), FieldValue::Bytes(boxes(i))])
        .collect();
    DatasetWriter::new(
        &plain,
        vec![
            FieldSpec::new("label", FieldType::Int),
            FieldSpec::new("boxes", FieldType::Bytes),
        ],
    )
    .unwrap()
    .with_num_workers(1)
    .write(&as_bytes)
    .unwrap();
    let mut var = std::fs::read(&var).unwrap();
    let args = HEADER_SIZE as usize + 2 * 1041 - 1024;
    var[args..args + 1024].fill(0);
    assert_eq!(var, std::fs::read(&plain).unwrap());
    let r = Reader::from_vec("zeroed", var, &ReaderOptions::new()).unwrap();
    assert_eq!(r.fields()[1].field_type, FieldType::Bytes);
}

#[test]
fn a_value_that_is_not_whole_rows_names_sample_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("var.beton");
    let fields = vec![FieldSpec::new("boxes", FieldType::VarArray(box_args()))];
    let mut samples: Vec<Vec<FieldValue>> = (0..10)
        .map(|i| vec![FieldValue::NdArray(boxes(i))])
        .collect();
    samples[6] = vec![FieldValue::NdArray(vec![0; 20])];
    let e = DatasetWriter::new(&path, fields.clone())
        .unwrap()
        .write(&samples)
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidValue { sample: 6, field, reason, .. }
            if field == "boxes" && reason.contains("size 20 is not a multiple of the 16-byte row")),
        "{e:?}"
    );
    samples[6] = vec![FieldValue::Bytes(vec![0; 16])];
    let e = DatasetWriter::new(&path, fields)
        .unwrap()
        .write(&samples)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("a Bytes value for a VarArrayField field"),
        "{e}"
    );
}

#[test]
fn malformed_arguments_are_refused_at_open_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("var.beton");
    write(&path, 5, 1);
    let good = std::fs::read(&path).unwrap();
    let args = HEADER_SIZE as usize + 1041 + 1 + NAME_SIZE;
    for (at, bytes, why) in [
        (8, &9u32.to_le_bytes()[..], "layout version 9"),
        (12, &99u32.to_le_bytes()[..], "99 inner dimensions"),
        (16, &5000u64.to_le_bytes()[..], "description length 5000"),
        (24, &0u64.to_le_bytes()[..], "zero dimension"),
        (900, &[7u8][..], "not zero"),
        (272, b"[[\"\", \"<Q4\"]]", "unsupported numpy type string"),
    ] {
        let mut bad = good.clone();
        bad[args + at..args + at + bytes.len()].copy_from_slice(bytes);
        let e = Reader::from_vec("x.beton", bad, &ReaderOptions::new()).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidFieldArguments { index: 1, name, reason, .. }
                if name == "boxes" && reason.contains(why)),
            "{why}: {e:?}"
        );
        assert!(e.to_string().contains("x.beton"), "{e}");
    }
}

#[test]
fn hostile_metadata_is_refused_at_open_naming_file_field_and_sample() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("var.beton");
    write(&path, 12, 1);
    let good = std::fs::read(&path).unwrap();
    let r = Reader::open(&path).unwrap();
    let at = |s: u64, field: usize| {
        (r.layout().metadata_offset
            + s * r.layout().metadata_itemsize
            + r.fields()[field].metadata_offset) as usize
    };
    for (size, why) in [
        (17u64, "size 17 is not a multiple of the 16-byte row"),
        (u64::MAX, "is not a multiple"),
        (u64::MAX / 16 * 16, "needs 18446744073709551600 bytes"),
    ] {
        let mut bad = good.clone();
        let m = at(3, 1) + 8;
        bad[m..m + 8].copy_from_slice(&size.to_le_bytes());
        let e = Reader::from_vec("hostile.beton", bad, &ReaderOptions::new()).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidMetadata { sample: 3, field, reason, .. }
                if field == "boxes" && reason.contains(why)),
            "{why}: {e:?}"
        );
        assert!(e.to_string().contains("hostile.beton"), "{e}");
    }
    // The shared corpus of damaged copies, this field's edits included.
    let files = corrupt::corpus(&good).unwrap();
    assert!(
        files
            .iter()
            .any(|c| c.name.contains("not a whole number of rows"))
    );
    for c in files {
        match Reader::from_vec("c", c.bytes.clone(), &ReaderOptions::new()) {
            Err(e) => assert!(c.expected.matches(&e), "{}: {e:?}", c.name),
            Ok(_) => panic!("{} opened", c.name),
        }
    }
}
