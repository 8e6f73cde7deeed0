//! The loader's GPU stage (`ToDevice`). Without a CUDA driver the device tests print
//! "skipped: no CUDA device" and return; the checks of the configuration and of the error a
//! CUDA loader gives without a driver run everywhere. With a GPU each device test prints one
//! `PASS <name>: <figure>` line (`cargo xtask gpu-bundle` collects them).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use ffcv::decode::{BytesDecoder, IntDecoder, NdArrayDecoder};
use ffcv::format::{
    DatasetWriter, FieldSpec, FieldType, FieldValue, NdArrayArgs, NumpyDtype, from_fn,
};
use ffcv::gpu::gpu_stage::{self, Device, ImageShape, normalize_reference};
use ffcv::gpu::{DeviceDtype, DeviceSpec, GpuBatch, Normalize, ToDevice};
use ffcv::jit::ElemType;
use ffcv::jit::ops::{NormalizeImage, ToChw};
use ffcv::{Loader, PipelineSpec};

const H: usize = 24;
const W: usize = 20;
const SAMPLES: u64 = 100;

/// A file with an Int label, variable-length bytes and a u8 `[H, W, 3]` image per sample.
fn dataset(dir: &Path) -> PathBuf {
    let path = dir.join("gpu.beton");
    let image = NdArrayArgs::new(NumpyDtype::u8(), vec![H as u64, W as u64, 3]);
    DatasetWriter::new(
        &path,
        vec![
            FieldSpec::new("label", FieldType::Int),
            FieldSpec::new("blob", FieldType::Bytes),
            FieldSpec::new("image", FieldType::NdArray(image)),
        ],
    )
    .unwrap()
    .write(&from_fn(SAMPLES, |i| {
        let mut s = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let pixels = (0..H * W * 3)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 32) as u8
            })
            .collect();
        Ok(vec![
            FieldValue::Int(i as i64 * 3 - 7),
            FieldValue::Bytes((0..(i % 13) as u8).collect()),
            FieldValue::NdArray(pixels),
        ])
    }))
    .unwrap();
    path
}

/// Device 0, or `None` after printing why the test is skipped.
fn device_or_skip(check: &str) -> Option<Device> {
    match Device::open(0) {
        Ok(d) => Some(d),
        Err(e @ (gpu_stage::Error::NoDriver | gpu_stage::Error::NoDevice { .. })) => {
            println!("skipped: no CUDA device ({e})");
            println!("\nSKIP {check}: no CUDA device");
            None
        }
        Err(e) => panic!("opening CUDA device 0: {e}"),
    }
}

fn builder(path: &Path, batches_ahead: usize) -> ffcv::LoaderBuilder {
    Loader::builder(path)
        .batch_size(16)
        .drop_last(false)
        .num_workers(2)
        .seed(5)
        .batches_ahead(batches_ahead)
        .pipeline("label", PipelineSpec::new(IntDecoder))
        .pipeline("blob", PipelineSpec::new(BytesDecoder))
        .pipeline("image", PipelineSpec::new(NdArrayDecoder))
}

fn gpu(batch: &ffcv::Batch) -> &GpuBatch {
    batch
        .attachment::<GpuBatch>()
        .expect("a GPU loader attaches a GpuBatch to every batch")
}

#[test]
fn without_a_driver_a_cuda_loader_is_a_clear_error_and_cpu_is_unaffected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dataset(dir.path());
    // `cpu` installs no stage: batches are plain host batches.
    let mut cpu = builder(&path, 2).device(DeviceSpec::Cpu).build().unwrap();
    let mut plain = builder(&path, 2).build().unwrap();
    for (a, b) in cpu.iter().zip(plain.iter()) {
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(a.attachment::<GpuBatch>().is_none());
        for name in ["label", "blob", "image"] {
            assert_eq!(
                a.output(name).unwrap().bytes(),
                b.output(name).unwrap().bytes()
            );
        }
    }
    if gpu_stage::driver_available() {
        println!("skipped: a CUDA driver is present");
        return;
    }
    let err = builder(&path, 2)
        .device("cuda:0".parse().unwrap())
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cuda:0: no CUDA driver found"),
        "unexpected error: {err}"
    );
}

#[test]
fn a_bad_image_configuration_is_refused_before_the_device_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dataset(dir.path());
    let cases = [
        (
            ToDevice::new(DeviceSpec::Cuda(0)).normalize(
                "label",
                Normalize::imagenet(DeviceDtype::F32),
                false,
            ),
            "output \"label\": normalizing on the device needs u8 [H, W, C] rows, not <i8 [1]",
        ),
        (
            ToDevice::new(DeviceSpec::Cuda(0)).normalize(
                "nope",
                Normalize::imagenet(DeviceDtype::F32),
                false,
            ),
            "output \"nope\": no such output (the batches have: label, blob, image)",
        ),
        (
            ToDevice::new(DeviceSpec::Cuda(0)).normalize(
                "image",
                Normalize::convert_only(4, DeviceDtype::F16),
                false,
            ),
            "output \"image\": 3 channels but 4 normalize means",
        ),
    ];
    for (td, want) in cases {
        let err = builder(&path, 2)
            .to_device(td)
            .build()
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err:?} does not contain {want:?}");
    }
}

/// (a) Every output of every batch, read back from the device, equals the CPU batch (the
/// pinned buffers the CPU pipeline wrote), images normalized and flipped equal gpu-stage's
/// CPU reference, for batches_ahead 1..=4 over 3 epochs while the consumer holds 2 batches.
#[test]
fn gpu_batches_equal_the_cpu_batches() {
    let Some(device) = device_or_skip("gpu_batches_equal_cpu") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dataset(dir.path());
    let consumer = device.new_stream().unwrap();
    let mut checked = 0usize;
    let mut bytes = 0usize;
    for ahead in 1..=4 {
        let td = ToDevice::new(DeviceSpec::Cuda(0)).normalize(
            "image",
            Normalize::imagenet(DeviceDtype::F16),
            true,
        );
        let mut loader = builder(&path, ahead).to_device(td).build().unwrap();
        let mut stage = None;
        for epoch in 0..3 {
            let mut held: VecDeque<ffcv::Batch> = VecDeque::new();
            let mut samples = 0;
            for (b, batch) in loader.iter().enumerate() {
                let batch = batch.unwrap();
                let g = gpu(&batch);
                stage.get_or_insert_with(|| g.stage().clone());
                // Alternate a device consumer and a host consumer.
                if b % 2 == 0 {
                    g.wait_on(&consumer).unwrap();
                } else {
                    g.synchronize().unwrap();
                }
                let n = batch.len();
                for name in ["label", "blob"] {
                    let dev = g.copy_to_host(name).unwrap();
                    assert_eq!(
                        dev,
                        batch.output(name).unwrap().bytes(),
                        "batches_ahead {ahead}, epoch {epoch}, batch {b}, {name}"
                    );
                    bytes += dev.len();
                }
                let t = g.tensor("image").unwrap();
                assert_eq!(t.shape, vec![n, 3, H, W]);
                assert_eq!(t.dtype, DeviceDtype::F16);
                let flips = g.flips("image").unwrap();
                assert_eq!(flips.len(), n);
                let table = g.stage().stage().normalize_table(2).unwrap();
                let shape = ImageShape {
                    batch: n,
                    height: H,
                    width: W,
                    channels: 3,
                };
                let want = normalize_reference(
                    table,
                    shape,
                    batch.output("image").unwrap().bytes(),
                    Some(flips),
                )
                .unwrap();
                let dev = g.copy_to_host("image").unwrap();
                assert!(
                    dev == want,
                    "batches_ahead {ahead}, epoch {epoch}, batch {b}: image"
                );
                bytes += dev.len();
                samples += n;
                checked += 1;
                held.push_back(batch);
                if held.len() > 2 {
                    // Re-check the oldest held batch: its slot was not reused under it.
                    let old = held.pop_front().unwrap();
                    assert_eq!(
                        gpu(&old).copy_to_host("label").unwrap(),
                        old.output("label").unwrap().bytes()
                    );
                }
            }
            assert_eq!(samples as u64, SAMPLES);
        }
        consumer.synchronize().unwrap();
        // The stage's counters: every batch and byte, and a device time for every batch but
        // the first of each slot (whose stream was not known yet).
        let stats = stage.unwrap().stats();
        let per_epoch = SAMPLES * (8 + 12 + (H * W * 3) as u64);
        assert_eq!(stats.batches, 3 * 7);
        assert_eq!(stats.h2d_bytes, 3 * per_epoch);
        let slots = loader.stats().slot_allocations as u64;
        assert_eq!(stats.timed_batches, stats.batches - slots, "{stats:?}");
        assert!(stats.device_time > std::time::Duration::ZERO);
        // The loader's counters carry the stage's copy figures.
        let ls = loader.stats();
        assert_eq!(ls.h2d_bytes, stats.h2d_bytes);
        assert_eq!(ls.h2d_timed_batches, stats.timed_batches);
        assert!(ls.h2d_time >= stats.device_time, "{ls:?} {stats:?}");
        assert!(ls.slot_stage > std::time::Duration::ZERO);
    }
    println!(
        "\nPASS gpu_batches_equal_cpu: {checked} batches (batches_ahead 1..=4 x 3 epochs, 2 held), {:.1} MB read back equal",
        bytes as f64 / 1e6
    );
}

/// The spacing of f16 values around `x` (one rounding step).
fn f16_ulp_at(x: f64) -> f64 {
    let e = x.abs().max(6.1e-5).log2().floor();
    2f64.powf(e - 10.0)
}

/// (c) The fused kernel equals the CPU interpreter's NormalizeImage + ToChw: bit for bit to
/// f32, within one f16/bf16 rounding step to the half types, and mirrored where flipped.
#[test]
fn gpu_normalize_equals_the_cpu_interpreter() {
    let Some(_device) = device_or_skip("gpu_normalize_matches_interpreter") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dataset(dir.path());
    let norm = Normalize::imagenet(DeviceDtype::F32);
    let mut cpu = builder(&path, 2)
        .compile(false)
        .pipeline(
            "image",
            PipelineSpec::new(NdArrayDecoder)
                .then(NormalizeImage {
                    mean: norm.mean.clone(),
                    std: norm.std.clone(),
                    dtype: ElemType::F32,
                })
                .then(ToChw),
        )
        .build()
        .unwrap();
    let cpu_batches: Vec<Vec<f32>> = cpu
        .iter()
        .map(|b| b.unwrap().get::<f32>("image").unwrap().to_vec())
        .collect();
    let mut worst = [0f64; 3];
    let mut values = 0usize;
    for (dtype, flip) in [
        (DeviceDtype::F32, false),
        (DeviceDtype::F32, true),
        (DeviceDtype::F16, false),
        (DeviceDtype::Bf16, true),
    ] {
        let td = ToDevice::new(DeviceSpec::Cuda(0)).normalize(
            "image",
            Normalize {
                dtype,
                ..norm.clone()
            },
            flip,
        );
        let mut loader = builder(&path, 2).to_device(td).build().unwrap();
        for (b, batch) in loader.iter().enumerate() {
            let batch = batch.unwrap();
            let g = gpu(&batch);
            g.synchronize().unwrap();
            let dev = g.copy_to_host("image").unwrap();
            let flips = g.flips("image");
            let want = &cpu_batches[b];
            let n = batch.len();
            assert_eq!(want.len(), n * 3 * H * W);
            for s in 0..n {
                let mirrored = flips.is_some_and(|f| f[s] != 0);
                for c in 0..3 {
                    for y in 0..H {
                        for x in 0..W {
                            let o = ((s * 3 + c) * H + y) * W + x;
                            let src_x = if mirrored { W - 1 - x } else { x };
                            let cpu_v = want[((s * 3 + c) * H + y) * W + src_x];
                            let got = match dtype {
                                DeviceDtype::F32 => {
                                    let v = f32::from_le_bytes(
                                        dev[o * 4..o * 4 + 4].try_into().unwrap(),
                                    );
                                    assert_eq!(
                                        v.to_bits(),
                                        cpu_v.to_bits(),
                                        "f32 batch {b} sample {s} c{c} y{y} x{x}"
                                    );
                                    f64::from(v)
                                }
                                DeviceDtype::F16 | DeviceDtype::Bf16 => {
                                    let bits = u16::from_le_bytes([dev[o * 2], dev[o * 2 + 1]]);
                                    let (v, ulp) = if dtype == DeviceDtype::F16 {
                                        let v = gpu_stage::f16_bits_to_f64(bits);
                                        (v, f16_ulp_at(f64::from(cpu_v)))
                                    } else {
                                        let v = gpu_stage::bf16_bits_to_f64(bits);
                                        let e = f64::from(cpu_v).abs().max(1e-30).log2().floor();
                                        (v, 2f64.powf(e - 7.0))
                                    };
                                    let err = (v - f64::from(cpu_v)).abs();
                                    assert!(
                                        err <= ulp,
                                        "{dtype} batch {b} sample {s}: {v} vs {cpu_v} (ulp {ulp})"
                                    );
                                    v
                                }
                                other => panic!("unexpected dtype {other}"),
                            };
                            let idx = match dtype {
                                DeviceDtype::F32 => 0,
                                DeviceDtype::F16 => 1,
                                _ => 2,
                            };
                            worst[idx] = worst[idx].max((got - f64::from(cpu_v)).abs());
                            values += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(worst[0], 0.0);
    println!(
        "\nPASS gpu_normalize_matches_interpreter: {values} values; f32 bit-identical (with and without flip), max |f16 - f32 cpu| {:.2e}, max |bf16 - f32 cpu| {:.2e}",
        worst[1], worst[2]
    );
}

/// (d) Device memory does not grow over 20 epochs: everything is allocated once per loader.
#[test]
fn gpu_device_memory_is_flat_over_20_epochs() {
    let Some(device) = device_or_skip("gpu_device_memory_flat") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dataset(dir.path());
    let td = ToDevice::new(DeviceSpec::Cuda(0)).normalize(
        "image",
        Normalize::imagenet(DeviceDtype::F16),
        true,
    );
    let mut loader = builder(&path, 3).to_device(td).build().unwrap();
    let consumer = device.new_stream().unwrap();
    let run_epoch = |loader: &mut Loader| {
        for batch in loader.iter() {
            let batch = batch.unwrap();
            gpu(&batch).wait_on(&consumer).unwrap();
        }
        consumer.synchronize().unwrap();
    };
    run_epoch(&mut loader);
    let before = device.mem_info().unwrap().free;
    for _ in 1..20 {
        run_epoch(&mut loader);
    }
    let after = device.mem_info().unwrap().free;
    let moved = before.abs_diff(after);
    assert!(
        moved <= 1 << 20,
        "free device memory moved by {moved} bytes over 19 epochs ({before} -> {after})"
    );
    // The stage allocated batches_ahead + 2 slots when the loader was built and never more;
    // the loader bound at most that many.
    let stage_slots = {
        let batch = loader.iter().next().unwrap().unwrap();
        gpu(&batch).stage().stage().num_slots()
    };
    assert_eq!(stage_slots, 3 + 2);
    assert!(loader.stats().slots <= stage_slots);
    println!(
        "\nPASS gpu_device_memory_flat: free device memory moved {moved} B over epochs 1..20 ({stage_slots} stage slots, allocated once)"
    );
}
