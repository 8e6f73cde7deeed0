//! A page that cannot be read (the file was truncated after the loader opened it, during
//! the epoch) ends the epoch with an error naming the file and page, through the process
//! cache, and the loader's threads are still joined. (A file truncated before an epoch is
//! refused at its start: `loader_errors_keep_their_cause.rs`.)

use crate::loader_support;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ffcv::{Attachment, Loader, Order, SlotOutput, SlotStage};
use loader_support::write_blobs;

/// Cuts the file to 4 MiB (header, metadata, first data page) while the producer handles
/// the first batch: after the epoch's start check, before later batches' pages are read.
struct TruncateOnce {
    path: PathBuf,
    done: AtomicBool,
}

impl SlotStage for TruncateOnce {
    fn process(
        &self,
        _slot: usize,
        _outputs: &mut [SlotOutput<'_>],
    ) -> Result<Option<Attachment>, ffcv::ExtensionError> {
        if !self.done.swap(true, Ordering::SeqCst) {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&self.path)
                .map_err(|e| e.to_string())?;
            file.set_len(4 << 20).map_err(|e| e.to_string())?;
        }
        Ok(None)
    }
}

#[test]
fn a_truncated_file_gives_a_page_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "trunc", 200);
    let size = std::fs::metadata(&path).unwrap().len();
    // More than three data pages beyond the cut: batch 0 reads at most one of them.
    assert!(size > 10 << 20);
    let mut loader = Loader::builder(&path)
        .batch_size(8)
        .os_cache(false)
        .order(Order::Sequential)
        .prefetch_ahead(0)
        .num_workers(2)
        .reader_threads(3)
        .slot_stage(Arc::new(TruncateOnce {
            path: path.clone(),
            done: AtomicBool::new(false),
        }))
        .build()
        .unwrap();
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
