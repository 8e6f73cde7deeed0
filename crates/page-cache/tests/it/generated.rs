//! Larger files written by `beton_io::DatasetWriter` (many pages, two allocations per
//! sample, variable sizes, several writer threads): random batch schedules read the
//! same bytes through the process cache as through the OS cache.

use crate::common;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use beton_io::{DatasetWriter, FieldSpec, FieldType, FieldValue, NdArrayArgs, NumpyDtype, Reader};
use proptest::prelude::*;

use common::{batches_of, compare_epoch, process_config};

const SAMPLES: u64 = 240;

/// splitmix64: sizes and contents that differ per sample.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A ~24 MiB file of 2 MiB pages, written once per test binary.
fn dataset() -> &'static (tempfile::TempDir, PathBuf) {
    static DATASET: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    DATASET.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("generated.beton");
        let fields = vec![
            FieldSpec::new("blob", FieldType::Bytes),
            FieldSpec::new(
                "vec",
                FieldType::NdArray(NdArrayArgs::new(NumpyDtype::u8(), vec![16])),
            ),
        ];
        let source = beton_io::from_fn(SAMPLES, |i| {
            let len = (mix(i) % (200 * 1024)) as usize;
            let blob: Vec<u8> = (0..len)
                .map(|j| (mix(i ^ (j as u64 >> 3)) >> (j % 8)) as u8)
                .collect();
            let vec: Vec<u8> = (0..16).map(|j| (i as u8).wrapping_mul(j)).collect();
            Ok(vec![FieldValue::Bytes(blob), FieldValue::NdArray(vec)])
        });
        DatasetWriter::new(&path, fields)
            .unwrap()
            .with_page_size(2 * 1024 * 1024)
            .unwrap()
            .with_num_workers(2)
            .write(&source)
            .unwrap();
        (dir, path)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn generated_file_random_schedules_read_identical_bytes(
        order in proptest::sample::subsequence((0..SAMPLES).collect::<Vec<_>>(), 0..=SAMPLES as usize).prop_shuffle(),
        batch_size in 1usize..40,
        ahead in 0usize..5,
        threads in 1usize..5,
    ) {
        let reader = Arc::new(Reader::open(&dataset().1).unwrap());
        let batches = batches_of(&order, batch_size);
        let epoch = compare_epoch(&reader, &process_config(ahead, threads), &batches);
        let stats = epoch.stats();
        prop_assert!(stats.peak_slots_in_use <= stats.num_slots);
        prop_assert_eq!(stats.page_read_errors, 0);
    }
}

#[test]
fn generated_file_spans_many_pages() {
    let reader = Reader::open(&dataset().1).unwrap();
    assert!(reader.page_map().data_pages().len() >= 10);
    assert_eq!(reader.num_samples(), SAMPLES);
}
