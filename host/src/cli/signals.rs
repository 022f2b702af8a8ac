//! Termination signals (SIGINT, SIGTERM, SIGHUP) stop the work at the next frame boundary
//! instead of killing the process mid-write, so unfinished outputs (temporary files) are
//! removed by the normal error path and the command exits with 128 + the signal number.
//!
//! The handlers come from `signal-hook`: a small, widely used crate (part of the
//! tokio/crossterm ecosystem) whose `flag` module does only async-signal-safe stores into
//! atomics. A second signal while the first is being handled ends the process at once (exit
//! 128 + the signal number): a temporary file may then stay behind, but never a partial file
//! under an output's final name.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cluda::{Error, Result};

/// The signals handled, with their names.
#[cfg(unix)]
const SIGNALS: [(i32, &str); 3] = [
    (signal_hook::consts::SIGINT, "SIGINT"),
    (signal_hook::consts::SIGTERM, "SIGTERM"),
    (signal_hook::consts::SIGHUP, "SIGHUP"),
];

/// The set flags: whether a signal arrived, and which one.
struct Flags {
    stop: Arc<AtomicBool>,
    which: Arc<AtomicUsize>,
}

static FLAGS: OnceLock<Flags> = OnceLock::new();

/// Installs the handlers (once; later calls do nothing). Failing to install is not fatal: the
/// signals then keep their default action.
pub fn install() {
    FLAGS.get_or_init(|| {
        let flags = Flags {
            stop: Arc::new(AtomicBool::new(false)),
            which: Arc::new(AtomicUsize::new(0)),
        };
        #[cfg(unix)]
        for (sig, _) in SIGNALS {
            // Order matters: the conditional shutdown sees the flag of an earlier signal only.
            let _ = signal_hook::flag::register_conditional_shutdown(
                sig,
                128 + sig,
                Arc::clone(&flags.stop),
            );
            let _ = signal_hook::flag::register_usize(sig, Arc::clone(&flags.which), sig as usize);
            let _ = signal_hook::flag::register(sig, Arc::clone(&flags.stop));
        }
        flags
    });
}

/// The flag the handlers set, for work that stops on its own terms (`cluda stream` finishes
/// its current acquisition); `None` before [`install`].
pub fn stop_flag() -> Option<Arc<AtomicBool>> {
    FLAGS.get().map(|f| Arc::clone(&f.stop))
}

/// An [`Error::Interrupted`] when a termination signal arrived since [`install`]; called at
/// frame (chunk) boundaries.
pub fn check() -> Result<()> {
    let Some(f) = FLAGS.get() else {
        return Ok(());
    };
    if !f.stop.load(Ordering::SeqCst) {
        return Ok(());
    }
    let number = f.which.load(Ordering::SeqCst) as i32;
    #[cfg(unix)]
    let signal = SIGNALS
        .iter()
        .find(|(s, _)| *s == number)
        .map_or("a termination signal", |(_, n)| n);
    #[cfg(not(unix))]
    let signal = "a termination signal";
    Err(Error::Interrupted { signal, number })
}
