//! The writer threads: what they are sent, what they did, the first failure of any, and their
//! loops (in order, or at offsets of a file).

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

/// What the caller sends to the writer threads.
pub(super) enum Job {
    /// Bytes to write next (sequential) or at an offset (positioned); the buffer comes back
    /// on the return channel.
    Bytes(u64, Vec<u8>),
    /// Flush the inner writer and acknowledge (sequential only).
    Flush,
}

/// What the writer threads did, for [`WriteBehind::finish`](super::WriteBehind::finish).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WriteStats {
    /// Bytes written.
    pub bytes: u64,
    /// Time the writer threads spent in writes and flushes, added over the threads.
    pub busy: Duration,
    /// Time the caller spent waiting for a free buffer (the disk was the slower side).
    pub waited: Duration,
    /// Writer threads.
    pub threads: usize,
}

/// The first error of the positioned threads.
#[derive(Default)]
pub(super) struct Failure {
    pub(super) failed: AtomicBool,
    first: Mutex<Option<io::Error>>,
}

impl Failure {
    fn set(&self, e: io::Error) {
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert(e);
        }
        self.failed.store(true, Ordering::Release);
    }

    pub(super) fn is_set(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The first error (moved out once; a copy of its kind and text afterwards).
    pub(super) fn error(&self) -> io::Error {
        match self.first.lock() {
            Ok(mut first) => match first.take() {
                Some(e) => {
                    let copy = io::Error::new(e.kind(), e.to_string());
                    *first = Some(copy);
                    e
                }
                None => io::Error::other("a writer thread stopped"),
            },
            Err(_) => io::Error::other("a writer thread panicked"),
        }
    }
}

/// The sequential writer thread: writes every buffer in order, returns it, stops at the first
/// error.
pub(super) fn writer_loop<W: Write>(
    mut inner: W,
    jobs: Receiver<Job>,
    returned: SyncSender<Vec<u8>>,
    acks: SyncSender<io::Result<()>>,
) -> (W, io::Result<()>, WriteStats) {
    let mut stats = WriteStats {
        threads: 1,
        ..WriteStats::default()
    };
    for job in jobs {
        let t = Instant::now();
        match job {
            Job::Bytes(_, b) => {
                if let Err(e) = inner.write_all(&b) {
                    return (inner, Err(e), stats);
                }
                stats.bytes += b.len() as u64;
                stats.busy += t.elapsed();
                // The caller may have stopped taking buffers back; that is not an error.
                let _ = returned.try_send(b);
            }
            Job::Flush => {
                let r = inner.flush();
                stats.busy += t.elapsed();
                let failed = r
                    .as_ref()
                    .err()
                    .map(|e| io::Error::new(e.kind(), e.to_string()));
                let _ = acks.send(r);
                if let Some(e) = failed {
                    return (inner, Err(e), stats);
                }
            }
        }
    }
    let r = inner.flush();
    (inner, r, stats)
}

/// A positioned writer thread: writes each buffer it takes at its offset and gives it back;
/// after the first error (of any thread) it only gives buffers back.
pub(super) fn positioned_loop(
    file: &File,
    jobs: &Mutex<Receiver<Job>>,
    returned: &SyncSender<Vec<u8>>,
    failure: &Failure,
) -> WriteStats {
    let mut stats = WriteStats::default();
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => break,
        };
        let Ok(Job::Bytes(at, b)) = job else { break };
        if !failure.is_set() {
            let t = Instant::now();
            match file.write_all_at(&b, at) {
                Ok(()) => {
                    stats.bytes += b.len() as u64;
                    stats.busy += t.elapsed();
                }
                Err(e) => failure.set(io::Error::new(
                    e.kind(),
                    format!("writing {} bytes at byte {at}: {e}", b.len()),
                )),
            }
        }
        let _ = returned.try_send(b);
    }
    stats
}
