//! libjpeg's fast integer IDCT (`jidctfst`, what libjpeg-turbo runs with `TJFLAG_FASTDCT`),
//! portable: its fixed-point constants and AAN scale factors, the 8-point butterfly over
//! eight lanes, the two passes of one block and the range limit after them. The baseline
//! decoder (`turbo.rs`) runs it, or the AVX2 form in `simd.rs` that uses the same
//! constants.

/// AAN scale factors `round(2^14 * s(row) * s(col))`, `s(0) = 1`,
/// `s(k) = sqrt(2) cos(k pi / 16)` (libjpeg's `aanscales`).
pub(super) const AAN_SCALES: [i64; 64] = [
    16384, 22725, 21407, 19266, 16384, 12873, 8867, 4520, 22725, 31521, 29692, 26722, 22725, 17855,
    12299, 6270, 21407, 29692, 27969, 25172, 21407, 16819, 11585, 5906, 19266, 26722, 25172, 22654,
    19266, 15137, 10426, 5315, 16384, 22725, 21407, 19266, 16384, 12873, 8867, 4520, 12873, 17855,
    16819, 15137, 12873, 10114, 6967, 3552, 8867, 12299, 11585, 10426, 8867, 6967, 4799, 2446,
    4520, 6270, 5906, 5315, 4520, 3552, 2446, 1247,
];

/// jidctfst's constants `FIX(x) = round(x * 2^8)`, named after `x`.
pub(super) const FIX_1_082392200: i32 = 277;
pub(super) const FIX_1_414213562: i32 = 362;
pub(super) const FIX_1_847759065: i32 = 473;
pub(super) const FIX_2_613125930: i32 = 669;

/// Eight lanes of 32-bit values: the IDCT works on all eight columns (pass
/// 1) or rows (pass 2) at once, which the compiler turns into SIMD.
type Lanes = [i32; 8];

fn add(a: Lanes, b: Lanes) -> Lanes {
    std::array::from_fn(|i| a[i].wrapping_add(b[i]))
}

fn sub(a: Lanes, b: Lanes) -> Lanes {
    std::array::from_fn(|i| a[i].wrapping_sub(b[i]))
}

/// `MULTIPLY(v, c)` of jidctfst: the product descaled by 8 bits, truncating
/// (arithmetic shift, so negative products round toward minus infinity).
fn mul(a: Lanes, c: i32) -> Lanes {
    std::array::from_fn(|i| a[i].wrapping_mul(c) >> 8)
}

/// libjpeg's post-IDCT range limit, `range_limit[(x >> 5) & 1023]`: the low
/// 10 bits of `x >> 5` read as a signed value, plus 128, clamped to a byte
/// (values beyond +-512 wrap, as through libjpeg's table).
pub(super) fn idct_limit(x: i32) -> u8 {
    let v = (((x >> 5) & 1023) ^ 512) - 512;
    (v + 128).clamp(0, 255) as u8
}

/// One 8-point jidctfst butterfly over eight lanes: `x[k]` holds frequency
/// `k`, the result's `[k]` spatial position `k`.
fn butterfly(x: [Lanes; 8]) -> [Lanes; 8] {
    // Even part.
    let tmp10 = add(x[0], x[4]);
    let tmp11 = sub(x[0], x[4]);
    let tmp13 = add(x[2], x[6]);
    let tmp12 = sub(mul(sub(x[2], x[6]), FIX_1_414213562), tmp13);
    let e0 = add(tmp10, tmp13);
    let e3 = sub(tmp10, tmp13);
    let e1 = add(tmp11, tmp12);
    let e2 = sub(tmp11, tmp12);
    // Odd part.
    let z13 = add(x[5], x[3]);
    let z10 = sub(x[5], x[3]);
    let z11 = add(x[1], x[7]);
    let z12 = sub(x[1], x[7]);
    let t7 = add(z11, z13);
    let t11 = mul(sub(z11, z13), FIX_1_414213562);
    let z5 = mul(add(z10, z12), FIX_1_847759065);
    let t10 = sub(mul(z12, FIX_1_082392200), z5);
    let t12 = add(mul(z10, -FIX_2_613125930), z5);
    let t6 = sub(t12, t7);
    let t5 = sub(t11, t6);
    let t4 = add(t10, t5);
    [
        add(e0, t7),
        add(e1, t6),
        add(e2, t5),
        sub(e3, t4),
        add(e3, t4),
        sub(e2, t5),
        sub(e1, t6),
        sub(e0, t7),
    ]
}

pub(super) fn idct_ifast_scalar(coef: &[i16; 64], q: &[i32; 64], out: &mut [u8], stride: usize) {
    let rows: [Lanes; 8] = std::array::from_fn(|r| {
        std::array::from_fn(|c| i32::from(coef[r * 8 + c]).wrapping_mul(q[r * 8 + c]))
    });
    // Pass 1: lane = column; the result is indexed by row.
    let ws = butterfly(rows);
    // Pass 2: lane = row; the inputs are the work array's columns.
    let cols: [Lanes; 8] = std::array::from_fn(|k| std::array::from_fn(|r| ws[r][k]));
    let res = butterfly(cols);
    for r in 0..8 {
        let o = &mut out[r * stride..r * stride + 8];
        for (k, px) in o.iter_mut().enumerate() {
            *px = idct_limit(res[k][r]);
        }
    }
}
