//! The buffers handed to writer threads, kept for the next writer (a fresh 8 MiB buffer is
//! an `mmap` and its page faults).

/// Bytes per buffer handed to a writer thread.
pub const BUFFER_BYTES: usize = 8 << 20;

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
pub(super) fn new_buffer() -> Vec<u8> {
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
pub(super) fn keep_buffers(buffers: impl IntoIterator<Item = Vec<u8>>) {
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
