//! What a smaller QuasiRandom buffer costs in randomness, by the measures of
//! `shuffle_quality`: distinct pages and distinct labels per batch, and the pages open at
//! once (what a process cache must hold). The dataset is the shape of `docs/tuning.md`'s
//! larger-than-memory case (24,576 samples of 128 KiB, 64 to an 8 MiB page, 384 pages) with
//! 10 labels written class by class, as an image folder is:
//! `cargo run -p traversal --example buffer_quality`.

use traversal::{QuasiRandom, Random, SamplePages, TraversalOrder, shuffle_quality};

fn main() -> traversal::Result<()> {
    let num_samples = 24_576u64;
    let per_page = 64;
    let pages = SamplePages::from_fn(num_samples, |s| Some(s / per_page));
    let labels: Vec<i64> = (0..num_samples)
        .map(|s| (s * 10 / num_samples) as i64)
        .collect();
    let indices: Vec<u64> = (0..num_samples).collect();
    println!(
        "| batch | order | buffer (pages) | distinct pages / batch (mean, max) | distinct labels / batch (mean of 10) | peak open pages |"
    );
    println!("|---|---|---|---|---|---|");
    for batch_size in [64usize, 512] {
        let random = Random::all(num_samples, 0).order(0);
        let q = shuffle_quality(&random, batch_size, &pages, Some(&labels))?;
        println!(
            "| {batch_size} | Random | — | {:.1}, {} | {:.2} | {} |",
            q.mean_distinct_pages_per_batch,
            q.max_distinct_pages_per_batch,
            q.mean_distinct_labels_per_batch.unwrap_or(0.0),
            q.peak_open_pages
        );
        let ffcv = 2 * batch_size;
        let mut buffers = vec![ffcv];
        buffers.extend([64, 32, 16, 8, 4, 2, 1].into_iter().filter(|&b| b < ffcv));
        for buffer in buffers {
            let order = QuasiRandom::new(&indices, &pages, 0, buffer)?.order(0);
            let q = shuffle_quality(&order, batch_size, &pages, Some(&labels))?;
            println!(
                "| {batch_size} | QuasiRandom | {buffer}{} | {:.1}, {} | {:.2} | {} |",
                if buffer == ffcv {
                    " (FFCV: 2 × batch)"
                } else {
                    ""
                },
                q.mean_distinct_pages_per_batch,
                q.max_distinct_pages_per_batch,
                q.mean_distinct_labels_per_batch.unwrap_or(0.0),
                q.peak_open_pages
            );
        }
    }
    Ok(())
}
