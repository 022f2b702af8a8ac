//! Chunks of frames lent to a finder one after another: the pull side of the engine's ring,
//! behind [`crate::ClusterFinder::find_feed`].
//!
//! A feed hands out [`FedChunk`]s in frame order; the finder reads them (a GPU finder uploads
//! them while it finds earlier ones) and gives each back once nothing reads it any more. The
//! engine's feed is its ring of slots: a chunk given back goes straight to the reader thread,
//! which fills it with the next frames while the finder is still busy with later chunks.
//!
//! Why not one `find_each` call per chunk: a GPU call ends by waiting for the GPU, so every
//! chunk boundary drained the pipeline (upload, kernels, download and collection ran one after
//! another at each boundary). Pulled chunks flow through one pipeline instead.

use super::{Chunk, FrameStore};
use crate::error::{Error, Result};

/// A chunk of whole frames lent to a finder by a [`FrameFeed`]: memory the feed owns and
/// does not touch until the finder gives the chunk back, so that a GPU can read it by DMA
/// in the meantime.
pub struct FedChunk {
    chunk: Chunk,
    frames: usize,
    len: usize,
}

impl FedChunk {
    /// The first `frames` frames of `frame_len` samples each in `store` (any further samples
    /// are not part of the chunk). A store from the finder's
    /// [`crate::ClusterFinder::frame_store`] is read fastest (page-locked for a GPU).
    ///
    /// # Errors
    /// [`Error::Shape`] when `store` holds fewer than `frames x frame_len` samples.
    pub fn new(store: Box<dyn FrameStore>, frames: usize, frame_len: usize) -> Result<Self> {
        Self::of(Chunk::Slot(store), frames, frame_len)
    }

    pub(super) fn of(chunk: Chunk, frames: usize, frame_len: usize) -> Result<Self> {
        let have = chunk.samples().len();
        match frames.checked_mul(frame_len) {
            Some(len) if len <= have => Ok(Self { chunk, frames, len }),
            _ => Err(Error::shape(
                "chunk",
                format!("{frames} frames of {frame_len} samples"),
                format!("{have} samples"),
            )),
        }
    }

    /// Frames in the chunk.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// The chunk's samples: exactly its frames, C order.
    pub fn samples(&self) -> &[u16] {
        &self.chunk.samples()[..self.len]
    }

    /// The memory back, to fill again (`None` for a piece of a mapped file, which has nothing
    /// to reuse).
    pub fn into_store(self) -> Option<Box<dyn FrameStore>> {
        self.chunk.into_store()
    }

    pub(super) fn into_chunk(self) -> Chunk {
        self.chunk
    }
}

/// Chunks of frames, lent in frame order (see the module docs).
///
/// The contract the finder keeps: every chunk it takes is given back exactly once (also when
/// the call fails), and nothing reads a chunk after it is given back. A chunk that is not
/// given back (a CUDA failure that leaves the GPU in an unknown state) is dropped instead.
pub trait FrameFeed {
    /// The next chunk, waiting for it; `None` at the end of the input.
    ///
    /// # Errors
    /// The input's error (e.g. [`Error::Io`] naming the file); the finder then finishes the
    /// frames it already holds and returns it.
    fn next_chunk(&mut self) -> Result<Option<FedChunk>>;

    /// Takes back a chunk that the finder no longer reads.
    fn give_back(&mut self, chunk: FedChunk);

    /// Threads that keep producing chunks (reading or generating frames) while the finder
    /// runs: cores they take from a finder that computes on the host, which leaves them those
    /// cores ([`crate::CpuFinder`]'s `find_feed`). 0 (the default) for chunks that are in
    /// memory already or mapped.
    fn producer_threads(&self) -> usize {
        0
    }
}

/// A feed over frames already in memory, cut into chunks of at most `chunk` frames, each
/// copied into a store of the finder's choice (page-locked for a GPU finder) and reused:
/// `stores` of them circulate. For callers whose frames arrive in pieces and for tests.
pub struct ChunkedFeed<'a> {
    data: &'a [u16],
    frame_len: usize,
    chunk: usize,
    next: usize,
    free: Vec<Box<dyn FrameStore>>,
    /// Chunks handed out and not given back.
    out: usize,
    /// Most chunks ever out at once.
    most_out: usize,
}

impl<'a> ChunkedFeed<'a> {
    /// `data` (whole frames of `frame_len` samples) in chunks of `chunk` frames through the
    /// given stores (each at least `chunk x frame_len` samples).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a zero chunk or frame length, no store, or a store too
    /// small; [`Error::Shape`] when `data` is not a whole number of frames.
    pub fn new(
        data: &'a [u16],
        frame_len: usize,
        chunk: usize,
        stores: Vec<Box<dyn FrameStore>>,
    ) -> Result<Self> {
        if chunk == 0 || frame_len == 0 {
            return Err(Error::param("chunk", "chunks and frames must not be empty"));
        }
        if stores.is_empty() {
            return Err(Error::param("stores", "a feed needs at least one store"));
        }
        let need = chunk.saturating_mul(frame_len);
        if let Some(s) = stores.iter().find(|s| s.samples().len() < need) {
            return Err(Error::param(
                "stores",
                format!(
                    "a store of {} samples, chunks need {need}",
                    s.samples().len()
                ),
            ));
        }
        if !data.len().is_multiple_of(frame_len) {
            return Err(Error::shape(
                "frames",
                format!("a multiple of {frame_len} samples"),
                format!("{} samples", data.len()),
            ));
        }
        Ok(Self {
            data,
            frame_len,
            chunk,
            next: 0,
            free: stores,
            out: 0,
            most_out: 0,
        })
    }

    /// Chunks handed out and not given back yet.
    pub fn outstanding(&self) -> usize {
        self.out
    }

    /// The most chunks that were out at once.
    pub fn most_outstanding(&self) -> usize {
        self.most_out
    }
}

impl FrameFeed for ChunkedFeed<'_> {
    fn next_chunk(&mut self) -> Result<Option<FedChunk>> {
        let frames = self.data.len() / self.frame_len;
        let k = self.chunk.min(frames - self.next);
        if k == 0 {
            return Ok(None);
        }
        let mut store = self.free.pop().ok_or_else(|| {
            Error::param(
                "stores",
                format!(
                    "all {} stores are lent; the finder must give chunks back",
                    self.out
                ),
            )
        })?;
        let len = k * self.frame_len;
        let from = self.next * self.frame_len;
        store.samples_mut()[..len].copy_from_slice(&self.data[from..from + len]);
        self.next += k;
        self.out += 1;
        self.most_out = self.most_out.max(self.out);
        FedChunk::new(store, k, self.frame_len).map(Some)
    }

    fn give_back(&mut self, chunk: FedChunk) {
        self.out = self.out.saturating_sub(1);
        if let Some(s) = chunk.into_store() {
            self.free.push(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSize;
    use crate::config::FinderConfig;
    use crate::finder::{ClusterFinder, CpuFinder};
    use crate::frames::Frames;
    use crate::generate::{GenConfig, Generator};

    const ROWS: usize = 20;
    const COLS: usize = 28;
    const PX: usize = ROWS * COLS;

    fn data(n: usize) -> (Vec<u16>, Vec<u16>) {
        let g = Generator::new(GenConfig::new(ROWS, COLS, 21)).expect("generator");
        (g.frames(0, 40, false), g.frames(40, n, true))
    }

    fn finder(dark: &[u16]) -> CpuFinder {
        let config = FinderConfig::new(ROWS, COLS)
            .size(ClusterSize::S3)
            .pedestal_frames(40);
        let mut f = CpuFinder::new(config).expect("finder");
        f.push_pedestal(Frames::new(dark, 40, ROWS, COLS).expect("dark"))
            .expect("pedestal");
        f
    }

    /// Every frame's words with its index, from one `find_each` over the first `n` frames
    /// (a visitor failing at `fail_at`), and the pedestal after.
    fn reference(
        dark: &[u16],
        data: &[u16],
        n: usize,
        fail_at: Option<usize>,
    ) -> (Vec<(usize, Vec<u32>)>, crate::Pedestal) {
        let mut f = finder(dark);
        let mut got = Vec::new();
        let _ = f.find_each(
            Frames::new(&data[..n * PX], n, ROWS, COLS).expect("frames"),
            &mut |fc| {
                if Some(fc.frame) == fail_at {
                    return Err(Error::param("visitor", "stop"));
                }
                got.push((fc.frame, fc.words().to_vec()));
                Ok(())
            },
        );
        (got, f.pedestal().expect("pedestal"))
    }

    /// A feed of chunks of the given sizes (zero-frame chunks included), failing instead of
    /// the chunk at `fail_at`; it overwrites every chunk given back, so a finder that read a
    /// chunk after giving it back would find other clusters.
    struct Script {
        data: Vec<u16>,
        sizes: Vec<usize>,
        fail_at: Option<usize>,
        next: usize,
        at: usize,
        out: usize,
        back: usize,
        /// What it says for [`FrameFeed::producer_threads`].
        producers: usize,
    }

    impl Script {
        fn new(data: &[u16], sizes: &[usize], fail_at: Option<usize>) -> Self {
            Self {
                data: data.to_vec(),
                sizes: sizes.to_vec(),
                fail_at,
                next: 0,
                at: 0,
                out: 0,
                back: 0,
                producers: 0,
            }
        }
    }

    impl FrameFeed for Script {
        fn next_chunk(&mut self) -> Result<Option<FedChunk>> {
            if Some(self.next) == self.fail_at {
                return Err(Error::param("feed", "the input broke"));
            }
            let Some(&k) = self.sizes.get(self.next) else {
                return Ok(None);
            };
            self.next += 1;
            // One frame more than the chunk: a store larger than its frames.
            let mut store = vec![7u16; (k + 1) * PX];
            store[..k * PX].copy_from_slice(&self.data[self.at * PX..(self.at + k) * PX]);
            self.at += k;
            self.out += 1;
            FedChunk::new(Box::new(store), k, PX).map(Some)
        }

        fn producer_threads(&self) -> usize {
            self.producers
        }

        fn give_back(&mut self, chunk: FedChunk) {
            self.back += 1;
            if let Some(mut s) = chunk.into_store() {
                s.samples_mut().fill(u16::MAX);
            }
        }
    }

    fn run_feed(
        f: &mut CpuFinder,
        feed: &mut dyn FrameFeed,
        fail_at: Option<usize>,
    ) -> (Result<()>, Vec<(usize, Vec<u32>)>) {
        let mut got = Vec::new();
        let r = f.find_feed(feed, &mut |fc| {
            if Some(fc.frame) == fail_at {
                return Err(Error::param("visitor", "stop"));
            }
            got.push((fc.frame, fc.words().to_vec()));
            Ok(())
        });
        (r, got)
    }

    /// The default `find_feed` gives what one `find_each` gives, numbered through the
    /// stream, for irregular chunks (empty ones too), and gives every chunk back.
    #[test]
    fn the_default_feed_path_equals_one_call() {
        let (dark, data) = data(30);
        let (want, ped) = reference(&dark, &data, 30, None);
        for sizes in [
            vec![30],
            vec![1; 30],
            vec![0, 7, 0, 0, 11, 12],
            vec![4, 4, 4, 4, 4, 4, 6],
            vec![29, 1],
        ] {
            let mut f = finder(&dark);
            let mut feed = Script::new(&data, &sizes, None);
            let (r, got) = run_feed(&mut f, &mut feed, None);
            r.expect("feed");
            assert!(got == want, "{sizes:?}");
            assert_eq!(f.pedestal().expect("pedestal"), ped, "{sizes:?}");
            assert_eq!((feed.out, feed.back), (sizes.len(), sizes.len()));
        }
        let mut f = finder(&dark);
        let stores: Vec<Box<dyn FrameStore>> = (0..2)
            .map(|_| f.frame_store(8 * PX).expect("store"))
            .collect();
        let mut feed = ChunkedFeed::new(&data, PX, 8, stores).expect("feed");
        let (r, got) = run_feed(&mut f, &mut feed, None);
        r.expect("chunked");
        assert!(got == want);
        assert_eq!(feed.outstanding(), 0);
        assert_eq!(
            feed.most_outstanding(),
            1,
            "the CPU holds one chunk at a time"
        );
    }

    /// The CPU finder leaves a core to each thread the feed keeps producing with (fewer
    /// bands, down to one): the same clusters and pedestal as one `find_each`, at 3x3 and 9x9.
    #[test]
    fn fewer_bands_for_a_busy_feed_give_the_same_clusters() {
        let (dark, data) = data(13);
        for size in [ClusterSize::S3, ClusterSize::S9] {
            let config = FinderConfig::new(ROWS, COLS).size(size).pedestal_frames(40);
            let make = |threads| {
                let mut f = CpuFinder::with_threads(config.clone(), threads).expect("finder");
                f.push_pedestal(Frames::new(&dark, 40, ROWS, COLS).expect("dark"))
                    .expect("pedestal");
                f
            };
            let mut one = make(1);
            let mut want = Vec::new();
            one.find_each(
                Frames::new(&data, 13, ROWS, COLS).expect("frames"),
                &mut |fc| {
                    want.push((fc.frame, fc.words().to_vec()));
                    Ok(())
                },
            )
            .expect("one call");
            for producers in [0, 1, 2, 3, 4, 9] {
                let mut f = make(4);
                let mut feed = Script::new(&data, &[5, 0, 8], None);
                feed.producers = producers;
                let (r, got) = run_feed(&mut f, &mut feed, None);
                r.expect("feed");
                assert!(got == want, "{size}, {producers} producers");
                assert!(
                    f.pedestal().expect("pedestal") == one.pedestal().expect("pedestal"),
                    "{size}, {producers} producers"
                );
            }
        }
    }

    /// A feed error stops the stream after every frame lent before it; a visitor error keeps
    /// the frames up to it, as one `find_each` does.
    #[test]
    fn errors_of_the_feed_and_the_visitor_stop_cleanly() {
        let (dark, data) = data(30);
        let sizes = [5, 6, 7, 12];
        let mut f = finder(&dark);
        let mut feed = Script::new(&data, &sizes, Some(2));
        let (r, got) = run_feed(&mut f, &mut feed, None);
        assert!(
            r.expect_err("feed error")
                .to_string()
                .contains("the input broke")
        );
        let (want, ped) = reference(&dark, &data, 11, None);
        assert!(got == want);
        assert_eq!(f.pedestal().expect("pedestal"), ped);
        assert_eq!((feed.out, feed.back), (2, 2));

        for fail in [0, 4, 5, 13, 29] {
            let mut f = finder(&dark);
            let mut feed = Script::new(&data, &sizes, None);
            let (r, got) = run_feed(&mut f, &mut feed, Some(fail));
            assert!(r.is_err());
            let (want, ped) = reference(&dark, &data, 30, Some(fail));
            assert!(got == want, "visitor fails at {fail}");
            assert_eq!(
                f.pedestal().expect("pedestal"),
                ped,
                "visitor fails at {fail}"
            );
            assert_eq!(feed.out, feed.back);
        }
    }

    /// Chunks that are not whole frames of the finder's shape, and stores too small, are
    /// refused by name.
    #[test]
    fn bad_chunks_are_refused() {
        let e = FedChunk::new(Box::new(vec![0u16; 10]), 2, 6)
            .err()
            .expect("too small");
        assert!(e.to_string().contains("chunk"), "{e}");
        let (dark, _) = data(1);
        let mut f = finder(&dark);
        struct Odd;
        impl FrameFeed for Odd {
            fn next_chunk(&mut self) -> Result<Option<FedChunk>> {
                FedChunk::new(Box::new(vec![0u16; 3 * PX]), 2, PX + 1).map(Some)
            }
            fn give_back(&mut self, _: FedChunk) {}
        }
        let e = f
            .find_feed(&mut Odd, &mut |_| Ok(()))
            .expect_err("frames of another shape");
        assert!(e.to_string().contains("frames"), "{e}");
        let e = ChunkedFeed::new(&[0u16; 10], 5, 2, vec![Box::new(vec![0u16; 9])])
            .err()
            .expect("store too small");
        assert!(e.to_string().contains("stores"), "{e}");
        let e = ChunkedFeed::new(&[0u16; 11], 5, 1, vec![Box::new(vec![0u16; 5])])
            .err()
            .expect("partial frame");
        assert!(e.to_string().contains("frames"), "{e}");
    }
}
