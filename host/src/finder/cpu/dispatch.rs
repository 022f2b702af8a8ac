//! The call into the build of the band kernel chosen for the CPU.
//!
//! The band kernel ([`band_impl`]) is compiled three times: inside `#[target_feature]` functions
//! for AVX-512 and for AVX2 (x86-64), and once for the target's baseline (portable; the only
//! build elsewhere). The choice is made at run time, once per call ([`Isa::detect`]). Each
//! build is generic over a zero-sized token ([`Build`](super::isa::Build), module `isa`) that
//! the lane operations (module `lanes`) read to pick their instructions; a token value exists
//! only where its features were detected, which is what makes those operations sound.

use super::band::{Band, BandMaps, Setup, band_impl};
#[cfg(target_arch = "x86_64")]
use super::isa::{Avx2, Avx512};
use super::isa::{Isa, Portable};
use super::lanes::Unit;
use crate::pedestal::PixelMaps;

/// Runs one band over the whole pedestal (one band per frame: no halo).
pub(super) fn band_pass<R: Unit, const S: usize>(
    isa: Isa,
    setup: &Setup<R>,
    band: &mut Band<R>,
    frozen_t: &[R],
    frame: &[u16],
    maps: &mut PixelMaps<R>,
) {
    let mut own = BandMaps {
        a: &mut maps.a,
        b: &mut maps.b,
        base: &maps.base,
        inv: maps.inv,
    };
    band_pass_split::<R, S>(isa, setup, band, frozen_t, frame, &mut own);
}

/// Dispatches to the build of [`band_impl`] for `isa`. Every build performs the same IEEE
/// operations; only the instructions differ.
pub(super) fn band_pass_split<R: Unit, const S: usize>(
    isa: Isa,
    setup: &Setup<R>,
    band: &mut Band<R>,
    frozen_t: &[R],
    frame: &[u16],
    own: &mut BandMaps<'_, R>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,bmi1,bmi2,popcnt")]
        fn avx512<R: Unit, const S: usize>(
            token: Avx512,
            setup: &Setup<R>,
            band: &mut Band<R>,
            frozen_t: &[R],
            frame: &[u16],
            own: &mut BandMaps<'_, R>,
        ) {
            band_impl::<R, S, Avx512>(token, setup, band, frozen_t, frame, own)
        }
        #[target_feature(enable = "avx2,fma,bmi1,bmi2,popcnt")]
        fn avx2<R: Unit, const S: usize>(
            token: Avx2,
            setup: &Setup<R>,
            band: &mut Band<R>,
            frozen_t: &[R],
            frame: &[u16],
            own: &mut BandMaps<'_, R>,
        ) {
            band_impl::<R, S, Avx2>(token, setup, band, frozen_t, frame, own)
        }
        match isa {
            Isa::Avx512 => {
                if let Some(token) = Avx512::new() {
                    // SAFETY: the token proves the CPU has the features.
                    return unsafe { avx512::<R, S>(token, setup, band, frozen_t, frame, own) };
                }
            }
            Isa::Avx2 => {
                if let Some(token) = Avx2::new() {
                    // SAFETY: as above.
                    return unsafe { avx2::<R, S>(token, setup, band, frozen_t, frame, own) };
                }
            }
            Isa::Portable => {}
        }
    }
    let _ = isa;
    band_impl::<R, S, Portable>(Portable, setup, band, frozen_t, frame, own)
}

#[cfg(test)]
mod tests {
    use super::super::lanes::LANES;
    use super::*;
    use crate::frames::Frames;
    use crate::pedestal::{Pedestal, ReadyState};

    /// Every build the CPU can run gives the same result (the portable one included).
    #[test]
    fn builds_agree() {
        let (rows, cols) = (37, 53);
        let (dark, data) = crate::testing::generated(rows, cols, 3, 10, 4);
        let mut isas = vec![Isa::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if Avx2::new().is_some() {
                isas.push(Isa::Avx2);
            }
            if Avx512::new().is_some() {
                isas.push(Isa::Avx512);
            }
        }
        let mut results = Vec::new();
        for &isa in &isas {
            let mut ped = Pedestal::new(rows, cols, 10, crate::Precision::F32).expect("pedestal");
            ped.push_frames(Frames::new(&dark, 10, rows, cols).expect("frames"))
                .expect("push");
            let Ok(ReadyState::F32(maps)) = ped.ready_mut() else {
                panic!("not ready")
            };
            let setup = Setup {
                rows,
                cols,
                w: cols.div_ceil(LANES) * LANES,
                stride: cols.div_ceil(LANES) * LANES + 8,
                n_sigma: 5.0f32,
                live: true,
                base_zero: false,
            };
            let mut band = Band {
                y0: 0,
                y1: rows,
                c: vec![0.0; 9 * setup.stride],
                hmax: vec![0.0; 9 * setup.w],
                hsum: vec![0.0; 9 * setup.w],
                mrow: vec![0.0; 9],
                halo_top: Vec::new(),
                halo_bottom: Vec::new(),
                out: Vec::new(),
            };
            let mut words = Vec::new();
            for f in data.chunks(rows * cols) {
                band_pass::<f32, 9>(isa, &setup, &mut band, &[], f, maps);
                words.extend_from_slice(&band.out);
            }
            results.push((words, maps.clone()));
        }
        assert!(
            results.iter().all(|r| *r == results[0]),
            "builds differ: {isas:?}"
        );
        assert!(!results[0].0.is_empty());
    }
}
