//! `VarArrayField` through the loader: padded rows `[B, K_max, ...]` with zeros past each
//! sample's rows and `K` as the lengths, `K_max` the file's largest or a cap; over the cap
//! an error at build (naming the sample) or truncation as chosen; the packed form; empty
//! arrays; exactly-once under a random order with both caches; hostile metadata refused
//! naming file, field and sample.

use std::collections::BTreeMap;
use std::sync::Arc;

use ffcv::decode::{OverCap, VarArrayDecoder};
use ffcv::format::{
    DatasetWriter, FieldSpec, FieldType, FieldValue, NumpyDtype, Reader, VarArrayArgs,
};
use ffcv::{DecoderChoice, Loader, Order, OutputKind};

const N: u64 = 61;

/// Sample `i`'s boxes: `i % 5` rows of four f32.
fn boxes(i: u64) -> Vec<f32> {
    (0..(i % 5) * 4)
        .map(|k| i as f32 + k as f32 / 8.0)
        .collect()
}

/// Sample `i`'s tokens: `(i * 7) % 11` int32.
fn tokens(i: u64) -> Vec<i32> {
    (0..(i * 7) % 11).map(|k| (i * 1000 + k) as i32).collect()
}

fn le<T: Copy, const W: usize>(v: &[T], to: fn(T) -> [u8; W]) -> Vec<u8> {
    v.iter().flat_map(|&x| to(x)).collect()
}

fn write(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("var.beton");
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new(
            "boxes",
            FieldType::VarArray(VarArrayArgs::new(NumpyDtype::f32(), vec![4]).unwrap()),
        ),
        FieldSpec::new(
            "tokens",
            FieldType::VarArray(VarArrayArgs::new("<i4".parse().unwrap(), vec![]).unwrap()),
        ),
        FieldSpec::new(
            "empty",
            FieldType::VarArray(VarArrayArgs::new(NumpyDtype::u8(), vec![3]).unwrap()),
        ),
    ];
    let samples: Vec<Vec<FieldValue>> = (0..N)
        .map(|i| {
            vec![
                FieldValue::Int(i as i64),
                FieldValue::NdArray(le(&boxes(i), f32::to_le_bytes)),
                FieldValue::NdArray(le(&tokens(i), i32::to_le_bytes)),
                FieldValue::NdArray(Vec::new()),
            ]
        })
        .collect();
    DatasetWriter::new(&path, fields)
        .unwrap()
        .with_num_workers(2)
        .write(&samples)
        .unwrap();
    path
}

/// Per sample id: the padded `boxes` row (as f32) and its length.
type Rows = BTreeMap<u64, (Vec<f32>, u64)>;

/// One epoch's `boxes` row shape and rows, every batch's packed form checked against its
/// padded one on the way.
fn epoch(
    path: &std::path::Path,
    boxes_decoder: DecoderChoice,
    order: Order,
    os_cache: bool,
) -> (Vec<usize>, Rows) {
    let mut loader = Loader::builder(path)
        .batch_size(8)
        .num_workers(2)
        .os_cache(os_cache)
        .drop_last(false)
        .order(order)
        .decoder("boxes", boxes_decoder)
        .build()
        .unwrap();
    let mut rows = BTreeMap::new();
    let mut shape = Vec::new();
    for batch in loader.iter() {
        let batch = batch.unwrap();
        let out = batch.output("boxes").unwrap();
        assert_eq!(out.info().kind, OutputKind::Rows);
        shape = out.info().shape.clone();
        let view = batch.get::<f32>("boxes").unwrap();
        let lengths = out.lengths().unwrap();
        let (values, offsets) = out.packed().unwrap();
        assert_eq!(offsets.len(), batch.len() + 1);
        assert_eq!(
            out.batch_max_rows(),
            Some(lengths.iter().copied().max().unwrap())
        );
        for (k, &id) in batch.sample_ids().iter().enumerate() {
            let row = view.row(k).to_vec();
            let defined = lengths[k] as usize * 16;
            assert!(
                out.row(k)[defined..].iter().all(|&b| b == 0),
                "padding of sample {id} is zero"
            );
            assert_eq!(out.value(k).len(), defined);
            let (a, b) = (offsets[k] as usize * 16, offsets[k + 1] as usize * 16);
            assert_eq!(&values[a..b], out.value(k), "packed row of sample {id}");
            assert!(rows.insert(id, (row, lengths[k])).is_none(), "{id} twice");
        }
        // The other var-array fields, with their default decoder.
        let tok = batch.output("tokens").unwrap();
        assert_eq!(tok.info().shape, vec![10]);
        let empty = batch.output("empty").unwrap();
        assert_eq!(empty.info().shape, vec![1, 3], "at least one row");
        for (k, &id) in batch.sample_ids().iter().enumerate() {
            assert_eq!(tok.value(k), &le(&tokens(id), i32::to_le_bytes)[..]);
            assert_eq!(tok.lengths().unwrap()[k], tokens(id).len() as u64);
            assert_eq!(empty.lengths().unwrap()[k], 0);
        }
    }
    (shape, rows)
}

fn padded(i: u64, width: usize, keep: usize) -> Vec<f32> {
    let mut v = boxes(i);
    v.truncate(keep * 4);
    v.resize(width * 4, 0.0);
    v
}

#[test]
fn var_arrays_decode_to_padded_rows_with_lengths_and_packed_form() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path());
    for os_cache in [true, false] {
        for order in [Order::Sequential, Order::Random] {
            let (shape, rows) = epoch(&path, DecoderChoice::Default, order, os_cache);
            assert_eq!(shape, vec![4, 4], "K_max is the file's largest K");
            assert_eq!(rows.len() as u64, N, "every sample exactly once");
            for (&i, (row, len)) in &rows {
                assert_eq!(*len, i % 5);
                assert_eq!(row, &padded(i, 4, 4), "sample {i}");
            }
        }
    }
}

#[test]
fn a_cap_truncates_or_refuses_as_chosen() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path());
    let choice = |d: VarArrayDecoder| DecoderChoice::Decoder(Arc::new(d));
    // Truncation: the first two rows, lengths capped; through the batch-wide copies (rows
    // that fit) and the per-sample decode (rows that do not).
    for os_cache in [true, false] {
        let d = VarArrayDecoder::new().cap(2).over_cap(OverCap::Truncate);
        let (shape, rows) = epoch(&path, choice(d), Order::Sequential, os_cache);
        assert_eq!(shape, vec![2, 4]);
        for (&i, (row, len)) in &rows {
            assert_eq!(*len, (i % 5).min(2));
            assert_eq!(row, &padded(i, 2, 2), "sample {i}");
        }
    }
    // A cap above the largest K widens the rows.
    let (shape, rows) = epoch(
        &path,
        choice(VarArrayDecoder::new().cap(6)),
        Order::Sequential,
        true,
    );
    assert_eq!(shape, vec![6, 4]);
    assert_eq!(rows[&9], (padded(9, 6, 6), 4));
    // Over the cap as an error: the build names the first sample over it.
    let e = Loader::builder(&path)
        .batch_size(8)
        .decoder("boxes", choice(VarArrayDecoder::new().cap(2)))
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"boxes\"")
            && e.contains("sample 3 has 3 rows, more than the cap of 2")
            && e.contains("var.beton"),
        "{e}"
    );
    let e = Loader::builder(&path)
        .batch_size(8)
        .decoder("boxes", choice(VarArrayDecoder::new().cap(0)))
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("a cap of 0 rows"), "{e}");
    // The spec text the command lines take.
    let spec: DecoderChoice = "var-array:2:truncate".parse().unwrap();
    let (shape, _) = epoch(&path, spec, Order::Sequential, true);
    assert_eq!(shape, vec![2, 4]);
}

#[test]
fn the_decoder_refuses_other_field_types() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path());
    let e = Loader::builder(&path)
        .batch_size(8)
        .decoder(
            "label",
            DecoderChoice::Decoder(Arc::new(VarArrayDecoder::new())),
        )
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("decodes VarArrayField fields, but \"label\" is a IntField"),
        "{e}"
    );
}

#[test]
fn hostile_lengths_are_refused_when_the_file_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path());
    let r = Reader::open(&path).unwrap();
    let at = (r.layout().metadata_offset
        + 7 * r.layout().metadata_itemsize
        + r.fields()[1].metadata_offset
        + 8) as usize;
    drop(r);
    for size in [33u64, u64::MAX / 16 * 16] {
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[at..at + 8].copy_from_slice(&size.to_le_bytes());
        let bad = dir.path().join("hostile.beton");
        std::fs::write(&bad, bytes).unwrap();
        let e = Loader::builder(&bad)
            .batch_size(8)
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("hostile.beton") && e.contains("sample 7") && e.contains("boxes"),
            "{e}"
        );
    }
}
