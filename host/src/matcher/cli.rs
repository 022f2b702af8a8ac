//! `cluda match`: everything the command does, for `main.rs` to call.

use std::path::Path;
use std::time::Instant;

use super::files::{read_descriptors, write_matches};
use super::{GpuMatcher, MatchVersion, cpu};
use crate::cuda::Device;
use crate::error::Result;

/// Reads `lhs` and `rhs` (`n x 128` float32 `.npy`), matches them with `version`, optionally
/// writes the matches to `out` (an `(n, 2)` float64 `.npy`: index, distance per row) and
/// returns the one-line summary, e.g.
/// `lhs=16384 rhs=16384 seconds=0.412 ms=2.41 version=v3 device="NVIDIA H200" recomputed=0`.
///
/// `seconds` is the whole command (reading, matching, writing); `ms` is the matching itself:
/// device time (CUDA events) for the GPU versions, wall time for the CPU.
pub fn run_match_command(
    lhs: &Path,
    rhs: &Path,
    version: MatchVersion,
    out: Option<&Path>,
) -> Result<String> {
    let t0 = Instant::now();
    let a = read_descriptors(lhs)?;
    let b = read_descriptors(rhs)?;
    let (matches, ms, device, recomputed) = if version == MatchVersion::Cpu {
        let t = Instant::now();
        let m = cpu::match_cpu(&a, &b)?;
        (m, t.elapsed().as_secs_f64() * 1e3, "cpu".to_string(), 0)
    } else {
        super::validate(&a, &b)?;
        let dev = Device::open(0)?;
        let mut matcher = GpuMatcher::new(&dev)?;
        let run = matcher.run(&a, &b, version)?;
        (run.matches, run.device_ms, dev.name(), run.recomputed_rows)
    };
    if let Some(path) = out {
        write_matches(path, &matches)?;
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
