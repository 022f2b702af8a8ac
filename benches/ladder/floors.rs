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
        unsafe { result::event::record(self.start, s.cu_stream()) }.expect("event record");
    }
    fn stop_ms(&self, s: &CudaStream) -> f64 {
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
    let up = unsafe { ctx.alloc_pinned::<u8>(bulk_bytes) }.map_err(e)?;
    let mut down = unsafe { ctx.alloc_pinned_with_flags::<u8>(bulk_bytes, 0) }.map_err(e)?;
    let mut dev_a = unsafe { s1.alloc::<u8>(bulk_bytes) }.map_err(e)?;
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
        unsafe { result::memcpy_htod_async(a_ptr, up_s, s1.cu_stream()) }.expect("h2d");
        t.stop_ms(&s1)
    };
    let h2d_ms = best(&mut bulk_h2d);
    let down_ptr = down_s.as_mut_ptr();
    let mut bulk_d2h = || {
        t.start(&s1);
        let dst = unsafe { std::slice::from_raw_parts_mut(down_ptr, bulk_bytes) };
        unsafe { result::memcpy_dtoh_async(dst, b_ptr, s1.cu_stream()) }.expect("d2h");
        t.stop_ms(&s1)
    };
    let d2h_ms = best(&mut bulk_d2h);
    let frames = (bulk_bytes / frame_bytes).min(2000);
    let mut frame_h2d = || {
        t.start(&s1);
        for i in 0..frames {
            let src = &up_s[i * frame_bytes..(i + 1) * frame_bytes];
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
            let dst = unsafe {
                std::slice::from_raw_parts_mut(down_ptr.add(i * frame_bytes), frame_bytes)
            };
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
        unsafe { result::memcpy_htod_async(a_ptr, up_s, s1.cu_stream()) }.expect("h2d");
        let dst = unsafe { std::slice::from_raw_parts_mut(down_ptr, bulk_bytes) };
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
