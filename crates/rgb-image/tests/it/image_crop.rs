//! FFCV's crop rules: center crop sizes and RandomResizedCrop boxes.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use rgb_image::{CropBox, RandomResizedCrop, center_crop_box, random_resized_crop_box};

#[test]
fn center_crop_follows_int_ratio_times_min_side() {
    // c = int(0.875 * min(h, w)); i = (h - c) // 2; j = (w - c) // 2.
    assert_eq!(
        center_crop_box(256, 256, 224.0 / 256.0),
        CropBox {
            i: 16,
            j: 16,
            h: 224,
            w: 224
        }
    );
    assert_eq!(
        center_crop_box(375, 500, 224.0 / 256.0),
        CropBox {
            i: 23,
            j: 86,
            h: 328,
            w: 328
        }
    );
    assert_eq!(
        center_crop_box(61, 89, 0.875),
        CropBox {
            i: 4,
            j: 18,
            h: 53,
            w: 53
        }
    );
    assert_eq!(
        center_crop_box(10, 7, 1.0),
        CropBox {
            i: 1,
            j: 0,
            h: 7,
            w: 7
        }
    );
    // A ratio that would leave the image is clamped to the short side.
    assert_eq!(
        center_crop_box(10, 7, 1.5),
        CropBox {
            i: 1,
            j: 0,
            h: 7,
            w: 7
        }
    );
    // A tiny image can give an empty crop, which the resizer rejects.
    assert_eq!(center_crop_box(1, 1, 0.875).h, 0);
}

/// FFCV's fallback box for the default ratio range, written out.
fn fallback_box(h: u32, w: u32) -> CropBox {
    let in_ratio = f64::from(w) / f64::from(h);
    let (bh, bw) = if in_ratio < 0.75 {
        ((f64::from(w) / 0.75).round_ties_even() as u32, w)
    } else if in_ratio > 4.0 / 3.0 {
        (h, (f64::from(h) * 4.0 / 3.0).round_ties_even() as u32)
    } else {
        (h, w)
    };
    CropBox {
        i: (h - bh) / 2,
        j: (w - bw) / 2,
        h: bh,
        w: bw,
    }
}

#[test]
fn random_boxes_lie_inside_and_respect_scale_and_ratio() {
    let p = RandomResizedCrop::default();
    assert_eq!((p.scale, p.ratio), ((0.08, 1.0), (0.75, 4.0 / 3.0)));
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    let mut fallbacks = 0;
    for n in 0..20_000u32 {
        let h = 1 + rng.next_u32() % 400;
        let w = 1 + rng.next_u32() % 400;
        let b = random_resized_crop_box(h, w, &p, &mut rng);
        assert!(b.fits(h, w), "{b:?} outside {h}x{w} (draw {n})");
        let area = f64::from(b.h) * f64::from(b.w) / (f64::from(h) * f64::from(w));
        if b == fallback_box(h, w) {
            fallbacks += 1;
            continue;
        }
        // A box from a successful try: its sides are round(sqrt(A * r)) and
        // round(sqrt(A / r)) for A in scale * area and r in ratio, so the
        // rounded box is within half a pixel per side of those bounds.
        let (bh, bw) = (f64::from(b.h), f64::from(b.w));
        let lo_area = 0.08 * f64::from(h) * f64::from(w);
        assert!(
            (bh + 0.5) * (bw + 0.5) >= lo_area,
            "{b:?} too small in {h}x{w}"
        );
        assert!(area <= 1.0 + 1e-9);
        assert!(
            (bw + 0.5) / (bh - 0.5).max(0.5) >= 0.75 - 1e-9,
            "{b:?} ratio"
        );
        assert!(
            (bw - 0.5).max(0.5) / (bh + 0.5) <= 4.0 / 3.0 + 1e-9,
            "{b:?} ratio"
        );
    }
    // Very thin images take the fallback often; most draws succeed.
    assert!(fallbacks > 0 && fallbacks < 10_000, "{fallbacks}");
}

#[test]
fn fallback_takes_the_center_clipped_to_the_ratio_bounds() {
    // An area range above the image makes every try fail.
    let p = RandomResizedCrop {
        scale: (1.5, 2.0),
        ratio: (0.75, 4.0 / 3.0),
    };
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    // Tall: w / 0.75 = 133.33 -> 133 rows.
    assert_eq!(
        random_resized_crop_box(400, 100, &p, &mut rng),
        CropBox {
            i: 133,
            j: 0,
            h: 133,
            w: 100
        }
    );
    // Wide: h * 4/3 = 120 columns.
    assert_eq!(
        random_resized_crop_box(90, 300, &p, &mut rng),
        CropBox {
            i: 0,
            j: 90,
            h: 90,
            w: 120
        }
    );
    // Ratio already inside the bounds: the whole image.
    assert_eq!(
        random_resized_crop_box(50, 60, &p, &mut rng),
        CropBox {
            i: 0,
            j: 0,
            h: 50,
            w: 60
        }
    );
    // Round half to even as Python's round(): 150 / 0.75 = 200 exactly; 3 * 4/3 = 4.
    assert_eq!(
        random_resized_crop_box(3, 9, &p, &mut rng),
        CropBox {
            i: 0,
            j: 2,
            h: 3,
            w: 4
        }
    );
}

#[test]
fn same_generator_state_gives_the_same_boxes() {
    let p = RandomResizedCrop::default();
    let boxes = |seed| {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        (0..100)
            .map(|_| random_resized_crop_box(200, 300, &p, &mut rng))
            .collect::<Vec<_>>()
    };
    assert_eq!(boxes(5), boxes(5));
    assert_ne!(boxes(5), boxes(6));
    // A full-scale, fixed-ratio crop of a square is the whole image.
    let whole = RandomResizedCrop {
        scale: (1.0, 1.0),
        ratio: (1.0, 1.0),
    };
    let mut rng = Pcg64Mcg::seed_from_u64(0);
    assert_eq!(
        random_resized_crop_box(64, 64, &whole, &mut rng),
        CropBox {
            i: 0,
            j: 0,
            h: 64,
            w: 64
        }
    );
}

#[test]
fn dct_scaled_crop_picks_the_largest_reduction_that_keeps_the_output() {
    use rgb_image::dct_scaled_crop;
    let crop = CropBox {
        i: 10,
        j: 21,
        h: 300,
        w: 301,
    };
    // 300 / 8 = 37.5 < 64, 300 / 4 = 75: quarter scale. Edges rounded to the nearest
    // reduced pixel, halves up: rows (10 + 2) / 4 = 3 .. (310 + 2) / 4 = 78, columns
    // (21 + 2) / 4 = 5 .. (322 + 2) / 4 = 81.
    let quarter = CropBox {
        i: 3,
        j: 5,
        h: 75,
        w: 76,
    };
    assert_eq!(dct_scaled_crop(400, 600, crop, 64, 64), Some((2, quarter)));
    // Half scale: rows 11 / 2 = 5 .. 311 / 2 = 155, columns 22 / 2 = 11 .. 323 / 2 = 161.
    let half = CropBox {
        i: 5,
        j: 11,
        h: 150,
        w: 150,
    };
    assert_eq!(dct_scaled_crop(400, 600, crop, 150, 100), Some((1, half)));
    // One more row than the half-scale crop has: no reduction.
    assert_eq!(dct_scaled_crop(400, 600, crop, 151, 100), None);
    // The whole image at 1/8: 403 / 8 = 50.4 rounds to 50 of the ceil(403 / 8) = 51
    // reduced rows (the last, partial block row is left out).
    let whole = CropBox {
        i: 0,
        j: 0,
        h: 403,
        w: 600,
    };
    let eighth = CropBox {
        i: 0,
        j: 0,
        h: 50,
        w: 75,
    };
    assert_eq!(dct_scaled_crop(403, 600, whole, 50, 75), Some((3, eighth)));
    // A crop outside the image or an empty output: no reduction.
    assert_eq!(dct_scaled_crop(300, 600, crop, 10, 10), None);
    assert_eq!(dct_scaled_crop(400, 600, crop, 0, 10), None);
}
