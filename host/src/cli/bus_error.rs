//! `find --input map`: a mapped input that another program truncates while a chunk of it is
//! being read makes that read a SIGBUS (the engine checks the file's length before each chunk,
//! which catches the rest as an ordinary error). This handler turns the signal into what any
//! other error gives: a message naming the file on stderr, the unfinished output's temporary
//! file removed, exit code 1.
//!
//! Written by hand with `libc` because signal-hook refuses SIGBUS (a handler that returns would
//! fault again). The handler only calls async-signal-safe system calls (`write`, `open`,
//! `getdents64`, `unlinkat`, `_exit`) on data prepared before the file was mapped.

use std::path::Path;
use std::sync::OnceLock;

/// What the handler needs, prepared up front.
struct Prepared {
    /// The whole message, newline included.
    message: Vec<u8>,
    /// The output's directory (NUL-terminated), when there is an output.
    dir: Option<Vec<u8>>,
    /// The prefix of the output's temporary files: `.<name>.<pid>.`.
    prefix: Vec<u8>,
}

static PREPARED: OnceLock<Prepared> = OnceLock::new();

/// Installs the handler for a run that maps `input` and writes `out` (its temporary file is
/// `.<name>.<pid>.<random>.tmp` beside it). Failing to install leaves SIGBUS as it was.
pub fn install(input: &Path, out: Option<&Path>) {
    let message = format!(
        "error: {}: the file shrank while it was mapped (--input map): frames beyond its new end are gone; unfinished outputs were removed (use --input read for inputs that may change)\n",
        input.display()
    )
    .into_bytes();
    let (dir, prefix) = match out.and_then(|o| Some((o.parent()?, o.file_name()?))) {
        Some((dir, name)) => {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            let mut d = dir.as_os_str().as_encoded_bytes().to_vec();
            d.push(0);
            let mut p = b".".to_vec();
            p.extend_from_slice(name.as_encoded_bytes());
            p.extend_from_slice(format!(".{}.", std::process::id()).as_bytes());
            (Some(d), p)
        }
        None => (None, Vec::new()),
    };
    if PREPARED
        .set(Prepared {
            message,
            dir,
            prefix,
        })
        .is_err()
    {
        return;
    }
    // SAFETY: installs a handler that reads only the data set above (never changed again) and
    // calls only async-signal-safe functions, and never returns (it ends the process).
    unsafe {
        libc::signal(libc::SIGBUS, on_sigbus as *const () as libc::sighandler_t);
    }
}

extern "C" fn on_sigbus(_: libc::c_int) {
    if let Some(p) = PREPARED.get() {
        if let Some(dir) = &p.dir {
            remove_temporaries(dir, &p.prefix);
        }
        // SAFETY: write(2) of a buffer that lives for the whole process.
        unsafe {
            libc::write(2, p.message.as_ptr().cast(), p.message.len());
        }
    }
    // SAFETY: _exit(2) is async-signal-safe and ends the process at once.
    unsafe { libc::_exit(1) }
}

/// Removes the entries of `dir` (NUL-terminated) whose names start with `prefix`, with raw
/// system calls and a buffer on the stack (no allocation in a signal handler).
fn remove_temporaries(dir: &[u8], prefix: &[u8]) {
    // SAFETY: `dir` is NUL-terminated; the descriptor is closed below.
    let fd = unsafe {
        libc::open(
            dir.as_ptr().cast(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: getdents64 fills at most `buf.len()` bytes of `buf` with linux_dirent64
        // records and returns how many bytes it wrote.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        if n <= 0 {
            break;
        }
        let n = n as usize;
        let mut at = 0;
        // linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name (NUL-ended).
        while at + 19 < n {
            let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
            if reclen == 0 || at + reclen > n {
                break;
            }
            let name = &buf[at + 19..at + reclen];
            let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            if name[..len].starts_with(prefix) && len < name.len() {
                // SAFETY: `name` is NUL-terminated within the record; `fd` is open.
                unsafe {
                    libc::unlinkat(fd, name.as_ptr().cast(), 0);
                }
            }
            at += reclen;
        }
    }
    // SAFETY: closing the descriptor opened above.
    unsafe {
        libc::close(fd);
    }
}
