//! The kernels' parameters: one `#[repr(C)]` struct per kernel family, generic over the real
//! type, filled by the host and read by the kernels, and the kernels' entry names.
//!
//! Every field is one PTX parameter of the family's kernels, in field order: a `#[repr(C)]`
//! struct lays its fields out as CUDA lays out a kernel's parameter list, and the host hands
//! a launch the address of every field ([`KernelArgs::params`], implemented by every struct).
//! The kernels take the fields as separate parameters (declared from the same list) rather
//! than the struct as one by-value parameter, because rustc passes a by-value struct to an
//! `extern "ptx-kernel"` function as an integer array: the pointers inside lose the global
//! state space LLVM gives a kernel's pointer parameters, and every load and store through
//! them would become a generic one instead of `ld.global` / `st.global`.
//!
//! `finder_fields!` holds each family's field list once (the groups several share, once
//! too); it hands the list to a macro that declares the struct here and to one that declares
//! the kernels (in `kernels/`). Entry names are listed once too: `finder_kernels!` (name, real
//! type, window side per family; the kernels and [`names`] are built from it) and
//! `interp_kernels!` (each kernel with its own struct and fields; the structs carry the name
//! as `ENTRY`, and [`EntryArgs`] on the host). The matcher's structs are declared the same way
//! in [`crate::matcher::args`] and re-exported here. Pointer fields are
//! [`ConstPtr`]/[`MutPtr`]: raw pointers in the kernels, typed [`DevicePtr`]s on the host.

/// A pointer parameter the kernel reads through: `*const T` in the kernels, a [`DevicePtr`]
/// on the host (same size and place in the struct).
#[cfg(target_arch = "nvptx64")]
pub type ConstPtr<T> = *const T;
/// A pointer parameter the kernel writes through: `*mut T` in the kernels, a [`DevicePtr`] on
/// the host.
#[cfg(target_arch = "nvptx64")]
pub type MutPtr<T> = *mut T;
/// A pointer parameter the kernel reads through: on the host a [`DevicePtr`] (in the kernels
/// `*const T`).
#[cfg(not(target_arch = "nvptx64"))]
pub type ConstPtr<T> = DevicePtr<T>;
/// A pointer parameter the kernel writes through: on the host a [`DevicePtr`] (in the kernels
/// `*mut T`).
#[cfg(not(target_arch = "nvptx64"))]
pub type MutPtr<T> = DevicePtr<T>;

/// The device address of `T` values, as the host fills a kernel's pointer parameter: a
/// 64-bit address (never dereferenced on the host) that remembers what it points at, so an
/// argument struct cannot take a buffer of the wrong element type unnoticed. Laid out as the
/// `u64` the driver reads (and as the kernel's pointer, on the 64-bit hosts CUDA runs on).
#[cfg(not(target_arch = "nvptx64"))]
#[repr(transparent)]
pub struct DevicePtr<T> {
    addr: u64,
    _points_at: core::marker::PhantomData<fn() -> T>,
}

#[cfg(not(target_arch = "nvptx64"))]
impl<T> DevicePtr<T> {
    /// No buffer (a kernel reads 0 as "none" where its docs say so).
    pub const NULL: Self = Self::new(0);

    /// The address `addr` (a device allocation's, or one inside it).
    pub const fn new(addr: u64) -> Self {
        Self {
            addr,
            _points_at: core::marker::PhantomData,
        }
    }

    /// The address.
    pub const fn addr(self) -> u64 {
        self.addr
    }

    /// The address `count` values of `T` further on.
    pub const fn add(self, count: usize) -> Self {
        Self::new(self.addr + (count * core::mem::size_of::<T>()) as u64)
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl<T> Clone for DevicePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl<T> Copy for DevicePtr<T> {}

#[cfg(not(target_arch = "nvptx64"))]
impl<T> PartialEq for DevicePtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.addr == other.addr
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl<T> core::fmt::Debug for DevicePtr<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "DevicePtr({:#x})", self.addr)
    }
}

// The host's argument structs must lay their pointers out as the kernels' (64-bit) pointers.
#[cfg(not(target_arch = "nvptx64"))]
const _: () = assert!(core::mem::size_of::<DevicePtr<u8>>() == 8);
#[cfg(not(target_arch = "nvptx64"))]
const _: () = assert!(core::mem::align_of::<DevicePtr<f64>>() == 8);

/// A kernel's argument struct as the host hands it to a launch: the address of every field,
/// in order, is the launch's parameter array (the driver copies the values at the launch).
/// Implemented by every struct declared here, so a launch can take the struct itself
/// (`cluda::kernel::Kernel`) rather than a parameter array built by hand.
#[cfg(not(target_arch = "nvptx64"))]
pub trait KernelArgs {
    /// The parameter array: one address per field.
    type Params: AsMut<[*mut core::ffi::c_void]>;

    /// The address of every field, in order: the parameter array of a launch (valid while
    /// `self` lives and does not move).
    fn params(&mut self) -> Self::Params;
}

/// The argument struct of exactly one kernel, which names it: a host loads the kernel by
/// [`EntryArgs::ENTRY`] and so cannot pair it with another kernel's struct. (The finder's
/// families have a kernel per real type and window side; their names come from [`names`].)
#[cfg(not(target_arch = "nvptx64"))]
pub trait EntryArgs: KernelArgs {
    /// The kernel's entry name in the PTX.
    const ENTRY: &'static str;
}

/// Hands the fields of a kernel family of the cluster finder to `$cb!`, after the tokens
/// `$pre`: the one list the family's struct (here) and its kernels (`gpu/src/kernels/`) are
/// declared from. The families: `prepare`, `classify`, `step_next` (what a step kernel has
/// beyond the classify kernels': what it needs to prepare the next frame, a prepare launch's
/// inputs and outputs for the other plane), `step` (the classify fields, then the next
/// frame's), `step_parts` (the same as two lists, each in braces) and `run`. The field groups
/// several families share (the pedestal state, the frame's geometry, the record output) are
/// written once, in the first arm, and spliced in where the families' fields stand.
#[macro_export]
#[doc(hidden)]
macro_rules! finder_fields {
    (step; $($cb:ident)::+; $($pre:tt)*) => {
        $crate::finder_fields!(step_parts; $crate::finder_fields; @join [$($cb)::+] [$($pre)*]);
    };
    (step_parts; $($cb:ident)::+; $($pre:tt)*) => {
        $crate::finder_fields!(classify; $crate::finder_fields; @next [$($cb)::+] [$($pre)*]);
    };
    ($family:ident; $($cb:ident)::+; $($pre:tt)*) => {
        $crate::finder_fields! { @groups $family [$($cb)::+] [$($pre)*]
            {
                /// Pedestal baseline.
                base: $crate::args::ConstPtr<R>,
                /// Pedestal sums (updated for quiet pixels).
                a: $crate::args::MutPtr<R>,
                b: $crate::args::MutPtr<R>,
            }
            {
                /// Columns per frame.
                cols: u32,
                /// Pixels per frame.
                pixels: u32,
                /// Row stride of the padded plane.
                stride: u32,
            }
            {
                /// Clusters already in the record buffer (compact results), or null.
                base_in: $crate::args::ConstPtr<u32>,
                /// Where `*base_in` plus the clusters found goes (the run kernels: after
                /// each frame, a running total).
                count_out: $crate::args::MutPtr<u32>,
                /// The record buffer.
                records: $crate::args::MutPtr<u32>,
                /// Records the buffer has room for (records past it are counted, not
                /// written).
                room: u32,
            }
        }
    };
    // `step_parts`, given the classify fields: asks for the next frame's.
    (@next [$($cb:ident)::+] [$($pre:tt)*] { $($classify:tt)* }) => {
        $crate::finder_fields!(step_next; $($cb)::+; $($pre)* { $($classify)* });
    };
    // `step`, given both lists: hands their concatenation on.
    (@join [$($cb:ident)::+] [$($pre:tt)*] { $($classify:tt)* } { $($next:tt)* }) => {
        $($cb)::+! { $($pre)* { $($classify)* $($next)* } }
    };
    (@groups prepare [$($cb:ident)::+] [$($pre:tt)*] {$($pedestal:tt)*} {$($geometry:tt)*}
        {$($output:tt)*}) => {
        $($cb)::+! { $($pre)* {
            /// The raw frame.
            frame: $crate::args::ConstPtr<u16>,
            /// Pedestal baseline (per pixel).
            base: $crate::args::ConstPtr<R>,
            /// Pedestal sums.
            a: $crate::args::ConstPtr<R>,
            b: $crate::args::ConstPtr<R>,
            /// Standard deviation frozen when the pedestal became ready (frozen thresholds).
            frozen_std: $crate::args::ConstPtr<R>,
            $($geometry)*
            /// Padding (window radius) of the plane.
            r: u32,
            /// 1 / N, the pedestal window's reciprocal.
            inv: R,
            /// Threshold in standard deviations.
            n_sigma: R,
            /// 1: live thresholds from the current window, 0: frozen ones.
            live: u32,
            /// The zero-padded plane of corrected values to write.
            c_plane: $crate::args::MutPtr<R>,
            /// The thresholds to write.
            t_out: $crate::args::MutPtr<R>,
            /// Look-back words of the next classify launch, reset here.
            status: $crate::args::MutPtr<u64>,
            /// How many of them.
            n_status: u32,
        } }
    };
    (@groups classify [$($cb:ident)::+] [$($pre:tt)*] {$($pedestal:tt)*} {$($geometry:tt)*}
        {$($output:tt)*}) => {
        $($cb)::+! { $($pre)* {
            /// The raw frame.
            frame: $crate::args::ConstPtr<u16>,
            $($pedestal)*
            /// The frame's padded plane of corrected values.
            c: $crate::args::ConstPtr<R>,
            /// The frame's thresholds.
            t: $crate::args::ConstPtr<R>,
            $($geometry)*
            /// Tiles (blocks) per frame.
            tiles: u32,
            /// 1 / N.
            inv: R,
            /// Look-back words: the ticket, then one per tile (zeroed by the last prepare).
            status: $crate::args::MutPtr<u64>,
            $($output)*
        } }
    };
    (@groups step_next [$($cb:ident)::+] [$($pre:tt)*] {$($pedestal:tt)*} {$($geometry:tt)*}
        {$($output:tt)*}) => {
        $($cb)::+! { $($pre)* {
            /// The next raw frame to prepare, or null for none.
            next_frame: $crate::args::ConstPtr<u16>,
            /// Standard deviation frozen when the pedestal became ready.
            frozen_std: $crate::args::ConstPtr<R>,
            /// Padding (window radius) of the planes.
            r: u32,
            /// Threshold in standard deviations.
            n_sigma: R,
            /// 1: live thresholds, 0: frozen ones.
            live: u32,
            /// The next frame's plane, thresholds and look-back words.
            c_next: $crate::args::MutPtr<R>,
            t_next: $crate::args::MutPtr<R>,
            status_next: $crate::args::MutPtr<u64>,
        } }
    };
    (@groups run [$($cb:ident)::+] [$($pre:tt)*] {$($pedestal:tt)*} {$($geometry:tt)*}
        {$($output:tt)*}) => {
        $($cb)::+! { $($pre)* {
            /// `n` raw frames, one after another.
            frames: $crate::args::ConstPtr<u16>,
            n: u32,
            $($pedestal)*
            /// Standard deviation frozen when the pedestal became ready.
            frozen_std: $crate::args::ConstPtr<R>,
            /// [`crate::layout::PLANES`] padded planes, `plane_len` elements apart.
            planes: $crate::args::MutPtr<R>,
            plane_len: u32,
            /// The work area: arrival counters, progress flags (both zeroed before the
            /// launch), then per-tile counts (see `crate::layout`).
            work: $crate::args::MutPtr<u32>,
            $($geometry)*
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
            $($output)*
        } }
    };
}

/// Counts token trees (for array lengths).
macro_rules! count {
    () => { 0usize };
    ($x:tt $($rest:tt)*) => { 1usize + $crate::args::count!($($rest)*) };
}
pub(crate) use count;

/// Declares the argument struct `$name[<R>]` with the given fields, and its parameter helpers.
macro_rules! args_struct {
    ($(#[$m:meta])* $name:ident $(<$g:ident>)? { $($(#[$fm:meta])* $f:ident: $ty:ty,)* }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name $(<$g>)? {
            $($(#[$fm])* pub $f: $ty,)*
        }

        impl $(<$g>)? $name $(<$g>)? {
            /// The kernels' parameters: one per field.
            pub const PARAMS: usize = $crate::args::count!($($f)*);
            /// The field (parameter) names, in order.
            pub const NAMES: [&'static str; $crate::args::count!($($f)*)] = [$(stringify!($f)),*];

            /// Offset and size of every field, in order (the parameter layout).
            pub fn layout() -> [(usize, usize); $crate::args::count!($($f)*)] {
                [$((core::mem::offset_of!(Self, $f), core::mem::size_of::<$ty>())),*]
            }
        }

        #[cfg(not(target_arch = "nvptx64"))]
        impl $(<$g>)? $crate::args::KernelArgs for $name $(<$g>)? {
            type Params = [*mut core::ffi::c_void; $crate::args::count!($($f)*)];

            fn params(&mut self) -> Self::Params {
                [$(&raw mut self.$f as *mut core::ffi::c_void),*]
            }
        }
    };
}
pub(crate) use args_struct;

finder_fields!(prepare; args_struct;
    /// The parameters of `cluda_prepare_*`: corrected values and thresholds of one frame.
    PrepareArgs<R>
);
finder_fields!(classify; args_struct;
    /// The parameters of `cluda_classify_*`: one frame's classification and records.
    ClassifyArgs<R>
);
finder_fields!(step; args_struct;
    /// The parameters of `cluda_step_*`: classify one frame, prepare the next.
    StepArgs<R>
);
finder_fields!(run; args_struct;
    /// The parameters of `cluda_run1_*`: many frames in one cooperative launch.
    RunArgs<R>
);

/// Declares the argument structs of a `[name => ArgsStruct { fields }, ...]` kernel list (the
/// matcher's, `crate::matcher::args`, and `interp_kernels`'s), each with its kernel's entry
/// name.
macro_rules! entry_structs {
    ([$($(#[$m:meta])* $k:ident => $args:ident { $($fields:tt)* })*]) => {
        $(
            $crate::args::args_struct! { $(#[$m])* $args { $($fields)* } }

            impl $args {
                /// The kernel's entry name in the PTX.
                pub const ENTRY: &'static str = stringify!($k);
            }

            #[cfg(not(target_arch = "nvptx64"))]
            impl $crate::args::EntryArgs for $args {
                const ENTRY: &'static str = stringify!($k);
            }
        )*
    };
}
pub(crate) use entry_structs;

/// Hands the eta-interpolation kernels to `$cb!` as `[name => ArgsStruct { fields }, ...]`
/// (like the matcher's `matcher_kernels!`): the kernels (`gpu/src/kernels/interp.rs`) and the host's
/// argument structs are built from this one list. Both read a chunk's compact results as the
/// finder left them on the device (`frames + 1` running counts, then the packed records
/// from word `records_at`) and do nothing when the chunk overflowed its room; both run in
/// blocks of [`crate::layout::BLOCK`] threads over the records, grid-stride. The fields both
/// have first (the chunk and the edges of the bins) are written once, in the first arm.
#[macro_export]
#[doc(hidden)]
macro_rules! interp_kernels {
    ($($cb:ident)::+; $($pre:tt)*) => {
        $crate::interp_kernels! { @chunk [$($cb)::+] [$($pre)*] {
            /// The chunk's compact results: running counts, then records.
            out: $crate::args::ConstPtr<u32>,
            /// Frames of the chunk (`out[frames]` is its record count).
            frames: u32,
            /// Word offset of the first record in `out`.
            records_at: u32,
            /// Records the chunk had room for (more: it overflowed; nothing is counted).
            room: u32,
            /// Cluster side (3, 5, 7, 9).
            side: u32,
            /// The eta kind (`EtaKind as u32`).
            kind: u32,
            /// Edges of eta_x, eta_y and energy, and their counts.
            xbins: $crate::args::ConstPtr<f64>,
            nx: u32,
            ybins: $crate::args::ConstPtr<f64>,
            ny: u32,
            ebins: $crate::args::ConstPtr<f64>,
            ne: u32,
        } }
    };
    (@chunk [$($cb:ident)::+] [$($pre:tt)*] {$($chunk:tt)*}) => {
        $($cb)::+! { $($pre)* [
            /// The parameters of `cluda_eta_cube`: every record's eta counted into its bin of
            /// the cube (integer atomics), the tally of what was left out.
            cluda_eta_cube => EtaCubeArgs {
                $($chunk)*
                /// The cube's counts, `(nx-1) x (ny-1) x (ne-1)`, C order.
                counts: $crate::args::MutPtr<u64>,
                /// Six counters: clusters, inside, eta outside, energy outside, masked,
                /// outside the window.
                tally: $crate::args::MutPtr<u64>,
            }
            /// The parameters of `cluda_eta_image`: every record placed through the maps,
            /// its row written to `photons`, counted into the sub-pixel image when its flags
            /// are 0, and tallied (each output skipped where its pointer is null).
            cluda_eta_image => EtaImageArgs {
                $($chunk)*
                /// The maps, C order like the cube.
                ietax: $crate::args::ConstPtr<f64>,
                ietay: $crate::args::ConstPtr<f64>,
                /// Sub-pixels per pixel, and the image's rows and columns of sub-pixels.
                subpixels: u32,
                height: u32,
                width: u32,
                /// Bad pixels (`rows x cols` bytes, non-zero: bad), or null for none.
                mask: $crate::args::ConstPtr<u8>,
                mask_rows: u32,
                mask_cols: u32,
                /// The energy window `[lo, hi]`, when `use_window` is 1.
                window_lo: f64,
                window_hi: f64,
                use_window: u32,
                /// The image's counts, row-major, or null for none.
                image: $crate::args::MutPtr<u64>,
                /// As in `cluda_eta_cube`, or null for none.
                tally: $crate::args::MutPtr<u64>,
                /// One row per record (`room` of them), or null for none.
                photons: $crate::args::MutPtr<$crate::eta::PlacedRow>,
            }
            /// The parameters of `cluda_counts_to_u32`: 64-bit counts narrowed to `u32`,
            /// saturating (an image's counts come down at half the size).
            cluda_counts_to_u32 => NarrowArgs {
                /// The counts.
                counts: $crate::args::ConstPtr<u64>,
                /// How many.
                len: u32,
                /// Where the narrowed counts go (`len` of them; not overlapping `counts`).
                narrow: $crate::args::MutPtr<u32>,
            }
        ]}
    };
}

interp_kernels!(entry_structs;);

pub use crate::matcher::args::*;

/// Declares a struct `$name<R>` with the given fields (a part of a kernel family's fields).
macro_rules! part_struct {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident: $ty:ty,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name<R> {
            $($(#[$fm])* pub $f: $ty,)*
        }
    };
}

finder_fields!(step_next; part_struct;
    /// What a step launch has beyond a classify launch's arguments: the next frame to
    /// prepare, and where its plane, thresholds and look-back words go.
    StepNext
);

/// Declares [`StepArgs::join`] and [`StepArgs::split`] from the classify fields and the next
/// frame's (`step_parts`).
macro_rules! step_join {
    ({ $($(#[$cm:meta])* $cf:ident: $ct:ty,)* } { $($(#[$nm:meta])* $nf:ident: $nt:ty,)* }) => {
        impl<R> StepArgs<R> {
            /// A step launch's arguments: classify `c`'s frame, then prepare `next`.
            pub fn join(c: ClassifyArgs<R>, next: StepNext<R>) -> Self {
                Self {
                    $($cf: c.$cf,)*
                    $($nf: next.$nf,)*
                }
            }

            /// The two parts [`StepArgs::join`] joined: a step kernel classifies its frame as
            /// a classify kernel does, with the first.
            pub fn split(self) -> (ClassifyArgs<R>, StepNext<R>) {
                (
                    ClassifyArgs { $($cf: self.$cf,)* },
                    StepNext { $($nf: self.$nf,)* },
                )
            }
        }
    };
}

finder_fields!(step_parts; step_join;);

/// Hands the cluster finder's kernels of one family to `$cb!`, after the tokens `$pre`, as
/// `[name(real type[, window side]), ...]`: the one list the kernels are declared from
/// (`gpu/src/kernels/`) and the host's name tables ([`names`]) are built from.
#[macro_export]
#[doc(hidden)]
macro_rules! finder_kernels {
    (prepare; $($cb:ident)::+; $($pre:tt)*) => {
        $($cb)::+! { $($pre)* [cluda_prepare_f64(f64), cluda_prepare_f32(f32)] }
    };
    (classify; $($cb:ident)::+; $($pre:tt)*) => {
        $($cb)::+! { $($pre)* [
            cluda_classify_f64_3(f64, 3), cluda_classify_f64_5(f64, 5),
            cluda_classify_f64_7(f64, 7), cluda_classify_f64_9(f64, 9),
            cluda_classify_f32_3(f32, 3), cluda_classify_f32_5(f32, 5),
            cluda_classify_f32_7(f32, 7), cluda_classify_f32_9(f32, 9)
        ] }
    };
    (step; $($cb:ident)::+; $($pre:tt)*) => {
        $($cb)::+! { $($pre)* [
            cluda_step_f64_3(f64, 3), cluda_step_f64_5(f64, 5),
            cluda_step_f64_7(f64, 7), cluda_step_f64_9(f64, 9),
            cluda_step_f32_3(f32, 3), cluda_step_f32_5(f32, 5),
            cluda_step_f32_7(f32, 7), cluda_step_f32_9(f32, 9)
        ] }
    };
    // The run kernels keeping the pedestal state in registers.
    (run; $($cb:ident)::+; $($pre:tt)*) => {
        $($cb)::+! { $($pre)* [
            cluda_run1_f64_3(f64, 3), cluda_run1_f64_5(f64, 5),
            cluda_run1_f64_7(f64, 7),
            cluda_run1_f32_3(f32, 3), cluda_run1_f32_5(f32, 5),
            cluda_run1_f32_7(f32, 7), cluda_run1_f32_9(f32, 9)
        ] }
    };
    // The run kernels keeping the pedestal state in shared memory between uses.
    (run_shared; $($cb:ident)::+; $($pre:tt)*) => {
        $($cb)::+! { $($pre)* [cluda_run1_f64_9(f64, 9)] }
    };
}

/// Entry names of the kernel families of the cluster finder, by real type and window side,
/// from the lists the kernels are declared from ([`finder_kernels`]).
pub mod names {
    /// Window sides with kernels (3x3, 5x5, 7x7, 9x9).
    pub const SIDES: [usize; 4] = [3, 5, 7, 9];

    /// One kernel: its entry name, whether its real type is `f64`, its window side (0: any).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Entry {
        /// The entry name in the PTX.
        pub name: &'static str,
        /// `f64` (else `f32`).
        pub f64: bool,
        /// Window side, 0 for a kernel of every side.
        pub side: usize,
    }

    /// Declares `pub const $table: &[Entry]` from a kernel list.
    macro_rules! table {
        ($(#[$m:meta])* $table:ident [$($k:ident($t:ty $(, $s:literal)?)),* $(,)?]) => {
            $(#[$m])*
            pub const $table: &[Entry] = &[$(Entry {
                name: stringify!($k),
                f64: core::mem::size_of::<$t>() == 8,
                side: 0 $(+ $s)?,
            }),*];
        };
    }

    crate::finder_kernels!(prepare; table; /** The prepare kernels. */ PREPARE);
    crate::finder_kernels!(classify; table; /** The classify kernels. */ CLASSIFY);
    crate::finder_kernels!(step; table; /** The step kernels. */ STEP);
    crate::finder_kernels!(run; table;
        /** The run kernels with the pedestal state in registers. */ RUN_REGISTERS);
    crate::finder_kernels!(run_shared; table;
        /** The run kernels with the pedestal state in shared memory. */ RUN_SHARED);

    /// The kernel of `tables` for the real type and side, `None` when there is none.
    fn find(tables: &[&[Entry]], f64: bool, side: usize) -> Option<&'static str> {
        tables
            .iter()
            .flat_map(|t| t.iter())
            .find(|e| e.f64 == f64 && e.side == side)
            .map(|e| e.name)
    }

    /// `cluda_prepare_f64` (`f64`) or `cluda_prepare_f32`.
    pub fn prepare(f64: bool) -> &'static str {
        // Both precisions are in the list (a test checks every lookup).
        find(&[PREPARE], f64, 0).unwrap_or("")
    }

    /// `cluda_classify_{f64,f32}_{side}`.
    pub fn classify(f64: bool, side: usize) -> Option<&'static str> {
        find(&[CLASSIFY], f64, side)
    }

    /// `cluda_step_{f64,f32}_{side}`.
    pub fn step(f64: bool, side: usize) -> Option<&'static str> {
        find(&[STEP], f64, side)
    }

    /// `cluda_run1_{f64,f32}_{side}`.
    pub fn run(f64: bool, side: usize) -> Option<&'static str> {
        find(&[RUN_REGISTERS, RUN_SHARED], f64, side)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Every family has one kernel per real type (and side), named after both.
        #[test]
        fn every_lookup_names_its_kernel() {
            for f64 in [true, false] {
                let p = if f64 { "f64" } else { "f32" };
                assert_eq!(prepare(f64), format!("cluda_prepare_{p}"));
                for side in SIDES {
                    let name = |f: Option<&str>| f.map(String::from);
                    let want = |family: &str| Some(format!("cluda_{family}_{p}_{side}"));
                    assert_eq!(name(classify(f64, side)), want("classify"));
                    assert_eq!(name(step(f64, side)), want("step"));
                    assert_eq!(name(run(f64, side)), want("run1"));
                }
                assert_eq!(run(f64, 4), None);
            }
        }
    }
}
