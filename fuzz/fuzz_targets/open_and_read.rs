//! Fuzz target: write the input to a file, open it with `beton_io::Reader` and read every
//! sample. Any panic, out-of-bounds access or abort is a bug; errors are the expected outcome
//! for nearly every input.
//!
//! Run with `cargo fuzz run open_and_read` from the `fuzz/` folder (nightly toolchain). Seed
//! the corpus with the fixtures and the generated damaged files for faster coverage:
//! `mkdir -p corpus/open_and_read && cp ../tests/fixtures/ffcv-1.0.2/scalars.beton corpus/open_and_read/`.
//! Small files reach deep: the reader accepts any power-of-two page size, so a few hundred
//! bytes can hold a complete file with allocations.

#![no_main]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use beton_io::Reader;
use libfuzzer_sys::fuzz_target;

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn scratch_path() -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("beton-fuzz-{}-{n}.beton", std::process::id()))
}

fuzz_target!(|data: &[u8]| {
    let path = scratch_path();
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(reader) = Reader::open(&path) {
        for a in reader.alloc_rows() {
            let bytes = reader.data_at(a.ptr).expect("every row's pointer resolves");
            assert!(bytes.len() as u64 >= a.size);
        }
        for s in 0..reader.num_samples() {
            let _ = reader.metadata_row(s).expect("validated row");
            let _ = reader.page_map().pages_of_sample(s);
            for f in 0..reader.fields().len() {
                let _ = reader.metadata(s, f).expect("validated metadata");
                let _ = reader.field_data(s, f).expect("validated data");
            }
            // JSON text may be invalid: an error, never a panic.
            let _ = reader.read_sample(s);
        }
        for &page in reader.page_map().data_pages() {
            let _ = reader.page_map().samples_of_page(page);
        }
    }
    let _ = std::fs::remove_file(&path);
});
