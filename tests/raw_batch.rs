//! The batch reader of raw acquisitions (vectored positioned reads on several threads, in
//! place) against the one-record-at-a-time reader: the same frames, infos, frame numbers and
//! the whole gap report after every call, on acquisitions with several data files, gaps,
//! lost packets, frame numbers going backwards, truncated or padded tails (read with
//! `open_allowing_partial_records`: the default refuses them), absent files and ADC-ordered
//! MOENCH 03 frames; and the header count against what reading delivers.

use std::path::{Path, PathBuf};

use cluda::io::FrameSource;
use cluda::io::raw::{
    DetectorHeader, DetectorType, FrameDiscardPolicy, RawReader, RawWriter, RawWriterConfig,
};
use proptest::prelude::*;

/// One frame to write: how its number moves from the previous one, and whether packets
/// were lost.
#[derive(Clone, Debug)]
struct Rec {
    step: i64,
    lost: bool,
}

/// An acquisition to write and how to damage it.
#[derive(Clone, Debug)]
struct Acq {
    adc: bool,
    rows: usize,
    cols: usize,
    per_file: u64,
    first: u64,
    recs: Vec<Rec>,
    /// For some data files: bytes cut off the end (negative) or garbage appended (positive).
    tails: Vec<(usize, i64)>,
    /// A data file to remove (then the reader stops before it).
    remove: Option<usize>,
}

impl Acq {
    /// An undamaged image-ordered acquisition of `shape` (rows, cols) frames, `per_file` a
    /// file, numbered on from `first`.
    fn small(shape: (usize, usize), (per_file, first): (u64, u64), recs: Vec<Rec>) -> Acq {
        Acq {
            adc: false,
            rows: shape.0,
            cols: shape.1,
            per_file,
            first,
            recs,
            tails: vec![],
            remove: None,
        }
    }
}

/// `n` frames numbered one after the other, no packet lost.
fn in_order(n: usize) -> Vec<Rec> {
    vec![
        Rec {
            step: 1,
            lost: false
        };
        n
    ]
}

fn rec() -> impl Strategy<Value = Rec> {
    let step = prop_oneof![
        8 => Just(1i64),
        2 => 2i64..5,
        1 => Just(0i64),
        1 => -3i64..0,
    ];
    (step, prop::bool::weighted(0.2)).prop_map(|(step, lost)| Rec { step, lost })
}

fn acq() -> impl Strategy<Value = Acq> {
    let small = (1usize..5, 1usize..7, prop::collection::vec(rec(), 0..40));
    let adc = prop::collection::vec(rec(), 0..6).prop_map(|r| (400usize, 400usize, r));
    (
        prop_oneof![4 => small.prop_map(|s| (false, s)), 1 => adc.prop_map(|s| (true, s))],
        0u64..6,
        0u64..3,
        prop::collection::vec((0usize..8, -300i64..300), 0..3),
        prop::option::weighted(0.15, 0usize..8),
    )
        .prop_map(
            |((adc, (rows, cols, recs)), per_file, first, tails, remove)| Acq {
                adc,
                rows,
                cols,
                per_file,
                first,
                recs,
                tails,
                remove,
            },
        )
}

/// Writes `a` into `dir`; returns the master file.
fn write(dir: &Path, a: &Acq) -> PathBuf {
    let config = RawWriterConfig {
        rows: a.rows,
        cols: a.cols,
        detector: if a.adc {
            DetectorType::Moench03Old
        } else {
            DetectorType::Generic16
        },
        max_frames_per_file: a.per_file,
        version: 7.2,
        frame_padding: true,
        frame_discard_policy: FrameDiscardPolicy::NoDiscard,
        packets_per_frame: 4,
    };
    let mut w = RawWriter::create(dir, "acq", 0, config).expect("writer");
    let px = a.rows * a.cols;
    let mut number = a.first as i64;
    for (k, r) in a.recs.iter().enumerate() {
        number = (number + r.step).max(0);
        let mut h = DetectorHeader::complete(number as u64, 4);
        if r.lost {
            h.set_packet(1, false);
            h.packet_number = 3;
        }
        let image: Vec<u16> = (0..px)
            .map(|i| (k * 7919 + i * 31 + number as usize) as u16)
            .collect();
        w.write_frame_with_header(&h, &image).expect("frame");
    }
    let master = w.finish(None).expect("finish");
    let record = 112 + px as u64 * 2;
    let data = |f: usize| dir.join(format!("acq_d0_f{f}_0.raw"));
    for &(f, delta) in &a.tails {
        let p = data(f);
        let Ok(len) = std::fs::metadata(&p).map(|m| m.len()) else {
            continue;
        };
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .expect("open");
        if delta < 0 {
            file.set_len(len.saturating_sub((-delta) as u64 % record))
                .expect("cut");
        } else {
            let extra = delta as u64 % record;
            let bytes: Vec<u8> = (0..extra).map(|i| (i * 13) as u8).collect();
            std::io::Write::write_all(&mut &file, &bytes).expect("append");
        }
    }
    if let Some(f) = a.remove {
        let _ = std::fs::remove_file(data(f));
    }
    master
}

/// Whether reading ended in the same way (the same error message, or the same success).
fn same_end<T: std::fmt::Debug + PartialEq>(
    fast: &cluda::Result<T>,
    slow: &cluda::Result<T>,
) -> bool {
    match (fast, slow) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => a.to_string() == b.to_string(),
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// `next_frames` (batch) and `FrameSource::fill` equal `next_frames_one_by_one` call by
    /// call: frames, infos or numbers, and the report.
    #[test]
    fn batch_reads_equal_one_record_at_a_time(
        a in acq(),
        deliver in any::<bool>(),
        threads in 1usize..6,
        chunks in prop::collection::vec(1usize..9, 1..6),
        via_fill in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().expect("dir");
        let master = write(dir.path(), &a);
        let open = || RawReader::open_allowing_partial_records(&master).map(|r| r.deliver_incomplete(deliver));
        let (mut slow, mut fast) = match (open(), open()) {
            (Ok(s), Ok(f)) => (s, f),
            (s, f) => {
                prop_assert_eq!(s.err().map(|e| e.to_string()), f.err().map(|e| e.to_string()));
                return Ok(());
            }
        };
        fast.set_read_threads(threads);
        fast.set_min_part_bytes(1);
        let px = a.rows * a.cols;
        let counted = fast.count_deliverable();
        let mut delivered = 0u64;
        for call in 0.. {
            let c = chunks[call % chunks.len()];
            let mut want = Vec::new();
            let s = slow.next_frames_one_by_one(c, &mut want);
            let s_numbers: cluda::Result<Vec<u64>> =
                s.as_ref().map(|i| i.iter().map(|i| i.frame_number).collect()).map_err(|e| {
                    cluda::Error::Internal(e.to_string())
                });
            let (f_numbers, got) = if via_fill {
                // A slot full of garbage, as a reused ring slot is.
                let mut slot = vec![0xABCDu16; c * px];
                let mut numbers = Vec::new();
                let r = fast.fill(&mut slot, &mut numbers);
                let k = *r.as_ref().unwrap_or(&0);
                slot.truncate(k * px);
                (r.map(|_| numbers), slot)
            } else {
                let mut got = Vec::new();
                let r = fast.next_frames(c, &mut got);
                if let (Ok(fi), Ok(si)) = (&r, &s) {
                    prop_assert_eq!(fi, si);
                }
                (r.map(|i| i.iter().map(|i| i.frame_number).collect()), got)
            };
            prop_assert!(same_end(&f_numbers, &s_numbers), "{:?} vs {:?}", f_numbers, s_numbers);
            prop_assert_eq!(fast.report(), slow.report());
            let Ok(numbers) = f_numbers else { break };
            prop_assert!(got == want, "frames differ at call {}", call);
            delivered += numbers.len() as u64;
            if numbers.is_empty() {
                break;
            }
        }
        if let (Ok(n), true) = (counted, slow.report().frames_delivered == delivered) {
            prop_assert_eq!(n, delivered, "header count vs frames delivered");
        }
    }
}

/// The header count from a position inside the data: the frames still to come.
#[test]
fn count_from_the_middle_is_what_is_left() {
    let dir = tempfile::tempdir().expect("dir");
    let recs: Vec<Rec> = (0..25)
        .map(|k| Rec {
            step: 1,
            lost: k % 4 == 1,
        })
        .collect();
    let a = Acq {
        tails: vec![(2, 130)],
        ..Acq::small((3, 2), (4, 0), recs)
    };
    let master = write(dir.path(), &a);
    let mut r = RawReader::open_allowing_partial_records(&master).expect("open");
    r.set_read_threads(3);
    r.set_min_part_bytes(1);
    let total = r.count_deliverable().expect("count");
    assert_eq!(total, 25 - 6, "6 of 25 frames lost packets");
    let mut buf = Vec::new();
    let first = r.next_frames(7, &mut buf).expect("read").len() as u64;
    assert_eq!(
        FrameSource::count_remaining(&r).expect("count"),
        total - first
    );
    let mut all = RawReader::open_allowing_partial_records(&master)
        .expect("open")
        .deliver_incomplete(true);
    assert_eq!(all.count_deliverable().expect("count"), 25);
    assert_eq!(all.next_frames(100, &mut buf).expect("read").len(), 25);
}

/// Reading to the end through `FrameSource::fill` books the frame number of a partial last
/// record, as reading one record at a time does.
#[test]
fn fill_to_the_end_books_the_tail_header() {
    let dir = tempfile::tempdir().expect("dir");
    let a = Acq {
        tails: vec![(1, 118)],
        ..Acq::small((2, 2), (3, 10), in_order(5))
    };
    let master = write(dir.path(), &a);
    let mut r = RawReader::open_allowing_partial_records(&master).expect("open");
    let (mut slot, mut numbers) = (vec![0u16; 4 * 8], Vec::new());
    assert_eq!(r.fill(&mut slot, &mut numbers).expect("fill"), 5);
    assert_eq!(numbers, [11, 12, 13, 14, 15]);
    let t = &r.report().truncated;
    assert_eq!(t.len(), 1);
    let tail: [u8; 8] = std::array::from_fn(|i| (i * 13) as u8);
    assert_eq!(t[0].frame_number, Some(u64::from_le_bytes(tail)));
}

/// Open file descriptors of this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// A batch that crosses many data files leaves at most the current one open.
#[test]
fn batches_across_many_files_do_not_pile_up_handles() {
    let dir = tempfile::tempdir().expect("dir");
    let a = Acq::small((1, 2), (1, 0), in_order(300));
    let master = write(dir.path(), &a);
    let mut r = RawReader::open_allowing_partial_records(&master).expect("open");
    let before = open_fds();
    let mut buf = Vec::new();
    assert_eq!(r.next_frames(250, &mut buf).expect("read").len(), 250);
    let after = open_fds();
    // Other tests of this process open a few files meanwhile; 250 handles left open would
    // be far above that.
    assert!(after < before + 100, "{before} -> {after} open files");
}
