//! `FixedBytesField` (ffcv-rs's type id 128): exactly `len` bytes per sample, written,
//! validated and read back; a value of another length, a zero length and a malformed
//! argument block are refused with errors naming where.

use beton_io::{
    DatasetWriter, Error, ExtentRule, FieldMetadata, FieldSpec, FieldType, FieldValue, HEADER_SIZE,
    JsonValue, NAME_SIZE, Reader, ReaderOptions,
};

fn bytes(i: u64, len: usize) -> Vec<u8> {
    (0..len).map(|k| (i as usize * 31 + k * 7) as u8).collect()
}

fn write(path: &std::path::Path, n: u64) {
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new("digest", FieldType::FixedBytes(5)),
    ];
    let samples: Vec<Vec<FieldValue>> = (0..n)
        .map(|i| vec![FieldValue::Int(i as i64), FieldValue::Bytes(bytes(i, 5))])
        .collect();
    DatasetWriter::new(path, fields)
        .unwrap()
        .with_num_workers(2)
        .write(&samples)
        .unwrap();
}

#[test]
fn fixed_bytes_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixed.beton");
    write(&path, 300);
    let r = Reader::open(&path).unwrap();
    let f = &r.fields()[1];
    assert_eq!(f.type_id, 128);
    assert_eq!(f.field_type, FieldType::FixedBytes(5));
    assert_eq!(f.field_type.type_name(), "FixedBytesField");
    assert_eq!((f.metadata_offset, f.metadata_itemsize), (8, 8));
    assert_eq!(r.extent_rule(1), ExtentRule::Fixed { len: 5 });
    assert_eq!(
        f.field_type.describe_arguments(),
        vec![("len", JsonValue::Int(5))]
    );
    // The argument block: the length, then zeros.
    let args = r.field_arguments(1).unwrap();
    assert_eq!(&args[..8], &5u64.to_le_bytes());
    assert!(args[8..].iter().all(|&b| b == 0));
    for i in 0..300 {
        let FieldMetadata::FixedBytes { ptr } = r.metadata(i, 1).unwrap() else {
            panic!("typed metadata of sample {i}");
        };
        assert_eq!(r.data_at(ptr).unwrap(), &bytes(i, 5)[..]);
        assert_eq!(r.field_data(i, 1).unwrap().unwrap(), &bytes(i, 5)[..]);
        assert_eq!(
            r.read_sample(i).unwrap(),
            vec![FieldValue::Int(i as i64), FieldValue::Bytes(bytes(i, 5))]
        );
    }
}

#[test]
fn a_value_of_another_length_names_sample_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixed.beton");
    let fields = vec![FieldSpec::new("digest", FieldType::FixedBytes(4))];
    let mut samples: Vec<Vec<FieldValue>> = (0..10)
        .map(|i| vec![FieldValue::Bytes(bytes(i, 4))])
        .collect();
    samples[6] = vec![FieldValue::Bytes(bytes(6, 3))];
    let e = DatasetWriter::new(&path, fields.clone())
        .unwrap()
        .with_num_workers(1)
        .write(&samples)
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidValue { sample: 6, field, reason, .. }
            if field == "digest" && reason == "3 bytes for a FixedBytesField of 4 bytes"),
        "{e:?}"
    );
    samples[6] = vec![FieldValue::Int(6)];
    let e = DatasetWriter::new(&path, fields)
        .unwrap()
        .write(&samples)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("a Int value for a FixedBytesField field"),
        "{e}"
    );

    let e =
        DatasetWriter::new(&path, vec![FieldSpec::new("d", FieldType::FixedBytes(0))]).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }), "{e:?}");
    assert!(e.to_string().contains("length 0"), "{e}");
}

#[test]
fn a_malformed_argument_block_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixed.beton");
    write(&path, 3);
    let good = std::fs::read(&path).unwrap();
    let args = HEADER_SIZE as usize + 1041 + 1 + NAME_SIZE;
    for (at, byte, why) in [(args, 0u8, "length 0"), (args + 100, 1, "not zero")] {
        let mut bad = good.clone();
        bad[args..args + 8].copy_from_slice(&5u64.to_le_bytes());
        bad[at] = byte;
        let e = Reader::from_vec("x", bad, &ReaderOptions::new()).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidFieldArguments { index: 1, name, reason, .. }
                if name == "digest" && reason.contains(why)),
            "{e:?}"
        );
    }
    // A length longer than what was stored makes every sample's extent overrun.
    let mut bad = good;
    bad[args..args + 8].copy_from_slice(&6u64.to_le_bytes());
    let e = Reader::from_vec("x", bad, &ReaderOptions::new()).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidMetadata { sample: 0, reason, .. }
            if reason.contains("needs 6 bytes")),
        "{e:?}"
    );
}
