//! An in-process group: `n` ranks in one process, each with its own communication thread,
//! meeting in shared memory. The same request-ordered collectives as MPI, for tests and for
//! trying data-parallel training on one machine without `mpirun`.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::comm::{Backend, Comm, Op, Reply};
use crate::error::Result;

/// One collective's meeting point: each rank's input, then the result.
#[derive(Default)]
struct Round {
    inputs: Vec<Option<Op>>,
    result: Option<Arc<Reply>>,
    taken: usize,
}

struct Meeting {
    size: usize,
    /// Set when a member's communication thread ends: collectives waiting for it fail.
    broken: std::sync::atomic::AtomicBool,
    rounds: Mutex<HashMap<u64, Round>>,
    done: Condvar,
}

struct Member {
    rank: usize,
    seq: u64,
    meeting: Arc<Meeting>,
}

/// Sums (in rank order, so every run gives the same bits) or broadcasts the ranks' inputs.
fn combine(inputs: Vec<Option<Op>>) -> Reply {
    let mut ops = inputs.into_iter().map(|o| o.expect("every rank has delivered"));
    match ops.next().expect("a group has at least one rank") {
        Op::SumF32(mut acc) => {
            for op in ops {
                let Op::SumF32(d) = op else { panic!("the ranks' collectives differ") };
                acc.iter_mut().zip(d).for_each(|(a, b)| *a += b);
            }
            Reply::F32(acc)
        }
        Op::SumF64(mut acc) => {
            for op in ops {
                let Op::SumF64(d) = op else { panic!("the ranks' collectives differ") };
                acc.iter_mut().zip(d).for_each(|(a, b)| *a += b);
            }
            Reply::F64(acc)
        }
        Op::Broadcast(first, root) => {
            let mut all = vec![first];
            for op in ops {
                let Op::Broadcast(d, _) = op else { panic!("the ranks' collectives differ") };
                all.push(d);
            }
            Reply::F32(all.swap_remove(root))
        }
    }
}

impl Backend for Member {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.meeting.size
    }

    fn run(&mut self, op: Op, _waiting: &std::sync::atomic::AtomicUsize) -> Reply {
        let m = &self.meeting;
        let seq = self.seq;
        self.seq += 1;
        let mut rounds = m.rounds.lock().unwrap_or_else(|p| p.into_inner());
        let round = rounds.entry(seq).or_default();
        round.inputs.resize_with(m.size, || None);
        round.inputs[self.rank] = Some(op);
        if round.inputs.iter().all(Option::is_some) {
            round.result = Some(Arc::new(combine(std::mem::take(&mut round.inputs))));
            m.done.notify_all();
        }
        loop {
            let round = rounds.get_mut(&seq).expect("a round lives until every rank took its result");
            if let Some(r) = round.result.clone() {
                round.taken += 1;
                if round.taken == m.size {
                    rounds.remove(&seq);
                }
                return match &*r {
                    Reply::F32(d) => Reply::F32(d.clone()),
                    Reply::F64(d) => Reply::F64(d.clone()),
                    Reply::Failed => Reply::Failed,
                };
            }
            // Relaxed: set under the same mutex this thread holds when it reads it.
            if m.broken.load(std::sync::atomic::Ordering::Relaxed) {
                return Reply::Failed;
            }
            rounds = m.done.wait(rounds).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for Member {
    /// A rank that goes away fails every collective still waiting for it.
    fn drop(&mut self) {
        let _rounds = self.meeting.rounds.lock().unwrap_or_else(|p| p.into_inner());
        self.meeting.broken.store(true, std::sync::atomic::Ordering::Relaxed);
        self.meeting.done.notify_all();
    }
}

fn exit(code: i32, _message: &str) -> ! {
    std::process::exit(code)
}

impl Comm {
    /// `size` ranks in this process (one [`Comm`] each, to hand to one thread each), meeting
    /// in shared memory. [`Comm::abort`] on any of them exits the process.
    ///
    /// # Errors
    /// `InvalidArgument` for zero ranks; `Init` when a communication thread cannot start.
    pub fn in_process(size: usize, timeout: Duration) -> Result<Vec<Comm>> {
        if size == 0 {
            return Err(crate::DistError::InvalidArgument("a group needs at least one rank".into()));
        }
        let meeting = Arc::new(Meeting {
            size,
            broken: Default::default(),
            rounds: Mutex::new(HashMap::new()),
            done: Condvar::new(),
        });
        (0..size)
            .map(|rank| {
                let meeting = meeting.clone();
                Comm::spawn(move || Ok(Member { rank, seq: 0, meeting }), timeout, exit)
            })
            .collect()
    }
}
