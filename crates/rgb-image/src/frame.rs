//! A JPEG's frame header (the SOFn segment), parsed in one place: the fast decoder, the
//! accurate decoder, [`super::jpeg_info`] and the loader's pre-decode checks all read the
//! frame through [`JpegFrame`], so the size, component list and sampling factors mean the
//! same thing everywhere.

/// One component of a frame header: `id, HhVv, Tq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameComponent {
    /// The component identifier scans refer to.
    pub id: u8,
    /// Horizontal sampling factor (valid: 1..=4).
    pub h: u8,
    /// Vertical sampling factor (valid: 1..=4).
    pub v: u8,
    /// Quantization table selector (valid: 0..=3).
    pub tq: u8,
}

impl FrameComponent {
    /// Whether the sampling factors and the table selector are in the ranges the JPEG
    /// standard allows (libjpeg refuses the rest as "bad component sampling or table").
    pub fn is_valid(&self) -> bool {
        (1..=4).contains(&self.h) && (1..=4).contains(&self.v) && self.tq <= 3
    }
}

/// What a frame header says, borrowed from the JPEG bytes (nothing is allocated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JpegFrame<'a> {
    /// The SOFn marker code (`0xC0` baseline, `0xC1` extended sequential, `0xC2`
    /// progressive, ...).
    pub marker: u8,
    /// Sample precision in bits (8 for every file FFCV writes).
    pub precision: u8,
    /// Height in pixels (0 means "given later by a DNL marker").
    pub height: u16,
    /// Width in pixels.
    pub width: u16,
    /// The number of components the header declares.
    pub count: u8,
    /// The component list as stored; shorter than `3 * count` in a truncated header.
    list: &'a [u8],
}

impl<'a> JpegFrame<'a> {
    /// Whether `marker` starts a frame header: `0xC0..=0xCF` except DHT (`0xC4`), JPG
    /// (`0xC8`) and DAC (`0xCC`).
    pub fn is_frame_marker(marker: u8) -> bool {
        matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC)
    }

    /// Reads the frame header segment `seg` (the bytes after the length field) of
    /// `marker`; `None` if it is shorter than its fixed part (precision, size, count).
    pub fn parse(marker: u8, seg: &'a [u8]) -> Option<Self> {
        let fixed = seg.get(..6)?;
        Some(Self {
            marker,
            precision: fixed[0],
            height: u16::from_be_bytes([fixed[1], fixed[2]]),
            width: u16::from_be_bytes([fixed[3], fixed[4]]),
            count: fixed[5],
            list: &seg[6..],
        })
    }

    /// Finds and reads the frame header of `jpeg` by walking its marker segments, without
    /// allocating; `None` if the bytes are not a JPEG, end, or start a scan before one.
    pub fn find(jpeg: &'a [u8]) -> Option<Self> {
        let be16 = |at: usize| Some(u16::from_be_bytes([*jpeg.get(at)?, *jpeg.get(at + 1)?]));
        if jpeg.get(..2)? != [0xFF, 0xD8] {
            return None;
        }
        let mut at = 2;
        loop {
            if *jpeg.get(at)? != 0xFF {
                return None;
            }
            // Fill bytes: any number of 0xFF before the marker code.
            while *jpeg.get(at)? == 0xFF {
                at += 1;
            }
            let marker = *jpeg.get(at)?;
            at += 1;
            match marker {
                // Markers without a length.
                0x01 | 0xD0..=0xD8 => continue,
                // End of image or start of scan before any frame header.
                0xD9 | 0xDA => return None,
                _ => {}
            }
            let len = usize::from(be16(at)?);
            if Self::is_frame_marker(marker) {
                // A segment cut short by the end of the data is read as far as it goes.
                let end = jpeg.len().min(at + len.max(2));
                return Self::parse(marker, jpeg.get(at + 2..end)?);
            }
            if len < 2 {
                return None;
            }
            at += len;
        }
    }

    /// Whether this is a Huffman-coded sequential frame (SOF0, SOF1), the only kind the
    /// fast decoder handles and every FFCV-written JPEG has.
    pub fn is_huffman_sequential(&self) -> bool {
        matches!(self.marker, 0xC0 | 0xC1)
    }

    /// Whether this is a Huffman-coded progressive frame (SOF2).
    pub fn is_progressive(&self) -> bool {
        self.marker == 0xC2
    }

    /// The declared components, or `None` if the header is too short to hold them.
    pub fn components(&self) -> Option<impl ExactSizeIterator<Item = FrameComponent> + 'a> {
        let list = self.list.get(..3 * usize::from(self.count))?;
        Some(list.chunks_exact(3).map(|c| FrameComponent {
            id: c[0],
            h: c[1] >> 4,
            v: c[1] & 15,
            tq: c[2],
        }))
    }

    /// For Huffman-coded sequential frames, the fewest bytes an entropy-coded scan of the
    /// whole frame can take: every 8x8 block codes at least its DC difference and one AC
    /// symbol (EOB or a coefficient), each at least one bit. `None` for other frames
    /// (progressive scans can skip runs of blocks with one EOBRUN symbol, so no such bound
    /// holds), a short component list, or a sampling factor of 0 (the decoder then reports
    /// the damage itself).
    pub fn min_scan_bytes(&self) -> Option<u64> {
        if !self.is_huffman_sequential() {
            return None;
        }
        let n = usize::from(self.count);
        let mut sampling = [(0u64, 0u64); 255];
        let (mut hmax, mut vmax) = (1, 1);
        for (slot, c) in sampling.iter_mut().zip(self.components()?) {
            let (h, v) = (u64::from(c.h), u64::from(c.v));
            if h == 0 || v == 0 {
                return None;
            }
            (hmax, vmax) = (hmax.max(h), vmax.max(v));
            *slot = (h, v);
        }
        let (h, w) = (u64::from(self.height), u64::from(self.width));
        // A component's blocks, counted without the padding of interleaved MCUs (fewer
        // blocks, so the bound stays a lower bound for either scan layout).
        let blocks: u64 = sampling[..n]
            .iter()
            .map(|&(ch, cv)| {
                let (ch, cv) = if n == 1 { (1, 1) } else { (ch, cv) };
                let (hm, vm) = if n == 1 { (1, 1) } else { (hmax, vmax) };
                (w * ch).div_ceil(hm).div_ceil(8) * (h * cv).div_ceil(vm).div_ceil(8)
            })
            .sum();
        Some((2 * blocks).div_ceil(8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SyntheticImageSpec, synthetic_jpeg};

    fn frame_size(jpeg: &[u8]) -> Option<(u16, u16)> {
        JpegFrame::find(jpeg).map(|f| (f.height, f.width))
    }

    /// The fewest scan bytes of an 8-bit SOF0 frame whose component list is `list`
    /// (`n`, then `id, HhVv, Tq` per component).
    fn min_scan_bytes(list: &[u8], height: u16, width: u16) -> Option<u64> {
        let mut seg = vec![8];
        seg.extend(height.to_be_bytes());
        seg.extend(width.to_be_bytes());
        seg.extend(list);
        JpegFrame::parse(0xC0, &seg)?.min_scan_bytes()
    }

    #[test]
    fn frame_size_reads_the_header_and_refuses_damage() {
        let spec = SyntheticImageSpec {
            min_side: 20,
            max_side: 70,
        };
        for i in 0..8 {
            let (jpeg, w, h) = synthetic_jpeg(1, i, spec, 80).unwrap();
            assert_eq!(frame_size(&jpeg), Some((h as u16, w as u16)));
            // Every truncation either still holds the header or is refused; none panics.
            for cut in 0..jpeg.len().min(700) {
                let got = frame_size(&jpeg[..cut]);
                assert!(got.is_none() || got == Some((h as u16, w as u16)));
            }
        }
        assert_eq!(frame_size(b"\xFF\xD8\xFF\xDA\x00\x02"), None);
        assert_eq!(frame_size(b"PNG"), None);
    }

    #[test]
    fn the_frame_of_an_encoded_jpeg_is_baseline_4_2_0() {
        let spec = SyntheticImageSpec {
            min_side: 40,
            max_side: 40,
        };
        let (jpeg, _, _) = synthetic_jpeg(1, 0, spec, 90).unwrap();
        let frame = JpegFrame::find(&jpeg).unwrap();
        assert!(frame.is_huffman_sequential() && !frame.is_progressive());
        assert_eq!((frame.precision, frame.count), (8, 3));
        let comps: Vec<_> = frame.components().unwrap().collect();
        assert_eq!(
            comps.iter().map(|c| (c.h, c.v)).collect::<Vec<_>>(),
            [(2, 2), (1, 1), (1, 1)]
        );
        assert!(comps.iter().all(FrameComponent::is_valid));
    }

    #[test]
    fn parse_needs_the_fixed_part_and_components_the_full_list() {
        assert_eq!(JpegFrame::parse(0xC0, &[8, 0, 16, 0, 24]), None);
        let seg = [8, 0, 16, 0, 24, 2, 1, 0x22, 0, 2, 0x11];
        let frame = JpegFrame::parse(0xC0, &seg).unwrap();
        assert_eq!((frame.height, frame.width, frame.count), (16, 24, 2));
        assert!(frame.components().is_none());
        assert_eq!(frame.min_scan_bytes(), None);
        let bad = |h, v, tq| !FrameComponent { id: 1, h, v, tq }.is_valid();
        assert!(bad(5, 1, 0) && bad(0, 1, 0) && bad(1, 1, 4));
        assert!(!bad(4, 4, 3));
        assert!(JpegFrame::is_frame_marker(0xC2) && !JpegFrame::is_frame_marker(0xC4));
        assert!(!JpegFrame::is_frame_marker(0xC8) && !JpegFrame::is_frame_marker(0xCC));
    }

    #[test]
    fn real_jpegs_are_longer_than_their_minimal_scan() {
        let spec = SyntheticImageSpec {
            min_side: 8,
            max_side: 300,
        };
        for i in 0..16 {
            let (jpeg, w, h) = synthetic_jpeg(3, i, spec, 50).unwrap();
            let min = JpegFrame::find(&jpeg).unwrap().min_scan_bytes().unwrap();
            assert!(min > 0 && (jpeg.len() as u64) > min, "{w}x{h}: {min}");
        }
    }

    #[test]
    fn minimal_scan_counts_blocks_per_component() {
        // Gray 16x16: 4 blocks, 8 bits, 1 byte.
        assert_eq!(min_scan_bytes(&[1, 1, 0x11, 0], 16, 16), Some(1));
        // 4:2:0 YCbCr 65000x65000: 8125^2 luma + 2 x 4063^2 chroma blocks, 2 bits each.
        let ycc = [3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1];
        let blocks = 8125u64 * 8125 + 2 * 4063 * 4063;
        assert_eq!(
            min_scan_bytes(&ycc, 65000, 65000),
            Some((2 * blocks).div_ceil(8))
        );
        // A zero sampling factor or a short list gives no bound.
        assert_eq!(min_scan_bytes(&[3, 1, 0x22, 0, 2, 0x01, 1], 8, 8), None);
        assert_eq!(min_scan_bytes(&[1, 1, 0x10, 0], 8, 8), None);
        // Progressive frames have none either.
        let seg = [8, 0, 8, 0, 8, 1, 1, 0x11, 0];
        assert_eq!(JpegFrame::parse(0xC2, &seg).unwrap().min_scan_bytes(), None);
    }
}
