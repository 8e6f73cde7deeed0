//! The colour operations, the `RandomResizedCrop` transform and `View` as pipeline
//! operations: FFCV's formulas per pixel with the factor the sample drew, the same bytes
//! from the JIT and the interpreter, draws that follow (seed, epoch, sample) and not the
//! batch, and errors (not panics) for states and parameters they cannot take.

use ffcv::image::{AreaResizer, CropBox, SyntheticImageSpec, synthetic_image};
use ffcv::jit::rng::sample_seed;
use ffcv::jit::{BatchBuffers, ElemType, Executor, Operation, Options, Pipeline, State};
use ffcv::transforms::colour::{
    self, Colour, ColourJitter, colour_draw, random_brightness, random_contrast, random_saturation,
};
use ffcv::transforms::resized_crop::random_resized_crop;
use ffcv::transforms::view::View;

const SIDE: usize = 48;

/// `n` synthetic photographs-like images (gradients, a rectangle, noise), `SIDE` square.
fn images(n: usize) -> Vec<u8> {
    let spec = SyntheticImageSpec {
        min_side: SIDE as u32,
        max_side: SIDE as u32,
    };
    (0..n as u64)
        .flat_map(|i| synthetic_image(7, i, spec).unwrap().pixels().to_vec())
        .collect()
}

/// Runs `op` alone over `input` (samples `ids` of `state`), compiled or interpreted.
fn run(
    op: impl Operation + 'static,
    state: State,
    input: &[u8],
    ids: &[u64],
    seed: u64,
    epoch: u64,
    compile: bool,
) -> Vec<u8> {
    let pipeline = Pipeline::new(state).then(op);
    let exec = Executor::new(
        &pipeline,
        &Options {
            num_workers: 2,
            compile,
        },
    )
    .unwrap();
    let mut out = vec![0u8; ids.len() * exec.plan().output_bytes()];
    exec.run(BatchBuffers {
        sample_ids: ids,
        input,
        output: &mut out,
        seed,
        epoch,
    })
    .unwrap();
    out
}

fn rgb(side: usize) -> State {
    State::cpu([side, side, 3], ElemType::U8)
}

/// FFCV's formula, written out per pixel: the reference the kernels are held to.
fn reference(colour: Colour, image: &[u8], factor: f64) -> Vec<u8> {
    let grey = |p: &[u8]| {
        (0.2989 * f64::from(p[0]) + 0.587 * f64::from(p[1]) + 0.114 * f64::from(p[2])) as u8
    };
    let blend = |x: u8, other: f64| {
        (factor * f64::from(x) + (1.0 - factor) * other).clamp(0.0, 255.0) as u8
    };
    let mean = image.chunks(3).map(|p| f64::from(grey(p))).sum::<f64>() / (image.len() / 3) as f64;
    image
        .chunks(3)
        .flat_map(|p| {
            let other = match colour {
                Colour::Brightness => 0.0,
                Colour::Contrast => mean,
                Colour::Saturation => f64::from(grey(p)),
            };
            p.iter().map(move |&x| blend(x, other)).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn colour_operations_apply_ffcvs_formula_with_each_samples_draw() {
    let n = 12;
    let input = images(n);
    let ids: Vec<u64> = (100..100 + n as u64).collect();
    for make in [random_brightness, random_contrast, random_saturation] {
        let op: ColourJitter = make(0.9, 0.5).unwrap();
        let out = run(op, rgb(SIDE), &input, &ids, 3, 1, true);
        assert_eq!(
            out,
            run(op, rgb(SIDE), &input, &ids, 3, 1, false),
            "{:?}",
            op.colour
        );
        let row = SIDE * SIDE * 3;
        let mut applied = 0;
        for (k, &id) in ids.iter().enumerate() {
            let (x, y) = (&input[k * row..(k + 1) * row], &out[k * row..(k + 1) * row]);
            // The pipeline's only operation is at index 0.
            match colour_draw(op.p, op.magnitude, sample_seed(3, 1, id, 0)) {
                None => assert_eq!(x, y),
                Some(f) => {
                    applied += 1;
                    assert!((0.1..=1.9).contains(&f));
                    assert_eq!(
                        y,
                        reference(op.colour, x, f).as_slice(),
                        "{:?} f={f}",
                        op.colour
                    );
                }
            }
        }
        assert!(
            applied > 0 && applied < n,
            "p = 0.5 over {n} samples: {applied}"
        );
    }
}

#[test]
fn colour_blends_clip_at_both_ends() {
    let image = [250u8, 128, 3, 10, 240, 128];
    let mut out = [0u8; 6];
    colour::blend(Colour::Brightness, &image, &mut out, (1, 2, 3), 1.9).unwrap();
    assert_eq!(out, [255, 243, 5, 19, 255, 243]);
    for c in [Colour::Contrast, Colour::Saturation] {
        for f in [0.0, 1.0, 1.9] {
            colour::blend(c, &image, &mut out, (1, 2, 3), f).unwrap();
            assert_eq!(
                out.as_slice(),
                reference(c, &image, f).as_slice(),
                "{c:?} {f}"
            );
        }
    }
    // Factor 0 of saturation is the grey image, every channel equal.
    colour::blend(Colour::Saturation, &image, &mut out, (1, 2, 3), 0.0).unwrap();
    assert!(out[0] == out[1] && out[1] == out[2] && out[3] == out[4]);
}

#[test]
fn colour_draws_follow_seed_epoch_and_sample_not_the_batch() {
    let input = images(6);
    let ids = [5u64, 9, 1, 4, 8, 2];
    let op = random_contrast(0.5, 1.0).unwrap();
    let a = run(op, rgb(SIDE), &input, &ids, 11, 0, true);
    let row = SIDE * SIDE * 3;
    // The same samples in reverse order get the same outputs.
    let rev_in: Vec<u8> = input.chunks(row).rev().flatten().copied().collect();
    let rev_ids: Vec<u64> = ids.iter().rev().copied().collect();
    let b = run(op, rgb(SIDE), &rev_in, &rev_ids, 11, 0, true);
    let b_back: Vec<u8> = b.chunks(row).rev().flatten().copied().collect();
    assert_eq!(a, b_back);
    assert_ne!(
        a,
        run(op, rgb(SIDE), &input, &ids, 11, 1, true),
        "another epoch"
    );
    // p = 0 leaves every image alone.
    let none = random_saturation(0.5, 0.0).unwrap();
    assert_eq!(run(none, rgb(SIDE), &input, &ids, 11, 0, true), input);
}

#[test]
fn colour_operations_refuse_bad_parameters_and_states() {
    assert!(random_brightness(-0.5, 0.5).is_err());
    assert!(random_brightness(f64::NAN, 0.5).is_err());
    assert!(random_contrast(0.5, 1.5).is_err());
    let e = random_saturation(0.5, -0.1).unwrap_err();
    assert_eq!(e.to_string(), "RandomSaturation: p -0.1 is not in [0, 1]");
    let op = random_saturation(0.5, 0.5).unwrap();
    assert!(op.lower(&State::cpu([8, 8, 1], ElemType::U8)).is_err());
    assert!(op.lower(&State::cpu([8, 8, 3], ElemType::F32)).is_err());
    assert!(
        random_brightness(0.5, 0.5)
            .unwrap()
            .lower(&State::cpu([8, 8, 1], ElemType::U8))
            .is_ok()
    );
    let mut out = [0u8; 3];
    assert!(colour::blend(Colour::Brightness, &[1, 2], &mut out, (1, 1, 3), 1.0).is_err());
}

/// Resizes `crop` of one `SIDE`-square image to `size` as the crop decoders do.
fn resized(image: &[u8], crop: CropBox, size: u32) -> Vec<u8> {
    let mut out = vec![0u8; (size * size * 3) as usize];
    AreaResizer::new()
        .resize_crop_into(image, SIDE as u32, SIDE as u32, crop, &mut out, size, size)
        .unwrap();
    out
}

#[test]
fn random_resized_crop_of_the_whole_image_is_its_resize() {
    let input = images(4);
    let ids = [0u64, 1, 2, 3];
    let op = random_resized_crop(20, (1.0, 1.0), (1.0, 1.0)).unwrap();
    let out = run(op, rgb(SIDE), &input, &ids, 0, 0, true);
    assert_eq!(out, run(op, rgb(SIDE), &input, &ids, 0, 0, false));
    let whole = CropBox {
        i: 0,
        j: 0,
        h: SIDE as u32,
        w: SIDE as u32,
    };
    for (k, x) in input.chunks(SIDE * SIDE * 3).enumerate() {
        assert_eq!(
            &out[k * 1200..(k + 1) * 1200],
            resized(x, whole, 20).as_slice()
        );
    }
}

#[test]
fn random_resized_crop_boxes_are_the_decoders_rule_from_the_samples_generator() {
    let input = images(8);
    let ids: Vec<u64> = (40..48).collect();
    let op = random_resized_crop(16, (0.1, 0.9), (0.5, 2.0)).unwrap();
    let out = run(op, rgb(SIDE), &input, &ids, 9, 2, true);
    let rule = ffcv::image::RandomResizedCrop {
        scale: (0.1, 0.9),
        ratio: (0.5, 2.0),
    };
    let mut boxes = std::collections::HashSet::new();
    for (k, x) in input.chunks(SIDE * SIDE * 3).enumerate() {
        let mut rng = ffcv::jit::rng::sample_rng(sample_seed(9, 2, ids[k], 0));
        let crop = ffcv::image::random_resized_crop_box(SIDE as u32, SIDE as u32, &rule, &mut rng);
        boxes.insert(crop);
        assert_eq!(
            &out[k * 768..(k + 1) * 768],
            resized(x, crop, 16).as_slice(),
            "{crop:?}"
        );
    }
    assert!(boxes.len() > 4, "the boxes vary: {boxes:?}");
}

#[test]
fn random_resized_crop_refuses_bad_parameters_and_states() {
    assert!(random_resized_crop(0, (0.08, 1.0), (0.75, 1.33)).is_err());
    assert!(random_resized_crop(8, (0.0, 1.0), (0.75, 1.33)).is_err());
    assert!(random_resized_crop(8, (0.5, 0.2), (0.75, 1.33)).is_err());
    let op = random_resized_crop(8, (0.08, 1.0), (0.75, 1.33)).unwrap();
    assert!(op.lower(&State::cpu([8, 8, 1], ElemType::U8)).is_err());
    assert!(op.lower(&State::cpu([8, 8, 3], ElemType::F32)).is_err());
}

#[test]
fn view_rescales_the_last_axis_and_keeps_the_bytes() {
    let values: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
    let input: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let state = State::cpu([3, 4], ElemType::F32);
    let ids = [0u64, 1];
    for compile in [true, false] {
        let out = run(
            View(ElemType::U8),
            state.clone(),
            &input,
            &ids,
            0,
            0,
            compile,
        );
        assert_eq!(out, input);
    }
    let lowered = View(ElemType::U8).lower(&state).unwrap();
    assert_eq!(
        (lowered.output().shape.as_slice(), lowered.output().dtype),
        (&[3, 16][..], ElemType::U8)
    );
    assert!(
        View(ElemType::F64)
            .lower(&State::cpu([3, 3], ElemType::F32))
            .is_err()
    );
    assert!(
        View(ElemType::U8)
            .lower(&State::cpu(Vec::<usize>::new(), ElemType::F32))
            .is_err()
    );
}
