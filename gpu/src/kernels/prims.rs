//! Warp and shared-memory primitives of every kernel: votes, sums and shuffles across a warp,
//! loads and stores in the shared window, and the declaration of a kernel's shared arrays.
//!
//! Each is one PTX instruction in inline assembly (the NVPTX backend has no intrinsic for
//! some, and the assembly pins the exact instruction). All lanes of the warp must call the
//! warp ones (`.sync` with the full mask).

use core::arch::asm;

/// Declares a 16-byte aligned shared array of `$bytes` bytes (a `usize` constant) named
/// `$name` in the calling kernel and returns its address: in the shared window with `window`
/// (`mov`), or as a generic address with `generic` (`cvta.shared`). Call once per array, at
/// the kernel's top; names must be unique in the module.
macro_rules! shared_array {
    (window $name:expr, $bytes:expr) => {
        $crate::kernels::prims::shared_array!(@declare "mov.u64", $name, $bytes)
    };
    (generic $name:expr, $bytes:expr) => {
        $crate::kernels::prims::shared_array!(@declare "cvta.shared.u64", $name, $bytes)
    };
    // The array, and its address by `$ins` (`mov` or `cvta.shared`).
    (@declare $ins:literal, $name:expr, $bytes:expr) => {{
        let p: u64;
        // SAFETY: declares a new shared array (the caller keeps names unique) and reads its
        // address (`cvta.shared` only converts it); no memory is touched.
        unsafe {
            core::arch::asm!(
                concat!(".shared .align 16 .b8 ", $name, "[{n}];"),
                concat!($ins, " {p}, ", $name, ";"),
                n = const $bytes,
                p = out(reg64) p,
            );
        }
        p
    }};
}
pub(crate) use shared_array;

/// Bit mask of the lanes of the calling warp whose `flag` is true.
#[inline(always)]
pub(crate) unsafe fn ballot(flag: bool) -> u32 {
    let m: u32;
    // SAFETY: a warp-synchronous instruction with the full mask, which the caller
    // guarantees: every lane of the warp executes this call.
    unsafe {
        asm!(
            "{{",
            ".reg .pred %cluda_p;",
            "setp.ne.u32 %cluda_p, {f}, 0;",
            "vote.sync.ballot.b32 {m}, %cluda_p, 0xffffffff;",
            "}}",
            f = in(reg32) flag as u32,
            m = out(reg32) m,
        );
    }
    m
}

/// The `u32` result `{r}` of the one PTX instruction `$ins`, whose inputs `{name}` are the
/// given 32-bit values, with the `asm!` options `$opt` (none: a warp-synchronous instruction
/// must not be moved or merged).
macro_rules! asm_u32 {
    ($ins:literal, $($name:ident = $v:expr),+ $(; $($opt:ident),*)?) => {{
        let r: u32;
        // SAFETY: the instruction's contract is that of the function this expands in, which
        // its caller keeps (for the warp-synchronous ones: every lane of the warp executes it,
        // as the full mask says).
        unsafe {
            core::arch::asm!($ins, r = out(reg32) r, $($name = in(reg32) $v,)+ $(options($($opt),*))?)
        };
        r
    }};
}
// Outside this file for V4's fused kernels' TF32 conversion.
#[cfg(feature = "experimental")]
pub(crate) use asm_u32;

/// The (wrapping) sum of `v` over the warp, in every lane (sm_80's `redux`).
#[inline(always)]
pub(crate) unsafe fn warp_sum(v: u32) -> u32 {
    asm_u32!("redux.sync.add.u32 {r}, {v}, 0xffffffff;", v = v)
}

/// Lane `src`'s `v`, in every lane.
#[inline(always)]
pub(crate) unsafe fn shfl_idx(v: u32, src: u32) -> u32 {
    asm_u32!("shfl.sync.idx.b32 {r}, {v}, {s}, 31, -1;", v = v, s = src)
}

/// Butterfly shuffle: the `v` of lane `lane ^ mask`, in every lane.
#[inline(always)]
pub(crate) unsafe fn shfl_xor_u32(v: u32, mask: u32) -> u32 {
    asm_u32!("shfl.sync.bfly.b32 {r}, {v}, {m}, 31, -1;", v = v, m = mask)
}

/// [`shfl_xor_u32`] of an `f32`'s bits.
#[inline(always)]
pub(crate) unsafe fn shfl_xor_f32(v: f32, mask: u32) -> f32 {
    // SAFETY: the caller's contract (every lane of the warp calls this), passed on.
    f32::from_bits(unsafe { shfl_xor_u32(v.to_bits(), mask) })
}

/// Declares the load `$ld` and the store `$st` of a `$t` (PTX type `$ptx`, in `$reg`
/// registers) at a shared-window address `a`, which the caller passes inside a shared array of
/// this kernel, aligned for the access.
macro_rules! shared_word {
    ($t:ty, $ptx:literal, $reg:ident, $(#[$lm:meta])* $ld:ident, $(#[$sm:meta])* $st:ident) => {
        $(#[$lm])*
        #[inline(always)]
        pub(crate) unsafe fn $ld(a: u64) -> $t {
            let v: $t;
            // SAFETY: the caller passes an address inside a shared array of this kernel,
            // aligned for the access.
            unsafe {
                asm!(concat!("ld.shared.", $ptx, " {v}, [{a}];"), v = out($reg) v, a = in(reg64) a)
            };
            v
        }

        $(#[$sm])*
        #[inline(always)]
        pub(crate) unsafe fn $st(a: u64, v: $t) {
            // SAFETY: the caller passes an address inside a shared array of this kernel,
            // aligned for the access.
            unsafe {
                asm!(concat!("st.shared.", $ptx, " [{a}], {v};"), a = in(reg64) a, v = in($reg) v)
            };
        }
    };
}

shared_word!(u32, "u32", reg32,
    /// Loads the word at shared-window address `a`.
    ld_shared_u32,
    /// Stores `v` at shared-window address `a`.
    st_shared_u32
);
shared_word!(u64, "u64", reg64,
    /// Loads the 8-byte word at shared-window address `a`.
    ld_shared_u64,
    /// Stores the 8-byte word `v` at shared-window address `a`.
    st_shared_u64
);

/// Four consecutive floats loaded by `$ld` (a `.v4.f32` load instruction) from the address
/// `$p`, with the `asm!` options `$opt`.
macro_rules! ld_f32x4 {
    ($ld:literal, $p:expr, $($opt:ident),*) => {{
        let (a, b, c, d): (f32, f32, f32, f32);
        // SAFETY: the caller of the function this expands in passes a 16-byte aligned address
        // of four floats in the instruction's state space.
        unsafe {
            asm!(
                concat!($ld, " {{{a}, {b}, {c}, {d}}}, [{p}];"),
                p = in(reg64) $p,
                a = out(reg32) a,
                b = out(reg32) b,
                c = out(reg32) c,
                d = out(reg32) d,
                options($($opt),*),
            );
        }
        [a, b, c, d]
    }};
}

/// Loads four consecutive floats from shared memory (16-byte aligned address inside a shared
/// array of this kernel).
#[inline(always)]
pub(crate) unsafe fn ld_shared_f32x4(addr: u64) -> [f32; 4] {
    ld_f32x4!("ld.shared.v4.f32", addr, readonly, nostack)
}

/// Loads four consecutive floats from global memory through the read-only (non-coherent)
/// path (16-byte aligned address of data no kernel of the launch writes).
#[inline(always)]
pub(crate) unsafe fn ld_global_nc_f32x4(addr: *const f32) -> [f32; 4] {
    ld_f32x4!("ld.global.nc.v4.f32", addr, pure, readonly, nostack)
}

/// Stores one float to shared memory.
#[inline(always)]
pub(crate) unsafe fn st_shared_f32(addr: u64, v: f32) {
    // SAFETY: the caller passes a 4-byte aligned address inside a shared array of this
    // kernel.
    unsafe {
        asm!("st.shared.f32 [{p}], {v};", p = in(reg64) addr, v = in(reg32) v, options(nostack));
    }
}

/// Sleeps about `ns` nanoseconds (a back-off while spinning on a word another block writes).
#[inline(always)]
pub(crate) unsafe fn nanosleep(ns: u32) {
    // SAFETY: `nanosleep` only delays the calling thread.
    unsafe { asm!("nanosleep.u32 {t};", t = in(reg32) ns) };
}
