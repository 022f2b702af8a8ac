//! `cluda match`: chooses the version, then hands everything to
//! [`cluda::matcher::run_match_command`], the one implementation of the command.

use cluda::Result;
use cluda::matcher::{MatchVersion, run_match_command};

use super::args::MatchArgs;
use super::find::print_line;

/// Runs `cluda match`: a `note:` on stderr saying which version runs and why, then the
/// summary line on stdout.
pub fn run(args: &MatchArgs) -> Result<()> {
    let (version, why) = choose_version(args.version, cluda::cuda::gpu_available);
    eprintln!("note: version={version} ({why})");
    let line = run_match_command(&args.lhs, &args.rhs, version, args.out.as_deref())?;
    print_line(&line)
}

/// The version to run and why: the requested one, else v3 when `gpu_available()` says a CUDA
/// GPU is there, else the CPU. `gpu_available` is only called when no version was requested.
fn choose_version(
    requested: Option<MatchVersion>,
    gpu_available: impl FnOnce() -> bool,
) -> (MatchVersion, &'static str) {
    match requested {
        Some(v) => (v, "as requested by --version"),
        None if gpu_available() => (MatchVersion::V3, "default: a CUDA GPU is available"),
        None => (MatchVersion::Cpu, "default: no CUDA GPU available"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_version_follows_the_gpu() {
        assert_eq!(choose_version(None, || true).0, MatchVersion::V3);
        assert_eq!(choose_version(None, || false).0, MatchVersion::Cpu);
        let asked = choose_version(Some(MatchVersion::V1), || panic!("not asked")).0;
        assert_eq!(asked, MatchVersion::V1);
    }
}
