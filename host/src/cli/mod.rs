//! The subcommands of the `cluda` binary, one module each, and what they share.

pub mod args;
#[cfg(target_os = "linux")]
pub mod demo;
pub mod find;
pub mod generate;
pub mod imaging;
pub mod inputs;
pub mod matching;
pub mod output;
pub mod progress;
pub mod replay;
pub mod signals;
pub mod stream;
pub mod summary;

use cluda::Result;

/// Runs the parsed command line.
pub fn run(cli: args::Cli) -> Result<()> {
    match cli.command {
        args::Command::Gen(a) => generate::run(&a),
        args::Command::Find(a) => find::run_find(&a),
        args::Command::Demo(a) => demo::run(&a),
        args::Command::Match(a) => matching::run(&a),
        args::Command::Stream(a) => stream::run(&a),
        args::Command::Replay(a) => replay::run(&a),
        args::Command::Eta(a) => imaging::run_eta(&a),
        args::Command::Image(a) => imaging::run_image(&a),
    }
}
