//! Publishing ZMQ messages of one's own to a `cluda stream` under test (when cluda is built
//! with its `stream` feature): publishers the stream has subscribed to, and generated frames
//! with headers edited to be faulty.

use std::time::Duration;

use cluda::generate::Generator;
use cluda::stream::header::DET_TYPE_MOENCH;
use cluda::stream::{Publisher, ZmqHeader};

use crate::stream::loopback;

/// Publishers bound to `n` loopback ports from `port` on (no dropping), once the stream under
/// test has subscribed to each: the tests that send their own messages start this way.
pub fn subscribed(port: u16, n: usize) -> Vec<Publisher> {
    (0..n as u16)
        .map(|i| {
            let mut p = Publisher::bind(&loopback(port + i), 1000, true).expect("bind");
            let subscribers = p.wait_for_subscribers(1, Duration::from_secs(30));
            assert_eq!(subscribers.expect("wait"), 1);
            p
        })
        .collect()
}

/// Generated frame `n` (dark, or with photons) as the little-endian bytes of a message's
/// data part.
pub fn frame_bytes(g: &Generator, n: u64, photons: bool) -> Vec<u8> {
    let frame = g.frames(n, 1, photons);
    frame.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Sends generated frame `n` as a MOENCH sends it (frameIndex `n`, two packets caught) with
/// its header edited by `edit`; the data part is cut to the header's `size` when that is
/// smaller.
pub fn send(p: &mut Publisher, g: &Generator, n: u64, photons: bool, edit: impl Fn(&mut ZmqHeader)) {
    let (rows, cols) = (g.config().rows, g.config().cols);
    let mut h = ZmqHeader::frame(rows as u32, cols as u32, n);
    h.frame_index = Some(n);
    h.det_type = DET_TYPE_MOENCH;
    h.packet_number = Some(2);
    edit(&mut h);
    let bytes = frame_bytes(g, n, photons);
    let len = usize::try_from(h.size)
        .unwrap_or(bytes.len())
        .min(bytes.len());
    p.send_frame(&h, &bytes[..len]).expect("send");
}
