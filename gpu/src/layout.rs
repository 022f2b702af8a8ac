//! The buffer layout the `cluda_run1_*` kernels share with the host that allocates and clears
//! their buffers, in one place (the kernels themselves compile for the GPU only).
//!
//! A run launch writes a frame's records [`LAG`] frames after classifying it, so that the
//! grid-wide counts its record offsets need are complete by then without a grid barrier; the
//! slack between the fastest and the slowest tile of the grid is `LAG` frames. How many planes
//! and count slots that takes follows from the kernel's argument that nothing is overwritten
//! while it is read (`gpu/src/kernels/run.rs`, module docs).

/// Frames between classifying a frame and writing its records. The kernels hold two frames'
/// pending centres; a lag of 3 or 4 was measured and was no faster: the grid-wide wait is not
/// what a frame waits for.
pub const LAG: u32 = 2;

/// Planes of corrected values a launch cycles through (frame k in plane `k % PLANES`): a tile
/// writes frame j+1's plane in iteration j, when its neighbours may still write records of
/// frame j-1-LAG, which read that frame's plane.
pub const PLANES: u32 = LAG + 3;

/// Slots of per-tile counts a launch cycles through (frame k's in slot `k % COUNT_SLOTS`): a
/// tile rewrites frame k's slot in iteration k+COUNT_SLOTS, which it reaches only after every
/// tile counted frame k+COUNT_SLOTS-LAG, i.e. loaded the counts of frame k+COUNT_SLOTS-2*LAG.
pub const COUNT_SLOTS: u32 = 2 * LAG;

/// Words at the start of the work area before the progress flags: one arrival counter per
/// count slot, each alone on its 128-byte line.
pub const WORK_HEAD: u32 = 32 * COUNT_SLOTS;
