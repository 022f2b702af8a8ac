//! Device memory of the GPU finder and the GPU matcher: [`DeviceBuf`], one owned allocation
//! that frees itself and hands kernels its address as a typed pointer.
//!
//! Written over the driver calls rather than cudarc's `CudaSlice` because kernels get their
//! buffers' addresses through `#[repr(C)]` argument structs (`cluda_gpu::args`), not through
//! cudarc's launch builder, and the finder needs plain synchronous allocations that no stream
//! owns; the matcher's buffers are allocated and freed in its stream's order as cudarc's are
//! ([`DeviceBuf::on_stream`]). Unlike `CudaSlice`, a `DeviceBuf` records no events: code that
//! uses one buffer on two streams orders them itself (the matcher's V3 does, with events).

use std::ffi::c_void;
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

/// Device memory, freed on drop: synchronously ([`DeviceBuf::new`]; the owner synchronises
/// before dropping buffers in use) or in the order of the stream it was allocated on
/// ([`DeviceBuf::on_stream`]).
#[derive(Debug)]
pub(crate) struct DeviceBuf {
    ptr: CUdeviceptr,
    bytes: usize,
    ctx: Arc<CudaContext>,
    /// The stream whose order the buffer was allocated in and is freed in (`None`: freed
    /// synchronously), and whether that allocation was stream-ordered (`cuMemAllocAsync`).
    stream: Option<(Arc<CudaStream>, bool)>,
}

impl DeviceBuf {
    /// `bytes` of uninitialised device memory for `what`.
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize, what: &str) -> Result<Self> {
        ctx.bind_to_thread().cuda("binding the CUDA context")?;
        // SAFETY: plain allocation; the pointer is owned by the returned value.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }
            .map_err(|e| alloc_error(e, what, bytes))?;
        Ok(Self {
            ptr,
            bytes,
            ctx: ctx.clone(),
            stream: None,
        })
    }

    /// `bytes` of zeroed device memory for `what`.
    pub fn zeroed(ctx: &Arc<CudaContext>, bytes: usize, what: &str) -> Result<Self> {
        let buf = Self::new(ctx, bytes, what)?;
        // SAFETY: the range is this allocation.
        unsafe { sys::cuMemsetD8_v2(buf.ptr, 0, bytes) }
            .result()
            .cuda(&format!("zeroing {what}"))?;
        Ok(buf)
    }

    /// `bytes` of uninitialised device memory for `what`, allocated in `stream`'s order
    /// (`cuMemAllocAsync` where the device has memory pools, as cudarc's `CudaStream::alloc`)
    /// and freed in its order when dropped: usable by work queued on `stream` after this call
    /// (work on another stream must wait for `stream` first).
    pub fn on_stream(stream: &Arc<CudaStream>, bytes: usize, what: &str) -> Result<Self> {
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
            bytes,
            ctx: ctx.clone(),
            stream: Some((stream.clone(), pools)),
        })
    }

    /// As [`DeviceBuf::on_stream`], set to zero in `stream`'s order.
    pub fn zeroed_on_stream(stream: &Arc<CudaStream>, bytes: usize, what: &str) -> Result<Self> {
        let buf = Self::on_stream(stream, bytes, what)?;
        // SAFETY: the range is this allocation, usable on `stream`.
        unsafe { result::memset_d8_async(buf.ptr, 0, bytes, stream.cu_stream()) }
            .cuda(&format!("zeroing {what}"))?;
        Ok(buf)
    }

    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The device address as a kernel's pointer parameter to `T` values.
    pub fn at<T>(&self) -> DevicePtr<T> {
        DevicePtr::new(self.ptr)
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Synchronous upload of `data` to the start of the buffer.
    pub fn upload<T: bytemuck::Pod>(&self, data: &[T], what: &str) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        assert!(bytes.len() <= self.bytes, "upload larger than its buffer");
        // SAFETY: the destination range lies inside this allocation.
        unsafe { sys::cuMemcpyHtoD_v2(self.ptr, bytes.as_ptr() as *const c_void, bytes.len()) }
            .result()
            .cuda(&format!("uploading {what}"))
    }

    /// Synchronous download of the start of the buffer into `out`.
    pub fn download<T: bytemuck::Pod>(&self, out: &mut [T], what: &str) -> Result<()> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        assert!(bytes.len() <= self.bytes, "download larger than its buffer");
        // SAFETY: the source range lies inside this allocation.
        unsafe { sys::cuMemcpyDtoH_v2(bytes.as_mut_ptr() as *mut c_void, self.ptr, bytes.len()) }
            .result()
            .cuda(&format!("downloading {what}"))
    }

    /// A new buffer on `stream` ([`DeviceBuf::on_stream`]) holding `data`, copied in
    /// `stream`'s order; returns once the copy is done (as cudarc's `clone_htod` from host
    /// memory), so `data` may change afterwards.
    pub fn upload_on<T: bytemuck::Pod>(
        stream: &Arc<CudaStream>,
        data: &[T],
        what: &str,
    ) -> Result<Self> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let buf = Self::on_stream(stream, bytes.len(), what)?;
        // SAFETY: the destination is this allocation (at least `bytes.len()` bytes), usable
        // on `stream`; `bytes` stays borrowed until the stream is synchronised below.
        unsafe { result::memcpy_htod_async(buf.ptr, bytes, stream.cu_stream()) }
            .cuda(&format!("uploading {what}"))?;
        stream.synchronize().cuda(&format!("uploading {what}"))?;
        Ok(buf)
    }

    /// The first `out.len()` values of the buffer, copied in `stream`'s order (after the work
    /// queued on it before); returns once they are in `out`.
    pub fn download_on<T: bytemuck::Pod>(
        &self,
        stream: &Arc<CudaStream>,
        out: &mut [T],
        what: &str,
    ) -> Result<()> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        assert!(bytes.len() <= self.bytes, "download larger than its buffer");
        // SAFETY: the source range lies inside this allocation; `bytes` stays borrowed until
        // the stream is synchronised below.
        unsafe { result::memcpy_dtoh_async(bytes, self.ptr, stream.cu_stream()) }
            .cuda(&format!("downloading {what}"))?;
        stream.synchronize().cuda(&format!("downloading {what}"))
    }
}

impl Drop for DeviceBuf {
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
