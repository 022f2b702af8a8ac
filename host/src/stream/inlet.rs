//! Where an acquisition's frames come from: one endpoint whose messages are whole frames
//! ([`ZmqReceiver`], the fast path as it always was), or several whose parts are matched into
//! frames ([`super::parts`]).

use std::time::{Duration, Instant};

use super::assembly::Notice;
use super::parts::PartsReceiver;
use super::receiver::{ConnectionEvent, Message, ReceiverConfig, ZmqReceiver};
use crate::error::Result;

/// The stream's receiving end, of one endpoint or several.
pub struct Inlet(Kind);

enum Kind {
    One(ZmqReceiver),
    Parts(Box<PartsReceiver>),
}

impl Inlet {
    /// Connects to `config.endpoint`, and to `config.more_endpoints` when the frames come in
    /// parts.
    ///
    /// # Errors
    /// As [`ZmqReceiver::connect`].
    pub fn connect(config: ReceiverConfig) -> Result<Self> {
        Ok(Self(if config.more_endpoints.is_empty() {
            Kind::One(ZmqReceiver::connect(config)?)
        } else {
            Kind::Parts(Box::new(PartsReceiver::connect(config)?))
        }))
    }

    /// The configuration it was connected with.
    pub fn config(&self) -> &ReceiverConfig {
        match &self.0 {
            Kind::One(r) => r.config(),
            Kind::Parts(r) => r.config(),
        }
    }

    /// The endpoints, for a person.
    pub fn describe(&self) -> String {
        let c = self.config();
        let mut all = vec![c.endpoint.clone()];
        all.extend(c.more_endpoints.iter().cloned());
        if all.len() == 1 {
            all.remove(0)
        } else {
            format!("{} (one part of every frame each)", all.join(", "))
        }
    }

    /// Frames in the queue now.
    pub fn depth(&self) -> usize {
        match &self.0 {
            Kind::One(r) => r.depth(),
            Kind::Parts(r) => r.depth(),
        }
    }

    /// The next message (a whole frame, a frame assembled from parts, or an end), waiting at
    /// most `timeout`.
    pub(crate) fn next(&mut self, timeout: Duration) -> Result<Option<Message>> {
        match &mut self.0 {
            Kind::One(r) => r.next(timeout),
            Kind::Parts(r) => r.next(timeout),
        }
    }

    /// Gives up every frame waiting for parts (none with one endpoint); returns the messages
    /// that [`Inlet::next`] now hands out before anything else.
    pub(crate) fn give_up_waiting(&mut self) -> usize {
        match &mut self.0 {
            Kind::One(_) => 0,
            Kind::Parts(r) => r.give_up_waiting(),
        }
    }

    /// Frames waiting for parts now (none with one endpoint).
    pub(crate) fn waiting(&self) -> usize {
        match &self.0 {
            Kind::One(_) => 0,
            Kind::Parts(r) => r.waiting(),
        }
    }

    /// When the last message of any endpoint was taken, for frames in parts (`None` with
    /// one endpoint, or before any message).
    pub(crate) fn last_heard(&self) -> Option<Instant> {
        match &self.0 {
            Kind::One(_) => None,
            Kind::Parts(r) => r.last_heard(),
        }
    }

    /// Connection events since the last call.
    pub(crate) fn take_events(&self) -> Vec<ConnectionEvent> {
        match &self.0 {
            Kind::One(r) => r.take_events(),
            Kind::Parts(r) => r.take_events(),
        }
    }

    /// Whole frames dropped before the messages taken so far (see
    /// [`ZmqReceiver::take_drops`]); none with parts, whose drops come as given-up frames.
    pub(crate) fn take_drops(&mut self) -> (Vec<(u64, u64)>, u64) {
        match &mut self.0 {
            Kind::One(r) => r.take_drops(),
            Kind::Parts(_) => (Vec::new(), 0),
        }
    }

    /// Faults of parts since the last call (late parts, malformed part messages).
    pub(crate) fn take_notices(&mut self) -> Vec<Notice> {
        match &mut self.0 {
            Kind::One(_) => Vec::new(),
            Kind::Parts(r) => r.take_notices(),
        }
    }
}
