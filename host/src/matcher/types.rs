//! The matcher's vocabulary, shared by every version and the file formats: descriptors, a
//! match, the version names, and the input rules ([`validate`]). Its own module so that the
//! versions and `super` (which dispatches to them) never import each other.

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;

use crate::error::{Error, Result};

/// Floats per descriptor (the kernels' `DIM`, shared with them).
pub const DIM: usize = cluda_gpu::layout::matcher::DIM;

/// One descriptor.
pub type Descriptor = [f32; DIM];

/// Largest accepted magnitude of a descriptor value: `(2 * 1e16)^2 * 128` still fits in `f32`.
pub const MAX_ABS_VALUE: f32 = 1e16;

/// The nearest right descriptor of one left descriptor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Match {
    /// Row of the nearest right descriptor.
    pub index: u32,
    /// Its squared L2 distance, computed directly in f32 (see the module docs).
    pub distance: f32,
}

/// Which implementation [`match_nearest`](crate::matcher::match_nearest) uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatchVersion {
    /// CPU reference (rayon).
    Cpu,
    /// GPU: materialised distance matrix + row minimum.
    V1,
    /// GPU: fused tiled kernel with running best per row.
    V2,
    /// GPU: cuBLAS SGEMM tiles + norms + Rust fold, exact re-scoring.
    V3,
    /// GPU: cuBLAS TF32 tensor-core screen with a proven bound + V2's exact arithmetic on the
    /// candidates; equal to V2 bit for bit.
    V4,
}

impl MatchVersion {
    /// All versions, CPU first.
    pub const ALL: [MatchVersion; 5] = [
        MatchVersion::Cpu,
        MatchVersion::V1,
        MatchVersion::V2,
        MatchVersion::V3,
        MatchVersion::V4,
    ];
    /// The GPU versions.
    pub const GPU: [MatchVersion; 4] = [
        MatchVersion::V1,
        MatchVersion::V2,
        MatchVersion::V3,
        MatchVersion::V4,
    ];

    /// The name used on the command line (`cpu`, `v1`, `v2`, `v3`, `v4`).
    pub fn name(self) -> &'static str {
        match self {
            MatchVersion::Cpu => "cpu",
            MatchVersion::V1 => "v1",
            MatchVersion::V2 => "v2",
            MatchVersion::V3 => "v3",
            MatchVersion::V4 => "v4",
        }
    }
}

impl fmt::Display for MatchVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MatchVersion {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Ok(MatchVersion::Cpu),
            "v1" => Ok(MatchVersion::V1),
            "v2" => Ok(MatchVersion::V2),
            "v3" => Ok(MatchVersion::V3),
            "v4" => Ok(MatchVersion::V4),
            other => Err(Error::param(
                "version",
                format!("`{other}` is not one of v1, v2, v3, v4, cpu"),
            )),
        }
    }
}

/// Checks both sides (see the module docs); `Ok` means every version can run on them.
///
/// # Errors
/// [`Error::Shape`] for an empty `rhs` or more than `u32::MAX` rows;
/// [`Error::InvalidParameter`] naming the side, row and dimension of a NaN, an infinity or a
/// value beyond [`MAX_ABS_VALUE`].
pub fn validate(lhs: &[Descriptor], rhs: &[Descriptor]) -> Result<()> {
    if rhs.is_empty() {
        return Err(Error::shape(
            "rhs descriptors",
            "at least one right descriptor (every left descriptor needs a neighbour)",
            "0 rows",
        ));
    }
    for (side, rows) in [("lhs", lhs), ("rhs", rhs)] {
        if rows.len() > u32::MAX as usize {
            return Err(Error::shape(
                format!("{side} descriptors"),
                format!("at most {} rows", u32::MAX),
                format!("{} rows", rows.len()),
            ));
        }
    }
    check_values("lhs", lhs)?;
    check_values("rhs", rhs)
}

/// The first row (and dimension) of `rows` holding a NaN, an infinity or a value beyond
/// [`MAX_ABS_VALUE`], as an error naming `side`.
fn check_values(side: &'static str, rows: &[Descriptor]) -> Result<()> {
    let bad = rows
        .par_iter()
        .enumerate()
        .find_first(|(_, row)| row.iter().any(|&v| !acceptable(v)));
    match bad {
        None => Ok(()),
        Some((r, row)) => {
            let (k, v) = row
                .iter()
                .enumerate()
                .find(|&(_, &v)| !acceptable(v))
                .map(|(k, v)| (k, *v))
                .unwrap_or((0, f32::NAN));
            let what = if v.is_nan() {
                "NaN".to_string()
            } else if v.is_infinite() {
                format!("{v}")
            } else {
                format!("{v:e}, beyond the largest accepted magnitude {MAX_ABS_VALUE:e}")
            };
            Err(Error::param(
                side,
                format!(
                    "descriptor row {r} holds {what} at dimension {k}; descriptors must be finite"
                ),
            ))
        }
    }
}

/// Finite and within [`MAX_ABS_VALUE`].
fn acceptable(v: f32) -> bool {
    v.is_finite() && v.abs() <= MAX_ABS_VALUE
}
