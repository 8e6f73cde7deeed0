//! Times FFCV's ImageNet training pipeline (RandomResizedCrop → flip → normalize → CHW)
//! through the loader with the transforms folded into the resizer's output pass and with
//! them run step by step (`PipelineSpec::fuse(false)`), in alternating rounds of one
//! process, and checks that both give the same bytes.
//!
//! ```sh
//! cargo run --release -p ffcv --example fused_speed -- FILE.beton [WORKERS] [ROUNDS] [f32|f16] [SIZE]
//! ```
//!
//! Prints one line per round and engine: samples/s over one epoch (after one warm-up
//! epoch per loader, whose outputs are compared), then the median of each and their ratio.

use std::time::Instant;

use ffcv::decode::RandomResizedCropRGBImageDecoder;
use ffcv::jit::ElemType;
use ffcv::transforms::{
    IMAGENET_MEAN, IMAGENET_STD, normalize_image, random_horizontal_flip, to_torch_image,
};
use ffcv::{Loader, Order, PipelineSpec};

fn spec(dtype: ElemType, size: u32, fuse: bool) -> PipelineSpec {
    PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((size, size)))
        .then(random_horizontal_flip(0.5))
        .then(normalize_image(IMAGENET_MEAN, IMAGENET_STD, dtype))
        .then(to_torch_image())
        .fuse(fuse)
}

fn loader(path: &str, workers: i64, dtype: ElemType, size: u32, fuse: bool) -> Loader {
    Loader::builder(path)
        .batch_size(128)
        .num_workers(workers)
        .order(Order::Random)
        .drop_last(false)
        .seed(5)
        .pipeline("image", spec(dtype, size, fuse))
        .build()
        .expect("a loader")
}

/// One epoch: samples/s, and with `hash` a hash of every image byte (outside the timing
/// that matters: only the warm-up epochs hash).
fn epoch(loader: &mut Loader, hash: bool) -> (f64, u64) {
    let t = Instant::now();
    let (mut n, mut h) = (0usize, 0xcbf2_9ce4_8422_2325u64);
    for batch in loader.iter() {
        let batch = batch.expect("a batch");
        if hash {
            let bytes = batch.output("image").expect("the image output").bytes();
            for w in bytes.chunks(8) {
                let mut word = [0u8; 8];
                word[..w.len()].copy_from_slice(w);
                h = (h ^ u64::from_le_bytes(word)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        n += batch.len();
    }
    (n as f64 / t.elapsed().as_secs_f64(), h)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .expect("usage: fused_speed FILE [WORKERS] [ROUNDS] [f32|f16] [SIZE]");
    let workers: i64 = args.get(1).map_or(2, |s| s.parse().expect("workers"));
    let rounds: usize = args.get(2).map_or(3, |s| s.parse().expect("rounds"));
    let dtype = match args.get(3).map_or("f32", String::as_str) {
        "f16" => ElemType::F16,
        _ => ElemType::F32,
    };
    let size: u32 = args.get(4).map_or(224, |s| s.parse().expect("size"));
    let mut fused = loader(path, workers, dtype, size, true);
    let mut steps = loader(path, workers, dtype, size, false);
    // Warm-up epochs, hashed: the same seed and epoch give the same bytes.
    let (_, a) = epoch(&mut fused, true);
    let (_, b) = epoch(&mut steps, true);
    assert_eq!(a, b, "the fused and step-by-step outputs differ");
    let (mut f, mut s) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (rf, _) = epoch(&mut fused, false);
        let (rs, _) = epoch(&mut steps, false);
        println!("round {round}: fused {rf:.0} samples/s, step by step {rs:.0} samples/s");
        f.push(rf);
        s.push(rs);
    }
    let (mf, ms) = (median(&mut f), median(&mut s));
    println!(
        "median: fused {mf:.0}, step by step {ms:.0}, fused / step by step {:.3}",
        mf / ms
    );
}
