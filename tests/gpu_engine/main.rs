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
//!
//! One module a topic: [`feeds`] (`find_feed`), [`engine`] (`find_stream`); the shared feeds
//! and the test tools/gpu-checks names (`--exact`) stay here.

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

mod engine;
mod feeds;

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

/// Fails the test unless the feed's run (`got`, `g` after it) gave the CPU's clusters `want`,
/// left the CPU's pedestal `ped` and had every chunk `feed` lent given back.
#[track_caller]
fn assert_fed_as_cpu(
    (g, feed, got): (&GpuFinder, &TestFeed<'_>, &ClusterBatch),
    (want, ped): (&ClusterBatch, &Pedestal),
    what: &str,
) {
    assert!(got == want, "{what}");
    assert_eq!(&g.pedestal().unwrap(), ped, "{what}");
    assert_eq!(feed.lent, feed.back, "{what}");
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
