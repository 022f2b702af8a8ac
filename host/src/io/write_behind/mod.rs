//! A writer that hands its bytes to threads of their own, so that writing a cluster file
//! overlaps finding the next frames instead of following it.
//!
//! [`WriteBehind`] collects writes into large buffers ([`BUFFER_BYTES`]) and hands each full
//! buffer to a writer thread. Two ways to write them:
//!
//! - **sequential** ([`WriteBehind::new`], any [`Write`]): one thread writes the buffers in
//!   order, each in one `write_all`;
//! - **positioned** ([`WriteBehind::positioned`], a file): the caller gives each buffer its
//!   offset in the file as it ships it (the bytes so far), and several threads write buffers
//!   at their offsets at once (`write_all_at`), so the file holds exactly the bytes of a
//!   sequential write whatever order the threads finish in. Where the file system writes one
//!   file from several threads at once (network and parallel file systems) this multiplies
//!   the bandwidth; where it serialises writes to one file (tmpfs, ext4 and xfs take the
//!   file's lock for a buffered write) it costs one idle thread.
//!
//! Memory is bounded either way: at most `depth` full buffers wait and each thread holds
//! one, so a run allocates at most `depth + threads + 1` buffers; when the disk is slower
//! than the finder, `write` blocks (backpressure) instead of letting memory grow. Buffers come
//! back from the threads and are reused. The first error of any thread wins and reaches the
//! caller on a later write, a flush or [`WriteBehind::finish`]; a failed positioned writer
//! stops writing at once (its other threads skip the buffers they still get).
//!
//! `std::io::BufWriter` batches writes but performs them on the caller's thread; no crate
//! of the allowed set offers a bounded write-behind writer with positioned parallel writes
//! and error propagation, hence this small one.

mod pool;
#[cfg(test)]
mod tests;
mod workers;

pub use pool::BUFFER_BYTES;
use pool::{keep_buffers, new_buffer};
use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
pub use workers::WriteStats;
use workers::{Failure, Job, positioned_loop, writer_loop};

/// Most writer threads a [`WriteBehind`] accepts.
pub const MAX_WRITE_THREADS: usize = 64;

/// Writer threads a cluster file is written with by default: 2, so that one buffer is always
/// queued at the file while the other thread waits for its next buffer; more threads help only
/// on file systems that write one file in parallel (see the module docs).
pub const DEFAULT_WRITE_THREADS: usize = 2;

/// A writer a [`WriteBehind`] can write at offsets: a file, or something that owns one.
pub trait PositionedSink: Write + Seek + Send + 'static {
    /// A second handle of the same open file for positioned writes (anything the sink
    /// buffered is written first).
    ///
    /// # Errors
    /// The operating system's, when the handle cannot be duplicated.
    fn handle(&mut self) -> io::Result<File>;
}

impl PositionedSink for File {
    fn handle(&mut self) -> io::Result<File> {
        self.try_clone()
    }
}

/// How the threads write (see the module docs).
enum Mode<W> {
    /// One thread owns the writer and writes in order.
    Sequential(Option<JoinHandle<(W, io::Result<()>, WriteStats)>>),
    /// Threads write at offsets through a shared handle; the caller keeps the writer.
    Positioned {
        inner: Option<W>,
        workers: Vec<JoinHandle<WriteStats>>,
        failure: Arc<Failure>,
        /// Where the next buffer goes.
        offset: u64,
        /// Puts the writer's position at the end of what the threads wrote.
        seek: fn(&mut W, u64) -> io::Result<()>,
    },
}

fn seek_to<S: Seek>(s: &mut S, at: u64) -> io::Result<()> {
    s.seek(SeekFrom::Start(at)).map(|_| ())
}

/// A [`Write`] whose bytes are written by threads of their own (see the module docs).
pub struct WriteBehind<W: Write + Send + 'static> {
    current: Vec<u8>,
    /// Empty buffers ready to fill.
    free: Vec<Vec<u8>>,
    /// Buffers that may still be allocated.
    spare: usize,
    /// Buffers handed to the threads and not back yet.
    out: usize,
    jobs: Option<SyncSender<Job>>,
    returned: Receiver<Vec<u8>>,
    acks: Receiver<io::Result<()>>,
    mode: Mode<W>,
    waited: Duration,
}

impl<W: Write + Send + 'static> WriteBehind<W> {
    /// Starts one writer thread over `inner`, writing in order, with at most `depth` (at least
    /// 1) full buffers waiting for it.
    ///
    /// # Errors
    /// The operating system's, when the thread cannot be started.
    pub fn new(inner: W, depth: usize) -> io::Result<Self> {
        let depth = depth.max(1);
        let (jobs, job_rx) = sync_channel::<Job>(depth);
        let (ret_tx, returned) = sync_channel::<Vec<u8>>(depth + 1);
        let (ack_tx, acks) = sync_channel::<io::Result<()>>(1);
        let thread = std::thread::Builder::new()
            .name("cluda-writer".into())
            .spawn(move || writer_loop(inner, job_rx, ret_tx, ack_tx))?;
        Ok(Self::with_mode(
            jobs,
            returned,
            acks,
            depth,
            Mode::Sequential(Some(thread)),
        ))
    }

    fn with_mode(
        jobs: SyncSender<Job>,
        returned: Receiver<Vec<u8>>,
        acks: Receiver<io::Result<()>>,
        spare: usize,
        mode: Mode<W>,
    ) -> Self {
        Self {
            current: new_buffer(),
            free: Vec::new(),
            spare,
            out: 0,
            jobs: Some(jobs),
            returned,
            acks,
            mode,
            waited: Duration::ZERO,
        }
    }

    /// Sends the current buffer to the threads and takes an empty one (a free one, a new one
    /// while the bound allows, else the next one a thread gives back).
    fn ship(&mut self) -> io::Result<()> {
        if self.current.is_empty() {
            return Ok(());
        }
        self.check()?;
        let next = match self.free.pop() {
            Some(b) => b,
            None if self.spare > 0 => {
                self.spare -= 1;
                new_buffer()
            }
            None => {
                let t = Instant::now();
                let got = self.take_returned();
                self.waited += t.elapsed();
                let mut b = got?;
                b.clear();
                b
            }
        };
        let full = std::mem::replace(&mut self.current, next);
        let at = match &mut self.mode {
            Mode::Positioned { offset, .. } => {
                let at = *offset;
                *offset += full.len() as u64;
                at
            }
            Mode::Sequential(_) => 0,
        };
        self.send(Job::Bytes(at, full))?;
        self.out += 1;
        Ok(())
    }

    /// The first error of a positioned thread, once there is one.
    fn check(&mut self) -> io::Result<()> {
        match &self.mode {
            Mode::Positioned { failure, .. } if failure.is_set() => Err(self.thread_error()),
            _ => Ok(()),
        }
    }

    /// The next buffer a thread gives back; an error when the threads stopped.
    fn take_returned(&mut self) -> io::Result<Vec<u8>> {
        loop {
            match self.returned.recv_timeout(Duration::from_millis(100)) {
                Ok(b) => {
                    self.out -= 1;
                    return Ok(b);
                }
                Err(RecvTimeoutError::Timeout) => {
                    // A thread that ended while the jobs channel is open failed (sequential)
                    // or panicked: its buffer will never come back.
                    let ended = match &self.mode {
                        Mode::Sequential(t) => t.as_ref().is_none_or(|t| t.is_finished()),
                        Mode::Positioned { workers, .. } => workers.iter().any(|w| w.is_finished()),
                    };
                    if ended {
                        return Err(self.thread_error());
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err(self.thread_error()),
            }
        }
    }

    /// Waits until the threads have given back every buffer (written it, or skipped it after
    /// an error).
    fn drain(&mut self) -> io::Result<()> {
        while self.out > 0 {
            let mut b = self.take_returned()?;
            b.clear();
            self.free.push(b);
        }
        Ok(())
    }

    fn send(&mut self, job: Job) -> io::Result<()> {
        let sent = self.jobs.as_ref().map(|j| j.send(job));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(self.thread_error()),
        }
    }

    /// The error that stopped the writer threads (they only stop early on an error).
    fn thread_error(&mut self) -> io::Error {
        match &mut self.mode {
            Mode::Sequential(thread) => {
                self.jobs = None;
                match thread.take().map(JoinHandle::join) {
                    Some(Ok((_, Err(e), _))) => e,
                    Some(Err(_)) => io::Error::other("the writer thread panicked"),
                    _ => io::Error::other("the writer thread stopped"),
                }
            }
            Mode::Positioned {
                failure, workers, ..
            } => {
                if failure.is_set() {
                    failure.error()
                } else if workers.iter().any(|w| w.is_finished()) {
                    io::Error::other("a writer thread panicked")
                } else {
                    io::Error::other("the writer threads stopped")
                }
            }
        }
    }

    /// Writes what is left, stops the threads and returns the inner writer (flushed; a
    /// positioned writer's position at the end of what was written) and what the threads did.
    ///
    /// # Errors
    /// The first error of a write, or of the final flush.
    pub fn finish(mut self) -> io::Result<(W, WriteStats)> {
        self.ship()?;
        let waited = self.waited;
        if let Mode::Positioned { .. } = self.mode {
            self.drain()?;
        }
        self.jobs = None;
        let (inner, mut stats) = match &mut self.mode {
            Mode::Sequential(thread) => {
                let (inner, result, stats) = match thread.take().map(JoinHandle::join) {
                    Some(Ok(done)) => done,
                    _ => return Err(io::Error::other("the writer thread panicked")),
                };
                result?;
                (inner, stats)
            }
            Mode::Positioned {
                inner,
                workers,
                failure,
                offset,
                seek,
                ..
            } => {
                let mut stats = WriteStats::default();
                for w in workers.drain(..) {
                    let s = w
                        .join()
                        .map_err(|_| io::Error::other("a writer thread panicked"))?;
                    stats.bytes += s.bytes;
                    stats.busy += s.busy;
                    stats.threads += 1;
                }
                if failure.is_set() {
                    return Err(failure.error());
                }
                let mut inner = inner
                    .take()
                    .ok_or_else(|| io::Error::other("the writer was already finished"))?;
                seek(&mut inner, *offset)?;
                inner.flush()?;
                (inner, stats)
            }
        };
        stats.waited = waited;
        Ok((inner, stats))
    }
}

impl<S: PositionedSink> WriteBehind<S> {
    /// Starts `threads` (1 ..= [`MAX_WRITE_THREADS`]) threads that write buffers at their
    /// offsets in `inner`'s file, from its current position on, with at most `depth` (at least
    /// 1) full buffers waiting for them. The bytes end up exactly as written in order.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] for a thread count out of range; the operating
    /// system's, when the file's position or a second handle cannot be had or a thread cannot
    /// be started.
    pub fn positioned(mut inner: S, threads: usize, depth: usize) -> io::Result<Self> {
        if !(1..=MAX_WRITE_THREADS).contains(&threads) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("writer threads must be between 1 and {MAX_WRITE_THREADS}, got {threads}"),
            ));
        }
        let depth = depth.max(1);
        inner.flush()?;
        let base = inner.stream_position()?;
        let file = Arc::new(inner.handle()?);
        let (jobs, job_rx) = sync_channel::<Job>(depth);
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (ret_tx, returned) = sync_channel::<Vec<u8>>(depth + threads + 1);
        // Positioned writers flush by draining; nothing is ever acknowledged here.
        let (_, acks) = sync_channel::<io::Result<()>>(1);
        let failure = Arc::new(Failure::default());
        let mut workers = Vec::with_capacity(threads);
        for i in 0..threads {
            let (file, rx, returned, failure) = (
                file.clone(),
                job_rx.clone(),
                ret_tx.clone(),
                failure.clone(),
            );
            let spawned = std::thread::Builder::new()
                .name(format!("cluda-writer-{i}"))
                .spawn(move || positioned_loop(&file, &rx, &returned, &failure));
            match spawned {
                Ok(w) => workers.push(w),
                Err(e) => {
                    // The threads started so far end when `jobs` is dropped.
                    drop(jobs);
                    for w in workers {
                        let _ = w.join();
                    }
                    return Err(e);
                }
            }
        }
        Ok(Self::with_mode(
            jobs,
            returned,
            acks,
            depth + threads,
            Mode::Positioned {
                inner: Some(inner),
                workers,
                failure,
                offset: base,
                seek: seek_to::<S>,
            },
        ))
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

    /// Sends what is buffered and waits until the threads have written it (and, sequential,
    /// flushed the inner writer).
    fn flush(&mut self) -> io::Result<()> {
        self.ship()?;
        if let Mode::Positioned { .. } = self.mode {
            self.drain()?;
            return self.check();
        }
        self.send(Job::Flush)?;
        match self.acks.recv() {
            Ok(r) => r,
            Err(_) => Err(self.thread_error()),
        }
    }
}

impl<W: Write + Send + 'static> Drop for WriteBehind<W> {
    fn drop(&mut self) {
        // Unfinished (an error elsewhere): stop the threads; what they held is written or
        // not, the caller already has an error to report.
        self.jobs = None;
        match &mut self.mode {
            Mode::Sequential(thread) => {
                if let Some(t) = thread.take() {
                    let _ = t.join();
                }
            }
            Mode::Positioned {
                workers, failure, ..
            } => {
                // The buffers still queued are skipped, not written: the output is being
                // thrown away (its temporary file removed by its owner).
                failure.failed.store(true, Ordering::Release);
                for w in workers.drain(..) {
                    let _ = w.join();
                }
            }
        }
        let current = std::mem::take(&mut self.current);
        let returned: Vec<Vec<u8>> = self.returned.try_iter().collect();
        keep_buffers(
            std::mem::take(&mut self.free)
                .into_iter()
                .chain(std::iter::once(current))
                .chain(returned),
        );
    }
}
