//! One test alone in a child process. A crate's tests share one binary and run on
//! parallel threads, so a test that reads a property of the whole process — its thread
//! count, its peak resident set, the children's peak, a global tracing subscriber, the
//! environment — would see the other tests too. [`own_process`] re-runs the test binary
//! with a filter that selects exactly that test and one test thread, and checks that the
//! child ran it and passed.

use std::process::Command;

/// Set in the child to the name of the one test it runs.
const CHILD_ENV: &str = "FFCV_TESTKIT_OWN_PROCESS";

/// Runs `body` in a child process of the current test binary in which this test runs
/// alone, and fails if the child did not run exactly this test or the test failed.
///
/// `module` is `module_path!()` at the test and `test` the test function's name; in the
/// child (recognised by an environment variable naming this test) `body` runs directly.
///
/// ```no_run
/// #[test]
/// fn counts_threads() {
///     ffcv_testkit::own_process(module_path!(), "counts_threads", || {
///         // Only this test's threads are in /proc/self/task here.
///     });
/// }
/// ```
pub fn own_process(module: &str, test: &str, body: impl FnOnce()) {
    // libtest names a test by its path without the crate's name.
    let path = match module.split_once("::") {
        Some((_crate, rest)) => format!("{rest}::{test}"),
        None => test.to_string(),
    };
    if std::env::var(CHILD_ENV).is_ok_and(|name| name == path) {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(&exe)
        .args([path.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD_ENV, &path)
        .output()
        .unwrap_or_else(|e| panic!("cannot re-run {} for `{path}`: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown with the test's own output (libtest captures it unless `--nocapture`), so a
    // skip message of the child reaches the reader as it would without the child.
    print!("{stdout}");
    eprint!("{stderr}");
    // A filter that matched nothing would "pass" with 0 tests: demand exactly one.
    let ran_once = stdout.contains("test result: ok. 1 passed");
    assert!(
        output.status.success() && ran_once,
        "`{path}` in its own process: {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
}
