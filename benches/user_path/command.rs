//! The command as a user runs it: one run of `cluda` timed, inputs warmed into the page
//! cache or evicted from it.

use crate::*;

/// One run of the command: its data-phase us/frame (`--timing`'s data phase, waits for input
/// included) and wall seconds.
pub(crate) struct Run {
    pub(crate) us_per_frame: f64,
    pub(crate) wall_s: f64,
    pub(crate) stderr: String,
}

pub(crate) fn cluda(o: &Opts, args: &[&str], env: &[(&str, &str)]) -> Result<Run, String> {
    let t = Instant::now();
    let out = Command::new(&o.cluda)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("{}: {e}", o.cluda.display()))?;
    let wall_s = t.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(format!("cluda {args:?} failed: {stderr}"));
    }
    // The data phase as a whole (`--timing`'s line: waits for input included, which the
    // summary's `us_per_frame` leaves out); the summary's figure when there is no such line.
    let phase = stderr.lines().find_map(|l| {
        l.strip_prefix("timing: data phase ")
            .and_then(|r| r.split_once("s (").map(|(_, r)| r))
            .and_then(|r| r.split_once(" us/frame"))
            .and_then(|(v, _)| v.trim().parse::<f64>().ok())
    });
    let us_per_frame = phase.unwrap_or_else(|| {
        stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("us_per_frame="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    });
    Ok(Run {
        us_per_frame,
        wall_s,
        stderr,
    })
}

/// `cluda gen --overwrite` of the run's frames and pedestal frames into `dir` (`--raw`: as a
/// raw acquisition).
pub(crate) fn generate(o: &Opts, dir: &Path, raw: bool) -> Result<(), String> {
    let (frames, pedestal) = (o.frames.to_string(), o.pedestal_frames.to_string());
    let mut args = vec!["gen", "--overwrite"];
    if raw {
        args.push("--raw");
    }
    args.extend(["--out", s(dir), "--frames", &frames]);
    args.extend(["--pedestal-frames", &pedestal]);
    cluda(o, &args, &[]).map(|_| ())
}

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap_or("")
}

/// Reads `path` once (into the page cache) and returns its size.
pub(crate) fn warm(path: &Path) -> Result<u64, String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut buf = vec![0u8; 8 << 20];
    let mut n = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(n),
            Ok(k) => n += k as u64,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
}

/// Drops `files` from the page cache (`posix_fadvise(DONTNEED)` after an `fdatasync`), so
/// the next read comes from the disk.
pub(crate) fn evict(files: &[PathBuf]) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    for f in files {
        let file = std::fs::File::open(f).map_err(|e| format!("{}: {e}", f.display()))?;
        file.sync_data()
            .map_err(|e| format!("{}: {e}", f.display()))?;
        // SAFETY: a valid open descriptor; the advice changes no memory of this process.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(format!("{}: posix_fadvise failed ({rc})", f.display()));
        }
    }
    Ok(())
}
