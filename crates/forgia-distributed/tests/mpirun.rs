//! Multi-rank checks under Open MPI (feature `mpi`): each test starts
//! `mpirun --allow-run-as-root --oversubscribe -np N` on loopback with one scenario of
//! `src/bin/ddp_scenarios.rs`, and fails on a hang (a job still running after a minute).
//! `.ci/run` runs them: `cargo test -p forgia-distributed --features mpi --test mpirun`.
#![cfg(feature = "mpi")]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `scenario` on `np` ranks; returns success, the combined output and the wall time.
fn mpirun(np: usize, scenario: &str) -> (bool, String, Duration) {
    let started = Instant::now();
    let mut child = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", &np.to_string()])
        // Loopback only, TCP and the process itself (no shared-memory or network discovery).
        .args(["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"])
        .arg(env!("CARGO_BIN_EXE_ddp-scenarios"))
        .arg(scenario)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun runs (apt-get install openmpi-bin)");
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
            child.stderr.take().unwrap().read_to_string(&mut out).unwrap();
            return (status.success(), out, started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("mpirun -np {np} {scenario} hung for a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_ranks_train_like_one_process_for_twenty_steps() {
    let (ok, out, _) = mpirun(2, "equal");
    assert!(ok, "{out}");
}

#[test]
fn three_ranks_train_like_one_process_for_twenty_steps() {
    let (ok, out, _) = mpirun(3, "equal");
    assert!(ok, "{out}");
}

#[test]
fn a_parameter_without_gradient_on_one_rank_is_averaged_correctly() {
    let (ok, out, _) = mpirun(2, "unused");
    assert!(ok, "{out}");
}

#[test]
fn a_bucket_allreduce_starts_before_the_backward_pass_ends() {
    let (ok, out, _) = mpirun(2, "overlap");
    assert!(ok, "{out}");
    assert!(out.contains("before the pass ended"), "{out}");
}

#[test]
fn a_killed_rank_ends_the_job_with_an_error_and_no_hang() {
    let (ok, out, took) = mpirun(2, "killed");
    assert!(!ok, "the job succeeded: {out}");
    assert!(!out.contains("went on after"), "{out}");
    assert!(took < Duration::from_secs(30), "took {took:?}: {out}");
}

#[test]
fn a_failing_rank_aborts_the_job_with_its_message() {
    let (ok, out, took) = mpirun(2, "error");
    assert!(!ok, "the job succeeded: {out}");
    assert!(out.contains("injected failure at step 3"), "{out}");
    assert!(out.contains("aborting the job on every rank"), "{out}");
    assert!(took < Duration::from_secs(30), "took {took:?}: {out}");
}
