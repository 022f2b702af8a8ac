//! The kernels' parameters: one `#[repr(C)]` struct per kernel family, generic over the real
//! type, filled by the host and read by the kernels, and the kernels' entry names.
//!
//! Every field is one PTX parameter of the family's kernels, in field order: a `#[repr(C)]`
//! struct lays its fields out as CUDA lays out a kernel's parameter list, and the host hands
//! a launch the address of every field ([`PrepareArgs::params`] and the like). The kernels
//! take the fields as separate parameters (declared from the same list) rather than the
//! struct as one by-value parameter, because rustc passes a by-value struct to an
//! `extern "ptx-kernel"` function as an integer array: the pointers inside lose the global
//! state space LLVM gives a kernel's pointer parameters, and every load and store through
//! them would become a generic one instead of `ld.global` / `st.global`.
//!
//! A `*_fields!` macro holds each family's field list once; it hands the list to a macro
//! that declares the struct here and to one that declares the kernels (in `kernels/`).

/// Hands the list of the fields of the prepare kernels to `$cb!`, after the tokens `$pre`.
#[macro_export]
#[doc(hidden)]
macro_rules! prepare_fields {
    ($cb:ident; $($pre:tt)*) => {
        $cb! { $($pre)* {
            /// The raw frame.
            frame: *const u16,
            /// Pedestal baseline (per pixel).
            base: *const R,
            /// Pedestal sums.
            a: *const R,
            b: *const R,
            /// Standard deviation frozen when the pedestal became ready (frozen thresholds).
            frozen_std: *const R,
            /// Columns per frame.
            cols: u32,
            /// Pixels per frame.
            pixels: u32,
            /// Row stride of the padded plane.
            stride: u32,
            /// Padding (window radius) of the plane.
            r: u32,
            /// 1 / N, the pedestal window's reciprocal.
            inv: R,
            /// Threshold in standard deviations.
            n_sigma: R,
            /// 1: live thresholds from the current window, 0: frozen ones.
            live: u32,
            /// The zero-padded plane of corrected values to write.
            c_plane: *mut R,
            /// The thresholds to write.
            t_out: *mut R,
            /// Look-back words of the next classify launch, reset here.
            status: *mut u64,
            /// How many of them.
            n_status: u32,
        } }
    };
}

/// Hands the list of the fields of the classify kernels to `$cb!`, after the tokens `$pre`.
#[macro_export]
#[doc(hidden)]
macro_rules! classify_fields {
    ($cb:ident; $($pre:tt)*) => {
        $cb! { $($pre)* {
            /// The raw frame.
            frame: *const u16,
            /// Pedestal baseline.
            base: *const R,
            /// Pedestal sums (updated for quiet pixels).
            a: *mut R,
            b: *mut R,
            /// The frame's padded plane of corrected values.
            c: *const R,
            /// The frame's thresholds.
            t: *const R,
            /// Columns per frame.
            cols: u32,
            /// Pixels per frame.
            pixels: u32,
            /// Row stride of the padded plane.
            stride: u32,
            /// Tiles (blocks) per frame.
            tiles: u32,
            /// 1 / N.
            inv: R,
            /// Look-back words: the ticket, then one per tile (zeroed by the last prepare).
            status: *mut u64,
            /// Clusters already in the record buffer (compact results), or null.
            base_in: *const u32,
            /// Where `*base_in` plus this frame's clusters goes.
            count_out: *mut u32,
            /// The record buffer.
            records: *mut u32,
            /// Records the buffer has room for.
            room: u32,
        } }
    };
}

/// Hands the list of the fields of the step kernels to `$cb!`, after the tokens `$pre`: the
/// classify fields, then the next frame's.
#[macro_export]
#[doc(hidden)]
macro_rules! step_fields {
    ($cb:ident; $($pre:tt)*) => {
        $cb! { $($pre)* {
            /// The raw frame.
            frame: *const u16,
            /// Pedestal baseline.
            base: *const R,
            /// Pedestal sums (updated for quiet pixels).
            a: *mut R,
            b: *mut R,
            /// The frame's padded plane of corrected values.
            c: *const R,
            /// The frame's thresholds.
            t: *const R,
            /// Columns per frame.
            cols: u32,
            /// Pixels per frame.
            pixels: u32,
            /// Row stride of the padded plane.
            stride: u32,
            /// Tiles (blocks) per frame.
            tiles: u32,
            /// 1 / N.
            inv: R,
            /// Look-back words: the ticket, then one per tile.
            status: *mut u64,
            /// Clusters already in the record buffer (compact results), or null.
            base_in: *const u32,
            /// Where `*base_in` plus this frame's clusters goes.
            count_out: *mut u32,
            /// The record buffer.
            records: *mut u32,
            /// Records the buffer has room for.
            room: u32,
            /// The next raw frame to prepare, or null for none.
            next_frame: *const u16,
            /// Standard deviation frozen when the pedestal became ready.
            frozen_std: *const R,
            /// Padding (window radius) of the planes.
            r: u32,
            /// Threshold in standard deviations.
            n_sigma: R,
            /// 1: live thresholds, 0: frozen ones.
            live: u32,
            /// The next frame's plane, thresholds and look-back words.
            c_next: *mut R,
            t_next: *mut R,
            status_next: *mut u64,
        } }
    };
}

/// Hands the list of the fields of the run kernels to `$cb!`, after the tokens `$pre`.
#[macro_export]
#[doc(hidden)]
macro_rules! run_fields {
    ($cb:ident; $($pre:tt)*) => {
        $cb! { $($pre)* {
            /// `n` raw frames, one after another.
            frames: *const u16,
            n: u32,
            /// Pedestal baseline.
            base: *const R,
            /// Pedestal sums (loaded once, stored once at the end).
            a: *mut R,
            b: *mut R,
            /// Standard deviation frozen when the pedestal became ready.
            frozen_std: *const R,
            /// [`crate::layout::PLANES`] padded planes, `plane_len` elements apart.
            planes: *mut R,
            plane_len: u32,
            /// The work area: arrival counters, progress flags (both zeroed before the
            /// launch), then per-tile counts (see `crate::layout`).
            work: *mut u32,
            /// Columns per frame.
            cols: u32,
            /// Pixels per frame.
            pixels: u32,
            /// Row stride of the padded planes.
            stride: u32,
            /// Tiles (blocks) per frame: the grid.
            tiles: u32,
            /// Padding (window radius) of the planes.
            r: u32,
            /// 1 / N.
            inv: R,
            /// Threshold in standard deviations.
            n_sigma: R,
            /// 1: live thresholds, 0: frozen ones.
            live: u32,
            /// Clusters already in the record buffer before the first frame, or null.
            base_in: *const u32,
            /// `count_out[k]`: clusters in the buffer after frame k (running total).
            count_out: *mut u32,
            /// The record buffer.
            records: *mut u32,
            /// Records the buffer has room for (records past it are counted, not written).
            room: u32,
        } }
    };
}

/// Counts token trees (for array lengths).
macro_rules! count {
    () => { 0usize };
    ($x:tt $($rest:tt)*) => { 1usize + count!($($rest)*) };
}

/// Declares the argument struct `$name<R>` with the given fields, and its parameter helpers.
macro_rules! args_struct {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident: $ty:ty,)* }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name<R> {
            $($(#[$fm])* pub $f: $ty,)*
        }

        impl<R> $name<R> {
            /// The kernels' parameters: one per field.
            pub const PARAMS: usize = count!($($f)*);
            /// The field (parameter) names, in order.
            pub const NAMES: [&'static str; count!($($f)*)] = [$(stringify!($f)),*];

            /// The address of every field, in order: the parameter array of a launch (valid
            /// while `self` lives and does not move).
            pub fn params(&mut self) -> [*mut core::ffi::c_void; count!($($f)*)] {
                [$(&raw mut self.$f as *mut core::ffi::c_void),*]
            }

            /// Offset and size of every field, in order (the parameter layout).
            pub fn layout() -> [(usize, usize); count!($($f)*)] {
                [$((core::mem::offset_of!(Self, $f), core::mem::size_of::<$ty>())),*]
            }
        }
    };
}

prepare_fields!(args_struct;
    /// The parameters of `cluda_prepare_*`: corrected values and thresholds of one frame.
    PrepareArgs
);
classify_fields!(args_struct;
    /// The parameters of `cluda_classify_*`: one frame's classification and records.
    ClassifyArgs
);
step_fields!(args_struct;
    /// The parameters of `cluda_step_*`: classify one frame, prepare the next.
    StepArgs
);
run_fields!(args_struct;
    /// The parameters of `cluda_run1_*`: many frames in one cooperative launch.
    RunArgs
);

/// Entry names of the kernel families of the cluster finder, by real type and window side.
pub mod names {
    /// Window sides with kernels (3x3, 5x5, 7x7, 9x9).
    pub const SIDES: [usize; 4] = [3, 5, 7, 9];

    /// `cluda_prepare_f64` (`f64`) or `cluda_prepare_f32`.
    pub fn prepare(f64: bool) -> &'static str {
        if f64 {
            "cluda_prepare_f64"
        } else {
            "cluda_prepare_f32"
        }
    }

    /// The `$family` kernel of one real type and side, e.g. `cluda_run1_f64_9`; `None` for
    /// a side without kernels.
    fn sized(table: &[[&'static str; 4]; 2], f64: bool, side: usize) -> Option<&'static str> {
        let i = SIDES.iter().position(|&s| s == side)?;
        Some(table[!f64 as usize][i])
    }

    /// `cluda_classify_{f64,f32}_{side}`.
    pub fn classify(f64: bool, side: usize) -> Option<&'static str> {
        sized(&CLASSIFY, f64, side)
    }

    /// `cluda_step_{f64,f32}_{side}`.
    pub fn step(f64: bool, side: usize) -> Option<&'static str> {
        sized(&STEP, f64, side)
    }

    /// `cluda_run1_{f64,f32}_{side}`.
    pub fn run(f64: bool, side: usize) -> Option<&'static str> {
        sized(&RUN, f64, side)
    }

    /// The classify kernels: f64 then f32, by side.
    pub const CLASSIFY: [[&str; 4]; 2] = [
        [
            "cluda_classify_f64_3",
            "cluda_classify_f64_5",
            "cluda_classify_f64_7",
            "cluda_classify_f64_9",
        ],
        [
            "cluda_classify_f32_3",
            "cluda_classify_f32_5",
            "cluda_classify_f32_7",
            "cluda_classify_f32_9",
        ],
    ];
    /// The step kernels: f64 then f32, by side.
    pub const STEP: [[&str; 4]; 2] = [
        [
            "cluda_step_f64_3",
            "cluda_step_f64_5",
            "cluda_step_f64_7",
            "cluda_step_f64_9",
        ],
        [
            "cluda_step_f32_3",
            "cluda_step_f32_5",
            "cluda_step_f32_7",
            "cluda_step_f32_9",
        ],
    ];
    /// The run kernels: f64 then f32, by side.
    pub const RUN: [[&str; 4]; 2] = [
        [
            "cluda_run1_f64_3",
            "cluda_run1_f64_5",
            "cluda_run1_f64_7",
            "cluda_run1_f64_9",
        ],
        [
            "cluda_run1_f32_3",
            "cluda_run1_f32_5",
            "cluda_run1_f32_7",
            "cluda_run1_f32_9",
        ],
    ];
}
