//! The engine's own tests: the streamed run against one call, its slots and ring, visitor
//! errors, overflows, bad settings, `.npy` inputs read or mapped, and several inputs.

use super::*;
use crate::cluster::ClusterSize;
use crate::finder::{ClusterFinder, CpuFinder};
use crate::frames::Frames;
use crate::generate::{GenConfig, Generator};
use crate::io::MemorySource;
use crate::testing::{cpu_finder as finder, generated};

/// What one `find_each` over the first `n` frames of `data` gives: each frame's index
/// (its number) and its clusters' words.
fn one_call(
    rows: usize,
    cols: usize,
    dark: &[u16],
    data: &[u16],
    n: usize,
) -> Vec<(u64, Vec<u32>)> {
    let mut want = Vec::new();
    finder(rows, cols, dark)
        .find_each(
            Frames::new(&data[..n * rows * cols], n, rows, cols).expect("frames"),
            &mut |fc| {
                want.push((fc.frame.get(), fc.words().to_vec()));
                Ok(())
            },
        )
        .expect("one call");
    want
}

/// The engine delivers exactly what one `find_each` over all frames delivers, for chunk
/// sizes that do and do not divide the frame count, with the source's frame numbers.
#[test]
fn streams_the_same_clusters_as_one_call() {
    let (rows, cols) = (24, 40);
    let (dark, data) = generated(rows, cols, 5, 50, 23);
    let want = one_call(rows, cols, &dark, &data, 23);
    for (chunk, slots) in [(1, 2), (4, 3), (23, 2), (64, 5)] {
        let mut f = finder(rows, cols, &dark);
        let mut src = MemorySource::new(data.clone(), rows, cols).expect("source");
        let mut got = Vec::new();
        let stats = find_stream(
            &mut f,
            &mut src,
            EngineConfig {
                chunk,
                slots,
                map: false,
            },
            &mut |n, fc| {
                got.push((n, fc.words().to_vec()));
                Ok(())
            },
        )
        .expect("stream");
        assert_eq!(stats.frames, 23);
        assert_eq!(stats.read_bytes, (23 * rows * cols * 2) as u64);
        assert!(got == want, "chunk {chunk}, slots {slots}");
    }
}

/// Slots allocated ahead are used (no allocation in the engine); slots of another size
/// are replaced; either way the clusters are those of one call.
#[test]
fn slots_allocated_ahead_give_the_same_clusters() {
    let (rows, cols) = (24, 40);
    let (dark, data) = generated(rows, cols, 6, 50, 19);
    let want: Vec<Vec<u32>> = one_call(rows, cols, &dark, &data, 19)
        .into_iter()
        .map(|(_, words)| words)
        .collect();
    let cfg = EngineConfig {
        chunk: 4,
        slots: 3,
        map: false,
    };
    for ahead_chunk in [4, 7] {
        let mut f = finder(rows, cols, &dark);
        let ahead = EngineConfig {
            chunk: ahead_chunk,
            ..cfg
        };
        let slots = RingSlots::allocate(&f, ahead).expect("slots");
        let mut src = MemorySource::new(data.clone(), rows, cols).expect("source");
        let mut got = Vec::new();
        let mut slots = Some(slots);
        find_stream_with(&mut f, &mut src, cfg, &mut slots, &mut |_, fc| {
            got.push(fc.words().to_vec());
            Ok(())
        })
        .expect("stream");
        assert!(got == want, "slots of {ahead_chunk} frames");
        // The ring is kept for the next run (one of the run's size).
        let kept = slots.expect("the ring is kept");
        assert_eq!(kept.samples, cfg.chunk * rows * cols);
        assert_eq!(kept.stores.len(), cfg.slots);
    }
}

/// A visitor's error stops the run and comes back unchanged; the reader thread ends.
#[test]
fn a_visitor_error_stops_the_run() {
    let (rows, cols) = (16, 16);
    let (dark, data) = generated(rows, cols, 9, 50, 40);
    let mut f = finder(rows, cols, &dark);
    let mut src = MemorySource::new(data, rows, cols).expect("source");
    let mut seen = 0;
    let e = find_stream(
        &mut f,
        &mut src,
        EngineConfig {
            chunk: 3,
            slots: 2,
            map: false,
        },
        &mut |n, _| {
            seen += 1;
            if n == 7 {
                return Err(Error::param("visitor", "stop at frame 7"));
            }
            Ok(())
        },
    )
    .expect_err("the visitor fails");
    assert!(e.to_string().contains("stop at frame 7"), "{e}");
    assert_eq!(seen, 8);
}

/// How an [`Edited`] source fills a slot: from the frames in memory into `dst` (whole
/// frames) and their numbers into `numbers`, edited as the test needs.
type EditedFill =
    Box<dyn FnMut(&mut MemorySource<'static>, &mut [u16], &mut Vec<u64>) -> Result<usize> + Send>;

/// Frames in memory, each fill going through `fill`, which changes what the source gives
/// (fewer frames, other numbers, none, an error): the tests' sources that differ from
/// memory in one way each.
struct Edited {
    inner: MemorySource<'static>,
    fill: EditedFill,
}

impl Edited {
    fn new(
        data: Vec<u16>,
        rows: usize,
        cols: usize,
        fill: impl FnMut(&mut MemorySource<'static>, &mut [u16], &mut Vec<u64>) -> Result<usize>
        + Send
        + 'static,
    ) -> Self {
        let inner = MemorySource::new(data, rows, cols).expect("source");
        Self {
            inner,
            fill: Box::new(fill),
        }
    }

    /// Numbered `first`, `first + step`, ... (e.g. 100, 102, 104: gaps, as a raw file with
    /// lost frames has), at most 3 per fill (slots filled in part).
    fn offset(data: Vec<u16>, rows: usize, cols: usize, first: u64, step: u64) -> Self {
        Self::new(data, rows, cols, move |inner, dst, numbers| {
            let from = numbers.len();
            let most = dst.len().min(3 * rows * cols);
            let k = inner.fill(&mut dst[..most], numbers)?;
            numbers[from..]
                .iter_mut()
                .for_each(|x| *x = first + step * *x);
            Ok(k)
        })
    }

    /// Fails with an I/O error after `ok` frames.
    fn fails_after(data: Vec<u16>, rows: usize, cols: usize, ok: usize) -> Self {
        let mut read = 0;
        Self::new(data, rows, cols, move |inner, dst, numbers| {
            if read >= ok {
                return Err(Error::format("bad.npy", "truncated at frame 5"));
            }
            let most = dst.len().min((ok - read) * rows * cols);
            let k = inner.fill(&mut dst[..most], numbers)?;
            read += k;
            Ok(k)
        })
    }

    /// Delivers the frames without their numbers.
    fn unnumbered(data: Vec<u16>, rows: usize, cols: usize) -> Self {
        Self::new(data, rows, cols, |inner, dst, _| {
            inner.fill(dst, &mut Vec::new())
        })
    }
}

impl FrameSource for Edited {
    fn rows(&self) -> usize {
        self.inner.rows()
    }
    fn cols(&self) -> usize {
        self.inner.cols()
    }
    fn remaining_hint(&self) -> u64 {
        self.inner.remaining_hint()
    }
    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        (self.fill)(&mut self.inner, dst, numbers)
    }
}

/// A finder that holds two chunks at a time (as a GPU pipeline does) and reports an
/// overflow at stream index `at`, after visiting the frames before it; it names frames by
/// their chunks' numbers, as the finders do.
struct Overflowing {
    inner: CpuFinder,
    at: usize,
}

impl ClusterFinder for Overflowing {
    fn config(&self) -> &crate::config::FinderConfig {
        self.inner.config()
    }
    fn device(&self) -> String {
        "test".into()
    }
    fn push_pedestal(&mut self, frames: Frames<'_>) -> Result<()> {
        self.inner.push_pedestal(frames)
    }
    fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }
    fn pedestal(&self) -> Result<crate::Pedestal> {
        self.inner.pedestal()
    }
    fn set_pedestal(&mut self, p: crate::Pedestal) -> Result<()> {
        self.inner.set_pedestal(p)
    }
    fn find_each(
        &mut self,
        frames: Frames<'_>,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        self.inner.find_each(frames, visit)
    }
}

impl FedFinder for Overflowing {
    fn find_feed(
        &mut self,
        feed: &mut dyn FrameFeed,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut held: std::collections::VecDeque<FedChunk> = Default::default();
        let mut index = 0;
        while let Some(chunk) = feed.next_chunk()? {
            held.push_back(chunk);
            if held.len() == 2 {
                let c = held.pop_front().expect("held");
                let numbers: Vec<crate::FrameNumber> =
                    (0..c.frames()).filter_map(|k| c.numbers().get(k)).collect();
                feed.give_back(c);
                for number in numbers {
                    if index == self.at {
                        while let Some(c) = held.pop_front() {
                            feed.give_back(c);
                        }
                        return Err(Error::ClusterLimit {
                            frame: number,
                            found: 9,
                            limit: 1,
                        });
                    }
                    visit(FrameClusters::new(number, ClusterSize::S3, &[]))?;
                    index += 1;
                }
            }
        }
        held.into_iter().for_each(|c| feed.give_back(c));
        Ok(())
    }
}

/// The engine's chunks carry the source's frame numbers: a finder holding several slots
/// names an overflowing frame, and hands the visitor each frame, by the source's number,
/// through chunks filled in part.
#[test]
fn an_overflow_is_named_by_the_source_frame_number() {
    let (rows, cols) = (16, 16);
    let (dark, data) = generated(rows, cols, 9, 50, 12);
    for at in [0, 2, 3, 7] {
        let mut f = Overflowing {
            inner: finder(rows, cols, &dark),
            at,
        };
        let mut src = Edited::offset(data.clone(), rows, cols, 100, 2);
        let mut seen = Vec::new();
        let cfg = EngineConfig {
            chunk: 5,
            slots: 3,
            map: false,
        };
        let e = find_stream(&mut f, &mut src, cfg, &mut |n, _| {
            seen.push(n);
            Ok(())
        })
        .expect_err("overflow");
        match e {
            Error::ClusterLimit { frame, .. } => assert_eq!(frame, (100 + 2 * at) as u64, "{e}"),
            e => panic!("expected ClusterLimit, got {e}"),
        }
        assert!(
            seen.iter().copied().eq((0..at as u64).map(|i| 100 + 2 * i)),
            "{seen:?}"
        );
    }
}

/// Frame numbers ride with the frames to the cluster file: a source whose numbers pass
/// `i32::MAX` fails the run with an error naming that frame and the input (after the frames
/// before it reached the visitor), and no cluster file is left.
#[test]
fn a_frame_number_past_i32_max_fails_the_cluster_file_naming_the_frame() {
    use super::input::{Input, never_cancel};
    use super::run::{FinderChoice, RunOptions, run};
    let (rows, cols) = (16, 16);
    let (dark, data) = generated(rows, cols, 9, 50, 6);
    let dark = MemorySource::new(dark, rows, cols).expect("source");
    let mut pedestal = Input::from_source("the dark frames", Box::new(dark));
    let first = i32::MAX as u64 - 2;
    let numbered = Edited::offset(data, rows, cols, first, 1);
    let mut data = Input::from_source("the numbered frames", Box::new(numbered));
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("past.clust");
    let mut options = RunOptions::new(FinderChoice {
        device: crate::finder::select::DeviceChoice::Cpu,
        threads: Some(1),
        ..FinderChoice::default()
    });
    options.cluster_file = Some(out.clone());
    let mut seen = Vec::new();
    let e = run(
        &options,
        &mut pedestal,
        &mut data,
        &never_cancel,
        &mut |n, _| {
            seen.push(n);
            Ok(())
        },
    )
    .expect_err("a frame number past i32::MAX");
    let text = e.to_string();
    assert!(
        text.contains("frame number 2147483648 of the numbered frames"),
        "{text}"
    );
    assert!(
        matches!(e, Error::InvalidParameter { name: "out", .. }),
        "{e:?}"
    );
    assert_eq!(seen, [first, first + 1, first + 2]);
    assert!(!out.exists(), "no cluster file is left");
}

/// A source that delivers frames without a number for each fails its input with an error
/// saying so (no frame is named by a guess).
#[test]
fn a_source_that_numbers_no_frames_is_refused() {
    let (rows, cols) = (16, 16);
    let (dark, data) = generated(rows, cols, 9, 50, 4);
    let mut f = finder(rows, cols, &dark);
    let mut data = Edited::unnumbered(data, rows, cols);
    let cfg = EngineConfig::for_frames(rows, cols);
    let e = find_stream(&mut f, &mut data, cfg, &mut |_, _| Ok(()))
        .expect_err("frames without numbers");
    assert!(e.to_string().contains("frame numbers"), "{e}");
}

/// Absurd settings and a frame shape the finder was not made for are refused by name.
#[test]
fn bad_settings_are_refused() {
    let (rows, cols) = (16, 16);
    let (dark, data) = generated(rows, cols, 9, 50, 2);
    let mut f = finder(rows, cols, &dark);
    let cases = [
        (
            EngineConfig {
                chunk: 0,
                slots: 2,
                map: false,
            },
            "chunk",
        ),
        (
            EngineConfig {
                chunk: 1,
                slots: 1,
                map: false,
            },
            "slots",
        ),
        (
            EngineConfig {
                chunk: usize::MAX / 4,
                slots: 2,
                map: false,
            },
            "chunk",
        ),
    ];
    for (cfg, name) in cases {
        let mut src = MemorySource::new(data.clone(), rows, cols).expect("src");
        let e = find_stream(&mut f, &mut src, cfg, &mut |_, _| Ok(())).expect_err(name);
        assert!(e.to_string().contains(name), "{e}");
    }
    let mut other = MemorySource::new(vec![0; 2 * 8 * 16], 8, 16).expect("src");
    let e = find_stream(
        &mut f,
        &mut other,
        EngineConfig {
            chunk: 1,
            slots: 2,
            map: false,
        },
        &mut |_, _| Ok(()),
    )
    .expect_err("shape");
    assert!(e.to_string().contains("8 x 16"), "{e}");
}

/// A `.npy` file through the engine, read in place and mapped, gives what one call over
/// its frames gives, with its frame numbers, for chunks that do and do not divide it.
#[test]
fn a_npy_file_read_or_mapped_gives_the_same_clusters() {
    let (rows, cols) = (20, 36);
    let (dark, data) = generated(rows, cols, 11, 50, 17);
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("d.npy");
    crate::io::npy::write_u16_3d(&path, 17, rows, cols, &data).expect("write");
    let want = one_call(rows, cols, &dark, &data, 17);
    for map in [false, true] {
        for chunk in [1, 5, 17, 40] {
            let mut f = finder(rows, cols, &dark);
            let mut src = crate::io::NpyFrames::open(&path).expect("open");
            let mut got = Vec::new();
            let cfg = EngineConfig {
                chunk,
                slots: 2,
                map,
            };
            find_stream(&mut f, &mut src, cfg, &mut |n, fc| {
                got.push((n, fc.words().to_vec()));
                Ok(())
            })
            .expect("stream");
            assert!(got == want, "map {map}, chunk {chunk}");
            assert_eq!(src.remaining(), 0);
        }
    }
}

/// Several inputs through one ring: each input's clusters are those of a run over it
/// alone when `begin` resets the pedestal; a failing input in the middle ends with its
/// error after the frames before it, and the inputs after it still run; the ring is kept.
#[test]
fn several_inputs_each_as_if_alone_and_a_failure_stays_with_its_input() {
    let (rows, cols) = (20, 28);
    let g = Generator::new(GenConfig::new(rows, cols, 13)).expect("generator");
    let dark = g.frames(0, 50, false);
    let data: Vec<Vec<u16>> = (0..4)
        .map(|i| g.frames(50 + 30 * i, 11 + i as usize, true))
        .collect();
    let alone = |d: &[u16], n: usize| one_call(rows, cols, &dark, d, n);
    for (chunk, slots) in [(1, 2), (4, 3), (16, 2)] {
        let mut f = finder(rows, cols, &dark);
        let start = f.pedestal().expect("pedestal");
        let mut sources: Vec<Box<dyn FrameSource + Send>> = data
            .iter()
            .enumerate()
            .map(|(i, d)| -> Box<dyn FrameSource + Send> {
                if i == 1 {
                    Box::new(Edited::fails_after(d.clone(), rows, cols, 5))
                } else {
                    Box::new(MemorySource::new(d.clone(), rows, cols).expect("source"))
                }
            })
            .collect();
        let mut refs: Vec<&mut (dyn FrameSource + Send)> = Vec::new();
        for s in sources.iter_mut() {
            refs.push(&mut **s);
        }
        let cfg = EngineConfig {
            chunk,
            slots,
            map: false,
        };
        let mut ring = None;
        let mut got: Vec<Vec<(u64, Vec<u32>)>> = vec![Vec::new(); 4];
        let mut ended: Vec<Option<std::result::Result<u64, String>>> = vec![None; 4];
        struct Events<'e> {
            start: &'e crate::pedestal::Pedestal,
            got: &'e mut Vec<Vec<(u64, Vec<u32>)>>,
            ended: &'e mut Vec<Option<std::result::Result<u64, String>>>,
        }
        impl sink::InputEvents for Events<'_> {
            fn begin(&mut self, f: &mut dyn ClusterFinder, _: usize) -> Result<()> {
                f.set_pedestal(self.start.clone())
            }
            fn frame(&mut self, k: usize, fc: FrameClusters<'_>) -> Result<()> {
                self.got[k].push((fc.frame.get(), fc.words().to_vec()));
                Ok(())
            }
            fn end(
                &mut self,
                _: &mut dyn ClusterFinder,
                k: usize,
                r: Result<EngineStats>,
            ) -> Result<()> {
                self.ended[k] = Some(r.map(|s| s.frames).map_err(|e| e.to_string()));
                Ok(())
            }
        }
        find_streams(
            &mut f,
            &mut refs,
            cfg,
            &mut ring,
            &mut Events {
                start: &start,
                got: &mut got,
                ended: &mut ended,
            },
        )
        .expect("run");
        for k in [0, 2, 3] {
            assert_eq!(
                ended[k],
                Some(Ok(data[k].len() as u64 / (rows * cols) as u64))
            );
            assert!(
                got[k] == alone(&data[k], data[k].len() / (rows * cols)),
                "input {k}, chunk {chunk}"
            );
        }
        match &ended[1] {
            Some(Err(e)) => assert!(e.contains("truncated at frame 5"), "{e}"),
            other => panic!("input 1 should fail, got {other:?}"),
        }
        let first5 = alone(&data[1][..5 * rows * cols], 5);
        assert!(
            got[1] == first5,
            "the failing input's frames before the error, chunk {chunk}"
        );
        assert!(ring.is_some(), "the ring is kept");
    }
}

#[test]
fn a_kept_ring_is_reused_between_runs() {
    let (rows, cols) = (24, 40);
    let (dark, data) = generated(rows, cols, 8, 50, 30);
    let want = one_call(rows, cols, &dark, &data, 30);
    let cfg = EngineConfig {
        chunk: 4,
        slots: 3,
        map: false,
    };
    let px = rows * cols;
    let mut f = finder(rows, cols, &dark);
    let mut ring = None;
    let mut got = Vec::new();
    let mut first_ptrs = Vec::new();
    // Frames 0..10, then 10..30, through one kept ring.
    for (from, to) in [(0, 10), (10, 30)] {
        let mut src = MemorySource::new(&data[from * px..to * px], rows, cols).expect("src");
        find_stream_with(&mut f, &mut src, cfg, &mut ring, &mut |n, fc| {
            got.push((n + from as u64, fc.words().to_vec()));
            Ok(())
        })
        .expect("stream");
        let slots = ring.as_ref().expect("the ring came back");
        assert_eq!(slots.stores.len(), 3);
        let mut ptrs: Vec<usize> = slots
            .stores
            .iter()
            .map(|s| s.samples().as_ptr() as usize)
            .collect();
        ptrs.sort_unstable();
        if first_ptrs.is_empty() {
            first_ptrs = ptrs;
        } else {
            assert_eq!(ptrs, first_ptrs, "the same slots, not new ones");
        }
    }
    assert!(got == want);
    // A visitor error: the ring may be lost; the next run still works.
    let mut f = finder(rows, cols, &dark);
    let mut src = MemorySource::new(&data[..], rows, cols).expect("src");
    let e = find_stream_with(&mut f, &mut src, cfg, &mut ring, &mut |_, fc| {
        if fc.frame == 5 {
            Err(Error::param("visitor", "stop"))
        } else {
            Ok(())
        }
    });
    assert!(e.is_err());
    let mut f = finder(rows, cols, &dark);
    let mut src = MemorySource::new(&data[..], rows, cols).expect("src");
    let mut again = Vec::new();
    find_stream_with(&mut f, &mut src, cfg, &mut ring, &mut |n, fc| {
        again.push((n, fc.words().to_vec()));
        Ok(())
    })
    .expect("stream after an error");
    assert!(again == want);
    assert!(ring.is_some());
}
