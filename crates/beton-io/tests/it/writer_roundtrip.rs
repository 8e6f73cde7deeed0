//! Files written by DatasetWriter, with any number of threads, read back with every value and
//! obey FFCV's page rules; bad configurations and values are typed errors that leave no file.

use std::sync::{Arc, Mutex};

use beton_io::{
    DatasetWriter, Error, FieldSpec, FieldType, FieldValue, JsonValue, NdArrayArgs, NumpyDtype,
    Reader, RgbImage, SampleSource, from_fn,
};
use proptest::prelude::*;

const MIB: u64 = 1 << 20;

/// splitmix64, for deterministic content.
fn sm64(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn gen_bytes(seed: u64, n: usize) -> Vec<u8> {
    (0..n.div_ceil(8) as u64)
        .flat_map(|i| sm64(seed, i).to_le_bytes())
        .take(n)
        .collect()
}

fn all_kinds() -> Vec<FieldSpec> {
    vec![
        FieldSpec::new("index", FieldType::Int),
        FieldSpec::new("x", FieldType::Float),
        FieldSpec::new("blob", FieldType::Bytes),
        FieldSpec::new(
            "be_mat",
            FieldType::NdArray(NdArrayArgs::new(">f8".parse().unwrap(), vec![2, 3])),
        ),
        FieldSpec::new(
            "mask",
            FieldType::NdArray(NdArrayArgs::new("|b1".parse().unwrap(), vec![5])),
        ),
        FieldSpec::new(
            "tensor",
            FieldType::TorchTensor(NdArrayArgs::new("<f2".parse().unwrap(), vec![4, 1, 2])),
        ),
        FieldSpec::new("meta", FieldType::Json),
        FieldSpec::new("image", FieldType::RgbImage),
        FieldSpec::new("label", FieldType::Int),
    ]
}

fn all_kinds_sample(i: u64, max_blob: u64) -> Vec<FieldValue> {
    let blob_len = (sm64(1, i) % (max_blob + 1)) as usize;
    let (w, h) = (1 + (sm64(2, i) % 40) as u16, 1 + (sm64(3, i) % 30) as u16);
    let image = if i.is_multiple_of(3) {
        RgbImage::Jpeg {
            width: w,
            height: h,
            bytes: gen_bytes(4 + i, 100 + (i as usize % 50)),
        }
    } else {
        RgbImage::Raw {
            width: w,
            height: h,
            pixels: gen_bytes(5 + i, usize::from(w) * usize::from(h) * 3),
        }
    };
    let specials = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        5e-324,
    ];
    vec![
        FieldValue::Int(i as i64),
        FieldValue::Float(specials.get(i as usize).copied().unwrap_or(i as f64 / 7.0)),
        FieldValue::Bytes(gen_bytes(6 + i, blob_len)),
        FieldValue::NdArray(gen_bytes(7 + i, 48)),
        FieldValue::NdArray((0..5).map(|k| ((i + k) % 2) as u8).collect()),
        FieldValue::NdArray(gen_bytes(8 + i, 16)),
        FieldValue::Json(JsonValue::Object(vec![
            ("i".into(), JsonValue::Int(i.into())),
            ("f".into(), JsonValue::Float(1.0 / (i as f64 + 1.0))),
            (
                "s".into(),
                JsonValue::String(format!("caf\u{e9} #{i} \u{1F600}")),
            ),
            ("nan".into(), JsonValue::Float(f64::NAN)),
        ])),
        FieldValue::RgbImage(image),
        FieldValue::Int(-(i as i64)),
    ]
}

/// `FieldValue` equality where NaN floats compare by bits.
fn same(a: &FieldValue, b: &FieldValue) -> bool {
    fn same_json(a: &JsonValue, b: &JsonValue) -> bool {
        match (a, b) {
            (JsonValue::Float(x), JsonValue::Float(y)) => x.to_bits() == y.to_bits(),
            (JsonValue::Array(x), JsonValue::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
            }
            (JsonValue::Object(x), JsonValue::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|((k, a), (l, b))| k == l && same_json(a, b))
            }
            _ => a == b,
        }
    }
    match (a, b) {
        (FieldValue::Float(x), FieldValue::Float(y)) => x.to_bits() == y.to_bits(),
        (FieldValue::Json(x), FieldValue::Json(y)) => same_json(x, y),
        _ => a == b,
    }
}

/// Checks FFCV's page rules on a written file and that every value reads back.
fn check_file(path: &std::path::Path, source: &dyn Fn(u64) -> Vec<FieldValue>, n: u64) {
    let r = Reader::open(path).unwrap();
    assert_eq!(r.num_samples(), n);
    let ps = r.page_size();
    for s in 0..n {
        let got = r.read_sample(s).unwrap();
        let want = source(s);
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(same(g, w), "sample {s}: {g:?} != {w:?}");
        }
        // A sample's non-empty allocations all sit in one page (it restarts rather than split).
        let pages: std::collections::BTreeSet<u64> = r
            .alloc_rows()
            .filter(|a| a.sample_id == s && a.size > 0)
            .map(|a| a.ptr / ps)
            .collect();
        assert!(pages.len() <= 1, "sample {s} spans pages {pages:?}");
    }
    // No allocation crosses a page; data pages are whole; the table ends the file.
    for a in r.alloc_rows() {
        if a.size > 0 {
            assert_eq!(a.ptr / ps, (a.ptr + a.size - 1) / ps);
        }
    }
    // Zero-sized rows may point at page 0 (before any page) or at a page's end, so only the
    // pages of non-empty allocations are checked for density.
    let data_pages: Vec<u64> = r
        .alloc_rows()
        .filter(|a| a.size > 0)
        .map(|a| a.ptr / ps)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    for &p in &data_pages {
        assert!(!r.page_map().samples_of_page(p).is_empty());
    }
    let table = r.header().alloc_table_ptr;
    if let Some(&last) = data_pages.last() {
        assert_eq!(table, (last + 1) * ps);
        let first = r.layout().data_region_start / ps;
        let expected: Vec<u64> = (first..=last).collect();
        assert_eq!(data_pages, expected, "pages are booked densely");
    }
    assert_eq!(r.file_size(), table + 24 * r.layout().alloc_table_rows);
}

#[test]
fn four_threads_write_every_kind_of_field_and_it_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("all.beton");
    let n = 300;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let summary = DatasetWriter::new(&path, all_kinds())
        .unwrap()
        .with_page_size(2 * MIB)
        .unwrap()
        .with_num_workers(4)
        .with_chunk_size(7)
        .with_progress(move |done| seen2.lock().unwrap().push(done))
        .write(&from_fn(n, |i| Ok(all_kinds_sample(i, 60_000))))
        .unwrap();
    assert_eq!(summary.num_samples, n);
    assert!(summary.num_pages >= 4, "{summary:?}");
    check_file(&path, &|i| all_kinds_sample(i, 60_000), n);
    let seen = seen.lock().unwrap();
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert_eq!(seen.last(), Some(&n));
    // Nothing but the file is left in the directory.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("all.beton")]);
}

#[test]
fn one_and_many_threads_store_the_same_values() {
    let dir = tempfile::tempdir().unwrap();
    let source = from_fn(120, |i| Ok(all_kinds_sample(i, 200_000)));
    for workers in [1, 2, 3, 8] {
        let path = dir.path().join(format!("w{workers}.beton"));
        DatasetWriter::new(&path, all_kinds())
            .unwrap()
            .with_page_size(2 * MIB)
            .unwrap()
            .with_num_workers(workers)
            .with_chunk_size(5)
            .write(&source)
            .unwrap();
        check_file(&path, &|i| all_kinds_sample(i, 200_000), 120);
    }
}

#[test]
fn zero_samples_write_a_valid_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.beton");
    let empty: Vec<Vec<FieldValue>> = Vec::new();
    let s = DatasetWriter::new(&path, all_kinds())
        .unwrap()
        .write(&empty)
        .unwrap();
    assert_eq!((s.num_samples, s.num_pages, s.alloc_table_rows), (0, 0, 0));
    let r = Reader::open(&path).unwrap();
    assert_eq!(r.num_samples(), 0);
    assert_eq!(r.file_size(), 24 + 9 * 1041);
}

#[test]
fn an_empty_first_allocation_gets_ffcvs_pre_page_pointer() {
    // FFCV computes the pointer of a zero-sized allocation made before any page exists from
    // page index -1: data_region_start - page_size.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.beton");
    let fields = vec![FieldSpec::new("b", FieldType::Bytes)];
    let samples = vec![
        vec![FieldValue::Bytes(vec![])],
        vec![FieldValue::Bytes(vec![1, 2, 3])],
    ];
    DatasetWriter::new(&path, fields)
        .unwrap()
        .with_page_size(2 * MIB)
        .unwrap()
        .with_num_workers(1)
        .write(&samples)
        .unwrap();
    let r = Reader::open(&path).unwrap();
    let rows: Vec<_> = r
        .alloc_rows()
        .map(|a| (a.sample_id, a.ptr, a.size))
        .collect();
    assert_eq!(rows, vec![(0, 0, 0), (1, 2 * MIB, 3)]);
    assert_eq!(r.read_sample(0).unwrap(), samples[0]);
    assert_eq!(r.read_sample(1).unwrap(), samples[1]);
    assert_eq!(r.page_map().pages_of_sample(0), &[0]);
}

#[test]
fn a_later_field_that_does_not_fit_restarts_the_sample_on_a_fresh_page() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.beton");
    let fields = vec![
        FieldSpec::new("a", FieldType::Bytes),
        FieldSpec::new("b", FieldType::Bytes),
    ];
    let big = (MIB + MIB / 2) as usize;
    let samples = vec![
        vec![
            FieldValue::Bytes(vec![1; big]),
            FieldValue::Bytes(vec![2; 10]),
        ],
        // `a` fits in what is left of page 1, `b` does not: restart on page 2.
        vec![
            FieldValue::Bytes(vec![3; 100_000]),
            FieldValue::Bytes(vec![4; MIB as usize]),
        ],
    ];
    DatasetWriter::new(&path, fields)
        .unwrap()
        .with_page_size(2 * MIB)
        .unwrap()
        .with_num_workers(1)
        .write(&samples)
        .unwrap();
    let r = Reader::open(&path).unwrap();
    let rows: Vec<_> = r
        .alloc_rows()
        .map(|a| (a.sample_id, a.ptr, a.size))
        .collect();
    let p1 = 2 * MIB;
    let p2 = 4 * MIB;
    assert_eq!(
        rows,
        vec![
            (0, p1, big as u64),
            (0, p1 + big as u64, 10),
            (1, p2, 100_000),
            (1, p2 + 100_000, MIB),
        ]
    );
    // The abandoned copy of sample 1's `a` stays in page 1, right after sample 0.
    let orphan_at = (p1 + big as u64 + 10) as usize;
    assert_eq!(
        &r.bytes().unwrap()[orphan_at..orphan_at + 100_000],
        &vec![3u8; 100_000][..]
    );
    assert_eq!(r.read_sample(1).unwrap(), samples[1]);
}

#[test]
fn an_allocation_larger_than_a_page_names_sample_field_size_and_a_page_size_that_fits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.beton");
    let fields = vec![
        FieldSpec::new("i", FieldType::Int),
        FieldSpec::new("b", FieldType::Bytes),
    ];
    let src = from_fn(10, |i| {
        let n = if i == 6 { 3 * MIB as usize } else { 10 };
        Ok(vec![FieldValue::Int(0), FieldValue::Bytes(vec![0; n])])
    });
    let err = DatasetWriter::new(&path, fields)
        .unwrap()
        .with_page_size(2 * MIB)
        .unwrap()
        .with_num_workers(2)
        .with_chunk_size(3)
        .write(&src)
        .unwrap_err();
    match &err {
        Error::SampleTooLarge {
            sample,
            field,
            size,
            page_size,
            page_size_that_fits,
            ..
        } => {
            assert_eq!((*sample, field.as_str(), *size), (6, "b", 3 * MIB));
            assert_eq!((*page_size, *page_size_that_fits), (2 * MIB, 4 * MIB));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("page_size >= 4194304"), "{err}");
    assert!(!path.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "temporary file removed"
    );
}

#[test]
fn a_sample_whose_fields_together_exceed_a_page_is_an_error_after_one_retry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sum.beton");
    let fields = vec![
        FieldSpec::new("a", FieldType::Bytes),
        FieldSpec::new("b", FieldType::Bytes),
    ];
    let samples = vec![vec![
        FieldValue::Bytes(vec![0; (MIB + 1) as usize]),
        FieldValue::Bytes(vec![0; MIB as usize]),
    ]];
    let err = DatasetWriter::new(&path, fields)
        .unwrap()
        .with_page_size(2 * MIB)
        .unwrap()
        .write(&samples)
        .unwrap_err();
    assert!(
        matches!(&err, Error::SampleTooLarge { sample: 0, field, size, page_size_that_fits, .. }
            if field == "b" && *size == 2 * MIB + 1 && *page_size_that_fits == 4 * MIB),
        "{err:?}"
    );
}

#[test]
fn a_failed_write_leaves_an_existing_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keep.beton");
    std::fs::write(&path, b"previous contents").unwrap();
    let fields = vec![FieldSpec::new("i", FieldType::Int)];
    let src = from_fn(1000, |i| {
        if i == 500 {
            Err("disk of samples on fire".into())
        } else {
            Ok(vec![FieldValue::Int(i as i64)])
        }
    });
    let err = DatasetWriter::new(&path, fields)
        .unwrap()
        .with_num_workers(3)
        .with_chunk_size(10)
        .write(&src)
        .unwrap_err();
    assert!(matches!(err, Error::Source { sample: 500, .. }), "{err:?}");
    assert!(err.to_string().contains("disk of samples on fire"));
    assert_eq!(std::fs::read(&path).unwrap(), b"previous contents");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn values_that_do_not_match_their_field_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.beton");
    let arr = FieldType::NdArray(NdArrayArgs::new(NumpyDtype::f32(), vec![3]));
    let cases: Vec<(FieldType, Vec<FieldValue>, &str)> = vec![
        (
            FieldType::Int,
            vec![FieldValue::Float(1.0)],
            "a Float value for a IntField",
        ),
        (
            arr.clone(),
            vec![FieldValue::NdArray(vec![0; 11])],
            "array of 11 bytes",
        ),
        (arr, vec![FieldValue::Bytes(vec![0; 12])], "a Bytes value"),
        (
            FieldType::RgbImage,
            vec![FieldValue::RgbImage(RgbImage::Raw {
                width: 2,
                height: 2,
                pixels: vec![0; 11],
            })],
            "11 pixel bytes for a 2x2",
        ),
        (
            FieldType::Int,
            vec![FieldValue::Int(1), FieldValue::Int(2)],
            "2 values for 1 fields",
        ),
    ];
    for (t, values, message) in cases {
        let err = DatasetWriter::new(&path, vec![FieldSpec::new("f", t)])
            .unwrap()
            .write(&vec![values])
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidValue { sample: 0, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains(message), "{err} lacks {message:?}");
        assert!(!path.exists());
    }
}

#[test]
fn page_sizes_are_validated_like_ffcv() {
    let fields = || vec![FieldSpec::new("i", FieldType::Int)];
    for bad in [0, 3, MIB, 3 * MIB, 1 << 32, 1 << 33] {
        let err = DatasetWriter::new("x.beton", fields())
            .unwrap()
            .with_page_size(bad)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidPageSize { page_size, .. } if page_size == bad));
    }
    for good in [2 * MIB, 4 * MIB, 1 << 31] {
        let w = DatasetWriter::new("x.beton", fields())
            .unwrap()
            .with_page_size(good)
            .unwrap();
        assert_eq!(w.page_size(), good);
    }
}

#[test]
fn field_lists_are_validated() {
    let int = |n: &str| FieldSpec::new(n, FieldType::Int);
    let bad: Vec<Vec<FieldSpec>> = vec![
        vec![],
        vec![int("caf\u{e9}")],
        vec![int("seventeen_chars__")],
        vec![int("a"), int("a")],
        vec![int("nul\0")],
        vec![FieldSpec::new("c", FieldType::Custom)],
        vec![FieldSpec::new(
            "s",
            FieldType::NdArray(NdArrayArgs::new(NumpyDtype::f32(), vec![])),
        )],
        vec![FieldSpec::new(
            "z",
            FieldType::NdArray(NdArrayArgs::new(NumpyDtype::f32(), vec![3, 0])),
        )],
    ];
    for fields in bad {
        let err = DatasetWriter::new("x.beton", fields.clone()).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidConfig { .. } | Error::InvalidFieldName { .. }
            ),
            "{fields:?}: {err:?}"
        );
    }
    assert!(DatasetWriter::new("x.beton", vec![int("sixteen_chars___")]).is_ok());
}

/// A source of random-size blobs for the property test.
struct Blobs(Vec<(u32, u32)>);

impl SampleSource for Blobs {
    fn num_samples(&self) -> u64 {
        self.0.len() as u64
    }
    fn sample(&self, i: u64) -> Result<Vec<FieldValue>, beton_io::SourceError> {
        let (a, b) = self.0[i as usize];
        Ok(vec![
            FieldValue::Int(i as i64),
            FieldValue::Bytes(gen_bytes(i, a as usize)),
            FieldValue::Bytes(gen_bytes(i + 1000, b as usize)),
        ])
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn random_blob_sizes_obey_the_page_rules(
        sizes in prop::collection::vec((0u32..700_000, 0u32..400_000), 1..40),
        workers in 1usize..5,
        chunk in 1usize..9,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.beton");
        let fields = vec![
            FieldSpec::new("i", FieldType::Int),
            FieldSpec::new("a", FieldType::Bytes),
            FieldSpec::new("b", FieldType::Bytes),
        ];
        let src = Blobs(sizes.clone());
        DatasetWriter::new(&path, fields).unwrap()
            .with_page_size(2 * MIB).unwrap()
            .with_num_workers(workers)
            .with_chunk_size(chunk)
            .write(&src).unwrap();
        check_file(&path, &|i| src.sample(i).unwrap(), sizes.len() as u64);
    }
}

#[test]
fn a_file_being_written_never_opens_as_valid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.beton");
    let seen = Mutex::new(Vec::new());
    let fields = vec![
        FieldSpec::new("i", FieldType::Int),
        FieldSpec::new("b", FieldType::Bytes),
    ];
    let src = from_fn(200, |i| {
        if i == 150 {
            // Mid-write: only the temporary file exists, and its header is still zero.
            for entry in std::fs::read_dir(dir.path()).unwrap() {
                let p = entry.unwrap().path();
                seen.lock()
                    .unwrap()
                    .push((p.clone(), Reader::open(&p).map(|_| ())));
            }
        }
        Ok(vec![
            FieldValue::Int(i as i64),
            FieldValue::Bytes(vec![1; 30_000]),
        ])
    });
    DatasetWriter::new(&path, fields)
        .unwrap()
        .with_num_workers(1)
        .write(&src)
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_ne!(seen[0].0, path);
    assert!(
        matches!(seen[0].1, Err(Error::UnsupportedVersion { version: 0, .. })),
        "{seen:?}"
    );
    assert_eq!(Reader::open(&path).unwrap().num_samples(), 200);
}

#[test]
fn a_panicking_source_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.beton");
    let src = from_fn(10, |i| {
        assert!(i != 5, "source bug");
        Ok(vec![FieldValue::Int(0)])
    });
    let writer = DatasetWriter::new(&path, vec![FieldSpec::new("i", FieldType::Int)]).unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer.write(&src)));
    assert!(outcome.is_err());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn reader_and_writer_can_be_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Reader>();
    shareable::<DatasetWriter>();
}
