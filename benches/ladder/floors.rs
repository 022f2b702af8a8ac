//! Copy floors of the machine, measured in the same run as the ladder: pinned host-to-device
//! and device-to-host bandwidth in bulk and in per-frame copies, and both directions at once.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, result, sys};

/// Measured floors (bandwidths in GB/s, per-frame times in microseconds).
#[derive(Clone, Debug, Default)]
pub struct Floors {
    pub h2d_bulk_gbs: f64,
    pub d2h_bulk_gbs: f64,
    pub h2d_frame_us: f64,
    pub d2h_frame_us: f64,
    pub both_h2d_gbs: f64,
    pub both_d2h_gbs: f64,
    pub frame_bytes: usize,
}

impl Floors {
    /// Upload floor per frame at bulk bandwidth, microseconds.
    pub fn upload_us(&self) -> f64 {
        self.frame_bytes as f64 / (self.h2d_bulk_gbs * 1e3)
    }

    /// Download floor for `bytes` per frame at bulk bandwidth, microseconds.
    pub fn download_us(&self, bytes: f64) -> f64 {
        bytes / (self.d2h_bulk_gbs * 1e3)
    }
}

struct Timer {
    start: sys::CUevent,
    end: sys::CUevent,
}

impl Timer {
    fn new() -> Result<Self, String> {
        let f = sys::CUevent_flags::CU_EVENT_DEFAULT;
        Ok(Self {
            start: result::event::create(f).map_err(|e| e.to_string())?,
            end: result::event::create(f).map_err(|e| e.to_string())?,
        })
    }
    fn start(&self, s: &CudaStream) {
        // SAFETY: both events were created in `new` and live as long as `self`; `s` is live.
        unsafe { result::event::record(self.start, s.cu_stream()) }.expect("event record");
    }
    fn stop_ms(&self, s: &CudaStream) -> f64 {
        // SAFETY: as in `start`; `start` was recorded before this on the same stream.
        unsafe {
            result::event::record(self.end, s.cu_stream()).expect("event record");
            result::event::synchronize(self.end).expect("event sync");
            result::event::elapsed(self.start, self.end).expect("event elapsed") as f64
        }
    }
}

/// Measures every floor with `frame_bytes`-sized per-frame copies and `bulk_bytes` bulk copies.
pub fn measure(
    ctx: &Arc<CudaContext>,
    frame_bytes: usize,
    bulk_bytes: usize,
) -> Result<Floors, String> {
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let s1 = ctx.new_stream().map_err(e)?;
    let s2 = ctx.new_stream().map_err(e)?;
    // Host buffers the GPU reads are write-combined pinned memory; buffers the CPU reads are
    // plain pinned memory (docs/toolchain.md).
    // SAFETY: uninitialised buffers (this and the next three) that are only copied from and
    // to; the measured copies read whatever bytes they hold, which no result depends on.
    let up = unsafe { ctx.alloc_pinned::<u8>(bulk_bytes) }.map_err(e)?;
    // SAFETY: as `up`.
    let mut down = unsafe { ctx.alloc_pinned_with_flags::<u8>(bulk_bytes, 0) }.map_err(e)?;
    // SAFETY: as `up`.
    let mut dev_a = unsafe { s1.alloc::<u8>(bulk_bytes) }.map_err(e)?;
    // SAFETY: as `up`.
    let dev_b = unsafe { s1.alloc::<u8>(bulk_bytes) }.map_err(e)?;
    s1.synchronize().map_err(e)?;
    let up_s: &[u8] = up.as_slice().map_err(e)?;
    let down_s: &mut [u8] = down.as_mut_slice().map_err(e)?;
    let (a_ptr, _ga) = {
        use cudarc::driver::DevicePtrMut;
        dev_a.device_ptr_mut(&s1)
    };
    let (b_ptr, _gb) = {
        use cudarc::driver::DevicePtr;
        dev_b.device_ptr(&s1)
    };
    let t = Timer::new()?;
    let t2 = Timer::new()?;
    let best = |f: &mut dyn FnMut() -> f64| (0..5).map(|_| f()).fold(f64::INFINITY, f64::min);
    let mut bulk_h2d = || {
        t.start(&s1);
        // SAFETY: `dev_a` holds `bulk_bytes` = `up_s.len()` bytes, and `stop_ms` waits for
        // the copy before `up_s` can be touched again.
        unsafe { result::memcpy_htod_async(a_ptr, up_s, s1.cu_stream()) }.expect("h2d");
        t.stop_ms(&s1)
    };
    let h2d_ms = best(&mut bulk_h2d);
    let down_ptr = down_s.as_mut_ptr();
    let mut bulk_d2h = || {
        t.start(&s1);
        // SAFETY: `down` holds `bulk_bytes` bytes and no other reference to them is used
        // while `dst` lives.
        let dst = unsafe { std::slice::from_raw_parts_mut(down_ptr, bulk_bytes) };
        // SAFETY: `dev_b` holds `bulk_bytes` bytes; `stop_ms` waits for the copy.
        unsafe { result::memcpy_dtoh_async(dst, b_ptr, s1.cu_stream()) }.expect("d2h");
        t.stop_ms(&s1)
    };
    let d2h_ms = best(&mut bulk_d2h);
    let frames = (bulk_bytes / frame_bytes).min(2000);
    let mut frame_h2d = || {
        t.start(&s1);
        for i in 0..frames {
            let src = &up_s[i * frame_bytes..(i + 1) * frame_bytes];
            // SAFETY: frame `i` < `bulk_bytes / frame_bytes` lies inside `dev_a`; `stop_ms`
            // waits for the copies.
            unsafe {
                result::memcpy_htod_async(a_ptr + (i * frame_bytes) as u64, src, s1.cu_stream())
            }
            .expect("h2d");
        }
        t.stop_ms(&s1) * 1e3 / frames as f64
    };
    let h2d_frame_us = best(&mut frame_h2d);
    let mut frame_d2h = || {
        t.start(&s1);
        for i in 0..frames {
            // SAFETY: frame `i` lies inside `down`, and no other reference to it is used
            // while `dst` lives.
            let dst = unsafe {
                std::slice::from_raw_parts_mut(down_ptr.add(i * frame_bytes), frame_bytes)
            };
            // SAFETY: frame `i` lies inside `dev_b`; `stop_ms` waits for the copies.
            unsafe {
                result::memcpy_dtoh_async(dst, b_ptr + (i * frame_bytes) as u64, s1.cu_stream())
            }
            .expect("d2h");
        }
        t.stop_ms(&s1) * 1e3 / frames as f64
    };
    let d2h_frame_us = best(&mut frame_d2h);
    // Per-direction rates while both run: time each stream separately in the same launch.
    let mut h2d_both = f64::INFINITY;
    let mut d2h_both = f64::INFINITY;
    for _ in 0..5 {
        t.start(&s1);
        t2.start(&s2);
        // SAFETY: as in `bulk_h2d`; the two copies touch different host and device buffers.
        unsafe { result::memcpy_htod_async(a_ptr, up_s, s1.cu_stream()) }.expect("h2d");
        // SAFETY: as in `bulk_d2h`.
        let dst = unsafe { std::slice::from_raw_parts_mut(down_ptr, bulk_bytes) };
        // SAFETY: as in `bulk_d2h`; both timers wait for their stream below.
        unsafe { result::memcpy_dtoh_async(dst, b_ptr, s2.cu_stream()) }.expect("d2h");
        h2d_both = h2d_both.min(t.stop_ms(&s1));
        d2h_both = d2h_both.min(t2.stop_ms(&s2));
    }
    let gbs = |bytes: usize, ms: f64| bytes as f64 / (ms * 1e6);
    Ok(Floors {
        h2d_bulk_gbs: gbs(bulk_bytes, h2d_ms),
        d2h_bulk_gbs: gbs(bulk_bytes, d2h_ms),
        h2d_frame_us,
        d2h_frame_us,
        both_h2d_gbs: gbs(bulk_bytes, h2d_both),
        both_d2h_gbs: gbs(bulk_bytes, d2h_both),
        frame_bytes,
    })
}
