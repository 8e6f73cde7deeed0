//! numpy dtypes as FFCV stores them: the type string (`"<f4"`) inside a descr JSON list.

use std::fmt;

/// Byte order of a dtype, as the first character of a numpy type string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// `<`: little-endian.
    Little,
    /// `>`: big-endian.
    Big,
    /// `|`: byte order does not apply (one-byte items, byte strings, void).
    NotApplicable,
}

/// The kind of a dtype, as the kind character of a numpy type string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumpyKind {
    /// `b`: bool (1 byte).
    Bool,
    /// `i`: signed integer.
    Int,
    /// `u`: unsigned integer.
    UInt,
    /// `f`: IEEE float (2, 4, 8 bytes; 16 for x86 long double).
    Float,
    /// `c`: complex (two floats).
    Complex,
    /// `M`: datetime64 (8 bytes, with a unit such as `[ns]`).
    Datetime,
    /// `m`: timedelta64 (8 bytes, with a unit such as `[s]`).
    Timedelta,
    /// `S`: fixed-length byte string.
    Bytes,
    /// `U`: fixed-length UCS-4 string (4 bytes per character).
    Unicode,
    /// `V`: raw bytes.
    Void,
}

impl NumpyKind {
    fn code(self) -> char {
        match self {
            NumpyKind::Bool => 'b',
            NumpyKind::Int => 'i',
            NumpyKind::UInt => 'u',
            NumpyKind::Float => 'f',
            NumpyKind::Complex => 'c',
            NumpyKind::Datetime => 'M',
            NumpyKind::Timedelta => 'm',
            NumpyKind::Bytes => 'S',
            NumpyKind::Unicode => 'U',
            NumpyKind::Void => 'V',
        }
    }
}

/// A numpy dtype restricted to what an FFCV `NDArrayField` can hold: one non-structured
/// item type with a kind, an item size and a byte order.
///
/// ```
/// use beton_io::NumpyDtype;
/// let d: NumpyDtype = "<f4".parse().unwrap();
/// assert_eq!(d.item_size(), 4);
/// assert_eq!(d.descr(), "<f4");
/// assert_eq!(d.descr_json(), r#"[["", "<f4"]]"#);
/// assert_eq!("|b1".parse::<NumpyDtype>().unwrap().item_size(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NumpyDtype {
    kind: NumpyKind,
    item_size: u64,
    byte_order: ByteOrder,
    /// The datetime unit suffix (`"[ns]"`), empty for other kinds.
    unit: String,
}

impl NumpyDtype {
    /// A numeric dtype; `None` when numpy has no such type (e.g. `Int` of 3 bytes).
    ///
    /// The byte order is normalised as numpy does: one-byte types get
    /// [`ByteOrder::NotApplicable`], and multi-byte types given `NotApplicable` become little-endian.
    pub fn numeric(kind: NumpyKind, item_size: u64, byte_order: ByteOrder) -> Option<NumpyDtype> {
        let ok = match kind {
            NumpyKind::Bool => item_size == 1,
            NumpyKind::Int | NumpyKind::UInt => matches!(item_size, 1 | 2 | 4 | 8),
            NumpyKind::Float => matches!(item_size, 2 | 4 | 8 | 16),
            NumpyKind::Complex => matches!(item_size, 8 | 16 | 32),
            _ => false,
        };
        ok.then(|| NumpyDtype {
            kind,
            item_size,
            byte_order: normalise_order(item_size, byte_order),
            unit: String::new(),
        })
    }

    /// Little-endian `f32` (`<f4`).
    pub fn f32() -> NumpyDtype {
        NumpyDtype::numeric(NumpyKind::Float, 4, ByteOrder::Little).expect("valid")
    }

    /// `u8` (`|u1`).
    pub fn u8() -> NumpyDtype {
        NumpyDtype::numeric(NumpyKind::UInt, 1, ByteOrder::NotApplicable).expect("valid")
    }

    /// The kind.
    pub fn kind(&self) -> NumpyKind {
        self.kind
    }

    /// Bytes per item.
    pub fn item_size(&self) -> u64 {
        self.item_size
    }

    /// The byte order.
    pub fn byte_order(&self) -> ByteOrder {
        self.byte_order
    }

    /// The numpy type string, exactly as numpy writes it in `dtype.descr` (`"<f4"`, `"|u1"`,
    /// `">i8"`, `"<M8[ns]"`, `"|S10"`, `"<U3"`).
    pub fn descr(&self) -> String {
        let order = match self.byte_order {
            ByteOrder::Little => '<',
            ByteOrder::Big => '>',
            ByteOrder::NotApplicable => '|',
        };
        let count = if self.kind == NumpyKind::Unicode {
            self.item_size / 4
        } else {
            self.item_size
        };
        format!("{order}{}{count}{}", self.kind.code(), self.unit)
    }

    /// `json.dumps(dtype.descr)` as FFCV writes it into the argument block: `[["", "<f4"]]`.
    pub fn descr_json(&self) -> String {
        format!("[[\"\", \"{}\"]]", self.descr())
    }

    /// Parses the JSON FFCV stores in an NDArray argument block (`[["", "<f4"]]`).
    ///
    /// Exactly one entry with an empty name (or `f0`, which numpy accepts just as well) and a
    /// type string; subarray entries (three elements) and structured dtypes are rejected.
    pub fn from_descr_json(json: &[u8]) -> Result<NumpyDtype, String> {
        if !json.is_ascii() {
            return Err("dtype description is not ASCII".into());
        }
        let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| {
            format!(
                "dtype description {:?} is not JSON: {e}",
                String::from_utf8_lossy(json)
            )
        })?;
        let text = || String::from_utf8_lossy(json).into_owned();
        let entries = value
            .as_array()
            .ok_or_else(|| format!("dtype description {:?} is not a list", text()))?;
        let [entry] = entries.as_slice() else {
            return Err(format!(
                "dtype description {:?} has {} entries; FFCV requires exactly 1",
                text(),
                entries.len()
            ));
        };
        let parts = entry
            .as_array()
            .ok_or_else(|| format!("dtype description {:?}: entry is not a list", text()))?;
        match parts.as_slice() {
            [
                serde_json::Value::String(name),
                serde_json::Value::String(typestr),
            ] => {
                if !name.is_empty() && name != "f0" {
                    return Err(format!(
                        "dtype description {:?}: field name {name:?} is not empty (FFCV reads field 'f0')",
                        text()
                    ));
                }
                typestr.parse::<NumpyDtype>()
            }
            [_, _, _] => Err(format!(
                "dtype description {:?}: subarray dtypes are not supported",
                text()
            )),
            _ => Err(format!(
                "dtype description {:?}: entry must be [name, typestr]",
                text()
            )),
        }
    }
}

/// NumPy's type names (`np.dtype("float32")`), as NumPy 1.26 on a 64-bit Linux machine
/// reads them (`long` and `int` are 8 bytes there, `longdouble` 16).
const NUMPY_NAMES: &[(&str, NumpyKind, u64)] = &[
    ("bool", NumpyKind::Bool, 1),
    ("bool_", NumpyKind::Bool, 1),
    ("bool8", NumpyKind::Bool, 1),
    ("int8", NumpyKind::Int, 1),
    ("byte", NumpyKind::Int, 1),
    ("int16", NumpyKind::Int, 2),
    ("short", NumpyKind::Int, 2),
    ("int32", NumpyKind::Int, 4),
    ("intc", NumpyKind::Int, 4),
    ("int64", NumpyKind::Int, 8),
    ("int", NumpyKind::Int, 8),
    ("int_", NumpyKind::Int, 8),
    ("int0", NumpyKind::Int, 8),
    ("intp", NumpyKind::Int, 8),
    ("long", NumpyKind::Int, 8),
    ("longlong", NumpyKind::Int, 8),
    ("uint8", NumpyKind::UInt, 1),
    ("ubyte", NumpyKind::UInt, 1),
    ("uint16", NumpyKind::UInt, 2),
    ("ushort", NumpyKind::UInt, 2),
    ("uint32", NumpyKind::UInt, 4),
    ("uintc", NumpyKind::UInt, 4),
    ("uint64", NumpyKind::UInt, 8),
    ("uint", NumpyKind::UInt, 8),
    ("uint0", NumpyKind::UInt, 8),
    ("uintp", NumpyKind::UInt, 8),
    ("ulong", NumpyKind::UInt, 8),
    ("ulonglong", NumpyKind::UInt, 8),
    ("float16", NumpyKind::Float, 2),
    ("half", NumpyKind::Float, 2),
    ("float32", NumpyKind::Float, 4),
    ("single", NumpyKind::Float, 4),
    ("float64", NumpyKind::Float, 8),
    ("float", NumpyKind::Float, 8),
    ("float_", NumpyKind::Float, 8),
    ("double", NumpyKind::Float, 8),
    ("float128", NumpyKind::Float, 16),
    ("longdouble", NumpyKind::Float, 16),
    ("complex64", NumpyKind::Complex, 8),
    ("csingle", NumpyKind::Complex, 8),
    ("complex128", NumpyKind::Complex, 16),
    ("complex", NumpyKind::Complex, 16),
    ("cdouble", NumpyKind::Complex, 16),
    ("complex256", NumpyKind::Complex, 32),
    ("clongdouble", NumpyKind::Complex, 32),
];

/// NumPy's one-character type codes (`np.dtype("d")`), on a 64-bit Linux machine. Note that
/// `b` alone is `int8` (bool is `?`), while `b1` is bool.
fn numpy_char_code(code: char) -> Option<(NumpyKind, u64)> {
    Some(match code {
        '?' => (NumpyKind::Bool, 1),
        'b' => (NumpyKind::Int, 1),
        'B' => (NumpyKind::UInt, 1),
        'h' => (NumpyKind::Int, 2),
        'H' => (NumpyKind::UInt, 2),
        'i' => (NumpyKind::Int, 4),
        'I' => (NumpyKind::UInt, 4),
        'l' | 'q' | 'p' => (NumpyKind::Int, 8),
        'L' | 'Q' | 'P' => (NumpyKind::UInt, 8),
        'e' => (NumpyKind::Float, 2),
        'f' => (NumpyKind::Float, 4),
        'd' => (NumpyKind::Float, 8),
        'g' => (NumpyKind::Float, 16),
        'F' => (NumpyKind::Complex, 8),
        'D' => (NumpyKind::Complex, 16),
        'G' => (NumpyKind::Complex, 32),
        _ => return None,
    })
}

impl NumpyDtype {
    /// Parses a dtype the way `numpy.dtype(name)` reads a string a user types: a type name
    /// (`float32`, `double`, `uint8`, `bool`, `half`, `int`, `complex64`, `datetime64[ns]`,
    /// ...), a one-character code with an optional byte order (`d`, `?`, `<f`, `>i`), or a
    /// type string with an optional byte order (`f4`, `<f4`, `=f4`, `>f8`, `|u1`, `b1`,
    /// `M8[ns]`, `S10`). `=` and no byte order mean this machine's order, little-endian.
    ///
    /// The result is what `dtype.descr` reports, so a file written with it stores exactly the
    /// descriptor FFCV would (`float32` and `f4` both give `"<f4"`; `uint8` gives `"|u1"`).
    /// Zero-sized types (`S`, `U0`) and `object` are refused: an FFCV array cannot hold them.
    ///
    /// ```
    /// use beton_io::NumpyDtype;
    /// for name in ["float32", "f4", "<f4", "=f4", "single", "f"] {
    ///     assert_eq!(NumpyDtype::from_numpy_name(name).unwrap().descr(), "<f4");
    /// }
    /// assert_eq!(NumpyDtype::from_numpy_name("uint8").unwrap().descr(), "|u1");
    /// assert_eq!(NumpyDtype::from_numpy_name("?").unwrap().descr(), "|b1");
    /// assert!(NumpyDtype::from_numpy_name("float33").is_err());
    /// ```
    pub fn from_numpy_name(name: &str) -> Result<NumpyDtype, String> {
        let refuse = || {
            format!(
                "{name:?} is not a numpy dtype this format can store \
                 (examples: float32, f4, <f4, >f8, int16, i2, uint8, |u1, bool, ?, float16)"
            )
        };
        // Names take no byte order in NumPy (`<float32` is an error there too).
        if let Some(&(_, kind, size)) = NUMPY_NAMES.iter().find(|(n, _, _)| *n == name) {
            return NumpyDtype::numeric(kind, size, ByteOrder::Little).ok_or_else(refuse);
        }
        for (prefix, typestr) in [("datetime64", "<M8"), ("timedelta64", "<m8")] {
            if let Some(unit) = name.strip_prefix(prefix) {
                return format!("{typestr}{unit}").parse().map_err(|_| refuse());
            }
        }
        let (order, rest) = match name.chars().next() {
            Some(c @ ('<' | '>' | '=' | '|')) => (c, &name[1..]),
            _ => ('=', name),
        };
        let mut chars = rest.chars();
        let (Some(first), tail) = (chars.next(), chars.as_str()) else {
            return Err(refuse());
        };
        if tail.is_empty() {
            // A one-character code; `M`/`m` alone are generic datetimes, as in NumPy.
            if let Some((kind, size)) = numpy_char_code(first) {
                let order = match order {
                    '>' => ByteOrder::Big,
                    _ => ByteOrder::Little,
                };
                return NumpyDtype::numeric(kind, size, order).ok_or_else(refuse);
            }
            if first == 'M' || first == 'm' {
                return format!("{order}{first}8").parse().map_err(|_| refuse());
            }
            return Err(refuse());
        }
        // `a5` is NumPy's old spelling of `S5`.
        let kind = if first == 'a' { 'S' } else { first };
        format!("{order}{kind}{tail}").parse().map_err(|_| refuse())
    }
}

fn normalise_order(item_size: u64, order: ByteOrder) -> ByteOrder {
    if item_size == 1 {
        ByteOrder::NotApplicable
    } else if order == ByteOrder::NotApplicable {
        ByteOrder::Little
    } else {
        order
    }
}

impl fmt::Display for NumpyDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.descr())
    }
}

impl std::str::FromStr for NumpyDtype {
    type Err = String;

    /// Parses a numpy type string: a byte-order character (`<`, `>`, `|` or `=`; `=` is taken as
    /// little-endian, the only native order this crate supports), a kind character and a size
    /// (characters for `U`), plus a unit for datetimes (`<M8[ns]`).
    fn from_str(s: &str) -> Result<NumpyDtype, String> {
        let bad = |why: &str| format!("unsupported numpy type string {s:?}: {why}");
        let mut chars = s.chars();
        let order = match chars.next() {
            Some('<') | Some('=') => ByteOrder::Little,
            Some('>') => ByteOrder::Big,
            Some('|') => ByteOrder::NotApplicable,
            _ => return Err(bad("expected a byte order '<', '>', '|' or '='")),
        };
        let kind = match chars.next() {
            Some('b') => NumpyKind::Bool,
            Some('i') => NumpyKind::Int,
            Some('u') => NumpyKind::UInt,
            Some('f') => NumpyKind::Float,
            Some('c') => NumpyKind::Complex,
            Some('M') => NumpyKind::Datetime,
            Some('m') => NumpyKind::Timedelta,
            Some('S') => NumpyKind::Bytes,
            Some('U') => NumpyKind::Unicode,
            Some('V') => NumpyKind::Void,
            _ => return Err(bad("unknown kind character")),
        };
        let rest = chars.as_str();
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (digits, unit) = rest.split_at(digits_end);
        if digits.is_empty() || digits.len() > 12 {
            return Err(bad("missing or oversized item size"));
        }
        let count: u64 = digits.parse().map_err(|_| bad("bad item size"))?;
        match kind {
            NumpyKind::Datetime | NumpyKind::Timedelta => {
                if count != 8 {
                    return Err(bad("datetime types are 8 bytes"));
                }
                // numpy writes generic datetimes without a unit (`<M8`), others as `<M8[ns]`.
                if !unit.is_empty() {
                    let inner = unit
                        .strip_prefix('[')
                        .and_then(|u| u.strip_suffix(']'))
                        .ok_or_else(|| bad("datetime unit must look like [ns]"))?;
                    if inner.is_empty() || !inner.chars().all(|c| c.is_ascii_alphanumeric()) {
                        return Err(bad("bad datetime unit"));
                    }
                }
                Ok(NumpyDtype {
                    kind,
                    item_size: 8,
                    byte_order: normalise_order(8, order),
                    unit: unit.to_string(),
                })
            }
            NumpyKind::Bytes | NumpyKind::Void | NumpyKind::Unicode => {
                if !unit.is_empty() {
                    return Err(bad("trailing characters"));
                }
                if count == 0 {
                    return Err(bad("zero-sized items"));
                }
                let (item_size, byte_order) = if kind == NumpyKind::Unicode {
                    let size = count.checked_mul(4).ok_or_else(|| bad("too large"))?;
                    // numpy writes '<U3' / '>U3' even though the size is a multiple of 4.
                    let o = if order == ByteOrder::NotApplicable {
                        ByteOrder::Little
                    } else {
                        order
                    };
                    (size, o)
                } else {
                    (count, ByteOrder::NotApplicable)
                };
                Ok(NumpyDtype {
                    kind,
                    item_size,
                    byte_order,
                    unit: String::new(),
                })
            }
            _ => {
                if !unit.is_empty() {
                    return Err(bad("trailing characters"));
                }
                NumpyDtype::numeric(kind, count, order).ok_or_else(|| bad("no such numeric type"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_numeric_typestr_round_trips() {
        for s in [
            "|b1", "|i1", "|u1", "<i2", ">i2", "<u2", "<i4", "<u4", "<i8", ">u8", "<f2", ">f2",
            "<f4", ">f4", "<f8", ">f8", "<f16", "<c8", ">c16", "<c32", "<M8[ns]", ">m8[s]", "<M8",
            "|S10", "<U3", "|V16",
        ] {
            let d: NumpyDtype = s.parse().unwrap();
            assert_eq!(d.descr(), s);
        }
        assert_eq!("<U3".parse::<NumpyDtype>().unwrap().item_size(), 12);
        assert_eq!("<c16".parse::<NumpyDtype>().unwrap().item_size(), 16);
    }

    #[test]
    fn normalises_orders_like_numpy() {
        assert_eq!("<u1".parse::<NumpyDtype>().unwrap().descr(), "|u1");
        assert_eq!(">b1".parse::<NumpyDtype>().unwrap().descr(), "|b1");
        assert_eq!("=f4".parse::<NumpyDtype>().unwrap().descr(), "<f4");
        assert_eq!("|i8".parse::<NumpyDtype>().unwrap().descr(), "<i8");
    }

    #[test]
    fn rejects_what_numpy_has_no_type_for() {
        for s in [
            "", "<", "<x4", "<i3", "<f1", "<c4", "<b2", "<f", "<S0", "<M4[ns]", "<M8[]", "<M8ns",
            "<f4x", "f4",
        ] {
            assert!(s.parse::<NumpyDtype>().is_err(), "{s:?}");
        }
    }

    #[test]
    fn parses_descr_json() {
        let d = NumpyDtype::from_descr_json(br#"[["", "<i2"]]"#).unwrap();
        assert_eq!(d.descr(), "<i2");
        assert_eq!(d.descr_json(), r#"[["", "<i2"]]"#);
        for bad in [
            &br#"[]"#[..],
            br#"[["", "<f4"], ["", "<f4"]]"#,
            br#"[["x", "<f4"]]"#,
            br#"[["", "<f4", [2]]]"#,
            br#"{"a": 1}"#,
            br#"[["", 4]]"#,
            b"[[\"\", \"<f4\"]",
            "[[\"\", \"<f\u{e9}\"]]".as_bytes(),
        ] {
            assert!(NumpyDtype::from_descr_json(bad).is_err());
        }
    }

    #[test]
    fn numpy_spellings_give_the_descr_numpy_reports() {
        // (what a user types, `np.dtype(that).str` in NumPy 1.26 on x86-64 Linux)
        for (name, descr) in [
            ("float32", "<f4"),
            ("f4", "<f4"),
            ("<f4", "<f4"),
            ("=f4", "<f4"),
            ("|f4", "<f4"),
            (">f4", ">f4"),
            ("single", "<f4"),
            ("f", "<f4"),
            ("<f", "<f4"),
            ("float16", "<f2"),
            ("half", "<f2"),
            ("e", "<f2"),
            ("f2", "<f2"),
            ("float64", "<f8"),
            ("float", "<f8"),
            ("double", "<f8"),
            ("d", "<f8"),
            ("f8", "<f8"),
            (">f8", ">f8"),
            ("longdouble", "<f16"),
            ("g", "<f16"),
            ("int8", "|i1"),
            ("b", "|i1"),
            ("<b", "|i1"),
            ("i1", "|i1"),
            ("int16", "<i2"),
            ("i2", "<i2"),
            ("=i2", "<i2"),
            ("short", "<i2"),
            ("h", "<i2"),
            ("int32", "<i4"),
            ("i", "<i4"),
            (">i", ">i4"),
            ("intc", "<i4"),
            ("int64", "<i8"),
            ("i8", "<i8"),
            ("int", "<i8"),
            ("long", "<i8"),
            ("l", "<i8"),
            ("q", "<i8"),
            ("intp", "<i8"),
            ("uint8", "|u1"),
            ("u1", "|u1"),
            ("|u1", "|u1"),
            (">u1", "|u1"),
            ("ubyte", "|u1"),
            ("B", "|u1"),
            ("uint16", "<u2"),
            ("H", "<u2"),
            ("uint32", "<u4"),
            ("uint64", "<u8"),
            ("uint", "<u8"),
            ("L", "<u8"),
            ("bool", "|b1"),
            ("bool_", "|b1"),
            ("?", "|b1"),
            ("=?", "|b1"),
            ("b1", "|b1"),
            ("|b1", "|b1"),
            ("complex64", "<c8"),
            ("F", "<c8"),
            ("complex", "<c16"),
            ("D", "<c16"),
            ("c32", "<c32"),
            ("datetime64", "<M8"),
            ("datetime64[ns]", "<M8[ns]"),
            ("M8[ns]", "<M8[ns]"),
            ("M", "<M8"),
            ("timedelta64[s]", "<m8[s]"),
            ("<m8[s]", "<m8[s]"),
            ("S5", "|S5"),
            ("<S5", "|S5"),
            ("a5", "|S5"),
            ("U3", "<U3"),
            (">U3", ">U3"),
            ("V4", "|V4"),
        ] {
            let dtype = NumpyDtype::from_numpy_name(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(dtype.descr(), descr, "{name}");
            // What is stored parses back, strictly, to the same dtype.
            assert_eq!(descr.parse::<NumpyDtype>().unwrap(), dtype, "{name}");
        }
    }

    #[test]
    fn what_numpy_does_not_understand_is_refused() {
        for name in [
            "", "u", "i0", "u0", "f1", "b2", "i16", "Float32", "<float32", ">int16", "=double",
            " f4", "f4 ", "float33", "object", "O", "S", "S0", "U", "V", "<", "x", "<x4",
        ] {
            let err = NumpyDtype::from_numpy_name(name).unwrap_err();
            assert!(err.contains("is not a numpy dtype"), "{name:?}: {err}");
        }
    }
}
