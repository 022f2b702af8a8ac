//! Tests of the assembler: any part order, any loss, restarts, layouts.

use proptest::prelude::*;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::Assembler;
use super::messages::{Input, Notice, Output, PartFault};
use super::place::place;
use crate::stream::header::ZmqHeader;

/// Part headers of a `dy x dx` grid of `r x c` parts of frame `number` (flipped as `flip`).
fn part(number: u64, e: usize, (dy, dx): (u32, u32), (r, c): (u32, u32), flip: bool) -> ZmqHeader {
    let mut h = ZmqHeader::frame(r, c, number);
    h.frame_index = Some(number);
    h.detshape = [dx, dy];
    h.row = e as u32 / dx;
    h.column = e as u32 % dx;
    h.flip_rows = i64::from(flip);
    h.fname = "run".into();
    h
}

/// The bytes of part `e` of a whole frame `whole` (rows x cols), cut as the parts' headers
/// say (a flipped part holds its rows last first).
fn cut(whole: &[u16], cols: usize, h: &ZmqHeader) -> Vec<u8> {
    let (r, c) = (h.shape[1] as usize, h.shape[0] as usize);
    let mut out = Vec::with_capacity(r * c * 2);
    for i in 0..r {
        let src = if h.flip_rows != 0 { r - 1 - i } else { i };
        let row = h.row as usize * r + src;
        for x in 0..c {
            out.extend_from_slice(&whole[row * cols + h.column as usize * c + x].to_le_bytes());
        }
    }
    out
}

fn frame_of(number: u64, len: usize) -> Vec<u16> {
    (0..len)
        .map(|i| (number as usize * 7919 + i * 31) as u16)
        .collect()
}

/// The assembler of a `grid` (rows x columns) of endpoints `ep0`, `ep1`, ..., each sending
/// parts of `part` (rows x columns) pixels, told the whole frame's shape when `known`; with
/// the endpoints' count and the frame's rows and columns.
fn assembler(
    (dy, dx): (u32, u32),
    (r, c): (u32, u32),
    known: bool,
) -> (usize, usize, usize, Assembler<Vec<u8>>) {
    let n = (dy * dx) as usize;
    let (rows, cols) = ((dy * r) as usize, (dx * c) as usize);
    let names: Vec<String> = (0..n).map(|e| format!("ep{e}")).collect();
    let shape = known.then_some((rows, cols));
    let a = Assembler::new(names, shape, 10_000, Duration::from_secs(3600));
    (n, rows, cols, a)
}

/// Pushes the endpoints' streams into `a`, taking the next item of endpoint `order[k]` (mod
/// the endpoints; the next endpoint with items left when that one has none) at step `k`,
/// and collects every output as it comes.
fn interleave(
    a: &mut Assembler<Vec<u8>>,
    streams: &mut [VecDeque<Input<Vec<u8>>>],
    order: &[usize],
) -> Vec<Output<Vec<u8>>> {
    let n = streams.len();
    let now = Instant::now();
    let mut outs = Vec::new();
    for k in 0.. {
        if streams.iter().all(|q| q.is_empty()) {
            break;
        }
        let mut e = order[k % order.len()] % n;
        while streams[e].is_empty() {
            e = (e + 1) % n;
        }
        let input = streams[e].pop_front().expect("not empty");
        a.push(e, input, now).expect("the layout is right");
        outs.extend(std::iter::from_fn(|| a.pop()));
    }
    outs
}

proptest! {
    /// Any interleaving of the endpoints' in-order streams, any lost parts: every frame
    /// with all its parts comes out whole and equal to the frame cut up; every other frame
    /// some part of which came comes out given up, naming exactly the lost parts; in
    /// frame-number order; then one end.
    #[test]
    fn parts_in_any_order_with_any_loss(
        grid in prop_oneof![Just((2u32, 1u32)), Just((1, 2)), Just((2, 2)), Just((4, 1))],
        flip in any::<bool>(),
        frames in 1u64..12,
        lost in proptest::collection::vec(any::<bool>(), 48),
        order in proptest::collection::vec(0usize..4, 200),
    ) {
        let (dy, dx) = grid;
        let (r, c) = (3u32, 5u32);
        let (n, rows, cols, mut a) = assembler(grid, (r, c), true);
        let is_lost = |f: u64, e: usize| lost[(f as usize * n + e) % lost.len()];
        // Each endpoint's stream: its parts in frame order, then its end.
        let mut streams: Vec<VecDeque<Input<Vec<u8>>>> = (0..n)
            .map(|e| {
                let mut q: VecDeque<Input<Vec<u8>>> = (0..frames)
                    .filter(|&f| !is_lost(f, e))
                    .map(|f| {
                        // Odd endpoints flip their rows when asked (like Eiger's halves).
                        let h = part(f, e, (dy, dx), (r, c), flip && e % 2 == 1);
                        let d = cut(&frame_of(f, rows * cols), cols, &h);
                        Input::Part(h, Ok(d), Instant::now())
                    })
                    .collect();
                q.push_back(Input::End(ZmqHeader::end_of_acquisition()));
                q
            })
            .collect();
        let outs = interleave(&mut a, &mut streams, &order);
        prop_assert!(a.take_notices().is_empty());
        let mut last = None;
        let mut ends = 0;
        let mut seen = Vec::new();
        for o in outs {
            match o {
                Output::End(_) => ends += 1,
                Output::Frame(f) => {
                    prop_assert_eq!(ends, 0);
                    let number = f.header.number();
                    prop_assert!(last.is_none_or(|l| number > l));
                    last = Some(number);
                    seen.push(number);
                    let missing: Vec<usize> = (0..n).filter(|&e| is_lost(number, e)).collect();
                    if missing.is_empty() {
                        prop_assert!(f.fault.is_none());
                        prop_assert_eq!(f.header.rows_cols(), (rows, cols));
                        let mut whole = vec![0u16; rows * cols];
                        for p in &f.pieces {
                            place(&mut whole, cols, p);
                        }
                        prop_assert_eq!(whole, frame_of(number, rows * cols));
                    } else {
                        let (kind, why) = f.fault.expect("given up");
                        prop_assert_eq!(kind, PartFault::Incomplete);
                        prop_assert!(f.pieces.is_empty());
                        for e in 0..n {
                            let named = why.contains(&format!("(ep{e}) never arrived"));
                            prop_assert_eq!(named, missing.contains(&e), "{}", why);
                        }
                    }
                }
            }
        }
        prop_assert_eq!(ends, 1);
        // Every frame some part of which came, once.
        let want: Vec<u64> = (0..frames).filter(|&f| (0..n).any(|e| !is_lost(f, e))).collect();
        prop_assert_eq!(seen, want);
    }
}

/// Feeds `(endpoint, frame number)` parts of a 2 x 1 grid (`frameIndex` = the number) and
/// then both ends; returns the frames handed on (number, whole), the ends, the notices.
fn feed(parts: &[(usize, u64)]) -> (Vec<(u64, bool)>, usize, Vec<Notice>) {
    let (r, c) = (2u32, 3u32);
    let (rows, cols) = (4usize, 3usize);
    let names = vec!["ep0".to_string(), "ep1".to_string()];
    let mut a: Assembler<Vec<u8>> =
        Assembler::new(names, Some((rows, cols)), 10_000, Duration::from_secs(3600));
    let now = Instant::now();
    for &(e, f) in parts {
        let h = part(f, e, (2, 1), (r, c), false);
        let d = cut(&frame_of(f, rows * cols), cols, &h);
        a.push(e, Input::Part(h, Ok(d), now), now).expect("layout");
    }
    for e in 0..2 {
        a.push(e, Input::End(ZmqHeader::end_of_acquisition()), now)
            .expect("layout");
    }
    let (mut frames, mut ends) = (Vec::new(), 0);
    while let Some(o) = a.pop() {
        match o {
            Output::End(_) => ends += 1,
            Output::Frame(f) => frames.push((f.header.number(), f.fault.is_none())),
        }
    }
    (frames, ends, a.take_notices())
}

/// A receiver of two ports sends each part with its own extent as `rx_roi` (no ROI set):
/// the whole frame carries the whole frame's extent, never a part's (which would read as
/// a receiver ROI); a real ROI is handed on as it came.
#[test]
fn a_part_extent_as_rx_roi_is_no_roi() {
    let (r, c) = (2u32, 3u32);
    let (rows, cols) = (4usize, 3usize);
    for (sent, want) in [
        (Some([0, 2, 0, 1]), Some([0, 2, 0, 3])),
        (Some([0, 1, 0, 1]), Some([0, 1, 0, 1])),
        (None, None),
    ] {
        let names = vec!["ep0".to_string(), "ep1".to_string()];
        let mut a: Assembler<Vec<u8>> =
            Assembler::new(names, Some((rows, cols)), 10_000, Duration::from_secs(3600));
        let now = Instant::now();
        for e in 0..2 {
            let mut h = part(0, e, (2, 1), (r, c), false);
            h.rx_roi = sent;
            let d = cut(&frame_of(0, rows * cols), cols, &h);
            a.push(e, Input::Part(h, Ok(d), now), now).expect("layout");
        }
        match a.pop() {
            Some(Output::Frame(f)) => assert_eq!(f.header.rx_roi, want, "{sent:?}"),
            _ => panic!("no frame for {sent:?}"),
        }
    }
}

/// Issue 32 item 8: a part of frame 0 that one endpoint sends again mid-acquisition is a
/// duplicate (counted, discarded), not a restart: no frame is lost. Frame numbers that
/// really start again (frame 0 again, then frame 1 again) are still a restart.
#[test]
fn a_repeated_part_of_frame_0_is_a_duplicate_not_a_restart() {
    let mut parts = Vec::new();
    for f in 0..10 {
        parts.push((0, f));
        if f == 1 {
            parts.push((0, 0));
        }
        parts.push((1, f));
    }
    let (frames, ends, notices) = feed(&parts);
    assert_eq!(frames, (0..10).map(|f| (f, true)).collect::<Vec<_>>());
    assert_eq!(ends, 1);
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].kind, PartFault::Duplicate);
    assert!(
        notices[0].message.contains("frame 0: its part from ep0"),
        "{}",
        notices[0].message
    );

    // The repeat as the endpoint's last part before its end: a duplicate too.
    let mut parts: Vec<(usize, u64)> = (0..4).flat_map(|f| [(0, f), (1, f)]).collect();
    parts.push((1, 0));
    let (frames, ends, notices) = feed(&parts);
    assert_eq!(frames.len(), 4);
    assert_eq!(ends, 1);
    let kinds: Vec<PartFault> = notices.iter().map(|n| n.kind).collect();
    assert_eq!(kinds, [PartFault::Duplicate]);

    // A real restart, the frame numbers starting again at the same number: frames 0..6,
    // then 0..4 again; two acquisitions, every frame whole.
    let parts: Vec<(usize, u64)> = (0..6).chain(0..4).flat_map(|f| [(0, f), (1, f)]).collect();
    let (frames, ends, notices) = feed(&parts);
    let want: Vec<(u64, bool)> = (0..6).chain(0..4).map(|f| (f, true)).collect();
    assert_eq!(frames, want);
    assert_eq!(ends, 2);
    assert!(
        notices.iter().all(|n| n.kind == PartFault::Restart) && !notices.is_empty(),
        "{notices:?}"
    );
    assert!(
        notices[0].message.contains("restarted mid-acquisition"),
        "{}",
        notices[0].message
    );
}

/// One endpoint's item of the two-acquisition oracle: a part present, dropped by cluda,
/// or lost before it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fate {
    Here,
    Dropped,
    Lost,
}

proptest! {
    /// Two acquisitions, each endpoint's stream in order (parts, parts dropped by cluda,
    /// parts lost; its end message, sometimes lost when its next item is a part of the
    /// second), interleaved at random: the first acquisition's frames, its end, the
    /// second's frames, its end, never mixed; each frame whole (equal to the frame cut up)
    /// or given up with the gravest reason (dropped before lost).
    #[test]
    fn two_acquisitions_interleaved_with_drops_and_losses(
        grid in prop_oneof![Just((2u32, 1u32)), Just((2, 2))],
        frames in (1u64..8, 1u64..8),
        fates in proptest::collection::vec(0u8..6, 64),
        end_lost in proptest::collection::vec(any::<bool>(), 4),
        order in proptest::collection::vec(0usize..4, 300),
    ) {
        let (r, c) = (2u32, 3u32);
        let (n, rows, cols, mut a) = assembler(grid, (r, c), false);
        let fate = |acq: u64, f: u64, e: usize| match fates
            [((acq * 16 + f) as usize * n + e) % fates.len()]
        {
            0 => Fate::Lost,
            1 => Fate::Dropped,
            _ => Fate::Here};
        let content = |acq: u64, f: u64| frame_of(acq * 100 + f, rows * cols);
        let counts = [frames.0, frames.1];
        let mut restarts = 0;
        let mut streams: Vec<VecDeque<Input<Vec<u8>>>> = (0..n)
            .map(|e| {
                let mut q = VecDeque::new();
                for acq in 0..2u64 {
                    for f in 0..counts[acq as usize] {
                        match fate(acq, f, e) {
                            Fate::Lost => {}
                            Fate::Dropped => q.push_back(Input::Dropped(f)),
                            Fate::Here => {
                                let mut h = part(f, e, grid, (r, c), false);
                                h.file_index = acq;
                                h.frame_index = Some(f);
                                let d = cut(&content(acq, f), cols, &h);
                                q.push_back(Input::Part(h, Ok(d), Instant::now()));
                            }
                        }
                    }
                    // A lost end of the first acquisition, only when this endpoint's
                    // next item is a part of the second (which says it moved on).
                    let next_is_part = (0..counts[1])
                        .map(|f| fate(1, f, e))
                        .find(|x| *x != Fate::Lost)
                        == Some(Fate::Here);
                    // (and it sent a part of the first: a first acquisition of which
                    // nothing came cannot be told from the second).
                    let sent_one = (0..counts[0]).any(|f| fate(0, f, e) == Fate::Here);
                    if acq == 1 || !(end_lost[e] && next_is_part && sent_one) {
                        q.push_back(Input::End(ZmqHeader::end_of_acquisition()));
                    } else {
                        restarts += 1;
                    }
                }
                q
            })
            .collect();
        let outs = interleave(&mut a, &mut streams, &order);
        let notices = a.take_notices();
        prop_assert_eq!(notices.len(), restarts, "{:?}", notices);
        prop_assert!(notices.iter().all(|x| x.kind == PartFault::Restart));
        let mut acq = 0u64;
        let mut last: Option<u64> = None;
        let mut seen: Vec<Vec<u64>> = vec![Vec::new(), Vec::new()];
        for o in outs {
            match o {
                Output::End(_) => {
                    acq += 1;
                    last = None;
                }
                Output::Frame(f) => {
                    prop_assert!(acq < 2);
                    let number = f.header.number();
                    prop_assert!(last.is_none_or(|l| number > l));
                    last = Some(number);
                    if f.header.frame_index.is_some() {
                        // A frame of which only drops came has no header to say.
                        prop_assert_eq!(f.header.file_index, acq);
                    }
                    seen[acq as usize].push(number);
                    let fs: Vec<Fate> = (0..n).map(|e| fate(acq, number, e)).collect();
                    if fs.iter().all(|x| *x == Fate::Here) {
                        prop_assert!(f.fault.is_none());
                        let mut whole = vec![0u16; rows * cols];
                        for p in &f.pieces {
                            place(&mut whole, cols, p);
                        }
                        prop_assert_eq!(whole, content(acq, number));
                    } else {
                        let (kind, _) = f.fault.expect("given up");
                        let want = if fs.contains(&Fate::Dropped) {
                            PartFault::Dropped
                        } else {
                            PartFault::Incomplete
                        };
                        prop_assert_eq!(kind, want);
                    }
                }
            }
        }
        prop_assert_eq!(acq, 2);
        for (i, got) in seen.iter().enumerate() {
            let want: Vec<u64> = (0..counts[i])
                .filter(|&f| (0..n).any(|e| fate(i as u64, f, e) != Fate::Lost))
                .collect();
            prop_assert_eq!(got, &want);
        }
    }
}

#[test]
fn a_late_part_is_counted_and_a_bad_layout_named() {
    let now = Instant::now();
    let names = vec!["a".to_string(), "b".to_string()];
    let mut x: Assembler<Vec<u8>> =
        Assembler::new(names.clone(), None, 100, Duration::from_secs(60));
    let h = |f, e| part(f, e, (2, 1), (2, 2), false);
    let d = || Ok(vec![0u8; 8]);
    x.push(0, Input::Part(h(10, 0), d(), now), now).expect("ok");
    x.push(1, Input::Part(h(11, 1), d(), now), now).expect("ok");
    // Frame 10 is given up (b is past it); b's part of it is then late.
    x.push(1, Input::Part(h(10, 1), d(), now), now).expect("ok");
    let notes = x.take_notices();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].kind, PartFault::Late);
    assert!(notes[0].message.contains("frame 10"), "{notes:?}");
    match x.pop() {
        Some(Output::Frame(f)) => {
            let (kind, why) = f.fault.expect("given up");
            assert_eq!(kind, PartFault::Incomplete);
            assert!(why.contains("part 2 of 2 (b) never arrived"), "{why}");
        }
        o => panic!("{o:?}"),
    }
    // Frame 11 waits for a's part; time gives it up.
    assert!(x.pop().is_none());
    x.poll(now + Duration::from_secs(61));
    assert!(matches!(x.pop(), Some(Output::Frame(f)) if f.fault.is_some()));

    // Two parts claiming the same place.
    let mut y: Assembler<Vec<u8>> =
        Assembler::new(names.clone(), None, 100, Duration::from_secs(60));
    y.push(0, Input::Part(h(0, 0), d(), now), now).expect("ok");
    let e = y
        .push(1, Input::Part(h(0, 0), d(), now), now)
        .expect_err("overlap");
    assert!(e.0.contains("b (header: row 0 column 0"), "{}", e.0);
    // Parts that make another frame than the pedestal's.
    let mut z: Assembler<Vec<u8>> =
        Assembler::new(names, Some((4, 4)), 100, Duration::from_secs(60));
    z.push(0, Input::Part(h(0, 0), d(), now), now).expect("ok");
    let e = z
        .push(1, Input::Part(h(0, 1), d(), now), now)
        .expect_err("wrong shape");
    assert!(
        e.0.contains("4 x 2 frames, the pedestal's are 4 x 4"),
        "{}",
        e.0
    );
}
