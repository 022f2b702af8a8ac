//! Tests of the writer threads: bytes in order or at offsets, errors, backpressure.

use std::fs::File;
use std::io::{self, Write};

use super::{MAX_WRITE_THREADS, WriteBehind};

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

/// Writes up to 64 MiB through `w`, a MiB at a time, and then finishes it: the first error
/// of a write or of the finish (one of them must fail).
fn first_error<W: Write + Send + 'static>(mut w: WriteBehind<W>) -> io::Error {
    let block = vec![7u8; 1 << 20];
    for _ in 0..64 {
        if let Err(e) = w.write_all(&block) {
            return e;
        }
    }
    w.finish().err().expect("finish fails")
}

/// The inner writer's error reaches the caller (on a later write, a flush or finish),
/// with its kind, and nothing hangs.
#[test]
fn an_inner_error_reaches_the_caller() {
    let w = WriteBehind::new(Failing { left: 3 << 20 }, 1).expect("thread");
    let e = first_error(w);
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
    let w = WriteBehind::positioned(file, 3, 1).expect("threads");
    let e = first_error(w);
    assert!(e.to_string().contains("at byte"), "{e}");
    for bad in [0, MAX_WRITE_THREADS + 1] {
        let file = File::create(dir.path().join("x.bin")).expect("create");
        let e = WriteBehind::positioned(file, bad, 1)
            .err()
            .expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }
}
