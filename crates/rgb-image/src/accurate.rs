//! JPEG decoding for the writer, the way `PIL.Image.open(p).convert("RGB")`
//! does it: libjpeg-turbo's accurate integer IDCT (`jidctint`, `JDCT_ISLOW`,
//! libjpeg's default and what Pillow uses), its fancy upsampling, its colour
//! space rules, then Pillow's CMYK handling.
//!
//! The loader's read path does not come here: it stays on [`super::turbo`],
//! bit-identical to FFCV's `TJFLAG_FASTDCT` decode. This module is for source
//! images, where the reference is what torchvision's `ImageFolder` hands
//! FFCV's writer. It covers sequential and progressive Huffman JPEGs with
//! 8-bit samples, 1, 3 or 4 components and any integral sampling ratio:
//!
//! - 1 component: grayscale, expanded to RGB as PIL's `L` to `RGB`;
//! - 3 components: YCbCr, or RGB when libjpeg would say so (no JFIF marker
//!   and an Adobe marker with transform 0, or component ids `R`, `G`, `B`);
//! - 4 components: CMYK (Adobe transform 0 or no Adobe marker) or YCCK
//!   (Adobe transform 2); libjpeg turns YCCK into CMYK, Pillow reads the
//!   CMYK as Adobe-inverted (`CMYK;I`, as Photoshop writes it) and converts
//!   it with `cmyk2rgb`.
//!
//! Arithmetic coding, lossless, hierarchical and 12-bit JPEGs are refused
//! with [`ImageError::UnsupportedJpeg`] (Pillow cannot open 12-bit ones
//! either). A scan that runs out of data is an error, as in Pillow ("image
//! file is truncated"), not a grey tail.

use super::entropy::{Bits, Huffman, decode_ac, extend};
use super::frame::JpegFrame;
use super::ifast_idct::idct_limit;
use super::segments::{self, NATURAL_ORDER, Segments, Step};
use super::simd::Isa;
use super::turbo::{h2v1_fancy, h2v2_fancy, ycc_to_rgb_row};
use super::{ImageError, Result, RgbImage, rgb_len};

/// Fixed-point constants of `jidctint` (`FIX(x) = round(x * 2^13)`).
const CONST_BITS: u32 = 13;
const PASS1_BITS: u32 = 2;
const FIX_0_298631336: i64 = 2446;
const FIX_0_390180644: i64 = 3196;
const FIX_0_541196100: i64 = 4433;
const FIX_0_765366865: i64 = 6270;
const FIX_0_899976223: i64 = 7373;
const FIX_1_175875602: i64 = 9633;
const FIX_1_501321110: i64 = 12299;
const FIX_1_847759065: i64 = 15137;
const FIX_1_961570560: i64 = 16069;
const FIX_2_053119869: i64 = 16819;
const FIX_2_562915447: i64 = 20995;
const FIX_3_072711026: i64 = 25172;

/// `DESCALE(x, n)` of libjpeg: divide by `2^n`, rounding half up.
fn descale(x: i64, n: u32) -> i64 {
    (x + (1 << (n - 1))) >> n
}

/// One 1-D `jidctint` pass over eight inputs `x[k]` (frequency `k`, already
/// dequantized, or pass-1 output), returning the eight outputs before their
/// final descale.
fn islow_1d(x: [i64; 8]) -> [i64; 8] {
    // Even part.
    let (z2, z3) = (x[2], x[6]);
    let z1 = (z2 + z3) * FIX_0_541196100;
    let tmp2 = z1 + z3 * -FIX_1_847759065;
    let tmp3 = z1 + z2 * FIX_0_765366865;
    let tmp0 = (x[0] + x[4]) << CONST_BITS;
    let tmp1 = (x[0] - x[4]) << CONST_BITS;
    let (tmp10, tmp13) = (tmp0 + tmp3, tmp0 - tmp3);
    let (tmp11, tmp12) = (tmp1 + tmp2, tmp1 - tmp2);
    // Odd part.
    let (t0, t1, t2, t3) = (x[7], x[5], x[3], x[1]);
    let z1 = t0 + t3;
    let z2 = t1 + t2;
    let z3 = t0 + t2;
    let z4 = t1 + t3;
    let z5 = (z3 + z4) * FIX_1_175875602;
    let t0 = t0 * FIX_0_298631336;
    let t1 = t1 * FIX_2_053119869;
    let t2 = t2 * FIX_3_072711026;
    let t3 = t3 * FIX_1_501321110;
    let z1 = z1 * -FIX_0_899976223;
    let z2 = z2 * -FIX_2_562915447;
    let z3 = z3 * -FIX_1_961570560 + z5;
    let z4 = z4 * -FIX_0_390180644 + z5;
    let t0 = t0 + z1 + z3;
    let t1 = t1 + z2 + z4;
    let t2 = t2 + z2 + z3;
    let t3 = t3 + z1 + z4;
    [
        tmp10 + t3,
        tmp11 + t2,
        tmp12 + t1,
        tmp13 + t0,
        tmp13 - t0,
        tmp12 - t1,
        tmp11 - t2,
        tmp10 - t3,
    ]
}

/// libjpeg's `jpeg_idct_islow` for one block: `coef` in natural order,
/// `q` the quantization table (natural order), 8x8 samples into `out` rows
/// `stride` apart. libjpeg's all-zero-AC shortcuts compute the same values
/// as the full passes, so they are left out. 64-bit arithmetic as libjpeg's
/// `JLONG` on 64-bit Linux, so nothing overflows.
pub(super) fn idct_islow(coef: &[i16; 64], q: &[i32; 64], out: &mut [u8], stride: usize) {
    let mut ws = [0i64; 64];
    for col in 0..8 {
        let x: [i64; 8] =
            std::array::from_fn(|r| i64::from(coef[r * 8 + col]) * i64::from(q[r * 8 + col]));
        let y = islow_1d(x);
        for (r, v) in y.into_iter().enumerate() {
            ws[r * 8 + col] = descale(v, CONST_BITS - PASS1_BITS);
        }
    }
    for r in 0..8 {
        let x: [i64; 8] = std::array::from_fn(|c| ws[r * 8 + c]);
        let y = islow_1d(x);
        let o = &mut out[r * stride..r * stride + 8];
        for (px, v) in o.iter_mut().zip(y) {
            // The same `range_limit[x & RANGE_MASK]` as the fast IDCT, whose
            // limit takes its input 5 bits early.
            let v = descale(v, CONST_BITS + PASS1_BITS + 3);
            *px = idct_limit(((v & 1023) as i32) << 5);
        }
    }
}

/// How libjpeg reads the components (its `jpeg_color_space`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ColorSpace {
    Gray,
    Rgb,
    YCbCr,
    Cmyk,
    Ycck,
}

/// One frame component and the samples or coefficients decoded for it.
#[derive(Default)]
struct Comp {
    id: u8,
    h: usize,
    v: usize,
    tq: usize,
    /// Downsampled size (libjpeg's `downsampled_width/height`).
    dw: usize,
    dh: usize,
    /// Blocks stored per row and column (whole MCUs).
    bw: usize,
    bh: usize,
    /// The quantization table latched when the component's first scan
    /// starts (as libjpeg does).
    q: Option<[i32; 64]>,
    /// Progressive files: every block's coefficients (natural order).
    coef: Vec<i16>,
    /// Samples, `bw * 8` wide, `bh * 8` high.
    plane: Vec<u8>,
}

/// Allocates `n` default values, failing with an error instead of aborting
/// when memory is short (the size comes from the file's header).
fn try_vec<T: Clone + Default>(n: usize, what: &str, len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| ImageError::JpegDecode {
        len,
        message: format!("cannot allocate {n} values for the {what}"),
    })?;
    v.resize(n, T::default());
    Ok(v)
}

fn unsupported(what: impl Into<String>) -> ImageError {
    ImageError::UnsupportedJpeg {
        format: what.into(),
    }
}

/// Decodes `jpeg` as PIL's `Image.open(...).convert("RGB")` would, refusing
/// images whose RGB pixels would exceed `max_bytes` before allocating.
pub fn decode_jpeg_accurate(jpeg: &[u8], max_bytes: usize) -> Result<RgbImage> {
    Decoder::new(jpeg).run(max_bytes)
}

/// The state of one decode.
struct Decoder<'a> {
    jpeg: &'a [u8],
    comps: Vec<Comp>,
    width: usize,
    height: usize,
    hmax: usize,
    vmax: usize,
    progressive: bool,
    qt: [Option<[i32; 64]>; 4],
    dc: Box<[Huffman; 4]>,
    ac: Box<[Huffman; 4]>,
    dc_set: [bool; 4],
    ac_set: [bool; 4],
    restart_interval: usize,
    adobe: Option<u8>,
    jfif: bool,
}

impl<'a> Decoder<'a> {
    fn new(jpeg: &'a [u8]) -> Self {
        Self {
            jpeg,
            comps: Vec::new(),
            width: 0,
            height: 0,
            hmax: 1,
            vmax: 1,
            progressive: false,
            qt: [None; 4],
            dc: Box::default(),
            ac: Box::default(),
            dc_set: [false; 4],
            ac_set: [false; 4],
            restart_interval: 0,
            adobe: None,
            jfif: false,
        }
    }

    fn err(&self, message: &str) -> ImageError {
        ImageError::JpegDecode {
            len: self.jpeg.len(),
            message: message.to_owned(),
        }
    }

    fn run(mut self, max_bytes: usize) -> Result<RgbImage> {
        let mut walk = Segments::new(self.jpeg).map_err(|m| self.err(m))?;
        let mut scanned = false;
        let saw_eoi = loop {
            let (marker, seg) = match walk.next_step().map_err(|m| self.err(m))? {
                Step::Segment { marker, body } => (marker, body),
                Step::EndOfImage => break true,
                Step::EndOfData => break false,
            };
            match marker {
                0xC0..=0xC2 => self.frame(marker, seg, max_bytes)?,
                0xC3 => return Err(unsupported("lossless JPEG")),
                0xC5..=0xC7 => return Err(unsupported("hierarchical JPEG")),
                0xC9..=0xCB | 0xCD..=0xCF => return Err(unsupported("arithmetic-coded JPEG")),
                0xC4 => self.huffman_tables(seg)?,
                0xDB => self.quant_tables(seg)?,
                0xDD => {
                    self.restart_interval =
                        segments::restart_interval(seg).map_err(|m| self.err(m))?;
                }
                0xE0 => self.jfif |= segments::is_jfif(seg),
                0xEE => {
                    if let Some(t) = segments::adobe_transform(seg) {
                        self.adobe = Some(t);
                    }
                }
                0xDA => {
                    let end = self.scan(seg, walk.position())?;
                    walk.resume_at(end);
                    scanned = true;
                }
                _ => {}
            }
        };
        if !scanned {
            return Err(self.err("no scan before the end of the data"));
        }
        if self.progressive && !saw_eoi {
            // A progressive file cut between scans would decode blurred.
            return Err(self.err("progressive JPEG ends before its EOI marker (truncated?)"));
        }
        if let Some(c) = self.comps.iter().find(|c| c.q.is_none()) {
            return Err(self.err(&format!("component {} is in no scan (truncated?)", c.id)));
        }
        if self.progressive {
            self.idct_progressive();
        }
        self.output()
    }

    fn frame(&mut self, marker: u8, seg: &[u8], max_bytes: usize) -> Result<()> {
        if !self.comps.is_empty() {
            return Err(self.err("more than one frame header"));
        }
        let Some(frame) = JpegFrame::parse(marker, seg) else {
            return Err(self.err("truncated frame header"));
        };
        let progressive = frame.is_progressive();
        if frame.precision != 8 {
            return Err(unsupported(format!("{}-bit samples", frame.precision)));
        }
        let height = usize::from(frame.height);
        let width = usize::from(frame.width);
        let n = usize::from(frame.count);
        if height == 0 || width == 0 {
            return Err(self.err("zero image size (DNL is not supported)"));
        }
        if !matches!(n, 1 | 3 | 4) {
            return Err(unsupported(format!("{n} components")));
        }
        let Some(list) = frame.components() else {
            return Err(self.err("truncated frame header"));
        };
        let needed = rgb_len(height as u32, width as u32);
        if needed > max_bytes {
            return Err(ImageError::BadSize {
                height: height as u64,
                width: width as u64,
                reason: "the decoded image would exceed the size limit",
            });
        }
        for c in list {
            if !c.is_valid() {
                return Err(self.err("bad component sampling or table"));
            }
            if self.comps.iter().any(|o| o.id == c.id) {
                return Err(self.err("two components with the same id"));
            }
            // A single component is never subsampled (libjpeg's MCU is one block).
            let (h, v) = if n == 1 {
                (1, 1)
            } else {
                (usize::from(c.h), usize::from(c.v))
            };
            self.comps.push(Comp {
                id: c.id,
                h,
                v,
                tq: usize::from(c.tq),
                ..Comp::default()
            });
        }
        let hmax = self.comps.iter().map(|c| c.h).max().unwrap_or(1);
        let vmax = self.comps.iter().map(|c| c.v).max().unwrap_or(1);
        if self
            .comps
            .iter()
            .any(|c| hmax % c.h != 0 || vmax % c.v != 0)
        {
            // libjpeg: "Fractional sampling not implemented yet".
            return Err(unsupported("fractional chroma sampling"));
        }
        let mcux = width.div_ceil(8 * hmax);
        let mcuy = height.div_ceil(8 * vmax);
        let len = self.jpeg.len();
        for c in &mut self.comps {
            c.dw = (width * c.h).div_ceil(hmax);
            c.dh = (height * c.v).div_ceil(vmax);
            c.bw = mcux * c.h;
            c.bh = mcuy * c.v;
            let samples = c.bw * c.bh * 64;
            c.plane = try_vec(samples, "sample planes", len)?;
            if progressive {
                c.coef = try_vec(samples, "DCT coefficients", len)?;
            }
        }
        (self.width, self.height, self.hmax, self.vmax) = (width, height, hmax, vmax);
        self.progressive = progressive;
        Ok(())
    }

    fn huffman_tables(&mut self, seg: &[u8]) -> Result<()> {
        for spec in segments::huffman_tables(seg) {
            let spec = spec.map_err(|m| self.err(m))?;
            let (table, set) = if spec.dc {
                (&mut self.dc[spec.id], &mut self.dc_set[spec.id])
            } else {
                (&mut self.ac[spec.id], &mut self.ac_set[spec.id])
            };
            let built = table.set(&spec.counts, spec.symbols, spec.dc);
            *set = built.is_ok();
            if let Err(m) = built {
                return Err(self.err(m));
            }
        }
        Ok(())
    }

    fn quant_tables(&mut self, seg: &[u8]) -> Result<()> {
        for spec in segments::quant_tables(seg) {
            let spec = spec.map_err(|m| self.err(m))?;
            self.qt[spec.id] = Some(spec.natural.map(i32::from));
        }
        Ok(())
    }

    /// Decodes one scan starting at `start` (just after its header) and
    /// returns the position after its entropy-coded data.
    fn scan(&mut self, seg: &[u8], start: usize) -> Result<usize> {
        if self.comps.is_empty() {
            return Err(self.err("scan before frame header"));
        }
        let ns = usize::from(*seg.first().unwrap_or(&0));
        if ns == 0 || ns > 4 || seg.len() < 1 + 2 * ns + 3 {
            return Err(self.err("bad scan header"));
        }
        let mut members = [(0usize, 0usize, 0usize); 4];
        for (slot, s) in members.iter_mut().zip(seg[1..1 + 2 * ns].chunks_exact(2)) {
            let Some(k) = self.comps.iter().position(|c| c.id == s[0]) else {
                return Err(self.err("scan names an unknown component"));
            };
            // Table ids above 3 never name a defined table; clamped here so
            // a scan that does not use a table cannot index past the four.
            let (td, ta) = (usize::from(s[1] >> 4), usize::from(s[1] & 15));
            if td > 3 || ta > 3 {
                return Err(self.err("scan names a Huffman table above 3"));
            }
            *slot = (k, td, ta);
        }
        let members = &members[..ns];
        let p = &seg[1 + 2 * ns..];
        let (ss, se, ah, al) = (
            usize::from(p[0]),
            usize::from(p[1]),
            u32::from(p[2] >> 4),
            u32::from(p[2] & 15),
        );
        let kind = if !self.progressive {
            if ss != 0 || se != 63 || ah != 0 || al != 0 {
                return Err(self.err("bad spectral selection in a sequential scan"));
            }
            ScanKind::Sequential
        } else {
            let ok = if ss == 0 {
                se == 0
            } else {
                se >= ss && se <= 63 && ns == 1
            };
            if !ok || ah > 13 || al > 13 {
                return Err(self.err("bad progressive scan parameters"));
            }
            match (ss == 0, ah == 0) {
                (true, true) => ScanKind::DcFirst,
                (true, false) => ScanKind::DcRefine,
                (false, true) => ScanKind::AcFirst,
                (false, false) => ScanKind::AcRefine,
            }
        };
        for &(k, td, ta) in members {
            let need_dc = matches!(kind, ScanKind::Sequential | ScanKind::DcFirst);
            let need_ac = matches!(
                kind,
                ScanKind::Sequential | ScanKind::AcFirst | ScanKind::AcRefine
            );
            if (need_dc && !self.dc_set.get(td).copied().unwrap_or(false))
                || (need_ac && !self.ac_set.get(ta).copied().unwrap_or(false))
            {
                return Err(self.err("scan uses an undefined Huffman table"));
            }
            let c = &mut self.comps[k];
            if c.q.is_none() {
                c.q = self.qt[c.tq];
            }
            if c.q.is_none() {
                return Err(self.err("component uses an undefined quantization table"));
            }
        }
        let mut st = ScanState {
            bits: Bits::new(self.jpeg, start),
            pred: [0; 4],
            eobrun: 0,
            kind,
            ss,
            se,
            al,
        };
        let (mcux, mcuy) = if ns == 1 {
            let c = &self.comps[members[0].0];
            (c.dw.div_ceil(8), c.dh.div_ceil(8))
        } else {
            (
                self.width.div_ceil(8 * self.hmax),
                self.height.div_ceil(8 * self.vmax),
            )
        };
        let mut rst = 0u8;
        let mut until_restart = self.restart_interval;
        let mut coef = [0i16; 64];
        for m in 0..mcux * mcuy {
            let (mx, my) = (m % mcux, m / mcux);
            // A file cut short would otherwise decode padding to the last
            // MCU (seconds for a large frame); stop at the row it ran out.
            if mx == 0 && st.bits.overran() {
                return Err(self.err("premature end of entropy-coded data (truncated file?)"));
            }
            if self.restart_interval > 0 {
                if until_restart == 0 {
                    st.bits.restart(rst).map_err(|e| self.err(e))?;
                    rst = (rst + 1) & 7;
                    st.pred = [0; 4];
                    st.eobrun = 0;
                    until_restart = self.restart_interval;
                }
                until_restart -= 1;
            }
            for (si, &(k, td, ta)) in members.iter().enumerate() {
                let c = &mut self.comps[k];
                let (bh, bv) = if ns == 1 { (1, 1) } else { (c.h, c.v) };
                for by in 0..bv {
                    for bx in 0..bh {
                        let (x, y) = (mx * bh + bx, my * bv + by);
                        let block = y * c.bw + x;
                        if kind == ScanKind::Sequential {
                            coef.fill(0);
                            st.block(si, &self.dc[td], &self.ac[ta], &mut coef)
                                .map_err(|e| ImageError::JpegDecode {
                                    len: self.jpeg.len(),
                                    message: e.to_owned(),
                                })?;
                            let q = c.q.as_ref().unwrap_or(&[0; 64]);
                            let stride = c.bw * 8;
                            idct_islow(&coef, q, &mut c.plane[y * 8 * stride + x * 8..], stride);
                        } else {
                            let b: &mut [i16; 64] = (&mut c.coef[block * 64..block * 64 + 64])
                                .try_into()
                                .map_err(|_| ImageError::JpegDecode {
                                    len: self.jpeg.len(),
                                    message: "block outside the component".into(),
                                })?;
                            st.block(si, &self.dc[td], &self.ac[ta], b).map_err(|e| {
                                ImageError::JpegDecode {
                                    len: self.jpeg.len(),
                                    message: e.to_owned(),
                                }
                            })?;
                        }
                    }
                }
            }
        }
        if st.bits.overran() {
            return Err(self.err("premature end of entropy-coded data (truncated file?)"));
        }
        Ok(st.bits.pos)
    }

    /// The IDCT of every block of a progressive file, once all scans are in.
    fn idct_progressive(&mut self) {
        for c in &mut self.comps {
            let q = c.q.unwrap_or([0; 64]);
            let stride = c.bw * 8;
            for (block, coef) in c.coef.chunks_exact(64).enumerate() {
                let (x, y) = (block % c.bw, block / c.bw);
                let coef: &[i16; 64] = coef.try_into().unwrap_or(&[0; 64]);
                idct_islow(coef, &q, &mut c.plane[y * 8 * stride + x * 8..], stride);
            }
        }
    }

    fn color_space(&self) -> ColorSpace {
        // libjpeg-turbo's `default_decompress_parms`.
        match self.comps.len() {
            1 => ColorSpace::Gray,
            3 => {
                let ids: Vec<u8> = self.comps.iter().map(|c| c.id).collect();
                if self.jfif {
                    ColorSpace::YCbCr
                } else if let Some(t) = self.adobe {
                    if t == 0 {
                        ColorSpace::Rgb
                    } else {
                        ColorSpace::YCbCr
                    }
                } else if ids == b"RGB" {
                    ColorSpace::Rgb
                } else {
                    ColorSpace::YCbCr
                }
            }
            _ => match self.adobe {
                Some(0) | None => ColorSpace::Cmyk,
                Some(_) => ColorSpace::Ycck,
            },
        }
    }

    /// Upsamples every component and converts each row to RGB.
    fn output(self) -> Result<RgbImage> {
        let (width, height) = (self.width, self.height);
        let len = self.jpeg.len();
        let space = self.color_space();
        let isa = Isa::detect();
        let mut rgb: Vec<u8> = try_vec(rgb_len(height as u32, width as u32), "RGB image", len)?;
        let mut rows: Vec<Vec<u8>> = self
            .comps
            .iter()
            .map(|c| vec![0u8; c.dw * (self.hmax / c.h) + 8])
            .collect();
        let mut tmp = vec![0u8; width * 3];
        for (y, out) in rgb.chunks_exact_mut(width * 3).enumerate() {
            for (c, row) in self.comps.iter().zip(&mut rows) {
                upsample_row(c, (self.hmax / c.h, self.vmax / c.v), y, isa, row);
            }
            match space {
                ColorSpace::Gray => {
                    for (px, &l) in out.chunks_exact_mut(3).zip(&rows[0]) {
                        px.fill(l);
                    }
                }
                ColorSpace::Rgb => {
                    for (i, px) in out.chunks_exact_mut(3).enumerate() {
                        px.copy_from_slice(&[rows[0][i], rows[1][i], rows[2][i]]);
                    }
                }
                ColorSpace::YCbCr => ycc_to_rgb_row(
                    isa,
                    &rows[0][..width],
                    &rows[1][..width],
                    &rows[2][..width],
                    out,
                ),
                ColorSpace::Cmyk | ColorSpace::Ycck => {
                    // libjpeg's CMYK output, then Pillow's `CMYK;I` unpack
                    // (every byte inverted). For YCCK, libjpeg's CMY are
                    // 255 minus the YCbCr-to-RGB result, so the inverted
                    // CMY are that RGB itself.
                    let k = &rows[3][..width];
                    if space == ColorSpace::Ycck {
                        let (y0, y1, y2) =
                            (&rows[0][..width], &rows[1][..width], &rows[2][..width]);
                        ycc_to_rgb_row(isa, y0, y1, y2, &mut tmp);
                    } else {
                        for (i, px) in tmp.chunks_exact_mut(3).enumerate() {
                            px.copy_from_slice(&[
                                255 - rows[0][i],
                                255 - rows[1][i],
                                255 - rows[2][i],
                            ]);
                        }
                    }
                    for ((px, inv), &k) in out.chunks_exact_mut(3).zip(tmp.chunks_exact(3)).zip(k) {
                        cmyk_to_rgb(inv, 255 - k, px);
                    }
                }
            }
        }
        RgbImage::new(width as u32, height as u32, rgb)
    }
}

/// Pillow's `cmyk2rgb`: `inv` the C, M, Y bytes and `k` the K byte as
/// Pillow holds them (after `CMYK;I`), each channel `nk - nk * c / 255`
/// with `nk = 255 - k`, rounded as its `MULDIV255`.
fn cmyk_to_rgb(cmy: &[u8], k: u8, out: &mut [u8]) {
    let nk = 255 - u32::from(k);
    for (o, &c) in out.iter_mut().zip(cmy) {
        let t = u32::from(c) * nk + 128;
        let md = ((t >> 8) + t) >> 8;
        *o = nk.saturating_sub(md).min(255) as u8;
    }
}

/// What a scan decodes (libjpeg's `jdphuff` decoders and the sequential one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScanKind {
    Sequential,
    DcFirst,
    DcRefine,
    AcFirst,
    AcRefine,
}

/// The entropy decoder's state through one scan.
struct ScanState<'a> {
    bits: Bits<'a>,
    pred: [i32; 4],
    eobrun: u32,
    kind: ScanKind,
    ss: usize,
    se: usize,
    al: u32,
}

impl ScanState<'_> {
    /// Decodes one block of scan member `si` into `b`.
    fn block(
        &mut self,
        si: usize,
        dc: &Huffman,
        ac: &Huffman,
        b: &mut [i16; 64],
    ) -> std::result::Result<(), &'static str> {
        match self.kind {
            ScanKind::Sequential => {
                self.dc_diff(si, dc)?;
                // libjpeg stores coefficients as 16-bit JCOEF.
                b[0] = self.pred[si] as i16;
                decode_ac::<true>(&mut self.bits, ac, b)?;
            }
            ScanKind::DcFirst => {
                self.dc_diff(si, dc)?;
                b[0] = self.pred[si].wrapping_shl(self.al) as i16;
            }
            ScanKind::DcRefine => {
                if self.bits.bits(1) == 1 {
                    b[0] |= (1i32 << self.al) as i16;
                }
            }
            ScanKind::AcFirst => self.ac_first(ac, b)?,
            ScanKind::AcRefine => self.ac_refine(ac, b)?,
        }
        Ok(())
    }

    fn dc_diff(&mut self, si: usize, dc: &Huffman) -> std::result::Result<(), &'static str> {
        let t = u32::from(self.bits.decode(dc)?);
        if t > 16 {
            return Err("bad DC coefficient size");
        }
        let diff = extend(self.bits.bits(t), t);
        self.pred[si] = self.pred[si].wrapping_add(diff);
        Ok(())
    }

    /// `decode_mcu_AC_first`: the first pass over bands `ss..=se`.
    fn ac_first(
        &mut self,
        ac: &Huffman,
        b: &mut [i16; 64],
    ) -> std::result::Result<(), &'static str> {
        if self.eobrun > 0 {
            self.eobrun -= 1;
            return Ok(());
        }
        let mut k = self.ss;
        while k <= self.se {
            let rs = self.bits.decode(ac)?;
            let (r, s) = (usize::from(rs >> 4), u32::from(rs & 15));
            if s != 0 {
                k += r;
                let v = extend(self.bits.bits(s), s);
                b[NATURAL_ORDER[k.min(79)]] = v.wrapping_shl(self.al) as i16;
            } else if r == 15 {
                k += 15;
            } else {
                self.eobrun = (1 << r) + self.bits.bits(r as u32) - 1;
                break;
            }
            k += 1;
        }
        Ok(())
    }

    /// `decode_mcu_AC_refine`: one more bit for every coefficient of the
    /// band, and newly non-zero coefficients of magnitude `1 << al`.
    fn ac_refine(
        &mut self,
        ac: &Huffman,
        b: &mut [i16; 64],
    ) -> std::result::Result<(), &'static str> {
        let p1 = 1i16.wrapping_shl(self.al);
        let m1 = (-1i16).wrapping_shl(self.al);
        let mut k = self.ss;
        // Corrects a coefficient that is already non-zero.
        let refine = |bits: &mut Bits<'_>, c: &mut i16| {
            if bits.bits(1) == 1 && (*c & p1) == 0 {
                *c = c.wrapping_add(if *c >= 0 { p1 } else { m1 });
            }
        };
        if self.eobrun == 0 {
            while k <= self.se {
                let rs = self.bits.decode(ac)?;
                let (mut r, s) = (i32::from(rs >> 4), rs & 15);
                let mut value = 0i16;
                if s != 0 {
                    // s must be 1 here; libjpeg warns and goes on otherwise.
                    value = if self.bits.bits(1) == 1 { p1 } else { m1 };
                } else if r != 15 {
                    self.eobrun = (1 << r) + self.bits.bits(r as u32);
                    break;
                }
                // Skip r zero coefficients (correcting the non-zero ones on
                // the way) and stop at the next zero one.
                while k <= self.se {
                    let c = &mut b[NATURAL_ORDER[k]];
                    if *c != 0 {
                        refine(&mut self.bits, c);
                    } else {
                        if r == 0 {
                            break;
                        }
                        r -= 1;
                    }
                    k += 1;
                }
                if value != 0 {
                    b[NATURAL_ORDER[k.min(79)]] = value;
                }
                k += 1;
            }
        }
        if self.eobrun > 0 {
            while k <= self.se {
                let c = &mut b[NATURAL_ORDER[k]];
                if *c != 0 {
                    refine(&mut self.bits, c);
                }
                k += 1;
            }
            self.eobrun -= 1;
        }
        Ok(())
    }
}

/// Output row `y` of component `c` upsampled by `(fh, fv)` into `dst`
/// (at least `c.dw * fh` long), as libjpeg-turbo's `jdsample` chooses:
/// fancy triangle filters for h2v1 and h2v2 (when the component is more
/// than 2 samples wide) and for h1v2, plain replication for every other
/// integral ratio; context rows clamped to the component's real rows.
fn upsample_row(c: &Comp, (fh, fv): (usize, usize), y: usize, isa: Isa, dst: &mut [u8]) {
    let stride = c.bw * 8;
    let row = |r: usize| &c.plane[r * stride..r * stride + c.dw];
    let iy = (y / fv).min(c.dh - 1);
    let fancy = c.dw > 2;
    // The row above (even y) or below (odd y) for 2x vertical filters,
    // clamped to the real rows.
    let near = if y.is_multiple_of(2) {
        iy.saturating_sub(1)
    } else {
        (iy + 1).min(c.dh - 1)
    };
    match (fh, fv) {
        (1, 1) => dst[..c.dw].copy_from_slice(row(iy)),
        (2, 1) if fancy => h2v1_fancy(isa, row(iy), (0, c.dw), dst),
        (1, 2) => {
            let bias = if y.is_multiple_of(2) { 1 } else { 2 };
            for ((d, &a), &b) in dst.iter_mut().zip(row(iy)).zip(row(near)) {
                *d = ((u32::from(a) * 3 + u32::from(b) + bias) >> 2) as u8;
            }
        }
        (2, 2) if fancy => h2v2_fancy(isa, row(iy), row(near), (0, c.dw), dst),
        _ => {
            for (d, &s) in dst.chunks_exact_mut(fh).zip(row(iy)) {
                d.fill(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A direct floating-point 2-D IDCT, the definition `jidctint`
    /// approximates to within rounding.
    fn idct_float(coef: &[i16; 64], q: &[i32; 64]) -> [f64; 64] {
        let c = |k: usize| if k == 0 { 1.0 / 2f64.sqrt() } else { 1.0 };
        std::array::from_fn(|i| {
            let (y, x) = (i / 8, i % 8);
            let mut s = 0.0;
            for v in 0..8 {
                for u in 0..8 {
                    let f = f64::from(coef[v * 8 + u]) * f64::from(q[v * 8 + u]);
                    s += c(u)
                        * c(v)
                        * f
                        * ((2 * x + 1) as f64 * u as f64 * std::f64::consts::PI / 16.0).cos()
                        * ((2 * y + 1) as f64 * v as f64 * std::f64::consts::PI / 16.0).cos();
                }
            }
            s / 4.0 + 128.0
        })
    }

    #[test]
    fn islow_idct_is_within_one_of_the_exact_transform() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as i64
        };
        let q = [1i32; 64];
        for _ in 0..200 {
            let coef: [i16; 64] = std::array::from_fn(|i| {
                let span = if i == 0 { 1024 } else { 64 };
                (next() % (2 * span) - span) as i16
            });
            let mut out = [0u8; 64];
            idct_islow(&coef, &q, &mut out, 8);
            let want = idct_float(&coef, &q);
            for (o, w) in out.iter().zip(want) {
                let w = w.round().clamp(0.0, 255.0);
                assert!((f64::from(*o) - w).abs() <= 1.0, "{o} vs {w}");
            }
        }
    }

    #[test]
    fn cmyk_to_rgb_matches_pillows_muldiv255() {
        // Pillow 13: Image.frombytes("CMYK", ...) of (c, m, y, k) converted
        // to RGB gives these (checked by hand with the reference venv).
        let mut out = [0u8; 3];
        cmyk_to_rgb(&[0, 128, 255], 0, &mut out);
        assert_eq!(out, [255, 127, 0]);
        cmyk_to_rgb(&[0, 128, 255], 255, &mut out);
        assert_eq!(out, [0, 0, 0]);
        cmyk_to_rgb(&[10, 200, 77], 60, &mut out);
        let nk = 195u32;
        let want = |c: u32| {
            let t = c * nk + 128;
            (nk - (((t >> 8) + t) >> 8)) as u8
        };
        assert_eq!(out, [want(10), want(200), want(77)]);
    }
}
