//! Helpers shared by the integration tests.
use pipeline_jit::{BatchBuffers, Executor, Options, Pipeline};

/// Run `pipeline` on `input` (one batch of `ids`) compiled or interpreted with `workers`.
pub fn run(
    pipeline: &Pipeline,
    compile: bool,
    workers: usize,
    ids: &[u64],
    input: &[u8],
    seed: u64,
    epoch: u64,
) -> Vec<u8> {
    run_with(
        &executor(pipeline, compile, workers),
        ids,
        input,
        seed,
        epoch,
    )
}

/// An executor of `pipeline`, compiled or interpreted, on `workers` threads.
pub fn executor(pipeline: &Pipeline, compile: bool, workers: usize) -> Executor {
    let options = Options {
        num_workers: workers,
        compile,
    };
    Executor::new(pipeline, &options).expect("executor")
}

/// Run an existing executor on one batch.
pub fn run_with(ex: &Executor, ids: &[u64], input: &[u8], seed: u64, epoch: u64) -> Vec<u8> {
    let mut out = vec![0u8; ids.len() * ex.plan().output_bytes()];
    ex.run(BatchBuffers {
        sample_ids: ids,
        input,
        output: &mut out,
        seed,
        epoch,
    })
    .expect("run");
    out
}

/// Deterministic pseudo-random bytes.
pub fn bytes(n: usize, salt: u64) -> Vec<u8> {
    let mut x = salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Little helpers to view output bytes as numbers.
pub fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}
