//! The finder's real type on the device, chosen at run time by the precision (`f64`, or
//! `f32` for both f32 precisions): [`RealBuf`], a device buffer of either, and [`DeviceReal`],
//! which hands code generic over the real type (a launch filling `PrepareArgs<R>` and the
//! like) the buffer of its own type, so a kernel of one precision is never handed values of
//! the other.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use crate::config::Precision;
use crate::device_memory::DeviceBuf;
use crate::error::{Error, Result};

/// Device values in the finder's real type.
#[derive(Debug)]
pub(crate) enum RealBuf {
    /// `f64` values.
    F64(DeviceBuf<f64>),
    /// `f32` values.
    F32(DeviceBuf<f32>),
}

/// A real type the finder's kernels compute in (`f64`, `f32`).
pub(crate) trait DeviceReal: bytemuck::Pod {
    /// `f64` (else `f32`): which kernels of a family (`cluda_gpu::args::names`).
    const F64: bool;

    /// `buf`'s values when they are of this type.
    fn view(buf: &RealBuf) -> Option<&DeviceBuf<Self>>;

    /// `buf` as a [`RealBuf`].
    fn wrap(buf: DeviceBuf<Self>) -> RealBuf;
}

impl DeviceReal for f64 {
    const F64: bool = true;

    fn view(buf: &RealBuf) -> Option<&DeviceBuf<f64>> {
        match buf {
            RealBuf::F64(b) => Some(b),
            RealBuf::F32(_) => None,
        }
    }

    fn wrap(buf: DeviceBuf<f64>) -> RealBuf {
        RealBuf::F64(buf)
    }
}

impl DeviceReal for f32 {
    const F64: bool = false;

    fn view(buf: &RealBuf) -> Option<&DeviceBuf<f32>> {
        match buf {
            RealBuf::F32(b) => Some(b),
            RealBuf::F64(_) => None,
        }
    }

    fn wrap(buf: DeviceBuf<f32>) -> RealBuf {
        RealBuf::F32(buf)
    }
}

impl RealBuf {
    /// `len` uninitialised values of `precision`'s real type, for `what`
    /// ([`DeviceBuf::new`]).
    pub fn new(
        ctx: &Arc<CudaContext>,
        precision: Precision,
        len: usize,
        what: &str,
    ) -> Result<Self> {
        Ok(match precision {
            Precision::F64 => Self::F64(DeviceBuf::new(ctx, len, what)?),
            Precision::F32 | Precision::F32Naive => Self::F32(DeviceBuf::new(ctx, len, what)?),
        })
    }

    /// `len` zeroed values of `precision`'s real type, for `what` ([`DeviceBuf::zeroed`]).
    pub fn zeroed(
        ctx: &Arc<CudaContext>,
        precision: Precision,
        len: usize,
        what: &str,
    ) -> Result<Self> {
        Ok(match precision {
            Precision::F64 => Self::F64(DeviceBuf::zeroed(ctx, len, what)?),
            Precision::F32 | Precision::F32Naive => Self::F32(DeviceBuf::zeroed(ctx, len, what)?),
        })
    }

    /// Uninitialised values for `what`, as many and of the same type as `self`'s.
    pub fn new_like(&self, ctx: &Arc<CudaContext>, what: &str) -> Result<Self> {
        Ok(match self {
            Self::F64(b) => Self::F64(DeviceBuf::new(ctx, b.len(), what)?),
            Self::F32(b) => Self::F32(DeviceBuf::new(ctx, b.len(), what)?),
        })
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Self::F64(b) => b.len(),
            Self::F32(b) => b.len(),
        }
    }

    /// The values as `R`, or an internal error when they are of the other real type (a
    /// launch of the other precision's kernels).
    pub fn get<R: DeviceReal>(&self) -> Result<&DeviceBuf<R>> {
        R::view(self).ok_or_else(|| {
            Error::Internal("device values of one precision handed to the other's kernels".into())
        })
    }

    /// Queues a copy of all of `src` (the same real type; `what`, in errors) to the start of
    /// `self` on `stream`.
    pub fn copy_from_async(&self, src: &RealBuf, stream: &CudaStream, what: &str) -> Result<()> {
        match (self, src) {
            (Self::F64(d), Self::F64(s)) => d.copy_from_async(s, stream, what),
            (Self::F32(d), Self::F32(s)) => d.copy_from_async(s, stream, what),
            _ => Err(Error::Internal(
                "a device copy between values of two precisions".into(),
            )),
        }
    }
}
