//! Access to the CUDA device: driver detection, the context, and the embedded PTX module.
//!
//! cudarc loads `libcuda` at run time, so cluda builds and runs its CPU paths on machines with
//! no CUDA at all; everything GPU-related starts here and turns "no driver" or "no device" into
//! [`Error::NoGpu`] instead of cudarc's panic.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::error::{CudaContextExt, Error, Result};

/// The PTX of all cluda kernels, compiled from `gpu/` by `build.rs`.
pub const PTX: &str = include_str!(env!("CLUDA_PTX_PATH"));

/// Whether a CUDA driver library can be loaded on this machine (says nothing about devices).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library; no CUDA call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether a CUDA driver is present and reports at least one device.
pub fn gpu_available() -> bool {
    driver_present() && CudaContext::device_count().map(|n| n > 0).unwrap_or(false)
}

/// A CUDA context on one device, loading cluda's kernels as they are asked for.
///
/// Each kernel is loaded as a module of its own, cut from the PTX text on first use
/// (`ptx_split`), so that the driver JIT-compiles only the kernels a run launches instead of
/// every kernel of every precision and size.
#[derive(Clone, Debug)]
pub struct Device {
    ctx: Arc<CudaContext>,
    ptx: Arc<str>,
    modules: Arc<Mutex<HashMap<String, Arc<CudaModule>>>>,
}

impl Device {
    /// Opens device `ordinal` and loads the embedded PTX.
    pub fn open(ordinal: usize) -> Result<Self> {
        Self::open_with_ptx(ordinal, PTX)
    }

    /// Opens device `ordinal` and loads `ptx` instead of the embedded module (tests use it to
    /// check that a module the driver rejects gives [`Error::PtxLoad`]).
    pub fn open_with_ptx(ordinal: usize, ptx: &str) -> Result<Self> {
        if !driver_present() {
            return Err(Error::NoGpu(
                "the CUDA driver library (libcuda) is not installed".into(),
            ));
        }
        // A driver without a usable device (none installed, insufficient driver, no
        // permission) fails already here: that is "no GPU", not an internal CUDA error.
        let count = CudaContext::device_count()
            .map_err(|e| Error::NoGpu(format!("the CUDA driver reports no usable device ({e})")))?;
        if count <= 0 {
            return Err(Error::NoGpu("the CUDA driver reports no device".into()));
        }
        if ordinal >= count as usize {
            return Err(Error::NoGpu(format!(
                "device {ordinal} requested but the driver reports {count} device(s)"
            )));
        }
        let ctx = CudaContext::new(ordinal).cuda("creating the CUDA context")?;
        if !ptx.contains(".entry ") {
            // Not a kernel module at all: load it whole, so the driver's own error names
            // what is wrong with it.
            ctx.load_module(Ptx::from_src(ptx))
                .map_err(|source| Error::PtxLoad {
                    what: "cluda's PTX module".into(),
                    source: Box::new(source),
                })?;
        }
        Ok(Self {
            ctx,
            ptx: Arc::from(ptx),
            modules: Arc::default(),
        })
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The kernel `name`, its module loaded (JIT-compiled by the driver) on first use.
    pub fn function(&self, name: &str) -> Result<CudaFunction> {
        let module = {
            let mut modules = self
                .modules
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match modules.get(name) {
                Some(m) => m.clone(),
                None => {
                    let text = crate::ptx_split::entry_module(&self.ptx, name)
                        .unwrap_or_else(|| self.ptx.to_string());
                    let m = self
                        .ctx
                        .load_module(Ptx::from_src(text))
                        .map_err(|source| Error::PtxLoad {
                            what: format!("the module of kernel `{name}`"),
                            source: Box::new(source),
                        })?;
                    modules.insert(name.to_string(), m.clone());
                    m
                }
            }
        };
        module.load_function(name).map_err(|source| Error::PtxLoad {
            what: format!("kernel `{name}`"),
            source: Box::new(source),
        })
    }

    /// The device's name, as the driver reports it.
    pub fn name(&self) -> String {
        self.ctx
            .name()
            .unwrap_or_else(|_| "unknown CUDA device".into())
    }
}

/// The `.entry` names in cluda's PTX (used by tests to check the kernel build).
pub fn ptx_entries() -> Vec<&'static str> {
    PTX.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
        .map(|rest| rest.split('(').next().unwrap_or(rest).trim())
        .collect()
}
