//! JSON values as Python's `json` module writes and reads them, for `JSONField`.
//!
//! FFCV stores `json.dumps(value)` with the default arguments: `", "` and `": "` separators,
//! ASCII output with `\uXXXX` escapes (surrogate pairs above U+FFFF), floats in Python's
//! `repr` (`1e-05`, `1e+16`, `0.1`, `1.0`), `NaN`/`Infinity`/`-Infinity` for non-finite
//! floats, and dict keys in insertion order. [`JsonValue::to_python_json`] reproduces those
//! bytes exactly; [`JsonValue::parse`] reads them back (it also accepts the non-finite
//! literals, which strict JSON parsers reject).

use std::fmt::Write as _;

/// A JSON value that keeps what Python keeps: object key order, integers apart from floats,
/// and non-finite floats.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonValue {
    /// `null` (`None`).
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer (Python ints beyond `i128` are not supported).
    Int(i128),
    /// A float, possibly NaN or infinite.
    Float(f64),
    /// A string.
    String(String),
    /// A list.
    Array(Vec<JsonValue>),
    /// A dict, in insertion order.
    Object(Vec<(String, JsonValue)>),
}

/// Deepest nesting [`JsonValue::parse`] accepts (Python's default recursion limit is near).
const MAX_DEPTH: usize = 512;

impl JsonValue {
    /// The exact text Python's `json.dumps(value)` produces (without FFCV's trailing NUL).
    ///
    /// ```
    /// use beton_io::JsonValue;
    /// let v = JsonValue::Object(vec![
    ///     ("b".into(), JsonValue::Float(1e16)),
    ///     ("a".into(), JsonValue::Array(vec![JsonValue::Float(1e-5), JsonValue::Float(0.1)])),
    ///     ("s".into(), JsonValue::String("caf\u{e9} \u{1F600}".into())),
    /// ]);
    /// assert_eq!(
    ///     v.to_python_json(),
    ///     r#"{"b": 1e+16, "a": [1e-05, 0.1], "s": "caf\u00e9 \ud83d\ude00"}"#
    /// );
    /// ```
    pub fn to_python_json(&self) -> String {
        let mut out = String::new();
        self.write_python(&mut out);
        out
    }

    fn write_python(&self, out: &mut String) {
        match self {
            JsonValue::Null => out.push_str("null"),
            JsonValue::Bool(true) => out.push_str("true"),
            JsonValue::Bool(false) => out.push_str("false"),
            JsonValue::Int(i) => {
                let _ = write!(out, "{i}");
            }
            JsonValue::Float(f) => out.push_str(&python_float_repr(*f)),
            JsonValue::String(s) => write_python_string(s, out),
            JsonValue::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_python(out);
                }
                out.push(']');
            }
            JsonValue::Object(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_python_string(k, out);
                    out.push_str(": ");
                    v.write_python(out);
                }
                out.push('}');
            }
        }
    }

    /// Parses JSON text as Python's `json.loads` does: keys keep their order (a repeated key
    /// keeps its last value, at the position of its first occurrence, like a Python dict),
    /// numbers with a fraction or exponent are floats, and `NaN`, `Infinity`, `-Infinity` are
    /// accepted. Nesting deeper than 512 levels is an error.
    pub fn parse(text: &str) -> Result<JsonValue, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        p.ws();
        let v = p.value(0)?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("extra data at byte {}", p.i));
        }
        Ok(v)
    }
}

impl From<serde_json::Value> for JsonValue {
    /// Converts a `serde_json` value (object order is whatever the map kept).
    fn from(v: serde_json::Value) -> JsonValue {
        match v {
            serde_json::Value::Null => JsonValue::Null,
            serde_json::Value::Bool(b) => JsonValue::Bool(b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    JsonValue::Int(i128::from(i))
                } else if let Some(u) = n.as_u64() {
                    JsonValue::Int(i128::from(u))
                } else {
                    JsonValue::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            serde_json::Value::String(s) => JsonValue::String(s),
            serde_json::Value::Array(a) => {
                JsonValue::Array(a.into_iter().map(Into::into).collect())
            }
            serde_json::Value::Object(o) => {
                JsonValue::Object(o.into_iter().map(|(k, v)| (k, v.into())).collect())
            }
        }
    }
}

/// Python's `repr(float)`: the shortest digits that round-trip, in positional notation when the
/// decimal exponent is in `-4..16`, otherwise `d.ddde±XX`; integral values keep a `.0`.
pub fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0.0");
    }
    let (digits, exp) = shortest_digits(f.abs());
    if !(-4..16).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.unsigned_abs());
    }
    if exp < 0 {
        let zeros = "0".repeat((-exp - 1) as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let int_len = exp as usize + 1;
    if digits.len() <= int_len {
        let zeros = "0".repeat(int_len - digits.len());
        format!("{sign}{digits}{zeros}.0")
    } else {
        let (int, frac) = digits.split_at(int_len);
        format!("{sign}{int}.{frac}")
    }
}

/// The shortest decimal digits that read back as `x` (> 0), and the decimal exponent of the
/// first digit, chosen like CPython (David Gay's `dtoa` mode 0): among the shortest strings,
/// the one nearest to `x`, ties to even.
fn shortest_digits(x: f64) -> (String, i32) {
    let split = |s: &str| {
        let (mantissa, exp) = s.split_once('e').expect("`{:e}` always has an exponent");
        let digits: String = mantissa.chars().filter(|&c| c != '.').collect();
        (digits, exp.parse::<i32>().expect("integer exponent"))
    };
    // Rust's `{:e}` gives the shortest round-trip digits, but it breaks an exact tie between
    // two equally near candidates upwards (…088.13 where CPython prints …088.12).
    let (digits, exp) = split(&format!("{x:e}"));
    // `{:.Ne}` rounds the exact binary value to N+1 digits, ties to even; when that string of
    // the same length still reads back as `x`, it is the nearest one, as CPython picks.
    let exact = format!("{:.*e}", digits.len() - 1, x);
    if exact.parse::<f64>() == Ok(x) {
        let (d, e) = split(&exact);
        let d = d.trim_end_matches('0');
        if !d.is_empty() {
            return (d.to_string(), e);
        }
    }
    (digits, exp)
}

fn write_python_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
        }
    }
    out.push('"');
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.i))
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<JsonValue, String> {
        if depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        match self.s.get(self.i) {
            None => self.err("unexpected end"),
            Some(b'{') => {
                self.i += 1;
                let mut entries: Vec<(String, JsonValue)> = Vec::new();
                let mut index = std::collections::HashMap::new();
                self.ws();
                if self.eat("}") {
                    return Ok(JsonValue::Object(entries));
                }
                loop {
                    self.ws();
                    if self.s.get(self.i) != Some(&b'"') {
                        return self.err("expected a string key");
                    }
                    let k = self.string()?;
                    self.ws();
                    if !self.eat(":") {
                        return self.err("expected ':'");
                    }
                    self.ws();
                    let v = self.value(depth + 1)?;
                    match index.get(&k) {
                        Some(&slot) => entries[slot] = (k, v),
                        None => {
                            index.insert(k.clone(), entries.len());
                            entries.push((k, v));
                        }
                    }
                    self.ws();
                    if self.eat(",") {
                        continue;
                    }
                    if self.eat("}") {
                        return Ok(JsonValue::Object(entries));
                    }
                    return self.err("expected ',' or '}'");
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.eat("]") {
                    return Ok(JsonValue::Array(items));
                }
                loop {
                    self.ws();
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    if self.eat(",") {
                        continue;
                    }
                    if self.eat("]") {
                        return Ok(JsonValue::Array(items));
                    }
                    return self.err("expected ',' or ']'");
                }
            }
            Some(b'"') => Ok(JsonValue::String(self.string()?)),
            _ => {
                if self.eat("null") {
                    Ok(JsonValue::Null)
                } else if self.eat("true") {
                    Ok(JsonValue::Bool(true))
                } else if self.eat("false") {
                    Ok(JsonValue::Bool(false))
                } else if self.eat("NaN") {
                    Ok(JsonValue::Float(f64::NAN))
                } else if self.eat("Infinity") {
                    Ok(JsonValue::Float(f64::INFINITY))
                } else if self.eat("-Infinity") {
                    Ok(JsonValue::Float(f64::NEG_INFINITY))
                } else {
                    self.number()
                }
            }
        }
    }

    fn number(&mut self) -> Result<JsonValue, String> {
        let start = self.i;
        let digits = |p: &mut Self| {
            let s = p.i;
            while p.s.get(p.i).is_some_and(u8::is_ascii_digit) {
                p.i += 1;
            }
            p.i - s
        };
        if self.s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        let n = digits(self);
        if n == 0 || (n > 1 && self.s[int_start] == b'0') {
            return self.err("invalid number");
        }
        let mut is_float = false;
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return self.err("invalid fraction");
            }
            is_float = true;
        }
        if let Some(b'e' | b'E') = self.s.get(self.i) {
            self.i += 1;
            if let Some(b'+' | b'-') = self.s.get(self.i) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return self.err("invalid exponent");
            }
            is_float = true;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).expect("ASCII");
        if is_float {
            text.parse()
                .map(JsonValue::Float)
                .map_err(|e| format!("{e} at byte {start}"))
        } else {
            text.parse()
                .map(JsonValue::Int)
                .map_err(|_| format!("integer {text} beyond 128 bits at byte {start}"))
        }
    }

    fn hex4(&mut self) -> Result<u16, String> {
        let Some(h) = self.s.get(self.i..self.i + 4) else {
            return self.err("short \\u escape");
        };
        let h = std::str::from_utf8(h).map_err(|_| "bad \\u escape".to_string())?;
        let v = u16::from_str_radix(h, 16).map_err(|_| format!("bad \\u escape at {}", self.i))?;
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, String> {
        self.i += 1; // opening quote
        let mut out = String::new();
        loop {
            let start = self.i;
            while let Some(&b) = self.s.get(self.i) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.i += 1;
            }
            out.push_str(
                std::str::from_utf8(&self.s[start..self.i])
                    .map_err(|_| format!("invalid UTF-8 at byte {start}"))?,
            );
            match self.s.get(self.i) {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let Some(&e) = self.s.get(self.i) else {
                        return self.err("unterminated escape");
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi) && self.eat("\\u") {
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return self.err("unpaired surrogate");
                                }
                                let cp = 0x10000
                                    + ((u32::from(hi) - 0xD800) << 10)
                                    + (u32::from(lo) - 0xDC00);
                                char::from_u32(cp)
                            } else {
                                char::from_u32(u32::from(hi))
                            };
                            match c {
                                Some(c) => out.push(c),
                                None => return self.err("lone surrogate"),
                            }
                        }
                        _ => return self.err("invalid escape"),
                    }
                }
                Some(_) => return self.err("control character in string"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        for (f, s) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (1.5e16, "1.5e+16"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (-1.5, "-1.5"),
            (1.0 / 3.0, "0.3333333333333333"),
            (100.0, "100.0"),
            (70.78, "70.78"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (2.5e-7, "2.5e-07"),
            (-122404184627088.0 - 0.125, "-122404184627088.12"),
            (1e100, "1e+100"),
        ] {
            assert_eq!(python_float_repr(f), s, "{f:?}");
        }
    }

    #[test]
    fn strings_escape_like_ensure_ascii() {
        let v = JsonValue::String("a\"\\\n\r\t\u{8}\u{c}\u{1}\u{7f}é✓😀/".into());
        assert_eq!(
            v.to_python_json(),
            r#""a\"\\\n\r\t\b\f\u0001\u007f\u00e9\u2713\ud83d\ude00/""#
        );
        assert_eq!(JsonValue::parse(&v.to_python_json()).unwrap(), v);
    }

    #[test]
    fn parse_then_dump_is_identity_on_python_output() {
        for text in [
            r#"{"i": 0, "name": "item-0", "tags": ["epsilon", "zeta"], "score": 70.78, "nested": {"even": true, "none": null}, "text": "na\u00efve caf\u00e9 \u2713"}"#,
            r#"[NaN, Infinity, -Infinity, 1e+16, -0.0, 12345678901234567890123]"#,
            r#"{"z": {}, "a": []}"#,
        ] {
            assert_eq!(JsonValue::parse(text).unwrap().to_python_json(), text);
        }
    }

    #[test]
    fn parse_rejects_malformed_text() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "01",
            "1.",
            "\"\\ud800\"",
            "\"abc",
            "[1] 2",
            "nul",
            "\"\\x\"",
        ] {
            assert!(JsonValue::parse(bad).is_err(), "{bad:?}");
        }
        let deep = "[".repeat(600) + &"]".repeat(600);
        assert!(JsonValue::parse(&deep).is_err());
    }
}
