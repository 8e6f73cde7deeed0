//! A baseline JPEG decoder that reproduces libjpeg-turbo's output with
//! `TJFLAG_FASTDCT` (what FFCV's `imdecode` asks for): the AAN integer IDCT
//! with truncating descales (`jidctfst`), the "fancy" triangle upsampling of
//! subsampled chroma (`h2v1`, `h1v2`, `h2v2`), and the fixed-point YCbCr to
//! RGB tables (`jdcolor`).
//!
//! It handles sequential Huffman JPEGs with 8-bit samples and 1 or 3
//! components sampled 1x or 2x per axis: everything FFCV's writer (OpenCV's
//! `imencode`) produces. Anything else (progressive, arithmetic coding,
//! 12-bit, other sampling ratios) returns [`Outcome::Unsupported`] so the
//! caller can use a general decoder instead.

use super::entropy::{Bits, Huffman, decode_ac, decode_dc};
use super::frame::JpegFrame;
use super::ifast_idct::{AAN_SCALES, idct_ifast_scalar, idct_limit};
use super::scaled_idct::idct_scaled;
use super::segments::{self, Segments, Step};
use super::simd::Isa;
use super::{CropBox, ImageError, Result, rgb_len};

/// What [`TurboDecoder::decode_into`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Decoded an image of `(height, width)` into the output.
    Decoded(u32, u32),
    /// The JPEG uses a feature this decoder leaves to the general one.
    Unsupported,
}

/// jidctfst's two passes for one block, writing 8x8 samples ([`super::ifast_idct`]). libjpeg's
/// shortcuts for all-zero AC columns and rows give the same values as the
/// full butterflies, so they are not needed for identical output. The
/// arithmetic is 32-bit like libjpeg's `DCTELEM`; only coefficients far
/// outside what an 8-bit JPEG encoder produces could overflow, and then the
/// result wraps instead of panicking.
pub(super) fn idct_ifast(isa: Isa, coef: &[i16; 64], q: &[i32; 64], out: &mut [u8], stride: usize) {
    match isa {
        Isa::Scalar => idct_ifast_scalar(coef, q, out, stride),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
        Isa::Avx2 => unsafe { super::simd::idct_ifast_avx2(coef, q, out, stride) },
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Component {
    id: u8,
    h: usize,
    v: usize,
    tq: usize,
    /// Downsampled size (libjpeg's `downsampled_width/height`).
    dw: usize,
    dh: usize,
    /// Plane size in samples (whole MCUs).
    pw: usize,
    ph: usize,
    /// Blocks per row and column of the component (a one-component scan's MCU
    /// grid); `dw`, `dh`, `pw` and `ph` are at the decode's scale.
    blocks_x: usize,
    blocks_y: usize,
    /// The IDCT's reduction for this component (`1 / 2^shift`) and its upsampling
    /// factors to the output: at full scale 0 and `hmax / h`, `vmax / v`.
    shift: u32,
    fh: usize,
    fv: usize,
}

/// Decoder state reused between images: sample planes, row buffers and
/// Huffman tables, so a decode allocates only while the planes grow.
#[derive(Default)]
pub(crate) struct TurboDecoder {
    planes: [Vec<u8>; 3],
    rows: [Vec<u8>; 3],
    /// The instruction set the kernels run with.
    isa: Isa,
    /// Boxed: the lookahead tables make them tens of kilobytes.
    dc: Box<[Huffman; 4]>,
    ac: Box<[Huffman; 4]>,
}

fn corrupt(len: usize, message: &str) -> ImageError {
    ImageError::JpegDecode {
        len,
        message: message.to_owned(),
    }
}

impl TurboDecoder {
    /// A decoder whose kernels run with `isa` (tests compare the paths);
    /// `Isa::Avx2` only where [`Isa::detect`] finds AVX2.
    #[cfg(all(test, target_arch = "x86_64"))]
    pub(crate) fn with_isa(isa: Isa) -> Self {
        Self {
            isa,
            ..Self::default()
        }
    }

    /// Decodes `jpeg` into `out` (packed RGB), or reports that the file
    /// needs the general decoder.
    pub(crate) fn decode_into(&mut self, jpeg: &[u8], out: &mut [u8]) -> Result<Outcome> {
        self.decode_region_into(jpeg, None, out)
    }

    /// [`Self::decode_into`] that only needs the pixels inside `crop` to be
    /// right: the IDCT, upsampling and colour conversion run only for the
    /// samples those pixels depend on, and entropy decoding stops after the
    /// last MCU row the crop needs. Pixels outside the crop are left
    /// unspecified; so damage to the scan below the crop goes unnoticed (as
    /// libjpeg-turbo only warns about it). A crop that does not fit the
    /// JPEG's size decodes the whole image.
    pub(crate) fn decode_region_into(
        &mut self,
        jpeg: &[u8],
        crop: Option<CropBox>,
        out: &mut [u8],
    ) -> Result<Outcome> {
        self.decode_at_scale(jpeg, crop, 0, out)
    }

    /// [`Self::decode_region_into`] at `1 / 2^shift` scale (`shift` 0 to 3): the image
    /// comes out `ceil(height / 2^shift) x ceil(width / 2^shift)` (libjpeg's scaled output
    /// size), each 8x8 block reduced in the DCT domain by [`idct_scaled`]. Chroma
    /// subsampled on both axes (4:2:0) is reduced one step less instead of upsampled, as
    /// libjpeg-turbo does (at 1/2 it is the full-scale fast IDCT, so those planes are the
    /// exact decode's); other subsampled chroma (4:2:2, 4:4:0) is upsampled by the same
    /// fancy rule as at full scale, applied to the reduced planes. `crop` is in the
    /// reduced image's coordinates. Shift 0 is the exact decode.
    pub(crate) fn decode_at_scale(
        &mut self,
        jpeg: &[u8],
        crop: Option<CropBox>,
        shift: u32,
        out: &mut [u8],
    ) -> Result<Outcome> {
        let shift = shift.min(3);
        let (mut ow, mut oh) = (0usize, 0usize);
        let len = jpeg.len();
        let err = |m: &str| corrupt(len, m);
        let mut walk = Segments::new(jpeg).map_err(err)?;
        let mut qt = [[0i32; 64]; 4];
        let mut qraw = [[0i32; 64]; 4];
        let mut qt_set = [false; 4];
        for t in self.dc.iter_mut().chain(self.ac.iter_mut()) {
            t.defined = false;
        }
        let mut comp_buf = [Component::default(); 3];
        let mut ncomp = 0usize;
        let (mut width, mut height, mut hmax, mut vmax) = (0usize, 0usize, 1usize, 1usize);
        let mut restart_interval = 0usize;
        let mut adobe_transform: Option<u8> = None;
        let mut jfif = false;
        let mut scanned = false;
        // Components some scan has covered (bit k = component k).
        let mut covered = 0u8;
        loop {
            let (marker, seg) = match walk.next_step().map_err(err)? {
                Step::Segment { marker, body } => (marker, body),
                Step::EndOfImage => break,
                // libjpeg-turbo decodes a file whose EOI is missing (with a
                // warning FFCV ignores), so a complete scan is enough.
                Step::EndOfData if scanned => break,
                Step::EndOfData => return Err(err("no scan before the end of the data")),
            };
            match marker {
                0xC0 | 0xC1 => {
                    if ncomp > 0 {
                        return Err(err("more than one frame header"));
                    }
                    // Other precisions (and a header too short to say) go to the
                    // general decoder, which reports them.
                    let Some(frame) = JpegFrame::parse(marker, seg).filter(|f| f.precision == 8)
                    else {
                        return Ok(Outcome::Unsupported);
                    };
                    height = usize::from(frame.height);
                    width = usize::from(frame.width);
                    let n = usize::from(frame.count);
                    if height == 0 || width == 0 {
                        return Err(err("zero image size (DNL is not supported)"));
                    }
                    if n != 1 && n != 3 {
                        return Ok(Outcome::Unsupported);
                    }
                    let Some(list) = frame.components() else {
                        return Err(err("truncated frame header"));
                    };
                    for (slot, c) in comp_buf.iter_mut().zip(list) {
                        if !c.is_valid() {
                            return Err(err("bad component sampling or table"));
                        }
                        *slot = Component {
                            id: c.id,
                            h: usize::from(c.h),
                            v: usize::from(c.v),
                            tq: usize::from(c.tq),
                            ..Default::default()
                        };
                    }
                    ncomp = n;
                    let comps = &mut comp_buf[..n];
                    if n == 1 {
                        // A single component is never subsampled.
                        comps[0].h = 1;
                        comps[0].v = 1;
                    }
                    hmax = comps.iter().map(|c| c.h).max().unwrap_or(1);
                    vmax = comps.iter().map(|c| c.v).max().unwrap_or(1);
                    for c in comps.iter() {
                        let ok = |m: usize, s: usize| m == s || m == 2 * s;
                        if !ok(hmax, c.h) || !ok(vmax, c.v) {
                            return Ok(Outcome::Unsupported);
                        }
                    }
                    ow = width.div_ceil(1 << shift);
                    oh = height.div_ceil(1 << shift);
                    let needed = rgb_len(oh as u32, ow as u32);
                    if out.len() < needed {
                        return Err(ImageError::BufferTooSmall {
                            height: oh as u32,
                            width: ow as u32,
                            needed,
                            got: out.len(),
                        });
                    }
                    let mcux = width.div_ceil(8 * hmax);
                    let mcuy = height.div_ceil(8 * vmax);
                    for (k, c) in comps.iter_mut().enumerate() {
                        c.blocks_x = (width * c.h).div_ceil(hmax).div_ceil(8);
                        c.blocks_y = (height * c.v).div_ceil(vmax).div_ceil(8);
                        (c.shift, c.fh, c.fv) = (shift, hmax / c.h, vmax / c.v);
                        if shift > 0 && c.fh == 2 && c.fv == 2 {
                            // As libjpeg-turbo's scaled decode: chroma subsampled on both
                            // axes gets a twice-larger IDCT output instead of upsampling.
                            (c.shift, c.fh, c.fv) = (shift - 1, 1, 1);
                        }
                        // Samples per block side, and libjpeg's downsampled size at it.
                        let bs = 8usize >> c.shift;
                        c.dw = (width * c.h * bs).div_ceil(hmax * 8);
                        c.dh = (height * c.v * bs).div_ceil(vmax * 8);
                        c.pw = mcux * c.h * bs;
                        c.ph = mcuy * c.v * bs;
                        let plane = &mut self.planes[k];
                        plane.clear();
                        // Sized from the frame header: allocated fallibly.
                        plane
                            .try_reserve_exact(c.pw * c.ph)
                            .map_err(|_| err("not enough memory for the decoded planes"))?;
                        plane.resize(c.pw * c.ph, 0);
                    }
                }
                0xC2 | 0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => {
                    return Ok(Outcome::Unsupported);
                }
                0xC4 => {
                    for spec in segments::huffman_tables(seg) {
                        let spec = spec.map_err(err)?;
                        let table = if spec.dc {
                            &mut self.dc[spec.id]
                        } else {
                            &mut self.ac[spec.id]
                        };
                        table
                            .set(&spec.counts, spec.symbols, spec.dc)
                            .map_err(err)?;
                    }
                }
                0xDB => {
                    for spec in segments::quant_tables(seg) {
                        let spec = spec.map_err(err)?;
                        for (nat, &q) in spec.natural.iter().enumerate() {
                            let q = i64::from(q);
                            // jddctmgr: DESCALE(q * aanscale, 14 - 2), rounding,
                            // stored as libjpeg's 16-bit IFAST_MULT_TYPE (which
                            // wraps for 16-bit tables with large entries).
                            let scaled = (q * AAN_SCALES[nat] + (1 << 11)) >> 12;
                            qt[spec.id][nat] = i32::from(scaled as i16);
                            // The reduced IDCTs take the plain table.
                            qraw[spec.id][nat] = q as i32;
                        }
                        qt_set[spec.id] = true;
                    }
                }
                0xDD => restart_interval = segments::restart_interval(seg).map_err(err)?,
                0xE0 => jfif |= segments::is_jfif(seg),
                0xEE => {
                    if let Some(t) = segments::adobe_transform(seg) {
                        adobe_transform = Some(t);
                    }
                }
                0xDA => {
                    let comps = &comp_buf[..ncomp];
                    if comps.is_empty() {
                        return Err(err("scan before frame header"));
                    }
                    let ns = usize::from(*seg.first().unwrap_or(&0));
                    if ns == 0 || ns > comps.len() || seg.len() < 1 + 2 * ns + 3 {
                        return Err(err("bad scan header"));
                    }
                    let mut scan = [(0usize, 0usize, 0usize); 3];
                    for (slot, s) in scan.iter_mut().zip(seg[1..1 + 2 * ns].chunks_exact(2)) {
                        let Some(k) = comps.iter().position(|c| c.id == s[0]) else {
                            return Err(err("scan names an unknown component"));
                        };
                        let (td, ta) = (usize::from(s[1] >> 4), usize::from(s[1] & 15));
                        let defined =
                            |t: &[Huffman; 4], i: usize| t.get(i).is_some_and(|h| h.defined);
                        if !defined(&self.dc, td) || !defined(&self.ac, ta) {
                            return Err(err("scan uses an undefined Huffman table"));
                        }
                        if !qt_set[comps[k].tq] {
                            return Err(err("component uses an undefined quantization table"));
                        }
                        *slot = (k, td, ta);
                    }
                    let region = Region::new(crop, ow, oh);
                    let input = ScanInput {
                        jpeg,
                        start: walk.position(),
                        comps,
                        scan: &scan[..ns],
                        tables: (&qt, &qraw),
                        size: (width, height, hmax, vmax),
                        restart_interval,
                    };
                    let end = self.decode_scan(&input, &region)?;
                    walk.resume_at(end);
                    scanned = true;
                    for &(k, _, _) in &scan[..ns] {
                        covered |= 1 << k;
                    }
                    // A region decode stopped inside the scan; once every
                    // component has been read, what follows (the rest of
                    // the scan, EOI) is not needed, so it is not searched.
                    if crop.is_some() && covered.count_ones() as usize == ncomp {
                        break;
                    }
                }
                _ => {}
            }
        }
        if !scanned {
            return Err(err("no scan before EOI"));
        }
        let comps = &comp_buf[..ncomp];
        let rgb = comps.len() == 3
            && match adobe_transform {
                Some(t) => t == 0,
                None => !jfif && comps.iter().map(|c| c.id).eq([b'R', b'G', b'B']),
            };
        let region = Region::new(crop, ow, oh);
        self.convert(comps, ow, rgb, &region, out);
        Ok(Outcome::Decoded(oh as u32, ow as u32))
    }

    /// Decodes one scan (see [`Self::decode_scan_body`]), compiled for BMI2
    /// where the CPU has it: the bit buffer's variable shifts, on the
    /// entropy decoder's critical path, become one-cycle `shlx`/`shrx`.
    fn decode_scan(&mut self, input: &ScanInput<'_>, region: &Region) -> Result<usize> {
        #[cfg(target_arch = "x86_64")]
        if self.isa != Isa::Scalar && std::arch::is_x86_feature_detected!("bmi2") {
            // SAFETY: the CPU has BMI2 (checked just above), all that
            // `decode_scan_bmi2` enables.
            return unsafe { self.decode_scan_bmi2(input, region) };
        }
        self.decode_scan_body(input, region)
    }

    /// [`Self::decode_scan_body`] compiled with BMI2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi2")]
    fn decode_scan_bmi2(&mut self, input: &ScanInput<'_>, region: &Region) -> Result<usize> {
        self.decode_scan_body(input, region)
    }

    /// Decodes one scan's MCUs into the planes: the DC and AC coefficients
    /// of every block, and the IDCT of the blocks `region` needs; returns
    /// the position after the last byte read.
    #[inline(always)]
    fn decode_scan_body(&mut self, input: &ScanInput<'_>, region: &Region) -> Result<usize> {
        let &ScanInput {
            jpeg,
            start,
            comps,
            scan,
            tables: (qt, qraw),
            size: (width, height, hmax, vmax),
            restart_interval,
        } = input;
        let err = |m: &str| corrupt(jpeg.len(), m);
        let mut bits = Bits::new(jpeg, start);
        let mut pred = [0i32; 3];
        let mut coef = [0i16; 64];
        // MCU grid: interleaved scans use the frame's MCU; a one-component
        // scan uses single blocks over that component's own size.
        let (mcux, mcuy) = if scan.len() == 1 {
            let c = &comps[scan[0].0];
            (c.blocks_x, c.blocks_y)
        } else {
            (width.div_ceil(8 * hmax), height.div_ceil(8 * vmax))
        };
        let mut rst = 0u8;
        // Per scan component, hoisted out of the MCU loop (they divide):
        // the sample rows and columns the region needs, and the blocks per
        // MCU.
        let mut needs = [((0, 0), (0, 0), (0, 0), 0); 4];
        for (need, &(k, _, _)) in needs.iter_mut().zip(scan) {
            let c = &comps[k];
            let (rows, cols) = region.samples(c, c.fh, c.fv);
            let blocks = if scan.len() == 1 { (1, 1) } else { (c.h, c.v) };
            // Samples per block side at this component's scale.
            *need = (rows, cols, blocks, 8usize >> c.shift);
        }
        // The last MCU row holding a block the region needs: the rest of
        // the scan cannot change the region's pixels (each block depends
        // only on the bits before it), so decoding stops there.
        let last_row = needs[..scan.len()]
            .iter()
            .map(|&((_, r1), _, (_, bv), bs)| (r1 - 1) / (bs * bv))
            .max()
            .unwrap_or(0);
        let total = mcux * mcuy.min(last_row + 1);
        // MCUs left until the next restart marker (0 = no restarts).
        let mut until_restart = restart_interval;
        let (mut mx, mut my) = (0usize, 0usize);
        for _ in 0..total {
            if restart_interval > 0 {
                if until_restart == 0 {
                    bits.restart(rst).map_err(err)?;
                    rst = (rst + 1) & 7;
                    pred = [0; 3];
                    until_restart = restart_interval;
                }
                until_restart -= 1;
            }
            for (si, (&(k, td, ta), &(rows, cols, (bh, bv), bs))) in
                scan.iter().zip(&needs).enumerate()
            {
                let (dct, act) = (&self.dc[td], &self.ac[ta]);
                let c = &comps[k];
                for by in 0..bv {
                    for bx in 0..bh {
                        let x0 = (mx * bh + bx) * bs;
                        let y0 = (my * bv + by) * bs;
                        let needed =
                            x0 < cols.1 && x0 + bs > cols.0 && y0 < rows.1 && y0 + bs > rows.0;
                        let diff = decode_dc(&mut bits, dct).map_err(err)?;
                        pred[si] = pred[si].wrapping_add(diff);
                        if !needed {
                            // Only the bit position and the DC prediction
                            // matter for a block the region does not use.
                            decode_ac::<false>(&mut bits, act, &mut coef).map_err(err)?;
                            continue;
                        }
                        coef.fill(0);
                        // libjpeg stores coefficients as 16-bit JCOEF.
                        coef[0] = pred[si] as i16;
                        let any_ac = decode_ac::<true>(&mut bits, act, &mut coef).map_err(err)?;
                        if x0 + bs <= c.pw && y0 + bs <= c.ph {
                            let plane = &mut self.planes[k][y0 * c.pw + x0..];
                            let q = &qt[c.tq];
                            if c.shift > 0 {
                                // Opt-in DCT-domain downscaling (not FFCV's pixels).
                                idct_scaled(self.isa, c.shift, &coef, &qraw[c.tq], plane, c.pw);
                            } else if any_ac {
                                idct_ifast(self.isa, &coef, q, plane, c.pw);
                            } else {
                                // DC only: both passes reduce to one value
                                // (libjpeg's zero-column and zero-row shortcuts).
                                let v = idct_limit(i32::from(coef[0]).wrapping_mul(q[0]));
                                for r in 0..8 {
                                    plane[r * c.pw..r * c.pw + 8].fill(v);
                                }
                            }
                        }
                    }
                }
            }
            mx += 1;
            if mx == mcux {
                mx = 0;
                my += 1;
            }
        }
        if bits.overran() {
            return Err(err("premature end of entropy-coded data"));
        }
        Ok(bits.pos)
    }

    /// Upsamples chroma as libjpeg-turbo's fancy upsampler and converts to RGB.
    fn convert(
        &mut self,
        comps: &[Component],
        width: usize,
        rgb_direct: bool,
        region: &Region,
        out: &mut [u8],
    ) {
        let (x0, x1) = (region.x0, region.x1);
        let lines = out
            .chunks_exact_mut(width * 3)
            .enumerate()
            .take(region.y1)
            .skip(region.y0);
        if comps.len() == 1 {
            let c = &comps[0];
            for (y, row) in lines {
                let src = &self.planes[0][y * c.pw + x0..y * c.pw + x1];
                for (px, &l) in row[x0 * 3..x1 * 3].chunks_exact_mut(3).zip(src) {
                    px.fill(l);
                }
            }
            return;
        }
        for (k, c) in comps.iter().enumerate() {
            let r = &mut self.rows[k];
            r.clear();
            r.resize(c.pw * c.fh + 2, 0);
        }
        let Self {
            planes, rows, isa, ..
        } = self;
        let isa = *isa;
        for (y, row) in lines {
            for (k, c) in comps.iter().enumerate() {
                upsample_row(isa, &planes[k], c, (c.fh, c.fv), y, (x0, x1), &mut rows[k]);
            }
            let (r0, r1, r2) = (&rows[0][x0..x1], &rows[1][x0..x1], &rows[2][x0..x1]);
            let row = &mut row[x0 * 3..x1 * 3];
            if rgb_direct {
                for (((px, &a), &b), &c) in row.chunks_exact_mut(3).zip(r0).zip(r1).zip(r2) {
                    px.copy_from_slice(&[a, b, c]);
                }
            } else {
                ycc_to_rgb_row(isa, r0, r1, r2, row);
            }
        }
    }
}

/// One scan to decode: the stream and where the scan's entropy-coded data starts, the
/// frame's components and the scan's `(component, DC table, AC table)` triples, the
/// quantisation tables (scaled for the IDCT, and as stored), the frame's
/// `(width, height, hmax, vmax)` and its restart interval. One value rather than seven
/// arguments through the BMI2 dispatch.
struct ScanInput<'a> {
    jpeg: &'a [u8],
    start: usize,
    comps: &'a [Component],
    scan: &'a [(usize, usize, usize)],
    tables: (&'a [[i32; 64]; 4], &'a [[i32; 64]; 4]),
    size: (usize, usize, usize, usize),
    restart_interval: usize,
}

/// The pixels a decode must get right: rows `y0..y1`, columns `x0..x1`.
struct Region {
    y0: usize,
    y1: usize,
    x0: usize,
    x1: usize,
}

impl Region {
    /// `crop` if it fits the `width x height` image, else the whole image.
    fn new(crop: Option<CropBox>, width: usize, height: usize) -> Self {
        match crop {
            Some(b) if b.fits(height as u32, width as u32) => Self {
                y0: b.i as usize,
                y1: (b.i + b.h) as usize,
                x0: b.j as usize,
                x1: (b.j + b.w) as usize,
            },
            _ => Self {
                y0: 0,
                y1: height,
                x0: 0,
                x1: width,
            },
        }
    }

    /// The sample rows and columns (half-open, in component `c`'s plane)
    /// that the region's pixels read when `c` is upsampled by `(fh, fv)`:
    /// the samples under the region plus one on each side of a 2x axis,
    /// the neighbours fancy upsampling blends in (clamped to the real
    /// samples, as the upsampler clamps its context).
    fn samples(&self, c: &Component, fh: usize, fv: usize) -> ((usize, usize), (usize, usize)) {
        let span = |a: usize, b: usize, f: usize, n: usize| {
            let margin = usize::from(f == 2);
            let lo = (a / f).min(n - 1).saturating_sub(margin);
            let hi = ((b - 1) / f + margin).min(n - 1) + 1;
            (lo, hi)
        };
        (
            span(self.y0, self.y1, fv, c.dh),
            span(self.x0, self.x1, fh, c.dw),
        )
    }
}

/// [`ycc_to_rgb`] over a row: `y`, `cb`, `cr` and `out` (3 bytes a pixel)
/// of the same pixel count.
pub(super) fn ycc_to_rgb_row(isa: Isa, y: &[u8], cb: &[u8], cr: &[u8], out: &mut [u8]) {
    let done = match isa {
        Isa::Scalar => 0,
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
        Isa::Avx2 => unsafe { super::simd::ycc_to_rgb_row_avx2(y, cb, cr, out) },
    };
    let (y, cb, cr) = (&y[done..], &cb[done..], &cr[done..]);
    for (((px, &yy), &cb), &cr) in out[3 * done..].chunks_exact_mut(3).zip(y).zip(cb).zip(cr) {
        px.copy_from_slice(&ycc_to_rgb(yy, cb, cr));
    }
}

/// jdcolor's `ycc_rgb_convert` with its 16-bit fixed-point tables.
fn ycc_to_rgb(y: u8, cb: u8, cr: u8) -> [u8; 3] {
    const HALF: i32 = 1 << 15;
    let (y, cb, cr) = (i32::from(y), i32::from(cb) - 128, i32::from(cr) - 128);
    let r = y + ((91881 * cr + HALF) >> 16);
    let g = y + ((-22554 * cb + HALF - 46802 * cr) >> 16);
    let b = y + ((116130 * cb + HALF) >> 16);
    [r, g, b].map(|v| v.clamp(0, 255) as u8)
}

/// Produces output columns `x0..x1` of row `y` of component `c` upsampled
/// by `(fh, fv)` (each 1 or 2) into `dst[x0..x1]` (neighbouring columns may
/// be written too), the way libjpeg-turbo's fancy upsampler does: triangle
/// filters with its biases, context rows clamped to the component's real
/// rows, and plain replication when the component is 2 or fewer samples
/// wide. Only the columns a crop needs are computed: the upsampler's value
/// at a column depends on its sample and the two beside it, nothing else.
fn upsample_row(
    isa: Isa,
    plane: &[u8],
    c: &Component,
    (fh, fv): (usize, usize),
    y: usize,
    (x0, x1): (usize, usize),
    dst: &mut [u8],
) {
    let row = |r: usize| &plane[r * c.pw..r * c.pw + c.dw];
    let iy = (y / fv).min(c.dh - 1);
    let fancy = c.dw > 2;
    // The samples under output columns x0..x1.
    let (s0, s1) = if fh == 2 {
        (x0 / 2, x1.div_ceil(2).min(c.dw))
    } else {
        (x0, x1.min(c.dw))
    };
    match (fh, fv) {
        (1, 1) => dst[s0..s1].copy_from_slice(&row(iy)[s0..s1]),
        (2, 1) if fancy => h2v1_fancy(isa, row(iy), (s0, s1), dst),
        (2, 1) => replicate2(row(iy), dst),
        (1, 2) => {
            // h1v2 is fancy whenever fancy upsampling is on (no width rule).
            let (near, bias) = neighbour(y, iy, c.dh);
            let (a, b) = (&row(iy)[s0..s1], &row(near)[s0..s1]);
            for ((d, &a), &b) in dst[s0..s1].iter_mut().zip(a).zip(b) {
                *d = ((u32::from(a) * 3 + u32::from(b) + bias) >> 2) as u8;
            }
        }
        _ if fancy => {
            let (near, _) = neighbour(y, iy, c.dh);
            h2v2_fancy(isa, row(iy), row(near), (s0, s1), dst);
        }
        _ => replicate2(row(iy), dst),
    }
}

/// The context row for output row `y` of a 2x vertical upsampling: the row
/// above for even `y`, below for odd `y`, clamped to the real rows; and the
/// h1v2 rounding bias (1 above, 2 below).
fn neighbour(y: usize, iy: usize, dh: usize) -> (usize, u32) {
    if y.is_multiple_of(2) {
        (iy.saturating_sub(1), 1)
    } else {
        ((iy + 1).min(dh - 1), 2)
    }
}

fn replicate2(src: &[u8], dst: &mut [u8]) {
    for (d, &s) in dst.chunks_exact_mut(2).zip(src) {
        d.fill(s);
    }
}

/// libjpeg-turbo's h2v1 fancy upsampling of samples `s0..s1` of `src` into
/// `dst[2 * s0..2 * s1]`. Its edge outputs (the first and last) equal the
/// general formula with the missing neighbour replaced by the edge sample,
/// so clamping the neighbour index reproduces them exactly.
pub(super) fn h2v1_fancy(isa: Isa, src: &[u8], (s0, s1): (usize, usize), dst: &mut [u8]) {
    let n = src.len();
    let s = |i: usize| u32::from(src[i]);
    let inner = (s0.max(1), s1.min(n - 1).max(s0.max(1)));
    let edge = |i: usize, dst: &mut [u8]| {
        let v = s(i) * 3;
        dst[2 * i] = ((v + s(i.saturating_sub(1)) + 1) >> 2) as u8;
        dst[2 * i + 1] = ((v + s((i + 1).min(n - 1)) + 2) >> 2) as u8;
    };
    for i in s0..inner.0 {
        edge(i, dst);
    }
    let start = match isa {
        Isa::Scalar => inner.0,
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
        Isa::Avx2 => unsafe { super::simd::h2v1_fancy_avx2(src, inner, dst) },
    };
    let out = &mut dst[2 * start..2 * inner.1];
    let win = &src[start - 1..inner.1 + 1];
    for (d, w) in out.chunks_exact_mut(2).zip(win.windows(3)) {
        let v = u32::from(w[1]) * 3;
        d[0] = ((v + u32::from(w[0]) + 1) >> 2) as u8;
        d[1] = ((v + u32::from(w[2]) + 2) >> 2) as u8;
    }
    for i in inner.1.max(s0)..s1 {
        edge(i, dst);
    }
}

/// libjpeg-turbo's h2v2 fancy upsampling of samples `s0..s1` (this row
/// weighted 3, the context row 1) into `dst[2 * s0..2 * s1]`; edges as in
/// [`h2v1_fancy`] (biases 8 for the left output of a pair, 7 the right).
pub(super) fn h2v2_fancy(
    isa: Isa,
    this: &[u8],
    near: &[u8],
    (s0, s1): (usize, usize),
    dst: &mut [u8],
) {
    let n = this.len();
    let col = |i: usize| u32::from(this[i]) * 3 + u32::from(near[i]);
    let inner = (s0.max(1), s1.min(n - 1).max(s0.max(1)));
    let edge = |i: usize, dst: &mut [u8]| {
        let v = col(i) * 3;
        dst[2 * i] = ((v + col(i.saturating_sub(1)) + 8) >> 4) as u8;
        dst[2 * i + 1] = ((v + col((i + 1).min(n - 1)) + 7) >> 4) as u8;
    };
    for i in s0..inner.0 {
        edge(i, dst);
    }
    let start = match isa {
        Isa::Scalar => inner.0,
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
        Isa::Avx2 => unsafe { super::simd::h2v2_fancy_avx2(this, near, inner, dst) },
    };
    let out = &mut dst[2 * start..2 * inner.1];
    let t = &this[start - 1..inner.1 + 1];
    let u = &near[start - 1..inner.1 + 1];
    for ((d, a), b) in out.chunks_exact_mut(2).zip(t.windows(3)).zip(u.windows(3)) {
        let c = |k: usize| u32::from(a[k]) * 3 + u32::from(b[k]);
        let v = c(1) * 3;
        d[0] = ((v + c(0) + 8) >> 4) as u8;
        d[1] = ((v + c(2) + 7) >> 4) as u8;
    }
    for i in inner.1.max(s0)..s1 {
        edge(i, dst);
    }
}

#[cfg(test)]
mod tests {
    //! The entropy decoder's symbol rules on hand-made streams: what the
    //! one-lookup table, the packed partial entries and the long codes must
    //! all read as libjpeg does.

    use super::{Bits, Huffman, decode_ac, decode_dc};

    /// Packs a string of '0'/'1' into entropy-coded bytes (1-padded, with a
    /// zero stuffed after each 0xFF, as an encoder writes them).
    fn stream(bits: &str) -> Vec<u8> {
        let mut padded: Vec<u8> = bits.bytes().map(|b| b - b'0').collect();
        while !padded.len().is_multiple_of(8) {
            padded.push(1);
        }
        let mut out = Vec::new();
        for byte in padded.chunks(8) {
            let b = byte.iter().fold(0u8, |acc, &bit| acc << 1 | bit);
            out.push(b);
            if b == 0xFF {
                out.push(0);
            }
        }
        out
    }

    /// An AC table whose codes are 00 EOB, 01 (0/1), 100 ZRL, 101 (1/0),
    /// 110 (0/10: code and value bits overflow the lookahead) and the
    /// 12-bit 1110_0000_0000 (2/1: longer than the lookahead).
    fn ac_table() -> Huffman {
        let mut counts = [0u8; 16];
        counts[1] = 2;
        counts[2] = 3;
        counts[11] = 1;
        let mut h = Huffman::default();
        h.set(&counts, &[0x00, 0x01, 0xF0, 0x10, 0x0A, 0x21], false)
            .unwrap();
        h
    }

    #[test]
    fn ac_symbols_decode_as_libjpeg_reads_them() {
        let h = ac_table();
        // Block 1: +1 at 1, 16 zeros, 512 at 18, run 2 then -1 at 21, then
        // (1/0), which libjpeg reads as the end of block. Block 2: EOB.
        // Then a sentinel byte.
        let bits = "011".to_owned()
            + "100"
            + "1101000000000"
            + "1110000000000"
            + "101"
            + "00"
            + "10110011";
        let data = stream(&bits);
        for store in [true, false] {
            let mut b = Bits::new(&data, 0);
            let mut coef = [0i16; 64];
            let any = if store {
                decode_ac::<true>(&mut b, &h, &mut coef)
            } else {
                decode_ac::<false>(&mut b, &h, &mut coef)
            };
            assert_eq!(any, Ok(true));
            let mut expected = [0i16; 64];
            if store {
                // Zig-zag 1, 18, 21 are natural 1, 26, 48.
                expected[1] = 1;
                expected[26] = 512;
                expected[48] = -1;
            }
            assert_eq!(coef, expected, "store {store}");
            let mut empty = [0i16; 64];
            assert_eq!(decode_ac::<true>(&mut b, &h, &mut empty), Ok(false));
            assert_eq!(empty, [0; 64]);
            assert_eq!(b.bits(8), 0b1011_0011, "store {store}: bits out of step");
            assert!(!b.overran());
        }
    }

    #[test]
    fn an_unknown_ac_code_is_an_error() {
        let h = ac_table();
        // 1111_1111_1111_1111 is no code of the table (stuffed as 0xFF 0x00).
        let data = stream("1111111111111111");
        let mut coef = [0i16; 64];
        let got = decode_ac::<true>(&mut Bits::new(&data, 0), &h, &mut coef);
        assert_eq!(got, Err("bad Huffman code"));
    }

    #[test]
    fn dc_differences_decode_through_both_paths() {
        // Codes: 0 (size 0), 10 (size 9: 11 bits with its value, past the
        // lookahead), 110 (size 17: not a DC size).
        let mut counts = [0u8; 16];
        counts[0] = 1;
        counts[1] = 1;
        counts[2] = 1;
        let mut h = Huffman::default();
        h.set(&counts, &[0, 9, 17], true).unwrap();
        let data = stream(&("0".to_owned() + "10000000000" + "10111111111" + "110"));
        let mut b = Bits::new(&data, 0);
        assert_eq!(decode_dc(&mut b, &h), Ok(0));
        assert_eq!(decode_dc(&mut b, &h), Ok(-511));
        assert_eq!(decode_dc(&mut b, &h), Ok(511));
        assert_eq!(decode_dc(&mut b, &h), Err("bad DC coefficient size"));
    }
}
