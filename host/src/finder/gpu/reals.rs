//! The finder's real type on the device, chosen at run time by the precision (`f64`, or
//! `f32` for both f32 precisions): [`RealBuf`], a device buffer of either ([`RealAlloc`]
//! allocates them in a precision's type), and [`DeviceReal`],
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

/// Implements [`DeviceReal`] for `$t`, the type of the variant `$v`.
macro_rules! device_real {
    ($t:ident, $v:ident, $f64:literal) => {
        impl DeviceReal for $t {
            const F64: bool = $f64;

            fn view(buf: &RealBuf) -> Option<&DeviceBuf<$t>> {
                match buf {
                    RealBuf::$v(b) => Some(b),
                    _ => None,
                }
            }

            fn wrap(buf: DeviceBuf<$t>) -> RealBuf {
                RealBuf::$v(buf)
            }
        }
    };
}

device_real!(f64, F64, true);
device_real!(f32, F32, false);

/// Allocates device values in the real type of one precision.
#[derive(Clone, Debug)]
pub(crate) struct RealAlloc {
    ctx: Arc<CudaContext>,
    precision: Precision,
}

/// `DeviceBuf::$alloc(ctx, len, what)` in the real type of `$a`'s precision.
macro_rules! alloc_in {
    ($a:expr, $alloc:ident, $len:expr, $what:expr) => {
        Ok(match $a.precision {
            Precision::F64 => RealBuf::F64(DeviceBuf::$alloc(&$a.ctx, $len, $what)?),
            Precision::F32 | Precision::F32Naive => {
                RealBuf::F32(DeviceBuf::$alloc(&$a.ctx, $len, $what)?)
            }
        })
    };
}

impl RealAlloc {
    /// Allocations on `ctx` in `precision`'s real type (`f64`, or `f32` for both f32
    /// precisions).
    pub fn new(ctx: &Arc<CudaContext>, precision: Precision) -> Self {
        Self {
            ctx: ctx.clone(),
            precision,
        }
    }

    /// `len` uninitialised values for `what` ([`DeviceBuf::new`]).
    pub fn uninit(&self, len: usize, what: &str) -> Result<RealBuf> {
        alloc_in!(self, new, len, what)
    }

    /// `len` zeroed values for `what` ([`DeviceBuf::zeroed`]).
    pub fn zeroed(&self, len: usize, what: &str) -> Result<RealBuf> {
        alloc_in!(self, zeroed, len, what)
    }
}

impl RealBuf {
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
