//! Rows `jit/fused`, `jit/interpreted` and `jit/compile`: the pipeline JIT against its
//! interpreter on 256 u8 32×32×3 images → RandomHorizontalFlip → NormalizeImage(f32) →
//! ToChw, and what generating the code costs (once, and per epoch in `recompile` mode).

use std::sync::Arc;
use std::time::Instant;

use pipeline_jit::ops::{NormalizeImage, RandomHorizontalFlip, ToChw};
use pipeline_jit::{BatchBuffers, ElemType, Executor, Pipeline, State};
use serde_json::json;

use crate::report::Row;
use crate::timing;

/// Samples per batch.
const BATCH: usize = 256;
/// Batches per timed pass.
const BATCHES_PER_PASS: usize = 20;
/// Timed passes (interleaved JIT / interpreter).
const REPS: usize = 15;
/// Fresh compilations and recompilations timed.
const COMPILES: usize = 25;
/// The epoch the recompile cost is compared with: a CIFAR-10-sized epoch (50,000 samples)
/// through this pipeline at the JIT's measured rate.
const EPOCH_SAMPLES: f64 = 50_000.0;

fn pipeline(epoch: u64) -> Pipeline {
    // The mean moves with the epoch so that a recompile really has new constants.
    let shift = (epoch % 7) as f64 * 0.01;
    Pipeline::new(State::cpu([32, 32, 3], ElemType::U8))
        .then(RandomHorizontalFlip(0.5))
        .then(NormalizeImage {
            mean: vec![125.307 + shift, 122.961, 113.8575],
            std: vec![51.5865, 50.847, 51.255],
            dtype: ElemType::F32,
        })
        .then(ToChw)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The JIT rows.
pub fn rows() -> Result<Vec<Row>, String> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| e.to_string())?,
    );
    let err = |e: pipeline_jit::Error| e.to_string();
    let jit = Executor::with_pool(&pipeline(0), true, pool.clone()).map_err(err)?;
    let interp = Executor::with_pool(&pipeline(0), false, pool.clone()).map_err(err)?;
    let ids: Vec<u64> = (0..BATCH as u64).collect();
    let input: Vec<u8> = (0..BATCH * 3072)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let out_bytes = BATCH * jit.plan().output_bytes();
    let jit_out = std::sync::Mutex::new(vec![0u8; out_bytes]);
    let interp_out = std::sync::Mutex::new(vec![0u8; out_bytes]);
    let pass = |ex: &Executor, out: &std::sync::Mutex<Vec<u8>>| -> Result<(), String> {
        let mut out = out.lock().map_err(|e| e.to_string())?;
        for b in 0..BATCHES_PER_PASS {
            ex.run(BatchBuffers {
                sample_ids: &ids,
                input: &input,
                output: &mut out,
                seed: 0,
                epoch: b as u64,
            })
            .map_err(err)?;
        }
        Ok(())
    };
    let [t_jit, t_interp] = timing::interleaved(
        REPS,
        [&|| pass(&jit, &jit_out), &|| pass(&interp, &interp_out)],
    )?;
    let identical = *jit_out.lock().map_err(|e| e.to_string())?
        == *interp_out.lock().map_err(|e| e.to_string())?;
    if !identical {
        return Err("jit: the JIT's output differs from the interpreter's".into());
    }
    let samples = (BATCH * BATCHES_PER_PASS) as f64;
    let jit_sps = samples / t_jit.median();
    let interp_sps = samples / t_interp.median();
    let config = format!("{BATCH} x u8 32x32x3 -> flip -> normalize f32 -> CHW, {threads} threads");

    // Compile: a fresh executor (plan + Cranelift + module finalisation) per pipeline.
    let mut compile_ms = Vec::new();
    for _ in 0..COMPILES {
        let t = Instant::now();
        let ex = Executor::with_pool(&pipeline(0), true, pool.clone()).map_err(err)?;
        compile_ms.push(t.elapsed().as_secs_f64() * 1e3);
        drop(ex);
    }
    // Recompile: what `recompile = true` costs at each epoch start (new plan, new module,
    // old module freed).
    let mut re = Executor::with_pool(&pipeline(0), true, pool).map_err(err)?;
    let mut recompile_ms = Vec::new();
    for epoch in 1..=COMPILES as u64 {
        let p = pipeline(epoch);
        let t = Instant::now();
        re.rebuild(&p).map_err(err)?;
        recompile_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let compile_ms = median(compile_ms);
    let recompile_ms = median(recompile_ms);
    let epoch_ms = EPOCH_SAMPLES / jit_sps * 1e3;

    let bytes = |sps: f64| sps * 3072.0;
    let mut fused = Row {
        name: "jit/fused".into(),
        config: config.clone(),
        samples_per_sec: jit_sps,
        bytes_per_sec: bytes(jit_sps),
        ratio: Some(jit_sps / interp_sps),
        ratio_to: Some("jit/interpreted".into()),
        ..Row::default()
    };
    fused.extra.insert("seconds".into(), t_jit.summary());
    let mut interpreted = Row {
        name: "jit/interpreted".into(),
        config: config.clone(),
        samples_per_sec: interp_sps,
        bytes_per_sec: bytes(interp_sps),
        ..Row::default()
    };
    interpreted
        .extra
        .insert("seconds".into(), t_interp.summary());
    let mut compile = Row {
        name: "jit/compile".into(),
        config: format!("{config}; epoch = {EPOCH_SAMPLES} samples at the fused rate"),
        samples_per_sec: jit_sps,
        bytes_per_sec: bytes(jit_sps),
        ..Row::default()
    };
    compile.extra.insert("compile_ms".into(), json!(compile_ms));
    compile
        .extra
        .insert("recompile_ms".into(), json!(recompile_ms));
    compile.extra.insert("epoch_ms".into(), json!(epoch_ms));
    compile.extra.insert(
        "recompile_fraction_of_epoch".into(),
        json!(recompile_ms / epoch_ms),
    );
    Ok(vec![fused, interpreted, compile])
}
