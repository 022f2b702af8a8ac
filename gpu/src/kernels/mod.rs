//! Kernel entry points (compiled for `nvptx64-nvidia-cuda` only).
//!
//! A data frame is found in two launches on one compute stream (see the host's
//! `finder::gpu::pipeline`): [`prepare`] turns the raw frame and the pedestal state into corrected
//! values `c` (in a zero-padded plane) and thresholds `t`; [`frame`] reads only `c` and `t`
//! of neighbours, writes the frame's cluster records in row-major order and updates the pedestal
//! of its own pixel. Because no kernel of frame k reads a neighbour's pedestal state after any
//! kernel of frame k wrote it, the update is frame-synchronous and race-free.
//!
//! The pipeline normally runs one launch per frame instead: `cluda_step_*` (in [`frame`])
//! classifies frame k exactly as `classify` does and then, per pixel, prepares frame k+1 from
//! the sums its own thread has just updated, into a second plane (planes, thresholds and
//! look-back words alternate between two sets). Only a chunk's first frame needs a `prepare`
//! launch of its own.
//!
//! The default pipeline goes further: one cooperative launch of
//! `cluda_run1_*` ([`run`]) finds a whole upload group of frames, each tile waiting per frame
//! only for the tiles its windows read, with each pixel's pedestal state in registers (in shared
//! memory between uses for F64 9x9).
//!
//! Every kernel's parameters are the fields of its family's argument struct in `crate::args`
//! (declared from the same field list by [`entry`]); warp and shared-memory primitives are in
//! [`prims`].

/// Declares the kernels of one family, one per `name(real type[, window side])` of the list
/// in brackets (the family's list in `crate::args::finder_kernels`, which hands it over): each
/// takes the family's fields (`crate::finder_fields!($fields; ..)`, in `crate::args`) as its
/// parameters, gathers them into the family's argument struct and calls
/// `$body::<R[, S]>(args[, scratch])`, with a shared scratch array of `$bytes` bytes per block
/// when one is asked for (`[generic $bytes]` hands over its generic address, `[window $bytes]`
/// its shared-window address).
macro_rules! entry {
    ($fields:ident; $(#[$m:meta])* $args:ident => $body:ident $shared:tt; []) => {};
    ($fields:ident; $(#[$m:meta])* $args:ident => $body:ident $shared:tt;
        [$k:ident($t:ty $(, $s:literal)?) $(, $($rest:tt)*)?]) => {
        crate::finder_fields!($fields; entry_one; $(#[$m])* $k [$t] [$($s)?] $args $body $shared);
        crate::kernels::entry!($fields; $(#[$m])* $args => $body $shared; [$($($rest)*)?]);
    };
}
pub(crate) use entry;

/// One kernel of [`entry`], given its family's field list; its body takes the scratch
/// array's address, or `()` where the family asks for none (the `@scratch` arms).
macro_rules! entry_one {
    ($(#[$m:meta])* $k:ident [$t:ty] [$($s:literal)?] $args:ident $body:ident $shared:tt
        { $($(#[$fm:meta])* $f:ident: $ty:ty,)* }) => {
        mod $k {
            use super::*;
            type R = $t;
            $(#[$m])*
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $k($($f: $ty),*) {
                let scratch = crate::kernels::entry_one!(@scratch $k $shared);
                let args = $args::<R> { $($f),* };
                // SAFETY: the kernel's contract (its arguments as its docs require), passed on.
                unsafe { $body::<R $(, $s)?>(args, scratch) }
            }
        }
    };
    (@scratch $k:ident []) => {
        ()
    };
    (@scratch $k:ident [$mode:ident $bytes:expr]) => {
        crate::kernels::prims::shared_array!($mode concat!(stringify!($k), "_scratch"), $bytes)
    };
}
pub(crate) use entry_one;

/// Declares each kernel of a `[name => ArgsStruct { fields }, ...]` list (`interp_kernels!`,
/// the matcher's `matcher_kernels!`): it takes its struct's fields as its parameters and runs
/// the struct's `run`.
macro_rules! struct_entries {
    ([$($(#[$m:meta])* $k:ident => $args:ident {
        $($(#[$fm:meta])* $f:ident: $ty:ty,)*
    })*]) => {
        $(
            $(#[$m])*
            ///
            /// # Safety
            ///
            /// Launched by the host with its argument struct's fields as its parameters: every
            /// pointer a live device buffer of the sizes the struct's docs give, in blocks of
            /// the size they give.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $k($($f: $ty),*) {
                // SAFETY: the launch's contract, stated on the struct's `run`.
                unsafe { $args { $($f),* }.run() }
            }
        )*
    };
}
pub(crate) use struct_entries;

pub mod frame;
pub mod interp;
pub mod prepare;
pub(crate) mod prims;
pub mod run;

use core::arch::nvptx;

/// Global linear index of the calling thread in a 1-D launch.
#[inline(always)]
pub(crate) fn global_index_x() -> usize {
    // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
    unsafe {
        nvptx::_block_idx_x() as usize * nvptx::_block_dim_x() as usize
            + nvptx::_thread_idx_x() as usize
    }
}
