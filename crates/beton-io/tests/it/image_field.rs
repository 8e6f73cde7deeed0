//! `ImageField` (type id 3 with the `FFRSIMAG` tag): its argument block, a round trip of
//! raw and PNG samples, the file FFCV 1.0.2 sees (a Bytes field of the same bytes once
//! the tag is zeroed), and stored bytes that do not fit the field refused naming the
//! sample and the field.

use beton_io::fields::image::{IMAGE_MAGIC, RawHeader};
use beton_io::{
    DatasetWriter, Error, FieldSpec, FieldType, FieldValue, HEADER_SIZE, ImageArgs, Reader,
    ReaderOptions,
};

fn gray16() -> ImageArgs {
    ImageArgs::new(1, 16).unwrap()
}

/// Sample `i`'s stored raw 16-bit gray image, `(i % 3 + 1) x 2`.
fn raw(i: u64) -> Vec<u8> {
    let h = (i % 3 + 1) as u32;
    let mut b = RawHeader {
        width: 2,
        height: h,
        channels: 1,
        bits: 16,
    }
    .encode()
    .to_vec();
    b.extend((0..2 * h as u64).flat_map(|k| ((i * 1000 + k) as u16).to_le_bytes()));
    b
}

/// A 1x1 16-bit gray PNG's first 33 bytes: what the writer checks of a PNG is its IHDR.
fn png_head(bits: u8, color: u8) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    b.extend_from_slice(&1u32.to_be_bytes());
    b.extend_from_slice(&1u32.to_be_bytes());
    b.extend_from_slice(&[bits, color, 0, 0, 0]);
    b.extend_from_slice(&[0; 4]);
    b
}

#[test]
fn image_fields_round_trip_and_read_as_bytes_without_the_tag() {
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("image.beton");
    let plain = dir.path().join("plain.beton");
    let stored = |i: u64| if i == 4 { png_head(16, 0) } else { raw(i) };
    let samples: Vec<Vec<FieldValue>> = (0..20)
        .map(|i| vec![FieldValue::Int(i as i64), FieldValue::Bytes(stored(i))])
        .collect();
    let spec = |t: FieldType| {
        vec![
            FieldSpec::new("label", FieldType::Int),
            FieldSpec::new("depth", t),
        ]
    };
    DatasetWriter::new(&ours, spec(FieldType::Image(gray16())))
        .unwrap()
        .with_num_workers(1)
        .write(&samples)
        .unwrap();
    DatasetWriter::new(&plain, spec(FieldType::Bytes))
        .unwrap()
        .with_num_workers(1)
        .write(&samples)
        .unwrap();
    let r = Reader::open(&ours).unwrap();
    assert_eq!(r.fields()[1].field_type, FieldType::Image(gray16()));
    assert_eq!(r.fields()[1].field_type.type_name(), "ImageField");
    assert_eq!(r.fields()[1].type_id, 3);
    for i in 0..20 {
        assert_eq!(
            r.field_data(i, 1).unwrap().unwrap(),
            &stored(i)[..],
            "sample {i}"
        );
    }
    let mut bytes = std::fs::read(&ours).unwrap();
    let args = HEADER_SIZE as usize + 2 * 1041 - 1024;
    assert_eq!(&bytes[args..args + 8], &IMAGE_MAGIC);
    assert_eq!(
        &bytes[args + 8..args + 20],
        &[1, 0, 0, 0, 1, 0, 0, 0, 16, 0, 0, 0]
    );
    assert!(bytes[args + 20..args + 1024].iter().all(|&b| b == 0));
    bytes[args..args + 1024].fill(0);
    assert_eq!(bytes, std::fs::read(&plain).unwrap());
    let zeroed = Reader::from_vec("zeroed", bytes, &ReaderOptions::new()).unwrap();
    assert_eq!(zeroed.fields()[1].field_type, FieldType::Bytes);
}

#[test]
fn stored_bytes_of_another_kind_name_the_sample_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image.beton");
    let fields = vec![FieldSpec::new("depth", FieldType::Image(gray16()))];
    let write = |bad: Vec<u8>| {
        let mut samples: Vec<Vec<FieldValue>> =
            (0..8).map(|i| vec![FieldValue::Bytes(raw(i))]).collect();
        samples[5] = vec![FieldValue::Bytes(bad)];
        DatasetWriter::new(&path, fields.clone())
            .unwrap()
            .write(&samples)
            .unwrap_err()
    };
    let e = write(png_head(8, 2));
    assert!(
        matches!(&e, Error::InvalidValue { sample: 5, field, reason, .. }
            if field == "depth" && reason.contains("PNG of 3 channels and 8 bits")),
        "{e:?}"
    );
    let mut short = raw(1);
    short.pop();
    let e = write(short).to_string();
    assert!(e.contains("takes 24 bytes with its header, not 23"), "{e}");
    let e = write(vec![0xFF, 0xD8, 0xFF]).to_string();
    assert!(e.contains("JPEGs are kept only for 8-bit fields"), "{e}");
    let e = write(b"BM......".to_vec()).to_string();
    assert!(e.contains("neither a raw image, a PNG nor a JPEG"), "{e}");
}

#[test]
fn malformed_arguments_are_refused_at_open_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image.beton");
    DatasetWriter::new(
        &path,
        vec![FieldSpec::new("depth", FieldType::Image(gray16()))],
    )
    .unwrap()
    .write(&vec![vec![FieldValue::Bytes(raw(0))]])
    .unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let args = HEADER_SIZE as usize + 1041 - 1024;
    bytes[args + 12] = 2;
    let e = Reader::from_vec("two-channels", bytes, &ReaderOptions::new()).unwrap_err();
    let e = e.to_string();
    assert!(e.contains("depth") && e.contains("2 channels"), "{e}");
}
