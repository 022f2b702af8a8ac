//! Access to the CUDA device: driver detection, the context, and the embedded PTX modules
//! (only with the `gpu` feature).
//!
//! cudarc loads `libcuda` at run time, so cluda builds and runs its CPU paths on machines with
//! no CUDA at all; everything GPU-related starts here and turns "no driver" or "no device" into
//! [`Error::NoGpu`] instead of cudarc's panic.
//!
//! Two builds of the same kernels are embedded (see [`PtxBuild`]): the tuned sm_90 module,
//! loaded on compute capability 9.0 and newer, and the sm_80 baseline, loaded on 8.x (A100,
//! RTX 30xx/40xx, L4, L40). Older GPUs are refused with [`Error::NoGpu`]. The environment
//! variable [`PTX_ENV`] (`CLUDA_PTX=baseline`) forces the baseline on any supported GPU, so
//! the GPU tests can run both builds on one machine.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::error::{CudaContextExt, Error, Result};

/// The tuned PTX of all cluda kernels (`sm_90`, PTX ISA 8.0), compiled from `gpu/` by
/// `build.rs`: the module of every benchmark, loaded on compute capability 9.0 and newer.
pub const PTX: &str = include_str!(env!("CLUDA_PTX_SM90_PATH"));

/// The baseline PTX of the same kernels (`sm_80`, PTX ISA 7.0, the lowest the kernels
/// accept: `redux.sync` needs it), loaded on compute capability 8.x.
pub const PTX_BASELINE: &str = include_str!(env!("CLUDA_PTX_SM80_PATH"));

/// The environment variable that picks the PTX build: unset, empty or `auto` chooses by the
/// device's compute capability; `baseline` (or `sm80`) forces the baseline; `sm90` forces the
/// tuned build (which a GPU older than 9.0 refuses).
pub const PTX_ENV: &str = "CLUDA_PTX";

/// One of the embedded PTX builds of cluda's kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PtxBuild {
    /// [`PTX_BASELINE`]: sm_80, for compute capability 8.0 and newer.
    Baseline,
    /// [`PTX`]: sm_90, tuned for Hopper, for compute capability 9.0 and newer.
    Sm90,
}

impl PtxBuild {
    /// Both builds, baseline first.
    pub const ALL: [PtxBuild; 2] = [PtxBuild::Baseline, PtxBuild::Sm90];

    /// The PTX text.
    pub fn ptx(self) -> &'static str {
        match self {
            PtxBuild::Baseline => PTX_BASELINE,
            PtxBuild::Sm90 => PTX,
        }
    }

    /// A short name (`sm80` or `sm90`), as in messages.
    pub fn name(self) -> &'static str {
        match self {
            PtxBuild::Baseline => "sm80",
            PtxBuild::Sm90 => "sm90",
        }
    }

    /// The lowest compute capability (major, minor) that can load this build.
    pub fn min_capability(self) -> (i32, i32) {
        match self {
            PtxBuild::Baseline => (8, 0),
            PtxBuild::Sm90 => (9, 0),
        }
    }

    /// The build to load on a device of compute capability `cc`, honouring `choice` (the
    /// value of [`PTX_ENV`], if set); an [`Error::NoGpu`] naming the capability and the
    /// minimum when no build fits, [`Error::InvalidParameter`] for an unknown `choice`.
    pub fn for_capability(cc: (i32, i32), choice: Option<&str>) -> Result<Self> {
        let forced = match choice.map(str::trim) {
            None | Some("") | Some("auto") => None,
            Some("baseline") | Some("sm80") => Some(PtxBuild::Baseline),
            Some("sm90") => Some(PtxBuild::Sm90),
            Some(other) => {
                return Err(Error::param(
                    PTX_ENV,
                    format!("`{other}` is not one of auto, baseline, sm80, sm90"),
                ));
            }
        };
        let build = forced.unwrap_or(if cc >= PtxBuild::Sm90.min_capability() {
            PtxBuild::Sm90
        } else {
            PtxBuild::Baseline
        });
        let min = build.min_capability();
        if cc < min {
            return Err(Error::NoGpu(format!(
                "the GPU has compute capability {}.{}; cluda's {} kernels need at least {}.{}",
                cc.0,
                cc.1,
                build.name(),
                min.0,
                min.1
            )));
        }
        Ok(build)
    }
}

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
    build: Option<PtxBuild>,
}

impl Device {
    /// Opens device `ordinal` and loads the embedded PTX build that fits its compute
    /// capability (see [`PtxBuild::for_capability`]; [`PTX_ENV`] can force the baseline).
    pub fn open(ordinal: usize) -> Result<Self> {
        let ctx = Self::context_on(ordinal)?;
        let choice = std::env::var(PTX_ENV).ok();
        let build = PtxBuild::for_capability(compute_capability(&ctx)?, choice.as_deref())?;
        let mut device = Self::load(ctx, build.ptx())?;
        device.build = Some(build);
        Ok(device)
    }

    /// Opens device `ordinal` and loads `ptx` instead of an embedded build (tests use it to
    /// check that a module the driver rejects gives [`Error::PtxLoad`]).
    pub fn open_with_ptx(ordinal: usize, ptx: &str) -> Result<Self> {
        Self::load(Self::context_on(ordinal)?, ptx)
    }

    /// A context on device `ordinal`, or [`Error::NoGpu`] saying why there is none.
    fn context_on(ordinal: usize) -> Result<Arc<CudaContext>> {
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
        CudaContext::new(ordinal).cuda("creating the CUDA context")
    }

    /// A device over `ctx` whose kernels come from `ptx`, each loaded on first use.
    fn load(ctx: Arc<CudaContext>, ptx: &str) -> Result<Self> {
        if !ptx.contains(".entry ") {
            // Not a kernel module at all: load it whole, so that the driver's own error
            // says what is wrong with it.
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
            build: None,
        })
    }

    /// The embedded PTX build loaded ([`None`] after [`Device::open_with_ptx`]).
    pub fn ptx_build(&self) -> Option<PtxBuild> {
        self.build
    }

    /// The device's compute capability (major, minor).
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        compute_capability(&self.ctx)
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The kernel `name`, its module loaded (JIT-compiled by the driver) on first use.
    ///
    /// # Errors
    /// [`Error::PtxLoad`] when the driver rejects the kernel's module or has no such kernel.
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

/// The compute capability (major, minor) of `ctx`'s device.
fn compute_capability(ctx: &CudaContext) -> Result<(i32, i32)> {
    let major = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        .cuda("reading the compute capability")?;
    let minor = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        .cuda("reading the compute capability")?;
    Ok((major, minor))
}

/// The `.entry` names in cluda's tuned PTX (used by tests to check the kernel build).
pub fn ptx_entries() -> Vec<&'static str> {
    ptx_entries_of(PTX)
}

/// The `.entry` names in `ptx`, in order.
pub fn ptx_entries_of(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
        .map(|rest| rest.split('(').next().unwrap_or(rest).trim())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_by_capability() {
        let pick = |cc, choice| PtxBuild::for_capability(cc, choice);
        assert_eq!(pick((9, 0), None).unwrap(), PtxBuild::Sm90);
        assert_eq!(pick((10, 0), Some("auto")).unwrap(), PtxBuild::Sm90);
        assert_eq!(pick((8, 9), None).unwrap(), PtxBuild::Baseline);
        assert_eq!(pick((8, 0), None).unwrap(), PtxBuild::Baseline);
        assert_eq!(pick((9, 0), Some("baseline")).unwrap(), PtxBuild::Baseline);
        let e = pick((7, 5), None).unwrap_err().to_string();
        assert!(e.contains("7.5") && e.contains("8.0"), "{e}");
        let e = pick((8, 6), Some("sm90")).unwrap_err().to_string();
        assert!(e.contains("8.6") && e.contains("9.0"), "{e}");
        let e = pick((9, 0), Some("sm70")).unwrap_err().to_string();
        assert!(e.contains("CLUDA_PTX") && e.contains("sm70"), "{e}");
    }
}
