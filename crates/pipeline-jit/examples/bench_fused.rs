//! Throughput of the fused JIT against the interpreter on a training chain:
//! u8 HWC images → RandomHorizontalFlip → NormalizeImage(f32 or f16) → ToChw; the CIFAR
//! chain (256 images of 32×32×3, the default) or the ImageNet chain after the crop (32
//! images of 224×224×3): the JIT with vector code, the JIT with the scalar loop only
//! (`set_vector_code(false)`), and the interpreter, timed in alternating rounds.
//!
//! Run with `cargo run --release -p pipeline-jit --example bench_fused [workers]
//! [cifar|imagenet] [f32|f16] [images]`.

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
    // Optional image count: a smaller batch keeps input and output in the core's caches,
    // which measures the loop rather than memory bandwidth.
    let n = std::env::args()
        .nth(4)
        .and_then(|a| a.parse().ok())
        .unwrap_or(n);
    println!("{n} images of {side}x{side}x3 -> {dtype:?}");
    let ids: Vec<u64> = (0..n as u64).collect();
    let input: Vec<u8> = (0..n * side * side * 3)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    // Three engines built up front (the vector switch is read when a stage compiles), then
    // timed in alternating rounds so that a busy phase of the machine hits all of them.
    let engines: Vec<(&str, Executor)> = [
        ("jit-vector", true, true),
        ("jit-scalar", true, false),
        ("interpreter", false, true),
    ]
    .into_iter()
    .map(|(name, compile, vector)| {
        pipeline_jit::set_vector_code(vector);
        let ex = Executor::new(
            &pipeline(side, dtype),
            &Options {
                num_workers: workers,
                compile,
            },
        )
        .unwrap();
        (name, ex)
    })
    .collect();
    pipeline_jit::set_vector_code(true);
    let out_bytes = n * engines[0].1.plan().output_bytes();
    let mut outs: Vec<Vec<u8>> = engines.iter().map(|_| vec![0u8; out_bytes]).collect();
    let mut best = vec![f64::MAX; engines.len()];
    for rep in 0..if side > 32 { 30 } else { 150 } {
        for (k, (_, ex)) in engines.iter().enumerate() {
            let t = Instant::now();
            ex.run(BatchBuffers {
                sample_ids: &ids,
                input: &input,
                output: &mut outs[k],
                seed: 1,
                epoch: rep,
            })
            .unwrap();
            best[k] = best[k].min(t.elapsed().as_secs_f64());
        }
    }
    for (k, (name, ex)) in engines.iter().enumerate() {
        print!(
            "{name} workers={workers}: {:.0} samples/s (best batch {:.1} us)",
            n as f64 / best[k],
            best[k] * 1e6
        );
        match ex.compile_time() {
            Some(t) => println!(", compile time {:.2} ms", t.as_secs_f64() * 1e3),
            None => println!(),
        }
    }
    println!("vector / scalar JIT: {:.2}x", best[1] / best[0]);
    for (k, (_, ex)) in engines.iter().enumerate() {
        ex.run(BatchBuffers {
            sample_ids: &ids,
            input: &input,
            output: &mut outs[k],
            seed: 1,
            epoch: 0,
        })
        .unwrap();
    }
    println!("identical: {}", outs.iter().all(|o| *o == outs[0]));
}
