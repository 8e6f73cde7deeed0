//! Several views of one image (`ViewsKernel::decode_views`): decoding the JPEG once over
//! the union of the views' boxes gives exactly the bytes of decoding each view alone
//! (`RgbDecoderKernel::decode_sample` with the same generator), on the test photographs
//! and on generated images, under every policy; the per-sample rule; errors.

use crate::image_kernel::photos;

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use rgb_image::{
    CropBox, ImageOut, ImageView, RandomResizedCrop, RgbDecoderKernel, RgbDecoderKind, StoredImage,
    SyntheticImageSpec, ViewsDecode, ViewsKernel, ViewsPolicy, prefers_once, synthetic_image,
    synthetic_jpeg, union_box,
};

fn rrc() -> RgbDecoderKind {
    RgbDecoderKind::RandomResizedCrop(RandomResizedCrop::default())
}

/// Each view decoded alone by the single-view kernel, view `v` with generator
/// `seed * 16 + v`.
fn alone(
    image: StoredImage<'_>,
    kinds: &[(RgbDecoderKind, u32)],
    seed: u64,
) -> Vec<Result<Vec<u8>, String>> {
    let mut kernel = RgbDecoderKernel::new();
    kinds
        .iter()
        .enumerate()
        .map(|(v, (kind, side))| {
            let mut out = vec![0u8; (side * side * 3) as usize];
            let mut rng = Pcg64Mcg::seed_from_u64(seed * 16 + v as u64);
            let o = ImageOut {
                pixels: &mut out,
                height: *side,
                width: *side,
            };
            kernel
                .decode_sample(kind, image, &mut rng, o)
                .map(|()| out)
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// The views decoded together under `policy`, with the generators of [`alone`].
fn together(
    kernel: &mut ViewsKernel,
    policy: ViewsPolicy,
    image: StoredImage<'_>,
    kinds: &[(RgbDecoderKind, u32)],
    seed: u64,
) -> Result<(Vec<Vec<u8>>, ViewsDecode), String> {
    kernel.set_policy(policy);
    let mut outs: Vec<Vec<u8>> = kinds
        .iter()
        .map(|(_, side)| vec![0u8; (side * side * 3) as usize])
        .collect();
    let mut rngs: Vec<Pcg64Mcg> = (0..kinds.len())
        .map(|v| Pcg64Mcg::seed_from_u64(seed * 16 + v as u64))
        .collect();
    let mut views: Vec<ImageView<'_>> = kinds
        .iter()
        .zip(outs.iter_mut())
        .zip(rngs.iter_mut())
        .map(|(((kind, side), out), rng)| ImageView {
            kind: *kind,
            rng: rng as &mut dyn RngCore,
            out: ImageOut {
                pixels: out,
                height: *side,
                width: *side,
            },
        })
        .collect();
    let how = kernel
        .decode_views(image, &mut views)
        .map_err(|e| e.to_string())?;
    drop(views);
    Ok((outs, how))
}

/// Every policy gives each view's bytes of decoding it alone; `Once` decodes once where
/// it can (a baseline JPEG), `PerView` never does.
fn check_all_policies(
    image: StoredImage<'_>,
    kinds: &[(RgbDecoderKind, u32)],
    seed: u64,
    what: &str,
) -> [ViewsDecode; 3] {
    let expected: Vec<Vec<u8>> = alone(image, kinds, seed)
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{what}: {e}")))
        .collect();
    let mut kernel = ViewsKernel::new();
    let policies = [ViewsPolicy::Auto, ViewsPolicy::Once, ViewsPolicy::PerView];
    policies.map(|policy| {
        let (outs, how) = together(&mut kernel, policy, image, kinds, seed).unwrap();
        for (v, (got, want)) in outs.iter().zip(&expected).enumerate() {
            assert!(
                got == want,
                "{what}, seed {seed}, {policy:?}: view {v} differs"
            );
        }
        if policy == ViewsPolicy::PerView {
            assert_eq!(how, ViewsDecode::PerView);
        }
        how
    })
}

#[test]
fn decode_once_equals_each_view_alone_on_the_photographs() {
    let kinds = [
        (rrc(), 224),
        (rrc(), 224),
        (rrc(), 96),
        (
            RgbDecoderKind::CenterCrop {
                ratio: 224.0 / 256.0,
            },
            64,
        ),
    ];
    let mut once = 0;
    for (name, jpeg, h, w) in photos() {
        let image = StoredImage {
            mode: 0,
            height: h,
            width: w,
            data: &jpeg,
        };
        for seed in 0..12 {
            for n in [2, 4] {
                let how = check_all_policies(image, &kinds[..n], seed, &name);
                if name != "chelsea_progressive" {
                    assert_eq!(how[1], ViewsDecode::Once, "{name}: Once decodes once");
                    once += usize::from(how[0] == ViewsDecode::Once);
                }
            }
        }
    }
    // The rule picks one decode for most pairs of random crops of a photograph.
    assert!(once > 48, "Auto decoded once for {once} of 96 samples");
}

#[test]
fn decode_once_equals_each_view_alone_on_generated_images() {
    let spec = SyntheticImageSpec {
        min_side: 17,
        max_side: 300,
    };
    for index in 0..40u64 {
        let (jpeg, width, height) = synthetic_jpeg(3, index, spec, 90).unwrap();
        let image = StoredImage {
            mode: 0,
            height: height as u16,
            width: width as u16,
            data: &jpeg,
        };
        let kinds = [(rrc(), 32), (rrc(), 48), (rrc(), 32)];
        check_all_policies(image, &kinds, index, "synthetic jpeg");
        // Raw pixels: nothing to decode, every view is cut from the stored pixels.
        let raw = synthetic_image(3, index, spec).unwrap();
        let image = StoredImage {
            mode: 1,
            height: raw.height() as u16,
            width: raw.width() as u16,
            data: raw.pixels(),
        };
        let how = check_all_policies(image, &kinds, index, "synthetic raw");
        assert_eq!(how, [ViewsDecode::PerView; 3]);
    }
}

#[test]
fn bad_input_fails_like_a_single_view() {
    let (name, jpeg, h, w) = photos().swap_remove(0);
    let cut = &jpeg[..jpeg.len() / 3];
    let image = StoredImage {
        mode: 0,
        height: h,
        width: w,
        data: cut,
    };
    let kinds = [(rrc(), 64), (rrc(), 64)];
    let mut kernel = ViewsKernel::new();
    for policy in [ViewsPolicy::Once, ViewsPolicy::PerView] {
        // Some seed's crops reach below the cut: the decode then fails, never panics.
        let failed =
            (0..20).any(|seed| together(&mut kernel, policy, image, &kinds, seed).is_err());
        assert!(failed, "{name} cut to a third: {policy:?}");
    }
    let whole = StoredImage {
        data: &jpeg,
        ..image
    };
    let mut small = vec![0u8; 10];
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    let mut other = vec![0u8; 64 * 64 * 3];
    let mut rng2 = Pcg64Mcg::seed_from_u64(2);
    let mut views = [
        ImageView {
            kind: rrc(),
            rng: &mut rng,
            out: ImageOut {
                pixels: &mut other,
                height: 64,
                width: 64,
            },
        },
        ImageView {
            kind: rrc(),
            rng: &mut rng2,
            out: ImageOut {
                pixels: &mut small,
                height: 64,
                width: 64,
            },
        },
    ];
    kernel.set_policy(ViewsPolicy::Once);
    let err = kernel
        .decode_views(whole, &mut views)
        .unwrap_err()
        .to_string();
    assert!(err.contains("output buffer too small"), "{err}");
    // A size that disagrees with the JPEG is refused on the decode-once path with the
    // single-view decoder's error.
    let wrong = StoredImage {
        height: h - 1,
        ..whole
    };
    let kinds = [(rrc(), 32), (rrc(), 32)];
    let err = together(&mut kernel, ViewsPolicy::Once, wrong, &kinds, 0).unwrap_err();
    assert_eq!(Err(err), alone(wrong, &kinds, 0).swap_remove(0));
}

#[test]
fn the_rule_decodes_once_unless_the_boxes_are_far_apart() {
    let b = |i, j, h, w| CropBox { i, j, h, w };
    let overlapping = [b(10, 10, 200, 200), b(50, 40, 220, 180)];
    assert_eq!(union_box(&overlapping), Some(b(10, 10, 260, 210)));
    assert!(prefers_once(&overlapping, 400));
    // Two small crops in opposite corners of a large image: the union is the image.
    let apart = [b(0, 0, 40, 40), b(460, 460, 40, 40)];
    assert_eq!(union_box(&apart), Some(b(0, 0, 500, 500)));
    assert!(!prefers_once(&apart, 500));
    assert!(!prefers_once(&overlapping[..1], 400));
    assert_eq!(union_box(&[]), None);
}
