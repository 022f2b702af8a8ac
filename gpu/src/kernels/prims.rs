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
    (window $name:expr, $bytes:expr) => {{
        let p: u64;
        // SAFETY: declares a new shared array (the caller keeps names unique) and reads its
        // address; no memory is touched.
        unsafe {
            core::arch::asm!(
                concat!(".shared .align 16 .b8 ", $name, "[{n}];"),
                concat!("mov.u64 {p}, ", $name, ";"),
                n = const $bytes,
                p = out(reg64) p,
            );
        }
        p
    }};
    (generic $name:expr, $bytes:expr) => {{
        let p: u64;
        // SAFETY: as the `window` form; `cvta.shared` only converts the address.
        unsafe {
            core::arch::asm!(
                concat!(".shared .align 16 .b8 ", $name, "[{n}];"),
                concat!("cvta.shared.u64 {p}, ", $name, ";"),
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

/// The (wrapping) sum of `v` over the warp, in every lane (sm_80's `redux`).
#[inline(always)]
pub(crate) unsafe fn warp_sum(v: u32) -> u32 {
    let s: u32;
    // SAFETY: a warp-synchronous instruction with the full mask, which the caller
    // guarantees: every lane of the warp executes this call.
    unsafe {
        asm!(
            "redux.sync.add.u32 {s}, {v}, 0xffffffff;",
            s = out(reg32) s,
            v = in(reg32) v,
        );
    }
    s
}

/// Lane `src`'s `v`, in every lane.
#[inline(always)]
pub(crate) unsafe fn shfl_idx(v: u32, src: u32) -> u32 {
    let r: u32;
    // SAFETY: a warp-synchronous instruction with the full mask, which the caller
    // guarantees: every lane of the warp executes this call.
    unsafe {
        asm!(
            "shfl.sync.idx.b32 {r}, {v}, {s}, 31, -1;",
            r = out(reg32) r,
            v = in(reg32) v,
            s = in(reg32) src,
        );
    }
    r
}

/// Butterfly shuffle: the `v` of lane `lane ^ mask`, in every lane.
#[inline(always)]
pub(crate) unsafe fn shfl_xor_u32(v: u32, mask: u32) -> u32 {
    let r: u32;
    // SAFETY: a warp-synchronous instruction with the full mask, which the caller
    // guarantees: every lane of the warp executes this call.
    unsafe {
        asm!(
            "shfl.sync.bfly.b32 {r}, {v}, {m}, 31, -1;",
            r = out(reg32) r,
            v = in(reg32) v,
            m = in(reg32) mask,
        );
    }
    r
}

/// [`shfl_xor_u32`] of an `f32`'s bits.
#[inline(always)]
pub(crate) unsafe fn shfl_xor_f32(v: f32, mask: u32) -> f32 {
    // SAFETY: the caller's contract (every lane of the warp calls this), passed on.
    f32::from_bits(unsafe { shfl_xor_u32(v.to_bits(), mask) })
}

/// Loads the word at shared-window address `a`.
#[inline(always)]
pub(crate) unsafe fn ld_shared_u32(a: u64) -> u32 {
    let v: u32;
    // SAFETY: the caller passes an address inside a shared array of this kernel, aligned
    // for the access.
    unsafe { asm!("ld.shared.u32 {v}, [{a}];", v = out(reg32) v, a = in(reg64) a) };
    v
}

/// Stores `v` at shared-window address `a`.
#[inline(always)]
pub(crate) unsafe fn st_shared_u32(a: u64, v: u32) {
    // SAFETY: the caller passes an address inside a shared array of this kernel, aligned
    // for the access.
    unsafe { asm!("st.shared.u32 [{a}], {v};", a = in(reg64) a, v = in(reg32) v) };
}

/// Loads the 8-byte word at shared-window address `a`.
#[inline(always)]
pub(crate) unsafe fn ld_shared_u64(a: u64) -> u64 {
    let v: u64;
    // SAFETY: the caller passes an address inside a shared array of this kernel, aligned
    // for the access.
    unsafe { asm!("ld.shared.u64 {v}, [{a}];", v = out(reg64) v, a = in(reg64) a) };
    v
}

/// Stores the 8-byte word `v` at shared-window address `a`.
#[inline(always)]
pub(crate) unsafe fn st_shared_u64(a: u64, v: u64) {
    // SAFETY: the caller passes an address inside a shared array of this kernel, aligned
    // for the access.
    unsafe { asm!("st.shared.u64 [{a}], {v};", a = in(reg64) a, v = in(reg64) v) };
}

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
