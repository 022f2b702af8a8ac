//! Device side of cluda: the per-pixel cluster-finding algorithm, written once, and the kernels.
//!
//! Everything outside [`kernels`] is plain `no_std` Rust that compiles both for the host (the
//! CPU finder calls it) and for `nvptx64-nvidia-cuda` (the kernels call it), so the CPU and GPU
//! finders perform the same floating-point operations in the same order. The top-level
//! `build.rs` compiles this crate to PTX; the host crate embeds that PTX.
#![cfg_attr(not(test), no_std)]
#![feature(core_float_math)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)
)]

pub mod args;
pub mod classify;
pub mod layout;
pub mod lookback;
pub mod pedestal;
pub mod real;

#[cfg(target_arch = "nvptx64")]
pub mod kernels;

#[cfg(all(target_arch = "nvptx64", not(test)))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // A kernel must never unwind; trap makes the launch fail with an error the host sees.
    unsafe { core::arch::nvptx::trap() }
}
