//! Constants the kernels share with the host that launches them and allocates their
//! buffers, in one place (the kernels themselves compile for the GPU only): the block size,
//! the shared scratch sizes, the run kernels' buffer layout and the matcher's tile shapes.
//!
//! A run launch writes a frame's records [`LAG`] frames after classifying it, so that the
//! grid-wide counts its record offsets need are complete by then without a grid barrier; the
//! slack between the fastest and the slowest tile of the grid is `LAG` frames. How many planes
//! and count slots that takes follows from the kernel's argument that nothing is overwritten
//! while it is read (`gpu/src/kernels/run.rs`, module docs).

/// Frames between classifying a frame and writing its records. The kernels hold two frames'
/// pending centres; 3 and 4 measured no faster: the grid-wide wait is not what a frame
/// waits for.
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

/// Threads per block of the cluster-finding kernels, and pixels per tile: block `t` of a
/// classify, step or run launch owns pixels `t * BLOCK ..`.
pub const BLOCK: u32 = 256;

/// Warps per block.
pub const WARPS: u32 = BLOCK / 32;

/// Bytes of the classify and step kernels' shared scratch: per-warp counts, the tile ticket
/// and the look-back's per-warp sums and flags (32 words).
pub const CLASSIFY_SCRATCH_BYTES: usize = 128;

/// Words per warp of the run kernels' reduction (three values per frame).
pub const RUN_SCRATCH_PER_WARP: usize = 3;

/// Bytes of the run kernels' shared scratch: the reduction's words of two frames.
pub const RUN_SCRATCH_BYTES: usize = 2 * WARPS as usize * RUN_SCRATCH_PER_WARP * 4;

/// The matcher kernels' shapes (descriptor length, tiles, candidates).
pub mod matcher {
    /// Threads per block of every matcher kernel: the V1/V2 tile kernels' 16 x 16 threads,
    /// each owning an 8 x 8 micro-tile of the 128 x 128 block tile (the one-warp-per-row
    /// kernels work with any multiple of 32).
    pub const BLOCK: u32 = 256;
    /// Floats per descriptor.
    pub const DIM: usize = 128;
    /// Left rows per V1/V2 block tile.
    pub const BM: usize = 128;
    /// Right rows per V1/V2 block tile.
    pub const BN: usize = 128;
    /// Dimensions per shared-memory chunk.
    pub const KC: usize = 16;
    /// Padded row length (floats) of the transposed shared tiles: a multiple of 4 keeps the
    /// 16-byte reads aligned, the +4 spreads the transposing stores over the banks.
    pub const LD: usize = BM + 4;
    /// Bytes of one shared tile (KC x LD floats).
    pub const TILE_BYTES: usize = KC * LD * 4;
    /// Candidates kept per row by V3.
    pub const V3_K: usize = 4;
    /// Candidate slots per row kept by V4's fold (one per lane of the rescoring warp); a row
    /// with more candidates than this is recomputed with V2.
    pub const V4_SLOTS: usize = 32;
    /// Candidate slots per row and right split of V4's one-pass fused kernel (merged into
    /// [`V4_SLOTS`] per row afterwards).
    pub const V4_SPLIT_SLOTS: usize = 16;

    /// Where V4's fused kernel stages operand values in shared memory: in the order its
    /// `mma.sync.m16n8k8` TF32 fragments are read, so that each lane reads a whole fragment
    /// with one 16-byte load.
    ///
    /// A stage holds 16 dimensions (`k`) of 128 rows. Warp `w` computes left rows
    /// `64 (w % 2)..+64` (four 16-row `mma` tiles `mi`) against right rows `32 (w / 2)..+32`
    /// (four 8-row tiles `ni`); lane `l` (`g = l / 4`, `t = l % 4`) holds, per 8-dimension step
    /// `ks`, `a = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]` and `b = B[t][g], B[t+4][g]`
    /// (PTX ISA, "Matrix Fragments for mma.m16n8k8", `.tf32`).
    pub mod mma {
        /// Floats of one operand stage (128 rows x 16 dimensions).
        pub const STAGE: usize = 128 * 16;

        /// Index (in floats) of left row `row` (0..128), dimension `k` (0..16) in the A
        /// stage: the four floats at `4 * (((row / 64 * 4 + mi) * 2 + ks) * 32 + lane)` are
        /// that lane's `a` fragment of tile `mi`, step `ks`.
        #[inline(always)]
        pub const fn a_slot(row: usize, k: usize) -> usize {
            let (wm, mi, g, h) = (row / 64, (row % 64) / 16, row % 8, (row % 16) / 8);
            let (ks, t, kk) = (k / 8, k % 4, (k % 8) / 4);
            ((((wm * 4 + mi) * 2 + ks) * 32 + g * 4 + t) * 4) + kk * 2 + h
        }

        /// Index (in floats) of right row `col` (0..128), dimension `k` (0..16) in the B
        /// stage: the four floats at `4 * ((col / 32 * 4 + ni) * 32 + lane)` are that lane's
        /// `b` fragments of tile `ni` for steps 0 and 1 (`b0, b1, b0, b1`).
        #[inline(always)]
        pub const fn b_slot(col: usize, k: usize) -> usize {
            let (wn, ni, g) = (col / 32, (col % 32) / 8, col % 8);
            let (ks, t, kk) = (k / 8, k % 4, (k % 8) / 4);
            (((wn * 4 + ni) * 32 + g * 4 + t) * 4) + ks * 2 + kk
        }

        #[cfg(test)]
        mod tests {
            use super::*;

            #[test]
            fn slots_are_a_permutation() {
                for f in [a_slot, b_slot] {
                    let mut seen = [false; STAGE];
                    for r in 0..128 {
                        for k in 0..16 {
                            let i = f(r, k);
                            assert!(i < STAGE && !seen[i], "{r} {k}");
                            seen[i] = true;
                        }
                    }
                }
            }

            #[test]
            fn lanes_read_the_ptx_fragments() {
                // Inverse maps, then the fragment definitions of the PTX ISA.
                let mut a_of = [(0, 0); STAGE];
                let mut b_of = [(0, 0); STAGE];
                for r in 0..128 {
                    for k in 0..16 {
                        a_of[a_slot(r, k)] = (r, k);
                        b_of[b_slot(r, k)] = (r, k);
                    }
                }
                for w in 0..8 {
                    for lane in 0..32 {
                        let (g, t) = (lane / 4, lane % 4);
                        for ks in 0..2 {
                            for mi in 0..4 {
                                let base = 4 * (((w % 2 * 4 + mi) * 2 + ks) * 32 + lane);
                                let row = 64 * (w % 2) + 16 * mi;
                                let want = [
                                    (row + g, 8 * ks + t),
                                    (row + g + 8, 8 * ks + t),
                                    (row + g, 8 * ks + t + 4),
                                    (row + g + 8, 8 * ks + t + 4),
                                ];
                                for (r, wnt) in want.iter().enumerate() {
                                    assert_eq!(
                                        a_of[base + r],
                                        *wnt,
                                        "a w{w} l{lane} ks{ks} mi{mi}"
                                    );
                                }
                            }
                            for ni in 0..4 {
                                let base = 4 * ((w / 2 * 4 + ni) * 32 + lane);
                                let col = 32 * (w / 2) + 8 * ni + g;
                                assert_eq!(b_of[base + 2 * ks], (col, 8 * ks + t));
                                assert_eq!(b_of[base + 2 * ks + 1], (col, 8 * ks + t + 4));
                            }
                        }
                    }
                }
            }
        }
    }
}
