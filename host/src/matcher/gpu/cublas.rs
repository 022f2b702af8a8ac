//! cuBLAS, loaded at run time under whichever name the installed CUDA gives it.
//!
//! V3 needs five cuBLAS functions (create/destroy a handle, set its stream and math mode, and
//! SGEMM), whose C interface is the same in CUDA 11, 12 and 13. cudarc's own loader only looks
//! for the library names of the CUDA version it was built for (`libcublas.so`, `.so.12`,
//! `.so.11`, ...), so a machine with only CUDA 13's `libcublas.so.13` would need a symlink. This
//! module instead searches, in order:
//!
//! 1. the file named by the environment variable [`CUBLAS_ENV`], if set (and nothing else);
//! 2. `libcublas.so`, `libcublas.so.13`, `libcublas.so.12`, `libcublas.so.11` (Windows:
//!    `cublas64_13.dll`, `cublas64_12.dll`, `cublas64_11.dll`) on the loader's search path
//!    (`LD_LIBRARY_PATH`, the system library cache);
//! 3. the same names in `lib64/` (and `targets/x86_64-linux/lib/`) of `$CUDA_HOME`,
//!    `$CUDA_PATH` and `/usr/local/cuda`.
//!
//! The first that loads and exports all five functions is used for the rest of the process.
//! If none does, V3 fails with [`Error::NoGpu`] listing what was tried.

use std::ffi::{c_int, c_void};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use cluda_gpu::args::DevicePtr;
use cudarc::cublas::GemmConfig;
use cudarc::driver::CudaStream;

use crate::error::{Error, Result};

/// Environment variable naming the cuBLAS library file to load (a full path), overriding the
/// search.
pub const CUBLAS_ENV: &str = "CLUDA_CUBLAS";

/// `cublasHandle_t`.
type Handle = *mut c_void;
/// `cublasStatus_t` (a C enum: an `int`).
type Status = c_int;

type CreateFn = unsafe extern "C" fn(*mut Handle) -> Status;
type DestroyFn = unsafe extern "C" fn(Handle) -> Status;
type SetStreamFn = unsafe extern "C" fn(Handle, *mut c_void) -> Status;
type SetMathModeFn = unsafe extern "C" fn(Handle, c_int) -> Status;
type SgemmFn = unsafe extern "C" fn(
    Handle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const f32,
    *const f32,
    c_int,
    *const f32,
    c_int,
    *const f32,
    *mut f32,
    c_int,
) -> Status;

/// `CUBLAS_DEFAULT_MATH`: FP32 SGEMM without TF32 or other reduced-precision paths.
const CUBLAS_DEFAULT_MATH: c_int = 0;
/// `CUBLAS_TF32_TENSOR_OP_MATH`: SGEMM on tensor cores with inputs reduced to TF32 and FP32
/// accumulation (V4's screen).
const CUBLAS_TF32_TENSOR_OP_MATH: c_int = 3;

/// The arithmetic a `Blas` handle's SGEMM uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Math {
    /// Plain FP32 (`CUBLAS_DEFAULT_MATH`): V3 and the bare SGEMM.
    Fp32,
    /// TF32 tensor cores (`CUBLAS_TF32_TENSOR_OP_MATH`): V4's screen and its bare floor.
    Tf32,
}

/// The loaded library and its five functions (the library is kept for the whole process).
struct Lib {
    /// Where it was found (for messages).
    name: String,
    create: CreateFn,
    destroy: DestroyFn,
    set_stream: SetStreamFn,
    set_math_mode: SetMathModeFn,
    sgemm: SgemmFn,
}

/// A failed cuBLAS call: its status code, named when known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CublasStatus(pub i32);

impl fmt::Display for CublasStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 {
            1 => "CUBLAS_STATUS_NOT_INITIALIZED",
            3 => "CUBLAS_STATUS_ALLOC_FAILED",
            7 => "CUBLAS_STATUS_INVALID_VALUE",
            8 => "CUBLAS_STATUS_ARCH_MISMATCH",
            11 => "CUBLAS_STATUS_MAPPING_ERROR",
            13 => "CUBLAS_STATUS_EXECUTION_FAILED",
            14 => "CUBLAS_STATUS_INTERNAL_ERROR",
            15 => "CUBLAS_STATUS_NOT_SUPPORTED",
            16 => "CUBLAS_STATUS_LICENSE_ERROR",
            _ => "unknown cuBLAS status",
        };
        write!(f, "{name} ({})", self.0)
    }
}

impl std::error::Error for CublasStatus {}

fn check(status: Status) -> std::result::Result<(), CublasStatus> {
    if status == 0 {
        Ok(())
    } else {
        Err(CublasStatus(status))
    }
}

/// The library names tried on the loader's path, newest CUDA first after the unversioned name.
pub fn library_names() -> &'static [&'static str] {
    if cfg!(windows) {
        &["cublas64_13.dll", "cublas64_12.dll", "cublas64_11.dll"]
    } else {
        &[
            "libcublas.so",
            "libcublas.so.13",
            "libcublas.so.12",
            "libcublas.so.11",
        ]
    }
}

/// Every candidate, in search order (see the module docs).
pub fn candidates() -> Vec<PathBuf> {
    if let Some(path) = std::env::var_os(CUBLAS_ENV).filter(|p| !p.is_empty()) {
        return vec![PathBuf::from(path)];
    }
    let mut out: Vec<PathBuf> = library_names().iter().map(PathBuf::from).collect();
    let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    for root in roots {
        for dir in ["lib64", "targets/x86_64-linux/lib"] {
            for name in library_names() {
                let p = root.join(dir).join(name);
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// Loads one candidate and resolves the five functions.
fn open(path: &PathBuf) -> std::result::Result<Lib, String> {
    // SAFETY: loading cuBLAS runs its initialisers, which have no preconditions.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
    // SAFETY: the symbols have the C signatures declared above (cuBLAS's v2 API, unchanged
    // from CUDA 11 to 13); the library is leaked below, so the pointers stay valid.
    let lib = unsafe {
        let get = |name: &[u8]| -> std::result::Result<*const c_void, String> {
            lib.get::<*const c_void>(name)
                .map(|s| *s)
                .map_err(|e| e.to_string())
        };
        let out = Lib {
            name: path.display().to_string(),
            create: std::mem::transmute::<*const c_void, CreateFn>(get(b"cublasCreate_v2\0")?),
            destroy: std::mem::transmute::<*const c_void, DestroyFn>(get(b"cublasDestroy_v2\0")?),
            set_stream: std::mem::transmute::<*const c_void, SetStreamFn>(get(
                b"cublasSetStream_v2\0",
            )?),
            set_math_mode: std::mem::transmute::<*const c_void, SetMathModeFn>(get(
                b"cublasSetMathMode\0",
            )?),
            sgemm: std::mem::transmute::<*const c_void, SgemmFn>(get(b"cublasSgemm_v2\0")?),
        };
        std::mem::forget(lib);
        out
    };
    Ok(lib)
}

/// The process-wide cuBLAS, loaded on first use; the error lists every candidate tried.
fn lib() -> std::result::Result<&'static Lib, &'static str> {
    static LIB: OnceLock<std::result::Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        let mut tried = Vec::new();
        for path in candidates() {
            match open(&path) {
                Ok(lib) => return Ok(lib),
                Err(e) => tried.push(format!("{} ({e})", path.display())),
            }
        }
        Err(format!(
            "v3 needs cuBLAS, but no cuBLAS library could be loaded (set {CUBLAS_ENV} to its \
             path); tried: {}",
            tried.join("; ")
        ))
    })
    .as_ref()
    .map_err(String::as_str)
}

/// Where cuBLAS was loaded from, or why it could not be (loads it on first call).
pub fn library() -> std::result::Result<&'static str, &'static str> {
    lib().map(|l| l.name.as_str())
}

/// A cuBLAS handle bound to one stream, in one [`Math`] mode; destroyed on drop.
pub(super) struct Blas {
    lib: &'static Lib,
    handle: Handle,
    stream: Arc<CudaStream>,
}

// SAFETY: a cuBLAS handle may be used from any thread, one call at a time; moving the owner
// to another thread moves all use of the handle with it (cudarc's handle is Send on the same
// grounds).
unsafe impl Send for Blas {}
// SAFETY: every use of the handle takes `&mut self` (`gemm`) or ownership (`drop`): a shared
// `&Blas` gives no access to it at all, so sharing one between threads cannot make calls on
// the handle overlap.
unsafe impl Sync for Blas {}

impl Blas {
    /// Creates a handle on `stream` whose SGEMM uses `math`.
    pub fn new(stream: Arc<CudaStream>, math: Math) -> Result<Self> {
        let lib = lib().map_err(|e| Error::NoGpu(e.to_string()))?;
        let ctx = stream.context();
        ctx.bind_to_thread().map_err(|e| Error::Cuda {
            context: "binding the CUDA context for cuBLAS".into(),
            source: Box::new(e),
        })?;
        let err = |context: &str| {
            let context = context.to_string();
            move |e: CublasStatus| Error::Cublas {
                context,
                source: Box::new(e),
            }
        };
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: cublasCreate_v2 writes a handle to the given location.
        check(unsafe { (lib.create)(&mut handle) }).map_err(err("creating the cuBLAS handle"))?;
        let blas = Self {
            lib,
            handle,
            stream,
        };
        // SAFETY: a valid handle and a live stream of the bound context.
        check(unsafe { (lib.set_stream)(blas.handle, blas.stream.cu_stream() as *mut c_void) })
            .map_err(err("setting cuBLAS's stream"))?;
        let mode = match math {
            Math::Fp32 => CUBLAS_DEFAULT_MATH,
            Math::Tf32 => CUBLAS_TF32_TENSOR_OP_MATH,
        };
        // SAFETY: a valid handle and one of cuBLAS's math modes.
        check(unsafe { (lib.set_math_mode)(blas.handle, mode) })
            .map_err(err("setting cuBLAS's math mode"))?;
        Ok(blas)
    }

    /// Column-major SGEMM `c = alpha op(a) op(b) + beta c` on the handle's stream. `&mut`:
    /// calls on one handle must not overlap (see the `Sync` impl).
    ///
    /// # Safety
    /// The device memory at `a`, `b` and `c` must hold at least the elements `cfg` addresses
    /// (as for cuBLAS's `Sgemm`) and be usable on the handle's stream; nothing else may use
    /// `c` until the SGEMM is done.
    pub unsafe fn gemm(
        &mut self,
        cfg: GemmConfig<f32>,
        a: DevicePtr<f32>,
        b: DevicePtr<f32>,
        c: DevicePtr<f32>,
    ) -> std::result::Result<(), CublasStatus> {
        let (a, b, c) = (a.addr(), b.addr(), c.addr());
        // SAFETY: device pointers valid for the sizes the caller guarantees; alpha and beta
        // are host scalars (the handle's default pointer mode).
        check(unsafe {
            (self.lib.sgemm)(
                self.handle,
                cfg.transa as c_int,
                cfg.transb as c_int,
                cfg.m,
                cfg.n,
                cfg.k,
                &cfg.alpha,
                a as *const f32,
                cfg.lda,
                b as *const f32,
                cfg.ldb,
                &cfg.beta,
                c as *mut f32,
                cfg.ldc,
            )
        })
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        let handle = std::mem::replace(&mut self.handle, std::ptr::null_mut());
        if !handle.is_null() {
            // SAFETY: a handle created by `new`, destroyed once. A failure cannot be reported
            // from drop and leaks at most the handle.
            let _ = unsafe { (self.lib.destroy)(handle) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_cuda_12_and_13() {
        let names = library_names();
        if !cfg!(windows) {
            assert_eq!(names[0], "libcublas.so");
            assert!(names.contains(&"libcublas.so.13"));
            assert!(names.contains(&"libcublas.so.12"));
        }
    }

    #[test]
    fn status_names() {
        assert_eq!(
            CublasStatus(13).to_string(),
            "CUBLAS_STATUS_EXECUTION_FAILED (13)"
        );
        assert_eq!(CublasStatus(99).to_string(), "unknown cuBLAS status (99)");
    }

    #[test]
    fn candidates_search_the_toolkit() {
        // Without the override, the toolkit's lib64 is searched after the loader's path.
        if std::env::var_os(CUBLAS_ENV).is_none() {
            let c = candidates();
            assert!(c.iter().any(|p| p.ends_with("lib64/libcublas.so.13")));
            assert_eq!(c[0], PathBuf::from(library_names()[0]));
        }
    }
}
