//! The lane width and the builds of the band kernel as types: which instruction sets the CPU offers
//! ([`Isa::detect`]) and the zero-sized tokens ([`Build`]) that prove it. A leaf module: the
//! lane operations (`lanes`), the kernels (`band`, `classify`) and the dispatch (`dispatch`)
//! all read it, and it reads none of them.

/// Neighbouring pixels classified together (the SIMD width of the classification).
pub const LANES: usize = 16;

/// The instruction sets the hot loop is compiled for; chosen once per call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Isa {
    /// The target's baseline (SSE2 on x86-64): plain code, vectorised by LLVM.
    Portable,
    /// AVX2 and FMA (with BMI1, BMI2 and POPCNT).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512 F, VL, DQ and BW, on top of [`Isa::Avx2`].
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The best build this CPU runs.
    pub(super) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if Avx512::new().is_some() {
                return Isa::Avx512;
            }
            if Avx2::new().is_some() {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }
}

/// A build of the band kernel, as a type: the lane operations branch on [`Build::ISA`] (a
/// constant, so each build keeps only its own branch). A value of the type proves that the CPU
/// has the build's features.
pub(crate) trait Build: Copy {
    /// The instruction set of this build.
    const ISA: Isa;
}

/// The portable build (every CPU).
#[derive(Clone, Copy)]
pub(crate) struct Portable;

impl Build for Portable {
    const ISA: Isa = Isa::Portable;
}

/// The AVX2 build; only [`Avx2::new`] makes one.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    /// The token, if the CPU has every feature of the AVX2 build.
    pub(crate) fn new() -> Option<Self> {
        use std::is_x86_feature_detected as has;
        (has!("avx2") && has!("fma") && has!("bmi1") && has!("bmi2") && has!("popcnt"))
            .then_some(Avx2(()))
    }
}

#[cfg(target_arch = "x86_64")]
impl Build for Avx2 {
    const ISA: Isa = Isa::Avx2;
}

/// The AVX-512 build; only [`Avx512::new`] makes one.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx512(());

#[cfg(target_arch = "x86_64")]
impl Avx512 {
    /// The token, if the CPU has every feature of the AVX-512 build.
    pub(crate) fn new() -> Option<Self> {
        use std::is_x86_feature_detected as has;
        (has!("avx512f") && has!("avx512vl") && has!("avx512dq") && has!("avx512bw"))
            .then_some(())
            .and(Avx2::new())
            .map(|_| Avx512(()))
    }
}

#[cfg(target_arch = "x86_64")]
impl Build for Avx512 {
    const ISA: Isa = Isa::Avx512;
}
