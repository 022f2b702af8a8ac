//! The `cluda` command line: generate MOENCH-like frames, find clusters in `.npy` files, a
//! self-contained demo, and nearest-neighbour descriptor matching. Errors print as `error: <message>` and exit with code 1; a termination signal (SIGINT, SIGTERM, SIGHUP) stops
//! at the next frame boundary, removes unfinished outputs and exits with 128 + its number.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = match cli::args::Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            // Help and version go to stdout with success; usage errors exit 1 like every
            // other error.
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    cli::signals::install();
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ cluda::Error::Interrupted { number, .. }) => {
            eprintln!("error: {e}");
            ExitCode::from(u8::try_from(128 + number).unwrap_or(1))
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
