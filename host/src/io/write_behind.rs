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

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes per buffer handed to a writer thread.
pub const BUFFER_BYTES: usize = 8 << 20;

/// Most writer threads a [`WriteBehind`] accepts.
pub const MAX_WRITE_THREADS: usize = 64;

/// Writer threads a cluster file is written with by default: 2, so that one buffer is always
/// queued at the file while the other thread waits for its next buffer; more threads help only
/// on file systems that write one file in parallel (see the module docs).
pub const DEFAULT_WRITE_THREADS: usize = 2;

/// What the caller sends to the writer threads.
enum Job {
    /// Bytes to write next (sequential) or at an offset (positioned); the buffer comes back
    /// on the return channel.
    Bytes(u64, Vec<u8>),
    /// Flush the inner writer and acknowledge (sequential only).
    Flush,
}

/// What the writer threads did, for [`WriteBehind::finish`].
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

/// The first error of the positioned threads.
#[derive(Default)]
struct Failure {
    failed: AtomicBool,
    first: Mutex<Option<io::Error>>,
}

impl Failure {
    fn set(&self, e: io::Error) {
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert(e);
        }
        self.failed.store(true, Ordering::Release);
    }

    fn is_set(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The first error (moved out once; a copy of its kind and text afterwards).
    fn error(&self) -> io::Error {
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

/// Buffers of finished writers, kept for the next one: a process that writes many files one
/// after another (`cluda find --out-dir`, a stream's acquisitions) would otherwise take the
/// page faults of fresh buffers for every file (measured on the H200: about 20 ms per
/// 1,000-frame 3x3 cluster file, a third of its data phase). At most [`POOL_BUFFERS`] are
/// kept.
static POOL: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// Most buffers [`POOL`] keeps (128 MiB): two writers' worth (a writer holds at most
/// `depth + threads + 1`, 7 by default), because a stream commits one acquisition's file while
/// the next one's writer starts, and the buffers the first still holds would otherwise be new
/// (page-faulted) ones for the second.
const POOL_BUFFERS: usize = 16;

/// An empty buffer of [`BUFFER_BYTES`] capacity: a kept one (its pages already touched) when
/// there is one.
fn new_buffer() -> Vec<u8> {
    let kept = POOL.lock().ok().and_then(|mut p| p.pop());
    match kept {
        Some(mut b) => {
            b.clear();
            b
        }
        None => Vec::with_capacity(BUFFER_BYTES),
    }
}

/// Gives buffers back to [`POOL`] (up to its bound; the rest are freed).
fn keep_buffers(buffers: impl IntoIterator<Item = Vec<u8>>) {
    if let Ok(mut p) = POOL.lock() {
        for b in buffers {
            if p.len() >= POOL_BUFFERS {
                break;
            }
            if b.capacity() == BUFFER_BYTES {
                p.push(b);
            }
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

/// The sequential writer thread: writes every buffer in order, returns it, stops at the first
/// error.
fn writer_loop<W: Write>(
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
fn positioned_loop(
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

    /// Bytes for the positioned tests: pieces of many lengths, across buffer boundaries.
    fn pieces() -> Vec<Vec<u8>> {
        (0..3000u32)
            .map(|i| (0..(i * 37 % 20011)).map(|k| (k ^ (i * 7)) as u8).collect())
            .collect()
    }

    /// Positioned writes by 1, 2 and 4 threads leave exactly the bytes of a sequential write,
    /// after what the file already held, across flushes; the position ends after them.
    #[test]
    fn positioned_threads_write_the_same_bytes() {
        let dir = tempfile::tempdir().expect("dir");
        let pieces = pieces();
        let mut want = b"header".to_vec();
        for p in &pieces {
            want.extend_from_slice(p);
        }
        for threads in [1, 2, 4] {
            let path = dir.path().join(format!("t{threads}.bin"));
            let mut file = File::create(&path).expect("create");
            file.write_all(b"header").expect("header");
            let mut w = WriteBehind::positioned(file, threads, 2).expect("threads");
            for (i, p) in pieces.iter().enumerate() {
                w.write_all(p).expect("write");
                if i % 700 == 0 {
                    w.flush().expect("flush");
                }
            }
            let (mut file, stats) = w.finish().expect("finish");
            assert_eq!(stats.threads, threads);
            assert_eq!(stats.bytes as usize, want.len() - 6);
            file.write_all(b"!").expect("append");
            drop(file);
            let got = std::fs::read(&path).expect("read");
            assert!(
                got[..want.len()] == want[..],
                "{threads} threads: bytes differ"
            );
            assert_eq!(&got[want.len()..], b"!", "{threads} threads: position");
        }
    }

    /// A failing positioned write (a read-only handle) reaches the caller with its kind and
    /// the offset, and nothing hangs; thread counts out of range are refused.
    #[test]
    fn a_positioned_error_reaches_the_caller() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("ro.bin");
        std::fs::write(&path, b"").expect("create");
        let file = File::open(&path).expect("open read-only");
        let mut w = WriteBehind::positioned(file, 3, 1).expect("threads");
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
            None => w.finish().expect_err("finish fails"),
        };
        assert!(e.to_string().contains("at byte"), "{e}");
        for bad in [0, MAX_WRITE_THREADS + 1] {
            let file = File::create(dir.path().join("x.bin")).expect("create");
            let e = WriteBehind::positioned(file, bad, 1)
                .err()
                .expect("refused");
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        }
    }
}
