//! `ffcv doctor` and `ffcv bench` inside a memory-limited control group, as in a container:
//! the limit is reported and binds, an evicted file larger than the limit is named
//! storage-bound, and the recommended configuration (the process cache with QuasiRandom and
//! a buffer that fits) runs within the limit, reading each byte about once.
//!
//! The test creates a cgroup (v2 with the memory controller, else v1's memory hierarchy)
//! and runs the binaries in it through `sh -c 'echo $$ > …/cgroup.procs; exec …'`. Where it
//! cannot (not root, no writable memory controller) it says so and passes without checking.
//! The group is removed afterwards, on failure too. It asserts facts and recommendations,
//! never speeds.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use beton_io::{DatasetWriter, from_fn};
use ffcv_cli::synthetic::{Kind, Spec};
use serde_json::Value;
use support::Run;

/// 128 KiB samples in 8 MiB pages, as the 3 GiB file, but 320 MiB of them.
const SAMPLES: u64 = 2560;
const SAMPLE_BYTES: u64 = 128 * 1024;
const PAGE: u64 = 8 << 20;
/// Below the file, above what the process cache with a small buffer needs.
const LIMIT: u64 = 192 << 20;

/// A memory cgroup this test made; removed on drop.
struct Group {
    dir: PathBuf,
    /// Where a process goes back to before the group is removed.
    parent_procs: PathBuf,
}

impl Group {
    /// A new group with a memory limit of `limit`, or why none can be made here.
    fn create(limit: u64) -> Result<Group, String> {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
        let mut v2 = None;
        let mut v1 = None;
        for line in mounts.lines() {
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let point = left.split_whitespace().nth(4).unwrap_or_default();
            let mut right = right.split_whitespace();
            let fstype = right.next().unwrap_or_default();
            let options = right.nth(1).unwrap_or_default();
            if fstype == "cgroup2" {
                v2 = Some(PathBuf::from(point));
            } else if fstype == "cgroup" && options.split(',').any(|o| o == "memory") {
                v1 = Some(PathBuf::from(point));
            }
        }
        let name = format!("ffcv-test-{}", std::process::id());
        let mut why = Vec::new();
        if let Some(root) = v2 {
            let controllers =
                std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "memory") {
                // The memory controller must be enabled for the root's children.
                let _ = std::fs::write(root.join("cgroup.subtree_control"), "+memory");
                match Group::make(&root, &name, "memory.max", limit) {
                    Ok(group) => return Ok(group),
                    Err(e) => why.push(format!("cgroup v2 at {}: {e}", root.display())),
                }
            } else {
                why.push(format!(
                    "cgroup v2 at {} has no memory controller",
                    root.display()
                ));
            }
        }
        if let Some(root) = v1 {
            match Group::make(&root, &name, "memory.limit_in_bytes", limit) {
                Ok(group) => return Ok(group),
                Err(e) => why.push(format!("cgroup v1 at {}: {e}", root.display())),
            }
        }
        if why.is_empty() {
            why.push("no cgroup hierarchy with a memory controller is mounted".to_owned());
        }
        Err(why.join("; "))
    }

    fn make(root: &Path, name: &str, limit_file: &str, limit: u64) -> Result<Group, String> {
        let dir = root.join(name);
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let group = Group {
            dir,
            parent_procs: root.join("cgroup.procs"),
        };
        std::fs::write(group.dir.join(limit_file), limit.to_string())
            .map_err(|e| format!("{limit_file}: {e}"))?;
        Ok(group)
    }

    /// Runs `ffcv ARGS` inside the group.
    fn ffcv(&self, args: &[&str]) -> Run {
        let procs = self.dir.join("cgroup.procs");
        let output = Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(&procs)
            .arg(env!("CARGO_BIN_EXE_ffcv"))
            .args(args)
            .output()
            .expect("sh runs");
        Run {
            code: output.status.code(),
            stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // Any process left inside goes back to the root; then the empty group can go.
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in procs.split_whitespace() {
                let _ = std::fs::write(&self.parent_procs, pid);
            }
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("cli_memory_limit: could not remove {}", self.dir.display());
    }
}

fn write_file(dir: &Path) -> PathBuf {
    let path = dir.join("larger-than-limit.beton");
    let spec = Spec {
        shape: vec![SAMPLE_BYTES],
        dtype: beton_io::NumpyDtype::u8(),
        seed: 17,
        ..Spec::new(Kind::Ndarray)
    };
    DatasetWriter::new(&path, spec.fields().unwrap())
        .unwrap()
        .with_page_size(PAGE)
        .unwrap()
        .with_num_workers(2)
        .write(&from_fn(SAMPLES, |i| Ok(spec.sample(i))))
        .unwrap();
    path
}

/// Writes back and drops the file's pages, so the next run reads it from storage.
fn evict(path: &Path) {
    std::fs::File::open(path).unwrap().sync_all().unwrap();
    ffcv::page_cache::evict_from_os_cache(path).unwrap();
}

#[test]
fn in_a_memory_limited_cgroup_the_doctor_names_storage_and_its_recommendation_fits() {
    let group = match Group::create(LIMIT) {
        Ok(group) => group,
        Err(why) => {
            eprintln!("skipping cli_memory_limit: cannot create a memory-limited cgroup: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path());
    let file_bytes = std::fs::metadata(&path).unwrap().len();
    assert!(file_bytes > LIMIT);
    let file = path.to_str().unwrap();

    evict(&path);
    let run = group.ffcv(&[
        "doctor",
        file,
        "--batch-size",
        "64",
        "--time-budget",
        "8",
        "--json",
    ]);
    let report: Value = run.json();
    let machine = &report["facts"]["machine"];
    assert_eq!(machine["memory_cgroup_limit_bytes"], LIMIT, "{machine}");
    assert_eq!(machine["memory_bound"], "cgroup", "{machine}");
    assert_eq!(report["rules"]["larger_than_memory"], true);

    // The start: the process cache with QuasiRandom, half the limit at most, a buffer
    // below FFCV's 128 pages that fits it.
    let start = &report["start"];
    assert_eq!(start["os_cache"], false, "{start}");
    assert_eq!(start["order"], "quasi-random", "{start}");
    let budget = start["max_memory"].as_u64().unwrap();
    assert!(budget <= LIMIT / 2, "{start}");
    let buffer = start["quasi_buffer_pages"].as_u64().unwrap();
    assert!((1..128).contains(&buffer), "{start}");
    let rules = report["rules"]["rules"].to_string();
    assert!(rules.contains("quasi-buffer-fits"), "{rules}");

    // The evicted file is read from storage: the baseline is storage-bound by the
    // kernel's counters, and its evidence says so.
    let baseline = &report["trials"][0]["measurement"];
    assert!(
        baseline["read_amplification"].as_f64().unwrap() >= 0.5,
        "{baseline}"
    );
    // The baseline is named storage-bound: the first change tried targets storage.
    assert_eq!(
        report["trials"][1]["targets"], "storage",
        "{}",
        report["trials"]
    );
    // The kept configuration's diagnosis: storage, unless a candidate kept over it (a
    // deeper prefetch, when the machine's noise favours it) holds 90% of the limit, which
    // is memory pressure. The baseline itself (the process cache within half the limit)
    // holds well below that; the file pages the reader maps are the kernel's to drop.
    let diagnosis = &report["diagnosis"];
    let held = diagnosis["memory_held_share"].as_f64().unwrap();
    let expected = if held >= 0.9 { "memory" } else { "storage" };
    assert_eq!(diagnosis["scarce_resource"], expected, "{diagnosis}");
    let baseline_held = baseline["peak_held_bytes"].as_u64().unwrap();
    assert!(baseline_held < LIMIT * 8 / 10, "{baseline}");
    let evidence = report["diagnosis"]["evidence"].to_string();
    assert!(evidence.contains("read amplification"), "{evidence}");
    assert!(evidence.contains("major page faults"), "{evidence}");
    assert!(evidence.contains("CPU utilisation"), "{evidence}");

    let recommended = &report["recommended"];
    assert_eq!(recommended["os_cache"], false, "{recommended}");
    assert_eq!(recommended["order"], "quasi-random", "{recommended}");
    let command = report["command"].as_str().unwrap().to_owned();
    assert!(command.contains("--no-os-cache"), "{command}");
    assert!(
        command.contains(&format!("--quasi-buffer-pages {buffer}")),
        "{command}"
    );

    // The recommended command runs in the same group, over the evicted file: it is not
    // killed for memory, stays below the limit, and reads each byte about once.
    evict(&path);
    let mut args: Vec<&str> = command.split_whitespace().skip(1).collect();
    args.extend(["--epochs", "1", "--warmup", "0", "--json"]);
    let run = group.ffcv(&args);
    let bench = run.json();
    assert_eq!(bench["quasi_buffer_pages"], buffer, "{bench}");
    assert_eq!(bench["memory_limit_bytes"], LIMIT, "{bench}");
    assert_eq!(bench["memory_bound"], "cgroup", "{bench}");
    assert!(bench["peak_rss_bytes"].as_u64().unwrap() < LIMIT, "{bench}");
    let amplification = bench["read_amplification"].as_f64().unwrap();
    assert!(
        (0.5..=1.1).contains(&amplification),
        "read amplification {amplification}: {bench}"
    );
    assert!(
        bench.get("major_faults").is_some_and(Value::is_u64),
        "{bench}"
    );
    assert!(bench["cpu_utilisation"].as_f64().unwrap() > 0.0, "{bench}");
    eprintln!(
        "cli_memory_limit: {} group, doctor baseline {} samples/s (amplification {}, CPU {}), recommended {command}: {} samples/s, amplification {amplification}",
        group.dir.display(),
        baseline["samples_per_sec"],
        baseline["read_amplification"],
        baseline["cpu_utilisation"],
        bench["samples_per_sec"]
    );
    drop(group);
}
