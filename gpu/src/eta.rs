//! Eta interpolation's per-cluster arithmetic, written once for the CPU and the GPU: the eta
//! pair of a cluster (where inside its pixel the photon landed, from how its charge is
//! shared), the bin of a value among histogram edges, and a photon's sub-pixel position.
//!
//! The definitions are aare's (`CalculateEta.hpp`, `Cluster.hpp::max_sum_2x2`,
//! `Interpolator.hpp`, `algorithm.hpp::last_smaller`), evaluated in `f64` from the integer
//! pixel values a cluster file holds: every sum is an exact integer sum (in `i64`), converted
//! to `f64` once and divided once, so the host and the device get the same bits (IEEE division
//! is correctly rounded on both; nothing here can be contracted into a fused multiply-add).
//! Deliberate choices where aare is silent or inconsistent are documented on each function
//! and in the host crate's `docs/interpolation.md`.
//!
//! Clusters are square with an odd side `s` (3, 5, 7, 9), their values row-major from the
//! top-left; the centre is value `(s/2) * s + s/2`. "Left"/"right" are lower/higher columns,
//! "top"/"bottom" lower/higher rows (aare calls the lower row "bottom" in its argument
//! names; its arithmetic is what is reproduced here).

/// Which eta a cluster is described by.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EtaKind {
    /// aare's `calculate_eta2`: of the centre's four 2x2 quadrants the first with the largest
    /// sum (order TL, TR, BL, BR); per axis the higher pixel's share of the quadrant's two
    /// pixels in the centre's row (column). Energy: the quadrant's sum.
    Eta2 = 0,
    /// aare's `calculate_full_eta2`: the same quadrant; per axis the higher column's (row's)
    /// two-pixel sum over the quadrant's sum.
    FullEta2 = 1,
    /// aare's `calculate_eta3` on the central 3x3: (right column - left column) / sum, likewise
    /// rows. Energy: the central 3x3 sum.
    Eta3 = 2,
    /// aare's `calculate_cross_eta3` on the central 3x3: (right - left) / (left + centre +
    /// right) of the centre's row, likewise its column. Energy: the central 3x3 sum.
    CrossEta3 = 3,
}

impl EtaKind {
    /// Every kind, in the order of their numbers.
    pub const ALL: [EtaKind; 4] = [
        EtaKind::Eta2,
        EtaKind::FullEta2,
        EtaKind::Eta3,
        EtaKind::CrossEta3,
    ];

    /// The kind numbered `n` (as passed to the kernels), if any.
    pub const fn from_u32(n: u32) -> Option<Self> {
        match n {
            0 => Some(Self::Eta2),
            1 => Some(Self::FullEta2),
            2 => Some(Self::Eta3),
            3 => Some(Self::CrossEta3),
            _ => None,
        }
    }

    /// The name used on the command line and in metadata (`eta2`, `full-eta2`, `eta3`,
    /// `cross-eta3`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Eta2 => "eta2",
            Self::FullEta2 => "full-eta2",
            Self::Eta3 => "eta3",
            Self::CrossEta3 => "cross-eta3",
        }
    }

    /// Whether photons are placed from the quadrant's corner (`x + 0.5 + u + dX`, the eta2
    /// kinds) rather than from the cluster's corner (`x + u`, the eta3 kinds).
    pub const fn uses_quadrant(self) -> bool {
        matches!(self, Self::Eta2 | Self::FullEta2)
    }
}

/// The quadrant an eta2 was taken from, relative to the centre pixel.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Corner {
    /// Rows y-1..y, columns x-1..x.
    TopLeft = 0,
    /// Rows y-1..y, columns x..x+1.
    TopRight = 1,
    /// Rows y..y+1, columns x-1..x.
    BottomLeft = 2,
    /// Rows y..y+1, columns x..x+1.
    BottomRight = 3,
}

impl Corner {
    /// aare's placement shift `(dX, dY)`: -1 on the axis where the quadrant lies before the
    /// centre.
    pub const fn shift(self) -> (f64, f64) {
        match self {
            Self::TopLeft => (-1.0, -1.0),
            Self::TopRight => (0.0, -1.0),
            Self::BottomLeft => (-1.0, 0.0),
            Self::BottomRight => (0.0, 0.0),
        }
    }
}

/// A cluster's eta pair and its exact integer sum (the energy in ADU is the sum as `f64`).
pub type Eta = EtaOf<i64>;

/// The values eta is computed from: the cluster file's integers, summed exactly in `i64`
/// (aare's arithmetic), or `f64` values (pixel values divided by a gain, in keV), summed in
/// the order the definitions below write.
pub trait EtaValue:
    Copy + PartialOrd + core::ops::Add<Output = Self> + core::ops::Sub<Output = Self>
{
    /// Zero.
    const ZERO: Self;
    /// The value as `f64` (exact for the integer sums of cluster values).
    fn to_f64(self) -> f64;
}

impl EtaValue for i64 {
    const ZERO: Self = 0;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl EtaValue for f64 {
    const ZERO: Self = 0.0;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
}

/// A cluster's eta pair and energy, with the sum in the value type it was computed in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EtaOf<V> {
    /// Eta along x (columns).
    pub x: f64,
    /// Eta along y (rows).
    pub y: f64,
    /// The quadrant (eta2 kinds); `TopLeft` for the eta3 kinds.
    pub corner: Corner,
    /// The eta's sum (the energy is this as `f64`).
    pub sum: V,
}

/// `num / den` in `f64`, or 0 when `den` is 0 (aare leaves the eta at its zero initial value).
#[inline(always)]
fn ratio<V: EtaValue>(num: V, den: V) -> f64 {
    if den != V::ZERO {
        num.to_f64() / den.to_f64()
    } else {
        0.0
    }
}

/// The eta of kind `kind` of a cluster with square side `side` (odd, at least 3) whose
/// `side * side` values are `data` (row-major).
///
/// Larger clusters than 3x3: eta2 and full eta2 use the four quadrants around the centre
/// (as aare's `max_sum_2x2` does for every size but 3x3 and 2x2, which give the same
/// quadrants); eta3 and cross eta3 the central 3x3, energy included (aare calls a
/// `reduce_cluster_to_3x3` it does not define).
///
/// # Panics
/// When `data` holds fewer than `side * side` values or `side < 3` (an index out of bounds;
/// on the device a trap). Callers pass whole records.
#[inline(always)]
pub fn eta(kind: EtaKind, data: &[i32], side: usize) -> Eta {
    eta_of(kind, |i| data[i] as i64, side)
}

/// [`eta`] over any values: `v(i)` is value `i` of the cluster (row-major). With `i64`
/// values every sum is exact and the result is [`eta`]'s; with `f64` values (pixel values
/// divided by a gain) the sums are rounded in the order written here: the quadrant sums
/// `centre + horizontal neighbour + vertical neighbour + diagonal` (TL: `c + (c-1) + (c-s) +
/// (c-1-s)`), a pair `a + b` as listed, the 3x3 sum row by row from the top-left.
#[inline(always)]
pub fn eta_of<V: EtaValue>(kind: EtaKind, v: impl Fn(usize) -> V, side: usize) -> EtaOf<V> {
    let c = (side / 2) * side + side / 2;
    match kind {
        EtaKind::Eta2 | EtaKind::FullEta2 => {
            let sums = [
                v(c) + v(c - 1) + v(c - side) + v(c - 1 - side),
                v(c) + v(c + 1) + v(c - side) + v(c - side + 1),
                v(c) + v(c - 1) + v(c + side) + v(c + side - 1),
                v(c) + v(c + 1) + v(c + side) + v(c + side + 1),
            ];
            // The first maximum, as std::max_element.
            let mut q = 0;
            let mut i = 1;
            while i < 4 {
                if sums[i] > sums[q] {
                    q = i;
                }
                i += 1;
            }
            let sum = sums[q];
            let corner = match q {
                0 => Corner::TopLeft,
                1 => Corner::TopRight,
                2 => Corner::BottomLeft,
                _ => Corner::BottomRight,
            };
            // The quadrant's lower/higher column and row offsets from the centre.
            let (cl, ch) = match corner {
                Corner::TopLeft | Corner::BottomLeft => (c - 1, c),
                Corner::TopRight | Corner::BottomRight => (c, c + 1),
            };
            let (rl, rh) = match corner {
                Corner::TopLeft | Corner::TopRight => (c - side, c),
                Corner::BottomLeft | Corner::BottomRight => (c, c + side),
            };
            let (x, y) = if matches!(kind, EtaKind::Eta2) {
                let (l, r) = (v(cl), v(ch));
                let (t, b) = (v(rl), v(rh));
                (ratio(r, r + l), ratio(b, b + t))
            } else {
                // The quadrant's higher column (its two rows) and higher row (its two
                // columns), in aare's order of addition.
                let (col_hi_a, col_hi_b) = match corner {
                    Corner::TopLeft => (c, c - side),
                    Corner::TopRight => (c + 1, c - side + 1),
                    Corner::BottomLeft => (c, c + side),
                    Corner::BottomRight => (c + 1, c + side + 1),
                };
                let (row_hi_a, row_hi_b) = match corner {
                    Corner::TopLeft => (c - 1, c),
                    Corner::TopRight => (c, c + 1),
                    Corner::BottomLeft => (c + side, c + side - 1),
                    Corner::BottomRight => (c + side, c + side + 1),
                };
                if sum != V::ZERO {
                    (
                        (v(col_hi_a) + v(col_hi_b)).to_f64() / sum.to_f64(),
                        (v(row_hi_a) + v(row_hi_b)).to_f64() / sum.to_f64(),
                    )
                } else {
                    (0.0, 0.0)
                }
            };
            EtaOf { x, y, corner, sum }
        }
        EtaKind::Eta3 | EtaKind::CrossEta3 => {
            // The central 3x3, row-major.
            let at = |r: usize, col: usize| v(c - side - 1 + r * side + col);
            let mut sum = V::ZERO;
            let mut r = 0;
            while r < 3 {
                let mut col = 0;
                while col < 3 {
                    sum = sum + at(r, col);
                    col += 1;
                }
                r += 1;
            }
            let (x, y) = if matches!(kind, EtaKind::Eta3) {
                if sum != V::ZERO {
                    let left = at(0, 0) + at(1, 0) + at(2, 0);
                    let right = at(0, 2) + at(1, 2) + at(2, 2);
                    let top = at(0, 0) + at(0, 1) + at(0, 2);
                    let bottom = at(2, 0) + at(2, 1) + at(2, 2);
                    (
                        (right - left).to_f64() / sum.to_f64(),
                        (bottom - top).to_f64() / sum.to_f64(),
                    )
                } else {
                    (0.0, 0.0)
                }
            } else {
                let (l, m, r) = (at(1, 0), at(1, 1), at(1, 2));
                let (t, b) = (at(0, 1), at(2, 1));
                (ratio(r - l, l + m + r), ratio(b - t, t + m + b))
            };
            EtaOf {
                x,
                y,
                corner: Corner::TopLeft,
                sum,
            }
        }
    }
}

/// The bin of `value` among the strictly increasing `edges` (at least two), or `None` when it
/// is outside them: inside iff `edges[0] <= value <= edges[last]` (NaN never is). The bin is
/// aare's `last_smaller`: bin `b` holds `(edges[b], edges[b + 1]]`, and bin 0 also its lower
/// edge (a value equal to an inner edge belongs to the bin below it).
///
/// An O(1) guess from the first and last edge (exact for evenly spaced edges up to rounding)
/// is corrected against the stored edges, so the result is `last_smaller`'s for any
/// increasing edges, whatever the guess.
#[inline(always)]
pub fn bin(edges: &[f64], value: f64) -> Option<usize> {
    let n = edges.len();
    if n < 2 {
        return None;
    }
    let (lo, hi) = (edges[0], edges[n - 1]);
    if !(lo <= value && value <= hi) {
        return None;
    }
    let bins = n - 1;
    let t = (value - lo) / (hi - lo) * bins as f64;
    let mut b = if t >= 0.0 && t < bins as f64 {
        t as usize
    } else if t >= bins as f64 {
        bins - 1
    } else {
        0
    };
    while b > 0 && edges[b] >= value {
        b -= 1;
    }
    // Ends: `edges[bins] = hi >= value`.
    while edges[b + 1] < value {
        b += 1;
    }
    Some(b)
}

/// A photon's position from its cluster's centre `(cx, cy)`, its eta and the map values
/// `(u, w)` of its bin, as aare places it: eta2 kinds `cx + 0.5 + u + dX` (left to right, dX
/// from [`Corner::shift`]), eta3 kinds `cx + u`; likewise y.
#[inline(always)]
pub fn place(kind: EtaKind, cx: u16, cy: u16, corner: Corner, u: f64, w: f64) -> (f64, f64) {
    if kind.uses_quadrant() {
        let (dx, dy) = corner.shift();
        (cx as f64 + 0.5 + u + dx, cy as f64 + 0.5 + w + dy)
    } else {
        (cx as f64 + u, cy as f64 + w)
    }
}

/// The index of coordinate `p` on an axis of `len` sub-pixels with `n` sub-pixels per pixel:
/// `floor(p * n)` (one multiply), or `None` when that is outside `0..len` (NaN included).
#[inline(always)]
pub fn subpixel(p: f64, n: u32, len: usize) -> Option<usize> {
    let s = p * n as f64;
    if s >= 0.0 && s < len as f64 {
        // Non-negative and below `len`: truncation is the floor.
        Some(s as usize)
    } else {
        None
    }
}

/// One cluster placed on the device, as the image kernel writes it for the host (one row per
/// record, in record order): the photon's position, its energy and its flags, exactly what the
/// host's placement computes for the same cluster (a flagged photon holds its pixel's centre).
/// 32 bytes with no padding, so that rows copy as plain bytes between device and host.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(
    not(target_arch = "nvptx64"),
    derive(bytemuck::Pod, bytemuck::Zeroable)
)]
pub struct PlacedRow {
    /// Column position (pixel `c` spans `[c, c + 1)`).
    pub x: f64,
    /// Row position.
    pub y: f64,
    /// The eta's sum (the photon's energy).
    pub energy: f64,
    /// 0 placed, else the `FLAG_*` bits.
    pub flags: u32,
    /// Zero (keeps the row 32 bytes without padding).
    pub pad: u32,
}

/// Flag of a photon whose eta lies outside the cube's eta edges (either axis, NaN included).
pub const FLAG_ETA_OUTSIDE: u8 = 1;
/// Flag of a photon whose energy lies outside the cube's energy edges.
pub const FLAG_ENERGY_OUTSIDE: u8 = 2;
/// Flag of a photon whose centre pixel is masked as bad.
pub const FLAG_MASKED: u8 = 4;
/// Flag of a photon whose energy lies outside the energy window asked for.
pub const FLAG_WINDOW: u8 = 8;

/// Where a cluster falls in an eta cube: its eta pair, quadrant and energy, its bins when
/// inside every edge, and the flags of what put it outside ([`FLAG_ETA_OUTSIDE`],
/// [`FLAG_ENERGY_OUTSIDE`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Located {
    /// Eta along x.
    pub x: f64,
    /// Eta along y.
    pub y: f64,
    /// The quadrant (eta2 kinds).
    pub corner: Corner,
    /// The energy: the eta's sum as `f64` (ADU, or keV with a gain).
    pub energy: f64,
    /// `(eta_x bin, eta_y bin, energy bin)` when all three are inside their edges.
    pub bins: Option<(usize, usize, usize)>,
    /// Why it is outside (0 when `bins` is `Some`).
    pub flags: u8,
}

/// The eta of a cluster ([`eta`]) and its bins among `xbins`, `ybins` and `ebins` ([`bin`];
/// the energy is the eta's sum as `f64`).
#[inline(always)]
pub fn locate(
    kind: EtaKind,
    data: &[i32],
    side: usize,
    xbins: &[f64],
    ybins: &[f64],
    ebins: &[f64],
) -> Located {
    locate_eta(eta_of(kind, |i| data[i] as i64, side), xbins, ybins, ebins)
}

/// The bins of an eta already computed (see [`locate`]), in any value type.
#[inline(always)]
pub fn locate_eta<V: EtaValue>(
    e: EtaOf<V>,
    xbins: &[f64],
    ybins: &[f64],
    ebins: &[f64],
) -> Located {
    let energy = e.sum.to_f64();
    let (bx, by, be) = (bin(xbins, e.x), bin(ybins, e.y), bin(ebins, energy));
    let mut flags = 0;
    if bx.is_none() || by.is_none() {
        flags |= FLAG_ETA_OUTSIDE;
    }
    if be.is_none() {
        flags |= FLAG_ENERGY_OUTSIDE;
    }
    let bins = match (bx, by, be) {
        (Some(x), Some(y), Some(z)) => Some((x, y, z)),
        _ => None,
    };
    Located {
        x: e.x,
        y: e.y,
        corner: e.corner,
        energy,
        bins,
        flags,
    }
}

/// The index of bin `(ix, iy, ie)` in a C-order cube of `ny x ne` bins per `ix`.
#[inline(always)]
pub fn cube_index(ix: usize, iy: usize, ie: usize, ny: usize, ne: usize) -> usize {
    (ix * ny + iy) * ne + ie
}
