//! Huffman entropy decoding shared by both JPEG decoders ([`super::turbo`] and
//! [`super::accurate`]): the tables with their lookahead, the bit reader that removes
//! byte stuffing and stops at markers as libjpeg does, and the DC/AC coefficient decoders.

use super::segments::NATURAL_ORDER;

/// The zero run [`Huffman::fast_ac`] gives the end-of-block code (real
/// runs are 0..=15).
const EOB_RUN: u8 = 0xFF;

/// Bits of lookahead in the Huffman tables' direct lookups.
const FAST_BITS: u32 = 10;
const FAST_SIZE: usize = 1 << FAST_BITS;

/// A Huffman table in canonical form plus a [`FAST_BITS`] lookahead, stored
/// inline so redefining it per image allocates nothing; the segment it was
/// built from is kept, so an image with the same table (every image from
/// one encoder) skips the rebuild.
#[derive(Clone)]
pub(super) struct Huffman {
    /// Whether a DHT segment of the image being decoded defined this table.
    pub(super) defined: bool,
    /// `(code length, symbol)` for every prefix; length 0 = slow path.
    fast: [(u8, u8); FAST_SIZE],
    /// For AC tables: every prefix that holds a whole coefficient (its
    /// run/size code and its `size` value bits) as `(extended value, zero
    /// run, bits used)`, a run of 16 zeros as `(0, 15, bits)` and the end
    /// of block as `(0, EOB_RUN, bits)`. For DC tables: every prefix that
    /// holds a whole difference (its size code and value bits) as
    /// `(difference, 0, bits used)`. Other prefixes: `(pack_code(fast's
    /// entry), 0, 0)`.
    fast_ac: [(i16, u8, u8); FAST_SIZE],
    /// The DHT counts and symbols the tables hold (`built_len` bytes).
    built_from: [u8; 16 + 256],
    built_len: usize,
    maxcode: [i32; 18],
    valoffset: [i32; 17],
    symbols: [u8; 256],
}

impl Default for Huffman {
    fn default() -> Self {
        Self {
            defined: false,
            fast: [(0, 0); FAST_SIZE],
            fast_ac: [(0, 0, 0); FAST_SIZE],
            built_from: [0; 16 + 256],
            built_len: 0,
            maxcode: [-1; 18],
            valoffset: [0; 17],
            symbols: [0; 256],
        }
    }
}

impl Huffman {
    /// Builds the table from a DHT segment's 16 code-length counts and its
    /// symbols (`symbols.len()` is the sum of the counts, at most 256).
    pub(super) fn set(
        &mut self,
        counts: &[u8; 16],
        symbols: &[u8],
        dc: bool,
    ) -> std::result::Result<(), &'static str> {
        let n = 16 + symbols.len();
        // A slot holds one class, so equal content means equal tables.
        if self.built_len == n
            && self.built_from[..16] == counts[..]
            && self.built_from[16..n] == *symbols
        {
            self.defined = true;
            return Ok(());
        }
        self.defined = false;
        self.built_len = 0;
        self.fast.fill((0, 0));
        self.symbols[..symbols.len()].copy_from_slice(symbols);
        let mut code: i32 = 0;
        let mut k: usize = 0;
        for len in 1..=16usize {
            let n = usize::from(counts[len - 1]);
            self.valoffset[len] = k as i32 - code;
            for _ in 0..n {
                if code >= 1 << len {
                    return Err("Huffman table has more codes than its lengths allow");
                }
                if len <= FAST_BITS as usize {
                    let shift = FAST_BITS as usize - len;
                    let base = (code as usize) << shift;
                    for e in &mut self.fast[base..base + (1 << shift)] {
                        *e = (len as u8, symbols[k]);
                    }
                }
                code += 1;
                k += 1;
            }
            self.maxcode[len] = if n > 0 { code - 1 } else { -1 };
            code <<= 1;
        }
        self.maxcode[17] = i32::MAX;
        for (prefix, slot) in self.fast_ac.iter_mut().enumerate() {
            let (len, rs) = self.fast[prefix];
            let (run, size) = if dc {
                // A DC symbol is the difference's size alone (0 included).
                (0, u32::from(rs))
            } else if rs & 15 == 0 {
                // No value bits: a run of 16 zeros (ZRL, stored as a zero
                // after 15), or the end of the block (libjpeg reads every
                // other size-0 symbol as EOB too).
                (if rs >> 4 == 15 { 15 } else { EOB_RUN }, 0)
            } else {
                (rs >> 4, u32::from(rs & 15))
            };
            let used = u32::from(len) + size;
            *slot = if len > 0 && used <= FAST_BITS {
                let v = (prefix as u32 >> (FAST_BITS - used)) & ((1 << size) - 1);
                (extend(v, size) as i16, run, used as u8)
            } else {
                // The code alone (length 0: longer than FAST_BITS), so that
                // one load serves both paths.
                (pack_code(len, rs), 0, 0)
            };
        }
        self.built_from[..16].copy_from_slice(counts);
        self.built_from[16..n].copy_from_slice(symbols);
        self.built_len = n;
        self.defined = true;
        Ok(())
    }
}

/// Reads entropy-coded bits, removing byte stuffing; at a marker or the end
/// of input it feeds zero bytes and counts them, as libjpeg does, so the
/// caller can tell a truncated scan from a complete one.
pub(super) struct Bits<'a> {
    data: &'a [u8],
    pub(super) pos: usize,
    acc: u64,
    nbits: u32,
    at_marker: bool,
    padded_bytes: u32,
}

impl<'a> Bits<'a> {
    pub(super) fn new(data: &'a [u8], pos: usize) -> Self {
        Self {
            data,
            pos,
            acc: 0,
            nbits: 0,
            at_marker: false,
            padded_bytes: 0,
        }
    }

    fn fill(&mut self) {
        // Fast path: the next eight bytes hold no 0xFF (so no stuffing and
        // no marker): take as many whole bytes as fit in one load.
        if !self.at_marker
            && self.nbits <= 56
            && let Some(chunk) = self.data.get(self.pos..self.pos + 8)
        {
            let word = u64::from_be_bytes(chunk.try_into().unwrap_or([0xFF; 8]));
            let inv = !word;
            let has_ff = inv.wrapping_sub(0x0101_0101_0101_0101) & !inv & 0x8080_8080_8080_8080;
            if has_ff == 0 {
                let k = (64 - self.nbits) / 8;
                // Keep only the k whole bytes, so later fills OR into zeros.
                let taken = word & (u64::MAX << (64 - 8 * k));
                self.acc |= taken >> self.nbits;
                self.pos += k as usize;
                self.nbits += 8 * k;
                return;
            }
        }
        while self.nbits <= 56 {
            let mut byte = 0u8;
            if !self.at_marker {
                match self.data.get(self.pos) {
                    None => self.at_marker = true,
                    Some(&0xFF) => match self.data.get(self.pos + 1) {
                        Some(0x00) => {
                            byte = 0xFF;
                            self.pos += 2;
                        }
                        _ => self.at_marker = true,
                    },
                    Some(&b) => {
                        byte = b;
                        self.pos += 1;
                    }
                }
            }
            if self.at_marker {
                self.padded_bytes += 1;
            }
            self.acc |= u64::from(byte) << (56 - self.nbits);
            self.nbits += 8;
        }
    }

    fn peek(&mut self, n: u32) -> u32 {
        if self.nbits < n {
            self.fill();
        }
        (self.acc >> (64 - n)) as u32
    }

    fn consume(&mut self, n: u32) {
        self.acc <<= n;
        self.nbits -= n;
    }

    pub(super) fn bits(&mut self, n: u32) -> u32 {
        if n == 0 {
            return 0;
        }
        let v = self.peek(n);
        self.consume(n);
        v
    }

    /// Makes at least `n` bits (`n <= 57`) available to [`Self::lookahead`]
    /// and [`Self::take`]: a refill tops the buffer up to 57 or more bits
    /// (zeros past the data, counted as padding).
    #[inline(always)]
    fn ensure(&mut self, n: u32) {
        if self.nbits < n {
            self.fill();
        }
    }

    /// The next [`FAST_BITS`] buffered bits as a lookup-table index.
    #[inline(always)]
    fn lookahead(&self) -> usize {
        (self.acc >> (64 - FAST_BITS)) as usize
    }

    /// Takes `n` (1..=32) buffered bits; the caller has [`Self::ensure`]d them.
    #[inline(always)]
    fn take(&mut self, n: u32) -> u32 {
        let v = (self.acc >> (64 - n)) as u32;
        self.consume(n);
        v
    }

    /// Decodes a symbol of `h` from its [`Huffman::fast_ac`] entry `packed`
    /// when that entry holds no whole coefficient (the code's length and
    /// symbol, length 0 for a code longer than [`FAST_BITS`]), with 16 or
    /// more bits buffered.
    #[inline(always)]
    fn decode_packed(&mut self, h: &Huffman, packed: i16) -> std::result::Result<u8, &'static str> {
        let (len, sym) = unpack_code(packed);
        if len > 0 {
            self.consume(len);
            return Ok(sym);
        }
        // By value, not `&mut self`: the bit buffer stays in registers.
        let (len, sym) = decode_long(h, (self.acc >> 48) as u32)?;
        self.consume(len);
        Ok(sym)
    }

    pub(super) fn decode(&mut self, h: &Huffman) -> std::result::Result<u8, &'static str> {
        let p = self.peek(16);
        let (len, sym) = h.fast[(p >> (16 - FAST_BITS)) as usize];
        if len > 0 {
            self.consume(u32::from(len));
            return Ok(sym);
        }
        for len in FAST_BITS + 1..=16 {
            let code = (p >> (16 - len)) as i32;
            if code <= h.maxcode[len as usize] {
                self.consume(len);
                let idx = code + h.valoffset[len as usize];
                return h
                    .symbols
                    .get(idx as usize)
                    .copied()
                    .ok_or("bad Huffman code");
            }
        }
        Err("bad Huffman code")
    }

    /// Whether bits that were consumed came from padding past the data.
    pub(super) fn overran(&self) -> bool {
        self.padded_bytes * 8 > self.nbits
    }

    /// Drops buffered bits and steps over the expected restart marker.
    pub(super) fn restart(&mut self, expected: u8) -> std::result::Result<(), &'static str> {
        if self.overran() {
            return Err("premature end of entropy-coded data");
        }
        self.acc = 0;
        self.nbits = 0;
        self.padded_bytes = 0;
        self.at_marker = false;
        match self.data.get(self.pos..self.pos + 2) {
            Some(&[0xFF, m]) if m == 0xD0 + expected => {
                self.pos += 2;
                Ok(())
            }
            _ => Err("missing restart marker"),
        }
    }
}

/// A [`Huffman::fast`] entry `(code length, symbol)` as the first field of
/// a [`Huffman::fast_ac`] entry that holds no whole coefficient.
fn pack_code(len: u8, sym: u8) -> i16 {
    (u16::from(sym) << 8 | u16::from(len)) as i16
}

/// [`pack_code`]'s inverse: `(code length, symbol)`.
#[inline(always)]
fn unpack_code(packed: i16) -> (u32, u8) {
    let p = packed as u16;
    (u32::from(p & 0xFF), (p >> 8) as u8)
}

/// A code longer than [`FAST_BITS`] from the next 16 bits `p`: its length
/// and symbol.
#[cold]
fn decode_long(h: &Huffman, p: u32) -> std::result::Result<(u32, u8), &'static str> {
    for len in FAST_BITS + 1..=16 {
        let code = (p >> (16 - len)) as i32;
        if code <= h.maxcode[len as usize] {
            let idx = code + h.valoffset[len as usize];
            let sym = h.symbols.get(idx as usize).ok_or("bad Huffman code")?;
            return Ok((len, *sym));
        }
    }
    Err("bad Huffman code")
}

/// Decodes one block's AC coefficients (zig-zag positions 1..64) into
/// `coef` (natural order; the caller zeroed it) when `STORE`, or only steps
/// over them; returns whether any was non-zero.
///
/// The loop is the decoder's hot path (a third of a photo's decode). Per
/// coefficient it makes one lookup in [`Huffman::fast_ac`], which holds the
/// whole coefficient (code, value bits, run) for most codes of a photo, the
/// end of block too; anything else takes [`Huffman::fast`]'s code length and
/// symbol from the same prefix and reads the value bits after it without a
/// second refill test (see [`Bits::ensure`]).
#[inline(always)]
pub(super) fn decode_ac<const STORE: bool>(
    bits: &mut Bits<'_>,
    act: &Huffman,
    coef: &mut [i16; 64],
) -> std::result::Result<bool, &'static str> {
    let mut z = 1usize;
    loop {
        bits.ensure(FAST_BITS);
        let prefix = bits.lookahead();
        let (value, run, used) = act.fast_ac[prefix];
        if used > 0 {
            bits.consume(u32::from(used));
            if run == EOB_RUN {
                break;
            }
            // Run, size and value bits in one lookup.
            z += usize::from(run);
            if STORE {
                coef[NATURAL_ORDER[z]] = value;
            }
            z += 1;
        } else {
            // A code plus value bits is at most 16 + 15 bits: with 32
            // buffered, neither the code nor the value needs a refill.
            bits.ensure(32);
            let rs = bits.decode_packed(act, value)?;
            let (r, s) = (usize::from(rs >> 4), u32::from(rs & 15));
            if s != 0 {
                z += r;
                let v = extend_nonzero(bits.take(s), s) as i16;
                if STORE {
                    coef[NATURAL_ORDER[z]] = v;
                }
            } else if r != 15 {
                break;
            } else {
                z += 15;
            }
            z += 1;
        }
        if z >= 64 {
            break;
        }
    }
    // Every step past position 1 read a coefficient or a run of 16 zeros;
    // a block with only zero runs takes the full IDCT, which gives the same
    // pixels as the DC-only shortcut.
    Ok(z > 1)
}

/// Decodes a DC difference (its size code and value bits) with `dct`.
#[inline(always)]
pub(super) fn decode_dc(
    bits: &mut Bits<'_>,
    dct: &Huffman,
) -> std::result::Result<i32, &'static str> {
    bits.ensure(FAST_BITS);
    let prefix = bits.lookahead();
    let (v, _, used) = dct.fast_ac[prefix];
    if used > 0 {
        bits.consume(u32::from(used));
        return Ok(i32::from(v));
    }
    // Up to 16 code bits plus 16 value bits.
    bits.ensure(32);
    let t = u32::from(bits.decode_packed(dct, v)?);
    if t > 16 {
        return Err("bad DC coefficient size");
    }
    Ok(if t == 0 {
        0
    } else {
        extend_nonzero(bits.take(t), t)
    })
}

/// [`extend`] for `s` in `1..=16`, without branches (libjpeg's
/// `HUFF_EXTEND`): `v` below `2^(s-1)` stands for `v - 2^s + 1`.
#[inline(always)]
fn extend_nonzero(v: u32, s: u32) -> i32 {
    let v = v as i32;
    let below = (v - (1 << (s - 1))) >> 31;
    v + (below & ((-1i32 << s) + 1))
}

pub(super) fn extend(v: u32, s: u32) -> i32 {
    if s == 0 {
        0
    } else if v < 1 << (s - 1) {
        v as i32 - (1 << s) + 1
    } else {
        v as i32
    }
}
