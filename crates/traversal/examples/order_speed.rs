//! How long one epoch's order takes for an ImageNet-sized dataset (1,281,167 samples,
//! 20 samples per page): `cargo run --release -p traversal --example order_speed`.

use std::time::Instant;

use traversal::{
    Distributed, QuasiRandom, Random, SamplePages, Sequential, TraversalOrder,
    default_buffer_pages, shuffle_quality,
};

fn time(label: &str, order: &dyn TraversalOrder) -> Vec<u64> {
    let start = Instant::now();
    let epoch = order.order(1);
    println!(
        "{label:<40} {:>9.1} ms  ({} samples)",
        start.elapsed().as_secs_f64() * 1e3,
        epoch.len()
    );
    epoch
}

fn main() -> traversal::Result<()> {
    let num_samples = 1_281_167u64;
    let pages = SamplePages::from_fn(num_samples, |s| Some(1 + s / 20));
    let indices: Vec<u64> = (0..num_samples).collect();
    let batch_size = 512;

    time("sequential", &Sequential::all(num_samples));
    let random = time("random (NumPy PCG64)", &Random::all(num_samples, 0));
    let rank = Distributed::new(8, 3)?;
    time(
        "random, rank 3 of 8 (torch randperm)",
        &Random::all(num_samples, 0).with_distributed(rank),
    );
    let quasi = QuasiRandom::new(&indices, &pages, 0, default_buffer_pages(batch_size))?;
    let quasi_order = time("quasi-random (buffer 1024 pages)", &quasi);
    time(
        "quasi-random, rank 3 of 8",
        &QuasiRandom::new(&indices, &pages, 0, default_buffer_pages(batch_size))?
            .with_distributed(rank),
    );

    for (label, order) in [("random", &random), ("quasi-random", &quasi_order)] {
        let quality = shuffle_quality(order, batch_size, &pages, None)?;
        println!(
            "{label:<14} distinct pages per batch: mean {:.1}, max {}; peak open pages {}",
            quality.mean_distinct_pages_per_batch,
            quality.max_distinct_pages_per_batch,
            quality.peak_open_pages
        );
    }
    Ok(())
}
