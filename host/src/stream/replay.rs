//! Replaying frames from files as a detector's receiver streams them (`cluda replay`): every
//! input is one acquisition, sent frame by frame at a fixed rate or as fast as possible, then
//! ended with the end-of-acquisition header.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::header::{DET_TYPE_MOENCH, MOENCH_PACKET_BYTES, ZmqHeader};
use super::publisher::Publisher;
use crate::error::{Error, Result};
use crate::io::FrameSource;

/// The lowest `--rate` accepted, in frames per second: one frame every 1000 s. Lower rates
/// are not a test of anything, and their period would overflow a [`Duration`] at some point.
pub const MIN_RATE: f64 = 1e-3;
/// The highest `--rate` accepted, in frames per second.
pub const MAX_RATE: f64 = 1e7;

/// How often a paced wait looks at the stop flag: a stop request is seen within this long.
const STOP_POLL: Duration = Duration::from_millis(50);

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplaySettings {
    /// Frames per second ([`MIN_RATE`] ..= [`MAX_RATE`]), or as fast as possible (`None`).
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
    /// Send every Nth frame of each acquisition (frame indices 0, N, 2N, ...), as slsReceiver
    /// streams with `rx_zmqfreq N`; 1 (the default): every frame.
    pub every: u64,
    /// The `rx_roi` field of every header, `[xmin, xmax, ymin, ymax]` (inclusive), as a
    /// receiver with `rx_roi` set streams its whole frames; `None` (the default): not sent.
    pub rx_roi: Option<[i64; 4]>,
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
            every: 1,
            rx_roi: None,
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
/// Waits between frames see `stop` within 50 ms, however slow the rate.
///
/// # Errors
/// Reading an input, a frame number that overflows, a rate outside [`MIN_RATE`] ..=
/// [`MAX_RATE`] (or not finite), or sending failing.
pub fn replay(
    publisher: &mut Publisher,
    inputs: usize,
    open: &mut dyn FnMut(usize) -> Result<Box<dyn FrameSource + Send>>,
    settings: &ReplaySettings,
    stop: &AtomicBool,
) -> Result<ReplayStats> {
    replay_parts(
        std::slice::from_mut(publisher),
        inputs,
        open,
        settings,
        stop,
    )
}

/// [`replay`] of every frame as `publishers.len()` parts, one per publisher, as a detector
/// read out through that many UDP interfaces streams them (slsReceiver's streaming port and
/// the next ones): part `i` is the frame's `i`-th band of `rows / N` rows, with the headers
/// slsReceiver writes for it (`detshape` `[1, N]`, `shape` `[columns, rows / N]`, `row` `i`,
/// `column` 0, `size` and `packetNumber` of the part). Each publisher sends from a thread of
/// its own, so the parts go out in parallel as the interfaces' do. Every publisher ends each
/// acquisition with its end message.
///
/// # Errors
/// As [`replay`]; no publisher, or frames whose rows do not split into N equal bands.
pub fn replay_parts(
    publishers: &mut [Publisher],
    inputs: usize,
    open: &mut dyn FnMut(usize) -> Result<Box<dyn FrameSource + Send>>,
    settings: &ReplaySettings,
    stop: &AtomicBool,
) -> Result<ReplayStats> {
    let parts = publishers.len();
    if parts == 0 {
        return Err(Error::param("interfaces", "at least 1 is needed"));
    }
    let period = settings.rate.map(period_of).transpose()?;
    let start = Instant::now();
    let mut stats = ReplayStats::default();
    let mut file_index = settings.file_index;
    let mut sent_total = 0u64;
    let end_all = |publishers: &mut [Publisher]| -> Result<()> {
        for p in publishers.iter_mut() {
            p.send_end()?;
        }
        Ok(())
    };
    'all: for _ in 0..settings.repeat {
        for i in 0..inputs {
            let mut source = open(i)?;
            let (rows, cols) = (source.rows(), source.cols());
            let total = source.remaining_hint().max(1);
            if !rows.is_multiple_of(parts) {
                return Err(Error::param(
                    "interfaces",
                    format!("{rows}-row frames do not split into {parts} parts of equal rows"),
                ));
            }
            let band = rows / parts;
            let (r32, c32) = match (u32::try_from(band), u32::try_from(cols)) {
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
                let read = k;
                let mut heads = Vec::with_capacity(k);
                let every = settings.every.max(1);
                let mut kept = 0usize;
                for (j, &n) in numbers.iter().enumerate() {
                    if !(index + j as u64).is_multiple_of(every) {
                        continue;
                    }
                    // The frames sent, packed to the front.
                    if kept != j {
                        let px = rows * cols;
                        frames.copy_within(j * px..(j + 1) * px, kept * px);
                    }
                    kept += 1;
                    let number = n.checked_add(settings.first_frame).ok_or_else(|| {
                        Error::param(
                            "first-frame",
                            format!("frame number {n} + {} overflows", settings.first_frame),
                        )
                    })?;
                    let mut h = ZmqHeader::frame(r32, c32, number);
                    h.file_index = file_index;
                    h.fname = settings.fname.clone();
                    h.frame_index = Some(index + j as u64);
                    h.progress = 100.0 * (index + j as u64 + 1) as f64 / total as f64;
                    h.det_type = settings.det_type;
                    h.rx_roi = settings.rx_roi;
                    h.detshape = [1, parts as u32];
                    h.packet_number = Some(if h.size.is_multiple_of(MOENCH_PACKET_BYTES) {
                        u32::try_from(h.size / MOENCH_PACKET_BYTES).unwrap_or(0)
                    } else {
                        0
                    });
                    heads.push(h);
                }
                let k = kept;
                frames.truncate(k * rows * cols);
                let job = Chunk {
                    frames: &frames,
                    heads: &heads,
                    rows,
                    cols,
                    parts,
                    start,
                    period,
                    first_sent: sent_total,
                };
                let sent = if parts == 1 {
                    send_part(&mut publishers[0], 0, &job, stop)?
                } else {
                    let results: Vec<Result<usize>> = std::thread::scope(|s| {
                        let handles: Vec<_> = publishers
                            .iter_mut()
                            .enumerate()
                            .map(|(p, publisher)| {
                                let job = &job;
                                s.spawn(move || send_part(publisher, p, job, stop))
                            })
                            .collect();
                        handles
                            .into_iter()
                            .map(|h| {
                                h.join().unwrap_or_else(|_| {
                                    Err(Error::Internal("a replay thread panicked".into()))
                                })
                            })
                            .collect()
                    });
                    let mut least = k;
                    for r in results {
                        least = least.min(r?);
                    }
                    least
                };
                index += if sent < k { sent as u64 } else { read as u64 };
                sent_total += sent as u64;
                stats.frames += sent as u64;
                if sent < k {
                    end_all(publishers)?;
                    stats.acquisitions += 1;
                    break 'all;
                }
            }
            end_all(publishers)?;
            stats.acquisitions += 1;
            file_index += 1;
        }
    }
    stats.seconds = start.elapsed().as_secs_f64();
    Ok(stats)
}

/// A chunk of frames to send, with their whole-frame headers (`shape` already that of one
/// part) and the pacing.
struct Chunk<'a> {
    frames: &'a [u16],
    heads: &'a [ZmqHeader],
    rows: usize,
    cols: usize,
    parts: usize,
    start: Instant,
    period: Option<Duration>,
    /// Frames sent before this chunk.
    first_sent: u64,
}

/// Sends part `p` of every frame of `job` on `publisher`; returns how many frames went out
/// before `stop` was set (all of them normally).
fn send_part(
    publisher: &mut Publisher,
    p: usize,
    job: &Chunk<'_>,
    stop: &AtomicBool,
) -> Result<usize> {
    let px = job.rows * job.cols;
    let band = (job.rows / job.parts) * job.cols;
    for (j, head) in job.heads.iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            return Ok(j);
        }
        if let Some(period) = job.period {
            let due = due_time(job.start, period, job.first_sent + j as u64)?;
            if !pace(due, stop) {
                return Ok(j);
            }
        }
        let mut h = head.clone();
        h.row = p as u32;
        let at = j * px + p * band;
        let pixels = &job.frames[at..at + band];
        if cfg!(target_endian = "little") {
            publisher.send_frame(&h, bytemuck::cast_slice(pixels))?;
        } else {
            let bytes: Vec<u8> = pixels.iter().flat_map(|v| v.to_le_bytes()).collect();
            publisher.send_frame(&h, &bytes)?;
        }
    }
    Ok(job.heads.len())
}

/// `endpoint` and the `n - 1` endpoints on the ports after it (slsReceiver streams a
/// detector's further UDP interfaces on its streaming port plus 1, 2, ...), e.g.
/// `tcp://*:30001` and `tcp://*:30002`.
///
/// # Errors
/// [`Error::InvalidParameter`] (`zmq`) when `n` > 1 and the endpoint does not end in a
/// port number (a wildcard or ephemeral port has no next one), or the ports run past 65535.
pub fn consecutive_endpoints(endpoint: &str, n: usize) -> Result<Vec<String>> {
    if n <= 1 {
        return Ok(vec![endpoint.to_string()]);
    }
    let bad = |why: &str| {
        Error::param(
            "zmq",
            format!(
                "{endpoint}: {why} (with {n} interfaces the parts go to this port and the next ones)"
            ),
        )
    };
    let (head, port) = endpoint
        .rsplit_once(':')
        .ok_or_else(|| bad("no port number"))?;
    let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
    if port == 0 {
        return Err(bad("port 0 (any free port) has no next port"));
    }
    (0..n)
        .map(|i| {
            u16::try_from(usize::from(port) + i)
                .map(|p| format!("{head}:{p}"))
                .map_err(|_| bad("the ports run past 65535"))
        })
        .collect()
}

/// The time between two frames at `rate` frames per second: an [`Error::InvalidParameter`]
/// (`rate`) unless the rate is finite and within [`MIN_RATE`] ..= [`MAX_RATE`].
pub fn period_of(rate: f64) -> Result<Duration> {
    if !(rate.is_finite() && (MIN_RATE..=MAX_RATE).contains(&rate)) {
        return Err(Error::param(
            "rate",
            format!(
                "must be a number of frames per second from {MIN_RATE} to {MAX_RATE:e}, got {rate:?}"
            ),
        ));
    }
    Duration::try_from_secs_f64(1.0 / rate)
        .map_err(|e| Error::param("rate", format!("{rate:?} frames per second: {e}")))
}

/// When frame `k` (counting from 0) is due: `start + k x period`; an error (`rate`) instead of
/// an overflow in the (absurd) case that it lies beyond what an [`Instant`] can hold.
fn due_time(start: Instant, period: Duration, k: u64) -> Result<Instant> {
    Duration::try_from_secs_f64(period.as_secs_f64() * k as f64)
        .ok()
        .and_then(|d| start.checked_add(d))
        .ok_or_else(|| Error::param("rate", format!("frame {k} is due too far in the future")))
}

/// Waits until `due`: sleeps (at most [`STOP_POLL`] at a time, so `stop` is seen) while more
/// than a millisecond is left, then yields (sleeping is too coarse for tens of thousands of
/// frames per second). Returns `false` when `stop` was set before `due`.
fn pace(due: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        let left = due - now;
        if left > Duration::from_millis(1) {
            std::thread::sleep((left - Duration::from_micros(500)).min(STOP_POLL));
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_take_the_next_ports() {
        assert_eq!(
            consecutive_endpoints("tcp://*:30001", 2).expect("two"),
            ["tcp://*:30001", "tcp://*:30002"]
        );
        assert_eq!(
            consecutive_endpoints("tcp://*:*", 1).expect("one"),
            ["tcp://*:*"]
        );
        for bad in ["tcp://*:*", "tcp://*:0", "tcp://*:65535", "inproc://x"] {
            let e = consecutive_endpoints(bad, 2).expect_err(bad);
            assert!(e.to_string().contains(bad), "{e}");
        }
    }

    #[test]
    fn rates_are_bounded_and_named() {
        for bad in [
            0.0,
            -1.0,
            1e-300,
            5e-20,
            f64::MIN_POSITIVE / 4.0,
            1e8,
            1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let e = period_of(bad).expect_err("an absurd rate");
            assert!(e.to_string().contains("`rate`"), "{bad}: {e}");
        }
        assert_eq!(
            period_of(MIN_RATE).expect("lowest"),
            Duration::from_secs(1000)
        );
        assert_eq!(period_of(4.0).expect("4 Hz"), Duration::from_millis(250));
        assert!(period_of(MAX_RATE).is_ok());
    }

    #[test]
    fn a_stop_ends_a_long_wait_at_once() {
        let stop = AtomicBool::new(false);
        let far = Instant::now() + Duration::from_secs(3600);
        let t = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                stop.store(true, Ordering::SeqCst);
            });
            assert!(!pace(far, &stop));
        });
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        assert!(pace(Instant::now(), &AtomicBool::new(false)));
        let start = Instant::now();
        assert!(due_time(start, Duration::from_secs(1000), u64::MAX).is_err());
        assert_eq!(
            due_time(start, Duration::from_millis(10), 100).expect("due"),
            start + Duration::from_secs(1)
        );
    }
}
