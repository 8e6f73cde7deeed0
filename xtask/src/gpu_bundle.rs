//! `cargo xtask gpu-bundle`: builds the GPU checks (the `gpu_*` tests of `ffcv` and
//! `gpu-stage`, gpu-stage's `gpu_checks` example and ffcv's `gpu_bench` example) in release
//! mode on any x86-64 machine, no CUDA needed, and copies them, stripped, into
//! `target/gpu-bundle/` with a `run.sh` that runs them all on a GPU host.
//!
//! The executables come from cargo's JSON messages (`--message-format=json`), not from
//! guessing hashed file names. The bundle needs only glibc, the NVIDIA driver
//! (`libcuda.so.1`) and NVRTC (`libnvrtc.so.13`), which cudarc loads at run time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The packages whose `gpu_*` tests go into the bundle.
const TEST_PACKAGES: [&str; 2] = ["ffcv", "gpu-stage"];
/// `(package, example)` pairs that go into the bundle.
const EXAMPLES: [(&str, &str); 2] = [("gpu-stage", "gpu_checks"), ("ffcv", "gpu_bench")];

/// The bundle's runner; `@TESTS@` and `@EXAMPLES@` are replaced by the file names.
const RUN_SH: &str = r#"#!/usr/bin/env bash
# GPU checks of ffcv-rs, built by `cargo xtask gpu-bundle`. Run on a host with an NVIDIA GPU,
# its driver and CUDA 13 (NVRTC under /usr/local/cuda*/lib64):
#
#   ./run.sh                # every check, one line each: PASS|FAIL|SKIP <name>: <figure>
#   RUST_LOG=gpu_stage=debug ./run.sh    # more detail in logs/
#
# Exits 0 when nothing failed (also when every check skipped for want of a GPU), 1 otherwise.
# Full output of each binary goes to logs/<binary>.log.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
mkdir -p logs

# NVRTC for the normalize kernel (CUDA 13): the first CUDA lib64 that has libnvrtc.so.13,
# newest version first.
nvrtc=""
for dir in ${CUDA_HOME:+"$CUDA_HOME/lib64"} ${CUDA_PATH:+"$CUDA_PATH/lib64"} \
    $(ls -d /usr/local/cuda*/lib64 2>/dev/null | sort -rV); do
    if [ -e "$dir/libnvrtc.so.13" ]; then
        nvrtc="$dir"
        export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        break
    fi
done
echo "nvrtc: ${nvrtc:-libnvrtc.so.13 not found under /usr/local/cuda*/lib64 (image checks need it)}"
export RUST_LOG="${RUST_LOG:-warn}"

if command -v nvidia-smi >/dev/null 2>&1; then
    echo "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
else
    echo "device: no nvidia-smi on this host"
fi
echo "cpus: $(nproc)"

started=$(date +%s)
summary="logs/summary.txt"
: > "$summary"

# A test binary: one line per test. Tests that print their own `PASS|SKIP name: figure`
# line keep it; others get PASS/SKIP/FAIL from libtest's result and their "skipped" output.
run_tests() {
    local bin="$1" limit="$2" log="logs/$1.log"
    timeout "$limit" "./tests/$bin" --test-threads=1 --show-output >"$log" 2>&1
    local rc=$?
    local lines
    lines=$(awk -v bin="$bin" -v logf="$log" '
        /^test .* \.\.\. (ok|FAILED|ignored)$/ { n++; order[n] = $2; status[$2] = $NF; next }
        /^---- .* stdout ----$/ { cur = $2; next }
        /^(successes|failures):$/ { cur = ""; next }
        cur != "" && /^(PASS|SKIP|FAIL) / { own[cur] = $0; next }
        cur != "" && /skipped/ && !(cur in skip) { skip[cur] = $0; next }
        END {
            for (i = 1; i <= n; i++) {
                t = order[i]
                if (status[t] == "FAILED") print "FAIL " bin "::" t ": test failed (see " logf ")"
                else if (t in own) print own[t]
                else if (t in skip) print "SKIP " bin "::" t ": " skip[t]
                else if (status[t] == "ok") print "PASS " bin "::" t ": ok"
                else print "SKIP " bin "::" t ": ignored"
            }
        }' "$log")
    [ -n "$lines" ] && printf '%s\n' "$lines" | tee -a "$summary"
    if [ "$rc" -ne 0 ] && ! printf '%s\n' "$lines" | grep -q '^FAIL '; then
        echo "FAIL $bin: exited with status $rc (see $log)" | tee -a "$summary"
    fi
}

# An example that prints its own `PASS|FAIL|SKIP name: figure` lines on stdout.
run_example() {
    local bin="$1" limit="$2" log="logs/$1.log"
    timeout "$limit" "./examples/$bin" >"$log" 2>"logs/$1.stderr.log"
    local rc=$?
    grep -E '^(PASS|FAIL|SKIP) ' "$log" | tee -a "$summary"
    if [ "$rc" -ne 0 ] && ! grep -qE '^FAIL ' "$log"; then
        echo "FAIL $bin: exited with status $rc (see $log and logs/$1.stderr.log)" | tee -a "$summary"
    fi
}

for t in @TESTS@; do run_tests "$t" 45; done
for e in @EXAMPLES@; do
    case "$e" in
        gpu_bench) run_example "$e" 150 ;;
        *) run_example "$e" 60 ;;
    esac
done

elapsed=$(( $(date +%s) - started ))
pass=$(grep -c '^PASS ' "$summary")
skip=$(grep -c '^SKIP ' "$summary")
fail=$(grep -c '^FAIL ' "$summary")
echo "summary: $pass passed, $skip skipped, $fail failed in ${elapsed} s"
[ "$fail" -eq 0 ]
"#;

/// `cargo xtask gpu-bundle`.
pub fn gpu_bundle(root: &Path, args: &[String]) -> Result<(), String> {
    if let Some(extra) = args.first() {
        return Err(format!("`gpu-bundle` takes no arguments (got `{extra}`)"));
    }
    let out = root.join("target").join("gpu-bundle");
    if out.exists() {
        std::fs::remove_dir_all(&out)
            .map_err(|e| format!("cannot clear {}: {e}", out.display()))?;
    }
    for dir in ["tests", "examples"] {
        std::fs::create_dir_all(out.join(dir))
            .map_err(|e| format!("cannot create {}: {e}", out.join(dir).display()))?;
    }

    let mut test_args = vec!["test", "--release", "--no-run", "--message-format=json"];
    for p in TEST_PACKAGES {
        test_args.extend(["--package", p]);
    }
    test_args.extend(["--test", "gpu_*"]);
    let tests = cargo_executables(root, &test_args, "test")?;

    let mut example_args = vec!["build", "--release", "--message-format=json"];
    for (p, e) in EXAMPLES {
        example_args.extend(["--package", p, "--example", e]);
    }
    let examples = cargo_executables(root, &example_args, "example")?;
    for (_, e) in EXAMPLES {
        if !examples.iter().any(|(name, _)| name == e) {
            return Err(format!("cargo built no example named {e}"));
        }
    }
    if tests.is_empty() {
        return Err("cargo built no gpu_* test".to_owned());
    }

    let mut test_names = Vec::new();
    for (name, exe) in &tests {
        copy_stripped(exe, &out.join("tests").join(name))?;
        test_names.push(name.clone());
    }
    let mut example_names = Vec::new();
    for (name, exe) in &examples {
        copy_stripped(exe, &out.join("examples").join(name))?;
        example_names.push(name.clone());
    }
    let script = RUN_SH
        .replace("@TESTS@", &test_names.join(" "))
        .replace("@EXAMPLES@", &example_names.join(" "));
    let run_sh = out.join("run.sh");
    std::fs::write(&run_sh, script).map_err(|e| format!("cannot write run.sh: {e}"))?;
    set_executable(&run_sh)?;

    let size = dir_size(&out)?;
    eprintln!(
        "gpu-bundle: {} ({:.1} MB): tests {}, examples {}; run it with {}/run.sh",
        out.display(),
        size as f64 / 1e6,
        test_names.join(", "),
        example_names.join(", "),
        out.display()
    );
    if size > 60_000_000 {
        return Err(format!(
            "the bundle is {:.1} MB, over the 60 MB limit",
            size as f64 / 1e6
        ));
    }
    Ok(())
}

/// Runs cargo with JSON messages and returns `(target name, executable)` of every artifact
/// of target kind `kind` that has an executable.
fn cargo_executables(
    root: &Path,
    args: &[&str],
    kind: &str,
) -> Result<Vec<(String, PathBuf)>, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("==> cargo {}", args.join(" "));
    let output = crate::command::without_cargo_run_env(&mut Command::new(&cargo))
        .args(args)
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run `cargo {}`: {e}", args.join(" ")))?;
    if !output.status.success() {
        return Err(format!(
            "`cargo {}` failed ({})",
            args.join(" "),
            output.status
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut found = Vec::new();
    for line in stdout.lines() {
        if !line.contains("\"reason\":\"compiler-artifact\"") {
            continue;
        }
        let Some(exe) = json_string(line, "\"executable\":") else {
            continue;
        };
        let Some(target) = line.find("\"target\":{").map(|i| &line[i..]) else {
            continue;
        };
        let kinds = target
            .find("\"kind\":[")
            .map(|i| &target[i..])
            .and_then(|k| k.split(']').next())
            .unwrap_or("");
        if !kinds.contains(&format!("\"{kind}\"")) {
            continue;
        }
        if let Some(name) = json_string(target, "\"name\":") {
            found.push((name, PathBuf::from(exe)));
        }
    }
    Ok(found)
}

/// The string value after `key` in a one-line JSON object (`None` for `null` or absent).
/// Handles the escapes cargo writes in paths and names.
fn json_string(line: &str, key: &str) -> Option<String> {
    let rest = &line[line.find(key)? + key.len()..];
    let mut chars = rest.strip_prefix('"')?.chars();
    let mut out = String::new();
    loop {
        match chars.next()? {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                c => out.push(c),
            },
            c => out.push(c),
        }
    }
}

/// Copies `from` to `to` without debug information (`strip`), or as it is if `strip` is
/// missing (saying so).
fn copy_stripped(from: &Path, to: &Path) -> Result<(), String> {
    let stripped = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(to)
        .arg(from)
        .status();
    match stripped {
        Ok(s) if s.success() => Ok(()),
        other => {
            eprintln!(
                "gpu-bundle: strip unavailable or failed ({other:?}); copying {} unstripped",
                from.display()
            );
            std::fs::copy(from, to)
                .map(|_| ())
                .map_err(|e| format!("cannot copy {}: {e}", from.display()))
        }
    }
}

#[cfg(unix)]
fn set_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot make {} executable: {e}", path.display()))
}

#[cfg(not(unix))]
fn set_executable(_path: &Path) -> Result<(), String> {
    Ok(())
}

/// Total bytes of the files below `dir`.
fn dir_size(dir: &Path) -> Result<u64, String> {
    let mut total = 0;
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let meta = entry
            .metadata()
            .map_err(|e| format!("cannot stat {}: {e}", entry.path().display()))?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::json_string;

    #[test]
    fn json_strings_are_read_with_their_escapes() {
        let line = r#"{"reason":"compiler-artifact","target":{"kind":["test"],"name":"gpu_loader"},"executable":"/t/a \"b\"\\c","fresh":true}"#;
        assert_eq!(
            json_string(line, "\"executable\":").as_deref(),
            Some(r#"/t/a "b"\c"#)
        );
        assert_eq!(
            json_string(line, "\"name\":").as_deref(),
            Some("gpu_loader")
        );
        let null = r#"{"executable":null}"#;
        assert_eq!(json_string(null, "\"executable\":"), None);
    }
}
