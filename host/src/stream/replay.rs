//! Replaying frames from files as a detector's receiver streams them (`cluda replay`): every
//! input is one acquisition, sent frame by frame at a fixed rate or as fast as possible, then
//! ended with the end-of-acquisition header.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::header::{DET_TYPE_MOENCH, MOENCH_PACKET_BYTES, ZmqHeader};
use super::publisher::Publisher;
use crate::error::{Error, Result};
use crate::io::FrameSource;

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplaySettings {
    /// Frames per second, or as fast as possible (`None`).
    pub rate: Option<f64>,
    /// Times the whole list of inputs is sent.
    pub repeat: u64,
    /// Added to every input's frame numbers (`.npy` frames are numbered from 0, raw frames
    /// keep their headers' numbers).
    pub first_frame: u64,
    /// The `fname` field: the file name prefix the receiver would write to.
    pub fname: String,
    /// `fileIndex` of the first acquisition (each further one adds 1).
    pub file_index: u64,
    /// The `detType` field ([`DET_TYPE_MOENCH`] by default).
    pub det_type: u32,
}

impl Default for ReplaySettings {
    fn default() -> Self {
        Self {
            rate: None,
            repeat: 1,
            first_frame: 0,
            fname: "run".into(),
            file_index: 0,
            det_type: DET_TYPE_MOENCH,
        }
    }
}

/// What a replay sent.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReplayStats {
    /// Acquisitions sent.
    pub acquisitions: u64,
    /// Frames sent.
    pub frames: u64,
    /// Seconds from the first frame to the last end message.
    pub seconds: f64,
}

/// Sends `inputs` (each opened by `open(i)`, one acquisition each) `settings.repeat` times,
/// until done or `stop` is set (then the current acquisition is ended with its end message).
///
/// # Errors
/// Reading an input, a frame number that overflows, an absurd rate, or sending failing.
pub fn replay(
    publisher: &mut Publisher,
    inputs: usize,
    open: &mut dyn FnMut(usize) -> Result<Box<dyn FrameSource + Send>>,
    settings: &ReplaySettings,
    stop: &AtomicBool,
) -> Result<ReplayStats> {
    if let Some(r) = settings.rate
        && !(r.is_finite() && r > 0.0 && r <= 10_000_000.0)
    {
        return Err(Error::param(
            "rate",
            format!("must be a number of frames per second between 0 and 1e7, got {r}"),
        ));
    }
    let period = settings.rate.map(|r| Duration::from_secs_f64(1.0 / r));
    let start = Instant::now();
    let mut stats = ReplayStats::default();
    let mut file_index = settings.file_index;
    let mut sent_total = 0u64;
    'all: for _ in 0..settings.repeat {
        for i in 0..inputs {
            let mut source = open(i)?;
            let (rows, cols) = (source.rows(), source.cols());
            let total = source.remaining_hint().max(1);
            let (r32, c32) = match (u32::try_from(rows), u32::try_from(cols)) {
                (Ok(r), Ok(c)) => (r, c),
                _ => {
                    return Err(Error::param(
                        "data",
                        format!("{rows} x {cols} frames are too large to stream"),
                    ));
                }
            };
            let chunk = crate::engine::EngineConfig::for_frames(rows, cols).chunk;
            let (mut frames, mut numbers) = (Vec::new(), Vec::new());
            let mut index = 0u64;
            loop {
                frames.clear();
                numbers.clear();
                let k = source.read_frames(chunk, &mut frames, &mut numbers)?;
                if k == 0 {
                    break;
                }
                for (j, &n) in numbers.iter().enumerate() {
                    if stop.load(Ordering::SeqCst) {
                        publisher.send_end()?;
                        stats.acquisitions += 1;
                        break 'all;
                    }
                    let number = n.checked_add(settings.first_frame).ok_or_else(|| {
                        Error::param(
                            "first-frame",
                            format!("frame number {n} + {} overflows", settings.first_frame),
                        )
                    })?;
                    let mut h = ZmqHeader::frame(r32, c32, number);
                    h.file_index = file_index;
                    h.fname = settings.fname.clone();
                    h.frame_index = Some(index);
                    h.progress = 100.0 * (index + 1) as f64 / total as f64;
                    h.det_type = settings.det_type;
                    h.packet_number = Some(if h.size.is_multiple_of(MOENCH_PACKET_BYTES) {
                        u32::try_from(h.size / MOENCH_PACKET_BYTES).unwrap_or(0)
                    } else {
                        0
                    });
                    let px = rows * cols;
                    let pixels = &frames[j * px..(j + 1) * px];
                    if let Some(p) = period {
                        let due = start + p.mul_f64(sent_total as f64);
                        pace(due);
                    }
                    if cfg!(target_endian = "little") {
                        publisher.send_frame(&h, bytemuck::cast_slice(pixels))?;
                    } else {
                        let bytes: Vec<u8> = pixels.iter().flat_map(|v| v.to_le_bytes()).collect();
                        publisher.send_frame(&h, &bytes)?;
                    }
                    index += 1;
                    sent_total += 1;
                    stats.frames += 1;
                }
            }
            publisher.send_end()?;
            stats.acquisitions += 1;
            file_index += 1;
        }
    }
    stats.seconds = start.elapsed().as_secs_f64();
    Ok(stats)
}

/// Waits until `due`: sleeps while more than a millisecond is left, then yields (sleeping is
/// too coarse for tens of thousands of frames per second).
fn pace(due: Instant) {
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > Duration::from_millis(1) {
            std::thread::sleep(left - Duration::from_micros(500));
        } else {
            std::thread::yield_now();
        }
    }
}
