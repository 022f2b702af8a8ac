//! The matcher kernels' parameters: one `#[repr(C)]` struct per kernel, filled by the host
//! and read by the kernel, each with its entry name (`ENTRY`), declared (as the finder's, see
//! [`crate::args`]) from one list that the kernels are declared from too.

/// Hands the matcher's kernels of one family (`plain`, or `fused`: V4's fused kernels, built
/// with the feature `experimental` only) to `$cb!`, after the tokens `$pre`, as
/// `[name => ArgsStruct { fields }, ...]`: the one list the kernels are declared from
/// (`gpu/src/matcher/kernels/`, each running its struct's `run`) and the host's argument
/// structs (with the entry name, `ENTRY`) are built from. All launch blocks of
/// [`crate::layout::matcher::BLOCK`] threads. The field groups several kernels share (in this
/// order: the two sides, the right side's split, a GEMM tile, V4's radii, the rescored sides,
/// the best match per row, the flagged rows) are written once, in the first arm, and spliced in where the
/// fields stand (`$($sides)*` and the like).
#[macro_export]
#[doc(hidden)]
macro_rules! matcher_kernels {
    ($family:ident; $($cb:ident)::+; $($pre:tt)*) => {
        $crate::matcher_kernels! { @groups $family [$($cb)::+] [$($pre)*]
            {
                /// Left descriptors, `n x 128`.
                lhs: $crate::args::ConstPtr<f32>,
                n: u32,
                /// Right descriptors, `m x 128`.
                rhs: $crate::args::ConstPtr<f32>,
                m: u32,
            }
            {
                /// Right tiles of 128 rows per split (`gridDim.y`).
                tiles_per_split: u32,
                /// Splits of the right side.
                splits: u32,
            }
            {
                /// A GEMM tile of `rows x cols` values `-2 a . b` of left rows `row0..` and
                /// right rows `col0..`, row stride `ld` (a multiple of 4, as `col0`).
                tile: $crate::args::ConstPtr<f32>,
                rows: u32,
                cols: u32,
                ld: u32,
                row0: u32,
                col0: u32,
                /// `||b||^2` per right row, padded with zeros to a multiple of 4.
                norms_b: $crate::args::ConstPtr<f32>,
            }
            {
                /// `match_bound::radius` per right row (padded to a multiple of 4 for the
                /// fold).
                radii_b: $crate::args::ConstPtr<f32>,
                /// `match_bound::radius` per left row, `n`.
                radii_a: $crate::args::ConstPtr<f32>,
            }
            {
                /// Left descriptors (`n x 128`) and right descriptors (`m x 128`).
                lhs: $crate::args::ConstPtr<f32>,
                rhs: $crate::args::ConstPtr<f32>,
                n: u32,
            }
            {
                /// Index and distance per row, `n` each.
                out_idx: $crate::args::MutPtr<u32>,
                out_dist: $crate::args::MutPtr<f32>,
            }
            {
                /// The count of flagged rows (one word, zeroed before) and their list (`n`).
                flag_count: $crate::args::MutPtr<u32>,
                flag_rows: $crate::args::MutPtr<u32>,
            }
        }
    };
    (@groups plain [$($cb:ident)::+] [$($pre:tt)*] {$($sides:tt)*} {$($split:tt)*} {$($gemm_tile:tt)*}
        {$($radii:tt)*} {$($rescored:tt)*} {$($out:tt)*} {$($flagged:tt)*}) => {
        $($cb)::+! { $($pre)* [
            /// The parameters of `cluda_match_v1_distances`: `dist[i * m + j] =
            /// ||lhs_i - rhs_j||^2` for the 128 x 128 tile (`blockIdx.y`, `blockIdx.x`).
            cluda_match_v1_distances => MatchV1DistancesArgs {
                $($sides)*
                /// The distance matrix, `n x m`.
                dist: $crate::args::MutPtr<f32>,
            }
            /// The parameters of `cluda_match_v1_rowmin`: each row's minimum of the `n x m`
            /// matrix and its (smallest) index, one warp per row.
            cluda_match_v1_rowmin => MatchV1RowminArgs {
                dist: $crate::args::ConstPtr<f32>,
                n: u32,
                m: u32,
                $($out)*
            }
            /// The parameters of `cluda_match_v2_fused`: block `(x, y)` matches left rows
            /// `x*128..` against right tiles `y*tiles_per_split..`, writing each row's best of
            /// its split to `part_*[row * splits + y]`.
            cluda_match_v2_fused => MatchV2FusedArgs {
                $($sides)*
                $($split)*
                part_dist: $crate::args::MutPtr<f32>,
                part_idx: $crate::args::MutPtr<u32>,
            }
            /// The parameters of `cluda_match_merge_partials`: each row's best over its
            /// `splits` partial results, one thread per row.
            cluda_match_merge_partials => MatchMergePartialsArgs {
                part_dist: $crate::args::ConstPtr<f32>,
                part_idx: $crate::args::ConstPtr<u32>,
                n: u32,
                splits: u32,
                $($out)*
            }
            /// The parameters of `cluda_match_sqnorms`: `norms[r] = ||x_r||^2`, one warp per
            /// row, and the largest as f32 bits into `*max_bits`.
            cluda_match_sqnorms => MatchSqnormsArgs {
                x: $crate::args::ConstPtr<f32>,
                rows: u32,
                norms: $crate::args::MutPtr<f32>,
                max_bits: $crate::args::MutPtr<u32>,
            }
            /// The parameters of `cluda_match_v3_fold`: adds `norms_b` to a `rows x cols`
            /// GEMM tile (row stride `ld`) of left rows `row0..` and right rows `col0..`, and
            /// folds it into each row's best four (`best_*`, `n x 4`; `first != 0` starts
            /// afresh).
            cluda_match_v3_fold => MatchV3FoldArgs {
                $($gemm_tile)*
                best_d: $crate::args::MutPtr<f32>,
                best_i: $crate::args::MutPtr<u32>,
                first: u32,
            }
            /// The parameters of `cluda_match_v3_rescore`: the exact distance of each row's
            /// four candidates, the best into `out_*`, and the rows that cannot be certified
            /// appended to `flag_rows` (count in `*flag_count`).
            cluda_match_v3_rescore => MatchV3RescoreArgs {
                $($rescored)*
                norms_a: $crate::args::ConstPtr<f32>,
                max_bits_b: $crate::args::ConstPtr<u32>,
                best_d: $crate::args::ConstPtr<f32>,
                best_i: $crate::args::ConstPtr<u32>,
                $($out)*
                $($flagged)*
            }
            /// The parameters of `cluda_match_v4_radii`: `radii[k] =
            /// match_bound::radius(norms[k])` for `k < len`, one thread per value.
            cluda_match_v4_radii => MatchV4RadiiArgs {
                norms: $crate::args::ConstPtr<f32>,
                len: u32,
                radii: $crate::args::MutPtr<f32>,
            }
            /// The parameters of `cluda_match_v4_fold`: adds `norms_b` to a `rows x cols`
            /// TF32 GEMM tile (row stride `ld`) of left rows `row0..` and right rows `col0..`,
            /// lowers each row's running bound `tau` (`n`) and appends the right rows the
            /// screen cannot rule out to its candidate slots (`slot_*`, `n x V4_SLOTS`,
            /// `count` per row, `u32::MAX` once they overflowed); `first != 0` starts afresh.
            cluda_match_v4_fold => MatchV4FoldArgs {
                $($gemm_tile)*
                $($radii)*
                tau: $crate::args::MutPtr<f32>,
                count: $crate::args::MutPtr<u32>,
                slot_d: $crate::args::MutPtr<f32>,
                slot_i: $crate::args::MutPtr<u32>,
                first: u32,
            }
            /// The parameters of `cluda_match_v4_rescore`: V2's exact f32 distance of each
            /// row's candidates, the best (ties to the smaller index) into `out_*`, and rows
            /// whose slots overflowed appended to `flag_rows` (count in `*flag_count`).
            cluda_match_v4_rescore => MatchV4RescoreArgs {
                $($rescored)*
                count: $crate::args::ConstPtr<u32>,
                slot_i: $crate::args::ConstPtr<u32>,
                $($out)*
                $($flagged)*
            }
        ] }
    };
    (@groups fused [$($cb:ident)::+] [$($pre:tt)*] {$($sides:tt)*} {$($split:tt)*} {$($gemm_tile:tt)*}
        {$($radii:tt)*} {$($rescored:tt)*} {$($out:tt)*} {$($flagged:tt)*}) => {
        $($cb)::+! { $($pre)* [
            /// The parameters of `cluda_match_v4_fused`: V4's screen computed on the tensor
            /// cores by the kernel itself (`mma.sync` TF32), never stored. Block `(x, y)`
            /// screens left rows `x*128..` against right tiles `y*tiles_per_split..`. With
            /// `gather == 0` it writes each row's smallest upper bound of its split to
            /// `part_tau[row * splits + y]`; with `gather != 0` it reads them and appends every
            /// right row the bound cannot rule out to the row's slots (`count` per row, zeroed
            /// before; more than `V4_SLOTS` means overflowed).
            cluda_match_v4_fused => MatchV4FusedArgs {
                $($sides)*
                $($split)*
                /// `||b||^2` per right row, `m`.
                norms_b: $crate::args::ConstPtr<f32>,
                $($radii)*
                part_tau: $crate::args::MutPtr<f32>,
                count: $crate::args::MutPtr<u32>,
                slot_i: $crate::args::MutPtr<u32>,
                gather: u32,
            }
            /// The parameters of `cluda_match_v4_fused1`: V4's fused screen in one pass.
            /// Block `(x, y)` screens left rows `x*128..` against right tiles
            /// `y*tiles_per_split..` with a running bound per row, and writes the row's bound
            /// (`part_tau`), its candidates under that bound (`part_l`, `part_j`,
            /// `V4_SPLIT_SLOTS` per row and split) and their count (`part_cnt`, `u32::MAX`
            /// when they overflowed), each `[row * splits + y]`.
            cluda_match_v4_fused1 => MatchV4Fused1Args {
                $($sides)*
                $($split)*
                norms_b: $crate::args::ConstPtr<f32>,
                $($radii)*
                part_tau: $crate::args::MutPtr<f32>,
                part_cnt: $crate::args::MutPtr<u32>,
                part_l: $crate::args::MutPtr<f32>,
                part_j: $crate::args::MutPtr<u32>,
            }
            /// The parameters of `cluda_match_v4_merge`: each row's bound over its splits,
            /// and the splits' candidates under its threshold gathered into `slot_i`
            /// (`count` per row; more than `V4_SLOTS`, or a split's overflow, means
            /// overflowed). One thread per row.
            cluda_match_v4_merge => MatchV4MergeArgs {
                part_tau: $crate::args::ConstPtr<f32>,
                part_cnt: $crate::args::ConstPtr<u32>,
                part_l: $crate::args::ConstPtr<f32>,
                part_j: $crate::args::ConstPtr<u32>,
                n: u32,
                splits: u32,
                radii_a: $crate::args::ConstPtr<f32>,
                count: $crate::args::MutPtr<u32>,
                slot_i: $crate::args::MutPtr<u32>,
            }
        ] }
    };
}

use crate::args::entry_structs;

crate::matcher_kernels!(plain; entry_structs;);
#[cfg(feature = "experimental")]
crate::matcher_kernels!(fused; entry_structs;);
