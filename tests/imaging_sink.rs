//! The imaging sink over several inputs, driven by hand with a CPU finder (so the host
//! places, on the sink's placement threads): photons of many frames come back in frame order
//! with exactly the values of placing them one by one, and a failed input leaves the image and
//! the photon lists as they were, whether it was the first input (which counts straight into
//! the image) or a later one.

use std::path::Path;
use std::sync::Arc;

use cluda::engine::imaging::{ImagingOutputs, ImagingSink, PhotonDestination};
use cluda::engine::sink::Sink;
use cluda::finder::cpu::CpuFinder;
use cluda::interpolation::{
    CubeAxes, EtaCube, EtaKind, Interpolator, MapKind, Photon, Placer, SubpixelImage, Tally,
};
use cluda::io::atomic::Claim;
use cluda::{ClusterSize, FinderConfig, FrameClusters};

const ROWS: usize = 64;
const COLS: usize = 64;

/// Deterministic 3x3 clusters: `frames` frames of 0..40 clusters each (an xorshift stream),
/// as packed words per frame.
fn frames(frames: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..frames)
        .map(|_| {
            let n = (next() % 40) as usize;
            let mut words = Vec::new();
            for _ in 0..n {
                let x = (next() % COLS as u64) as u32;
                let y = (next() % ROWS as u64) as u32;
                words.push(x | (y << 16));
                for _ in 0..9 {
                    // Mostly positive charge, some negative pixels.
                    words.push(((next() % 900) as i32 - 60) as u32);
                }
            }
            words
        })
        .collect()
}

/// Maps from a cube of the clusters of `data`.
/// An imaging sink of `ROWS x COLS` frames placing with `maps` (no mask, no energy window,
/// photons placed on the placement worker): an image of `subpixels` when asked for, the
/// photons of each input to `photons`, existing files `claim`ed.
fn new_sink(
    maps: Arc<Interpolator>,
    subpixels: Option<u32>,
    photons: Vec<Option<PhotonDestination>>,
    claim: Claim,
) -> ImagingSink {
    let outputs = ImagingOutputs {
        subpixels,
        photons,
        claim,
    };
    ImagingSink::new(ROWS, COLS, maps, None, None, outputs, true).unwrap()
}

fn maps(data: &[Vec<u32>]) -> Arc<Interpolator> {
    let axes = CubeAxes::default_for(EtaKind::Eta2);
    let mut cube = EtaCube::new(axes.clone()).unwrap();
    for (i, w) in data.iter().enumerate() {
        cube.add_frame(&FrameClusters::new(
            cluda::FrameNumber(i as u64),
            ClusterSize::S3,
            w,
        ))
        .unwrap();
    }
    let counts: Vec<f64> = cube.counts().iter().map(|&c| c as f64).collect();
    Arc::new(Interpolator::new(axes, &counts, MapKind::Cumulative).unwrap())
}

/// The photons of `data` placed one by one, and the image of the placed ones.
fn by_hand(maps: &Interpolator, data: &[Vec<u32>], n: u32) -> (Vec<Photon>, SubpixelImage) {
    let placer = Placer {
        maps,
        window: None,
        mask: None,
        gain: None,
    };
    let mut photons = Vec::new();
    let mut tally = Tally::default();
    for (i, w) in data.iter().enumerate() {
        let fc = FrameClusters::new(cluda::FrameNumber(i as u64), ClusterSize::S3, w);
        placer.place_frame(i as i64, &fc, &mut tally, &mut photons);
    }
    let mut img = SubpixelImage::new(ROWS, COLS, n).unwrap();
    for p in photons.iter().filter(|p| p.flags == 0) {
        let (x, y) = (p.x, p.y);
        img.add(x, y);
    }
    (photons, img)
}

/// A photon list's rows.
fn read_photons(path: &Path) -> Vec<Photon> {
    let b = std::fs::read(path).unwrap();
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize + 10;
    b[hl..]
        .chunks_exact(33)
        .map(|r| *bytemuck::from_bytes::<Photon>(r))
        .collect()
}

fn finder() -> CpuFinder {
    CpuFinder::new(FinderConfig::new(ROWS, COLS)).unwrap()
}

/// Feeds `data` as input `k`; `fail_after` frames, then abandons instead of ending.
fn feed(
    sink: &mut ImagingSink,
    f: &mut CpuFinder,
    k: usize,
    data: &[Vec<u32>],
    fail_after: Option<usize>,
) {
    sink.begin(k, f).unwrap();
    for (i, w) in data.iter().enumerate() {
        if fail_after == Some(i) {
            sink.abandon(k, f);
            return;
        }
        sink.frame(
            k,
            &FrameClusters::new(cluda::FrameNumber(i as u64), ClusterSize::S3, w),
        )
        .unwrap();
    }
    sink.end(k, f).unwrap();
}

#[test]
fn photons_of_many_batches_come_back_in_order_and_exact() {
    let dir = tempfile::tempdir().unwrap();
    // About 20 clusters a frame: several of the placement's batches of 65,536 clusters.
    let data = frames(12_000, 7);
    let maps = maps(&data);
    let (want, want_img) = by_hand(&maps, &data, 4);
    let path = dir.path().join("p.npy");
    for threads in [1, 3] {
        let mut sink = new_sink(
            maps.clone(),
            Some(4),
            vec![Some(PhotonDestination::File(path.clone()))],
            Claim::Replace,
        )
        .with_threads(threads)
        .unwrap();
        let mut f = finder();
        feed(&mut sink, &mut f, 0, &data, None);
        let got = read_photons(&path);
        assert_eq!(got.len(), want.len(), "{threads} threads: rows");
        assert!(got == want, "{threads} threads: photons differ");
        assert!(
            sink.image() == Some(&want_img),
            "{threads} threads: image differs"
        );
        assert_eq!(sink.tally().clusters, want.len() as u64);
    }
}

#[test]
fn a_failed_input_leaves_image_and_photons_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (frames(3000, 11), frames(3000, 23));
    let maps = maps(&a);
    let (pb, img_b) = by_hand(&maps, &b, 3);
    let paths: Vec<_> = (0..3)
        .map(|k| Some(PhotonDestination::File(dir.path().join(format!("{k}.npy")))))
        .collect();
    let mut sink = new_sink(maps.clone(), Some(3), paths.clone(), Claim::Refuse);
    let mut f = finder();
    // The first input fails half-way: it had the image lent.
    feed(&mut sink, &mut f, 0, &a, Some(1500));
    assert!(sink.image().is_some_and(|i| i.is_empty()), "back to empty");
    assert_eq!(sink.tally(), &Tally::default());
    // The second ends whole: the image is its alone.
    feed(&mut sink, &mut f, 1, &b, None);
    assert!(sink.image() == Some(&img_b));
    // The third fails too: nothing of it is added.
    feed(&mut sink, &mut f, 2, &a, Some(2999));
    assert!(sink.image() == Some(&img_b));
    assert_eq!(sink.tally().clusters, pb.len() as u64);
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        files,
        vec!["1.npy".to_string()],
        "no other file, no leftover"
    );
    assert!(read_photons(&dir.path().join("1.npy")) == pb);
    assert_eq!(sink.photon_files().len(), 1);
}

/// Copies of the image mid-input ([`ImagingSink::request_snapshot`], answered by the
/// placement worker): each is the image of every input that ended whole plus the current
/// input's frames handed to the sink until the request, whether the input counts straight into
/// the image (the first) or apart (a later one); none comes unasked or between inputs, and the
/// image itself is as without copies.
#[test]
fn snapshots_mid_input_count_every_frame_handed_over() {
    let (a, b) = (frames(3000, 31), frames(2000, 37));
    let maps = maps(&a);
    let mut sink = new_sink(maps.clone(), Some(3), Vec::new(), Claim::Refuse);
    let mut f = finder();
    // Waits for the worker's copy.
    let copy = |sink: &mut ImagingSink| -> SubpixelImage {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if let Some(img) = sink.take_snapshot().unwrap() {
                return img;
            }
            assert!(std::time::Instant::now() < until, "no copy came");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    let frame = |sink: &mut ImagingSink, k: usize, i: usize, w: &[u32]| {
        sink.frame(
            k,
            &FrameClusters::new(cluda::FrameNumber(i as u64), ClusterSize::S3, w),
        )
        .unwrap()
    };
    assert!(!sink.request_snapshot().unwrap(), "no input under way");
    sink.begin(0, &mut f).unwrap();
    for (i, w) in a.iter().enumerate() {
        frame(&mut sink, 0, i, w);
        if i == 1200 || i == 2500 {
            assert!(sink.take_snapshot().unwrap().is_none(), "not asked for");
            assert!(sink.request_snapshot().unwrap());
            let got = copy(&mut sink);
            assert!(got == by_hand(&maps, &a[..=i], 3).1, "input 0, frame {i}");
        }
    }
    sink.end(0, &mut f).unwrap();
    let img_a = by_hand(&maps, &a, 3).1;
    assert!(sink.image() == Some(&img_a));
    assert!(!sink.request_snapshot().unwrap(), "between inputs");
    sink.begin(1, &mut f).unwrap();
    // Asked for before any frame of the input: the image of the first input alone.
    assert!(sink.request_snapshot().unwrap());
    assert!(copy(&mut sink) == img_a, "input 1, no frame yet");
    for (i, w) in b.iter().enumerate() {
        frame(&mut sink, 1, i, w);
        if i == 999 {
            assert!(sink.request_snapshot().unwrap());
            let mut want = by_hand(&maps, &b[..=i], 3).1;
            want.add_image(&img_a).unwrap();
            assert!(copy(&mut sink) == want, "input 1, frame {i}");
        }
    }
    sink.end(1, &mut f).unwrap();
    let mut want = by_hand(&maps, &b, 3).1;
    want.add_image(&img_a).unwrap();
    assert!(sink.image() == Some(&want), "the image as without copies");
    assert!(sink.into_image() == Some(want));
}

#[test]
fn absurd_placement_threads_are_refused() {
    let data = frames(10, 3);
    let make = || new_sink(maps(&data), Some(2), vec![], Claim::Refuse);
    for bad in [0, 1 << 20] {
        let e = make().with_threads(bad).err().expect("refused");
        assert!(e.to_string().contains("threads"), "{e}");
    }
}

#[test]
fn photons_kept_in_memory_are_the_files_rows_and_a_failed_input_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (frames(5000, 31), frames(4000, 37));
    let maps = maps(&a);
    let (pa, img_a) = by_hand(&maps, &a, 2);
    let (pb, _) = by_hand(&maps, &b, 2);
    let file = dir.path().join("b.npy");
    // Input 0 in memory, 1 fails half-way (memory), 2 to a file, 3 in memory again; photons
    // only for the last sink (no image).
    for subpixels in [Some(2), None] {
        let mut sink = new_sink(
            maps.clone(),
            subpixels,
            vec![
                Some(PhotonDestination::Memory),
                Some(PhotonDestination::Memory),
                Some(PhotonDestination::File(file.clone())),
                Some(PhotonDestination::Memory),
            ],
            Claim::Replace,
        )
        .with_threads(3)
        .unwrap();
        let mut f = finder();
        feed(&mut sink, &mut f, 0, &a, None);
        feed(&mut sink, &mut f, 1, &b, Some(2000));
        feed(&mut sink, &mut f, 2, &b, None);
        feed(&mut sink, &mut f, 3, &b, None);
        let got_a = sink.take_photons(0).expect("input 0 kept");
        assert!(got_a == pa, "input 0's rows differ");
        assert!(sink.take_photons(0).is_none(), "taken once");
        assert!(
            sink.take_photons(1).is_none(),
            "a failed input keeps nothing"
        );
        assert!(sink.take_photons(2).is_none(), "a file's rows are not kept");
        assert!(sink.take_photons(3).expect("input 3 kept") == pb);
        assert!(sink.take_photons(9).is_none(), "no such input");
        assert!(read_photons(&file) == pb);
        match subpixels {
            Some(_) => {
                let mut want = img_a.clone();
                let (_, img_b) = by_hand(&maps, &b, 2);
                want.add_image(&img_b).unwrap();
                want.add_image(&img_b).unwrap();
                assert!(sink.image() == Some(&want), "image of inputs 0, 2 and 3");
            }
            None => assert!(sink.image().is_none()),
        }
        std::fs::remove_file(&file).unwrap();
    }
}

#[test]
fn a_gain_map_of_another_shape_is_refused_without_an_image_too() {
    let data = frames(10, 5);
    let gain = Arc::new(
        cluda::interpolation::GainMap::new(ROWS, COLS + 1, vec![1.0; ROWS * (COLS + 1)]).unwrap(),
    );
    for subpixels in [Some(2), None] {
        let e = new_sink(
            maps(&data),
            subpixels,
            vec![Some(PhotonDestination::Memory)],
            Claim::Refuse,
        )
        .with_gain(Some(gain.clone()))
        .err()
        .expect("refused");
        assert!(e.to_string().contains("gain"), "{e}");
    }
}

#[test]
fn per_pixel_maps_of_another_shape_are_refused_by_name() {
    use cluda::engine::imaging::{check_pixel_map, read_gain_for, read_mask_for};
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.npy");
    let g = dir.path().join("g.npy");
    // A 3 x 4 bool mask, written by hand (npy 1.0: header padded to 64 bytes).
    let dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (3, 4), }";
    let bytes = support::files::npy_bytes(dict, &[0u8; 12]);
    std::fs::write(&m, bytes).unwrap();
    cluda::io::npy::write_array(&g, &[3, 4], &[1.0f64; 12]).unwrap();
    assert!(read_mask_for(Some(&m), (3, 4)).unwrap().is_some());
    assert!(read_gain_for(Some(&g), (3, 4)).unwrap().is_some());
    assert!(read_mask_for(None, (3, 4)).unwrap().is_none());
    let e = read_mask_for(Some(&m), (4, 3)).unwrap_err().to_string();
    assert!(
        e.contains("mask") && e.contains("m.npy") && e.contains("4 x 3"),
        "{e}"
    );
    let e = read_gain_for(Some(&g), (3, 5)).unwrap_err().to_string();
    assert!(e.contains("gain") && e.contains("g.npy"), "{e}");
    assert!(check_pixel_map("mask", "the mask array", (2, 2), (2, 2)).is_ok());
}
