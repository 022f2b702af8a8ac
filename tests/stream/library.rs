//! The stream's own library calls: summaries reach the caller between the acquisitions'
//! frames.

use std::time::Duration;

use cluda::generate::{GenConfig, Generator};
use cluda::stream::Publisher;
use support::stream::{free_port, loopback};

use crate::SHAPE;

/// Three acquisitions back to back through the library calls: every acquisition's summary
/// reaches the caller after its own frames and before any of the next one's (its file is
/// committed while the next one starts), its file is in place by then, and the totals count
/// every acquisition.
#[test]
fn summaries_come_in_order_between_the_acquisitions_frames() {
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};

    use cluda::stream::{
        AcquisitionSummary, Callbacks, FullQueue, PedestalPlan, ReceiverConfig, ReplaySettings,
        StreamEvent, StreamSettings, replay,
    };

    let dir = tempfile::tempdir().expect("dir");
    let (rows, cols) = SHAPE;
    let g = Generator::new(GenConfig::new(rows, cols, 5)).expect("generator");
    let mut pedestal = cluda::Pedestal::new(rows, cols, 50, cluda::Precision::F64).expect("p");
    pedestal
        .push_frames(cluda::Frames::new(&g.frames(0, 50, false), 50, rows, cols).expect("frames"))
        .expect("push");
    let data = Arc::new(g.frames(50, 200, true));
    let port = free_port();
    let sender = {
        let data = Arc::clone(&data);
        std::thread::spawn(move || {
            let mut p = Publisher::bind(&loopback(port), 1000, true).expect("bind");
            assert_eq!(
                p.wait_for_subscribers(1, Duration::from_secs(60))
                    .expect("wait"),
                1
            );
            let settings = ReplaySettings {
                repeat: 3,
                ..ReplaySettings::default()
            };
            replay(
                &mut p,
                1,
                &mut |_| {
                    Ok(Box::new(
                        cluda::io::MemorySource::new(data.to_vec(), rows, cols).expect("source"),
                    ))
                },
                &settings,
                &AtomicBool::new(false),
            )
            .expect("replay")
        })
    };
    let mut config = ReceiverConfig::new(&loopback(port));
    config.full = FullQueue::Block;
    let out = dir.path().join("out");
    let mut settings = StreamSettings::new(cluda::FindOptions::default(), &out);
    settings.device = cluda::finder::select::DeviceChoice::Cpu;
    settings.pedestal = PedestalPlan::Fixed(pedestal);
    settings.acquisitions = Some(3);
    // "frame", or "summary <fileIndex>", as they reach the caller.
    let events = Mutex::new(Vec::<String>::new());
    // No fault; the sender going away after its last end of acquisition is a note, not one
    // (nor a connection warning).
    let report: cluda::stream::Reporter = Arc::new(|e: &StreamEvent| {
        assert!(matches!(e, StreamEvent::Note(_)), "{e:?}");
    });
    let totals = cluda::stream::run(
        config,
        &settings,
        Arc::new(AtomicBool::new(false)),
        Callbacks {
            report,
            note: &mut |_| {},
            summary: &mut |s: &AcquisitionSummary| {
                let file = s.file.as_ref().expect("a file");
                assert!(
                    file.exists(),
                    "{} not in place at its summary",
                    file.display()
                );
                assert_eq!((s.data_frames, s.first_lag.is_some()), (200, true));
                events
                    .lock()
                    .expect("lock")
                    .push(format!("summary {}", s.file_index));
                Ok(())
            },
            frame: &mut |_, _| events.lock().expect("lock").push("frame".into()),
            image: None,
        },
    )
    .expect("stream");
    sender.join().expect("sender");
    assert_eq!((totals.acquisitions, totals.frames), (3, 600), "{totals:?}");
    let events = events.into_inner().expect("events");
    let mut want = Vec::new();
    for k in 0..3 {
        want.extend(std::iter::repeat_n("frame".to_string(), 200));
        want.push(format!("summary {k}"));
    }
    assert!(events == want, "events out of order: {events:?}");
}
