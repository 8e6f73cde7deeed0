//! The resizer's output pass with the pipeline's first element-wise steps folded in: a
//! per-channel table from each `u8` value to the bytes of an output element (a normalize
//! or a conversion), an optional left-right flip and an optional HWC → CHW layout, applied
//! to each output row while it is still in cache, so that the `u8` crop is never written
//! out whole and read back.
//!
//! [`PixelMap`] holds what does not change between samples; the flip is decided per
//! sample by the caller. Every output element is a table entry, so the result is the
//! element-wise pipeline's by construction: the table is the one the pipeline's own
//! operation uses.

use super::{ImageError, Result};

const CN: usize = 3;

/// How the resizer's `u8` RGB output rows become output elements: `table[(v * 3 + c) *
/// elem .. + elem]` are the bytes written for value `v` of channel `c`.
#[derive(Clone, Debug, PartialEq)]
pub struct PixelMap {
    table: Vec<u8>,
    planes: Planes,
    elem: usize,
    chw: bool,
}

impl PixelMap {
    /// A map from a table of `256 * 3` entries of `elem_bytes` bytes each (entry `v * 3 +
    /// c` for value `v` of channel `c`), writing `[3, H, W]` when `chw`, else `[H, W, 3]`.
    /// `elem_bytes` is 1, 2, 4 or 8.
    pub fn new(table: Vec<u8>, elem_bytes: usize, chw: bool) -> Result<PixelMap> {
        if !matches!(elem_bytes, 1 | 2 | 4 | 8) {
            return Err(ImageError::BadSetting(format!(
                "a pixel map's element is 1, 2, 4 or 8 bytes, not {elem_bytes}"
            )));
        }
        if table.len() != 256 * CN * elem_bytes {
            return Err(ImageError::BadSetting(format!(
                "a pixel map's table holds {} bytes, not 256 x 3 entries of {elem_bytes}",
                table.len()
            )));
        }
        Ok(PixelMap {
            planes: Planes::new(&table, elem_bytes),
            table,
            elem: elem_bytes,
            chw,
        })
    }

    /// The identity map on `u8` (a flip and/or the CHW layout alone).
    pub fn identity(chw: bool) -> PixelMap {
        let table: Vec<u8> = (0..256 * CN).map(|i| (i / CN) as u8).collect();
        PixelMap {
            planes: Planes::new(&table, 1),
            table,
            elem: 1,
            chw,
        }
    }

    /// Bytes of one output element.
    pub fn elem_bytes(&self) -> usize {
        self.elem
    }

    /// Whether the output is `[3, H, W]`.
    pub fn chw(&self) -> bool {
        self.chw
    }

    /// Output bytes of an `h x w` image.
    pub fn output_bytes(&self, h: u32, w: u32) -> usize {
        h as usize * w as usize * CN * self.elem
    }

    /// Writes output row `y` of an `h x w` image from its packed `u8` RGB row.
    pub(crate) fn write_row(
        &self,
        row: &[u8],
        y: usize,
        h: usize,
        w: usize,
        flip: bool,
        out: &mut [u8],
    ) {
        let geo = Geometry {
            y,
            h,
            w,
            flip,
            chw: self.chw,
        };
        match &self.planes {
            Planes::B1(t) => spread(t, row, geo, out),
            Planes::B2(t) => spread(t, row, geo, out),
            Planes::B4(t) => spread(t, row, geo, out),
            Planes::B8(t) => spread(t, row, geo, out),
        }
    }
}

/// The table split per channel and typed by element size, so that a lookup is one
/// indexed load by the `u8` value (no bounds check) and a store one move.
#[derive(Clone, Debug, PartialEq)]
enum Planes {
    B1(Box<[[u8; 256]; CN]>),
    B2(Box<[[u16; 256]; CN]>),
    B4(Box<[[u32; 256]; CN]>),
    B8(Box<[[u64; 256]; CN]>),
}

impl Planes {
    fn new(table: &[u8], elem: usize) -> Planes {
        fn split<T: Elem>(table: &[u8]) -> Box<[[T; 256]; CN]> {
            let mut p = Box::new([[T::ZERO; 256]; CN]);
            for (i, e) in table.chunks_exact(T::BYTES).enumerate() {
                p[i % CN][i / CN] = T::from_bytes(e);
            }
            p
        }
        match elem {
            1 => Planes::B1(split(table)),
            2 => Planes::B2(split(table)),
            4 => Planes::B4(split(table)),
            _ => Planes::B8(split(table)),
        }
    }
}

/// An output element: its bytes in memory order (native-endian, as the table holds them).
trait Elem: Copy {
    const BYTES: usize;
    const ZERO: Self;
    fn from_bytes(b: &[u8]) -> Self;
    fn put(self, d: &mut [u8]);
}

macro_rules! elem {
    ($t:ty) => {
        impl Elem for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            const ZERO: Self = 0;
            fn from_bytes(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().expect("one element"))
            }
            #[inline(always)]
            fn put(self, d: &mut [u8]) {
                d.copy_from_slice(&self.to_ne_bytes());
            }
        }
    };
}
elem!(u8);
elem!(u16);
elem!(u32);
elem!(u64);

/// Where one output row goes.
#[derive(Clone, Copy)]
struct Geometry {
    y: usize,
    h: usize,
    w: usize,
    flip: bool,
    chw: bool,
}

/// One output row through per-channel tables `t`.
fn spread<T: Elem>(t: &[[T; 256]; CN], row: &[u8], g: Geometry, out: &mut [u8]) {
    let (e, w) = (T::BYTES, g.w);
    let row = &row[..w * CN];
    if g.chw {
        for (c, tc) in t.iter().enumerate() {
            let start = (c * g.h + g.y) * w * e;
            let plane = &mut out[start..start + w * e];
            let dsts = plane.chunks_exact_mut(e);
            let srcs = row.chunks_exact(CN);
            if g.flip {
                dsts.rev()
                    .zip(srcs)
                    .for_each(|(d, s)| tc[usize::from(s[c])].put(d));
            } else {
                dsts.zip(srcs)
                    .for_each(|(d, s)| tc[usize::from(s[c])].put(d));
            }
        }
    } else {
        let start = g.y * w * CN * e;
        let line = &mut out[start..start + w * CN * e];
        let dsts = line.chunks_exact_mut(CN * e);
        let srcs = row.chunks_exact(CN);
        let px = |d: &mut [u8], s: &[u8]| {
            t[0][usize::from(s[0])].put(&mut d[..e]);
            t[1][usize::from(s[1])].put(&mut d[e..2 * e]);
            t[2][usize::from(s[2])].put(&mut d[2 * e..3 * e]);
        };
        if g.flip {
            dsts.rev().zip(srcs).for_each(|(d, s)| px(d, s));
        } else {
            dsts.zip(srcs).for_each(|(d, s)| px(d, s));
        }
    }
}

/// Where the resizer writes its output rows: straight into a packed `u8` image, or into
/// one row buffer that a [`PixelMap`] spreads into the output.
pub(crate) trait RowSink {
    /// The buffer output row `y` is written into (`dw * 3` bytes).
    fn row(&mut self, y: usize) -> &mut [u8];
    /// Output row `y` is complete.
    fn finish(&mut self, y: usize);
}

/// A packed `u8` `[H, W, 3]` destination.
pub(crate) struct Packed<'a> {
    pub(crate) dst: &'a mut [u8],
    pub(crate) row: usize,
}

impl RowSink for Packed<'_> {
    fn row(&mut self, y: usize) -> &mut [u8] {
        &mut self.dst[y * self.row..(y + 1) * self.row]
    }
    fn finish(&mut self, _: usize) {}
}

/// Rows through a [`PixelMap`] into `out`.
pub(crate) struct Mapped<'a> {
    pub(crate) map: &'a PixelMap,
    pub(crate) buf: &'a mut Vec<u8>,
    pub(crate) out: &'a mut [u8],
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) flip: bool,
}

impl RowSink for Mapped<'_> {
    fn row(&mut self, _: usize) -> &mut [u8] {
        let n = self.w * CN;
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        &mut self.buf[..n]
    }
    fn finish(&mut self, y: usize) {
        self.map
            .write_row(self.buf, y, self.h, self.w, self.flip, self.out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(h: usize, w: usize) -> Vec<u8> {
        (0..h * w * CN).map(|i| (i * 37 % 251) as u8).collect()
    }

    /// The plain definition: flip, then the table, then the layout, one element at a time.
    fn reference(map: &PixelMap, img: &[u8], h: usize, w: usize, flip: bool) -> Vec<u8> {
        let e = map.elem_bytes();
        let mut out = vec![0; h * w * CN * e];
        for y in 0..h {
            for x in 0..w {
                for c in 0..CN {
                    let sx = if flip { w - 1 - x } else { x };
                    let v = usize::from(img[(y * w + sx) * CN + c]);
                    let at = if map.chw() {
                        (c * h + y) * w + x
                    } else {
                        (y * w + x) * CN + c
                    };
                    let t = (v * CN + c) * e;
                    out[at * e..at * e + e].copy_from_slice(&map.table[t..t + e]);
                }
            }
        }
        out
    }

    #[test]
    fn rows_agree_with_the_element_wise_definition() {
        let (h, w) = (5, 7);
        let img = image(h, w);
        for e in [1usize, 2, 4, 8] {
            let table: Vec<u8> = (0..256 * CN * e).map(|i| (i * 13 % 256) as u8).collect();
            for chw in [false, true] {
                let map = PixelMap::new(table.clone(), e, chw).unwrap();
                for flip in [false, true] {
                    let mut out = vec![0xAA; map.output_bytes(h as u32, w as u32)];
                    for y in 0..h {
                        map.write_row(&img[y * w * CN..], y, h, w, flip, &mut out);
                    }
                    assert_eq!(out, reference(&map, &img, h, w, flip), "e={e} chw={chw}");
                }
            }
        }
    }

    #[test]
    fn identity_keeps_values_and_bad_tables_are_refused() {
        let img = image(2, 3);
        let map = PixelMap::identity(false);
        let mut out = vec![0; 18];
        for y in 0..2 {
            map.write_row(&img[y * 9..], y, 2, 3, false, &mut out);
        }
        assert_eq!(out, img);
        assert!(PixelMap::new(vec![0; 768 * 3], 3, false).is_err());
        assert!(PixelMap::new(vec![0; 767 * 4], 4, false).is_err());
    }
}
