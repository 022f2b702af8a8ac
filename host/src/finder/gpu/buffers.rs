//! Device and pinned host memory of the GPU finder: owned allocations that free themselves,
//! the device copy of the pedestal, and page-locking of the caller's frames.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{CudaContext, result};

use crate::error::{CudaContextExt, Error, Result};
use crate::pedestal::PixelMaps;

pub(crate) use crate::device_memory::{DeviceBuf, alloc_error};

/// Page-locked host memory of `len` values of `T`, freed on drop.
#[derive(Debug)]
pub(crate) struct PinnedBuf<T> {
    ptr: *mut T,
    len: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: the buffer is plain memory owned by this value; access follows Rust borrows.
unsafe impl<T: Send> Send for PinnedBuf<T> {}

impl<T: bytemuck::Pod> PinnedBuf<T> {
    /// Pinned memory for `what`; `write_combined` for buffers only the GPU reads (fast DMA,
    /// very slow host reads), plain for buffers the host reads.
    pub fn new(
        ctx: &Arc<CudaContext>,
        len: usize,
        write_combined: bool,
        what: &str,
    ) -> Result<Self> {
        ctx.bind_to_thread().cuda("binding the CUDA context")?;
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| Error::param("chunk", format!("{what}: size overflows")))?;
        let flags = if write_combined {
            sys::CU_MEMHOSTALLOC_WRITECOMBINED
        } else {
            0
        };
        // SAFETY: plain allocation; the pointer is owned by the returned value.
        let ptr = unsafe { result::malloc_host(bytes.max(1), flags) }
            .map_err(|e| alloc_error(e, &format!("pinned host memory for {what}"), bytes))?;
        // Touch every page now (memory from the driver is locked, so this costs no fault
        // later; it also makes the contents defined).
        // SAFETY: `bytes` bytes were just allocated.
        unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, bytes) };
        Ok(Self {
            ptr: ptr as *mut T,
            len,
            ctx: ctx.clone(),
        })
    }

    /// The contents (no DMA into them may be in flight).
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `len` initialised values owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The contents, mutable (no DMA may be in flight).
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: `len` initialised values owned by self, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Host address of element `i` for DMA.
    pub fn ptr_at(&self, i: usize) -> *mut T {
        assert!(i <= self.len);
        // SAFETY: in bounds (one past the end allowed).
        unsafe { self.ptr.add(i) }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }
}

impl<T> Drop for PinnedBuf<T> {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by `malloc_host`, freed once.
        let _ = unsafe { result::free_host(self.ptr as *mut c_void) };
    }
}

/// Whether `[ptr, ptr + bytes)` is page-locked memory the GPU can DMA from (checked at both
/// ends). Asks with `cuPointerGetAttributes`, which (unlike `cuPointerGetAttribute`) answers
/// "not CUDA memory" for pageable memory without raising an API error.
pub(crate) fn is_pinned(ptr: *const u8, bytes: usize) -> bool {
    let probe = |p: *const u8| {
        let mut kind: u32 = 0;
        let mut attr = [sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE];
        let mut data = [&mut kind as *mut u32 as *mut c_void];
        // SAFETY: a query writing one memory type into `kind`.
        let ok = unsafe {
            sys::cuPointerGetAttributes(1, attr.as_mut_ptr(), data.as_mut_ptr(), p as CUdeviceptr)
        }
        .result()
        .is_ok();
        ok && kind == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
    };
    bytes > 0 && probe(ptr) && probe(ptr.wrapping_add(bytes - 1))
}

/// The caller's memory page-locked for the length of one call; unregistered on drop (the
/// owner synchronises first).
pub(crate) struct Registration {
    ptr: *mut c_void,
    ctx: Arc<CudaContext>,
}

// SAFETY: the registration only names pages and a context; unregistering from another
// thread (with the context bound) is what the driver API allows.
unsafe impl Send for Registration {}

impl Registration {
    /// Page-locks the pages holding `[ptr, ptr + bytes)`, or `None` when the driver refuses.
    pub fn new(ctx: &Arc<CudaContext>, ptr: *const u8, bytes: usize) -> Option<Self> {
        ctx.bind_to_thread().ok()?;
        let page = 4096usize;
        let start = (ptr as usize) & !(page - 1);
        let end = (ptr as usize).checked_add(bytes)?.div_ceil(page) * page;
        let p = start as *mut c_void;
        for flags in [sys::CU_MEMHOSTREGISTER_READ_ONLY, 0] {
            // SAFETY: the pages are the caller's live allocation (borrowed for the call); the
            // driver only locks them and reads through DMA.
            if unsafe { sys::cuMemHostRegister_v2(p, end - start, flags) }
                .result()
                .is_ok()
            {
                return Some(Self {
                    ptr: p,
                    ctx: ctx.clone(),
                });
            }
        }
        None
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: registered by `new`, unregistered once.
        let _ = unsafe { sys::cuMemHostUnregister(self.ptr) };
    }
}

/// The device copy of a ready pedestal: `base`, the sums `a` then `b` in one buffer (so a
/// checkpoint is one copy), and the frozen std. Elements are `f64` or `f32`.
pub(crate) struct DeviceState {
    pub base: DeviceBuf,
    pub ab: DeviceBuf,
    pub frozen_std: DeviceBuf,
    pub pixels: usize,
    pub elem: usize,
}

impl DeviceState {
    /// Uploads `maps`.
    pub fn upload<R: bytemuck::Pod>(ctx: &Arc<CudaContext>, maps: &PixelMaps<R>) -> Result<Self> {
        let pixels = maps.a.len();
        let elem = size_of::<R>();
        let state = Self {
            base: DeviceBuf::new(ctx, pixels * elem, "the pedestal baselines")?,
            ab: DeviceBuf::new(ctx, 2 * pixels * elem, "the pedestal sums")?,
            frozen_std: DeviceBuf::new(ctx, pixels * elem, "the frozen pedestal std")?,
            pixels,
            elem,
        };
        state.fill(ctx, maps)?;
        Ok(state)
    }

    /// Whether `maps` has this state's size and element type, so [`DeviceState::refill`] can
    /// take it.
    pub fn fits<R: bytemuck::Pod>(&self, maps: &PixelMaps<R>) -> bool {
        self.pixels == maps.a.len() && self.elem == size_of::<R>()
    }

    /// Uploads `maps` into this state's buffers (it [`DeviceState::fits`]; else an internal
    /// error): a stream's next acquisition starts from the same pedestal without allocating
    /// (and freeing) device memory again. Nothing may be reading the state (the finder's
    /// calls end with the GPU idle).
    pub fn refill<R: bytemuck::Pod>(
        &mut self,
        ctx: &Arc<CudaContext>,
        maps: &PixelMaps<R>,
    ) -> Result<()> {
        if !self.fits(maps) {
            return Err(crate::error::Error::Internal(
                "a pedestal refilled into device buffers of another size".into(),
            ));
        }
        self.fill(ctx, maps)
    }

    /// Copies `maps` into the buffers and waits for the copies.
    fn fill<R: bytemuck::Pod>(&self, ctx: &Arc<CudaContext>, maps: &PixelMaps<R>) -> Result<()> {
        self.base.upload(&maps.base, "the pedestal baselines")?;
        let mut both = Vec::with_capacity(2 * self.pixels);
        both.extend_from_slice(&maps.a);
        both.extend_from_slice(&maps.b);
        self.ab.upload(&both, "the pedestal sums")?;
        self.frozen_std
            .upload(&maps.frozen_std, "the frozen pedestal std")?;
        // Copies from pageable memory may return before their DMA ends, and the finder's
        // streams do not wait for the legacy stream: wait here.
        ctx.synchronize().cuda("uploading the pedestal")
    }

    /// Downloads the sums into `maps` (the baselines and frozen std never change on the GPU).
    pub fn download<R: bytemuck::Pod>(&self, maps: &mut PixelMaps<R>) -> Result<()> {
        let mut both = vec![R::zeroed(); 2 * self.pixels];
        self.ab.download(&mut both, "the pedestal sums")?;
        maps.a.copy_from_slice(&both[..self.pixels]);
        maps.b.copy_from_slice(&both[self.pixels..]);
        Ok(())
    }

    /// Device address of the sums `a`.
    pub fn a(&self) -> u64 {
        self.ab.ptr()
    }

    /// Device address of the sums `b`.
    pub fn b(&self) -> u64 {
        self.ab.ptr() + (self.pixels * self.elem) as u64
    }
}
