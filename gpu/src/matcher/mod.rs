//! The descriptor matcher's device side, apart from the cluster finder's: its kernels' list
//! and argument structs ([`args`]), V4's screening bound ([`bound`], also run by the host's
//! tests) and the kernels themselves (`kernels`, nvptx only). With the finder it shares only
//! the crate's small device layer: the pointer types and struct macro of [`crate::args`], the
//! shapes of [`crate::layout::matcher`] and the warp and shared-memory primitives of the
//! kernels.
//!
//! The feature `experimental` adds V4's fused kernels (the screen on the tensor cores inside
//! the kernel), which are slower today than cuBLAS tiles and the fold.

pub mod args;
pub mod bound;

#[cfg(target_arch = "nvptx64")]
pub mod kernels;
