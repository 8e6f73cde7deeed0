//! Damaged files give a typed error with context, never a panic; files that still open can be
//! read in full.

use beton_io::{Error, FieldMetadata, FieldType, Reader, ReaderOptions};
use ffcv_testkit::corrupt::{Expected, corpus};
use proptest::prelude::*;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/ffcv-1.0.2"
);

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{name}.beton")).unwrap()
}

/// Touches everything a reader hands out; any error is fine, a panic is not.
fn read_everything(r: &Reader) {
    let _ = (
        r.header(),
        r.layout(),
        r.bytes().unwrap().len(),
        r.page_map().num_pages(),
    );
    for a in r.alloc_rows() {
        let _ = r.data_at(a.ptr).unwrap();
        assert!(r.alloc_size(a.ptr).unwrap() >= a.size);
        let _ = r.page_map().samples_of_page(a.ptr / r.page_size());
    }
    for i in 0..r.fields().len() {
        let _ = r.field_arguments(i).unwrap();
    }
    for s in 0..r.num_samples() {
        let _ = r.metadata_row(s).unwrap();
        let _ = r.page_map().pages_of_sample(s);
        for f in 0..r.fields().len() {
            let _ = r.metadata(s, f).unwrap();
            let _ = r.field_data(s, f).unwrap();
        }
        let _ = r.read_sample(s);
    }
}

fn check_corpus(name: &str) -> usize {
    let original = fixture(name);
    let cases = corpus(&original).unwrap();
    let count = cases.len();
    for case in cases {
        let label = format!("{name}.beton: {}", case.name);
        match Reader::from_vec(label.clone(), case.bytes, &ReaderOptions::new()) {
            Ok(_) => panic!("{label}: opened, expected {:?}", case.expected),
            Err(e) => {
                assert!(
                    case.expected.matches(&e),
                    "{label}: expected {:?}, got {e:?}",
                    case.expected
                );
                let msg = e.to_string();
                assert!(msg.starts_with(&label), "message lacks the file: {msg}");
            }
        }
    }
    count
}

#[test]
fn scalars_corpus_gives_the_expected_errors() {
    assert!(check_corpus("scalars") > 100);
}

#[test]
fn bytes_ndarray_corpus_gives_the_expected_errors() {
    assert!(check_corpus("bytes_ndarray") > 150);
}

#[test]
fn json_corpus_gives_the_expected_errors() {
    check_corpus("json");
}

#[test]
fn images_raw_corpus_gives_the_expected_errors() {
    check_corpus("images_raw");
}

#[test]
fn images_jpg_corpus_gives_the_expected_errors() {
    check_corpus("images_jpg");
}

#[test]
fn page_retry_corpus_gives_the_expected_errors() {
    check_corpus("page_retry");
}

#[test]
fn damaged_files_on_disk_name_their_path() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["scalars", "images_raw"] {
        for (i, case) in corpus(&fixture(name)).unwrap().into_iter().enumerate() {
            let path = dir.path().join(format!("{name}-{i}.beton"));
            std::fs::write(&path, &case.bytes).unwrap();
            let err = Reader::open(&path).unwrap_err();
            assert!(case.expected.matches(&err), "{}: {err:?}", case.name);
            assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
        }
    }
}

#[test]
fn missing_files_and_directories_are_io_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.beton");
    assert!(matches!(Reader::open(&missing), Err(Error::Io { ref op, .. }) if op == "open"));
    assert!(Reader::open(dir.path()).is_err());
}

#[test]
fn specific_errors_carry_their_numbers() {
    let mut b = fixture("bytes_ndarray");
    b[0..2].copy_from_slice(&7u16.to_le_bytes());
    let e = Reader::from_vec("x", b, &ReaderOptions::new()).unwrap_err();
    assert!(matches!(e, Error::UnsupportedVersion { version: 7, .. }));

    let mut b = fixture("bytes_ndarray");
    b[24 + 1041] = 9; // field 1's type id
    let e = Reader::from_vec("x", b, &ReaderOptions::new()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::UnknownTypeId {
                index: 1,
                type_id: 9,
                offset: 1065,
                ..
            }
        ),
        "{e:?}"
    );

    let mut b = fixture("bytes_ndarray");
    let row = 4194304 + 5 * 24;
    b[row + 16..row + 24].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = Reader::from_vec("x", b, &ReaderOptions::new()).unwrap_err();
    assert!(
        matches!(e, Error::InvalidAllocRow { row: 5, offset, size: u64::MAX, .. } if offset == row as u64),
        "{e:?}"
    );

    let mut b = fixture("bytes_ndarray");
    b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = Reader::from_vec("x", b, &ReaderOptions::new()).unwrap_err();
    assert!(matches!(e, Error::Overflow { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("num_samples 18446744073709551615 x row size 40"),
        "{e}"
    );

    // The blob of sample 3 claims more bytes than its allocation holds.
    let mut b = fixture("bytes_ndarray");
    let at = 4188 + 3 * 40 + 8 + 8;
    b[at..at + 8].copy_from_slice(&9999u64.to_le_bytes());
    let e = Reader::from_vec("x", b, &ReaderOptions::new()).unwrap_err();
    assert!(
        matches!(e, Error::InvalidMetadata { sample: 3, ref field, offset, .. } if field == "blob" && offset == at as u64 - 8),
        "{e:?}"
    );
}

#[test]
fn custom_fields_need_a_registered_layout() {
    // Turn `value` (a float64 at row offset 8) into a custom field.
    let mut b = fixture("scalars");
    b[24 + 1041] = 255;
    let e = Reader::from_vec("x", b.clone(), &ReaderOptions::new()).unwrap_err();
    assert!(matches!(e, Error::MissingCustomHandler { index: 1, ref name, .. } if name == "value"));
    let options = ReaderOptions::new().custom_field("value", 8, 8);
    let r = Reader::from_vec("x", b.clone(), &options).unwrap();
    assert_eq!(r.fields()[1].field_type, FieldType::Custom);
    assert_eq!(r.fields()[1].type_id, 255);
    assert_eq!(r.metadata(8, 1).unwrap(), FieldMetadata::Custom);
    assert_eq!(r.metadata_bytes(8, 1).unwrap(), &(-1.5f64).to_le_bytes());
    assert_eq!(r.field_data(8, 1).unwrap(), None);
    assert!(r.read_sample(8).is_err());
    // A registered layout overrides a built-in field of that name, as in FFCV.
    let r = Reader::from_vec(
        "x",
        fixture("scalars"),
        &ReaderOptions::new().custom_field("index", 4, 4),
    )
    .unwrap();
    assert_eq!(r.fields()[0].field_type, FieldType::Custom);
    assert_eq!(
        (r.fields()[1].metadata_offset, r.layout().metadata_itemsize),
        (8, 16)
    );
    let e =
        Reader::from_vec("x", b, &ReaderOptions::new().custom_field("value", 0, 8)).unwrap_err();
    assert!(matches!(e, Error::InvalidFieldArguments { .. }));
}

/// splitmix64 step, for deterministic mutations.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn random_mutations_of_structural_bytes_never_panic() {
    for name in ["scalars", "bytes_ndarray", "images_raw"] {
        let original = fixture(name);
        let r = Reader::from_vec("o", original.clone(), &ReaderOptions::new()).unwrap();
        let l = *r.layout();
        let table = r.header().alloc_table_ptr;
        // Header, descriptors and metadata, then the allocation table.
        let regions = [
            (0, l.metadata_offset + l.metadata_size),
            (table, original.len() as u64),
        ];
        let mut state = 42;
        let (mut opened, mut failed) = (0, 0);
        for _ in 0..300 {
            let mut b = original.clone();
            for _ in 0..1 + next(&mut state) % 4 {
                let (start, end) = regions[(next(&mut state) % 2) as usize];
                if end <= start {
                    continue;
                }
                let at = start + next(&mut state) % (end - start);
                b[at as usize] = next(&mut state) as u8;
            }
            match Reader::from_vec(name, b, &ReaderOptions::new()) {
                Ok(r) => {
                    read_everything(&r);
                    opened += 1;
                }
                Err(e) => {
                    assert!(e.to_string().starts_with(name));
                    failed += 1;
                }
            }
        }
        assert!(
            failed > 0 && opened > 0,
            "{name}: {opened} opened, {failed} failed"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_edits_of_a_small_file_never_panic(
        edits in prop::collection::vec((0usize..3706, any::<u8>()), 1..8),
        cut in 0usize..4000,
    ) {
        let mut b = fixture("scalars");
        for (at, v) in edits {
            b[at] = v;
        }
        b.truncate(cut.max(1));
        if let Ok(r) = Reader::from_vec("p", b, &ReaderOptions::new()) {
            read_everything(&r);
        }
    }
}

#[test]
fn fixtures_that_open_read_in_full() {
    for name in [
        "scalars",
        "bytes_ndarray",
        "json",
        "images_raw",
        "images_jpg",
        "multipage",
        "page_retry",
    ] {
        read_everything(&Reader::open(format!("{FIXTURES}/{name}.beton")).unwrap());
    }
}

#[test]
fn expected_matches_only_its_variant() {
    let e = Error::NoFields { path: "x".into() };
    assert!(Expected::NoFields.matches(&e));
    assert!(!Expected::Truncated.matches(&e));
}
