//! Running one test's body in a child process, for cases where a regression would kill the
//! whole test binary (a SIGSEGV, an abort on a failed allocation).

use std::process::Command;

/// The variable that tells a child process which test body to run.
const CHILD: &str = "FORGIA_ISOLATED_TEST";

/// Runs `body` in a child process: the test binary re-executes itself
/// (`std::env::current_exe()`) with `CHILD` naming the test and `--exact <test> --nocapture`,
/// and the parent asserts that the child exits successfully. Inside the child, `body` runs
/// directly. `test` is the test function's name, exactly as the harness lists it.
pub fn isolated(test: &str, body: impl FnOnce()) {
    if std::env::var(CHILD).as_deref() == Ok(test) {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .env(CHILD, test)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .output()
        .expect("spawning the test binary");
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{test} failed in its child process ({}):\n{log}", out.status);
    assert!(log.contains("1 passed"), "the child ran no test named {test}:\n{log}");
}
