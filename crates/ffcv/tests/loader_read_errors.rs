//! A page that cannot be read (the file was truncated after the loader opened it) ends the
//! epoch with an error naming the file and page, through the process cache, and the
//! loader's threads are still joined.

mod loader_support;

use ffcv::{Loader, Order};
use loader_support::write_blobs;

#[test]
fn a_truncated_file_gives_a_page_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "trunc", 200);
    let size = std::fs::metadata(&path).unwrap().len();
    let mut loader = Loader::builder(&path)
        .batch_size(8)
        .os_cache(false)
        .order(Order::Random)
        .seed(0)
        .num_workers(2)
        .reader_threads(3)
        .build()
        .unwrap();
    // Keep the header, metadata and first data page; drop everything after.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(4 << 20).unwrap();
    assert!(size > 4 << 20);
    let mut ok = 0;
    let mut errors = Vec::new();
    for item in loader.iter() {
        match item {
            Ok(_) => ok += 1,
            Err(e) => errors.push(e.to_string()),
        }
    }
    assert!(ok < loader.len(), "some batch needs a lost page");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("trunc.beton") && errors[0].contains("page"),
        "{}",
        errors[0]
    );
    assert_eq!(loader.live_threads(), 0);
}
