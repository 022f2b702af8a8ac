//! What a run reports: the frames and clusters found, what it wrote, and where its time went
//! ([`RunTiming::lines`] are `--timing`'s lines).

use std::path::PathBuf;
use std::time::Duration;

use super::EngineStats;
use crate::io::write_behind::WriteStats;

/// Where the time of a run went (see [`RunTiming::lines`]).
#[derive(Clone, Debug, Default)]
pub struct RunTiming {
    /// Start-up: from the call to the first data frame asked for (device and pedestal).
    pub startup: Duration,
    /// Opening the device.
    pub open: Duration,
    /// Allocating the frame ring on the device thread (`None`: not ahead; see
    /// [`EngineStats::alloc`]).
    pub ring_ahead: Option<Duration>,
    /// The finder's buffers for a chunk.
    pub reserve: Duration,
    /// Reading and pushing the pedestal.
    pub pedestal: Duration,
    /// Pedestal frames.
    pub pedestal_frames: u64,
    /// The engine's data phase.
    pub engine: EngineStats,
    /// Threads the data was read with.
    pub read_threads: usize,
    /// The cluster file writer's, when one was written.
    pub write: Option<WriteStats>,
    /// The data phase and the cluster file's commit.
    pub busy: Duration,
    /// Releasing the device (its memory, the context).
    pub release: Duration,
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Data frames found.
    pub frames: u64,
    /// Clusters found in them.
    pub clusters: u64,
    /// The finder's device, as it describes itself.
    pub device: String,
    /// Why that device (e.g. "no GPU found, using the CPU").
    pub device_note: String,
    /// Where the time went.
    pub timing: RunTiming,
    /// Gap reports of inputs that lost frames (raw acquisitions), for a person.
    pub warnings: Vec<String>,
    /// The cluster file written, if any.
    pub cluster_file: Option<PathBuf>,
    /// The plots written, if any.
    pub plots: Vec<PathBuf>,
}

impl RunReport {
    /// Seconds the data phase took, the cluster file's commit included, less its waits for
    /// input: finding and writing (what `cluda find`'s summary line reports as `seconds`).
    pub fn seconds(&self) -> f64 {
        self.timing
            .busy
            .saturating_sub(self.timing.engine.waited_for_input)
            .as_secs_f64()
    }

    /// Seconds the input's own threads spent reading (or generating) the data frames,
    /// overlapped with finding; 0 for a mapped input.
    pub fn input_seconds(&self) -> f64 {
        self.timing.engine.read_busy.as_secs_f64()
    }
}

impl RunTiming {
    /// The `--timing` lines: start-up (device and pedestal side by side), the data phase
    /// (each stage with its bandwidth; the reader and writer threads overlap the finder, so
    /// their busy times add up to more than the phase when the run is overlapped, and the
    /// stage whose busy time is closest to the phase bounds it), and the device's release.
    pub fn lines(&self) -> Vec<String> {
        let ring = match self.ring_ahead {
            Some(t) => format!("then the frame ring {:.3} s", t.as_secs_f64()),
            // Mapped input: no ring, unless the source could not be mapped and the engine
            // allocated one after the start-up.
            None if self.engine.alloc.is_zero() => {
                "(no frame ring: the input is mapped)".to_string()
            }
            None => format!(
                "(the frame ring {:.3} s in the engine, after the start-up)",
                self.engine.alloc.as_secs_f64()
            ),
        };
        let startup = format!(
            "timing: start-up {:.3} s: opening the device {:.3} s {ring}, then the finder's buffers {:.3} s on one thread, the pedestal {:.3} s ({} frames) on another at the same time",
            self.startup.as_secs_f64(),
            self.open.as_secs_f64(),
            self.reserve.as_secs_f64(),
            self.pedestal.as_secs_f64(),
            self.pedestal_frames,
        );
        vec![
            startup,
            self.data_line(),
            format!(
                "timing: releasing the device {:.3} s",
                self.release.as_secs_f64()
            ),
        ]
    }

    /// The data phase's line of [`RunTiming::lines`].
    fn data_line(&self) -> String {
        let gbs = |bytes: u64, t: Duration| {
            if t.is_zero() {
                0.0
            } else {
                bytes as f64 / t.as_secs_f64() / 1e9
            }
        };
        let s = |t: Duration| t.as_secs_f64();
        let stats = &self.engine;
        let frames = stats.frames.max(1) as f64;
        let phase = self.busy;
        let mut line = format!(
            "timing: data phase {:.3} s ({:.2} us/frame); read {:.3} s busy with {} threads ({:.1} GB/s); waited for frames {:.3} s; find {:.3} s ({:.1} GB/s of frames, {:.2} us/frame), of which handing clusters on {:.3} s",
            s(phase),
            s(phase) * 1e6 / frames,
            s(stats.read_busy),
            self.read_threads,
            gbs(stats.read_bytes, stats.read_busy),
            s(stats.waited_for_input),
            s(stats.find),
            gbs(stats.read_bytes, stats.find),
            s(stats.find) * 1e6 / frames,
            s(stats.visit),
        );
        if let Some(w) = &self.write {
            line.push_str(&format!(
                "; write {:.3} s busy in {} threads ({:.1} GB/s per busy thread, {} bytes); waited for the writer {:.3} s",
                s(w.busy),
                w.threads,
                gbs(w.bytes, w.busy),
                w.bytes,
                s(w.waited),
            ));
        }
        line
    }
}
