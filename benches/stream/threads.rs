//! Where a run's time went: its timing table, and its busiest threads sampled from /proc.

use crate::*;

/// The head of the one-endpoint section's "where the time went" table.
pub(crate) fn timing_head() -> String {
    "\n## Where the time went (one endpoint)\n\nPer run: the finder waiting for frames (the stream the slower side), in the finder's calls (the visitor, which writes the cluster file, included), in the visitor, the reader thread filling slots (taking messages and copying frames), the finder waiting for the file's writer (the file system the slower side), the writer threads busy (added over threads), the commit (last writes, sync, rename), in seconds, over the acquisition's wall time.\n\nThe busiest threads: CPU time of each thread of the process (the sender's included: `bench-replay` and one of the `ZMQbg/IO/0`) over the run, sampled every 50 ms from /proc, in % of one core; a thread near 100 % bounds the run.\n\n| size | run | wall (s) | input wait | find | visit | reading | write wait | writer busy | commit | busiest threads (% of a core) |\n|---|---|---|---|---|---|---|---|---|---|---|\n".to_string()
}

/// One run's row of the "where the time went" table.
pub(crate) fn timing_row(side: usize, name: &str, s: &AcquisitionSummary, busiest: &str) -> String {
    let t = &s.timing;
    let e = &t.engine;
    format!(
        "| {side}x{side} | {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {busiest} |\n",
        e.wall.as_secs_f64(),
        e.waited_for_input.as_secs_f64(),
        e.find.as_secs_f64(),
        e.visit.as_secs_f64(),
        e.read_busy.as_secs_f64(),
        t.write.waited.as_secs_f64(),
        t.write.busy.as_secs_f64(),
        t.commit.as_secs_f64(),
    )
}

/// Samples the CPU time of every thread of this process (`/proc/self/task/*/stat`) every
/// 50 ms on a thread of its own, so a run's busiest threads can be named: a thread near 100 %
/// of a core is what bounds it. Threads that end between two samples lose at most 50 ms.
pub(crate) struct ThreadSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(Duration, Seen)>,
}

/// Per thread id: its name, its CPU ticks when first seen and when last seen.
pub(crate) type Seen = HashMap<u64, (String, u64, u64)>;

/// The sender's thread id (its libzmq I/O thread takes its name, `bench-replay`).
pub(crate) static SENDER_TID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The calling thread's id (from `/proc/thread-self`, a link to `<pid>/task/<tid>`).
pub(crate) fn this_tid() -> u64 {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or(0)
}

/// A thread's name for the table: the main thread, the sender, rayon's workers (named at
/// start), and libzmq's I/O threads, which take their creator's name (the receiver's
/// context is made on the main thread, the sender's on the sender's).
pub(crate) fn thread_label(tid: u64, comm: &str, process: &str) -> String {
    if tid == u64::from(std::process::id()) {
        "main".into()
    } else if tid == SENDER_TID.load(std::sync::atomic::Ordering::SeqCst) {
        "sender".into()
    } else if comm == "bench-replay" {
        "zmq-io(sender)".into()
    } else if comm == process {
        "zmq-io(receiver)".into()
    } else {
        comm.into()
    }
}

/// `(comm, utime + stime in clock ticks)` of thread `tid` of this process.
pub(crate) fn thread_ticks(tid: &str) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the comm: state is field 3, utime field 14, stime field 15.
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((comm, ticks))
}

impl ThreadSampler {
    pub(crate) fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut seen = Seen::new();
            loop {
                let done = flag.load(std::sync::atomic::Ordering::SeqCst);
                if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
                    for entry in dir.flatten() {
                        let tid = entry.file_name().to_string_lossy().to_string();
                        let (Ok(id), Some((comm, ticks))) =
                            (tid.parse::<u64>(), thread_ticks(&tid))
                        else {
                            continue;
                        };
                        let e = seen.entry(id).or_insert((comm.clone(), ticks, ticks));
                        e.0 = comm;
                        e.2 = ticks;
                    }
                }
                if done {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            (t0.elapsed(), seen)
        });
        Self { stop, thread }
    }

    /// Stops sampling; the busiest threads as `name pct %, ...` (at most 6, those above 5 %).
    pub(crate) fn stop(self) -> String {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let Ok((wall, seen)) = self.thread.join() else {
            return "-".into();
        };
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let process = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
        let process = process.trim_end();
        let mut busy: Vec<(String, f64)> = seen
            .into_iter()
            .map(|(tid, (comm, first, last))| {
                let name = thread_label(tid, &comm, process);
                (
                    name,
                    100.0 * (last - first) as f64 / hz / wall.as_secs_f64().max(1e-9),
                )
            })
            .filter(|(_, pct)| *pct >= 5.0)
            .collect();
        busy.sort_by(|a, b| b.1.total_cmp(&a.1));
        busy.truncate(6);
        if busy.is_empty() {
            return "-".into();
        }
        busy.iter()
            .map(|(n, p)| format!("{n} {p:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
