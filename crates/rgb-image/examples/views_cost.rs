//! Measures what the multi-view rule of `ViewsKernel` (`views.rs`) weighs, on the test
//! photographs: the per-pixel cost of entropy decoding (every row down to a crop's bottom)
//! against reconstructing a crop's pixels, and two RandomResizedCrop-224 views decoded
//! once, per view and by the rule against one view. Run with
//! `cargo run --release -p rgb-image --example views_cost`.

use std::time::Instant;

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use rgb_image::{
    CropBox, ImageOut, ImageView, JpegDecoder, JpegFrame, RandomResizedCrop, RgbDecoderKernel,
    RgbDecoderKind, StoredImage, ViewsDecode, ViewsKernel, ViewsPolicy,
};

const ROUNDS: usize = 7;

/// The median of `ROUNDS` timings of `f`, in nanoseconds per call of `reps` calls.
fn median_ns(reps: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..reps {
                f();
            }
            start.elapsed().as_nanos() as f64 / reps as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[ROUNDS / 2]
}

/// Samples of one timing: 64 seeds, the same for every pass.
const SEEDS: u64 = 64;

/// Nanoseconds per sample of one RandomResizedCrop-224 view, over `SEEDS` seeds.
fn time_one(kernel: &mut RgbDecoderKernel, rrc: &RgbDecoderKind, image: StoredImage<'_>) -> f64 {
    let mut out = vec![0u8; 224 * 224 * 3];
    let start = Instant::now();
    for seed in 0..SEEDS {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let o = ImageOut {
            pixels: &mut out,
            height: 224,
            width: 224,
        };
        kernel
            .decode_sample(rrc, image, &mut rng, o)
            .expect("decodes");
    }
    start.elapsed().as_nanos() as f64 / SEEDS as f64
}

/// Nanoseconds per sample of two views under `policy`, over `SEEDS` seeds, and how many
/// of the seeds decoded once.
fn time_two(
    kernel: &mut ViewsKernel,
    policy: ViewsPolicy,
    rrc: &RgbDecoderKind,
    image: StoredImage<'_>,
) -> (f64, u64) {
    let mut once = 0;
    kernel.set_policy(policy);
    let (mut a, mut b) = (vec![0u8; 224 * 224 * 3], vec![0u8; 224 * 224 * 3]);
    let start = Instant::now();
    for seed in 0..SEEDS {
        let mut r0 = Pcg64Mcg::seed_from_u64(seed);
        let mut r1 = Pcg64Mcg::seed_from_u64(seed ^ 0x55);
        let mut v = [
            ImageView {
                kind: *rrc,
                rng: &mut r0 as &mut dyn RngCore,
                out: ImageOut {
                    pixels: &mut a,
                    height: 224,
                    width: 224,
                },
            },
            ImageView {
                kind: *rrc,
                rng: &mut r1,
                out: ImageOut {
                    pixels: &mut b,
                    height: 224,
                    width: 224,
                },
            },
        ];
        let how = kernel.decode_views(image, &mut v).expect("decodes");
        once += u64::from(how == ViewsDecode::Once);
    }
    (start.elapsed().as_nanos() as f64 / SEEDS as f64, once)
}

fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/photos");
    let rrc = RgbDecoderKind::RandomResizedCrop(RandomResizedCrop::default());
    let (mut one_sum, mut once_sum, mut each_sum, mut auto_sum) = (0.0, 0.0, 0.0, 0.0);
    for name in ["astronaut", "chelsea", "coffee", "rocket"] {
        let jpeg = std::fs::read(format!("{dir}/{name}.jpg")).expect("a test photograph");
        let frame = JpegFrame::find(&jpeg).expect("a frame");
        let (h, w) = (u32::from(frame.height), u32::from(frame.width));
        let mut full = vec![0u8; (h * w * 3) as usize];
        let mut dec = JpegDecoder::new();
        let mut region = |b: CropBox| {
            dec.decode_region_into(&jpeg, b, &mut full)
                .expect("decodes");
        };
        let top = median_ns(20, || {
            region(CropBox {
                i: 0,
                j: 0,
                h: 8,
                w: 8,
            })
        });
        let bottom = median_ns(20, || {
            region(CropBox {
                i: h - 8,
                j: w - 8,
                h: 8,
                w: 8,
            })
        });
        let whole = median_ns(20, || region(CropBox { i: 0, j: 0, h, w }));
        let px = f64::from(h * w);
        let entropy = (bottom - top) / px;
        let pixel = (whole - bottom) / px;
        println!(
            "{name} {h}x{w}: entropy {entropy:.2} ns/px, reconstruction {pixel:.2} ns/px \
             (ratio {:.2})",
            pixel / entropy
        );

        let image = StoredImage {
            mode: 0,
            height: frame.height,
            width: frame.width,
            data: &jpeg,
        };
        // One view, then two views decoded once, per view and by the rule, the four
        // alternating round by round so that a change of load hits all of them.
        let mut single = RgbDecoderKernel::new();
        let mut views = ViewsKernel::new();
        let mut times: [Vec<f64>; 4] = Default::default();
        let mut rule_once = 0;
        for _ in 0..ROUNDS {
            times[0].push(time_one(&mut single, &rrc, image));
            for (k, policy) in [ViewsPolicy::Once, ViewsPolicy::PerView, ViewsPolicy::Auto]
                .into_iter()
                .enumerate()
            {
                let (ns, once) = time_two(&mut views, policy, &rrc, image);
                times[k + 1].push(ns);
                if policy == ViewsPolicy::Auto {
                    rule_once = once;
                }
            }
        }
        let [one, once, each, auto] = times.map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[ROUNDS / 2]
        });
        println!(
            "  one view {:.0} us; two views: once {:.2}x, per view {:.2}x, rule {:.2}x \
             (once for {rule_once} of {SEEDS})",
            one / 1e3,
            once / one,
            each / one,
            auto / one
        );
        one_sum += one;
        once_sum += once;
        each_sum += each;
        auto_sum += auto;
    }
    println!(
        "all four: two views / one view: once {:.2}x, per view {:.2}x, rule {:.2}x",
        once_sum / one_sum,
        each_sum / one_sum,
        auto_sum / one_sum
    );
}
