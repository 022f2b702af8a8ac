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

/// An x86-64 build's token type `$name` (build `$isa`), made only by `new` where the CPU has
/// every one of the features listed.
macro_rules! x86_build {
    ($(#[$doc:meta])* $name:ident, $isa:expr, [$($feature:tt),+ $(,)?]) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[derive(Clone, Copy)]
        pub(crate) struct $name(());

        #[cfg(target_arch = "x86_64")]
        impl $name {
            /// The token, if the CPU has every feature of this build.
            pub(crate) fn new() -> Option<Self> {
                use std::is_x86_feature_detected as has;
                ($(has!($feature))&&+).then_some($name(()))
            }
        }

        #[cfg(target_arch = "x86_64")]
        impl Build for $name {
            const ISA: Isa = $isa;
        }
    };
}

x86_build!(
    /// The AVX2 build; only [`Avx2::new`] makes one.
    Avx2,
    Isa::Avx2,
    ["avx2", "fma", "bmi1", "bmi2", "popcnt"]
);

x86_build!(
    /// The AVX-512 build (the AVX2 build's features too); only [`Avx512::new`] makes one.
    Avx512,
    Isa::Avx512,
    [
        "avx512f", "avx512vl", "avx512dq", "avx512bw", "avx2", "fma", "bmi1", "bmi2", "popcnt"
    ]
);
