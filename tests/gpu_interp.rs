//! Eta cubes and sub-pixel images accumulated on the GPU, in the finder's output stage,
//! against the host's counts of the same clusters (needs a CUDA GPU: every test is ignored
//! elsewhere; run with `--include-ignored`). Counts are integers: equal means equal.

use std::sync::{Arc, OnceLock};

use cluda::cluster::ClusterSize;
use cluda::finder::gpu::{DeviceAccum, DeviceClusters, GpuFinder, Overflow, PipelineConfig};
use cluda::interpolation::{
    Accumulate, AccumulatedCounts, CubeAxes, EnergyWindow, EtaCube, EtaKind, Interpolator, MapKind,
    PixelMask, PlaceRows, Placer, SubpixelImage, Tally,
};
use cluda::{ClusterBatch, ClusterFinder, Precision, ThresholdMode};
use support::gpu_vs_cpu::{Data, cpu_finder, device, gpu_finder};

/// 300 MOENCH-like 200x200 frames after a 300-frame pedestal, generated once.
fn data() -> &'static Data {
    static D: OnceLock<Data> = OnceLock::new();
    D.get_or_init(|| Data::new(200, 200, 31, 300, 300))
}

/// The GPU's clusters of every data frame, with `what` accumulated on the device, and what it
/// accumulated; `cap` small forces the pipeline to regrow (and redo chunks) on the way.
fn gpu_run(
    size: ClusterSize,
    what: &Accumulate,
    cap: Option<usize>,
) -> (ClusterBatch, cluda::interpolation::Accumulated) {
    let mut f = finder(size, cap);
    assert!(
        f.accumulate(what).unwrap(),
        "the default pipeline accumulates on the device"
    );
    assert!(
        !f.accumulate(what).unwrap(),
        "a second accumulation is declined while the first is under way"
    );
    let batch = f.find(data().data()).unwrap();
    let acc = f
        .take_accumulated()
        .unwrap()
        .expect("something accumulated");
    assert_eq!(
        f.take_accumulated().unwrap(),
        None,
        "taking stops accumulating"
    );
    (batch, acc)
}

/// The GPU finder of `size` over [`data`]; `cap` small (with chunks of 16 frames that regrow)
/// forces the pipeline to regrow and redo chunks on the way.
fn finder(size: ClusterSize, cap: Option<usize>) -> GpuFinder {
    let d = data();
    let cfg = d.config(size, Precision::F64, ThresholdMode::Live);
    let mut pipe = PipelineConfig::default();
    if let Some(c) = cap {
        pipe.cap = c;
        pipe.overflow = Overflow::Grow;
        pipe.chunk = 16;
    }
    gpu_finder(&cfg, pipe, d)
}

/// What placing needs, for the clusters of `size` with `kind`'s eta and `map`'s maps: the maps
/// (from the host's cube of the GPU's clusters), a mask of every `mask_step`-th pixel and the
/// 100..700 energy window (so both the mask's and the window's flags are exercised).
fn maps_mask_window(
    size: ClusterSize,
    kind: EtaKind,
    map: MapKind,
    mask_step: usize,
) -> (Arc<Interpolator>, Arc<PixelMask>, Option<EnergyWindow>) {
    let axes = CubeAxes::default_for(kind);
    let (flat, _) = gpu_run(size, &Accumulate::Cube(axes.clone()), None);
    let cube = host_cube(&axes, &flat);
    let maps = Arc::new(Interpolator::new(axes, &cube.to_f64(), map).unwrap());
    let mut bad = vec![false; data().px()];
    for i in (0..bad.len()).step_by(mask_step) {
        bad[i] = true;
    }
    let mask = Arc::new(PixelMask::new(200, 200, bad).unwrap());
    let window = Some(EnergyWindow::new(100.0, 700.0).unwrap());
    (maps, mask, window)
}

fn host_cube(axes: &CubeAxes, batch: &ClusterBatch) -> EtaCube {
    let mut cube = EtaCube::new(axes.clone()).unwrap();
    for fc in batch.iter_frames() {
        cube.add_frame(&fc).unwrap();
    }
    cube
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_eta_cube_equals_host_every_kind_and_size() {
    for size in [ClusterSize::S3, ClusterSize::S5, ClusterSize::S9] {
        for kind in EtaKind::ALL {
            let axes = CubeAxes::default_for(kind);
            let (batch, acc) = gpu_run(size, &Accumulate::Cube(axes.clone()), None);
            let cube = host_cube(&axes, &batch);
            assert!(
                cube.tally().inside > 1000,
                "{size} {kind:?}: too few clusters"
            );
            assert_eq!(&acc.tally, cube.tally(), "{size} {kind:?}: tally");
            assert!(
                acc.counts == AccumulatedCounts::Cube(cube.counts().to_vec()),
                "{size} {kind:?}: counts differ"
            );
            println!("gpu == host: {size} {kind:?} {}", cube.tally().summary());
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_eta_cube_with_energy_bins_and_regrow_equals_host() {
    let mut axes = CubeAxes::default_for(EtaKind::Eta2);
    axes.e =
        cluda::interpolation::Edges::new("ebins", vec![0.0, 150.0, 300.0, 450.0, 800.0]).unwrap();
    // A cap of 2 clusters per frame overflows at once: chunks are regrown and redone.
    let (batch, acc) = gpu_run(ClusterSize::S3, &Accumulate::Cube(axes.clone()), Some(2));
    let cube = host_cube(&axes, &batch);
    assert!(cube.tally().energy_outside > 0);
    assert_eq!(&acc.tally, cube.tally());
    assert!(
        acc.counts == AccumulatedCounts::Cube(cube.counts().to_vec()),
        "counts differ after regrowing"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_image_equals_host_maps_masks_windows() {
    for (size, kind, map, n) in [
        (ClusterSize::S3, EtaKind::Eta2, MapKind::Cumulative, 4),
        (ClusterSize::S3, EtaKind::FullEta2, MapKind::Rosenblatt, 10),
        (ClusterSize::S5, EtaKind::Eta3, MapKind::Cumulative, 1),
        (ClusterSize::S9, EtaKind::CrossEta3, MapKind::Rosenblatt, 32),
    ] {
        let (maps, mask, window) = maps_mask_window(size, kind, map, 97);
        let what = Accumulate::Image {
            maps: maps.clone(),
            subpixels: n,
            window,
            mask: Some(mask.clone()),
        };
        let (batch, acc) = gpu_run(size, &what, None);
        let placer = Placer {
            maps: &maps,
            window,
            mask: Some(&mask),
            gain: None,
        };
        let mut img = SubpixelImage::new(200, 200, n).unwrap();
        let mut tally = Tally::default();
        let mut photons = Vec::new();
        for (i, fc) in batch.iter_frames().enumerate() {
            photons.clear();
            placer.place_frame(i as i64, &fc, &mut tally, &mut photons);
            for p in photons.iter().filter(|p| p.flags == 0) {
                let (x, y) = (p.x, p.y);
                img.add(x, y);
            }
        }
        assert!(
            tally.masked > 0 && tally.window > 0,
            "mask and window were exercised"
        );
        assert_eq!(acc.tally, tally, "{size} {kind:?} {map:?} N={n}: tally");
        let AccumulatedCounts::Image(counts) = acc.counts else {
            panic!("{size} {kind:?} {map:?} N={n}: the device accumulated no image");
        };
        // Added twice: once into an empty image (taken as they are), once more (summed).
        let mut gpu = SubpixelImage::new(200, 200, n).unwrap();
        gpu.add_counts(counts.clone()).unwrap();
        assert!(gpu == img, "{size} {kind:?} {map:?} N={n}: images differ");
        gpu.add_counts(counts).unwrap();
        img.add_image(&img.clone()).unwrap();
        assert!(gpu == img, "{size} {kind:?} {map:?} N={n}: images differ");
        println!(
            "gpu == host image: {size} {kind:?} {map:?} N={n} {} photons counted",
            img.total()
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_image_of_resident_clusters_equals_host() {
    // Clusters found on the CPU, uploaded as compact results and counted twice with
    // `DeviceAccum::count` (what benches/interp_step.rs times): twice the host's image.
    let d = data();
    let size = ClusterSize::S3;
    let batch = cpu_finder(&d.config(size, Precision::F64, ThresholdMode::Live), d)
        .find(d.data())
        .unwrap();
    let axes = CubeAxes::default_for(EtaKind::Eta2);
    let cube = host_cube(&axes, &batch);
    let maps = Arc::new(Interpolator::new(axes, &cube.to_f64(), MapKind::Cumulative).unwrap());
    let what = Accumulate::Image {
        maps: maps.clone(),
        subpixels: 4,
        window: None,
        mask: None,
    };
    let dev = device();
    let stream = dev.context().new_stream().unwrap();
    let clusters = DeviceClusters::upload(&stream, &batch).unwrap();
    assert_eq!(clusters.len(), batch.total());
    let acc = DeviceAccum::new(&dev, &stream, &what, size, 200, 200).unwrap();
    acc.count(&stream, &clusters).unwrap();
    acc.count(&stream, &clusters).unwrap();
    let got = acc.take(&stream).unwrap();
    let placer = Placer {
        maps: &maps,
        window: None,
        mask: None,
        gain: None,
    };
    let mut img = SubpixelImage::new(200, 200, 4).unwrap();
    let (mut tally, mut photons) = (Tally::default(), Vec::new());
    for _ in 0..2 {
        for (i, fc) in batch.iter_frames().enumerate() {
            photons.clear();
            placer.place_frame(i as i64, &fc, &mut tally, &mut photons);
            for p in photons.iter().filter(|p| p.flags == 0) {
                img.add(p.x, p.y);
            }
        }
    }
    assert_eq!(got.tally, tally);
    let mut gpu = SubpixelImage::new(200, 200, 4).unwrap();
    let AccumulatedCounts::Image(counts) = got.counts else {
        panic!("the device accumulated no image");
    };
    gpu.add_counts(counts).unwrap();
    assert!(gpu == img, "images differ");
    let other = DeviceAccum::new(&dev, &stream, &what, ClusterSize::S5, 200, 200).unwrap();
    assert!(
        other.count(&stream, &clusters).is_err(),
        "a size mismatch is refused"
    );
}

/// A sub-pixel image read mid-input without stopping the accumulation: by
/// `peek_accumulated` between find calls, and through `accumulation_peek` from the visitor of
/// a streaming run (answered by the pipeline between chunks). Every copy is the host's image
/// (and tally) of the frames found before it, and the image taken at the end is the whole
/// input's, as without copies.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_image_peeks_mid_input_equal_host_counts_so_far() {
    let d = data();
    let size = ClusterSize::S3;
    let cfg = d.config(size, Precision::F64, ThresholdMode::Live);
    let all = cpu_finder(&cfg, d).find(d.data()).unwrap();
    let axes = CubeAxes::default_for(EtaKind::Eta2);
    let cube = host_cube(&axes, &all);
    let maps = Arc::new(Interpolator::new(axes, &cube.to_f64(), MapKind::Cumulative).unwrap());
    let n = 5;
    let what = Accumulate::Image {
        maps: maps.clone(),
        subpixels: n,
        window: None,
        mask: None,
    };
    let placer = Placer {
        maps: &maps,
        window: None,
        mask: None,
        gain: None,
    };
    // The host's image and tally of the first `frames` data frames.
    let host = |frames: usize| -> (SubpixelImage, Tally) {
        let mut img = SubpixelImage::new(200, 200, n).unwrap();
        let (mut tally, mut photons) = (Tally::default(), Vec::new());
        for (i, fc) in all.iter_frames().take(frames).enumerate() {
            photons.clear();
            placer.place_frame(i as i64, &fc, &mut tally, &mut photons);
            for p in photons.iter().filter(|p| p.flags == 0) {
                img.add(p.x, p.y);
            }
        }
        (img, tally)
    };
    let image_of = |a: cluda::interpolation::Accumulated| -> (SubpixelImage, Tally) {
        let AccumulatedCounts::Image(counts) = a.counts else {
            panic!("the device accumulated no image");
        };
        let mut img = SubpixelImage::new(200, 200, n).unwrap();
        img.add_counts(counts).unwrap();
        (img, a.tally)
    };

    // Between find calls.
    let mut f = gpu_finder(&cfg, PipelineConfig::default(), d);
    assert_eq!(f.peek_accumulated().unwrap(), None, "nothing under way");
    assert!(f.accumulation_peek().is_none(), "nothing under way");
    assert!(f.accumulate(&what).unwrap());
    let (img, tally) = image_of(f.peek_accumulated().unwrap().expect("a copy"));
    assert!(img.is_empty() && tally == Tally::default(), "no frame yet");
    let half = d.data_n / 2;
    f.find(d.first(half)).unwrap();
    let (img, tally) = image_of(f.peek_accumulated().unwrap().expect("a copy"));
    let (want, want_tally) = host(half);
    assert!(want.total() > 1000, "too few photons");
    assert_eq!(tally, want_tally, "tally after {half} frames");
    assert!(img == want, "image after {half} frames");
    let rest =
        cluda::Frames::new(&d.data[half * d.px()..], d.data_n - half, d.rows, d.cols).unwrap();
    f.find(rest).unwrap();
    let whole = host(d.data_n);
    assert!(image_of(f.peek_accumulated().unwrap().unwrap()) == whole);
    assert!(
        image_of(f.take_accumulated().unwrap().unwrap()) == whole,
        "taken"
    );

    // From the visitor of a streaming run, chunks of 16 frames.
    let mut f = gpu_finder(&cfg, PipelineConfig::default(), d);
    assert!(f.accumulate(&what).unwrap());
    let peek = f
        .accumulation_peek()
        .expect("the GPU pipeline answers peeks");
    let mut source = cluda::io::MemorySource::new(&d.data[..], d.rows, d.cols).unwrap();
    let config = cluda::engine::EngineConfig {
        chunk: 16,
        slots: 3,
        map: false,
    };
    let asks = [40usize, 150, 250];
    // (frame asked at, frames visited when the answer was taken, the answer)
    let mut answers = Vec::new();
    let mut asked = None;
    let mut seen = 0usize;
    cluda::engine::find_stream(&mut f, &mut source, config, &mut |number, _fc| {
        seen += 1;
        if let Some(a) = peek.take_answer() {
            answers.push((asked.take().expect("an answer unasked"), seen - 1, a?));
        }
        if asks.contains(&(number as usize)) {
            peek.ask();
            asked = Some(number as usize);
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(answers.len(), asks.len(), "one answer per request");
    // Clusters of the first k frames, k = 0 ..= frames.
    let mut prefix = vec![0u64];
    for fc in all.iter_frames() {
        prefix.push(prefix.last().unwrap() + fc.len() as u64);
    }
    for (at, taken, a) in answers {
        let (img, tally) = image_of(a);
        // Answered after the chunk that held the frame asked at, before the frames visited
        // when it was taken.
        let k = (at + 1..=taken)
            .find(|&k| prefix[k] == tally.clusters)
            .unwrap_or_else(|| panic!("asked at frame {at}: {} clusters", tally.clusters));
        let (want, want_tally) = host(k);
        assert_eq!(tally, want_tally, "asked at frame {at}: tally");
        assert!(img == want, "asked at frame {at}: image of {k} frames");
        println!("peek asked at frame {at}: the image of the first {k} frames");
    }
    assert!(
        image_of(f.take_accumulated().unwrap().unwrap()) == whole,
        "taken"
    );
}

/// Rows placed on the device right after each chunk's kernels
/// (`ClusterFinder::place_rows`): every frame's rows are the host placer's photons of its
/// clusters, bit for bit (positions, energy, flags), with a mask and a window exercising the
/// flags, through a regrowing pipeline (overflowing chunks are redone and placed again) and
/// beside an image counted on the device. Stopping gives frames without rows again.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_placed_rows_equal_host_placement() {
    let d = data();
    for (size, kind, map, cap) in [
        (ClusterSize::S3, EtaKind::Eta2, MapKind::Cumulative, None),
        (
            ClusterSize::S3,
            EtaKind::FullEta2,
            MapKind::Rosenblatt,
            Some(4),
        ),
        (ClusterSize::S5, EtaKind::Eta3, MapKind::Cumulative, None),
        (
            ClusterSize::S9,
            EtaKind::CrossEta3,
            MapKind::Rosenblatt,
            Some(8),
        ),
    ] {
        let (maps, mask, window) = maps_mask_window(size, kind, map, 89);
        let rules = PlaceRows {
            maps: maps.clone(),
            window,
            mask: Some(mask.clone()),
        };
        let mut f = finder(size, cap);
        let image = Accumulate::Image {
            maps: maps.clone(),
            subpixels: 4,
            window,
            mask: Some(mask.clone()),
        };
        assert!(f.accumulate(&image).unwrap(), "the image is counted beside");
        assert!(
            f.place_rows(Some(&rules)).unwrap(),
            "the default pipeline places rows"
        );
        let placer = Placer {
            maps: &maps,
            window,
            mask: Some(&mask),
            gain: None,
        };
        let (mut frames, mut rows, mut tally) = (0usize, 0usize, Tally::default());
        let mut want = Vec::new();
        f.find_each(d.data(), &mut |fc| {
            let got = fc.placed().expect("every frame comes with its rows");
            want.clear();
            placer.place_frame(fc.frame.get() as i64, &fc, &mut tally, &mut want);
            assert_eq!(
                got.len(),
                want.len(),
                "frame {}: one row per cluster",
                fc.frame
            );
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let same = g.x.to_bits() == w.x.to_bits()
                    && g.y.to_bits() == w.y.to_bits()
                    && g.energy.to_bits() == w.energy.to_bits()
                    && g.flags == u32::from(w.flags)
                    && g.pad == 0;
                assert!(
                    same,
                    "frame {} cluster {i}: device {g:?}, host {w:?}",
                    fc.frame
                );
            }
            frames += 1;
            rows += got.len();
            Ok(())
        })
        .unwrap();
        assert_eq!(frames, d.data().len());
        assert!(
            tally.masked > 0 && tally.window > 0 && tally.inside > 1000,
            "{size} {kind:?}: mask, window and placement exercised: {tally:?}"
        );
        let acc = f.take_accumulated().unwrap().expect("an image");
        assert_eq!(
            acc.tally, tally,
            "{size} {kind:?}: the image's tally beside the rows"
        );
        assert!(!f.place_rows(None).unwrap(), "stopping asks for no rows");
        let mut without = 0;
        f.find_each(d.data().range(0, 20), &mut |fc| {
            without += usize::from(fc.placed().is_none());
            Ok(())
        })
        .unwrap();
        assert_eq!(without, 20, "{size} {kind:?}: no rows once stopped");
        println!("gpu == host placed rows: {size} {kind:?} {map:?} cap {cap:?}: {rows} rows");
    }
}
