//! The feed contract ([`crate::finder::feed`]) kept by the CPU finder: `find_feed` over
//! irregular chunks gives what one `find_each` gives.

use crate::cluster::ClusterSize;
use crate::config::FinderConfig;
use crate::error::{Error, Result};
use crate::finder::feed::{ChunkedFeed, FedChunk, FrameFeed, FrameStore};
use crate::finder::{ClusterFinder, CpuFinder};
use crate::frame_number::FrameNumber;
use crate::frames::Frames;

const ROWS: usize = 20;
const COLS: usize = 28;
const PX: usize = ROWS * COLS;

fn data(n: usize) -> (Vec<u16>, Vec<u16>) {
    crate::testing::generated(ROWS, COLS, 21, 40, n)
}

fn finder(dark: &[u16]) -> CpuFinder {
    crate::testing::cpu_finder(ROWS, COLS, dark)
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
            let frame = fc.frame.get() as usize;
            if Some(frame) == fail_at {
                return Err(Error::param("visitor", "stop"));
            }
            got.push((frame, fc.words().to_vec()));
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
    /// Number frame `i` of the stream `500 + 3 i` ([`FedChunk::numbered`]).
    numbered: bool,
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
            numbered: false,
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
        let first = self.at;
        self.at += k;
        self.out += 1;
        let chunk = FedChunk::new(Box::new(store), k, PX, FrameNumber(first as u64))?;
        if self.numbered {
            let numbers = (first..first + k)
                .map(|i| FrameNumber(500 + 3 * i as u64))
                .collect();
            return chunk.numbered(numbers).map(Some);
        }
        Ok(Some(chunk))
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
        let frame = fc.frame.get() as usize;
        if Some(frame) == fail_at {
            return Err(Error::param("visitor", "stop"));
        }
        got.push((frame, fc.words().to_vec()));
        Ok(())
    });
    (r, got)
}

/// The default `find_feed` gives what one `find_each` gives, for irregular chunks (empty
/// ones too; chunks numbered by their frames' index in the stream), and gives every chunk
/// back.
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
        .map(|_| Box::new(vec![0u16; 8 * PX]) as Box<dyn FrameStore>)
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

/// Chunks that carry frame numbers (with gaps) name their frames by them: the clusters of
/// one `find_each`, each under its own number; a wrong count of numbers is refused.
#[test]
fn numbered_chunks_name_their_frames() {
    let (dark, data) = data(30);
    let (want, ped) = reference(&dark, &data, 30, None);
    let want: Vec<(usize, Vec<u32>)> = want.into_iter().map(|(i, w)| (500 + 3 * i, w)).collect();
    for sizes in [vec![30], vec![0, 7, 0, 11, 12], vec![1; 30]] {
        let mut f = finder(&dark);
        let mut feed = Script::new(&data, &sizes, None);
        feed.numbered = true;
        let (r, got) = run_feed(&mut f, &mut feed, None);
        r.expect("feed");
        assert!(got == want, "{sizes:?}");
        assert_eq!(f.pedestal().expect("pedestal"), ped, "{sizes:?}");
    }
    let chunk = FedChunk::new(Box::new(vec![0u16; 2 * PX]), 2, PX, FrameNumber(0)).expect("chunk");
    let e = chunk
        .numbered(vec![FrameNumber(1)])
        .err()
        .expect("one number for two frames");
    assert!(e.to_string().contains("frame numbers"), "{e}");
}

/// Frames numbered on their own name their clusters by those numbers, on one band and on
/// several, with the clusters of the same frames numbered by their index.
#[test]
fn numbered_frames_name_their_clusters() {
    let (dark, data) = data(9);
    let (want, _) = reference(&dark, &data, 9, None);
    let list: Vec<FrameNumber> = (0..9).map(|i| FrameNumber(7 + i * i)).collect();
    for threads in [1, 4] {
        let config = FinderConfig::new(ROWS, COLS)
            .size(ClusterSize::S3)
            .pedestal_frames(40);
        let mut f = CpuFinder::with_threads(config, threads).expect("finder");
        f.push_pedestal(Frames::new(&dark, 40, ROWS, COLS).expect("dark"))
            .expect("pedestal");
        let frames = Frames::new(&data, 9, ROWS, COLS)
            .and_then(|f| f.with_numbers(crate::FrameNumbers::Listed(&list)))
            .expect("frames");
        let mut got = Vec::new();
        f.find_each(frames, &mut |fc| {
            got.push((fc.frame, fc.words().to_vec()));
            Ok(())
        })
        .expect("find");
        let named: Vec<(FrameNumber, Vec<u32>)> =
            want.iter().map(|(i, w)| (list[*i], w.clone())).collect();
        assert!(got == named, "{threads} threads");
    }
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
                want.push((fc.frame.get() as usize, fc.words().to_vec()));
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
    let e = FedChunk::new(Box::new(vec![0u16; 10]), 2, 6, FrameNumber(0))
        .err()
        .expect("too small");
    assert!(e.to_string().contains("chunk"), "{e}");
    let (dark, _) = data(1);
    let mut f = finder(&dark);
    struct Odd;
    impl FrameFeed for Odd {
        fn next_chunk(&mut self) -> Result<Option<FedChunk>> {
            FedChunk::new(Box::new(vec![0u16; 3 * PX]), 2, PX + 1, FrameNumber(0)).map(Some)
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
