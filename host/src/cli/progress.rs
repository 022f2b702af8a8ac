//! The progress bar: drawn on stderr, only when stderr is a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar counting `len` frames, labelled `what`; hidden unless stderr is a terminal (so logs
/// and pipes stay clean).
pub fn frames_bar(len: u64, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{msg:>9} [{bar:40.cyan/blue}] {pos}/{len} frames, {elapsed} elapsed, eta {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}
