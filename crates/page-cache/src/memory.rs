//! The default memory budget: the available memory the OS reports.

/// Bytes of memory available to new allocations, from `MemAvailable` in
/// `/proc/meminfo` (Linux); `None` where the OS does not say.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

/// Parses the `MemAvailable:   123 kB` line of a `/proc/meminfo` text.
fn parse_mem_available(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line["MemAvailable:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    let unit = match words.next() {
        Some("kB") => 1024,
        None => 1,
        Some(_) => return None,
    };
    value.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mem_available_in_kib() {
        let text = "MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(parse_mem_available(text), Some(2048 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: x kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: 7 MB\n"), None);
    }

    #[test]
    fn this_machine_reports_some_memory() {
        if cfg!(target_os = "linux") {
            assert!(available_memory().is_some_and(|m| m > 0));
        }
    }
}
