//! A writer that hands its bytes to a thread of its own, so that writing a cluster file
//! overlaps finding the next frames instead of following it.
//!
//! [`WriteBehind`] collects writes into large buffers (a few MiB) and sends each full buffer to
//! its thread, which writes it to the inner writer in one sequential `write_all`. At most
//! `depth` buffers wait at any time: when the disk is slower than the finder, `write` blocks
//! (backpressure) instead of letting memory grow. Buffers come back from the thread and are
//! reused, so a long run allocates `depth + 1` buffers in all.
//!
//! `std::io::BufWriter` batches writes but performs them on the caller's thread; no crate
//! of the allowed set offers a bounded write-behind writer with error propagation, hence
//! this small one.

use std::io::{self, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes per buffer handed to the writer thread.
pub const BUFFER_BYTES: usize = 8 << 20;

/// What the caller sends to the writer thread.
enum Job {
    /// Bytes to write; the buffer comes back on the return channel.
    Bytes(Vec<u8>),
    /// Flush the inner writer and acknowledge.
    Flush,
}

/// What the writer thread did, for [`WriteBehind::finish`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WriteStats {
    /// Bytes written.
    pub bytes: u64,
    /// Time the writer thread spent in `write_all` and `flush`.
    pub busy: Duration,
    /// Time the caller spent waiting for a free buffer (the disk was the slower side).
    pub waited: Duration,
}

/// A [`Write`] whose bytes are written by a thread of its own (see the module docs).
pub struct WriteBehind<W: Write + Send + 'static> {
    current: Vec<u8>,
    jobs: Option<SyncSender<Job>>,
    returned: Receiver<Vec<u8>>,
    acks: Receiver<io::Result<()>>,
    thread: Option<JoinHandle<(W, io::Result<()>, WriteStats)>>,
    spare: usize,
    waited: Duration,
}

impl<W: Write + Send + 'static> WriteBehind<W> {
    /// Starts the writer thread over `inner`, with at most `depth` (at least 1) full buffers
    /// waiting for it.
    pub fn new(inner: W, depth: usize) -> io::Result<Self> {
        let depth = depth.max(1);
        let (jobs, job_rx) = sync_channel::<Job>(depth);
        let (ret_tx, returned) = sync_channel::<Vec<u8>>(depth + 1);
        let (ack_tx, acks) = sync_channel::<io::Result<()>>(1);
        let thread = std::thread::Builder::new()
            .name("cluda-writer".into())
            .spawn(move || writer_loop(inner, job_rx, ret_tx, ack_tx))?;
        Ok(Self {
            current: Vec::with_capacity(BUFFER_BYTES),
            jobs: Some(jobs),
            returned,
            acks,
            thread: Some(thread),
            spare: depth,
            waited: Duration::ZERO,
        })
    }

    /// Sends the current buffer to the thread and takes an empty one (a returned one, or a
    /// new one while fewer than `depth + 1` exist).
    fn ship(&mut self) -> io::Result<()> {
        if self.current.is_empty() {
            return Ok(());
        }
        let next = if self.spare > 0 {
            self.spare -= 1;
            Vec::with_capacity(BUFFER_BYTES)
        } else {
            let t = Instant::now();
            let got = self.returned.recv();
            self.waited += t.elapsed();
            match got {
                Ok(mut b) => {
                    b.clear();
                    b
                }
                Err(_) => return Err(self.thread_error()),
            }
        };
        let full = std::mem::replace(&mut self.current, next);
        self.send(Job::Bytes(full))
    }

    fn send(&mut self, job: Job) -> io::Result<()> {
        let sent = self.jobs.as_ref().map(|j| j.send(job));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(self.thread_error()),
        }
    }

    /// The error that stopped the writer thread (it only stops early on an error).
    fn thread_error(&mut self) -> io::Error {
        self.jobs = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok((_, Err(e), _))) => e,
            Some(Err(_)) => io::Error::other("the writer thread panicked"),
            _ => io::Error::other("the writer thread stopped"),
        }
    }

    /// Writes what is left, stops the thread and returns the inner writer (flushed) and what
    /// the thread did.
    pub fn finish(mut self) -> io::Result<(W, WriteStats)> {
        self.ship()?;
        self.jobs = None;
        let (inner, result, mut stats) = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(done)) => done,
            _ => return Err(io::Error::other("the writer thread panicked")),
        };
        result?;
        stats.waited = self.waited;
        Ok((inner, stats))
    }
}

impl<W: Write + Send + 'static> Write for WriteBehind<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let room = BUFFER_BYTES.saturating_sub(self.current.len());
            if room == 0 {
                self.ship()?;
                continue;
            }
            let take = room.min(buf.len());
            self.current.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
        }
        Ok(())
    }

    /// Sends what is buffered and waits until the thread has written and flushed it.
    fn flush(&mut self) -> io::Result<()> {
        self.ship()?;
        self.send(Job::Flush)?;
        match self.acks.recv() {
            Ok(r) => r,
            Err(_) => Err(self.thread_error()),
        }
    }
}

impl<W: Write + Send + 'static> Drop for WriteBehind<W> {
    fn drop(&mut self) {
        // Unfinished (an error elsewhere): stop the thread; what it held is written or not,
        // the caller already has an error to report.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The writer thread: writes every buffer in order, returns it, stops at the first error.
fn writer_loop<W: Write>(
    mut inner: W,
    jobs: Receiver<Job>,
    returned: SyncSender<Vec<u8>>,
    acks: SyncSender<io::Result<()>>,
) -> (W, io::Result<()>, WriteStats) {
    let mut stats = WriteStats::default();
    for job in jobs {
        let t = Instant::now();
        match job {
            Job::Bytes(b) => {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes arrive in order and complete, across buffer boundaries and flushes.
    #[test]
    fn writes_everything_in_order() {
        let mut w = WriteBehind::new(Vec::new(), 2).expect("thread");
        let mut want = Vec::new();
        for i in 0..5000u32 {
            let chunk: Vec<u8> = (0..(i % 7919)).map(|k| (k ^ i) as u8).collect();
            w.write_all(&chunk).expect("write");
            want.extend_from_slice(&chunk);
            if i % 1000 == 0 {
                w.flush().expect("flush");
            }
        }
        let (got, stats) = w.finish().expect("finish");
        assert_eq!(stats.bytes as usize, want.len());
        assert!(got == want, "bytes differ");
    }

    /// A writer that fails after `left` bytes.
    struct Failing {
        left: usize,
    }

    impl Write for Failing {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.left == 0 {
                return Err(io::Error::new(io::ErrorKind::StorageFull, "disk full"));
            }
            let n = buf.len().min(self.left);
            self.left -= n;
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The inner writer's error reaches the caller (on a later write, a flush or finish),
    /// with its kind, and nothing hangs.
    #[test]
    fn an_inner_error_reaches_the_caller() {
        let mut w = WriteBehind::new(Failing { left: 3 << 20 }, 1).expect("thread");
        let block = vec![7u8; 1 << 20];
        let mut failed = None;
        for _ in 0..64 {
            if let Err(e) = w.write_all(&block) {
                failed = Some(e);
                break;
            }
        }
        let e = match failed {
            Some(e) => e,
            None => w.finish().err().expect("finish fails"),
        };
        assert_eq!(e.kind(), io::ErrorKind::StorageFull, "{e}");
    }
}
