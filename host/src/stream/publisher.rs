//! Publishing frames as slsReceiver does: a socket bound to an endpoint, one two-part message
//! per frame (the JSON header, then the pixels) and a one-part end-of-acquisition header
//! (`ZmqSocket::SendHeader`/`SendData` in slsDetectorPackage's slsSupportLib).
//!
//! The socket is an XPUB, which is a PUB on the wire (SUB clients such as slsReceiver's, aare's
//! or cluda's connect to it unchanged) that also sees its subscribers' subscriptions. That
//! solves ZMQ's "slow joiner": a PUB drops every message sent before a subscriber's
//! subscription has arrived, so a sender that starts at once loses the first frames. slsReceiver
//! sleeps 200 ms after binding; [`Publisher::wait_for_subscribers`] instead waits until the
//! subscriptions are there. Like a PUB, it drops messages for a subscriber whose queue is at the
//! high-water mark, unless [`Publisher::bind`] is asked not to (`ZMQ_XPUB_NODROP`: sending
//! waits instead, so a test or benchmark measures the receiver, not the drops).

use std::time::{Duration, Instant};

use super::header::ZmqHeader;
use crate::error::{Error, Result};

/// A bound XPUB socket sending frames and end-of-acquisition messages.
pub struct Publisher {
    socket: zmq::Socket,
    _ctx: zmq::Context,
    endpoint: String,
    subscribers: usize,
    sent: u64,
}

fn zmq_err(endpoint: &str, what: &str, e: zmq::Error) -> Error {
    Error::param("zmq", format!("{what} ({endpoint}): {e}"))
}

impl Publisher {
    /// Binds to `endpoint` (e.g. `tcp://*:30001`) with a send high-water mark of `hwm`
    /// messages; with `no_drop`, sending waits for a slow subscriber instead of dropping.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`zmq`) when the endpoint cannot be bound (in use, bad
    /// address).
    pub fn bind(endpoint: &str, hwm: i32, no_drop: bool) -> Result<Self> {
        let ctx = zmq::Context::new();
        let mut socket = ctx
            .socket(zmq::XPUB)
            .map_err(|e| zmq_err(endpoint, "cannot create an XPUB socket", e))?;
        socket
            .set_sndhwm(hwm)
            .map_err(|e| zmq_err(endpoint, "ZMQ_SNDHWM", e))?;
        socket
            .set_linger(1000)
            .map_err(|e| zmq_err(endpoint, "ZMQ_LINGER", e))?;
        if no_drop {
            set_nodrop(&mut socket).map_err(|e| zmq_err(endpoint, "ZMQ_XPUB_NODROP", e))?;
        }
        socket
            .bind(endpoint)
            .map_err(|e| zmq_err(endpoint, "cannot bind", e))?;
        Ok(Self {
            socket,
            _ctx: ctx,
            endpoint: endpoint.to_string(),
            subscribers: 0,
            sent: 0,
        })
    }

    /// The endpoint actually bound (with the port chosen when `*` or 0 was asked for).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`zmq`) when libzmq cannot say.
    pub fn last_endpoint(&self) -> Result<String> {
        match self.socket.get_last_endpoint() {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(_)) => Err(Error::param("zmq", "the bound endpoint is not UTF-8")),
            Err(e) => Err(zmq_err(&self.endpoint, "ZMQ_LAST_ENDPOINT", e)),
        }
    }

    /// Subscriptions seen so far (each subscriber subscribes once).
    pub fn subscribers(&self) -> usize {
        self.subscribers
    }

    /// Reads the subscription messages that arrived, without waiting.
    fn poll_subscriptions(&mut self, wait_ms: i64) -> Result<()> {
        loop {
            let ready = match self.socket.poll(zmq::POLLIN, wait_ms) {
                Ok(n) => n,
                // A signal arrived: the caller decides whether to go on.
                Err(zmq::Error::EINTR) => return Ok(()),
                Err(e) => return Err(zmq_err(&self.endpoint, "poll", e)),
            };
            if ready == 0 {
                return Ok(());
            }
            match self.socket.recv_bytes(zmq::DONTWAIT) {
                // 1 then the topic: a subscription; 0: an unsubscription.
                Ok(m) if m.first() == Some(&1) => self.subscribers += 1,
                Ok(m) if m.first() == Some(&0) => {
                    self.subscribers = self.subscribers.saturating_sub(1)
                }
                Ok(_) | Err(zmq::Error::EAGAIN) => {}
                Err(e) => return Err(zmq_err(&self.endpoint, "receiving subscriptions", e)),
            }
        }
    }

    /// Waits until `count` subscribers have subscribed, at most `timeout`; returns how many
    /// have. Messages sent before a subscription arrives are lost to that subscriber.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`zmq`) when the socket fails.
    pub fn wait_for_subscribers(&mut self, count: usize, timeout: Duration) -> Result<usize> {
        let until = Instant::now() + timeout;
        while self.subscribers < count {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.poll_subscriptions(left.as_millis().clamp(1, 100) as i64)?;
        }
        Ok(self.subscribers)
    }

    /// Sends one frame: `header` (which must say `data` 1), then `pixels` (its little-endian
    /// bytes).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`zmq`) when sending fails.
    pub fn send_frame(&mut self, header: &ZmqHeader, pixels: &[u8]) -> Result<()> {
        self.send_parts(&[header.to_json().as_bytes(), pixels])
    }

    /// Sends the end-of-acquisition header (`data` 0, one part).
    ///
    /// # Errors
    /// As [`Publisher::send_frame`].
    pub fn send_end(&mut self) -> Result<()> {
        self.send_parts(&[ZmqHeader::end_of_acquisition().to_json().as_bytes()])
    }

    /// Sends any message of any parts (tests use it to send what slsReceiver would not).
    ///
    /// # Errors
    /// As [`Publisher::send_frame`].
    pub fn send_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        // Subscriptions queue up on an XPUB until read; read them now and then (a poll per
        // message would cost a system call each).
        if self.sent.is_multiple_of(256) {
            self.poll_subscriptions(0)?;
        }
        self.sent += 1;
        for (i, p) in parts.iter().enumerate() {
            let flags = if i + 1 < parts.len() { zmq::SNDMORE } else { 0 };
            self.socket
                .send(*p, flags)
                .map_err(|e| zmq_err(&self.endpoint, "sending", e))?;
        }
        Ok(())
    }
}

/// Sets `ZMQ_XPUB_NODROP`, which the zmq crate has no setter for.
fn set_nodrop(socket: &mut zmq::Socket) -> std::result::Result<(), zmq::Error> {
    let on: i32 = 1;
    // SAFETY: `socket.as_mut_ptr()` is the live libzmq socket this `Socket` owns; the option
    // value is a 4-byte int read during the call, as zmq_setsockopt(3) documents for
    // ZMQ_XPUB_NODROP.
    let rc = unsafe {
        zmq_sys::zmq_setsockopt(
            socket.as_mut_ptr(),
            zmq_sys::ZMQ_XPUB_NODROP as i32,
            (&on as *const i32).cast(),
            std::mem::size_of::<i32>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        // SAFETY: zmq_errno only reads libzmq's thread-local error number.
        Err(zmq::Error::from_raw(unsafe { zmq_sys::zmq_errno() }))
    }
}
