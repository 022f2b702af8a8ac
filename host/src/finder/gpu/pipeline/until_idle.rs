//! Holding what queued GPU work may still use until the GPU is idle.

use std::sync::Arc;

use cudarc::driver::CudaContext;

use crate::error::{CudaContextExt, Result};

/// A value that queued GPU work may still use (host memory it reads or writes, or the hold
/// that keeps such memory page-locked), released only once the context has no work left:
/// [`UntilIdle::wait`] on the normal path (the wait every call ends with anyway); on any
/// other way out, an early return or an unwind (a panicking visitor), the drop waits for the
/// GPU first. Locals drop in reverse order, but this owns its value, so no ordering of
/// declarations is involved. When the GPU cannot be waited for (a failed context), the value
/// is leaked rather than released under work that might still run.
pub(crate) struct UntilIdle<T> {
    ctx: Arc<CudaContext>,
    /// `Some` until [`UntilIdle::wait`] or the drop takes it.
    value: Option<T>,
}

impl<T> UntilIdle<T> {
    /// Holds `value` until `ctx` is idle.
    pub fn new(ctx: &Arc<CudaContext>, value: T) -> Self {
        Self {
            ctx: ctx.clone(),
            value: Some(value),
        }
    }

    /// The value, to use while the GPU may still use it too.
    pub fn get_mut(&mut self) -> &mut T {
        match &mut self.value {
            Some(v) => v,
            // Taken only by `wait` (which consumes self) and the drop.
            None => unreachable!("an UntilIdle's value is taken only when it goes"),
        }
    }

    /// Waits for the GPU, then gives the value back; `None` (the value leaked) when the wait
    /// failed.
    pub fn wait(mut self) -> (Result<()>, Option<T>) {
        let idle = self.ctx.synchronize().cuda("waiting for the GPU");
        let value = self.value.take();
        match idle {
            Ok(()) => (Ok(()), value),
            Err(e) => {
                std::mem::forget(value);
                (Err(e), None)
            }
        }
    }
}

impl<T> Drop for UntilIdle<T> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take()
            && self.ctx.synchronize().is_err()
        {
            std::mem::forget(value);
        }
    }
}
