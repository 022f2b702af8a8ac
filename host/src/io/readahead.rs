//! Advice to the kernel on how frame files are read, so that files not in the page cache
//! ("cold") stream at the disk's speed: a larger sequential read-ahead on open, and the
//! next chunk asked for while the current one is being read.
//!
//! Advice only: a failure (or a system without `posix_fadvise`) changes nothing but speed,
//! so every function here ignores errors.

use std::fs::File;

/// Threads that read one chunk of a file at once: one per core, at most 16 (copying from the
/// page cache is bound by memory bandwidth, which one core cannot use up).
pub fn read_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 16)
}

/// Tells the kernel that `file` is read from start to end (Linux doubles its read-ahead
/// window for it).
pub fn sequential(file: &File) {
    advise(file, 0, 0, Advice::Sequential);
}

/// Tells the kernel that `file` is read at scattered places (no read-ahead: reading a record
/// header then fetches one page, not a window of the image data after it). The advice
/// belongs to this open file only, not to other handles on the same file.
pub fn random(file: &File) {
    advise(file, 0, 0, Advice::Random);
}

/// Asks the kernel to start reading bytes `offset .. offset + len` of `file` into the page
/// cache now, without waiting for them.
pub fn will_need(file: &File, offset: u64, len: u64) {
    if len > 0 {
        advise(file, offset, len, Advice::WillNeed);
    }
}

#[derive(Clone, Copy)]
enum Advice {
    Sequential,
    Random,
    WillNeed,
}

#[cfg(target_os = "linux")]
fn advise(file: &File, offset: u64, len: u64, advice: Advice) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return;
    };
    let advice = match advice {
        Advice::Sequential => libc::POSIX_FADV_SEQUENTIAL,
        Advice::Random => libc::POSIX_FADV_RANDOM,
        Advice::WillNeed => libc::POSIX_FADV_WILLNEED,
    };
    // SAFETY: a plain system call on a file descriptor that `file` keeps open; it reads no
    // memory of ours. Its result is advice only and ignored (see the module docs).
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), offset, len, advice);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_file: &File, _offset: u64, _len: u64, _advice: Advice) {}
