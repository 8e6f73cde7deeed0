//! Staging on a real device. Each test prints "skipped: no CUDA device" and returns when the
//! driver or a device is missing, so the suite passes on machines without CUDA.

use gpu_stage::{
    Device, DeviceDtype, Error, Normalize, OutputSpec, SlotState, Stage, StageConfig,
    normalize_reference,
};

/// Device 0, or `None` (after saying why) when this machine has no CUDA device.
fn device_or_skip() -> Option<Device> {
    match Device::open(0) {
        Ok(d) => Some(d),
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!("skipped: no CUDA device ({e})");
            None
        }
        Err(e) => panic!("opening CUDA device 0: {e}"),
    }
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

#[test]
fn without_a_driver_opening_is_an_error_not_a_panic() {
    if gpu_stage::driver_available() {
        println!("skipped: a CUDA driver is present");
        return;
    }
    assert!(matches!(Device::open(0), Err(Error::NoDriver)));
    assert!(matches!(Device::count(), Err(Error::NoDriver)));
    assert_eq!(
        Device::open(0).unwrap_err().to_string(),
        "no CUDA driver found: libcuda.so could not be loaded (install the NVIDIA driver, or run without a CUDA device)"
    );
}

#[test]
fn an_ordinal_past_the_last_device_is_reported() {
    let Some(_) = device_or_skip() else { return };
    let count = Device::count().unwrap();
    match Device::open(count) {
        Err(Error::DeviceNotPresent { ordinal, count: c }) => {
            assert_eq!((ordinal, c), (count, count))
        }
        other => panic!("expected DeviceNotPresent, got {other:?}"),
    }
}

#[test]
fn raw_outputs_arrive_unchanged_and_held_batches_keep_their_bytes() {
    let Some(device) = device_or_skip() else {
        return;
    };
    let stage = Stage::new(
        &device,
        StageConfig {
            max_batch: 16,
            batches_ahead: 1,
            outputs: vec![OutputSpec::raw("bytes", DeviceDtype::U8, &[1000])],
        },
    )
    .unwrap();
    assert_eq!(stage.num_slots(), 3);
    let consumer = device.new_stream().unwrap();
    let mut held = Vec::new();
    for b in 0..5u64 {
        let data = pattern(16 * 1000, b);
        let mut slot = stage.acquire().unwrap();
        slot.host_mut(0).unwrap().copy_from_slice(&data);
        let mut batch = slot.to_device(16).unwrap();
        batch.wait_on(&consumer).unwrap();
        assert_eq!(batch.copy_to_host(0).unwrap(), data);
        held.push((batch, data));
    }
    // Five batches held with three slots: the stage grew rather than overwrite one.
    assert_eq!(stage.num_slots(), 5);
    for (batch, data) in &held {
        assert_eq!(&batch.copy_to_host(0).unwrap(), data);
    }
    drop(held);
    stage.wait_idle().unwrap();
    assert!(
        stage
            .slot_states()
            .iter()
            .all(|s| *s == SlotState::Releasing)
    );
}

#[test]
fn normalize_kernel_matches_the_cpu_reference_bit_for_bit() {
    let Some(device) = device_or_skip() else {
        return;
    };
    if !gpu_stage::nvrtc_available() {
        println!("skipped: NVRTC not found");
        return;
    }
    for dtype in [
        DeviceDtype::F64,
        DeviceDtype::F32,
        DeviceDtype::F16,
        DeviceDtype::Bf16,
    ] {
        let stage = Stage::new(
            &device,
            StageConfig {
                max_batch: 4,
                batches_ahead: 1,
                outputs: vec![OutputSpec::image(
                    "img",
                    7,
                    5,
                    Normalize::imagenet(dtype),
                    true,
                )],
            },
        )
        .unwrap();
        let src = pattern(3 * 7 * 5 * 3, 42);
        let flips = [1u8, 0, 1];
        let mut slot = stage.acquire().unwrap();
        slot.host_mut(0).unwrap()[..src.len()].copy_from_slice(&src);
        slot.flips_mut(0).unwrap()[..3].copy_from_slice(&flips);
        let batch = slot.to_device(3).unwrap();
        batch.synchronize().unwrap();
        let t = batch.tensor(0).unwrap();
        assert_eq!(t.shape, [3, 3, 7, 5]);
        assert_eq!(t.dtype, dtype);
        let expected = normalize_reference(
            stage.normalize_table(0).unwrap(),
            stage.image_shape(0, 3).unwrap(),
            &src,
            Some(&flips),
        )
        .unwrap();
        assert_eq!(batch.copy_to_host(0).unwrap(), expected, "{dtype}");
    }
}

#[test]
fn a_batch_serves_one_consumer_stream_and_its_slot_returns_after_release() {
    let Some(device) = device_or_skip() else {
        return;
    };
    let stage = Stage::new(
        &device,
        StageConfig {
            max_batch: 2,
            batches_ahead: 0,
            outputs: vec![OutputSpec::raw("label", DeviceDtype::I64, &[])],
        },
    )
    .unwrap();
    assert_eq!(stage.num_slots(), 2);
    let (first, second) = (device.new_stream().unwrap(), device.new_stream().unwrap());
    let mut slot = stage.acquire().unwrap();
    assert_eq!(slot.slot(), 0);
    slot.host_mut(0)
        .unwrap()
        .copy_from_slice(&[7, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
    let mut batch = slot.to_device(2).unwrap();
    assert!(matches!(
        batch.view::<f32>(0),
        Err(Error::DtypeMismatch { .. })
    ));
    batch.wait_on(&first).unwrap();
    batch.wait_on(&first).unwrap();
    assert!(matches!(
        batch.wait_on(&second),
        Err(Error::SecondConsumerStream { slot: 0 })
    ));
    let view = batch.view::<i64>(0).unwrap();
    assert_eq!(first.clone_dtoh(&view).unwrap(), [7, 9]);
    assert_eq!(stage.slot_states(), [SlotState::Staged, SlotState::Free]);
    batch.release().unwrap();
    assert_eq!(stage.slot_states(), [SlotState::Releasing, SlotState::Free]);
    // Slot 1 is fresh; then slot 0 comes back (after its release event).
    let one = stage.acquire().unwrap();
    let zero = stage.acquire().unwrap();
    assert_eq!((one.slot(), zero.slot()), (1, 0));
    drop(one);
    assert_eq!(stage.slot_states(), [SlotState::Filling, SlotState::Free]);
}
