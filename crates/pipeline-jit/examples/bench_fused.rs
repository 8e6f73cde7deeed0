//! Throughput of the fused JIT against the interpreter on a training chain:
//! u8 HWC images → RandomHorizontalFlip → NormalizeImage(f32 or f16) → ToChw; the CIFAR
//! chain (256 images of 32×32×3, the default) or the ImageNet chain after the crop (32
//! images of 224×224×3).
//!
//! Run with `cargo run --release -p pipeline-jit --example bench_fused [workers]
//! [cifar|imagenet] [f32|f16]`.

use std::time::Instant;

use pipeline_jit::ops::{NormalizeImage, RandomHorizontalFlip, ToChw};
use pipeline_jit::{BatchBuffers, ElemType, Executor, Options, Pipeline, State};

fn pipeline(side: usize, dtype: ElemType) -> Pipeline {
    Pipeline::new(State::cpu([side, side, 3], ElemType::U8))
        .then(RandomHorizontalFlip(0.5))
        .then(NormalizeImage {
            mean: vec![125.3, 123.0, 113.9],
            std: vec![63.0, 62.1, 66.7],
            dtype,
        })
        .then(ToChw)
}

fn main() {
    let workers: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let (side, n) = match std::env::args().nth(2).as_deref() {
        Some("imagenet") => (224, 32),
        _ => (32, 256),
    };
    let dtype = match std::env::args().nth(3).as_deref() {
        Some("f16") => ElemType::F16,
        _ => ElemType::F32,
    };
    println!("{n} images of {side}x{side}x3 -> {dtype:?}");
    let ids: Vec<u64> = (0..n as u64).collect();
    let input: Vec<u8> = (0..n * side * side * 3)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    let mut outs = Vec::new();
    for compile in [true, false] {
        let ex = Executor::new(
            &pipeline(side, dtype),
            &Options {
                num_workers: workers,
                compile,
            },
        )
        .unwrap();
        let mut out = vec![0u8; n * ex.plan().output_bytes()];
        let mut best = f64::MAX;
        for rep in 0..if side > 32 { 40 } else { 200 } {
            let t = Instant::now();
            ex.run(BatchBuffers {
                sample_ids: &ids,
                input: &input,
                output: &mut out,
                seed: 1,
                epoch: rep,
            })
            .unwrap();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "compile={compile} workers={workers}: {:.0} samples/s (best batch {:.1} us)",
            n as f64 / best,
            best * 1e6
        );
        if let Some(t) = ex.compile_time() {
            println!("  compile time {:.2} ms", t.as_secs_f64() * 1e3);
        }
        ex.run(BatchBuffers {
            sample_ids: &ids,
            input: &input,
            output: &mut out,
            seed: 1,
            epoch: 0,
        })
        .unwrap();
        outs.push(out);
    }
    println!("identical: {}", outs[0] == outs[1]);
}
