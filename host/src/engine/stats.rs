//! [`EngineStats`]: where the time of a run went (`--timing`), what the engine reports for
//! each input to its driver and its sinks.

use std::time::Duration;

/// Where the time of a run went, for `--timing`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EngineStats {
    /// Frames found.
    pub frames: u64,
    /// Bytes of frames read by the source.
    pub read_bytes: u64,
    /// Time the reader thread spent filling slots.
    pub read_busy: Duration,
    /// Time the finder spent waiting for a full slot (the source was the slower side).
    pub waited_for_input: Duration,
    /// Time in the finder's calls, visitor included.
    pub find: Duration,
    /// Time in the visitor (the sink's share of `find`).
    pub visit: Duration,
    /// Time to allocate the ring's slots (page-locked memory on a GPU) in the engine; zero
    /// when they were allocated ahead ([`super::RingSlots`]).
    pub alloc: Duration,
    /// Wall time of the data phase: from the first chunk asked for to the last one found
    /// (the ring's allocation before it is [`EngineStats::alloc`]).
    pub wall: Duration,
}
