//! A reader opened from byte ranges (how a remote object is opened) validates exactly as a
//! reader of the whole file: the same structure for every fixture, the same error for every
//! damaged file of the corruption corpus, and only structural bytes are ever requested.

use beton_io::{Error, Reader, ReaderOptions};
use ffcv_testkit::corrupt::corpus;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/ffcv-1.0.2"
);

const NAMES: &[&str] = &[
    "multipage",
    "bytes_ndarray",
    "images_jpg",
    "images_raw",
    "json",
    "page_retry",
    "scalars",
];

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{name}.beton")).unwrap()
}

/// Opens `bytes` through `open_ranges`, recording every range asked for.
fn open_ranged(label: &str, bytes: &[u8]) -> (Result<Reader, Error>, Vec<(u64, u64)>) {
    let mut asked = Vec::new();
    let mut read = |start: u64, end: u64| -> std::io::Result<Vec<u8>> {
        asked.push((start, end));
        Ok(bytes[start as usize..end as usize].to_vec())
    };
    let r = Reader::open_ranges(label, bytes.len() as u64, &mut read, &ReaderOptions::new());
    (r, asked)
}

#[test]
fn every_fixture_opens_with_the_same_structure_and_no_data_bytes() {
    for name in NAMES {
        let bytes = fixture(name);
        let local = Reader::from_vec(*name, bytes.clone(), &ReaderOptions::new()).unwrap();
        let (ranged, asked) = open_ranged(name, &bytes);
        let ranged = ranged.unwrap();
        assert_eq!(ranged.header(), local.header(), "{name}");
        assert_eq!(ranged.layout(), local.layout(), "{name}");
        assert_eq!(ranged.fields(), local.fields(), "{name}");
        assert_eq!(
            ranged.alloc_rows().collect::<Vec<_>>(),
            local.alloc_rows().collect::<Vec<_>>()
        );
        for s in 0..local.num_samples() {
            assert_eq!(
                ranged.metadata_row(s).unwrap(),
                local.metadata_row(s).unwrap()
            );
            assert_eq!(
                ranged.page_map().pages_of_sample(s),
                local.page_map().pages_of_sample(s)
            );
        }
        // Only the structure was read: nothing inside the data region.
        let l = local.layout();
        let table = local.header().alloc_table_ptr;
        for &(start, end) in &asked {
            assert!(
                end <= l.metadata_offset + l.metadata_size || start >= table,
                "{name}: read {start}..{end} of the data region"
            );
        }
        assert!(asked.len() <= 4, "{name}: {} requests", asked.len());
        // Data accessors say the bytes are not here instead of returning something.
        assert!(!ranged.holds_data());
        assert!(matches!(ranged.bytes(), Err(Error::NotInMemory { .. })));
        if let Some(row) = local.alloc_rows().find(|r| r.size > 0) {
            let err = ranged.data_at(row.ptr).unwrap_err();
            assert!(
                matches!(err, Error::NotInMemory { start, .. } if start == row.ptr),
                "{err}"
            );
        }
        assert!(ranged.current_file_size().is_none());
    }
}

#[test]
fn every_corrupt_file_gives_the_error_a_local_open_gives() {
    let mut cases = 0;
    for name in NAMES {
        for case in corpus(&fixture(name)).unwrap() {
            let label = format!("{name}.beton: {}", case.name);
            let local = Reader::from_vec(label.clone(), case.bytes.clone(), &ReaderOptions::new())
                .map(|_| ())
                .map_err(|e| e.to_string());
            let (ranged, _) = open_ranged(&label, &case.bytes);
            let ranged = ranged.map(|_| ()).map_err(|e| e.to_string());
            assert_eq!(ranged, local, "{label}");
            cases += 1;
        }
    }
    assert!(cases > 50, "corpus too small: {cases}");
}

#[test]
fn a_failed_or_short_range_read_is_an_error_naming_the_range() {
    let bytes = fixture("multipage");
    let mut failing = |start: u64, _end: u64| -> std::io::Result<Vec<u8>> {
        if start == 0 {
            Ok(bytes[..24].to_vec())
        } else {
            Err(std::io::Error::other("connection reset"))
        }
    };
    let err = Reader::open_ranges(
        "s3://b/x.beton",
        bytes.len() as u64,
        &mut failing,
        &ReaderOptions::new(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("s3://b/x.beton: cannot read bytes 24.."),
        "{msg}"
    );
    assert!(msg.contains("connection reset"), "{msg}");

    let mut short = |start: u64, end: u64| -> std::io::Result<Vec<u8>> {
        Ok(bytes[start as usize..(end as usize - 1)].to_vec())
    };
    let err = Reader::open_ranges(
        "s3://b/x.beton",
        bytes.len() as u64,
        &mut short,
        &ReaderOptions::new(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "s3://b/x.beton: cannot read bytes 0..24: got 23 bytes"
    );
}
