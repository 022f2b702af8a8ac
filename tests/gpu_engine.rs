//! The GPU finder fed chunk by chunk against the CPU reference over the same frames in one
//! call (needs a CUDA GPU: every GPU test is ignored elsewhere; run with `--include-ignored`).
//!
//! `find_feed` runs one pipeline through all the chunks of a feed, with no wait for the GPU
//! between them: the results and the pedestal must be the CPU's for every chunking, pipeline
//! and kind of chunk memory; every chunk must go back exactly once, and nothing may read a
//! chunk after it went back (the test feeds overwrite each chunk given back and reuse it for
//! the next, so a late read would change the clusters). Overflows (grow and fail), failing
//! visitors and failing feeds leave what `FedFinder::find_feed` documents. The engine
//! (`find_stream`) runs the same way from its ring of page-locked slots.

use cluda::cluster::ClusterSize;
use cluda::engine::{EngineConfig, FedFinder, find_stream};
use cluda::finder::feed::{FedChunk, FrameFeed, FrameStore};
use cluda::finder::gpu::{GpuFinder, InputMode, Launch, Overflow, PipelineConfig};
use cluda::io::{FrameSource, MemorySource};
use cluda::{
    ClusterBatch, ClusterFinder, Error, FinderConfig, Frames, Pedestal, Precision, ThresholdMode,
};
use proptest::prelude::*;
use support::gpu_vs_cpu::{Data, cpu_finder, gpu_finder};
use support::ladder::LadderStep;

/// The CPU over the first `n` frames in one call, a visitor failing at `fail_at`: the frames
/// delivered and the pedestal after.
fn cpu(cfg: &FinderConfig, d: &Data, n: usize, fail_at: Option<usize>) -> (ClusterBatch, Pedestal) {
    let mut f = cpu_finder(cfg, d);
    let mut b = ClusterBatch::new(cfg.size);
    let _ = f.find_each(d.first(n), &mut |fc| {
        if Some(fc.frame.get() as usize) == fail_at {
            return Err(Error::param("visitor", "stop"));
        }
        b.push_frame(fc.words());
        Ok(())
    });
    (b, f.pedestal().unwrap())
}

/// Which memory the test feed lends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Memory {
    /// The finder's frame stores (page-locked).
    Pinned,
    /// Plain vectors (registered while held, or staged).
    Pageable,
}

/// A feed of chunks of the given sizes (zero-frame chunks included) from `depth` stores
/// that circulate: a finder holding more chunks than its pipeline has in flight runs out of
/// them (an error). Every chunk given back is overwritten at once. Fails instead of chunk
/// `fail_at`.
struct TestFeed<'a> {
    data: &'a [u16],
    px: usize,
    sizes: Vec<usize>,
    fail_at: Option<usize>,
    pool: Vec<Box<dyn FrameStore>>,
    next: usize,
    at: usize,
    out: usize,
    most_out: usize,
    lent: usize,
    back: usize,
}

impl<'a> TestFeed<'a> {
    fn new(
        finder: &GpuFinder,
        d: &'a Data,
        sizes: &[usize],
        memory: Memory,
        stores: usize,
    ) -> Self {
        let len = sizes.iter().copied().max().unwrap_or(1).max(1) * d.px();
        let pool = (0..stores)
            .map(|_| match memory {
                Memory::Pinned => finder.frame_store(len).unwrap(),
                Memory::Pageable => Box::new(vec![0u16; len]) as Box<dyn FrameStore>,
            })
            .collect();
        Self {
            data: &d.data,
            px: d.px(),
            sizes: sizes.to_vec(),
            fail_at: None,
            pool,
            next: 0,
            at: 0,
            out: 0,
            most_out: 0,
            lent: 0,
            back: 0,
        }
    }

    fn failing_at(mut self, chunk: usize) -> Self {
        self.fail_at = Some(chunk);
        self
    }

    /// Frames in the chunks before chunk `i`.
    fn before(&self, i: usize) -> usize {
        self.sizes[..i].iter().sum()
    }
}

impl FrameFeed for TestFeed<'_> {
    fn next_chunk(&mut self) -> cluda::Result<Option<FedChunk>> {
        if Some(self.next) == self.fail_at {
            return Err(Error::param("feed", "the input broke"));
        }
        let Some(&k) = self.sizes.get(self.next) else {
            return Ok(None);
        };
        self.next += 1;
        let mut store = self.pool.pop().ok_or_else(|| {
            Error::param("feed", format!("all stores are lent ({} chunks)", self.out))
        })?;
        let (px, at) = (self.px, self.at);
        store.samples_mut()[..k * px].copy_from_slice(&self.data[at * px..(at + k) * px]);
        self.at += k;
        self.out += 1;
        self.lent += 1;
        self.most_out = self.most_out.max(self.out);
        FedChunk::new(store, k, px, cluda::FrameNumber(at as u64)).map(Some)
    }

    fn give_back(&mut self, chunk: FedChunk) {
        self.back += 1;
        self.out -= 1;
        if let Some(mut s) = chunk.into_store() {
            s.samples_mut().fill(u16::MAX);
            self.pool.push(s);
        }
    }
}

/// `find_feed` into a batch, a visitor failing at stream index `fail_at`; checks the frame
/// numbering (0, 1, 2, ... through the stream).
fn feed_run(
    g: &mut GpuFinder,
    feed: &mut TestFeed<'_>,
    fail_at: Option<usize>,
) -> (cluda::Result<()>, ClusterBatch) {
    let mut b = ClusterBatch::new(g.config().size);
    let r = g.find_feed(feed, &mut |fc| {
        assert_eq!(
            fc.frame.get() as usize,
            b.frames(),
            "frames are numbered through the stream"
        );
        if Some(fc.frame.get() as usize) == fail_at {
            return Err(Error::param("visitor", "stop"));
        }
        b.push_frame(fc.words());
        Ok(())
    });
    (r, b)
}

/// Chunkings: one chunk, single frames, empty chunks, chunks that do and do not divide the
/// pipeline's chunks, a last partial chunk.
fn chunkings(n: usize) -> Vec<Vec<usize>> {
    let mut irregular = vec![0, 7, 0, 0, 13, 1, 2];
    irregular.push(n - irregular.iter().sum::<usize>());
    let mut fours = vec![4; n / 4];
    fours.push(n % 4);
    vec![vec![n], vec![1; n], irregular, fours, vec![n - 1, 1]]
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn feeds_equal_one_cpu_call_for_every_chunking_pipeline_and_memory() {
    let d = Data::new(48, 80, 3, 30, 60);
    for (size, p) in [
        (ClusterSize::S3, Precision::F64),
        (ClusterSize::S5, Precision::F32),
    ] {
        let cfg = d.config(size, p, ThresholdMode::Live);
        let (want, ped) = cpu(&cfg, &d, 60, None);
        let pipes = [
            LadderStep::Opt1.config(),
            LadderStep::Opt5.config(),
            LadderStep::Opt9.config(),
            LadderStep::Opt10.config(),
            PipelineConfig {
                chunk: 4,
                ..PipelineConfig::default()
            },
            PipelineConfig {
                chunk: 7,
                upload_frames: 3,
                ..PipelineConfig::default()
            },
            PipelineConfig {
                depth: 1,
                chunk: 5,
                ..PipelineConfig::default()
            },
            PipelineConfig {
                input: InputMode::Staged,
                chunk: 6,
                ..PipelineConfig::default()
            },
            PipelineConfig {
                input: InputMode::Pageable,
                launch: Launch::PerFrame,
                chunk: 9,
                ..PipelineConfig::default()
            },
        ];
        for pipe in pipes {
            for sizes in chunkings(60) {
                for memory in [Memory::Pinned, Memory::Pageable] {
                    let what = format!("{size:?} {p:?} {pipe:?} {sizes:?} {memory:?}");
                    let mut g = gpu_finder(&cfg, pipe.clone(), &d);
                    let mut feed = TestFeed::new(&g, &d, &sizes, memory, pipe.depth);
                    let (r, got) = feed_run(&mut g, &mut feed, None);
                    r.unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert!(got == want, "{what}: clusters differ");
                    assert_eq!(g.pedestal().unwrap(), ped, "{what}: pedestal");
                    assert_eq!((feed.lent, feed.back), (sizes.len(), sizes.len()), "{what}");
                    assert!(feed.most_out <= pipe.depth, "{what}");
                }
            }
        }
    }
}

/// The same finder runs two feeds and a call one after another, with pedestal pushes in
/// between, as the CPU does.
#[test]
#[ignore = "needs a CUDA GPU"]
fn feeds_and_calls_follow_each_other() {
    let d = Data::new(40, 64, 8, 25, 50);
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    let mut c = cpu_finder(&cfg, &d);
    let mut g = gpu_finder(&cfg, PipelineConfig::default(), &d);
    let want = c.find(d.first(50)).unwrap();
    let mut feed = TestFeed::new(&g, &d, &[20, 30], Memory::Pinned, 2);
    let (r, got) = feed_run(&mut g, &mut feed, None);
    r.unwrap();
    assert!(got == want);
    c.push_pedestal(d.first(10)).unwrap();
    g.push_pedestal(d.first(10)).unwrap();
    let want = c.find(d.first(50)).unwrap();
    let got = g.find(d.first(50)).unwrap();
    assert!(got == want);
    let want = c.find(d.first(50)).unwrap();
    let mut feed = TestFeed::new(&g, &d, &[3, 3, 44], Memory::Pageable, 2);
    let (r, got) = feed_run(&mut g, &mut feed, None);
    r.unwrap();
    assert!(got == want);
    assert_eq!(g.pedestal().unwrap(), c.pedestal().unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_feed_overflow_grows_and_stays_exact() {
    let d = Data::new(48, 80, 11, 30, 40);
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    let (want, ped) = cpu(&cfg, &d, 40, None);
    for step in [LadderStep::Opt3, LadderStep::Opt9, LadderStep::Opt10] {
        for sizes in [vec![5, 9, 1, 25], vec![40], vec![2; 20]] {
            let pipe = PipelineConfig {
                cap: 1,
                chunk: 4,
                overflow: Overflow::Grow,
                ..step.config()
            };
            let mut g = gpu_finder(&cfg, pipe, &d);
            let mut feed = TestFeed::new(&g, &d, &sizes, Memory::Pinned, step.config().depth);
            let (r, got) = feed_run(&mut g, &mut feed, None);
            r.unwrap();
            assert!(got == want, "{} {sizes:?}", step.name());
            assert_eq!(g.pedestal().unwrap(), ped);
            assert!(g.cap() > 1, "the cap grew");
            assert_eq!(feed.lent, feed.back);
        }
    }
}

/// With `Overflow::Fail` the pedestal goes back to the start of the chunk that holds the
/// overflowing frame: the frames of the chunks before it stay consumed.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_feed_overflow_fails_back_to_the_start_of_its_chunk() {
    let d = Data::new(48, 80, 11, 30, 40);
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    let (all, _) = cpu(&cfg, &d, 40, None);
    let cap = 2;
    let first_over = (0..all.frames())
        .find(|&i| all.frame(i).len() > cap)
        .unwrap();
    for step in [LadderStep::Opt1, LadderStep::Opt8, LadderStep::Opt10] {
        for sizes in [vec![6, 6, 6, 6, 16], vec![1; 40], vec![40], vec![3, 0, 37]] {
            let what = format!("{} {sizes:?}", step.name());
            let pipe = PipelineConfig {
                cap,
                chunk: 4,
                overflow: Overflow::Fail,
                ..step.config()
            };
            let mut g = gpu_finder(&cfg, pipe, &d);
            let mut feed = TestFeed::new(&g, &d, &sizes, Memory::Pinned, step.config().depth);
            let (r, got) = feed_run(&mut g, &mut feed, None);
            let (frame, found, limit) = match r {
                Err(Error::ClusterLimit {
                    frame,
                    found,
                    limit,
                }) => (frame.get() as usize, found, limit),
                other => panic!("{what}: expected ClusterLimit, got {other:?}"),
            };
            assert!(found > limit, "{what}");
            if !step.config().compact {
                assert_eq!(frame, first_over, "{what}");
            }
            // The chunk that holds the frame, and the frames before it.
            let i = (0..sizes.len())
                .find(|&i| feed.before(i + 1) > frame)
                .unwrap();
            let kept = feed.before(i);
            let (before, ped) = cpu(&cfg, &d, kept, None);
            assert_eq!(
                g.pedestal().unwrap(),
                ped,
                "{what}: pedestal at the chunk start"
            );
            assert!(got.frames() >= kept && got.frames() <= frame, "{what}");
            for f in 0..kept {
                assert_eq!(got.frame(f).words(), before.frame(f).words(), "{what}");
            }
            assert_eq!(feed.lent, feed.back, "{what}: every chunk back");
        }
    }
}

/// A failing visitor keeps the frames up to it, as on the CPU, and every chunk goes back.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_failing_visitor_keeps_the_frames_up_to_it() {
    let d = Data::new(40, 40, 5, 20, 30);
    let cfg = d.config(ClusterSize::S3, Precision::F32, ThresholdMode::Live);
    let sizes = [7, 9, 4, 10];
    for step in [LadderStep::Opt2, LadderStep::Opt6, LadderStep::Opt10] {
        for fail in [0, 6, 7, 8, 15, 16, 29] {
            for memory in [Memory::Pinned, Memory::Pageable] {
                let what = format!("{} fail at {fail} {memory:?}", step.name());
                let pipe = PipelineConfig {
                    chunk: 4,
                    ..step.config()
                };
                let mut g = gpu_finder(&cfg, pipe, &d);
                let mut feed = TestFeed::new(&g, &d, &sizes, memory, step.config().depth);
                let (r, got) = feed_run(&mut g, &mut feed, Some(fail));
                assert!(r.unwrap_err().to_string().contains("stop"), "{what}");
                let (want, ped) = cpu(&cfg, &d, 30, Some(fail));
                assert!(got == want, "{what}");
                assert_eq!(g.pedestal().unwrap(), ped, "{what}");
                assert_eq!(feed.lent, feed.back, "{what}");
            }
        }
    }
}

/// A feed that fails: every frame lent before it is found and visited, then the error.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_failing_feed_finishes_the_frames_before_it() {
    let d = Data::new(40, 40, 6, 20, 30);
    let cfg = d.config(ClusterSize::S5, Precision::F64, ThresholdMode::Live);
    let sizes = [7, 9, 4, 10];
    for step in [LadderStep::Opt4, LadderStep::Opt10] {
        for fail in 0..4 {
            let mut g = gpu_finder(&cfg, step.config(), &d);
            let mut feed =
                TestFeed::new(&g, &d, &sizes, Memory::Pinned, step.config().depth).failing_at(fail);
            let (r, got) = feed_run(&mut g, &mut feed, None);
            assert!(r.unwrap_err().to_string().contains("the input broke"));
            let (want, ped) = cpu(&cfg, &d, feed.before(fail), None);
            assert!(got == want, "{} feed fails at chunk {fail}", step.name());
            assert_eq!(g.pedestal().unwrap(), ped);
            assert_eq!(feed.lent, feed.back);
        }
    }
}

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

type FeedCase = (
    usize,
    usize,
    u64,
    Vec<usize>,
    usize,
    usize,
    usize,
    bool,
    bool,
);

/// rows, cols, seed, chunk sizes, pipeline chunk, depth, frames per upload, one launch per
/// upload group, page-locked chunks.
fn feed_case() -> impl Strategy<Value = FeedCase> {
    (
        1usize..24,
        1usize..24,
        any::<u64>(),
        proptest::collection::vec(0usize..12, 1..6),
        1usize..9,
        1usize..=2,
        1usize..5,
        any::<bool>(),
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, .. ProptestConfig::default() })]
    /// Random shapes, chunkings and pipelines: a feed equals one CPU call.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn random_feeds_equal_one_cpu_call(
        (rows, cols, seed, sizes, chunk, depth, upload, per_upload, pinned) in feed_case()
    ) {
        let n: usize = sizes.iter().sum();
        let d = Data::new(rows, cols, seed, 8, n.max(1));
        let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live).n_sigma(3.0);
        let (want, ped) = cpu(&cfg, &d, n, None);
        let pipe = PipelineConfig {
            chunk,
            depth,
            upload_frames: upload,
            launch: if per_upload { Launch::PerUpload } else { Launch::PerFrame },
            ..PipelineConfig::default()
        };
        let mut g = gpu_finder(&cfg, pipe, &d);
        let memory = if pinned { Memory::Pinned } else { Memory::Pageable };
        let mut feed = TestFeed::new(&g, &d, &sizes, memory, depth);
        let (r, got) = feed_run(&mut g, &mut feed, None);
        prop_assert!(r.is_ok(), "{:?}", r);
        prop_assert_eq!(want, got);
        prop_assert_eq!(g.pedestal().unwrap(), ped);
        prop_assert_eq!(feed.lent, feed.back);
    }
}

/// Issue 32 item 11: a visitor that panics mid-run unwinds out of `find_each` and
/// `find_feed` only once the GPU is done with the call's memory (the caller's frames, which
/// the unwind frees; the chunks and stores of a feed, dropped by it; the holds that keep them
/// page-locked), for every input mode and kind of feed memory. The device of the same
/// process then finds the frames exactly, with the finder that panicked (its pedestal reset)
/// and with a fresh one. tools/gpu-checks also runs it under compute-sanitizer memcheck.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_panicking_visitor_leaves_the_device_usable() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let n = 200;
    let d = Data::new(400, 400, 32, 100, n);
    let cfg = d.config(ClusterSize::S3, Precision::F32, ThresholdMode::Live);
    let (want, ped) = cpu(&cfg, &d, n, None);
    let start = cpu_finder(&cfg, &d).pedestal().unwrap();
    let modes = [
        InputMode::Auto,
        InputMode::Staged,
        InputMode::Registered,
        InputMode::Pageable,
    ];
    for input in modes {
        let pipe = PipelineConfig {
            input,
            chunk: 32,
            ..PipelineConfig::default()
        };
        let stores = pipe.depth + 1;
        let mut g = gpu_finder(&cfg, pipe, &d);
        // Frames owned inside the closure: the unwind frees them.
        let each = catch_unwind(AssertUnwindSafe(|| {
            let mine = d.data.clone();
            let frames = Frames::new(&mine, n, 400, 400).unwrap();
            let _ = g.find_each(frames, &mut |fc| {
                assert!(fc.frame != 70, "the visitor panics at frame 70");
                Ok(())
            });
        }));
        assert!(each.is_err(), "{input:?}: find_each panicked");
        for memory in [Memory::Pinned, Memory::Pageable] {
            let fed = catch_unwind(AssertUnwindSafe(|| {
                let mut feed = TestFeed::new(&g, &d, &[40; 5], memory, stores);
                let _ = g.find_feed(&mut feed, &mut |fc| {
                    assert!(fc.frame != 90, "the visitor panics at frame 90");
                    Ok(())
                });
            }));
            assert!(fed.is_err(), "{input:?} {memory:?}: find_feed panicked");
        }
        g.reset_pedestal(&start).unwrap();
        let got = g.find(d.first(n)).unwrap();
        assert!(got == want, "{input:?}: the finder that panicked");
        assert_eq!(g.pedestal().unwrap(), ped, "{input:?}");
        drop(g);
        let mut fresh = gpu_finder(&cfg, PipelineConfig::default(), &d);
        assert!(fresh.find(d.first(n)).unwrap() == want, "{input:?}: fresh");
        assert_eq!(fresh.pedestal().unwrap(), ped, "{input:?}: fresh");
    }
}
