//! `cluda match`: chooses the version, reads both descriptor files, matches them, writes the
//! matches and prints the summary line.

use std::path::Path;
use std::time::Instant;

use cluda::Result;
use cluda::cuda::Device;
use cluda::io::{AtomicFile, Claim, check_output, check_overwrite, check_regular};
use cluda::matcher::{self, GpuMatcher, MatchVersion, read_descriptors, write_matches_claiming};

use super::args::MatchArgs;
use super::output::{note_unwritten, print_line};

/// Runs `cluda match`: a `note:` on stderr saying which version runs and why, then the
/// summary line on stdout.
pub fn run(args: &MatchArgs) -> Result<()> {
    let inputs = [args.lhs.clone(), args.rhs.clone()];
    for input in &inputs {
        check_regular(input)?;
    }
    if let Some(out) = &args.out {
        check_output(out, "out", &inputs)?;
        check_overwrite(out, "out", args.overwrite)?;
        // Can a file be created there? (A temporary one, removed at once.)
        drop(AtomicFile::create(out)?);
    }
    let (version, why) = choose_version(args.version, cluda::cuda::gpu_available);
    eprintln!("note: version={version} ({why})");
    // Checked above; the rename refuses a name that appeared since, unless --overwrite.
    let claim = if args.overwrite {
        Claim::Replace
    } else {
        Claim::Refuse
    };
    let line = run_match_command(&args.lhs, &args.rhs, version, args.out.as_deref(), claim)?;
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

/// Reads `lhs` and `rhs` (`n x 128` float32 `.npy`), matches them with `version`, optionally
/// writes the matches to `out` (an `(n, 2)` float64 `.npy`: index, distance per row; its
/// name claimed as `claim` says) and
/// returns the one-line summary, e.g.
/// `lhs=16384 rhs=16384 seconds=0.412 ms=2.41 version=v3 device="NVIDIA H200" recomputed=0`.
///
/// `seconds` is the whole command (reading, matching, writing); `ms` is the matching itself:
/// device time (CUDA events) for the GPU versions, wall time for the CPU.
fn run_match_command(
    lhs: &Path,
    rhs: &Path,
    version: MatchVersion,
    out: Option<&Path>,
    claim: Claim,
) -> Result<String> {
    let t0 = Instant::now();
    let a = read_descriptors(lhs)?;
    let b = read_descriptors(rhs)?;
    let (matches, ms, device, recomputed) = if version == MatchVersion::Cpu {
        let t = Instant::now();
        let m = matcher::cpu::match_cpu(&a, &b)?;
        (m, t.elapsed().as_secs_f64() * 1e3, "cpu".to_string(), 0)
    } else {
        matcher::validate(&a, &b)?;
        let dev = Device::open(0)?;
        let mut matcher = GpuMatcher::new(&dev)?;
        let run = matcher.run(&a, &b, version)?;
        (run.matches, run.device_ms, dev.name(), run.recomputed_rows)
    };
    if let Some(path) = out {
        note_unwritten(path, write_matches_claiming(path, &matches, claim))?;
    }
    Ok(format!(
        "lhs={} rhs={} seconds={:.3} ms={:.3} version={} device={:?} recomputed={}",
        a.len(),
        b.len(),
        t0.elapsed().as_secs_f64(),
        ms,
        version,
        device,
        recomputed
    ))
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
