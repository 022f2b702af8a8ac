//! The pictures: spectrum, hit map, pedestal mean and noise maps from generated MOENCH frames,
//! fed through `PlotAccumulator` from a finder's visitor. Set `CLUDA_KEEP_PLOTS=DIR` to keep
//! the PNGs for looking at them.

use std::path::PathBuf;

use cluda::generate::{GenConfig, Generator};
use cluda::plot::{MAX_SPECTRUM_BINS, PNG_SIZE, PlotAccumulator, SpectrumOptions};
use cluda::{ClusterFinder, ClusterSize, CpuFinder, Error, FinderConfig, Frames};

/// Width and height from a PNG's IHDR chunk, after checking the signature.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

#[test]
fn plots_from_generated_frames() {
    let (rows, cols) = (400, 400);
    let g = Generator::new(GenConfig::new(rows, cols, 11)).unwrap();
    let cfg = FinderConfig::new(rows, cols).pedestal_frames(100);
    let mut finder = CpuFinder::new(cfg).unwrap();
    let dark = g.frames(0, 100, false);
    finder
        .push_pedestal(Frames::new(&dark, 100, rows, cols).unwrap())
        .unwrap();
    let data = g.frames(100, 20, true);
    let mut acc = PlotAccumulator::new(rows, cols);
    finder
        .find_each(Frames::new(&data, 20, rows, cols).unwrap(), &mut |fc| {
            acc.add(&fc);
            Ok(())
        })
        .unwrap();
    assert_eq!(acc.frames(), 20);
    // The photon peak: the fullest bin above 100 ADU is near the generator's 400 ADU.
    let peak = acc.spectrum().peak_from(100.0).unwrap();
    assert!((330.0..=480.0).contains(&peak), "peak at {peak} ADU");
    assert!(acc.hits().iter().map(|&h| h as u64).sum::<u64>() > 20 * 1000);

    let keep = std::env::var_os("CLUDA_KEEP_PLOTS").map(PathBuf::from);
    let dir = keep
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("cluda-plot-{}", std::process::id())));
    let files = acc.finish(finder.pedestal_ref(), &dir).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "spectrum.png",
            "hitmap.png",
            "pedestal_mean.png",
            "pedestal_noise.png"
        ]
    );
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        assert_eq!(png_size(&bytes), PNG_SIZE, "{f:?}");
        assert!(bytes.len() > 10_000, "{f:?} is suspiciously small");
    }
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_wrongly_shaped_pedestal_is_refused() {
    let p = cluda::Pedestal::new(10, 10, 1, cluda::Precision::F64).unwrap();
    let acc = PlotAccumulator::new(20, 20);
    let err = acc.finish(&p, &std::env::temp_dir()).unwrap_err();
    assert!(matches!(err, cluda::Error::Shape { .. }), "{err}");
}

/// Finds the clusters of `frames` generated frames (after 100 dark ones) with `size` and
/// feeds them to an accumulator built with `options`.
fn accumulate(size: ClusterSize, frames: usize, options: &SpectrumOptions) -> PlotAccumulator {
    let (rows, cols) = (200, 200);
    let g = Generator::new(GenConfig::new(rows, cols, 5)).unwrap();
    let cfg = FinderConfig::new(rows, cols)
        .size(size)
        .pedestal_frames(100);
    let mut finder = CpuFinder::new(cfg).unwrap();
    let dark = g.frames(0, 100, false);
    finder
        .push_pedestal(Frames::new(&dark, 100, rows, cols).unwrap())
        .unwrap();
    let data = g.frames(100, frames, true);
    let mut acc = PlotAccumulator::with_options(rows, cols, options).unwrap();
    finder
        .find_each(Frames::new(&data, frames, rows, cols).unwrap(), &mut |fc| {
            acc.add(&fc);
            Ok(())
        })
        .unwrap();
    acc
}

#[test]
fn the_default_range_follows_the_cluster_size() {
    let opts = SpectrumOptions::default();
    let small = accumulate(ClusterSize::S3, 20, &opts).spectrum();
    let large = accumulate(ClusterSize::S9, 20, &opts).spectrum();
    for (name, h) in [("3x3", &small), ("9x9", &large)] {
        let outside = (h.underflow + h.overflow) as f64 / h.total() as f64;
        assert!(h.total() > 1000, "{name}: only {} clusters", h.total());
        assert!(
            outside < 0.005,
            "{name}: {outside} of the sums outside [{}, {})",
            h.min,
            h.max
        );
        assert_eq!(h.counts.len(), 400);
    }
    // 81 pixels of noise spread the sums far more than 9 do.
    assert!(
        large.max - large.min > 1.5 * (small.max - small.min),
        "3x3 [{}, {}), 9x9 [{}, {})",
        small.min,
        small.max,
        large.min,
        large.max
    );
    // A fixed range is kept as given.
    let fixed = SpectrumOptions {
        range: Some((-100.0, 1000.0)),
        bins: 55,
        log: false,
    };
    let h = accumulate(ClusterSize::S3, 5, &fixed).spectrum();
    assert_eq!((h.min, h.max, h.counts.len()), (-100.0, 1000.0, 55));
}

#[test]
fn a_log_spectrum_is_drawn() {
    let opts = SpectrumOptions {
        log: true,
        ..SpectrumOptions::default()
    };
    let acc = accumulate(ClusterSize::S5, 10, &opts);
    let g = Generator::new(GenConfig::new(200, 200, 5)).unwrap();
    let mut p = cluda::Pedestal::new(200, 200, 100, cluda::Precision::F64).unwrap();
    p.push_frames(Frames::new(&g.frames(0, 100, false), 100, 200, 200).unwrap())
        .unwrap();
    let dir = std::env::temp_dir().join(format!("cluda-plot-log-{}", std::process::id()));
    let files = acc.finish(&p, &dir).unwrap();
    let bytes = std::fs::read(&files[0]).unwrap();
    assert_eq!(png_size(&bytes), PNG_SIZE);
    assert!(bytes.len() > 10_000);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_spectrum_options_are_refused_by_name() {
    let name_of = |o: SpectrumOptions| match PlotAccumulator::with_options(10, 10, &o) {
        Err(Error::InvalidParameter { name, .. }) => name,
        other => panic!("{o:?} gave {other:?}"),
    };
    for bins in [0, MAX_SPECTRUM_BINS + 1] {
        let o = SpectrumOptions {
            bins,
            ..SpectrumOptions::default()
        };
        assert_eq!(name_of(o), "spectrum-bins");
    }
    for range in [
        (1.0, 1.0),
        (2.0, 1.0),
        (f64::NAN, 1.0),
        (0.0, f64::INFINITY),
    ] {
        let o = SpectrumOptions {
            range: Some(range),
            ..SpectrumOptions::default()
        };
        assert_eq!(name_of(o), "spectrum-range");
    }
    let ok = SpectrumOptions {
        range: Some((-1.0, 1.0)),
        bins: MAX_SPECTRUM_BINS,
        log: true,
    };
    assert!(PlotAccumulator::with_options(10, 10, &ok).is_ok());
}
