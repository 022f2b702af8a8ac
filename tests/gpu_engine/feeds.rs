//! `find_feed` chunk by chunk: every chunking, pipeline and memory, calls between feeds,
//! overflows, failing visitors and feeds, random feeds.

use crate::*;

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
                    assert_fed_as_cpu((&g, &feed, &got), (&want, &ped), &what);
                    assert_eq!(feed.lent, sizes.len(), "{what}");
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
            let what = format!("{} {sizes:?}", step.name());
            assert_fed_as_cpu((&g, &feed, &got), (&want, &ped), &what);
            assert!(g.cap() > 1, "the cap grew");
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
                assert_fed_as_cpu((&g, &feed, &got), (&want, &ped), &what);
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
            let what = format!("{} feed fails at chunk {fail}", step.name());
            assert_fed_as_cpu((&g, &feed, &got), (&want, &ped), &what);
        }
    }
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
