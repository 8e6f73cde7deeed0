//! A baseline JPEG encoder whose output is byte-identical to libjpeg-turbo's
//! for `cv2.imencode('.jpg', bgr, [cv2.IMWRITE_JPEG_QUALITY, q])`, the call
//! FFCV 1.0.2's `RGBImageField` makes.
//!
//! OpenCV hands libjpeg-turbo the image with `jpeg_set_defaults` and
//! `jpeg_set_quality(q, force_baseline = TRUE)`, so the file is:
//!
//! - SOI, a JFIF 1.01 APP0 (no density unit, 1:1), one DQT marker per table
//!   (luminance then chrominance, 8-bit entries in zig-zag order), SOF0, one
//!   DHT marker per table in the order the scan first uses them (DC0, AC0,
//!   DC1, AC1), SOS, the entropy-coded data, EOI;
//! - the standard (Annex K) quantisation tables scaled by libjpeg's quality
//!   rule and clamped to 1..=255, and the standard Huffman tables (no
//!   optimisation, no restart markers);
//! - YCbCr from libjpeg's 16-bit fixed-point conversion, 4:2:0 chroma from
//!   its `h2v2_downsample` (box average with a bias alternating 1, 2 along
//!   each row), edges replicated the way its preprocessing does (full-resolution
//!   columns to the chroma MCU width before averaging, rows at each
//!   component's own resolution), and libjpeg's "dummy" blocks (zero AC, DC
//!   of the previous block) for luminance blocks of the last MCU that lie
//!   wholly outside the image;
//! - the accurate integer forward DCT (`jfdctint.c`) and libjpeg-turbo's
//!   reciprocal quantisation with 16-bit elements (what its SIMD builds,
//!   including OpenCV's bundled one, use), whose rounding is not always that
//!   of a plain division;
//! - the last byte of entropy data padded with 1 bits, `0xFF` bytes stuffed.
//!
//! The module depends on `std` only, so it can move with the image code.

use std::fmt;

use super::segments::NATURAL_ORDER;

/// Why [`encode_like_libjpeg`] refused its input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LibjpegEncodeError {
    /// The quality is outside `1..=100`.
    Quality(u8),
    /// A side is zero or larger than libjpeg's `JPEG_MAX_DIMENSION`
    /// ([`MAX_SIDE`]), which OpenCV's encoder refuses as well.
    Size {
        /// Image width.
        width: u32,
        /// Image height.
        height: u32,
    },
    /// The pixel buffer does not hold `width * height * 3` bytes.
    PixelCount {
        /// Image width.
        width: u32,
        /// Image height.
        height: u32,
        /// Length of the buffer given.
        got: usize,
    },
}

impl fmt::Display for LibjpegEncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Quality(q) => write!(f, "jpeg_quality {q} is not in 1..=100"),
            Self::Size { width, height } => write!(
                f,
                "a {height}x{width} image cannot be a JPEG (sides must be 1..={MAX_SIDE})"
            ),
            Self::PixelCount { width, height, got } => write!(
                f,
                "pixel buffer of {got} bytes does not match a {height}x{width} RGB image"
            ),
        }
    }
}

impl std::error::Error for LibjpegEncodeError {}

/// The longest side libjpeg encodes (`JPEG_MAX_DIMENSION`): `cv2.imencode`
/// raises for anything larger, though the frame header could hold 65535.
pub const MAX_SIDE: u32 = 65500;

/// JPEG Annex K.1 luminance quantisation table, natural order.
const STD_LUMINANCE_QUANT: [u16; 64] = [
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113,
    92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
];

/// JPEG Annex K.1 chrominance quantisation table, natural order.
const STD_CHROMINANCE_QUANT: [u16; 64] = [
    17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99, 99, 99,
    47, 66, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
];

/// Annex K.3 code-length counts (lengths 1..=16) and symbols of the four
/// standard Huffman tables.
const DC_LUMA_BITS: [u8; 16] = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
const DC_CHROMA_BITS: [u8; 16] = [0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0];
const DC_VALUES: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
const AC_LUMA_BITS: [u8; 16] = [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7d];
const AC_LUMA_VALUES: [u8; 162] = [
    0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
    0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
    0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
    0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
    0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
    0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
    0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
    0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
    0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa,
];
const AC_CHROMA_BITS: [u8; 16] = [0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 0x77];
const AC_CHROMA_VALUES: [u8; 162] = [
    0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
    0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0,
    0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26,
    0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
    0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
    0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5,
    0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
    0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
    0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa,
];

/// Encodes packed RGB (`height * width * 3` bytes, row-major) as the JPEG
/// file libjpeg-turbo writes for OpenCV's `imencode('.jpg')` at `quality`
/// (see the module documentation for what that means byte by byte).
pub fn encode_like_libjpeg(
    rgb: &[u8],
    width: u32,
    height: u32,
    quality: u8,
) -> Result<Vec<u8>, LibjpegEncodeError> {
    if !(1..=100).contains(&quality) {
        return Err(LibjpegEncodeError::Quality(quality));
    }
    if width == 0 || height == 0 || width > MAX_SIDE || height > MAX_SIDE {
        return Err(LibjpegEncodeError::Size { width, height });
    }
    let (w, h) = (width as usize, height as usize);
    // Both sides are at most 65500, so this cannot overflow a 64-bit usize;
    // `checked_mul` keeps 32-bit targets honest.
    let needed = w.checked_mul(h).and_then(|n| n.checked_mul(3));
    if needed != Some(rgb.len()) {
        return Err(LibjpegEncodeError::PixelCount {
            width,
            height,
            got: rgb.len(),
        });
    }

    let tables = [
        scaled_quant_table(&STD_LUMINANCE_QUANT, quality),
        scaled_quant_table(&STD_CHROMINANCE_QUANT, quality),
    ];
    let divisors = [Divisors::new(&tables[0]), Divisors::new(&tables[1])];
    let planes = Planes::new(rgb, w, h);

    let mut out = Vec::with_capacity(w * h / 4 + 700);
    write_headers(&mut out, &tables, width as u16, height as u16);

    let huff = [
        HuffCodes::new(&DC_LUMA_BITS, &DC_VALUES),
        HuffCodes::new(&AC_LUMA_BITS, &AC_LUMA_VALUES),
        HuffCodes::new(&DC_CHROMA_BITS, &DC_VALUES),
        HuffCodes::new(&AC_CHROMA_BITS, &AC_CHROMA_VALUES),
    ];
    let mut bits = BitWriter::new(out);
    let mut last_dc = [0i32; 3];
    // Luminance blocks that hold image pixels; blocks past these inside the
    // last MCU row or column are libjpeg's dummy blocks.
    let (y_blocks_w, y_blocks_h) = (w.div_ceil(8), h.div_ceil(8));
    let mut ws = [0i32; 64];
    let mut mcu = [[0i32; 64]; 4];
    for my in 0..planes.mcu_rows {
        for mx in 0..planes.mcu_cols {
            for yi in 0..2 {
                let by = my * 2 + yi;
                for xi in 0..2 {
                    let bx = mx * 2 + xi;
                    let blkn = yi * 2 + xi;
                    if by < y_blocks_h && bx < y_blocks_w {
                        load_block(&planes.y, planes.y_stride, by * 8, bx * 8, &mut ws);
                        forward_dct_islow(&mut ws);
                        divisors[0].quantize(&ws, &mut mcu[blkn]);
                    } else {
                        // A dummy block: right-edge ones take the DC of the
                        // block to their left, a bottom dummy row takes that
                        // of the last block of the row above (`compress_data`
                        // in jccoefct.c); both are `blkn - 1`.
                        let dc = mcu[blkn - 1][0];
                        mcu[blkn] = [0; 64];
                        mcu[blkn][0] = dc;
                    }
                }
            }
            for block in &mcu {
                encode_block(&mut bits, block, &mut last_dc[0], &huff[0], &huff[1]);
            }
            for (ci, plane) in [&planes.cb, &planes.cr].into_iter().enumerate() {
                load_block(plane, planes.c_stride, my * 8, mx * 8, &mut ws);
                forward_dct_islow(&mut ws);
                let mut coefs = [0i32; 64];
                divisors[1].quantize(&ws, &mut coefs);
                encode_block(&mut bits, &coefs, &mut last_dc[ci + 1], &huff[2], &huff[3]);
            }
        }
    }
    let mut out = bits.finish();
    out.extend_from_slice(&[0xFF, 0xD9]);
    Ok(out)
}

/// `jpeg_set_quality(quality, force_baseline = TRUE)` for one basic table:
/// libjpeg's quality → percentage rule, then `(basic * scale + 50) / 100`
/// clamped to 1..=255.
fn scaled_quant_table(basic: &[u16; 64], quality: u8) -> [u16; 64] {
    let q = u32::from(quality);
    let scale = if q < 50 { 5000 / q } else { 200 - q * 2 };
    let mut t = [0u16; 64];
    for (dst, &b) in t.iter_mut().zip(basic) {
        let v = (u32::from(b) * scale + 50) / 100;
        *dst = v.clamp(1, 255) as u16;
    }
    t
}

/// The three samples planes at the resolution the DCT reads them, with
/// libjpeg's edge replication already applied.
struct Planes {
    /// Luminance, `y_stride` columns (the image padded to whole MCUs) by
    /// `mcu_rows * 16` rows.
    y: Vec<u8>,
    y_stride: usize,
    /// Chrominance after 2×2 downsampling, `c_stride` by `mcu_rows * 8`.
    cb: Vec<u8>,
    cr: Vec<u8>,
    c_stride: usize,
    mcu_cols: usize,
    mcu_rows: usize,
}

impl Planes {
    fn new(rgb: &[u8], w: usize, h: usize) -> Self {
        let mcu_cols = w.div_ceil(16);
        let mcu_rows = h.div_ceil(16);
        let y_stride = mcu_cols * 16;
        let c_stride = mcu_cols * 8;
        // Full-resolution rows the chroma averaging reads: the image height
        // rounded up to even, the extra row a copy of the last
        // (`expand_bottom_edge` on the conversion buffer).
        let full_rows = h + (h & 1);
        let mut y = vec![0u8; y_stride * mcu_rows * 16];
        let mut cb_full = vec![0u8; y_stride * full_rows];
        let mut cr_full = vec![0u8; y_stride * full_rows];
        for row in 0..h {
            let src = &rgb[row * w * 3..(row + 1) * w * 3];
            let o = row * y_stride;
            let yr = &mut y[o..o + y_stride];
            let cbr = &mut cb_full[o..o + y_stride];
            let crr = &mut cr_full[o..o + y_stride];
            for (x, px) in src.chunks_exact(3).enumerate() {
                let (r, g, b) = (i32::from(px[0]), i32::from(px[1]), i32::from(px[2]));
                let (yv, cbv, crv) = rgb_to_ycc(r, g, b);
                yr[x] = yv;
                cbr[x] = cbv;
                crr[x] = crv;
            }
            // `expand_right_edge`: the last column repeated to the MCU width.
            for plane_row in [yr, cbr, crr] {
                let last = plane_row[w - 1];
                plane_row[w..].fill(last);
            }
        }
        if full_rows > h {
            for plane in [&mut cb_full, &mut cr_full] {
                plane.copy_within((h - 1) * y_stride..h * y_stride, h * y_stride);
            }
        }
        // Luminance rows below the image repeat the last one (the padding
        // to a whole iMCU row in `pre_process_data`).
        for row in h..mcu_rows * 16 {
            y.copy_within((h - 1) * y_stride..h * y_stride, row * y_stride);
        }
        let cb = downsample_h2v2(&cb_full, y_stride, full_rows, c_stride, mcu_rows * 8);
        let cr = downsample_h2v2(&cr_full, y_stride, full_rows, c_stride, mcu_rows * 8);
        Planes {
            y,
            y_stride,
            cb,
            cr,
            c_stride,
            mcu_cols,
            mcu_rows,
        }
    }
}

/// libjpeg's RGB → YCbCr (`jccolor.c`): 16-bit fixed point, Y rounded half
/// up, Cb/Cr with a rounding term of one half minus one unit so 255 cannot
/// overflow.
#[inline]
fn rgb_to_ycc(r: i32, g: i32, b: i32) -> (u8, u8, u8) {
    const ONE_HALF: i32 = 1 << 15;
    const CBCR_OFFSET: i32 = 128 << 16;
    // FIX(x) = round(x * 65536) for the coefficients of jccolor.c.
    const Y_R: i32 = 19595; // 0.29900
    const Y_G: i32 = 38470; // 0.58700
    const Y_B: i32 = 7471; // 0.11400
    const CB_R: i32 = 11059; // 0.16874
    const CB_G: i32 = 21709; // 0.33126
    const HALF: i32 = 32768; // 0.50000
    const CR_G: i32 = 27439; // 0.41869
    const CR_B: i32 = 5329; // 0.08131
    let y = (Y_R * r + Y_G * g + Y_B * b + ONE_HALF) >> 16;
    let cb = (-CB_R * r - CB_G * g + HALF * b + CBCR_OFFSET + ONE_HALF - 1) >> 16;
    let cr = (HALF * r - CR_G * g - CR_B * b + CBCR_OFFSET + ONE_HALF - 1) >> 16;
    (y as u8, cb as u8, cr as u8)
}

/// `h2v2_downsample`: each output sample is the sum of a 2×2 input square
/// plus a bias of 1, 2, 1, 2, … along the row, divided by 4. `rows_in` is
/// even; output rows past `rows_in / 2` repeat the last computed row.
fn downsample_h2v2(
    full: &[u8],
    stride_in: usize,
    rows_in: usize,
    stride_out: usize,
    rows_out: usize,
) -> Vec<u8> {
    let mut out = vec![0u8; stride_out * rows_out];
    let computed = rows_in / 2;
    for orow in 0..computed {
        let r0 = &full[2 * orow * stride_in..(2 * orow + 1) * stride_in];
        let r1 = &full[(2 * orow + 1) * stride_in..(2 * orow + 2) * stride_in];
        let dst = &mut out[orow * stride_out..(orow + 1) * stride_out];
        for (col, d) in dst.iter_mut().enumerate() {
            let bias = 1 + (col as u32 & 1);
            let s = u32::from(r0[2 * col])
                + u32::from(r0[2 * col + 1])
                + u32::from(r1[2 * col])
                + u32::from(r1[2 * col + 1]);
            *d = ((s + bias) >> 2) as u8;
        }
    }
    for orow in computed..rows_out {
        out.copy_within(
            (computed - 1) * stride_out..computed * stride_out,
            orow * stride_out,
        );
    }
    out
}

/// Copies the 8×8 block at (`top`, `left`) of `plane`, centred on zero.
#[inline]
fn load_block(plane: &[u8], stride: usize, top: usize, left: usize, ws: &mut [i32; 64]) {
    for (r, dst) in ws.chunks_exact_mut(8).enumerate() {
        let o = (top + r) * stride + left;
        for (d, &s) in dst.iter_mut().zip(&plane[o..o + 8]) {
            *d = i32::from(s) - 128;
        }
    }
}

/// libjpeg's accurate integer forward DCT (`jpeg_fdct_islow`, the
/// Loeffler–Ligtenberg–Moschytz algorithm with 13-bit constants and 2 extra
/// bits in the first pass). Outputs are scaled up by 8, as libjpeg's are.
fn forward_dct_islow(data: &mut [i32; 64]) {
    const CONST_BITS: u32 = 13;
    const PASS1_BITS: u32 = 2;
    const F0_298: i32 = 2446;
    const F0_390: i32 = 3196;
    const F0_541: i32 = 4433;
    const F0_765: i32 = 6270;
    const F0_899: i32 = 7373;
    const F1_175: i32 = 9633;
    const F1_501: i32 = 12299;
    const F1_847: i32 = 15137;
    const F1_961: i32 = 16069;
    const F2_053: i32 = 16819;
    const F2_562: i32 = 20995;
    const F3_072: i32 = 25172;
    #[inline(always)]
    fn descale(x: i32, n: u32) -> i32 {
        (x + (1 << (n - 1))) >> n
    }
    // One 1-D pass over eight values `stride` apart; `shift_even` scales
    // outputs 0 and 4, `shift_odd` the rotated ones.
    #[inline(always)]
    fn pass(d: &mut [i32; 64], base: usize, stride: usize, first: bool) {
        let at = |k: usize| base + k * stride;
        let tmp0 = d[at(0)] + d[at(7)];
        let tmp7 = d[at(0)] - d[at(7)];
        let tmp1 = d[at(1)] + d[at(6)];
        let tmp6 = d[at(1)] - d[at(6)];
        let tmp2 = d[at(2)] + d[at(5)];
        let tmp5 = d[at(2)] - d[at(5)];
        let tmp3 = d[at(3)] + d[at(4)];
        let tmp4 = d[at(3)] - d[at(4)];

        let tmp10 = tmp0 + tmp3;
        let tmp13 = tmp0 - tmp3;
        let tmp11 = tmp1 + tmp2;
        let tmp12 = tmp1 - tmp2;

        let rot = if first {
            CONST_BITS - PASS1_BITS
        } else {
            CONST_BITS + PASS1_BITS
        };
        if first {
            d[at(0)] = (tmp10 + tmp11) << PASS1_BITS;
            d[at(4)] = (tmp10 - tmp11) << PASS1_BITS;
        } else {
            d[at(0)] = descale(tmp10 + tmp11, PASS1_BITS);
            d[at(4)] = descale(tmp10 - tmp11, PASS1_BITS);
        }
        let z1 = (tmp12 + tmp13) * F0_541;
        d[at(2)] = descale(z1 + tmp13 * F0_765, rot);
        d[at(6)] = descale(z1 - tmp12 * F1_847, rot);

        let z1 = tmp4 + tmp7;
        let z2 = tmp5 + tmp6;
        let z3 = tmp4 + tmp6;
        let z4 = tmp5 + tmp7;
        let z5 = (z3 + z4) * F1_175;
        let tmp4 = tmp4 * F0_298;
        let tmp5 = tmp5 * F2_053;
        let tmp6 = tmp6 * F3_072;
        let tmp7 = tmp7 * F1_501;
        let z1 = -z1 * F0_899;
        let z2 = -z2 * F2_562;
        let z3 = -z3 * F1_961 + z5;
        let z4 = -z4 * F0_390 + z5;
        d[at(7)] = descale(tmp4 + z1 + z3, rot);
        d[at(5)] = descale(tmp5 + z2 + z4, rot);
        d[at(3)] = descale(tmp6 + z2 + z3, rot);
        d[at(1)] = descale(tmp7 + z1 + z4, rot);
    }
    for row in 0..8 {
        pass(data, row * 8, 1, true);
    }
    for col in 0..8 {
        pass(data, col, 8, false);
    }
}

/// libjpeg-turbo's quantisation divisors for one table (`compute_reciprocal`
/// with 16-bit `DCTELEM`): `q = ((|x| + corr) * recip) >> shift`, sign
/// restored. The per-coefficient shift (18..=26) is folded into the
/// multiplier, `mul = recip << (32 - shift)`, so every coefficient shifts by
/// 32: the same integer result, and a loop of 32×32→64-bit multiplies with
/// one fixed shift, which the compiler vectorises (about a third faster
/// overall than the per-coefficient shift).
struct Divisors {
    mul: [u32; 64],
    corr: [u32; 64],
}

impl Divisors {
    fn new(table: &[u16; 64]) -> Self {
        let mut d = Divisors {
            mul: [0; 64],
            corr: [0; 64],
        };
        for (i, &q) in table.iter().enumerate() {
            // The islow DCT leaves its outputs scaled by 8.
            let divisor = u32::from(q) << 3;
            let b = 31 - divisor.leading_zeros();
            let mut r = 16 + b;
            let mut fq = (1u32 << r) / divisor;
            let fr = (1u32 << r) % divisor;
            let mut c = divisor / 2;
            if fr == 0 {
                fq >>= 1;
                r -= 1;
            } else if fr <= divisor / 2 {
                c += 1;
            } else {
                fq += 1;
            }
            // divisor is 8..=2040, so r is 18..=26 and fq < 2^16: the
            // multiplier fits in 30 bits, the product in 47.
            d.mul[i] = fq << (32 - r);
            d.corr[i] = c;
        }
        d
    }

    #[inline]
    fn quantize(&self, ws: &[i32; 64], out: &mut [i32; 64]) {
        for (i, (&x, o)) in ws.iter().zip(out.iter_mut()).enumerate() {
            let a = u64::from(x.unsigned_abs() + self.corr[i]);
            let q = ((a * u64::from(self.mul[i])) >> 32) as i32;
            *o = if x < 0 { -q } else { q };
        }
    }
}

/// Code and length of every symbol of one Huffman table (canonical codes
/// from the length counts, as `jpeg_make_c_derived_tbl`).
struct HuffCodes {
    code: [u16; 256],
    len: [u8; 256],
}

impl HuffCodes {
    fn new(bits: &[u8; 16], values: &[u8]) -> Self {
        let mut t = HuffCodes {
            code: [0; 256],
            len: [0; 256],
        };
        let mut code = 0u16;
        let mut k = 0;
        for (l, &count) in bits.iter().enumerate() {
            for _ in 0..count {
                let sym = usize::from(values[k]);
                t.code[sym] = code;
                t.len[sym] = l as u8 + 1;
                code += 1;
                k += 1;
            }
            code <<= 1;
        }
        t
    }
}

/// Entropy-coded output: bits packed most significant first, a 0x00
/// stuffed after every 0xFF.
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    nbits: u32,
}

impl BitWriter {
    fn new(out: Vec<u8>) -> Self {
        BitWriter {
            out,
            acc: 0,
            nbits: 0,
        }
    }

    /// Appends the low `n` (at most 16) bits of `bits`.
    #[inline]
    fn put(&mut self, bits: u32, n: u32) {
        self.acc = (self.acc << n) | u64::from(bits & ((1u32 << n) - 1));
        self.nbits += n;
        while self.nbits >= 8 {
            self.nbits -= 8;
            let byte = (self.acc >> self.nbits) as u8;
            self.out.push(byte);
            if byte == 0xFF {
                self.out.push(0);
            }
        }
    }

    /// Pads the last partial byte with 1 bits (`flush_bits`) and returns
    /// the buffer.
    fn finish(mut self) -> Vec<u8> {
        if self.nbits > 0 {
            let pad = 8 - self.nbits;
            self.put((1 << pad) - 1, pad);
        }
        self.out
    }
}

/// Number of bits of `v` (0 for 0): the JPEG magnitude category.
#[inline]
fn category(v: u32) -> u32 {
    32 - v.leading_zeros()
}

/// Huffman-codes one quantised block (natural order) against the
/// component's DC predictor (`encode_one_block`).
fn encode_block(
    bits: &mut BitWriter,
    block: &[i32; 64],
    last_dc: &mut i32,
    dc: &HuffCodes,
    ac: &HuffCodes,
) {
    let diff = block[0] - *last_dc;
    *last_dc = block[0];
    let n = category(diff.unsigned_abs());
    bits.put(
        u32::from(dc.code[n as usize]),
        u32::from(dc.len[n as usize]),
    );
    if n > 0 {
        // Negative values are sent as the low bits of `diff - 1`.
        let v = if diff < 0 { diff - 1 } else { diff };
        bits.put(v as u32, n);
    }
    let mut run = 0u32;
    for &pos in &NATURAL_ORDER[1..64] {
        let v = block[pos];
        if v == 0 {
            run += 1;
            continue;
        }
        while run > 15 {
            bits.put(u32::from(ac.code[0xF0]), u32::from(ac.len[0xF0]));
            run -= 16;
        }
        let n = category(v.unsigned_abs());
        let sym = ((run << 4) | n) as usize;
        bits.put(u32::from(ac.code[sym]), u32::from(ac.len[sym]));
        let v = if v < 0 { v - 1 } else { v };
        bits.put(v as u32, n);
        run = 0;
    }
    if run > 0 {
        bits.put(u32::from(ac.code[0]), u32::from(ac.len[0]));
    }
}

/// SOI, JFIF APP0, DQT ×2, SOF0, DHT ×4, SOS: libjpeg's markers in its order.
fn write_headers(out: &mut Vec<u8>, tables: &[[u16; 64]; 2], width: u16, height: u16) {
    out.extend_from_slice(&[0xFF, 0xD8]);
    // APP0: "JFIF\0", version 1.01, density unit 0, density 1x1, no thumbnail.
    out.extend_from_slice(&[
        0xFF, 0xE0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00,
        0x01, 0x00, 0x00,
    ]);
    for (index, table) in tables.iter().enumerate() {
        out.extend_from_slice(&[0xFF, 0xDB, 0x00, 0x43, index as u8]);
        out.extend(NATURAL_ORDER[..64].iter().map(|&k| table[k] as u8));
    }
    out.extend_from_slice(&[0xFF, 0xC0, 0x00, 0x11, 0x08]);
    out.extend_from_slice(&height.to_be_bytes());
    out.extend_from_slice(&width.to_be_bytes());
    out.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
    let dht: [(u8, &[u8; 16], &[u8]); 4] = [
        (0x00, &DC_LUMA_BITS, &DC_VALUES),
        (0x10, &AC_LUMA_BITS, &AC_LUMA_VALUES),
        (0x01, &DC_CHROMA_BITS, &DC_VALUES),
        (0x11, &AC_CHROMA_BITS, &AC_CHROMA_VALUES),
    ];
    for (class_index, counts, values) in dht {
        let len = 2 + 1 + 16 + values.len();
        out.extend_from_slice(&[0xFF, 0xC4]);
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.push(class_index);
        out.extend_from_slice(counts);
        out.extend_from_slice(values);
    }
    out.extend_from_slice(&[
        0xFF, 0xDA, 0x00, 0x0C, 3, 1, 0x00, 2, 0x11, 3, 0x11, 0x00, 0x3F, 0x00,
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libjpeg-turbo's C `quantize` with 16-bit elements, written as it is:
    /// a per-coefficient shift.
    fn turbo_quantize(x: i32, q: u16) -> i32 {
        let divisor = u32::from(q) << 3;
        let b = 31 - divisor.leading_zeros();
        let mut r = 16 + b;
        let mut fq = (1u32 << r) / divisor;
        let fr = (1u32 << r) % divisor;
        let mut c = divisor / 2;
        if fr == 0 {
            fq >>= 1;
            r -= 1;
        } else if fr <= divisor / 2 {
            c += 1;
        } else {
            fq += 1;
        }
        let v = ((x.unsigned_abs() + c) * fq) >> r;
        if x < 0 { -(v as i32) } else { v as i32 }
    }

    #[test]
    fn the_folded_shift_quantises_like_libjpeg_turbo_for_every_input() {
        // Every baseline table entry and every 16-bit DCT output (the islow
        // DCT of 8-bit samples stays well inside that range).
        for q in 1..=255u16 {
            let d = Divisors::new(&[q; 64]);
            for x in -32768..=32767 {
                let mut ws = [0i32; 64];
                ws[5] = x;
                let mut out = [0i32; 64];
                d.quantize(&ws, &mut out);
                assert_eq!(out[5], turbo_quantize(x, q), "x = {x}, q = {q}");
            }
        }
    }
}
