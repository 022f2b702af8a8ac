//! The pictures: spectrum, hit map, pedestal mean and noise maps from generated MOENCH frames,
//! fed through `PlotAccumulator` from a finder's visitor. Set `CLUDA_KEEP_PLOTS=DIR` to keep
//! the PNGs for looking at them.

use std::path::PathBuf;

use cluda::generate::{GenConfig, Generator};
use cluda::plot::{PNG_SIZE, PlotAccumulator};
use cluda::{ClusterFinder, CpuFinder, FinderConfig, Frames};

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
