//! What the kernel counts for this process: bytes read from storage (`/proc/self/io`),
//! major page faults and CPU time (`/proc/self/stat`). `ffcv bench` and `ffcv doctor` take
//! them before and after a run to tell a run that waits on the disk (many bytes read, many
//! major faults, idle CPUs) from one that computes, whatever the loader's stage timers say:
//! a fault on the OS cache's map is taken inside a pipeline stage and counts as its time.

/// One snapshot of the counters; a field is `None` where its file is unreadable.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessCounters {
    /// `read_bytes` of `/proc/self/io`: bytes this process caused to be read from storage.
    pub read_bytes: Option<u64>,
    /// `majflt` of `/proc/self/stat`: page faults that had to read from storage.
    pub major_faults: Option<u64>,
    /// `utime + stime` of `/proc/self/stat`, in seconds (USER_HZ = 100 on Linux).
    pub cpu_seconds: Option<f64>,
}

impl ProcessCounters {
    /// The counters now.
    pub fn now() -> ProcessCounters {
        let io = std::fs::read_to_string("/proc/self/io").ok();
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let parsed = stat.as_deref().and_then(parse_stat);
        ProcessCounters {
            read_bytes: io.as_deref().and_then(parse_read_bytes),
            major_faults: parsed.map(|p| p.0),
            cpu_seconds: parsed.map(|p| p.1 as f64 / 100.0),
        }
    }

    /// What happened between `self` (earlier) and `later`.
    pub fn until(&self, later: &ProcessCounters) -> ProcessCounters {
        ProcessCounters {
            read_bytes: later
                .read_bytes
                .zip(self.read_bytes)
                .map(|(b, a)| b.saturating_sub(a)),
            major_faults: later
                .major_faults
                .zip(self.major_faults)
                .map(|(b, a)| b.saturating_sub(a)),
            cpu_seconds: later
                .cpu_seconds
                .zip(self.cpu_seconds)
                .map(|(b, a)| (b - a).max(0.0)),
        }
    }
}

/// Bytes read from storage per byte the samples needed (`read / needed`); `None` when
/// nothing was needed.
pub fn read_amplification(read: u64, needed: u64) -> Option<f64> {
    (needed > 0).then(|| read as f64 / needed as f64)
}

/// CPU time over the wall time the process's `cpus` could have used (0..1; above 1 only
/// if the affinity mask changed meanwhile).
pub fn cpu_utilisation(cpu_seconds: f64, wall_seconds: f64, cpus: usize) -> Option<f64> {
    (wall_seconds > 0.0 && cpus > 0).then(|| cpu_seconds / (wall_seconds * cpus as f64))
}

/// `read_bytes` from the text of `/proc/PID/io`.
fn parse_read_bytes(io: &str) -> Option<u64> {
    io.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

/// `(majflt, utime + stime)` from the text of `/proc/PID/stat`. The command name (field
/// 2) may hold spaces and parentheses, so fields are counted after its last `)`.
fn parse_stat(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name the state is field 3, so majflt (12) is the 10th, utime (14) and
    // stime (15) the 12th and 13th.
    let majflt = fields.get(9)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((majflt, utime + stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "4242 (ffcv (x) y) S 1 4242 4242 0 -1 4194560 100 0 77 0 250 37 0 0 20 0 3 0";
        assert_eq!(parse_stat(stat), Some((77, 287)));
        assert_eq!(parse_stat("4242 (ffcv) S 1"), None);
        assert_eq!(parse_stat("no name here"), None);
    }

    #[test]
    fn read_bytes_comes_from_its_line() {
        let io = "rchar: 10\nwchar: 2\nsyscr: 1\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 0\n";
        assert_eq!(parse_read_bytes(io), Some(4096));
        assert_eq!(parse_read_bytes("rchar: 10\n"), None);
    }

    #[test]
    fn differences_saturate_and_need_both_ends() {
        let a = ProcessCounters {
            read_bytes: Some(100),
            major_faults: Some(5),
            cpu_seconds: Some(1.0),
        };
        let b = ProcessCounters {
            read_bytes: Some(400),
            major_faults: Some(3),
            cpu_seconds: None,
        };
        let d = a.until(&b);
        assert_eq!(d.read_bytes, Some(300));
        assert_eq!(d.major_faults, Some(0));
        assert_eq!(d.cpu_seconds, None);
        assert_eq!(read_amplification(300, 100), Some(3.0));
        assert_eq!(read_amplification(300, 0), None);
        assert_eq!(cpu_utilisation(1.0, 2.0, 2), Some(0.25));
        assert_eq!(cpu_utilisation(1.0, 0.0, 2), None);
    }

    #[test]
    fn this_process_has_counters_on_linux() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        let now = ProcessCounters::now();
        assert!(now.major_faults.is_some());
        assert!(now.cpu_seconds.is_some());
    }
}
