//! Throughput of the fused JIT against the interpreter on the benchmark pipeline:
//! 256 u8 32×32×3 images → RandomHorizontalFlip → NormalizeImage(f32) → ToChw.
//!
//! Run with `cargo run --release -p pipeline-jit --example bench_fused [workers]`.

use std::time::Instant;

use pipeline_jit::ops::{NormalizeImage, RandomHorizontalFlip, ToChw};
use pipeline_jit::{BatchBuffers, ElemType, Executor, Options, Pipeline, State};

fn pipeline() -> Pipeline {
    Pipeline::new(State::cpu([32, 32, 3], ElemType::U8))
        .then(RandomHorizontalFlip(0.5))
        .then(NormalizeImage {
            mean: vec![125.3, 123.0, 113.9],
            std: vec![63.0, 62.1, 66.7],
            dtype: ElemType::F32,
        })
        .then(ToChw)
}

fn main() {
    let workers: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let n = 256;
    let ids: Vec<u64> = (0..n as u64).collect();
    let input: Vec<u8> = (0..n * 3072).map(|i| (i * 7 % 251) as u8).collect();
    let mut outs = Vec::new();
    for compile in [true, false] {
        let ex = Executor::new(
            &pipeline(),
            &Options {
                num_workers: workers,
                compile,
            },
        )
        .unwrap();
        let mut out = vec![0u8; n * ex.plan().output_bytes()];
        let mut best = f64::MAX;
        for rep in 0..200 {
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
