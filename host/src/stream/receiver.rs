//! The receiving end of a detector's ZMQ stream: a SUB socket (as slsReceiver's clients use)
//! drained by a thread of its own into a bounded queue of messages.
//!
//! ```text
//!  libzmq I/O thread      cluda-zmq thread                 consumer (engine reader thread)
//!  TCP -> messages  -->   recv parts, queue them   --queue-->   parse, check, copy into slots
//!                         (queue full: drop the frame,           (frame-number gaps, drops,
//!                          log its number)                        faults, lag)
//! ```
//!
//! The receiving thread does nothing but take messages off the socket, so the socket's own
//! queue (`ZMQ_RCVHWM`) stays short and the sender's high-water mark is not reached while cluda
//! keeps up. The queue between the two threads holds at most `queue_frames` frames, which bounds
//! memory. When it is full (cluda is not keeping up), [`FullQueue::Drop`] drops the newest frame
//! on the spot and logs its frame number, so the consumer reports exactly which frames were
//! dropped and why, and tells them apart from frame numbers that never arrived (lost before
//! cluda: the sender's high-water mark, the network, the detector). [`FullQueue::Block`] instead
//! stops reading the socket, which pushes back on the sender: a PUB socket then drops at its
//! high-water mark (those frames show up as missing frame numbers), a `replay --no-drop` waits.
//! End-of-acquisition messages are never dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::assembly::Assembled;
use super::header::{HeaderFault, ZmqHeader};
use crate::error::{Error, Result};

/// What the receiving thread does with a frame when the queue is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FullQueue {
    /// Drop the frame and log its number (a live detector cannot wait).
    #[default]
    Drop,
    /// Wait for room, pushing back on the sender.
    Block,
}

/// How to connect.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// The sender's endpoint, e.g. `tcp://127.0.0.1:30001` (slsReceiver binds a PUB socket
    /// there; cluda connects a SUB socket).
    pub endpoint: String,
    /// Frames the queue between the receiving thread and the finder holds at most.
    pub queue_frames: usize,
    /// The SUB socket's receive high-water mark, in messages (libzmq's own queue).
    pub rcv_hwm: i32,
    /// What to do with a frame when the queue is full.
    pub full: FullQueue,
    /// Largest message part libzmq accepts, in bytes (a larger one makes it drop the
    /// connection, which is reported); see [`ReceiverConfig::message_limit`].
    pub max_message_bytes: i64,
    /// Endpoints of the further parts of every frame, when the detector streams each frame as
    /// several parts (one per UDP interface or module; `endpoint` has the first): each gets a
    /// socket and a receiving thread of its own, and the parts are placed into one frame by
    /// their headers (see [`super::assembly`]). Empty: every message is a whole frame.
    pub more_endpoints: Vec<String>,
    /// Rows and columns of the whole frames, when known beforehand (a fixed pedestal's): the
    /// parts' layout is checked against it.
    pub frame_shape: Option<(usize, usize)>,
    /// Frames that may wait for their parts at once (memory: this many frames); the oldest
    /// is then given up and reported incomplete.
    pub part_window: usize,
    /// Longest a frame waits for its parts while the endpoints it waits for send nothing,
    /// before it is given up and reported incomplete.
    pub part_wait: Duration,
}

/// The largest frame cluda processes: 65536 x 65536 16-bit pixels.
const LARGEST_FRAME_BYTES: u64 = 65536 * 65536 * 2;

/// Room for a header part (JSON of a few hundred bytes, plus any `addJsonHeader`).
const HEADER_ROOM: u64 = 1 << 20;

impl ReceiverConfig {
    /// The queue has room for a frame (a receiver of one endpoint or of several checks it
    /// before it connects).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`queue`) for a queue of 0 frames.
    pub(crate) fn check_queue(&self) -> Result<()> {
        if self.queue_frames == 0 {
            return Err(Error::param(
                "queue",
                "the queue needs room for at least 1 frame",
            ));
        }
        Ok(())
    }

    /// Defaults: a queue of 4096 frames (1.3 GB of 400 x 400 frames: 100 ms at 40,000 frames/s,
    /// which covers an acquisition's start-up), libzmq's queue of 256
    /// messages, dropping when full, messages as large as the largest frame cluda processes
    /// ([`ReceiverConfig::message_limit`] of no known shape), one endpoint; with several, at
    /// most 4096 frames waiting for their parts (as many as the queue: endpoints may drift
    /// that far apart), given up after 200 ms of silence from the endpoints they wait for.
    pub fn new(endpoint: &str) -> Self {
        Self {
            endpoint: endpoint.to_string(),
            queue_frames: 4096,
            rcv_hwm: 256,
            full: FullQueue::Drop,
            max_message_bytes: Self::message_limit(None),
            more_endpoints: Vec::new(),
            frame_shape: None,
            part_window: 4096,
            part_wait: Duration::from_millis(200),
        }
    }

    /// The largest message part to accept for frames of `shape` (rows, cols), when known:
    /// twice a 16-bit frame's bytes (so a frame of the wrong bit depth still arrives and is
    /// reported as a mismatch; at least 1 MiB, for headers); otherwise the largest frame cluda
    /// processes (65536 x 65536 16-bit pixels). Either way at most half the memory available
    /// now (at least 1 MiB), so a bogus length cannot make libzmq allocate what is not there.
    pub fn message_limit(shape: Option<(usize, usize)>) -> i64 {
        let wanted = shape.map_or(LARGEST_FRAME_BYTES, |(r, c)| {
            (r as u64).saturating_mul(c as u64).saturating_mul(4)
        });
        let memory = crate::memory::available_bytes().map_or(u64::MAX, |m| m / 2);
        let bytes = wanted.min(memory).max(HEADER_ROOM);
        i64::try_from(bytes).unwrap_or(i64::MAX)
    }
}

/// One ZMQ message off the socket: its parts (at most two kept), how many more it had, and
/// when it arrived.
pub(crate) struct Message {
    pub parts: Vec<zmq::Message>,
    pub extra_parts: usize,
    pub arrived: Instant,
    /// Which endpoint it came from (its index in the list of endpoints; 0 for one).
    pub source: usize,
    /// A frame matched from several endpoints' parts (`parts` is then empty).
    pub assembled: Option<Box<Assembled<zmq::Message>>>,
    /// Its header, parsed by the receiving thread (frames in parts: each endpoint's thread
    /// parses its own, so parsing scales with the endpoints); `None` when not parsed there or
    /// unreadable (the consumer parses it again for the report).
    pub parsed: Option<Box<ZmqHeader>>,
}

impl Message {
    /// Its header: the assembled frame's, or the first part parsed.
    ///
    /// # Errors
    /// [`HeaderFault::Malformed`] for a first part that is no header (or none).
    pub fn header(&self) -> std::result::Result<ZmqHeader, HeaderFault> {
        if let Some(a) = &self.assembled {
            return Ok(a.header.clone());
        }
        match self.parts.first() {
            Some(p) => ZmqHeader::parse(p),
            None => Err(HeaderFault::Malformed("an empty message".into())),
        }
    }
}

/// A change of a connection to the sender, for the consumer to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectionEvent {
    /// The connection was dropped where frames may have been lost (mid-acquisition, or a
    /// message part above the size accepted), or came back after such a drop: a warning.
    Fault(String),
    /// The sender went away right after the end of an acquisition (a `replay` that finished,
    /// a receiver restarted between acquisitions): nothing was lost, so no fault; a note.
    Note(String),
}

/// Frames the receiving thread dropped, in the order it dropped them: `(items queued before,
/// first frame number, last frame number)` ranges, plus drops whose header was unreadable.
#[derive(Default)]
pub(crate) struct DropLog {
    pub ranges: VecDeque<(u64, u64, u64)>,
    pub unnumbered: VecDeque<u64>,
}

/// Counters shared by the receiving thread and the consumer.
#[derive(Default)]
pub(crate) struct Shared {
    /// Frames in the queue now.
    pub depth: AtomicUsize,
    /// Frames dropped so far (all acquisitions).
    pub dropped: AtomicU64,
    pub drops: Mutex<DropLog>,
    pub stop: AtomicBool,
    /// Why the receiving thread stopped, when it failed.
    pub failure: Mutex<Option<String>>,
    /// Connection events to report (a dropped connection), oldest first.
    pub events: Mutex<VecDeque<ConnectionEvent>>,
}

/// A connected SUB socket and its receiving thread; the consumer's end of the queue.
pub struct ZmqReceiver {
    pub(crate) rx: Receiver<Message>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) config: ReceiverConfig,
    /// Items taken from the queue so far (the receiving thread counts the items it queued the
    /// same way).
    pub(crate) taken: u64,
    feed: Feed,
}

impl ZmqReceiver {
    /// Connects a SUB socket subscribed to everything to `config.endpoint` and starts the
    /// receiving thread. ZMQ connects in the background: a sender that is not there yet is
    /// reached when it appears (and again after it restarts).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`zmq`) for an endpoint libzmq refuses or a zero-sized
    /// queue; [`Error::Io`] when the thread cannot start.
    pub fn connect(config: ReceiverConfig) -> Result<Self> {
        config.check_queue()?;
        let (tx, rx) = std::sync::mpsc::sync_channel(config.queue_frames);
        let feed = Feed::start(&config, &config.endpoint, (0, false), tx)?;
        Ok(Self {
            rx,
            shared: Arc::clone(&feed.shared),
            config,
            taken: 0,
            feed,
        })
    }

    /// The configuration it was connected with.
    pub fn config(&self) -> &ReceiverConfig {
        &self.config
    }

    /// Frames in the queue now.
    pub fn depth(&self) -> usize {
        self.shared.depth.load(Ordering::Relaxed)
    }

    /// Takes the next message, waiting at most `timeout`; `Ok(None)` when none came.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`zmq`) when the receiving thread failed.
    pub(crate) fn next(&mut self, timeout: Duration) -> Result<Option<Message>> {
        match self.rx.recv_timeout(timeout) {
            Ok(m) => {
                self.taken += 1;
                if m.parts.len() >= 2 {
                    self.shared.depth.fetch_sub(1, Ordering::Relaxed);
                }
                Ok(Some(m))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                let why = self
                    .feed
                    .failure()
                    .unwrap_or_else(|| "the receiving thread stopped".into());
                Err(Error::param(
                    "zmq",
                    format!("{}: {why}", self.config.endpoint),
                ))
            }
        }
    }

    /// Connection events since the last call (a dropped connection), to report.
    pub(crate) fn take_events(&self) -> Vec<ConnectionEvent> {
        self.feed.take_events()
    }

    /// Drops logged for frames queued before the items taken so far: `(first, last)` frame
    /// numbers, and how many dropped frames had no readable frame number.
    pub(crate) fn take_drops(&mut self) -> (Vec<(u64, u64)>, u64) {
        self.feed.take_drops(self.taken)
    }
}

impl Drop for ZmqReceiver {
    fn drop(&mut self) {
        self.feed.stop();
        // The thread polls the socket every 50 ms and sees the flag; one blocked on a full
        // queue is freed by draining it.
        while !self.feed.finished() {
            while self.rx.try_recv().is_ok() {}
            std::thread::sleep(Duration::from_millis(1));
        }
        self.feed.join();
    }
}

/// One endpoint's SUB socket and the thread that drains it into a queue (shared with other
/// endpoints' feeds when a frame comes in parts).
pub(crate) struct Feed {
    pub shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Feed {
    /// Connects a SUB socket subscribed to everything to `endpoint` (with `config`'s limits)
    /// and starts its receiving thread, which queues every message on `tx` tagged `source`
    /// (and with its header parsed when `parse`).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`zmq`) for an endpoint libzmq refuses; [`Error::Io`] when
    /// the thread cannot start.
    pub fn start(
        config: &ReceiverConfig,
        endpoint: &str,
        (source, parse): (usize, bool),
        tx: SyncSender<Message>,
    ) -> Result<Self> {
        let zmq_err =
            |what: &str, e: zmq::Error| Error::param("zmq", format!("{what} ({endpoint}): {e}"));
        let ctx = zmq::Context::new();
        let socket = ctx
            .socket(zmq::SUB)
            .map_err(|e| zmq_err("cannot create a SUB socket", e))?;
        socket
            .set_rcvhwm(config.rcv_hwm)
            .map_err(|e| zmq_err("ZMQ_RCVHWM", e))?;
        socket
            .set_maxmsgsize(config.max_message_bytes)
            .map_err(|e| zmq_err("ZMQ_MAXMSGSIZE", e))?;
        socket.set_linger(0).map_err(|e| zmq_err("ZMQ_LINGER", e))?;
        socket
            .set_subscribe(b"")
            .map_err(|e| zmq_err("ZMQ_SUBSCRIBE", e))?;
        // Connection events come on a PAIR socket of libzmq's monitor: a connection libzmq
        // drops (a message above the size limit, the sender gone) is reported, not silent.
        let monitor_endpoint = format!(
            "inproc://cluda-monitor-{}",
            MONITORS.fetch_add(1, Ordering::Relaxed)
        );
        socket
            .monitor(
                &monitor_endpoint,
                (zmq::SocketEvent::DISCONNECTED as i32)
                    | (zmq::SocketEvent::CONNECTED as i32)
                    | (zmq::SocketEvent::CONNECT_RETRIED as i32),
            )
            .map_err(|e| zmq_err("ZMQ monitor", e))?;
        let monitor = ctx
            .socket(zmq::PAIR)
            .map_err(|e| zmq_err("cannot create the monitor socket", e))?;
        monitor
            .connect(&monitor_endpoint)
            .map_err(|e| zmq_err("cannot connect the monitor socket", e))?;
        socket
            .connect(endpoint)
            .map_err(|e| zmq_err("cannot connect", e))?;
        let shared = Arc::new(Shared::default());
        let thread = {
            let shared = Arc::clone(&shared);
            let full = config.full;
            let watch = Watch {
                monitor,
                endpoint: endpoint.to_string(),
                limit: config.max_message_bytes,
                connected: false,
                dropped: false,
                after_end: false,
                retry_due: None,
            };
            std::thread::Builder::new()
                .name(format!("cluda-zmq-{source}"))
                .spawn(move || {
                    if let Err(e) =
                        receive(&ctx, &socket, watch, &tx, &shared, full, (source, parse))
                        && let Ok(mut f) = shared.failure.lock()
                    {
                        *f = Some(format!("receiving from the socket failed: {e}"));
                    }
                })
                .map_err(|e| Error::io("<zmq receiving thread>", e))?
        };
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Asks the thread to stop (it sees the flag within 50 ms).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }

    /// Whether the thread has ended (or never ran).
    pub fn finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Joins the ended thread.
    pub fn join(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Connection events since the last call, to report.
    pub fn take_events(&self) -> Vec<ConnectionEvent> {
        self.shared
            .events
            .lock()
            .map(|mut e| e.drain(..).collect())
            .unwrap_or_default()
    }

    /// Why the thread failed, if it did.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure.lock().ok().and_then(|f| f.clone())
    }

    /// Drops logged before this feed's item number `taken` was queued: `(first, last)` frame
    /// numbers, and how many dropped frames had no readable frame number.
    pub fn take_drops(&self, taken: u64) -> (Vec<(u64, u64)>, u64) {
        let Ok(mut log) = self.shared.drops.lock() else {
            return (Vec::new(), 0);
        };
        let mut ranges = Vec::new();
        while let Some(&(before, a, b)) = log.ranges.front() {
            // Dropped after `before` items were queued: before item `before + 1`.
            if before >= taken {
                break;
            }
            ranges.push((a, b));
            log.ranges.pop_front();
        }
        let mut unnumbered = 0;
        while let Some(&before) = log.unnumbered.front() {
            if before >= taken {
                break;
            }
            unnumbered += 1;
            log.unnumbered.pop_front();
        }
        (ranges, unnumbered)
    }
}

/// Numbers the monitor endpoints of the receivers of this process.
static MONITORS: AtomicU64 = AtomicU64::new(0);

/// The monitor of the SUB socket's connection: its PAIR socket and what a report says.
struct Watch {
    monitor: zmq::Socket,
    endpoint: String,
    limit: i64,
    connected: bool,
    /// A drop was reported: the next connection is reported as a reconnection.
    dropped: bool,
    /// The last message taken was an end of acquisition (set by the receiving thread): a
    /// connection dropped now is a sender gone away cleanly, with nothing lost.
    after_end: bool,
    /// When to connect again unless libzmq says it is retrying first.
    retry_due: Option<Instant>,
}

/// How long after a dropped connection libzmq must say it is retrying before cluda connects
/// again itself (libzmq retries after 100 ms by default, and says so at once).
const RETRY_GRACE: Duration = Duration::from_millis(500);

impl Watch {
    fn push(shared: &Shared, event: ConnectionEvent) {
        if let Ok(mut e) = shared.events.lock() {
            e.push_back(event);
        }
    }

    /// Reads the monitor's pending events: a connection dropped after it was made is queued
    /// for the consumer to report, as is the reconnection. libzmq retries a connection that
    /// broke, but gives up on one it dropped for a protocol error (a message part above
    /// `ZMQ_MAXMSGSIZE`); when it has not said it is retrying within [`RETRY_GRACE`], the
    /// socket connects again here (so the rest of the stream is not lost for good).
    fn read(
        &mut self,
        socket: &zmq::Socket,
        shared: &Shared,
    ) -> std::result::Result<(), zmq::Error> {
        while let Ok(event) = self.monitor.recv_msg(zmq::DONTWAIT) {
            // Two parts: the event (u16) and its value (u32), then the endpoint.
            while self.monitor.get_rcvmore()? {
                self.monitor.recv_msg(0)?;
            }
            let Some(id) = event
                .get(..2)
                .map(|b| u32::from(u16::from_le_bytes([b[0], b[1]])))
            else {
                continue;
            };
            if id == zmq::SocketEvent::CONNECTED as u32 {
                if self.dropped {
                    Self::push(
                        shared,
                        ConnectionEvent::Fault(format!("reconnected to {}", self.endpoint)),
                    );
                }
                self.connected = true;
                self.dropped = false;
                self.retry_due = None;
            } else if id == zmq::SocketEvent::CONNECT_RETRIED as u32 {
                // libzmq is on it.
                self.retry_due = None;
            } else if id == zmq::SocketEvent::DISCONNECTED as u32 && self.connected {
                self.connected = false;
                self.retry_due = Some(Instant::now() + RETRY_GRACE);
                if self.after_end {
                    // A sender that ended its acquisition and went away (a finished replay):
                    // no fault. Only once: a drop with no message since (e.g. an oversized
                    // first frame, again after libzmq reconnected) is a fault again.
                    self.after_end = false;
                    Self::push(
                        shared,
                        ConnectionEvent::Note(format!(
                            "the sender at {} went away after the end of an acquisition; waiting for it to come back",
                            self.endpoint
                        )),
                    );
                } else {
                    self.dropped = true;
                    Self::push(
                        shared,
                        ConnectionEvent::Fault(format!(
                            "the connection to {} was dropped: the sender went away, or sent a message part larger than the {} bytes accepted (libzmq drops the connection then, and that message is lost); reconnecting",
                            self.endpoint, self.limit
                        )),
                    );
                }
            }
        }
        if self.retry_due.is_some_and(|t| Instant::now() >= t) {
            self.retry_due = None;
            // The endpoint may be gone from the socket already: that is fine.
            let _ = socket.disconnect(&self.endpoint);
            socket.connect(&self.endpoint)?;
        }
        Ok(())
    }
}

/// The receiving thread: takes whole messages off the socket and queues them until `stop`;
/// connection events of `watch` are queued for the consumer to report.
fn receive(
    _ctx: &zmq::Context,
    socket: &zmq::Socket,
    mut watch: Watch,
    tx: &SyncSender<Message>,
    shared: &Shared,
    full: FullQueue,
    (source, parse): (usize, bool),
) -> std::result::Result<(), zmq::Error> {
    // Items queued so far: a dropped frame is logged with it, so the consumer knows which
    // queued item it came before.
    let mut queued = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        let first = match socket.recv_msg(zmq::DONTWAIT) {
            Ok(m) => m,
            Err(zmq::Error::EAGAIN) => {
                let mut items = [
                    socket.as_poll_item(zmq::POLLIN),
                    watch.monitor.as_poll_item(zmq::POLLIN),
                ];
                zmq::poll(&mut items, 50)?;
                // Messages first: libzmq makes a connection's last messages readable before it
                // says the connection dropped, so taking them first lets the drop be judged by
                // them (after an end of acquisition, a sender gone away is no fault).
                if !items[0].is_readable() {
                    watch.read(socket, shared)?;
                }
                continue;
            }
            Err(zmq::Error::EINTR) => continue,
            Err(e) => return Err(e),
        };
        let arrived = Instant::now();
        let mut parts = vec![first];
        let mut extra_parts = 0;
        // A multipart message arrives whole: its further parts are already there.
        while socket.get_rcvmore()? {
            let part = socket.recv_msg(0)?;
            if parts.len() < 2 {
                parts.push(part);
            } else {
                extra_parts += 1;
            }
        }
        let frame = parts.len() >= 2;
        let parsed = if parse {
            ZmqHeader::parse(&parts[0]).ok().map(Box::new)
        } else {
            None
        };
        // A header alone is small: whether it is an end of acquisition is read here (frames
        // are not parsed on the one-endpoint path).
        watch.after_end = !frame
            && match &parsed {
                Some(h) => h.data == 0,
                None => ZmqHeader::parse(&parts[0]).is_ok_and(|h| h.data == 0),
            };
        let msg = Message {
            parts,
            extra_parts,
            arrived,
            source,
            assembled: None,
            parsed,
        };
        if !frame {
            // Headers alone (ends of acquisitions, broken messages) are small: never dropped.
            if tx.send(msg).is_err() {
                return Ok(());
            }
            queued += 1;
            continue;
        }
        shared.depth.fetch_add(1, Ordering::Relaxed);
        let sent = match full {
            FullQueue::Block => tx.send(msg).map_err(|_| ()),
            FullQueue::Drop => match tx.try_send(msg) {
                Ok(()) => Ok(()),
                Err(TrySendError::Full(msg)) => {
                    shared.depth.fetch_sub(1, Ordering::Relaxed);
                    log_drop(shared, &msg, queued);
                    continue;
                }
                Err(TrySendError::Disconnected(_)) => Err(()),
            },
        };
        if sent.is_err() {
            return Ok(());
        }
        queued += 1;
    }
    Ok(())
}

/// Logs a frame dropped because the queue was full, by its frame number when its header
/// says it.
fn log_drop(shared: &Shared, msg: &Message, before: u64) {
    shared.dropped.fetch_add(1, Ordering::Relaxed);
    let number = match &msg.parsed {
        Some(h) => h.frame_number,
        None => ZmqHeader::parse(&msg.parts[0])
            .ok()
            .and_then(|h| h.frame_number),
    };
    let Ok(mut log) = shared.drops.lock() else {
        return;
    };
    match number {
        Some(n) => match log.ranges.back_mut() {
            Some((b, _, last)) if *b == before && last.checked_add(1) == Some(n) => *last = n,
            _ => log.ranges.push_back((before, n, n)),
        },
        None => log.unnumbered.push_back(before),
    }
}
