//! Device and pinned host memory of the GPU finder: owned allocations that free themselves,
//! the device copy of the pedestal, and page-locking of the caller's frames: every range this
//! crate page-locks is listed, and an upload reads memory by DMA only under a hold on the
//! one listed range that covers it ([`lease`]), taken for the time the GPU may read it.

use std::ffi::c_void;
use std::ops::Range;
use std::sync::{Arc, Mutex, Weak};

use cluda_gpu::args::DevicePtr;
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, result};

use super::reals::{DeviceReal, RealBuf};
use crate::error::{CudaContextExt, Error, Result};
use crate::pedestal::PixelMaps;

pub(crate) use crate::device_memory::{DeviceBuf, alloc_error};

/// Page-locked host memory of `len` values of `T`, freed when the last holder lets go: the
/// buffer itself, or a call uploading from it ([`lease`]).
#[derive(Debug)]
pub(crate) struct PinnedBuf<T> {
    ptr: *mut T,
    len: usize,
    /// The allocation, freed when its last holder drops it.
    _lock: Lease,
}

// SAFETY: the buffer is plain memory owned by this value; host access follows Rust borrows,
// and DMA into or out of it is ordered by its owner (the pipeline synchronises before it reads
// or frees a buffer). A lease another holder takes on it (a call uploading from a
// `PinnedFrames`) only keeps it allocated; that call's uploads only read it.
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
        // SAFETY: plain allocation; the pointer is owned by the lease made right below.
        let ptr = unsafe { result::malloc_host(bytes.max(1), flags) }
            .map_err(|e| alloc_error(e, &format!("pinned host memory for {what}"), bytes))?;
        let lock = Lease::track(Locked {
            range: ptr as usize..ptr as usize + bytes.max(1),
            owner: ctx.cu_ctx() as usize,
            release: Release::Free(ctx.clone(), ptr),
        });
        // Touch every page now (memory from the driver is locked, so this costs no fault
        // later; it also makes the contents defined).
        // SAFETY: `bytes` bytes were just allocated.
        unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, bytes) };
        Ok(Self {
            ptr: ptr as *mut T,
            len,
            _lock: lock,
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

/// How a page-locked range is released once nothing holds it.
#[derive(Debug)]
enum Release {
    /// Registered with `cuMemHostRegister` at this (page) address: unregistered.
    Unregister(Arc<CudaContext>, *mut c_void),
    /// Allocated with `cuMemHostAlloc` at this address: freed.
    Free(Arc<CudaContext>, *mut c_void),
    /// Nothing to release: counts its releases (the bookkeeping's tests).
    #[cfg(test)]
    Count(Arc<std::sync::atomic::AtomicUsize>),
}

/// Host memory this crate page-locked (registered or allocated): a range, the context it is
/// page-locked for, and how it is released. Only such ranges count as page-locked for an
/// upload ([`lease`]), never memory that merely answers as page-locked: a neighbour's
/// registration can cover a range's two ends and be released while an upload that relied on
/// it is still queued, and a range registered page by page by several owners is not one
/// locked range.
#[derive(Debug)]
struct Locked {
    range: Range<usize>,
    /// The context's handle (`CUcontext`), as an address: a range is page-locked for the
    /// context that locked it (no `PORTABLE` flag).
    owner: usize,
    release: Release,
}

// SAFETY: the raw pointers in `Release` only name memory for the driver to release once;
// nothing dereferences them, and the driver API may be called from any thread (with the
// context bound, which `Drop` does).
unsafe impl Send for Locked {}
// SAFETY: as above: no method reads through the pointers; `&Locked` gives only the range.
unsafe impl Sync for Locked {}

/// Every live [`Locked`] range with its context, and a weak reference to it: looked up by
/// [`lease`]; each entry is removed by its range's own drop, before the range is released, so
/// no lookup finds a range being released.
type LockedList = Vec<(Range<usize>, usize, Weak<Locked>)>;

static LOCKED: Mutex<LockedList> = Mutex::new(Vec::new());

fn locked_ranges() -> std::sync::MutexGuard<'static, LockedList> {
    // The list stays consistent whatever panicked while it was held (each change is one push
    // or one retain).
    LOCKED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Drop for Locked {
    fn drop(&mut self) {
        // First out of the list (no hold is left, so a lookup's upgrade of it fails from
        // now on), then released.
        let me: *const Locked = self;
        locked_ranges().retain(|(_, _, w)| w.as_ptr() != me);
        match &self.release {
            Release::Unregister(ctx, p) => {
                let _ = ctx.bind_to_thread();
                // SAFETY: registered by `register`, unregistered once, here.
                let _ = unsafe { sys::cuMemHostUnregister(*p) };
            }
            Release::Free(ctx, p) => {
                let _ = ctx.bind_to_thread();
                // SAFETY: allocated by `malloc_host`, freed once, here.
                let _ = unsafe { result::free_host(*p) };
            }
            #[cfg(test)]
            Release::Count(n) => {
                n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }
}

/// A hold on page-locked memory this crate locked: the memory stays locked (and, for an
/// allocation, allocated) while any hold on it lives. The owner of the memory
/// ([`PinnedBuf`], the holder of a [`register`]ed range: [`crate::finder::gpu::LockedFrames`], a
/// mapped chunk's pin, a call) holds one; so does every call that uploads from it by DMA,
/// from the call's start until the GPU is done with its uploads.
#[derive(Clone, Debug)]
pub(crate) struct Lease(Arc<Locked>);

impl Lease {
    /// Holds `locked`, listing it for lookups.
    fn track(locked: Locked) -> Self {
        let (range, owner) = (locked.range.clone(), locked.owner);
        let lease = Lease(Arc::new(locked));
        locked_ranges().push((range, owner, Arc::downgrade(&lease.0)));
        lease
    }
}

/// A hold on the one page-locked range of this crate that covers all of `[ptr, ptr + bytes)`
/// for `ctx` (see [`Locked`]), or `None`: the memory must then be staged or registered for
/// the call. The hold keeps the range locked even if its owner lets go of it meanwhile.
pub(crate) fn lease(ctx: &CudaContext, ptr: *const u8, bytes: usize) -> Option<Lease> {
    lease_in(ctx.cu_ctx() as usize, ptr as usize, bytes)
}

fn lease_in(owner: usize, start: usize, bytes: usize) -> Option<Lease> {
    let end = start.checked_add(bytes)?;
    if bytes == 0 {
        return None;
    }
    let list = locked_ranges();
    // Only a covering entry is upgraded, and the first one that is live is returned: no
    // hold is dropped while the list is locked (a last hold's drop locks it).
    list.iter()
        .filter(|(r, o, _)| *o == owner && r.start <= start && end <= r.end)
        .find_map(|(_, _, w)| w.upgrade())
        .map(Lease)
}

/// Whether a listed range of `ctx` overlaps `[ptr, ptr + bytes)` (in part: when one covers it
/// all, [`lease`] gives a hold on it). The driver may take such memory for page-locked and
/// read it by DMA after the copy is queued, under a lock that no hold of the caller keeps.
pub(crate) fn locked_in_part(ctx: &CudaContext, ptr: *const u8, bytes: usize) -> bool {
    overlaps_in(ctx.cu_ctx() as usize, ptr as usize, bytes)
}

fn overlaps_in(owner: usize, start: usize, bytes: usize) -> bool {
    let end = start.saturating_add(bytes);
    locked_ranges()
        .iter()
        .any(|(r, o, w)| *o == owner && r.start < end && start < r.end && w.strong_count() > 0)
}

/// Page-locks the pages holding `[ptr, ptr + bytes)` (registers them with the driver) until
/// the last hold on the returned lease is dropped, or `None` when the driver refuses (e.g. a
/// page of them is registered already). The memory must stay mapped while the lease, or any
/// hold taken on it, lives.
pub(crate) fn register(ctx: &Arc<CudaContext>, ptr: *const u8, bytes: usize) -> Option<Lease> {
    ctx.bind_to_thread().ok()?;
    let page = 4096usize;
    let start = (ptr as usize) & !(page - 1);
    let end = (ptr as usize).checked_add(bytes)?.div_ceil(page) * page;
    let p = start as *mut c_void;
    for flags in [sys::CU_MEMHOSTREGISTER_READ_ONLY, 0] {
        // SAFETY: the pages are the caller's live memory (mapped while the lease lives, its
        // contract); the driver only locks them and reads them through DMA.
        if unsafe { sys::cuMemHostRegister_v2(p, end - start, flags) }
            .result()
            .is_ok()
        {
            return Some(Lease::track(Locked {
                range: start..end,
                owner: ctx.cu_ctx() as usize,
                release: Release::Unregister(ctx.clone(), p),
            }));
        }
    }
    None
}

/// The device copy of a ready pedestal: `base`, the sums `a` then `b` in one buffer (so a
/// checkpoint is one copy), and the frozen std, in the pedestal's real type.
#[derive(Debug)]
pub(crate) struct DeviceState {
    pub base: RealBuf,
    pub ab: RealBuf,
    pub frozen_std: RealBuf,
    pub pixels: usize,
}

impl DeviceState {
    /// Uploads `maps`.
    pub fn upload<R: DeviceReal>(ctx: &Arc<CudaContext>, maps: &PixelMaps<R>) -> Result<Self> {
        let pixels = maps.a.len();
        let state = Self {
            base: R::wrap(DeviceBuf::new(ctx, pixels, "the pedestal baselines")?),
            ab: R::wrap(DeviceBuf::new(ctx, 2 * pixels, "the pedestal sums")?),
            frozen_std: R::wrap(DeviceBuf::new(ctx, pixels, "the frozen pedestal std")?),
            pixels,
        };
        state.fill(ctx, maps)?;
        Ok(state)
    }

    /// Whether `maps` has this state's size and real type, so [`DeviceState::refill`] can
    /// take it.
    pub fn fits<R: DeviceReal>(&self, maps: &PixelMaps<R>) -> bool {
        self.pixels == maps.a.len() && R::view(&self.ab).is_some()
    }

    /// Uploads `maps` into this state's buffers (it [`DeviceState::fits`]; else an internal
    /// error): a stream's next acquisition starts from the same pedestal without allocating
    /// (and freeing) device memory again. Nothing may be reading the state (the finder's
    /// calls end with the GPU idle).
    pub fn refill<R: DeviceReal>(
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
    fn fill<R: DeviceReal>(&self, ctx: &Arc<CudaContext>, maps: &PixelMaps<R>) -> Result<()> {
        self.base
            .get::<R>()?
            .upload(&maps.base, "the pedestal baselines")?;
        let mut both = Vec::with_capacity(2 * self.pixels);
        both.extend_from_slice(&maps.a);
        both.extend_from_slice(&maps.b);
        self.ab.get::<R>()?.upload(&both, "the pedestal sums")?;
        self.frozen_std
            .get::<R>()?
            .upload(&maps.frozen_std, "the frozen pedestal std")?;
        // Copies from pageable memory may return before their DMA ends, and the finder's
        // streams do not wait for the legacy stream: wait here.
        ctx.synchronize().cuda("uploading the pedestal")
    }

    /// Downloads the sums into `maps` (the baselines and frozen std never change on the GPU).
    pub fn download<R: DeviceReal>(&self, maps: &mut PixelMaps<R>) -> Result<()> {
        let mut both = vec![R::zeroed(); 2 * self.pixels];
        self.ab
            .get::<R>()?
            .download(&mut both, "the pedestal sums")?;
        maps.a.copy_from_slice(&both[..self.pixels]);
        maps.b.copy_from_slice(&both[self.pixels..]);
        Ok(())
    }

    /// The sums `a`, as the kernels of real type `R` take them.
    pub fn a<R: DeviceReal>(&self) -> Result<DevicePtr<R>> {
        Ok(self.ab.get::<R>()?.ptr())
    }

    /// The sums `b`, as the kernels of real type `R` take them.
    pub fn b<R: DeviceReal>(&self) -> Result<DevicePtr<R>> {
        Ok(self.ab.get::<R>()?.at(self.pixels))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A made-up context handle (real ones are heap addresses, never this small), so these
    /// entries are never found for a real context's lookups, and neither test finds the
    /// other's (each uses its own).
    const CTX_A: usize = 0x10;
    const CTX_B: usize = 0x20;
    const CTX_C: usize = 0x30;
    const PAGE: usize = 4096;

    /// A listed range that only counts its releases (no memory behind it: never read).
    fn fake(owner: usize, range: Range<usize>) -> (Lease, Arc<AtomicUsize>) {
        let released = Arc::new(AtomicUsize::new(0));
        let lease = Lease::track(Locked {
            range,
            owner,
            release: Release::Count(released.clone()),
        });
        (lease, released)
    }

    /// Issue 32 item 12: 400x400 frames (320,000 bytes), 256-frame chunks (exactly 20,000
    /// pages) that start 128 bytes into a page. Chunk k's registration covers the first page
    /// of chunk k+1, whose own registration then fails; chunk k+2's covers its last page.
    /// Chunk k+1's two ends answer as page-locked, but no one range covers it: it gets no
    /// hold (it is staged), while chunks k and k+2 get theirs.
    #[test]
    fn a_chunk_between_two_neighbours_registrations_is_not_page_locked() {
        let chunk = 256 * 400 * 400 * 2;
        assert_eq!(chunk % PAGE, 0);
        let base = 0x7f00_0000_0000usize;
        let start = |k: usize| base + 128 + k * chunk;
        let pages = |k: usize| (start(k) & !(PAGE - 1))..(start(k) + chunk).div_ceil(PAGE) * PAGE;
        let (k0, _) = fake(CTX_A, pages(0));
        let (k2, _) = fake(CTX_A, pages(2));
        // The neighbours' ranges overlap chunk 1's first and last pages.
        assert!(pages(0).contains(&start(1)));
        assert!(pages(2).contains(&(start(1) + chunk - 1)));
        assert!(lease_in(CTX_A, start(1), chunk).is_none());
        assert!(lease_in(CTX_A, start(0), chunk).is_some());
        assert!(lease_in(CTX_A, start(2), chunk).is_some());
        // A part of a range is covered; one byte past its end is not.
        assert!(lease_in(CTX_A, start(1), 100).is_some());
        assert!(lease_in(CTX_A, pages(0).end - 8, 9).is_none());
        // Locked in part: not read straight from pageable memory either.
        assert!(overlaps_in(CTX_A, start(1), chunk));
        assert!(!overlaps_in(CTX_A, pages(2).end, chunk));
        drop((k0, k2));
        assert!(!overlaps_in(CTX_A, start(1), chunk), "released");
    }

    /// A call's hold keeps a range locked after its owner lets go (the release comes with
    /// the last hold); a released range is no longer found, and a new range at the same
    /// addresses is found afresh.
    #[test]
    fn a_hold_defers_the_release_and_released_ranges_are_forgotten() {
        let range = 0x7e00_0000_0000usize..0x7e00_0010_0000;
        let (owner, released) = fake(CTX_B, range.clone());
        let call = lease_in(CTX_B, range.start + 64, 4096).expect("covered");
        drop(owner);
        assert_eq!(released.load(Ordering::SeqCst), 0, "held by the call");
        let again = lease_in(CTX_B, range.start, 8).expect("still listed while held");
        drop(call);
        assert_eq!(released.load(Ordering::SeqCst), 0);
        drop(again);
        assert_eq!(
            released.load(Ordering::SeqCst),
            1,
            "released with the last hold"
        );
        assert!(lease_in(CTX_B, range.start, 8).is_none());
        let (fresh, released_fresh) = fake(CTX_B, range.clone());
        let held = lease_in(CTX_B, range.start, 8).expect("the new range");
        drop((fresh, held));
        assert_eq!(released_fresh.load(Ordering::SeqCst), 1);
        assert_eq!(released.load(Ordering::SeqCst), 1, "released once");
    }

    /// Another context's range, an empty range and one that wraps the address space get no
    /// hold.
    #[test]
    fn other_contexts_empty_and_wrapping_ranges_get_no_hold() {
        let range = 0x7d00_0000_0000usize..0x7d00_0000_2000;
        let (owner, _) = fake(CTX_C, range.clone());
        assert!(lease_in(CTX_C, range.start, 16).is_some());
        assert!(lease_in(CTX_C + 1, range.start, 16).is_none());
        assert!(lease_in(CTX_C, range.start, 0).is_none());
        assert!(lease_in(CTX_C, usize::MAX - 4, 16).is_none());
        drop(owner);
    }
}
