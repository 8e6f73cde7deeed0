//! The crate-level GPU checks, one summary line each: `PASS|FAIL|SKIP <name>: <figure>`.
//!
//! ```text
//! cargo run --release -p gpu-stage --example gpu_checks -- [--device cuda:N]
//! ```
//!
//! Needs the NVIDIA driver (`libcuda.so.1`) and, for the image checks, NVRTC (`libnvrtc.so.13`:
//! on `LD_LIBRARY_PATH`, or under `$CUDA_HOME/lib64`, `$CUDA_PATH/lib64`, `/usr/local/cuda*/lib64`).
//! Without a CUDA device every check prints SKIP and the exit code is 0; with one, the exit
//! code is 1 if any check fails. Runs in well under two minutes on an H200.
//!
//! - `staged_equals_host`: random batches (raw bytes, i64 labels, images normalized with random
//!   flips) over 3 epochs for `batches_ahead` 1..=4, a producer thread and a consumer that keeps
//!   the last two batches alive; every batch, read back through the consumer's stream when it
//!   arrives and again when it is dropped, equals what the host wrote.
//! - `h2d_throughput`: the stage moving 32 MiB batches (`batches_ahead` 3, consumer waiting on
//!   the host) against a plain pinned `memcpy_htod` loop of the same buffers in the same run;
//!   passes at ≥ 90 %.
//! - `normalize_matches_cpu`: 64 images of 224×224×3 with random flips, to f32, f16 and bf16 on
//!   the device (and f64), compared with the CPU reference; passes when bit-identical.
//! - `device_memory_flat`: `cuMemGetInfo` after each of 20 epochs of a 256×224×224×3 f16 stage;
//!   passes when free memory moves by at most 1 MiB after the first epoch.
//! - `pinned_flags0_cpu_access`: CPU write and read speed of pinned memory with flags 0 (what
//!   the stage uses) against write-combined memory; passes when flags-0 memory is at least
//!   80 % as fast as write-combined memory both ways (the stage needs ordinary memory the
//!   CPU may read; this guards that the choice costs nothing measurable). On the H200 host
//!   the two measured within noise of each other, so a stricter "reads faster" made the
//!   check flip between runs.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use gpu_stage::cudarc::driver::{CudaContext, CudaStream};
use gpu_stage::{
    Device, DeviceDtype, DeviceElement, DeviceSpec, Error, Normalize, OutputSpec, Stage,
    StageConfig, StagedBatch, normalize_reference,
};

/// Whether the check passed, and its figure.
type CheckResult = Result<(bool, String), Error>;
type Check = fn(&Device) -> CheckResult;

const CHECKS: [&str; 5] = [
    "staged_equals_host",
    "h2d_throughput",
    "normalize_matches_cpu",
    "device_memory_flat",
    "pinned_flags0_cpu_access",
];

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let spec = match parse_args() {
        Ok(spec) => spec,
        Err(message) => {
            eprintln!("gpu_checks: {message}\nusage: gpu_checks [--device cuda:N]");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let device = match Device::from_spec(spec) {
        Ok(d) => d,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. } | Error::DeviceNotPresent { .. })) => {
            for name in CHECKS {
                println!("SKIP {name}: no CUDA device ({e})");
            }
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("gpu_checks: {e}");
            return ExitCode::FAILURE;
        }
    };
    let name = device.name().unwrap_or_else(|e| format!("? ({e})"));
    let cc = device
        .compute_capability()
        .map(|(a, b)| format!("{a}.{b}"))
        .unwrap_or_default();
    println!(
        "# device {spec}: {name}, compute capability {cc}, NVRTC {}",
        if gpu_stage::nvrtc_available() {
            "found"
        } else {
            "NOT found"
        }
    );
    let checks: [(&str, Check); 5] = [
        (CHECKS[0], staged_equals_host),
        (CHECKS[1], h2d_throughput),
        (CHECKS[2], normalize_matches_cpu),
        (CHECKS[3], device_memory_flat),
        (CHECKS[4], pinned_flags0_cpu_access),
    ];
    let mut failed = 0;
    for (name, check) in checks {
        let t = Instant::now();
        match check(&device) {
            Ok((true, figure)) => println!("PASS {name}: {figure}"),
            Ok((false, figure)) => {
                failed += 1;
                println!("FAIL {name}: {figure}");
            }
            Err(Error::NoNvrtc) => println!("SKIP {name}: {}", Error::NoNvrtc),
            Err(e) => {
                failed += 1;
                println!("FAIL {name}: error: {e}");
            }
        }
        eprintln!("# {name} took {:.2} s", t.elapsed().as_secs_f64());
    }
    eprintln!(
        "# {} checks, {failed} failed, {:.1} s",
        CHECKS.len(),
        started.elapsed().as_secs_f64()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn parse_args() -> Result<DeviceSpec, String> {
    let mut spec = DeviceSpec::Cuda(0);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--device" => {
                let value = args.next().ok_or("--device needs a value")?;
                spec = value.parse().map_err(|e: Error| e.to_string())?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if spec == DeviceSpec::Cpu {
        return Err("the checks need a CUDA device".to_owned());
    }
    Ok(spec)
}

/// Deterministic bytes from a seed (xorshift64*).
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e3779b97f4a7c15) ^ 0xd1b54a32d192ed03;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        out.extend_from_slice(&s.wrapping_mul(0x2545f4914f6cdd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Output `output` of `batch`, copied back through `stream` (which waited on the batch).
fn fetch<T: DeviceElement + Default + Clone + ToLe>(
    stream: &Arc<CudaStream>,
    batch: &StagedBatch,
    output: usize,
) -> Result<Vec<u8>, Error> {
    let view = batch.view::<T>(output)?;
    let mut host = vec![T::default(); view.len()];
    let copy = |e| Error::Driver {
        during: "copying a batch back on the consumer stream".to_owned(),
        source: e,
    };
    stream.memcpy_dtoh(&view, &mut host).map_err(copy)?;
    stream.synchronize().map_err(copy)?;
    Ok(host.iter().flat_map(ToLe::to_le).collect())
}

trait ToLe {
    fn to_le(&self) -> Vec<u8>;
}
impl ToLe for u8 {
    fn to_le(&self) -> Vec<u8> {
        vec![*self]
    }
}
impl ToLe for i64 {
    fn to_le(&self) -> Vec<u8> {
        self.to_le_bytes().to_vec()
    }
}
impl ToLe for f32 {
    fn to_le(&self) -> Vec<u8> {
        self.to_le_bytes().to_vec()
    }
}

/// The host data of one batch of the correctness check, and what the device must hold.
struct Expected {
    host: Vec<Vec<u8>>,
    flips: Vec<u8>,
}

const IMG: (usize, usize) = (17, 23);
const RAW_SAMPLE: usize = 4099;

fn batch_data(seed: u64, len: usize) -> Expected {
    let labels: Vec<u8> = (0..len as i64)
        .flat_map(|i| (i * 1_000_003 + seed as i64).to_le_bytes())
        .collect();
    Expected {
        host: vec![
            random_bytes(len * RAW_SAMPLE, seed),
            labels,
            random_bytes(len * IMG.0 * IMG.1 * 3, seed ^ 0xff),
        ],
        flips: random_bytes(len, seed ^ 0xf1f1)
            .iter()
            .map(|b| b & 1)
            .collect(),
    }
}

/// Compares every output of `batch` (read on `consumer`) with what was written.
fn verify(
    stage: &Stage,
    consumer: &Arc<CudaStream>,
    batch: &StagedBatch,
    seed: u64,
) -> Result<bool, Error> {
    let e = batch_data(seed, batch.len());
    let want_img = normalize_reference(
        stage.normalize_table(2).ok_or(Error::NoNvrtc)?,
        stage.image_shape(2, batch.len()).ok_or(Error::NoNvrtc)?,
        &e.host[2],
        Some(&e.flips),
    )?;
    Ok(fetch::<u8>(consumer, batch, 0)? == e.host[0]
        && fetch::<i64>(consumer, batch, 1)? == e.host[1]
        && fetch::<f32>(consumer, batch, 2)? == want_img)
}

fn staged_equals_host(device: &Device) -> CheckResult {
    const EPOCHS: u64 = 3;
    const BATCHES: u64 = 10;
    const MAX_BATCH: usize = 32;
    const HOLD: usize = 2;
    let mut batches = 0;
    let mut mismatches = 0;
    let mut slots = Vec::new();
    for ahead in 1..=4usize {
        let stage = Stage::new(
            device,
            StageConfig {
                max_batch: MAX_BATCH,
                batches_ahead: ahead,
                outputs: vec![
                    OutputSpec::raw("bytes", DeviceDtype::U8, &[RAW_SAMPLE]),
                    OutputSpec::raw("label", DeviceDtype::I64, &[]),
                    OutputSpec::image(
                        "image",
                        IMG.0,
                        IMG.1,
                        Normalize::imagenet(DeviceDtype::F32),
                        true,
                    ),
                ],
            },
        )?;
        let consumer = device.new_stream()?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<(StagedBatch, u64)>(ahead);
        let producer = {
            let stage = stage.clone();
            std::thread::spawn(move || -> Result<(), Error> {
                for epoch in 0..EPOCHS {
                    for b in 0..BATCHES {
                        let seed = (ahead as u64) << 32 | epoch << 16 | b;
                        // The last batch of each epoch is partial, as with drop_last=false.
                        let len = if b + 1 == BATCHES {
                            MAX_BATCH - 7
                        } else {
                            MAX_BATCH
                        };
                        let data = batch_data(seed, len);
                        let mut slot = stage.acquire()?;
                        for (i, host) in data.host.iter().enumerate() {
                            slot.host_mut(i)?[..host.len()].copy_from_slice(host);
                        }
                        slot.flips_mut(2)?[..len].copy_from_slice(&data.flips);
                        if tx.send((slot.to_device(len)?, seed)).is_err() {
                            return Ok(());
                        }
                    }
                }
                Ok(())
            })
        };
        let mut held: VecDeque<(StagedBatch, u64)> = VecDeque::new();
        let mut consume = || -> Result<(), Error> {
            for (mut batch, seed) in rx.iter() {
                batch.wait_on(&consumer)?;
                batches += 1;
                if !verify(&stage, &consumer, &batch, seed)? {
                    mismatches += 1;
                }
                held.push_back((batch, seed));
                if held.len() > HOLD
                    && let Some((old, seed)) = held.pop_front()
                {
                    // Still intact after later batches were staged while it was held.
                    if !verify(&stage, &consumer, &old, seed)? {
                        mismatches += 1;
                    }
                }
            }
            for (old, seed) in held.drain(..) {
                if !verify(&stage, &consumer, &old, seed)? {
                    mismatches += 1;
                }
            }
            Ok(())
        };
        let consumed = consume();
        // Unblocks a producer still sending if the consumer stopped early.
        drop(rx);
        let produced = producer.join().map_err(|_| Error::InvalidOutput {
            output: "(producer thread)".to_owned(),
            reason: "panicked".to_owned(),
        })?;
        consumed?;
        produced?;
        slots.push(stage.num_slots());
    }
    Ok((
        mismatches == 0 && batches == 4 * EPOCHS * BATCHES,
        format!(
            "{batches} batches (3 epochs x 10, batches_ahead 1..=4, consumer holding {HOLD}, slots used {slots:?}), each read back twice: {mismatches} mismatches"
        ),
    ))
}

fn h2d_throughput(device: &Device) -> CheckResult {
    const BATCH_BYTES: usize = 32 << 20;
    const BATCHES: usize = 48;
    const ROUNDS: usize = 3;
    let ctx: &Arc<CudaContext> = device.context();
    let driver = |during: &str| {
        let during = during.to_owned();
        move |source| Error::Driver { during, source }
    };

    // Plain: one pinned buffer (flags 0, as the stage), one stream, back-to-back copies.
    let stream = device.new_stream()?;
    // SAFETY: the buffer is filled right below, before any read.
    let mut pinned = unsafe { ctx.alloc_pinned_with_flags::<u8>(BATCH_BYTES, 0) }
        .map_err(driver("pinned alloc"))?;
    pinned
        .as_mut_slice()
        .map_err(driver("pinned map"))?
        .copy_from_slice(&random_bytes(BATCH_BYTES, 1));
    let mut dev = stream
        .alloc_zeros::<u8>(BATCH_BYTES)
        .map_err(driver("device alloc"))?;
    stream.synchronize().map_err(driver("sync"))?;
    let mut plain_best = 0f64;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for _ in 0..BATCHES {
            stream
                .memcpy_htod(&pinned, &mut dev)
                .map_err(driver("memcpy_htod"))?;
        }
        stream.synchronize().map_err(driver("sync"))?;
        plain_best = plain_best.max((BATCHES * BATCH_BYTES) as f64 / t.elapsed().as_secs_f64());
    }
    drop((pinned, dev));

    // The stage: 32 MiB batches, batches_ahead 3, host consumer popping the oldest batch.
    let ahead = 3;
    let stage = Stage::new(
        device,
        StageConfig {
            max_batch: 256,
            batches_ahead: ahead,
            outputs: vec![OutputSpec::raw(
                "payload",
                DeviceDtype::U8,
                &[BATCH_BYTES / 256],
            )],
        },
    )?;
    for _ in 0..stage.num_slots() {
        // Fill every slot once; the timed loop measures the copies, not CPU writes.
        let mut slot = stage.acquire()?;
        slot.host_mut(0)?
            .copy_from_slice(&random_bytes(BATCH_BYTES, 2));
        slot.to_device(256)?.synchronize()?;
    }
    let mut stage_best = 0f64;
    for _ in 0..ROUNDS {
        let mut queue = VecDeque::new();
        let t = Instant::now();
        for _ in 0..BATCHES {
            queue.push_back(stage.acquire()?.to_device(256)?);
            if queue.len() > ahead
                && let Some(oldest) = queue.pop_front()
            {
                oldest.synchronize()?;
            }
        }
        for b in queue.drain(..) {
            b.synchronize()?;
        }
        stage_best = stage_best.max((BATCHES * BATCH_BYTES) as f64 / t.elapsed().as_secs_f64());
    }
    let ratio = stage_best / plain_best;
    Ok((
        ratio >= 0.90,
        format!(
            "stage {:.1} GB/s vs plain pinned memcpy_htod {:.1} GB/s = {:.1}% (target >= 90%; {BATCHES} x 32 MiB, best of {ROUNDS})",
            stage_best / 1e9,
            plain_best / 1e9,
            ratio * 100.0
        ),
    ))
}

fn normalize_matches_cpu(device: &Device) -> CheckResult {
    const B: usize = 64;
    let (h, w) = (224, 224);
    let src = random_bytes(B * h * w * 3, 7);
    let flips: Vec<u8> = random_bytes(B, 8).iter().map(|b| b & 1).collect();
    let mut parts = Vec::new();
    let mut differing_total = 0;
    for dtype in [
        DeviceDtype::F32,
        DeviceDtype::F16,
        DeviceDtype::Bf16,
        DeviceDtype::F64,
    ] {
        let stage = Stage::new(
            device,
            StageConfig {
                max_batch: B,
                batches_ahead: 1,
                outputs: vec![OutputSpec::image(
                    "image",
                    h,
                    w,
                    Normalize::imagenet(dtype),
                    true,
                )],
            },
        )?;
        let mut slot = stage.acquire()?;
        slot.host_mut(0)?.copy_from_slice(&src);
        slot.flips_mut(0)?.copy_from_slice(&flips);
        let batch = slot.to_device(B)?;
        batch.synchronize()?;
        let got = batch.copy_to_host(0)?;
        let want = normalize_reference(
            stage.normalize_table(0).ok_or(Error::NoNvrtc)?,
            stage.image_shape(0, B).ok_or(Error::NoNvrtc)?,
            &src,
            Some(&flips),
        )?;
        let size = dtype.size();
        let differing = if got.len() == want.len() {
            got.chunks_exact(size)
                .zip(want.chunks_exact(size))
                .filter(|(a, b)| a != b)
                .count()
        } else {
            usize::MAX
        };
        differing_total += differing;
        parts.push(format!("{dtype} {differing} differing"));
    }
    Ok((
        differing_total == 0,
        format!(
            "{B} images 224x224x3 with random flips, {} elements per dtype: {} (bit-exact required)",
            B * h * w * 3,
            parts.join(", ")
        ),
    ))
}

fn device_memory_flat(device: &Device) -> CheckResult {
    const B: usize = 256;
    const EPOCHS: usize = 20;
    const BATCHES: usize = 8;
    let stage = Stage::new(
        device,
        StageConfig {
            max_batch: B,
            batches_ahead: 3,
            outputs: vec![
                OutputSpec::raw("label", DeviceDtype::I64, &[]),
                OutputSpec::image(
                    "image",
                    224,
                    224,
                    Normalize::imagenet(DeviceDtype::F16),
                    true,
                ),
            ],
        },
    )?;
    let mut free = Vec::with_capacity(EPOCHS);
    for _ in 0..EPOCHS {
        let mut queue = VecDeque::new();
        for _ in 0..BATCHES {
            queue.push_back(stage.acquire()?.to_device(B)?);
            if queue.len() > stage.batches_ahead()
                && let Some(oldest) = queue.pop_front()
            {
                oldest.synchronize()?;
            }
        }
        for b in queue.drain(..) {
            b.synchronize()?;
        }
        stage.wait_idle()?;
        free.push(device.mem_info()?.free as i64);
    }
    let base = free[0];
    let drift = free[1..]
        .iter()
        .map(|f| (f - base).abs())
        .max()
        .unwrap_or(0);
    Ok((
        drift <= 1 << 20,
        format!(
            "{EPOCHS} epochs x {BATCHES} batches of {B}x224x224x3 -> f16, {} slots ({:.0} MiB device each): free memory after epoch 1 {:.1} MiB, max change after {} bytes (tolerance 1 MiB)",
            stage.num_slots(),
            stage.slot_device_bytes() as f64 / (1 << 20) as f64,
            base as f64 / (1 << 20) as f64,
            drift
        ),
    ))
}

fn pinned_flags0_cpu_access(device: &Device) -> CheckResult {
    const LEN: usize = 64 << 20;
    let ctx = device.context();
    let source = random_bytes(1 << 20, 3);
    let driver = |source| Error::Driver {
        during: "pinned host memory".to_owned(),
        source,
    };
    let measure = |flags: u32| -> Result<(f64, f64), Error> {
        // SAFETY: written in full by the timed loop before it is read.
        let mut buf = unsafe { ctx.alloc_pinned_with_flags::<u8>(LEN, flags) }.map_err(driver)?;
        let slice = buf.as_mut_slice().map_err(driver)?;
        let mut write = 0f64;
        for _ in 0..3 {
            let t = Instant::now();
            for chunk in slice.chunks_mut(source.len()) {
                chunk.copy_from_slice(&source[..chunk.len()]);
            }
            write = write.max(LEN as f64 / t.elapsed().as_secs_f64());
        }
        let t = Instant::now();
        let sum = slice
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .fold(0u64, u64::wrapping_add);
        let read = LEN as f64 / t.elapsed().as_secs_f64();
        std::hint::black_box(sum);
        Ok((write, read))
    };
    let (w0, r0) = measure(0)?;
    let (wc_w, wc_r) = measure(gpu_stage::cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED)?;
    Ok((
        r0 >= 0.8 * wc_r && w0 >= 0.8 * wc_w,
        format!(
            "CPU write/read GB/s: flags 0 {:.1}/{:.1}, write-combined {:.1}/{:.1} (64 MiB, single thread)",
            w0 / 1e9,
            r0 / 1e9,
            wc_w / 1e9,
            wc_r / 1e9
        ),
    ))
}
