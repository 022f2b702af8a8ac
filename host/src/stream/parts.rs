//! Receiving a frame streamed as several parts, one ZMQ endpoint per part (a MOENCH read out
//! through two UDP interfaces, a detector of several modules): a SUB socket and a receiving
//! thread per endpoint (so receiving scales with the endpoints), all feeding one bounded
//! queue (each thread also parses its parts' headers, so that work scales with the endpoints
//! too); the consumer matches the parts by frame number ([`super::assembly`]) and hands on
//! whole frames, whose parts are copied straight into the engine's slot by their place.
//!
//! ```text
//!  endpoint 1: libzmq I/O, cluda-zmq-0 --\
//!  endpoint 2: libzmq I/O, cluda-zmq-1 ---+--queue (parts)--> match by frameNumber --> frames
//!  ...                                  --/                   (consumer: the engine's reader)
//! ```

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::assembly::{Assembler, Input, Notice, Output, PartFault};
use super::header::{HeaderFault, ZmqHeader};
use super::receiver::{ConnectionEvent, Feed, Message, ReceiverConfig};
use crate::error::{Error, Result};

/// The receiving end of a stream of frames in parts.
pub(crate) struct PartsReceiver {
    rx: Receiver<Message>,
    feeds: Vec<Feed>,
    /// Items taken from the queue so far, per endpoint (each receiving thread counts the items
    /// it queued the same way).
    taken: Vec<u64>,
    names: Vec<String>,
    config: ReceiverConfig,
    assembler: Assembler<zmq::Message>,
}

impl PartsReceiver {
    /// Connects one SUB socket to each of `config.endpoint` and `config.more_endpoints` (part
    /// 1, 2, ...), each with a receiving thread; the queue holds `queue_frames` frames' parts.
    ///
    /// # Errors
    /// As [`super::ZmqReceiver::connect`], for any endpoint; an endpoint given twice.
    pub fn connect(config: ReceiverConfig) -> Result<Self> {
        config.check_queue()?;
        let mut names = vec![config.endpoint.clone()];
        names.extend(config.more_endpoints.iter().cloned());
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(Error::param(
                    "zmq",
                    format!("{n} is given twice: each part of a frame needs its own endpoint"),
                ));
            }
        }
        let parts = names.len();
        let (tx, rx) = std::sync::mpsc::sync_channel(config.queue_frames.saturating_mul(parts));
        let mut feeds = Vec::with_capacity(parts);
        for (i, name) in names.iter().enumerate() {
            feeds.push(Feed::start(&config, name, (i, true), tx.clone())?);
        }
        drop(tx);
        let assembler = Assembler::new(
            names.clone(),
            config.frame_shape,
            config.part_window,
            config.part_wait,
        );
        Ok(Self {
            rx,
            feeds,
            taken: vec![0; parts],
            names,
            config,
            assembler,
        })
    }

    /// The configuration it was connected with.
    pub fn config(&self) -> &ReceiverConfig {
        &self.config
    }

    /// Frames in the queue now (its parts over the number of endpoints).
    pub fn depth(&self) -> usize {
        let parts: usize = self
            .feeds
            .iter()
            .map(|f| f.shared.depth.load(Ordering::Relaxed))
            .sum();
        parts / self.feeds.len().max(1)
    }

    /// Gives up every frame waiting for parts ([`Assembler::give_up_waiting`]); returns the
    /// frames and ends waiting to be taken by [`PartsReceiver::next`] (they come before
    /// anything of the queue).
    pub fn give_up_waiting(&mut self) -> usize {
        self.assembler.give_up_waiting()
    }

    /// Frames waiting for parts now.
    pub fn waiting(&self) -> usize {
        self.assembler.waiting()
    }

    /// When the last message of any endpoint was taken (`None`: none yet).
    pub fn last_heard(&self) -> Option<Instant> {
        self.assembler.last_heard()
    }

    /// Faults of parts since the last call (late parts, malformed messages).
    pub fn take_notices(&mut self) -> Vec<Notice> {
        self.assembler.take_notices()
    }

    /// Connection events of every endpoint since the last call.
    pub fn take_events(&self) -> Vec<ConnectionEvent> {
        self.feeds.iter().flat_map(Feed::take_events).collect()
    }

    /// The next whole (or given-up) frame or end of acquisition, waiting at most `timeout`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`zmq`) when a receiving thread failed, or when the parts
    /// of an acquisition do not tile one frame (naming the endpoint and its header).
    pub fn next(&mut self, timeout: Duration) -> Result<Option<Message>> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(o) = self.assembler.pop() {
                return Ok(Some(message(o)));
            }
            let now = Instant::now();
            if now >= until {
                return Ok(None);
            }
            let mut wait = until - now;
            if self.assembler.waiting() > 0 {
                // Frames wait for parts: look again soon to give up the overdue.
                wait = wait.min((self.config.part_wait / 4).max(Duration::from_millis(1)));
            }
            match self.rx.recv_timeout(wait) {
                Ok(m) => self.take(m)?,
                Err(RecvTimeoutError::Timeout) => {
                    // Nothing came for a while: frames waiting on silent endpoints may be
                    // given up.
                    self.assembler.poll(Instant::now());
                    self.check_feeds()?;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.check_feeds()?;
                    return Err(Error::param(
                        "zmq",
                        format!("{}: the receiving threads stopped", self.names.join(", ")),
                    ));
                }
            }
        }
    }

    /// An error when a receiving thread failed.
    fn check_feeds(&self) -> Result<()> {
        for (f, name) in self.feeds.iter().zip(&self.names) {
            if f.finished()
                && let Some(why) = f.failure()
            {
                return Err(Error::param("zmq", format!("{name}: {why}")));
            }
        }
        Ok(())
    }

    /// Hands one message of the queue to the assembler, after the parts its thread dropped
    /// before it.
    fn take(&mut self, m: Message) -> Result<()> {
        let e = m.source.min(self.feeds.len() - 1);
        self.taken[e] += 1;
        if m.parts.len() >= 2 {
            self.feeds[e].shared.depth.fetch_sub(1, Ordering::Relaxed);
        }
        let now = Instant::now();
        let layout = |err: super::assembly::LayoutError| Error::param("zmq", err.0);
        let (ranges, unnumbered) = self.feeds[e].take_drops(self.taken[e]);
        for (a, b) in ranges {
            for n in a..=b {
                self.assembler
                    .push(e, Input::Dropped(n), now)
                    .map_err(layout)?;
            }
        }
        for _ in 0..unnumbered {
            self.assembler.notice(
                PartFault::Dropped,
                format!(
                    "a part from {} with an unreadable header was dropped: cluda's queue was full",
                    self.names[e]
                ),
            );
        }
        let Message {
            mut parts,
            extra_parts,
            arrived,
            parsed,
            ..
        } = m;
        let Some(head) = parts.first() else {
            return Ok(());
        };
        let header = match parsed {
            Some(h) => Ok(*h),
            None => ZmqHeader::parse(head),
        };
        let input = match header {
            Err(HeaderFault::Malformed(why) | HeaderFault::Mismatch(why)) => {
                self.assembler.malformed(e, &why);
                return Ok(());
            }
            Ok(h) if !h.is_data() => Input::End(h),
            Ok(h) => {
                let data = if parts.len() < 2 {
                    Err("its header came without the data part".to_string())
                } else if extra_parts > 0 {
                    Err(format!("{extra_parts} more part(s) after the data part"))
                } else {
                    parts.pop().ok_or_else(|| "no data part".to_string())
                };
                Input::Part(h, data, arrived)
            }
        };
        self.assembler.push(e, input, now).map_err(layout)
    }
}

/// The assembler's output as a queue message.
fn message(o: Output<zmq::Message>) -> Message {
    match o {
        Output::Frame(a) => Message {
            parts: Vec::new(),
            extra_parts: 0,
            arrived: a.arrived,
            source: 0,
            assembled: Some(Box::new(a)),
            parsed: None,
        },
        Output::End(h) => Message {
            parts: vec![zmq::Message::from(h.to_json().as_bytes())],
            extra_parts: 0,
            arrived: Instant::now(),
            source: 0,
            assembled: None,
            parsed: None,
        },
    }
}

impl Drop for PartsReceiver {
    fn drop(&mut self) {
        for f in &self.feeds {
            f.stop();
        }
        // Each thread polls its socket every 50 ms and sees the flag; one blocked on a full
        // queue is freed by draining it.
        while !self.feeds.iter().all(Feed::finished) {
            while self.rx.try_recv().is_ok() {}
            std::thread::sleep(Duration::from_millis(1));
        }
        for f in &mut self.feeds {
            f.join();
        }
    }
}
