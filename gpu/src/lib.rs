//! Device side of cluda: the per-pixel cluster-finding algorithm, written once, and the kernels.
//!
//! Everything outside `kernels` is plain Rust using only `core` that compiles both for the
//! host (the CPU finder calls it) and for `nvptx64-nvidia-cuda` (the kernels call it), so the
//! CPU and GPU finders perform the same floating-point operations in the same order. The
//! top-level `build.rs` compiles this crate to PTX with the pinned nightly; the host crate
//! embeds that PTX.
//!
//! On the host the crate builds on stable Rust and links `std` (for `sqrt` and `mul_add`, see
//! [`real`]); only the nvptx build is `no_std` and uses nightly features, so a stable crate can
//! depend on cluda.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch, core_float_math)
)]

pub mod args;
pub mod classify;
pub mod eta;
pub mod layout;
pub mod lookback;
pub mod matcher;
pub mod pedestal;
pub mod real;

/// V4's screening bound, under its earlier path.
pub use matcher::bound as match_bound;

#[cfg(target_arch = "nvptx64")]
pub mod kernels;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // A kernel must never unwind; trap makes the launch fail with an error the host sees.
    // SAFETY: `trap` has no preconditions; it aborts the kernel.
    unsafe { core::arch::nvptx::trap() }
}
