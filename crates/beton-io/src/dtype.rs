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
pub enum DTypeKind {
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

impl DTypeKind {
    fn code(self) -> char {
        match self {
            DTypeKind::Bool => 'b',
            DTypeKind::Int => 'i',
            DTypeKind::UInt => 'u',
            DTypeKind::Float => 'f',
            DTypeKind::Complex => 'c',
            DTypeKind::Datetime => 'M',
            DTypeKind::Timedelta => 'm',
            DTypeKind::Bytes => 'S',
            DTypeKind::Unicode => 'U',
            DTypeKind::Void => 'V',
        }
    }
}

/// A numpy dtype restricted to what an FFCV `NDArrayField` can hold: one non-structured
/// item type with a kind, an item size and a byte order.
///
/// ```
/// use beton_io::DType;
/// let d: DType = "<f4".parse().unwrap();
/// assert_eq!(d.item_size(), 4);
/// assert_eq!(d.descr(), "<f4");
/// assert_eq!(d.descr_json(), r#"[["", "<f4"]]"#);
/// assert_eq!("|b1".parse::<DType>().unwrap().item_size(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DType {
    kind: DTypeKind,
    item_size: u64,
    byte_order: ByteOrder,
    /// The datetime unit suffix (`"[ns]"`), empty for other kinds.
    unit: String,
}

impl DType {
    /// A numeric dtype; `None` when numpy has no such type (e.g. `Int` of 3 bytes).
    ///
    /// The byte order is normalised as numpy does: one-byte types get
    /// [`ByteOrder::NotApplicable`], and multi-byte types given `NotApplicable` become little-endian.
    pub fn numeric(kind: DTypeKind, item_size: u64, byte_order: ByteOrder) -> Option<DType> {
        let ok = match kind {
            DTypeKind::Bool => item_size == 1,
            DTypeKind::Int | DTypeKind::UInt => matches!(item_size, 1 | 2 | 4 | 8),
            DTypeKind::Float => matches!(item_size, 2 | 4 | 8 | 16),
            DTypeKind::Complex => matches!(item_size, 8 | 16 | 32),
            _ => false,
        };
        ok.then(|| DType {
            kind,
            item_size,
            byte_order: normalise_order(item_size, byte_order),
            unit: String::new(),
        })
    }

    /// Little-endian `f32` (`<f4`).
    pub fn f32() -> DType {
        DType::numeric(DTypeKind::Float, 4, ByteOrder::Little).expect("valid")
    }

    /// `u8` (`|u1`).
    pub fn u8() -> DType {
        DType::numeric(DTypeKind::UInt, 1, ByteOrder::NotApplicable).expect("valid")
    }

    /// The kind.
    pub fn kind(&self) -> DTypeKind {
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
        let count = if self.kind == DTypeKind::Unicode {
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
    pub fn from_descr_json(json: &[u8]) -> Result<DType, String> {
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
                typestr.parse::<DType>()
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

fn normalise_order(item_size: u64, order: ByteOrder) -> ByteOrder {
    if item_size == 1 {
        ByteOrder::NotApplicable
    } else if order == ByteOrder::NotApplicable {
        ByteOrder::Little
    } else {
        order
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.descr())
    }
}

impl std::str::FromStr for DType {
    type Err = String;

    /// Parses a numpy type string: a byte-order character (`<`, `>`, `|` or `=`; `=` is taken as
    /// little-endian, the only native order this crate supports), a kind character and a size
    /// (characters for `U`), plus a unit for datetimes (`<M8[ns]`).
    fn from_str(s: &str) -> Result<DType, String> {
        let bad = |why: &str| format!("unsupported numpy type string {s:?}: {why}");
        let mut chars = s.chars();
        let order = match chars.next() {
            Some('<') | Some('=') => ByteOrder::Little,
            Some('>') => ByteOrder::Big,
            Some('|') => ByteOrder::NotApplicable,
            _ => return Err(bad("expected a byte order '<', '>', '|' or '='")),
        };
        let kind = match chars.next() {
            Some('b') => DTypeKind::Bool,
            Some('i') => DTypeKind::Int,
            Some('u') => DTypeKind::UInt,
            Some('f') => DTypeKind::Float,
            Some('c') => DTypeKind::Complex,
            Some('M') => DTypeKind::Datetime,
            Some('m') => DTypeKind::Timedelta,
            Some('S') => DTypeKind::Bytes,
            Some('U') => DTypeKind::Unicode,
            Some('V') => DTypeKind::Void,
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
            DTypeKind::Datetime | DTypeKind::Timedelta => {
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
                Ok(DType {
                    kind,
                    item_size: 8,
                    byte_order: normalise_order(8, order),
                    unit: unit.to_string(),
                })
            }
            DTypeKind::Bytes | DTypeKind::Void | DTypeKind::Unicode => {
                if !unit.is_empty() {
                    return Err(bad("trailing characters"));
                }
                if count == 0 {
                    return Err(bad("zero-sized items"));
                }
                let (item_size, byte_order) = if kind == DTypeKind::Unicode {
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
                Ok(DType {
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
                DType::numeric(kind, count, order).ok_or_else(|| bad("no such numeric type"))
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
            let d: DType = s.parse().unwrap();
            assert_eq!(d.descr(), s);
        }
        assert_eq!("<U3".parse::<DType>().unwrap().item_size(), 12);
        assert_eq!("<c16".parse::<DType>().unwrap().item_size(), 16);
    }

    #[test]
    fn normalises_orders_like_numpy() {
        assert_eq!("<u1".parse::<DType>().unwrap().descr(), "|u1");
        assert_eq!(">b1".parse::<DType>().unwrap().descr(), "|b1");
        assert_eq!("=f4".parse::<DType>().unwrap().descr(), "<f4");
        assert_eq!("|i8".parse::<DType>().unwrap().descr(), "<i8");
    }

    #[test]
    fn rejects_what_numpy_has_no_type_for() {
        for s in [
            "", "<", "<x4", "<i3", "<f1", "<c4", "<b2", "<f", "<S0", "<M4[ns]", "<M8[]", "<M8ns",
            "<f4x", "f4",
        ] {
            assert!(s.parse::<DType>().is_err(), "{s:?}");
        }
    }

    #[test]
    fn parses_descr_json() {
        let d = DType::from_descr_json(br#"[["", "<i2"]]"#).unwrap();
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
            assert!(DType::from_descr_json(bad).is_err());
        }
    }
}
