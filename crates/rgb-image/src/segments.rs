//! A JPEG's marker segments, read in one place: the fast decoder ([`super::turbo`]) and
//! the accurate one ([`super::accurate`]) walk the markers, and read the Huffman tables
//! (DHT), quantisation tables (DQT), restart interval (DRI) and the JFIF and Adobe
//! application segments through this module, so that the byte rules and the error
//! messages are the same for both. What each decoder does with a table (libjpeg's
//! `IFAST` scaling, or none) stays in the decoder.

/// Zig-zag position → natural (row-major) index in an 8×8 block, with 16 extra entries
/// pointing at 63 so that a corrupt run length cannot index out of the block (libjpeg's
/// `jpeg_natural_order` does the same). The first 64 entries are the order itself.
pub(super) const NATURAL_ORDER: [usize; 80] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63,
];

/// What the walk over a JPEG's markers met next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step<'a> {
    /// A marker with a length-prefixed segment (every marker but SOI, EOI, RSTn and TEM):
    /// its code and the segment's bytes after the length.
    Segment {
        /// The marker code (`0xC0` SOF0, `0xC4` DHT, `0xDA` SOS, …).
        marker: u8,
        /// The segment after its two length bytes.
        body: &'a [u8],
    },
    /// The EOI marker.
    EndOfImage,
    /// The data ended before an EOI marker.
    EndOfData,
}

/// The walk over a JPEG's markers, from just after SOI. Fill bytes (`0xFF` runs) and any
/// stray bytes before a marker are skipped, as libjpeg's `next_marker` does; markers
/// without a segment (RSTn, TEM, and a stuffed `0x00`) are stepped over.
#[derive(Debug, Clone)]
pub(super) struct Segments<'a> {
    jpeg: &'a [u8],
    pos: usize,
}

impl<'a> Segments<'a> {
    /// Starts after the SOI marker; the error when `jpeg` does not start with one.
    pub(super) fn new(jpeg: &'a [u8]) -> Result<Self, &'static str> {
        if !jpeg.starts_with(&[0xFF, 0xD8]) {
            return Err("missing SOI marker");
        }
        Ok(Segments { jpeg, pos: 2 })
    }

    /// The next marker; the error for a segment that runs past the end of the data or
    /// declares a length under 2.
    pub(super) fn next_step(&mut self) -> Result<Step<'a>, &'static str> {
        let (jpeg, len) = (self.jpeg, self.jpeg.len());
        loop {
            while self.pos < len && jpeg[self.pos] != 0xFF {
                self.pos += 1;
            }
            while self.pos < len && jpeg[self.pos] == 0xFF {
                self.pos += 1;
            }
            let Some(&marker) = jpeg.get(self.pos) else {
                return Ok(Step::EndOfData);
            };
            self.pos += 1;
            match marker {
                0xD9 => return Ok(Step::EndOfImage),
                0xD0..=0xD7 | 0x01 | 0x00 => continue,
                _ => {}
            }
            let Some(b) = jpeg.get(self.pos..self.pos + 2) else {
                return Err("truncated marker segment");
            };
            let seg_len = usize::from(u16::from_be_bytes([b[0], b[1]]));
            let Some(body) = (seg_len >= 2)
                .then(|| jpeg.get(self.pos + 2..self.pos + seg_len))
                .flatten()
            else {
                return Err("truncated marker segment");
            };
            self.pos += seg_len;
            return Ok(Step::Segment { marker, body });
        }
    }

    /// Where the walk stands: just after the last segment returned, which for an SOS is
    /// where the scan's entropy-coded data starts.
    pub(super) fn position(&self) -> usize {
        self.pos
    }

    /// Continues the walk at `pos`: after a scan, the position its decoder stopped at.
    pub(super) fn resume_at(&mut self, pos: usize) {
        self.pos = pos;
    }
}

/// One Huffman table of a DHT segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HuffmanSpec<'a> {
    /// `true` for a DC table (class 0), `false` for AC (class 1).
    pub dc: bool,
    /// The table slot, 0 to 3.
    pub id: usize,
    /// How many codes have each length from 1 to 16 bits.
    pub counts: [u8; 16],
    /// The symbols, in code order (as many as the counts add up to, at most 256).
    pub symbols: &'a [u8],
}

/// The tables of a DHT segment's body, in order; an entry that is cut short, names a
/// class above 1 or a slot above 3, or holds more than 256 symbols is an error.
pub(super) fn huffman_tables(
    body: &[u8],
) -> impl Iterator<Item = Result<HuffmanSpec<'_>, &'static str>> {
    let mut rest = body;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let s = rest;
        if s.len() < 17 {
            rest = &[];
            return Some(Err("truncated Huffman table"));
        }
        let (class, id) = (s[0] >> 4, usize::from(s[0] & 15));
        let counts: [u8; 16] = s[1..17].try_into().unwrap_or([0; 16]);
        let total: usize = counts.iter().map(|&c| usize::from(c)).sum();
        if class > 1 || id > 3 || total > 256 || s.len() < 17 + total {
            rest = &[];
            return Some(Err("bad Huffman table"));
        }
        rest = &s[17 + total..];
        Some(Ok(HuffmanSpec {
            dc: class == 0,
            id,
            counts,
            symbols: &s[17..17 + total],
        }))
    })
}

/// One quantisation table of a DQT segment, in natural (row-major) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct QuantSpec {
    /// The table slot, 0 to 3.
    pub id: usize,
    /// The 64 quantisers (8- or 16-bit in the file), row-major.
    pub natural: [u16; 64],
}

/// The tables of a DQT segment's body, in order; an entry that is cut short or names a
/// precision above 1 or a slot above 3 is an error.
pub(super) fn quant_tables(body: &[u8]) -> impl Iterator<Item = Result<QuantSpec, &'static str>> {
    let mut rest = body;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let s = rest;
        let (precision, id) = (s[0] >> 4, usize::from(s[0] & 15));
        let size = if precision == 0 { 64 } else { 128 };
        if precision > 1 || id > 3 || s.len() < 1 + size {
            rest = &[];
            return Some(Err("bad quantization table"));
        }
        let mut natural = [0u16; 64];
        for (k, &nat) in NATURAL_ORDER[..64].iter().enumerate() {
            natural[nat] = if precision == 0 {
                u16::from(s[1 + k])
            } else {
                u16::from_be_bytes([s[1 + 2 * k], s[2 + 2 * k]])
            };
        }
        rest = &s[1 + size..];
        Some(Ok(QuantSpec { id, natural }))
    })
}

/// The restart interval of a DRI segment's body (0: no restart markers).
pub(super) fn restart_interval(body: &[u8]) -> Result<usize, &'static str> {
    match body {
        [hi, lo, ..] => Ok(usize::from(u16::from_be_bytes([*hi, *lo]))),
        _ => Err("bad DRI segment"),
    }
}

/// Whether an APP0 body is a JFIF header, by libjpeg's `examine_app0` rule (the
/// identifier and at least the 14 bytes of the fixed part).
pub(super) fn is_jfif(body: &[u8]) -> bool {
    body.len() >= 14 && body.starts_with(b"JFIF\0")
}

/// The colour transform byte of an APP14 Adobe body, by libjpeg's `examine_app14` rule
/// (the identifier and at least its 12 bytes); `None` for any other APP14.
pub(super) fn adobe_transform(body: &[u8]) -> Option<u8> {
    (body.len() >= 12 && body.starts_with(b"Adobe")).then(|| body[11])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(marker: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![0xFF, marker];
        out.extend_from_slice(&u16::try_from(body.len() + 2).unwrap().to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn the_walk_skips_fill_bytes_and_segmentless_markers_and_finds_the_end() {
        let mut jpeg = vec![0xFF, 0xD8];
        jpeg.extend(segment(0xE0, b"JFIF\0\x01\x02\0\0\x01\0\x01\0\0"));
        // Fill bytes, a restart marker and a TEM before the next segment.
        jpeg.extend([0xFF, 0xFF, 0xFF, 0xD3, 0xFF, 0x01]);
        jpeg.extend(segment(0xDD, &[0x01, 0x00]));
        jpeg.extend([0xFF, 0xD9]);
        let mut walk = Segments::new(&jpeg).unwrap();
        let Step::Segment { marker, body } = walk.next_step().unwrap() else {
            panic!("APP0 expected");
        };
        assert_eq!(marker, 0xE0);
        assert!(is_jfif(body));
        assert_eq!(walk.position(), 2 + 4 + 14);
        let Step::Segment { marker, body } = walk.next_step().unwrap() else {
            panic!("DRI expected");
        };
        assert_eq!((marker, restart_interval(body)), (0xDD, Ok(256)));
        assert_eq!(walk.next_step(), Ok(Step::EndOfImage));

        // Without EOI the walk reports the end of the data.
        let mut walk = Segments::new(&jpeg[..jpeg.len() - 2]).unwrap();
        walk.resume_at(jpeg.len() - 2);
        assert_eq!(walk.next_step(), Ok(Step::EndOfData));
    }

    #[test]
    fn bad_starts_and_cut_segments_are_errors() {
        assert_eq!(Segments::new(b"\x89PNG").unwrap_err(), "missing SOI marker");
        let mut jpeg = vec![0xFF, 0xD8];
        jpeg.extend(segment(0xDB, &[0; 65]));
        for cut in [jpeg.len() - 1, 5] {
            let mut walk = Segments::new(&jpeg[..cut]).unwrap();
            assert_eq!(
                walk.next_step(),
                Err("truncated marker segment"),
                "cut {cut}"
            );
        }
        // A declared length under 2 is refused.
        let mut walk = Segments::new(&[0xFF, 0xD8, 0xFF, 0xC4, 0x00, 0x01]).unwrap();
        assert_eq!(walk.next_step(), Err("truncated marker segment"));
    }

    #[test]
    fn huffman_tables_are_read_in_order_and_checked() {
        let mut body = vec![0x00];
        body.extend([0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        body.extend([4, 5]);
        body.push(0x13);
        body.extend([1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        body.push(0xF0);
        let got: Vec<_> = huffman_tables(&body).collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].dc, got[0].id, got[0].symbols),
            (true, 0, &[4u8, 5][..])
        );
        assert_eq!(got[0].counts[1], 2);
        assert_eq!(
            (got[1].dc, got[1].id, got[1].symbols),
            (false, 3, &[0xF0u8][..])
        );

        let bad_class = [&[0x20u8][..], &[0; 16]].concat();
        assert_eq!(
            huffman_tables(&bad_class).next(),
            Some(Err("bad Huffman table"))
        );
        assert_eq!(
            huffman_tables(&body[..10]).next(),
            Some(Err("truncated Huffman table"))
        );
        // Symbols cut short: the counts promise more than the body holds.
        assert_eq!(
            huffman_tables(&body[..18]).next(),
            Some(Err("bad Huffman table"))
        );
        // After an error the iterator ends.
        assert_eq!(huffman_tables(&bad_class).count(), 1);
    }

    #[test]
    fn quant_tables_come_out_in_natural_order_at_either_precision() {
        let zigzag: Vec<u8> = (1..=64).collect();
        let mut body = vec![0x01];
        body.extend(&zigzag);
        body.push(0x12);
        for k in 0..64u16 {
            body.extend((1000 + k).to_be_bytes());
        }
        let got: Vec<_> = quant_tables(&body).collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].id, 1);
        for (k, &nat) in NATURAL_ORDER[..64].iter().enumerate() {
            assert_eq!(got[0].natural[nat], u16::from(zigzag[k]));
            assert_eq!(got[1].natural[nat], 1000 + k as u16);
        }
        assert_eq!(got[1].id, 2);
        assert_eq!(
            quant_tables(&body[..30]).next(),
            Some(Err("bad quantization table"))
        );
        assert_eq!(
            quant_tables(&[0x24; 65]).next(),
            Some(Err("bad quantization table"))
        );
    }

    #[test]
    fn application_segments_follow_libjpeg_length_rules() {
        assert!(!is_jfif(b"JFIF\0\x01"));
        assert!(is_jfif(b"JFIF\0\x01\x02\0\0\x01\0\x01\0\0"));
        assert_eq!(adobe_transform(b"Adobe\0\x64\0\0\0\0\x02"), Some(2));
        assert_eq!(adobe_transform(b"Adobe\0\x64"), None);
        assert_eq!(adobe_transform(b"Photoshop 3.0\0"), None);
        assert_eq!(restart_interval(&[7]), Err("bad DRI segment"));
    }
}
