//! The engine (`find_stream`) on the GPU: equal to the CPU, stopped cleanly, raw inputs with
//! gaps, caller memory locked or staged.

use crate::*;

/// Frames in memory numbered from `first`, delivered at most `most` per read (a source that
/// fills its slots partly).
struct Numbered {
    inner: MemorySource<'static>,
    first: u64,
    most: usize,
}

impl FrameSource for Numbered {
    fn rows(&self) -> usize {
        self.inner.rows()
    }
    fn cols(&self) -> usize {
        self.inner.cols()
    }
    fn remaining_hint(&self) -> u64 {
        self.inner.remaining_hint()
    }
    fn read_frames(
        &mut self,
        n: usize,
        frames: &mut Vec<u16>,
        numbers: &mut Vec<u64>,
    ) -> cluda::Result<usize> {
        let from = numbers.len();
        let k = self.inner.read_frames(n.min(self.most), frames, numbers)?;
        for x in &mut numbers[from..] {
            *x += self.first;
        }
        Ok(k)
    }
}

/// The engine with the GPU finder, on MOENCH-sized frames, for chunk and ring sizes that do
/// and do not divide the frames and the pipeline's chunks, from full and partial slots.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_engine_on_the_gpu_equals_the_cpu() {
    let d = Data::new(400, 400, 2026, 200, 300);
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    let (want, ped) = cpu(&cfg, &d, 300, None);
    for (chunk, slots, most) in [
        (256, 3, usize::MAX),
        (128, 2, usize::MAX),
        (1, 2, usize::MAX),
        (7, 5, usize::MAX),
        (300, 2, usize::MAX),
        (1000, 2, usize::MAX),
        (64, 3, 5),
        (100, 4, 33),
    ] {
        let mut g = gpu_finder(&cfg, PipelineConfig::default(), &d);
        let mut src = Numbered {
            inner: MemorySource::new(d.data.clone(), 400, 400).unwrap(),
            first: 5000,
            most,
        };
        let mut got = ClusterBatch::new(cfg.size);
        let mut numbers = Vec::new();
        let engine = EngineConfig {
            chunk,
            slots,
            map: false,
        };
        let stats = find_stream(&mut g, &mut src, engine, &mut |n, fc| {
            numbers.push(n);
            got.push_frame(fc.words());
            Ok(())
        })
        .unwrap();
        let what = format!("chunk {chunk}, slots {slots}, reads of {most}");
        assert_eq!(stats.frames, 300, "{what}");
        assert!(got == want, "{what}");
        assert_eq!(g.pedestal().unwrap(), ped, "{what}");
        assert!(
            numbers.iter().copied().eq(5000..5300),
            "{what}: frame numbers"
        );
    }
}

/// Through the engine: an overflow that fails names the source's frame number and leaves
/// the pedestal at the start of its slot; a failing visitor keeps the frames up to it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_engine_on_the_gpu_stops_cleanly() {
    let d = Data::new(48, 80, 11, 30, 40);
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    let engine = EngineConfig {
        chunk: 6,
        slots: 3,
        map: false,
    };
    let source = || Numbered {
        inner: MemorySource::new(d.data.clone(), 48, 80).unwrap(),
        first: 1000,
        most: usize::MAX,
    };
    let pipe = PipelineConfig {
        cap: 2,
        chunk: 4,
        overflow: Overflow::Fail,
        ..PipelineConfig::default()
    };
    let mut g = gpu_finder(&cfg, pipe, &d);
    let e = find_stream(&mut g, &mut source(), engine, &mut |_, _| Ok(())).unwrap_err();
    let Error::ClusterLimit { frame, .. } = e else {
        panic!("expected ClusterLimit, got {e}");
    };
    let frame = frame.get() as usize;
    assert!(
        (1000..1040).contains(&frame),
        "the source's number: {frame}"
    );
    let kept = (frame - 1000) / 6 * 6;
    let (_, ped) = cpu(&cfg, &d, kept, None);
    assert_eq!(
        g.pedestal().unwrap(),
        ped,
        "pedestal at the start of the slot"
    );

    for fail in [0, 5, 6, 17, 39] {
        let mut g = gpu_finder(&cfg, PipelineConfig::default(), &d);
        let mut got = ClusterBatch::new(cfg.size);
        let e = find_stream(&mut g, &mut source(), engine, &mut |n, fc| {
            if n == 1000 + fail as u64 {
                return Err(Error::param("visitor", "stop"));
            }
            got.push_frame(fc.words());
            Ok(())
        })
        .unwrap_err();
        assert!(e.to_string().contains("stop"), "{e}");
        let (want, ped) = cpu(&cfg, &d, 40, Some(fail));
        assert!(got == want, "visitor fails at {fail}");
        assert_eq!(g.pedestal().unwrap(), ped, "visitor fails at {fail}");
    }
}

/// A raw acquisition with gaps in its frame numbers (the receiver discarded frames) through
/// the engine: the visitor sees each frame's own number, and an overflow with a tiny cap and
/// `Overflow::Fail` names the overflowing frame by its number (not its index in the stream),
/// with the pedestal at the start of its slot; without the cap the clusters are the CPU's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_raw_input_with_gaps_names_frames_by_their_numbers() {
    use cluda::io::raw::{DetectorType, FrameDiscardPolicy, RawReader, RawWriter, RawWriterConfig};
    let d = Data::new(48, 80, 11, 30, 40);
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    // Frame i of the data is written as frame 1000 + 3 i: two numbers lost after each.
    let number = |i: usize| 1000 + 3 * i as u64;
    let dir = tempfile::tempdir().unwrap();
    let raw = RawWriterConfig {
        rows: 48,
        cols: 80,
        detector: DetectorType::Generic16,
        max_frames_per_file: 15,
        version: 7.2,
        frame_padding: true,
        frame_discard_policy: FrameDiscardPolicy::NoDiscard,
        packets_per_frame: 1,
    };
    let mut w = RawWriter::create(dir.path(), "gaps", 0, raw).unwrap();
    for i in 0..40 {
        w.write_frame(number(i), &d.data[i * d.px()..(i + 1) * d.px()])
            .unwrap();
    }
    let master = w.finish(Some(number(39))).unwrap();
    let engine = EngineConfig {
        chunk: 6,
        slots: 3,
        map: false,
    };

    let (want, ped) = cpu(&cfg, &d, 40, None);
    let mut g = gpu_finder(&cfg, PipelineConfig::default(), &d);
    let (mut got, mut numbers) = (ClusterBatch::new(cfg.size), Vec::new());
    find_stream(
        &mut g,
        &mut RawReader::open(&master).unwrap(),
        engine,
        &mut |n, fc| {
            numbers.push(n);
            got.push_frame(fc.words());
            Ok(())
        },
    )
    .unwrap();
    assert!(got == want);
    assert_eq!(g.pedestal().unwrap(), ped);
    assert!(
        numbers.iter().copied().eq((0..40).map(number)),
        "{numbers:?}"
    );

    for compact in [false, true] {
        let pipe = PipelineConfig {
            cap: 2,
            chunk: 4,
            overflow: Overflow::Fail,
            compact,
            // One launch per upload group writes compacted results only.
            launch: if compact {
                Launch::PerUpload
            } else {
                Launch::PerFrame
            },
            ..PipelineConfig::default()
        };
        let mut g = gpu_finder(&cfg, pipe, &d);
        let mut seen = Vec::new();
        let mut src = RawReader::open(&master).unwrap();
        let e = find_stream(&mut g, &mut src, engine, &mut |n, _| {
            seen.push(n);
            Ok(())
        })
        .unwrap_err();
        let Error::ClusterLimit { frame, .. } = e else {
            panic!("compact {compact}: expected ClusterLimit, got {e}");
        };
        let index = (0..40)
            .find(|&i| number(i) == frame.get())
            .unwrap_or_else(|| panic!("compact {compact}: {frame} is not a frame number"));
        if !compact {
            let first_over = (0..want.frames())
                .find(|&i| want.frame(i).len() > 2)
                .unwrap();
            assert_eq!(index, first_over, "the first frame over the cap");
        }
        assert!(e.to_string().contains(&format!("frame {frame} ")), "{e}");
        let kept = index / 6 * 6;
        let (_, ped) = cpu(&cfg, &d, kept, None);
        assert_eq!(
            g.pedestal().unwrap(),
            ped,
            "compact {compact}: pedestal at the slot"
        );
        assert!(
            seen.iter().zip(0..).all(|(&n, i)| n == number(i)) && seen.len() <= index,
            "compact {compact}: {seen:?}"
        );
    }
}

/// Frames locked in place (`GpuFinder::lock_frames`) and pageable frames staged on every
/// core give the CPU's clusters, in one call and in several; the lock is released on drop
/// (the same memory can be locked again).
#[test]
#[ignore = "needs a CUDA GPU"]
fn locked_and_staged_caller_memory_equal_the_cpu() {
    let d = Data::new(400, 400, 77, 100, 120);
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    let (want, ped) = cpu(&cfg, &d, 120, None);
    for round in 0..2 {
        let mut g = gpu_finder(&cfg, PipelineConfig::default(), &d);
        let locked = g.lock_frames(&d.data).unwrap();
        let frames = Frames::new(locked.samples(), 120, 400, 400).unwrap();
        let got = g.find(frames).unwrap();
        assert!(got == want, "locked, round {round}");
        assert_eq!(g.pedestal().unwrap(), ped);
        drop(locked);
    }
    let mut g = gpu_finder(
        &cfg,
        PipelineConfig {
            input: InputMode::Staged,
            ..PipelineConfig::default()
        },
        &d,
    );
    let mut got = g.find(d.first(50)).unwrap();
    let rest = Frames::new(&d.data[50 * d.px()..], 70, 400, 400).unwrap();
    let more = g.find(rest).unwrap();
    for i in 0..more.frames() {
        got.push_frame(more.frame(i).words());
    }
    assert!(got == want, "staged");
    assert_eq!(g.pedestal().unwrap(), ped);
}
