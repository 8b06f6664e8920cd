//! W10's CPU-time accounting (`FORGIA_W10_CPU`): each thread's time on a core, its time
//! waiting for one (runnable but not running) and its context switches, from Linux's
//! per-thread scheduler statistics (`/proc/self/task/*/schedstat` and `status`). CPU time, not
//! wall time, is what stays meaningful on a machine shared with other work: it says which
//! thread of which rank spends the cycles of a step, and the waiting time says how long a
//! thread that could run was kept off its core.

use std::collections::BTreeMap;
use std::fs;
use std::time::Instant;

/// One thread's counters at one moment (or the difference of two moments).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counters {
    /// Nanoseconds on a core.
    run_ns: u64,
    /// Nanoseconds runnable but waiting for a core.
    wait_ns: u64,
    /// Context switches the thread asked for (it blocked or slept).
    voluntary: u64,
    /// Context switches forced on it (preempted).
    involuntary: u64,
    /// Minor page faults (most of them: a fresh page touched for the first time).
    faults: u64,
}

impl Counters {
    fn since(self, before: Counters) -> Counters {
        Counters {
            run_ns: self.run_ns.saturating_sub(before.run_ns),
            wait_ns: self.wait_ns.saturating_sub(before.wait_ns),
            voluntary: self.voluntary.saturating_sub(before.voluntary),
            involuntary: self.involuntary.saturating_sub(before.involuntary),
            faults: self.faults.saturating_sub(before.faults),
        }
    }

    fn add(&mut self, other: Counters) {
        self.run_ns += other.run_ns;
        self.wait_ns += other.wait_ns;
        self.voluntary += other.voluntary;
        self.involuntary += other.involuntary;
        self.faults += other.faults;
    }
}

/// `run_ns wait_ns` from a `schedstat` file.
fn schedstat(path: &str) -> Option<(u64, u64)> {
    let text = fs::read_to_string(path).ok()?;
    let mut fields = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

/// The thread in `dir` (`/proc/self/task/<tid>`): its name and counters.
fn thread(dir: &str) -> Option<(String, Counters)> {
    let (run_ns, wait_ns) = schedstat(&format!("{dir}/schedstat"))?;
    let status = fs::read_to_string(format!("{dir}/status")).ok()?;
    let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).map(str::trim);
    let count = |key: &str| field(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let name = field("Name:").unwrap_or("?").to_string();
    // `stat`'s tenth field, after the parenthesized name (which may hold spaces).
    let stat = fs::read_to_string(format!("{dir}/stat")).ok()?;
    let faults = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(7)?.parse().ok()).unwrap_or(0);
    let counters = Counters {
        run_ns,
        wait_ns,
        voluntary: count("voluntary_ctxt_switches:"),
        involuntary: count("nonvoluntary_ctxt_switches:"),
        faults,
    };
    Some((name, counters))
}

/// Every thread of this process now, by thread id.
pub(super) fn snapshot() -> BTreeMap<u64, (String, Counters)> {
    let mut threads = BTreeMap::new();
    let Ok(dir) = fs::read_dir("/proc/self/task") else { return threads };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(tid) = name.to_str().and_then(|t| t.parse::<u64>().ok()) else { continue };
        if let Some(t) = thread(&format!("/proc/self/task/{tid}")) {
            threads.insert(tid, t);
        }
    }
    threads
}

/// Every thread's time on a core and waiting for one, now, by thread id (no switch counts:
/// cheap enough to read at every phase of a step).
fn times() -> BTreeMap<u64, Counters> {
    let mut threads = BTreeMap::new();
    let Ok(dir) = fs::read_dir("/proc/self/task") else { return threads };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(tid) = name.to_str().and_then(|t| t.parse::<u64>().ok()) else { continue };
        if let Some((run_ns, wait_ns)) = schedstat(&format!("/proc/self/task/{tid}/schedstat")) {
            threads.insert(tid, Counters { run_ns, wait_ns, ..Counters::default() });
        }
    }
    threads
}

/// Per-thread totals over the blocks of one kind of step.
#[derive(Default)]
pub(super) struct Threads {
    totals: BTreeMap<u64, (String, Counters)>,
    steps: usize,
    wall_s: f64,
}

impl Threads {
    /// Adds the difference between `before` and now, over `steps` steps of `wall_s` seconds.
    pub(super) fn add(&mut self, before: &BTreeMap<u64, (String, Counters)>, steps: usize, wall_s: f64) {
        for (tid, (name, now)) in snapshot() {
            let start = before.get(&tid).map(|(_, c)| *c).unwrap_or_default();
            let slot = self.totals.entry(tid).or_insert_with(|| (name, Counters::default()));
            slot.1.add(now.since(start));
        }
        self.steps += steps;
        self.wall_s += wall_s;
    }

    /// One line per thread that ran, per step, on stderr.
    pub(super) fn report(&self, rank: usize, kind: &str) {
        if self.steps == 0 {
            return;
        }
        let n = self.steps as f64;
        eprintln!(
            "W10-cpu rank={rank} steps={kind} count={} wall_ms_per_step={:.2}",
            self.steps,
            self.wall_s * 1e3 / n
        );
        for (tid, (name, c)) in &self.totals {
            if c.run_ns == 0 && c.voluntary == 0 && c.involuntary == 0 && c.faults == 0 {
                continue;
            }
            eprintln!(
                "W10-cpu rank={rank} steps={kind} thread={name}/{tid} run_ms={:.2} wait_ms={:.2} voluntary_cs={:.1} involuntary_cs={:.1} minor_faults={:.0}",
                c.run_ns as f64 / 1e6 / n,
                c.wait_ns as f64 / 1e6 / n,
                c.voluntary as f64 / n,
                c.involuntary as f64 / n,
                c.faults as f64 / n,
            );
        }
    }
}

/// The phases of one step, in order.
pub(super) const PHASES: [&str; 4] = ["forward", "backward", "finish", "optimizer"];

/// Every thread's CPU time and waiting time, and the wall time, per phase of a step.
#[derive(Default)]
pub(super) struct Phases {
    per_thread: BTreeMap<u64, [Counters; 4]>,
    wall_s: [f64; 4],
    steps: usize,
    mark: Option<(usize, BTreeMap<u64, Counters>, Instant)>,
}

impl Phases {
    /// Starts phase `i` (ending the one before it).
    pub(super) fn start(&mut self, i: usize) {
        self.close();
        self.mark = Some((i, times(), Instant::now()));
    }

    /// Ends the current phase; after the last one, counts a step.
    pub(super) fn close(&mut self) {
        if let Some((i, before, at)) = self.mark.take() {
            let wall = at.elapsed().as_secs_f64();
            for (tid, now) in times() {
                let start = before.get(&tid).copied().unwrap_or_default();
                self.per_thread.entry(tid).or_default()[i].add(now.since(start));
            }
            self.wall_s[i] += wall;
            if i == PHASES.len() - 1 {
                self.steps += 1;
            }
        }
    }

    /// One line per phase and thread, per step, on stderr.
    pub(super) fn report(&self, rank: usize, kind: &str) {
        if self.steps == 0 {
            return;
        }
        let n = self.steps as f64;
        let names = snapshot();
        for (i, phase) in PHASES.iter().enumerate() {
            let mut line =
                format!("W10-cpu rank={rank} steps={kind} phase={phase} wall_ms={:.2}", self.wall_s[i] * 1e3 / n);
            for (tid, counters) in &self.per_thread {
                let c = counters[i];
                if c.run_ns == 0 && c.wait_ns == 0 {
                    continue;
                }
                let name = names.get(tid).map_or("?", |(name, _)| name.as_str());
                line += &format!(" {name}={:.2}+{:.2}w", c.run_ns as f64 / 1e6 / n, c.wait_ns as f64 / 1e6 / n);
            }
            eprintln!("{line}");
        }
    }
}
