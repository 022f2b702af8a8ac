//! A frame waiting for its parts: what each endpoint gave for it.

use std::time::Instant;

use crate::stream::header::ZmqHeader;

/// What one endpoint's part of a waiting frame is.
#[derive(Debug)]
pub(super) enum Slot<D> {
    Waiting,
    Here(Box<ZmqHeader>, D),
    Dropped,
    Bad(String),
}

#[derive(Debug)]
pub(super) struct Pending<D> {
    pub(super) slots: Vec<Slot<D>>,
    /// When its first part arrived (for the lag).
    pub(super) first: Instant,
    /// When the assembler took its first part (for the wait).
    pub(super) since: Instant,
    /// The first header of it that came (for a frame given up).
    pub(super) header: ZmqHeader,
}
