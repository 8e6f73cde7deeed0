//! Views on the command line (`--decoder NAME=SOURCE:SPEC`, FFCV-SSL's
//! `custom_field_mapper`): `ffcv bench` runs two views of the image field, with their own
//! transforms, and refuses a view of a missing field (exit 1) or a bad SPEC (exit 2).

use crate::support;

use support::{ffcv, fixture};

fn bench(extra: &[&str]) -> support::Run {
    let file = fixture("images_jpg");
    let mut args = vec![
        "bench",
        file.to_str().unwrap(),
        "--batch-size",
        "8",
        "--epochs",
        "1",
        "--json",
    ];
    args.extend_from_slice(extra);
    ffcv(&args)
}

#[test]
fn bench_runs_two_views_of_the_image_field() {
    let one = bench(&["--decoder", "image=random-resized-crop:32x32"]).json();
    let two = bench(&[
        "--decoder",
        "image=random-resized-crop:32x32",
        "--decoder",
        "image_0=image:random-resized-crop:32x32",
        "--transform",
        "image_0=flip,normalize:imagenet:f32,chw",
        "--decoder",
        "label_0=label:default",
    ])
    .json();
    assert_eq!(two["samples_per_epoch"], one["samples_per_epoch"]);
    // The source may be left out of the batch.
    let only_view = bench(&[
        "--decoder",
        "image=none",
        "--decoder",
        "image_0=image:center-crop:16x16",
    ]);
    assert_eq!(
        only_view.json()["samples_per_epoch"],
        one["samples_per_epoch"]
    );
}

#[test]
fn bad_views_are_refused() {
    let missing = bench(&[
        "--decoder",
        "image=none",
        "--decoder",
        "image_0=picture:random-resized-crop:32x32",
    ]);
    missing.assert_runtime_error("view \"image_0\" maps to \"picture\"");
    let clash = bench(&[
        "--decoder",
        "image=none",
        "--decoder",
        "label=image:random-resized-crop:32x32",
    ]);
    clash.assert_runtime_error("has the name of a field");
    let bad = bench(&["--decoder", "image_0=image:random-resized-crop:0x"]);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(!bad.stderr.contains("panicked"), "{}", bad.stderr);
}

#[test]
fn a_decoder_that_is_not_a_view_stays_a_usage_error() {
    // No `SOURCE:` part: an unknown decoder, not a view.
    let run = bench(&["--decoder", "label=no-such-decoder"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
}
