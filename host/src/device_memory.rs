//! Device memory of the GPU finder and the GPU matcher: [`DeviceBuf<T>`], one owned allocation
//! of `len` values of `T` that frees itself and hands kernels its address as a typed pointer.
//!
//! Written over the driver calls rather than cudarc's `CudaSlice` because kernels get their
//! buffers' addresses through `#[repr(C)]` argument structs (`cluda_gpu::args`), not through
//! cudarc's launch builder, and the finder needs plain synchronous allocations that no stream
//! owns; the matcher's buffers are allocated and freed in its stream's order as cudarc's are
//! ([`DeviceBuf::on_stream`]). Unlike `CudaSlice`, a `DeviceBuf` records no events: code that
//! uses one buffer on two streams orders them itself (the matcher's V3 does, with events).

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use cluda_gpu::args::DevicePtr;
use cudarc::driver::sys::{self, CUdeviceptr, cudaError_enum};
use cudarc::driver::{CudaContext, CudaStream, DriverError, result};

use crate::error::{CudaContextExt, Error, Result};

/// Turns an allocation failure into [`Error::OutOfDeviceMemory`] when the driver says so.
pub(crate) fn alloc_error(e: DriverError, what: &str, bytes: usize) -> Error {
    if e.0 == cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
        Error::OutOfDeviceMemory {
            what: what.to_string(),
            bytes,
        }
    } else {
        Error::Cuda {
            context: format!("allocating {bytes} bytes for {what}"),
            source: Box::new(e),
        }
    }
}

/// `len` values of `T` in device memory, freed on drop: synchronously ([`DeviceBuf::new`];
/// the owner synchronises before dropping buffers in use) or in the order of the stream it
/// was allocated on ([`DeviceBuf::on_stream`]). Kernels get its address as a typed pointer
/// ([`DeviceBuf::ptr`], [`DeviceBuf::at`]), so an argument struct's field takes only a buffer
/// of its element type.
#[derive(Debug)]
pub(crate) struct DeviceBuf<T> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: Arc<CudaContext>,
    /// The stream whose order the buffer was allocated in and is freed in (`None`: freed
    /// synchronously), and whether that allocation was stream-ordered (`cuMemAllocAsync`).
    stream: Option<(Arc<CudaStream>, bool)>,
    _values: PhantomData<T>,
}

/// Bytes of `len` values of `T`, or an error naming `what` when that overflows.
fn bytes_of<T>(len: usize, what: &str) -> Result<usize> {
    len.checked_mul(size_of::<T>()).ok_or_else(|| {
        Error::param(
            "size",
            format!("{what}: {len} values overflow the address space"),
        )
    })
}

impl<T: bytemuck::Pod> DeviceBuf<T> {
    /// `len` uninitialised values for `what`.
    pub fn new(ctx: &Arc<CudaContext>, len: usize, what: &str) -> Result<Self> {
        let bytes = bytes_of::<T>(len, what)?;
        ctx.bind_to_thread().cuda("binding the CUDA context")?;
        // SAFETY: plain allocation; the pointer is owned by the returned value.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }
            .map_err(|e| alloc_error(e, what, bytes))?;
        Ok(Self {
            ptr,
            len,
            ctx: ctx.clone(),
            stream: None,
            _values: PhantomData,
        })
    }

    /// `len` zeroed values for `what`.
    pub fn zeroed(ctx: &Arc<CudaContext>, len: usize, what: &str) -> Result<Self> {
        let buf = Self::new(ctx, len, what)?;
        // SAFETY: the range is this allocation.
        unsafe { sys::cuMemsetD8_v2(buf.ptr, 0, buf.bytes()) }
            .result()
            .cuda(&format!("zeroing {what}"))?;
        Ok(buf)
    }

    /// `len` uninitialised values for `what`, allocated in `stream`'s order
    /// (`cuMemAllocAsync` where the device has memory pools, as cudarc's `CudaStream::alloc`)
    /// and freed in its order when dropped: usable by work queued on `stream` after this call
    /// (work on another stream must wait for `stream` first).
    pub fn on_stream(stream: &Arc<CudaStream>, len: usize, what: &str) -> Result<Self> {
        let bytes = bytes_of::<T>(len, what)?;
        let ctx = stream.context();
        ctx.bind_to_thread().cuda("binding the CUDA context")?;
        let pools = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)
            .cuda("querying memory-pool support")?
            > 0;
        // SAFETY: plain allocation (in the stream's order); the pointer is owned by the
        // returned value.
        let ptr = unsafe {
            if pools {
                result::malloc_async(stream.cu_stream(), bytes.max(1))
            } else {
                result::malloc_sync(bytes.max(1))
            }
        }
        .map_err(|e| alloc_error(e, what, bytes))?;
        Ok(Self {
            ptr,
            len,
            ctx: ctx.clone(),
            stream: Some((stream.clone(), pools)),
            _values: PhantomData,
        })
    }

    /// As [`DeviceBuf::on_stream`], set to zero in `stream`'s order.
    pub fn zeroed_on_stream(stream: &Arc<CudaStream>, len: usize, what: &str) -> Result<Self> {
        let buf = Self::on_stream(stream, len, what)?;
        buf.zero_async(0..len, stream)
            .cuda(&format!("zeroing {what}"))?;
        Ok(buf)
    }

    /// A new buffer on `stream` ([`DeviceBuf::on_stream`]) holding `data`, copied in
    /// `stream`'s order; returns once the copy is done (as cudarc's `clone_htod` from host
    /// memory), so `data` may change afterwards.
    pub fn upload_on(stream: &Arc<CudaStream>, data: &[T], what: &str) -> Result<Self> {
        let buf = Self::on_stream(stream, data.len(), what)?;
        // SAFETY: `data` stays borrowed until the stream is synchronised below.
        unsafe { buf.upload_async(0, data, stream) }.cuda(&format!("uploading {what}"))?;
        stream.synchronize().cuda(&format!("uploading {what}"))?;
        Ok(buf)
    }

    /// The address of the first value, as a kernel's pointer parameter.
    pub fn ptr(&self) -> DevicePtr<T> {
        DevicePtr::new(self.ptr)
    }

    /// The address of value `i` (`i == len`: one past the end), as a kernel's pointer
    /// parameter.
    pub fn at(&self, i: usize) -> DevicePtr<T> {
        assert!(
            i <= self.len,
            "value {i} of a device buffer of {}",
            self.len
        );
        self.ptr().add(i)
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// The device range of values `range`, as the driver takes it (address, bytes).
    fn range(&self, range: Range<usize>) -> (CUdeviceptr, usize) {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "values {range:?} of a device buffer of {}",
            self.len
        );
        (self.at(range.start).addr(), range.len() * size_of::<T>())
    }

    /// Synchronous upload of `data` to the start of the buffer.
    pub fn upload(&self, data: &[T], what: &str) -> Result<()> {
        let (dst, bytes) = self.range(0..data.len());
        // SAFETY: the destination range lies inside this allocation.
        unsafe { sys::cuMemcpyHtoD_v2(dst, data.as_ptr() as *const c_void, bytes) }
            .result()
            .cuda(&format!("uploading {what}"))
    }

    /// Synchronous download of the start of the buffer into `out`.
    pub fn download(&self, out: &mut [T], what: &str) -> Result<()> {
        let (src, bytes) = self.range(0..out.len());
        // SAFETY: the source range lies inside this allocation.
        unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr() as *mut c_void, src, bytes) }
            .result()
            .cuda(&format!("downloading {what}"))
    }

    /// The first `out.len()` values of the buffer, copied in `stream`'s order (after the work
    /// queued on it before); returns once they are in `out`.
    pub fn download_on(&self, stream: &Arc<CudaStream>, out: &mut [T], what: &str) -> Result<()> {
        let (src, _) = self.range(0..out.len());
        // SAFETY: the source range lies inside this allocation; `out` stays borrowed until
        // the stream is synchronised below.
        unsafe { result::memcpy_dtoh_async(out, src, stream.cu_stream()) }
            .cuda(&format!("downloading {what}"))?;
        stream.synchronize().cuda(&format!("downloading {what}"))
    }

    /// Queues setting values `range` to zero on `stream` (32-bit stores when the range allows,
    /// as `cuMemsetD32Async`).
    pub fn zero_async(
        &self,
        range: Range<usize>,
        stream: &CudaStream,
    ) -> std::result::Result<(), DriverError> {
        let (dst, bytes) = self.range(range);
        let s = stream.cu_stream();
        // SAFETY: the range lies inside this allocation; the caller orders its users on
        // `stream`.
        unsafe {
            if bytes % 4 == 0 && dst % 4 == 0 {
                sys::cuMemsetD32Async(dst, 0, bytes / 4, s).result()
            } else {
                result::memset_d8_async(dst, 0, bytes, s)
            }
        }
    }

    /// Queues a copy of all of `src` (`what`, in errors) to the start of this buffer on
    /// `stream`.
    pub fn copy_from_async(
        &self,
        src: &DeviceBuf<T>,
        stream: &CudaStream,
        what: &str,
    ) -> Result<()> {
        let (dst, bytes) = self.range(0..src.len);
        // SAFETY: both ranges lie inside live allocations; the caller orders their users on
        // `stream`.
        unsafe { result::memcpy_dtod_async(dst, src.ptr, bytes, stream.cu_stream()) }
            .cuda(&format!("copying {what} on the device"))
    }

    /// Queues a copy of `src` into the buffer from value `at` on, on `stream`.
    ///
    /// # Safety
    ///
    /// `src` must stay valid, unchanged and (for a copy by DMA) page-locked until the copy is
    /// done, beyond the borrow.
    pub unsafe fn upload_async(
        &self,
        at: usize,
        src: &[T],
        stream: &CudaStream,
    ) -> std::result::Result<(), DriverError> {
        let (dst, _) = self.range(at..at + src.len());
        // SAFETY: the destination lies inside this allocation, the source as the caller
        // promises.
        unsafe { result::memcpy_htod_async(dst, src, stream.cu_stream()) }
    }

    /// Queues a copy of values `from .. from + count` into host memory at `dst`, on `stream`.
    ///
    /// # Safety
    ///
    /// `dst` must have room for `count` values and stay valid (and, for a copy by DMA,
    /// page-locked) and otherwise unused until the copy is done.
    pub unsafe fn download_async(
        &self,
        from: usize,
        dst: *mut T,
        count: usize,
        stream: &CudaStream,
    ) -> std::result::Result<(), DriverError> {
        let (src, bytes) = self.range(from..from + count);
        // SAFETY: the source lies inside this allocation, the destination as the caller
        // promises.
        unsafe { sys::cuMemcpyDtoHAsync_v2(dst as *mut c_void, src, bytes, stream.cu_stream()) }
            .result()
    }
}

impl<T> Drop for DeviceBuf<T> {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        match &self.stream {
            Some((stream, true)) => {
                // SAFETY: allocated by `malloc_async` on this stream, freed once in its order.
                let _ = unsafe { result::free_async(self.ptr, stream.cu_stream()) };
            }
            Some((stream, false)) => {
                // Work queued on the stream may still use it.
                let _ = stream.synchronize();
                // SAFETY: allocated by `malloc_sync`, freed once, nothing queued uses it.
                let _ = unsafe { result::free_sync(self.ptr) };
            }
            None => {
                // SAFETY: allocated by `malloc_sync`, freed once (the owner synchronised).
                let _ = unsafe { result::free_sync(self.ptr) };
            }
        }
    }
}
