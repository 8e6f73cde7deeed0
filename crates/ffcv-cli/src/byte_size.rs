//! Byte sizes on the command line: `2097152`, `8MiB`, `512KiB`, `1GiB`, `4M`, `16MB`.

/// Parses a byte count: a plain integer, or an integer with a unit. `KiB`/`MiB`/`GiB`/`TiB`
/// (and the short `K`/`M`/`G`/`T`) are powers of 1024; `kB`/`MB`/`GB`/`TB` are powers of 1000.
/// Used as a clap `value_parser`, so the message becomes a usage error (exit 2).
pub fn parse_byte_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return Err(format!(
            "`{text}` is not a byte size (examples: 2097152, 8MiB, 512KiB)"
        ));
    }
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is too large for a byte size"))?;
    let multiplier: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "k" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}` (use B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"
            ));
        }
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("`{text}` is too large for a byte size"))
}

#[cfg(test)]
mod tests {
    use super::parse_byte_size;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_byte_size("2097152"), Ok(2_097_152));
        assert_eq!(parse_byte_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_byte_size("8M"), Ok(8 << 20));
        assert_eq!(parse_byte_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_byte_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_byte_size("16MB"), Ok(16_000_000));
        assert_eq!(parse_byte_size("4 KiB"), Ok(4096));
    }

    #[test]
    fn malformed_sizes_are_rejected_with_a_reason() {
        assert!(parse_byte_size("").unwrap_err().contains("not a byte size"));
        assert!(
            parse_byte_size("MiB")
                .unwrap_err()
                .contains("not a byte size")
        );
        assert!(parse_byte_size("8XB").unwrap_err().contains("unknown unit"));
        assert!(
            parse_byte_size("-1")
                .unwrap_err()
                .contains("not a byte size")
        );
        assert!(
            parse_byte_size("99999999999999999999")
                .unwrap_err()
                .contains("too large")
        );
        assert!(
            parse_byte_size("17179869184GiB")
                .unwrap_err()
                .contains("too large")
        );
    }
}
