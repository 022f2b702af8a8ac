//! The status words of the classify kernel's decoupled look-back.
//!
//! Every tile publishes one 64-bit status word: a flag in the top two bits and a count in the
//! low 32. The kernel reads 256 predecessors per round with the whole block
//! (`look_back_block` in `kernels/frame.rs`), so a 400x400 frame's 625 tiles take at most 3
//! rounds.

/// Status flag mask.
pub const FLAGS: u64 = 3 << 62;
/// The tile's own count is published.
pub const AGGREGATE: u64 = 1 << 62;
/// The count of this and all earlier tiles is published.
pub const INCLUSIVE: u64 = 2 << 62;
