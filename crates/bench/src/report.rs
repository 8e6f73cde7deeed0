//! One benchmark row and the files a run writes (`target/bench/small.json`, `small.md`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

/// One bounded measurement of the `bench --small` matrix.
///
/// The keys of the JSON form are stable: scripts compare runs by `name`.
#[derive(Debug, Clone, Default)]
pub struct Row {
    /// Stable identifier, e.g. `reader/sequential/128k/1t` or `jit/fused`.
    pub name: String,
    /// Human-readable configuration (dataset, order, threads, ...).
    pub config: String,
    /// Samples processed per second (median over the timed repetitions).
    pub samples_per_sec: f64,
    /// Payload bytes processed per second.
    pub bytes_per_sec: f64,
    /// Throughput relative to the row's baseline (memcpy, interpreter, OS cache, ...), if any.
    pub ratio: Option<f64>,
    /// What `ratio` is relative to, e.g. `memcpy`.
    pub ratio_to: Option<String>,
    /// Further measured figures with stable keys (`read_amplification`, `compile_ms`, ...).
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl Row {
    /// The row's JSON object: the fixed keys, then every `extra` key at the same level.
    pub fn to_json(&self) -> Value {
        let mut object = serde_json::Map::new();
        object.insert("name".into(), json!(self.name));
        object.insert("config".into(), json!(self.config));
        object.insert("samples_per_sec".into(), json!(self.samples_per_sec));
        object.insert("bytes_per_sec".into(), json!(self.bytes_per_sec));
        object.insert("ratio".into(), json!(self.ratio));
        object.insert("ratio_to".into(), json!(self.ratio_to));
        for (key, value) in &self.extra {
            // A fixed key wins: extras never shadow the stable columns.
            object.entry(key.clone()).or_insert_with(|| value.clone());
        }
        Value::Object(object)
    }
}

/// Facts about the machine a run measured, stored beside the rows.
#[derive(Debug, Clone)]
pub struct Machine {
    /// CPUs this process may run on.
    pub cpus: usize,
    /// CPU model name (from `/proc/cpuinfo` where available).
    pub model: String,
    /// Total memory in bytes, when known.
    pub memory_bytes: Option<u64>,
    /// `linux-x86_64` and the like.
    pub platform: String,
}

impl Machine {
    /// Reads the facts of the current machine.
    pub fn current() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let model = cpuinfo
            .lines()
            .find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == "model name").then(|| value.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|meminfo| {
                let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                kib.checked_mul(1024)
            });
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            model,
            memory_bytes,
            platform: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "cpus": self.cpus,
            "model": self.model,
            "memory_bytes": self.memory_bytes,
            "platform": self.platform,
        })
    }
}

/// A whole run: what `small.json` holds.
#[derive(Debug, Clone)]
pub struct Report {
    /// The machine measured.
    pub machine: Machine,
    /// The command line of the run (`--small --only reader`).
    pub args: Vec<String>,
    /// Wall-clock seconds of the whole run, data set preparation included.
    pub total_seconds: f64,
    /// The rows, in the order they were measured.
    pub rows: Vec<Row>,
}

impl Report {
    /// The JSON document written to `small.json`.
    pub fn to_json(&self) -> Value {
        json!({
            "schema": "ffcv-bench/1",
            "machine": self.machine.to_json(),
            "args": self.args,
            "total_seconds": self.total_seconds,
            "rows": self.rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        })
    }

    /// The rows as an aligned text table for the terminal.
    pub fn table(&self) -> String {
        let cells = self.cells();
        let headings = HEADINGS.map(str::to_owned);
        let mut widths = HEADINGS.map(str::len);
        for row in &cells {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.len());
            }
        }
        let mut text = String::new();
        for row in std::iter::once(&headings).chain(&cells) {
            let mut line = String::new();
            for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
                // Text columns left-aligned, figures right-aligned.
                if i == 0 || i == HEADINGS.len() - 1 {
                    let _ = write!(line, "{cell:<width$}  ");
                } else {
                    let _ = write!(line, "{cell:>width$}  ");
                }
            }
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text
    }

    /// The rows as a Markdown document (`small.md`).
    pub fn markdown(&self) -> String {
        let mut text = String::from("# `cargo xtask bench --small`\n\n");
        let _ = writeln!(
            text,
            "Machine: {} ({} CPUs, {}). Command: `cargo xtask bench {}`. Total {:.1} s.\n",
            self.machine.model,
            self.machine.cpus,
            self.machine.platform,
            self.args.join(" "),
            self.total_seconds
        );
        let _ = writeln!(text, "| {} |", HEADINGS.join(" | "));
        let _ = writeln!(text, "|---|---:|---:|---:|---|");
        for row in self.cells() {
            let _ = writeln!(text, "| {} |", row.join(" | "));
        }
        text
    }

    fn cells(&self) -> Vec<[String; 5]> {
        self.rows
            .iter()
            .map(|row| {
                let ratio = match (row.ratio, &row.ratio_to) {
                    (Some(ratio), Some(to)) => format!("{ratio:.2} x {to}"),
                    (Some(ratio), None) => format!("{ratio:.2}"),
                    _ => "-".to_owned(),
                };
                [
                    row.name.clone(),
                    format_rate(row.samples_per_sec),
                    format!("{:.1}", row.bytes_per_sec / 1e6),
                    ratio,
                    row.config.clone(),
                ]
            })
            .collect()
    }
}

const HEADINGS: [&str; 5] = ["name", "samples/s", "MB/s", "ratio", "config"];

/// `1234567.0` -> `1.23 M`: three significant figures for the eye.
fn format_rate(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.2} M", rate / 1e6)
    } else if rate >= 1e3 {
        format!("{:.1} k", rate / 1e3)
    } else {
        format!("{rate:.1}")
    }
}

/// `--compare OLD.json`: each row's throughput against the same-named row of an earlier run.
pub fn compare(old: &Value, rows: &[Row]) -> Result<String, String> {
    let old_rows = old
        .get("rows")
        .and_then(Value::as_array)
        .ok_or("the old report has no `rows` array")?;
    let old_rate = |name: &str| {
        old_rows
            .iter()
            .find(|row| row.get("name").and_then(Value::as_str) == Some(name))
            .and_then(|row| row.get("samples_per_sec"))
            .and_then(Value::as_f64)
    };
    let width = rows
        .iter()
        .map(|row| row.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut text = format!(
        "{:<width$}  {:>12}  {:>12}  {:>9}\n",
        "name", "old/s", "new/s", "new/old"
    );
    for row in rows {
        let (old, change) = match old_rate(&row.name) {
            Some(old) if old > 0.0 => (
                format_rate(old),
                format!("{:.3}", row.samples_per_sec / old),
            ),
            _ => ("-".to_owned(), "new row".to_owned()),
        };
        let _ = writeln!(
            text,
            "{:<width$}  {:>12}  {:>12}  {:>9}",
            row.name,
            old,
            format_rate(row.samples_per_sec),
            change
        );
    }
    Ok(text)
}

/// A row with just a name and a throughput, for the tests of the report and the plot.
#[cfg(test)]
pub(crate) fn test_row(name: &str, rate: f64) -> Row {
    Row {
        name: name.to_owned(),
        samples_per_sec: rate,
        ..Row::default()
    }
}

#[cfg(test)]
mod tests {
    use super::compare;
    use serde_json::json;

    use super::test_row as row;

    #[test]
    fn extras_sit_beside_the_fixed_keys_without_shadowing_them() {
        let mut r = row("reader/x", 10.0);
        r.extra.insert("threads".into(), json!(2));
        r.extra.insert("name".into(), json!("shadow"));
        let value = r.to_json();
        assert_eq!(value["name"], "reader/x");
        assert_eq!(value["threads"], 2);
        assert_eq!(value["samples_per_sec"], 10.0);
    }

    #[test]
    fn table_and_markdown_have_a_line_per_row_with_the_ratio() {
        let mut r = row("reader/random/3k/1t", 1_530_000.0);
        r.bytes_per_sec = 4.7e9;
        r.ratio = Some(0.613);
        r.ratio_to = Some("memcpy".into());
        let report = super::Report {
            machine: super::Machine {
                cpus: 2,
                model: "test cpu".into(),
                memory_bytes: None,
                platform: "linux-x86_64".into(),
            },
            args: vec!["--small".into()],
            total_seconds: 1.0,
            rows: vec![r, row("jit/compile", 10.0)],
        };
        let table = report.table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("reader/random/3k/1t"));
        assert!(
            lines[1].contains("1.53 M")
                && lines[1].contains("4700.0")
                && lines[1].contains("0.61 x memcpy")
        );
        assert!(
            lines[2].ends_with(" -"),
            "no ratio shows a dash: {}",
            lines[2]
        );
        let markdown = report.markdown();
        assert!(
            markdown.contains("| reader/random/3k/1t | 1.53 M | 4700.0 | 0.61 x memcpy |"),
            "{markdown}"
        );
        assert_eq!(report.to_json()["machine"]["cpus"], 2);
        assert_eq!(report.to_json()["rows"][1]["name"], "jit/compile");
    }

    #[test]
    fn compare_divides_by_the_same_named_old_row() {
        let old = json!({"rows": [{"name": "a", "samples_per_sec": 200.0}]});
        let text = compare(&old, &[row("a", 100.0), row("b", 5.0)]).unwrap();
        let a = text.lines().find(|l| l.starts_with("a ")).unwrap();
        assert!(a.ends_with("0.500"), "{a}");
        let b = text.lines().find(|l| l.starts_with("b ")).unwrap();
        assert!(b.ends_with("new row"), "{b}");
        assert!(compare(&json!({}), &[]).is_err());
    }
}
