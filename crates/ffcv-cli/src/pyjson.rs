//! JSON text in Python's `json.dumps` style, so `ffcv dump` lines can be diffed against FFCV's.
//!
//! Python writes `", "` and `": "` separators, escapes every character outside printable
//! ASCII as `\uXXXX` (`ensure_ascii=True`), and prints floats with `repr`: the shortest
//! digits that round-trip, in positional notation for decimal exponents -4..=15 and as
//! `1e+16` / `5e-324` otherwise, always with a `.0` on integral values. `-0.0` stays `-0.0`.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

/// Serializes `value` as one line of Python-style JSON.
pub fn to_line<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    value.serialize(&mut serializer)?;
    // Only ASCII is ever written (see `write_string_fragment`), so this cannot fail.
    String::from_utf8(out).map_err(|err| serde::ser::Error::custom(err.to_string()))
}

/// Python's `repr(float)` of a finite `x` (non-finite values give `nan`, `inf`, `-inf`).
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's `{:e}` prints the shortest round-trip digits, like Python's repr, in the form
    // `-d.ddde-N`; only the layout differs.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if x < 0.0 { "-" } else { "" };
    // Python's decimal point position: value = 0.DIGITS * 10^decpt.
    let decpt = exponent + 1;
    if !(-3..=16).contains(&decpt) {
        let (head, tail) = digits.split_at(1);
        let fraction = if tail.is_empty() {
            String::new()
        } else {
            format!(".{tail}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{head}{fraction}e{exp_sign}{:02}",
            exponent.unsigned_abs()
        );
    }
    let n = digits.len() as i32;
    if decpt <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-decpt) as usize))
    } else if decpt >= n {
        format!("{sign}{digits}{}.0", "0".repeat((decpt - n) as usize))
    } else {
        let (int_part, frac_part) = digits.split_at(decpt as usize);
        format!("{sign}{int_part}.{frac_part}")
    }
}

/// A `serde_json` formatter that writes what Python's `json.dumps` writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct PythonFormatter;

impl Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    fn write_f64<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(float_repr(value).as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(writer, f64::from(value))
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        // serde_json already escaped quotes, backslashes and control characters; Python
        // additionally escapes DEL and everything beyond ASCII, as UTF-16 code units.
        for ch in fragment.chars() {
            if (' '..='~').contains(&ch) {
                writer.write_all(&[ch as u8])?;
            } else {
                let mut units = [0u16; 2];
                for unit in ch.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{float_repr, to_line};

    #[test]
    fn floats_print_like_python_repr() {
        let cases = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (-1.5, "-1.5"),
            (1.0 / 3.0, "0.3333333333333333"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (2.2250738585072014e-308, "2.2250738585072014e-308"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (0.000123, "0.000123"),
            (70.78, "70.78"),
            (100.0, "100.0"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (x, expected) in cases {
            assert_eq!(float_repr(x), expected, "repr of {x:e}");
        }
    }

    #[test]
    fn lines_use_python_separators_and_ascii_escapes() {
        let value =
            serde_json::json!({"a": [1, 2.5, -0.0], "text": "naïve ✓ \u{7f}\n😀", "none": null});
        let line = to_line(&value).unwrap();
        assert_eq!(
            line,
            r#"{"a": [1, 2.5, -0.0], "text": "na\u00efve \u2713 \u007f\n\ud83d\ude00", "none": null}"#
        );
    }
}
