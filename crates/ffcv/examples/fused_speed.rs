//! Times FFCV's ImageNet training pipeline (RandomResizedCrop → flip → normalize → CHW)
//! through the loader with the transforms folded into the resizer's output pass and with
//! them run step by step (`PipelineSpec::fuse(true)` against the default), in alternating rounds of one
//! process, and checks that both give the same bytes.
//!
//! ```sh
//! cargo run --release -p ffcv --example fused_speed -- FILE.beton [WORKERS] [ROUNDS] [f32|f16] [SIZE]
//! ```
//!
//! Prints one line per round and engine: samples/s over one epoch (after one warm-up
//! epoch per loader, whose outputs are compared), then the median and the best of each and
//! their ratios.

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

/// CPU seconds this process has used (user + system, all threads), from `/proc/self/stat`
/// (Linux; 0 elsewhere). On a machine shared with other work, samples per CPU second
/// moves far less than samples per wall second.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name's closing parenthesis; utime and stime are the 12th
    // and 13th of them, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    f.iter().sum::<f64>() / 100.0
}

/// One epoch: samples/s, and with `hash` a hash of every image byte (outside the timing
/// that matters: only the warm-up epochs hash).
fn epoch(loader: &mut Loader, hash: bool) -> (f64, f64, u64) {
    let (t, cpu) = (Instant::now(), cpu_seconds());
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
    let used = (cpu_seconds() - cpu).max(0.01);
    (n as f64 / t.elapsed().as_secs_f64(), n as f64 / used, h)
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
    let (_, _, a) = epoch(&mut fused, true);
    let (_, _, b) = epoch(&mut steps, true);
    assert_eq!(a, b, "the fused and step-by-step outputs differ");
    let (mut f, mut s, mut cf, mut cs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (rf, pf, _) = epoch(&mut fused, false);
        let (rs, ps, _) = epoch(&mut steps, false);
        println!(
            "round {round}: fused {rf:.0} samples/s ({pf:.0} per CPU s), step by step {rs:.0} \
             samples/s ({ps:.0} per CPU s)"
        );
        f.push(rf);
        s.push(rs);
        cf.push(pf);
        cs.push(ps);
    }
    let (mcf, mcs) = (median(&mut cf), median(&mut cs));
    println!(
        "median per CPU second: fused {mcf:.0}, step by step {mcs:.0}, fused / step by step {:.3}",
        mcf / mcs
    );
    let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let (bf, bs) = (best(&f), best(&s));
    let (mf, ms) = (median(&mut f), median(&mut s));
    println!(
        "median: fused {mf:.0}, step by step {ms:.0}, fused / step by step {:.3}",
        mf / ms
    );
    // On a shared machine the best round is the one least disturbed.
    println!(
        "best: fused {bf:.0}, step by step {bs:.0}, fused / step by step {:.3}",
        bf / bs
    );
}
