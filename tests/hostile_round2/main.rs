//! The second hostile round (issue 25): every numeric option driven with extreme values,
//! waits that must see signals, outputs that collide with each other or with an existing
//! result, and a stream that must survive one bad message or file-system failure. Every case
//! checks the error names the option or file, the exit code, that inputs are unchanged, that
//! no partial output is left under a final name, and that it ends in bounded time.
//!
//! One module a topic: [`options`] (numeric options, durations, signals), [`outputs`] (results
//! that collide), [`streams`] (a stream that survives), [`inputs`] (inputs that turn hostile).

use std::time::Duration;

use support::cli::Cli;
use support::stream::fails_within;

mod inputs;
mod options;
mod outputs;
mod streams;

/// The binary under test.
const CLUDA: Cli = Cli(env!("CARGO_BIN_EXE_cluda"));

/// Runs cluda (at most 30 s), expecting a user error naming every one of `want`; returns the
/// message.
#[track_caller]
fn fails(args: &[&str], want: &[&str]) -> String {
    fails_within(Duration::from_secs(30), args, want)
}
