//! The session as the stream and the Python package assemble it ([`Session::with_finder`]):
//! the pedestal given, added up from dark frames, learnt from an input's first frames,
//! carried or restarted, the ring kept or made per input; each equal to `cluda find`'s run
//! ([`Session::open`] and [`Session::find`]) on the same frames.

use super::EngineConfig;
use super::input::{Input, never_cancel};
use super::run::{FinderChoice, InputOutputs, RunOptions};
use super::session::{RingPlan, Session};
use super::sink::{FnSink, Sink};
use crate::cluster::FrameClusters;
use crate::config::FindOptions;
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::finder::select::DeviceChoice;
use crate::generate::{GenConfig, Generator};
use crate::io::{FrameSource, MemorySource};
use crate::pedestal::Pedestal;

const ROWS: usize = 24;
const COLS: usize = 40;
const DARK: usize = 50;
const DATA: usize = 37;

/// Each frame's number and its clusters' words.
type Found = Vec<(u64, Vec<u32>)>;

/// The pedestal frames and the data frames.
fn frames() -> (Vec<u16>, Vec<u16>) {
    let g = Generator::new(GenConfig::new(ROWS, COLS, 7)).expect("generator");
    (g.frames(0, DARK, false), g.frames(DARK as u64, DATA, true))
}

fn choice() -> FinderChoice {
    FinderChoice {
        options: FindOptions::default(),
        device: DeviceChoice::Cpu,
        threads: Some(2),
    }
}

fn source(data: &[u16]) -> MemorySource<'_> {
    MemorySource::new(data, ROWS, COLS).expect("source")
}

/// What `cluda find` gives: the session opened on the pedestal input, one data input.
fn cluda_find(dark: &[u16], data: &[u16]) -> Found {
    let options = RunOptions::new(choice());
    let mut pedestal = Input::from_source("pedestal", Box::new(source(dark)));
    let mut session =
        Session::open(&options, &mut pedestal, DATA as u64, &never_cancel).expect("open");
    let mut input = Input::from_source("data", Box::new(source(data)));
    let mut got = Vec::new();
    let report = session
        .find(
            &mut input,
            &InputOutputs::default(),
            &never_cancel,
            &mut |n, fc| {
                got.push((n, fc.words().to_vec()));
                Ok(())
            },
        )
        .expect("find");
    assert_eq!(report.frames, DATA as u64);
    got
}

/// A session as the stream opens one: the finder opened by the caller, no pedestal yet.
fn stream_session(chunk: usize, ring: RingPlan) -> Session {
    let config = FindOptions::default().config(ROWS, COLS, DARK as u32);
    let (finder, note) = super::open_finder(config, DeviceChoice::Cpu, Some(2)).expect("finder");
    let engine = EngineConfig {
        chunk,
        slots: 3,
        map: false,
    };
    Session::with_finder(finder, note, engine, ring).expect("session")
}

/// One input into the session, carried on from where its finder is.
fn find_into(session: &mut Session, src: &mut (dyn FrameSource + Send)) -> Found {
    let mut got = Vec::new();
    let stats = session
        .find_into(
            src,
            &mut FnSink(|_, fc: &FrameClusters<'_>| {
                got.push((fc.frame.get(), fc.words().to_vec()));
                Ok(())
            }),
        )
        .expect("find_into");
    assert_eq!(stats.frames, got.len() as u64);
    got
}

/// The dark frames added into a host pedestal by the session, chunk by chunk.
fn dark_pedestal(session: &mut Session, dark: &[u16]) -> Pedestal {
    let c = session.finder().config().clone();
    let mut pedestal = Pedestal::new(ROWS, COLS, c.pedestal_frames, c.precision).expect("pedestal");
    let mut chunks = 0;
    let added = session
        .add_dark(&mut source(dark), &mut pedestal, &mut |_| chunks += 1)
        .expect("dark");
    assert_eq!((added, chunks), (DARK as u64, DARK.div_ceil(8)));
    pedestal
}

/// A pedestal given to the session (added up from dark frames, as the stream's dark
/// acquisitions are), then a data input: `cluda find`'s clusters, with the ring kept or made
/// per input; restarted, the same again; carried on, the frames of two inputs are those of
/// one.
#[test]
fn a_stream_shaped_session_equals_cluda_find() {
    let (dark, data) = frames();
    let want = cluda_find(&dark, &data);
    assert!(want.iter().any(|(_, w)| !w.is_empty()), "some clusters");
    for ring in [RingPlan::Kept, RingPlan::PerInput] {
        let mut session = stream_session(8, ring);
        assert!(!session.finder().is_ready());
        let pedestal = dark_pedestal(&mut session, &dark);
        session.set_pedestal(pedestal.clone()).expect("set");
        assert_eq!(
            find_into(&mut session, &mut source(&data)),
            want,
            "{ring:?}"
        );
        // Restarted: the same clusters again.
        session.restart_pedestal().expect("restart");
        assert_eq!(
            find_into(&mut session, &mut source(&data)),
            want,
            "{ring:?}"
        );
        // Started from a pedestal given for one input, carried on over two inputs: the
        // frames of one (the second numbers its frames from 0).
        session.start_from(&pedestal).expect("start");
        let cut = 20 * ROWS * COLS;
        let mut got = find_into(&mut session, &mut source(&data[..cut]));
        let second = find_into(&mut session, &mut source(&data[cut..]));
        got.extend(second.into_iter().map(|(n, w)| (n + 20, w)));
        assert_eq!(got, want, "{ring:?}");
    }
}

/// A pedestal learnt from an input's first N frames (the stream's `FirstFrames`): the rest
/// of the input is found as `cluda find` finds the data after that pedestal.
#[test]
fn a_pedestal_learnt_from_the_first_frames_equals_cluda_find() {
    let (dark, data) = frames();
    let want = cluda_find(&dark, &data);
    let all = [dark.as_slice(), data.as_slice()].concat();
    let mut session = stream_session(16, RingPlan::Kept);
    let mut src = source(&all);
    let mut numbers = Vec::new();
    let pushed = session
        .learn_pedestal(&mut src, &mut |n| numbers.extend_from_slice(n))
        .expect("learn");
    assert_eq!(pushed, DARK as u64);
    assert_eq!(numbers, (0..DARK as u64).collect::<Vec<_>>());
    assert!(session.finder().is_ready());
    let got: Found = find_into(&mut session, &mut src)
        .into_iter()
        .map(|(n, w)| (n - DARK as u64, w))
        .collect();
    assert_eq!(got, want);
    // An input that ends first leaves the finder not ready.
    let pushed = session
        .learn_pedestal(&mut source(&dark[..10 * ROWS * COLS]), &mut |_| ())
        .expect("short");
    assert_eq!(pushed, 10);
    assert!(!session.finder().is_ready());
}

/// The session's ring comes back after each input, and `ensure_ring` makes one only when it
/// is missing; `discard` takes what is left of a source and finds nothing.
#[test]
fn the_ring_is_kept_and_frames_can_be_thrown_away() {
    let (dark, data) = frames();
    let mut session = stream_session(8, RingPlan::Kept);
    assert!(session.slots.is_some(), "allocated ahead");
    let pedestal = dark_pedestal(&mut session, &dark);
    session.set_pedestal(pedestal).expect("set");
    find_into(&mut session, &mut source(&data));
    assert!(session.slots.is_some(), "kept");
    session.slots = None;
    session.ensure_ring().expect("ring");
    assert!(session.slots.is_some(), "made again");
    let mut src = source(&data);
    session.discard(&mut src).expect("discard");
    assert_eq!(src.remaining_hint(), 0);
    assert!(find_into(&mut session, &mut src).is_empty());
    // A session whose inputs make their own ring holds none.
    let mut per_input = stream_session(8, RingPlan::PerInput);
    per_input.ensure_ring().expect("nothing to do");
    assert!(per_input.slots.is_none());
}

/// A sink is told begin, its frames, then end; a failing sink is told abandon, and its error
/// is the input's.
#[test]
fn the_sink_hears_begin_frames_and_end_or_abandon() {
    struct Told {
        calls: Vec<&'static str>,
        fail_at: Option<u64>,
    }
    impl Sink for Told {
        fn begin(&mut self, _: usize, _: &mut dyn ClusterFinder) -> Result<()> {
            self.calls.push("begin");
            Ok(())
        }
        fn frame(&mut self, _: usize, fc: &FrameClusters<'_>) -> Result<()> {
            if Some(fc.frame.get()) == self.fail_at {
                return Err(Error::param("sink", "told to fail"));
            }
            self.calls.push("frame");
            Ok(())
        }
        fn end(&mut self, _: usize, _: &mut dyn ClusterFinder) -> Result<()> {
            self.calls.push("end");
            Ok(())
        }
        fn abandon(&mut self, _: usize, _: &mut dyn ClusterFinder) {
            self.calls.push("abandon");
        }
    }
    let (dark, data) = frames();
    let mut session = stream_session(8, RingPlan::Kept);
    let pedestal = dark_pedestal(&mut session, &dark);
    session.set_pedestal(pedestal).expect("set");
    let mut told = Told {
        calls: Vec::new(),
        fail_at: None,
    };
    session
        .find_into(&mut source(&data), &mut told)
        .expect("whole");
    let mut want = vec!["begin"];
    want.extend(std::iter::repeat_n("frame", DATA));
    want.push("end");
    assert_eq!(told.calls, want);
    let mut told = Told {
        calls: Vec::new(),
        fail_at: Some(3),
    };
    let e = session
        .find_into(&mut source(&data), &mut told)
        .expect_err("the sink fails");
    assert!(e.to_string().contains("told to fail"), "{e}");
    assert_eq!(told.calls, ["begin", "frame", "frame", "frame", "abandon"]);
}
