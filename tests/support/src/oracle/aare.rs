//! An independent oracle of aare's eta interpolation, transliterated from aare's C++ (tag
//! `2025.11.21`, the PyPI wheel's): `include/aare/CalculateEta.hpp`, `include/aare/Cluster.hpp`
//! (`max_sum_2x2`, `reduce_to_3x3`), `include/aare/algorithm.hpp` (`last_smaller`),
//! `src/Interpolator.cpp` (both constructors, `rosenblatttransform`) and
//! `include/aare/Interpolator.hpp` (`interpolate`, `interpolation_logic`).
//!
//! It calls nothing of cluda's: every index is written as aare writes it, per corner; the
//! maps are aare's in-place loops on a 3-D array. The only deliberate departures from a
//! literal transliteration, each marked where it happens:
//! - aare's value type `T` (int32 for `Cluster3x3i`) is widened to `i64`, so sums that would
//!   overflow aare's `int` (undefined behaviour in C++) stay exact; for every cluster whose
//!   sums fit in `int` this is aare's arithmetic exactly;
//! - `calculate_eta3`/`calculate_cross_eta3` on clusters larger than 3x3 call a
//!   `reduce_cluster_to_3x3` that aare does not define; the oracle uses aare's
//!   `reduce_to_3x3` (the central 3x3), which is cluda's documented choice;
//! - `interpolate` reads past its tables for a value above the last edge (aare 2025.11.21)
//!   and silently uses bin 0 below the first: the oracle flags both instead (cluda's
//!   `FLAG_ETA_OUTSIDE`/`FLAG_ENERGY_OUTSIDE`, the photon at its pixel's centre).

/// aare's `corner`.
pub const C_TOP_LEFT: i32 = 0;
pub const C_TOP_RIGHT: i32 = 1;
pub const C_BOTTOM_LEFT: i32 = 2;
pub const C_BOTTOM_RIGHT: i32 = 3;

/// aare's `Eta2<T>` (`T` widened to `i64`); the `{}` initialisers are 0.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Eta2 {
    pub x: f64,
    pub y: f64,
    pub c: i32,
    pub sum: i64,
}

/// `std::max_element(first, last) - first`: the first largest (it replaces only on `<`).
fn max_element(a: &[i64]) -> usize {
    let mut largest = 0;
    for i in 1..a.len() {
        if a[largest] < a[i] {
            largest = i;
        }
    }
    largest
}

/// `Cluster::max_sum_2x2`: `(sum, index)`.
pub fn max_sum_2x2(data: &[i64], cluster_size_x: usize, cluster_size_y: usize) -> (i64, i32) {
    if cluster_size_x == 3 && cluster_size_y == 3 {
        let mut sum_2x2_subclusters = [0i64; 4];
        sum_2x2_subclusters[0] = data[0] + data[1] + data[3] + data[4];
        sum_2x2_subclusters[1] = data[1] + data[2] + data[4] + data[5];
        sum_2x2_subclusters[2] = data[3] + data[4] + data[6] + data[7];
        sum_2x2_subclusters[3] = data[4] + data[5] + data[7] + data[8];
        let index = max_element(&sum_2x2_subclusters);
        (sum_2x2_subclusters[index], index as i32)
    } else {
        let cluster_center_index = (cluster_size_x / 2) + (cluster_size_y / 2) * cluster_size_x;
        let cci = cluster_center_index;
        let sx = cluster_size_x;
        let mut sum_2x2_subcluster = [0i64; 4];
        // subcluster top left from center
        sum_2x2_subcluster[0] = data[cci] + data[cci - 1] + data[cci - sx] + data[cci - 1 - sx];
        // subcluster top right from center
        if cluster_size_x > 2 {
            sum_2x2_subcluster[1] = data[cci] + data[cci + 1] + data[cci - sx] + data[cci - sx + 1];
        }
        // subcluster bottom left from center
        if cluster_size_y > 2 {
            sum_2x2_subcluster[2] = data[cci] + data[cci - 1] + data[cci + sx] + data[cci + sx - 1];
        }
        // subcluster bottom right from center
        if cluster_size_x > 2 && cluster_size_y > 2 {
            sum_2x2_subcluster[3] = data[cci] + data[cci + 1] + data[cci + sx] + data[cci + sx + 1];
        }
        let index = max_element(&sum_2x2_subcluster);
        (sum_2x2_subcluster[index], index as i32)
    }
}

/// The helper `calculate_eta2(eta, left_x, right_x, bottom_y, top_y)`.
fn calculate_eta2_helper(eta: &mut Eta2, left_x: i64, right_x: i64, bottom_y: i64, top_y: i64) {
    if (right_x + left_x) != 0 {
        eta.x = right_x as f64 / (right_x + left_x) as f64;
    }
    if (top_y + bottom_y) != 0 {
        eta.y = top_y as f64 / (top_y + bottom_y) as f64;
    }
}

/// How `calculate_eta2` and `calculate_full_eta2` start: an eta holding the largest 2x2 sum,
/// the index of the cluster's centre (`cluster_center_index`), and the corner `c` of that sum.
fn eta2_start(data: &[i64], cluster_size_x: usize, cluster_size_y: usize) -> (Eta2, usize, i32) {
    let mut eta = Eta2::default();
    let cluster_center_index = (cluster_size_x / 2) + (cluster_size_y / 2) * cluster_size_x;
    let (max_sum, c) = max_sum_2x2(data, cluster_size_x, cluster_size_y);
    eta.sum = max_sum;
    (eta, cluster_center_index, c)
}

/// `calculate_eta2` for a generic `ClusterSizeX x ClusterSizeY` cluster.
pub fn calculate_eta2(data: &[i64], cluster_size_x: usize, cluster_size_y: usize) -> Eta2 {
    let (mut eta, cci, c) = eta2_start(data, cluster_size_x, cluster_size_y);
    let sx = cluster_size_x;
    match c {
        C_TOP_LEFT => calculate_eta2_helper(
            &mut eta,
            data[cci - 1],
            data[cci],
            data[cci - sx],
            data[cci],
        ),
        C_TOP_RIGHT => calculate_eta2_helper(
            &mut eta,
            data[cci],
            data[cci + 1],
            data[cci - sx],
            data[cci],
        ),
        C_BOTTOM_LEFT => calculate_eta2_helper(
            &mut eta,
            data[cci - 1],
            data[cci],
            data[cci],
            data[cci + sx],
        ),
        C_BOTTOM_RIGHT => calculate_eta2_helper(
            &mut eta,
            data[cci],
            data[cci + 1],
            data[cci],
            data[cci + sx],
        ),
        _ => unreachable!(),
    }
    eta.c = c;
    eta
}

/// `calculate_full_eta2` for a generic cluster.
pub fn calculate_full_eta2(data: &[i64], cluster_size_x: usize, cluster_size_y: usize) -> Eta2 {
    let (mut eta, cci, c) = eta2_start(data, cluster_size_x, cluster_size_y);
    let sx = cluster_size_x;
    let sum = eta.sum as f64;
    match c {
        C_TOP_LEFT => {
            if eta.sum != 0 {
                eta.x = (data[cci] + data[cci - sx]) as f64 / sum;
                eta.y = (data[cci - 1] + data[cci]) as f64 / sum;
            }
        }
        C_TOP_RIGHT => {
            if eta.sum != 0 {
                eta.x = (data[cci + 1] + data[cci - sx + 1]) as f64 / sum;
                eta.y = (data[cci] + data[cci + 1]) as f64 / sum;
            }
        }
        C_BOTTOM_LEFT => {
            if eta.sum != 0 {
                eta.x = (data[cci] + data[cci + sx]) as f64 / sum;
                eta.y = (data[cci + sx] + data[cci + sx - 1]) as f64 / sum;
            }
        }
        C_BOTTOM_RIGHT => {
            if eta.sum != 0 {
                eta.x = (data[cci + 1] + data[cci + sx + 1]) as f64 / sum;
                eta.y = (data[cci + sx] + data[cci + sx + 1]) as f64 / sum;
            }
        }
        _ => unreachable!(),
    }
    eta.c = c;
    eta
}

/// `reduce_to_3x3`: the central 3x3 of a larger cluster.
pub fn reduce_to_3x3(data: &[i64], cluster_size_x: usize, cluster_size_y: usize) -> [i64; 9] {
    let cci = (cluster_size_x / 2) + (cluster_size_y / 2) * cluster_size_x;
    let sx = cluster_size_x;
    [
        data[cci - sx - 1],
        data[cci - sx],
        data[cci - sx + 1],
        data[cci - 1],
        data[cci],
        data[cci + 1],
        data[cci + sx - 1],
        data[cci + sx],
        data[cci + sx + 1],
    ]
}

/// `Cluster::sum`.
fn cluster_sum(data: &[i64]) -> i64 {
    data.iter().sum()
}

/// `calculate_cross_eta3` for a 3x3 cluster.
pub fn calculate_cross_eta3_3x3(data: &[i64; 9]) -> Eta2 {
    let mut eta = Eta2::default();
    let photon_energy = cluster_sum(data);
    eta.sum = photon_energy;
    if (data[3] + data[4] + data[5]) != 0 {
        eta.x = (-data[3] + data[3 + 2]) as f64 / (data[3] + data[4] + data[5]) as f64;
    }
    if (data[1] + data[4] + data[7]) != 0 {
        eta.y = (-data[1] + data[2 * 3 + 1]) as f64 / (data[1] + data[4] + data[7]) as f64;
    }
    eta
}

/// `calculate_eta3` for a 3x3 cluster.
pub fn calculate_eta3_3x3(data: &[i64; 9]) -> Eta2 {
    let mut eta = Eta2::default();
    let photon_energy = cluster_sum(data);
    eta.sum = photon_energy;
    if photon_energy != 0 {
        let column_sums = [data[0] + data[3] + data[6], data[2] + data[5] + data[8]];
        eta.x = (-column_sums[0] + column_sums[1]) as f64 / photon_energy as f64;
        let row_sums = [data[0] + data[1] + data[2], data[6] + data[7] + data[8]];
        eta.y = (-row_sums[0] + row_sums[1]) as f64 / photon_energy as f64;
    }
    eta
}

/// The generic `calculate_eta3` (larger clusters reduced to their central 3x3: cluda's
/// choice, see the module's documentation).
pub fn calculate_eta3(data: &[i64], cluster_size_x: usize, cluster_size_y: usize) -> Eta2 {
    calculate_eta3_3x3(&reduce_to_3x3(data, cluster_size_x, cluster_size_y))
}

/// The generic `calculate_cross_eta3` (likewise).
pub fn calculate_cross_eta3(data: &[i64], cluster_size_x: usize, cluster_size_y: usize) -> Eta2 {
    calculate_cross_eta3_3x3(&reduce_to_3x3(data, cluster_size_x, cluster_size_y))
}

/// The four eta functions, numbered as cluda's `EtaKind` (0 eta2, 1 full eta2, 2 eta3,
/// 3 cross eta3).
pub fn eta_of(kind: u32, data: &[i32], side: usize) -> Eta2 {
    let d: Vec<i64> = data.iter().map(|&v| v as i64).collect();
    match kind {
        0 => calculate_eta2(&d, side, side),
        1 => calculate_full_eta2(&d, side, side),
        2 => calculate_eta3(&d, side, side),
        3 => calculate_cross_eta3(&d, side, side),
        _ => unreachable!(),
    }
}

/// `last_smaller(first, last, val)`: the linear scan, as aare writes it.
pub fn last_smaller(arr: &[f64], val: f64) -> usize {
    let first = 0usize;
    let last = arr.len();
    let mut iter = first + 1;
    while iter != last {
        if arr[iter] >= val {
            return iter - 1 - first;
        }
        iter += 1;
    }
    last - 1 - first
}

/// aare's `NDArray<double, 3>` (C order).
#[derive(Clone, Debug, PartialEq)]
pub struct Arr3 {
    pub shape: [usize; 3],
    pub data: Vec<f64>,
}

impl Arr3 {
    pub fn new(shape: [usize; 3], data: Vec<f64>) -> Self {
        assert_eq!(shape[0] * shape[1] * shape[2], data.len());
        Self { shape, data }
    }
    pub fn zeros(shape: [usize; 3]) -> Self {
        Self::new(shape, vec![0.0; shape[0] * shape[1] * shape[2]])
    }
    fn idx(&self, i: usize, j: usize, k: usize) -> usize {
        (i * self.shape[1] + j) * self.shape[2] + k
    }
    pub fn get(&self, i: usize, j: usize, k: usize) -> f64 {
        self.data[self.idx(i, j, k)]
    }
    pub fn at(&mut self, i: usize, j: usize, k: usize) -> &mut f64 {
        let n = self.idx(i, j, k);
        &mut self.data[n]
    }
    pub fn shape(&self, d: usize) -> usize {
        self.shape[d]
    }
}

/// aare's `NDArray<double, 2>`.
struct Arr2 {
    shape: [usize; 2],
    data: Vec<f64>,
}

impl Arr2 {
    fn at(&mut self, i: usize, k: usize) -> &mut f64 {
        &mut self.data[i * self.shape[1] + k]
    }
    fn get(&self, i: usize, k: usize) -> f64 {
        self.data[i * self.shape[1] + k]
    }
}

/// aare's `Interpolator`: its edges and maps.
#[derive(Clone, Debug)]
pub struct Interpolator {
    pub m_ietax: Arr3,
    pub m_ietay: Arr3,
    pub m_etabinsx: Vec<f64>,
    pub m_etabinsy: Vec<f64>,
    pub m_energy_bins: Vec<f64>,
}

impl Interpolator {
    /// `Interpolator(xbins, ybins, ebins)`: no maps until `rosenblatttransform`.
    pub fn with_bins(xbins: &[f64], ybins: &[f64], ebins: &[f64]) -> Self {
        Self {
            m_ietax: Arr3::zeros([0, 0, 0]),
            m_ietay: Arr3::zeros([0, 0, 0]),
            m_etabinsx: xbins.to_vec(),
            m_etabinsy: ybins.to_vec(),
            m_energy_bins: ebins.to_vec(),
        }
    }

    /// `Interpolator(etacube, xbins, ybins, ebins)`; `None` where aare throws.
    pub fn new(etacube: &Arr3, xbins: &[f64], ybins: &[f64], ebins: &[f64]) -> Option<Self> {
        let mut s = Self::with_bins(xbins, ybins, ebins);
        if etacube.shape(0) + 1 != xbins.len()
            || etacube.shape(1) + 1 != ybins.len()
            || etacube.shape(2) + 1 != ebins.len()
        {
            return None;
        }
        s.m_ietax = etacube.clone();
        s.m_ietay = etacube.clone();

        // prefix sum - conditional CDF
        for i in 0..s.m_ietax.shape(0) {
            for j in 0..s.m_ietax.shape(1) {
                for k in 0..s.m_ietax.shape(2) {
                    let add_x = if i == 0 {
                        0.0
                    } else {
                        s.m_ietax.get(i - 1, j, k)
                    };
                    *s.m_ietax.at(i, j, k) += add_x;
                    let add_y = if j == 0 {
                        0.0
                    } else {
                        s.m_ietay.get(i, j - 1, k)
                    };
                    *s.m_ietay.at(i, j, k) += add_y;
                }
            }
        }

        // Standardize, if norm less than 1 don't do anything
        for i in 0..s.m_ietax.shape(0) {
            for j in 0..s.m_ietax.shape(1) {
                for k in 0..s.m_ietax.shape(2) {
                    let shift_x = etacube.get(0, j, k);
                    let val_etax = s.m_ietax.get(s.m_ietax.shape(0) - 1, j, k) - shift_x;
                    let norm_etax = if val_etax == 0.0 { 1.0 } else { val_etax };
                    *s.m_ietax.at(i, j, k) -= shift_x;
                    *s.m_ietax.at(i, j, k) /= norm_etax;
                    let shift_y = etacube.get(i, 0, k);
                    let val_etay = s.m_ietay.get(i, s.m_ietay.shape(1) - 1, k) - shift_y;
                    let norm_etay = if val_etay == 0.0 { 1.0 } else { val_etay };
                    *s.m_ietay.at(i, j, k) -= shift_y;
                    *s.m_ietay.at(i, j, k) /= norm_etay;
                }
            }
        }
        Some(s)
    }

    /// `rosenblatttransform(etacube)`; `false` where aare throws.
    pub fn rosenblatttransform(&mut self, etacube: &Arr3) -> bool {
        if etacube.shape(0) + 1 != self.m_etabinsx.len()
            || etacube.shape(1) + 1 != self.m_etabinsy.len()
            || etacube.shape(2) + 1 != self.m_energy_bins.len()
        {
            return false;
        }
        // marginal CDF for eta_x
        let mut marg_cdf_etax = Arr2 {
            shape: [self.m_etabinsx.len() - 1, self.m_energy_bins.len() - 1],
            data: vec![0.0; (self.m_etabinsx.len() - 1) * (self.m_energy_bins.len() - 1)],
        };
        // conditional CDF for eta_y
        let mut cond_cdf_etay = etacube.clone();

        for i in 0..cond_cdf_etay.shape(0) {
            for j in 0..cond_cdf_etay.shape(1) {
                for k in 0..cond_cdf_etay.shape(2) {
                    *marg_cdf_etax.at(i, k) += etacube.get(i, j, k);
                    let add = if j == 0 {
                        0.0
                    } else {
                        cond_cdf_etay.get(i, j - 1, k)
                    };
                    *cond_cdf_etay.at(i, j, k) += add;
                }
            }
        }

        // cumsum along x-axis
        for i in 1..marg_cdf_etax.shape[0] {
            for k in 0..marg_cdf_etax.shape[1] {
                *marg_cdf_etax.at(0, k) = 0.0;
                let prev = marg_cdf_etax.get(i - 1, k);
                *marg_cdf_etax.at(i, k) += prev;
            }
        }

        // normalize marg_CDF_EtaX
        for i in 1..marg_cdf_etax.shape[0] {
            for k in 0..marg_cdf_etax.shape[1] {
                let last = marg_cdf_etax.get(marg_cdf_etax.shape[0] - 1, k);
                let norm = if last == 0.0 { 1.0 } else { last };
                *marg_cdf_etax.at(i, k) /= norm;
            }
        }

        // standardize, normalize conditional CDF for etaY
        for i in 0..cond_cdf_etay.shape(0) {
            for j in 0..cond_cdf_etay.shape(1) {
                for k in 0..cond_cdf_etay.shape(2) {
                    let shift = etacube.get(i, 0, k);
                    let last = cond_cdf_etay.get(i, cond_cdf_etay.shape(1) - 1, k);
                    let norm = if (last - shift) == 0.0 {
                        1.0
                    } else {
                        cond_cdf_etay.get(i, cond_cdf_etay.shape(1) - 1, k) - shift
                    };
                    *cond_cdf_etay.at(i, j, k) -= shift;
                    *cond_cdf_etay.at(i, j, k) /= norm;
                }
            }
        }

        self.m_ietay = cond_cdf_etay;

        self.m_ietax = Arr3::zeros([
            self.m_etabinsx.len() - 1,
            self.m_etabinsy.len() - 1,
            self.m_energy_bins.len() - 1,
        ]);
        for i in 0..self.m_etabinsx.len() - 1 {
            for j in 0..self.m_etabinsy.len() - 1 {
                for k in 0..self.m_energy_bins.len() - 1 {
                    *self.m_ietax.at(i, j, k) = marg_cdf_etax.get(i, k);
                }
            }
        }
        true
    }

    /// One cluster of `interpolate<EtaFunction>` (`kind` as in [`eta_of`]): the photon
    /// `(x, y, energy)` and cluda's flags (1: an eta outside its edges, 2: the energy outside
    /// its edges), where aare would read the wrong bin (see the module's documentation) the
    /// photon is flagged and left at its pixel's centre.
    pub fn interpolate_one(
        &self,
        kind: u32,
        cx: u16,
        cy: u16,
        data: &[i32],
        side: usize,
    ) -> (f64, f64, f64, u8) {
        let eta = eta_of(kind, data, side);
        let mut photon_x = cx as f64;
        let mut photon_y = cy as f64;
        let photon_energy = eta.sum as f64;

        let inside = |edges: &[f64], v: f64| edges[0] <= v && v <= edges[edges.len() - 1];
        let mut flags = 0u8;
        if !inside(&self.m_etabinsx, eta.x) || !inside(&self.m_etabinsy, eta.y) {
            flags |= 1;
        }
        if !inside(&self.m_energy_bins, photon_energy) {
            flags |= 2;
        }
        if flags != 0 {
            return (photon_x + 0.5, photon_y + 0.5, photon_energy, flags);
        }

        let ie = last_smaller(&self.m_energy_bins, photon_energy);
        let ix = last_smaller(&self.m_etabinsx, eta.x);
        let iy = last_smaller(&self.m_etabinsy, eta.y);

        let ietax_interpolated = self.m_ietax.get(ix, iy, ie);
        let ietay_interpolated = self.m_ietay.get(ix, iy, ie);

        // interpolation_logic
        let (u, v) = (ietax_interpolated, ietay_interpolated);
        if kind == 0 || kind == 1 {
            let (d_x, d_y) = match eta.c {
                C_TOP_LEFT => (-1.0, -1.0),
                C_TOP_RIGHT => (0.0, -1.0),
                C_BOTTOM_LEFT => (-1.0, 0.0),
                C_BOTTOM_RIGHT => (0.0, 0.0),
                _ => unreachable!(),
            };
            photon_x = photon_x + 0.5 + u + d_x;
            photon_y = photon_y + 0.5 + v + d_y;
        } else {
            photon_x += u;
            photon_y += v;
        }
        (photon_x, photon_y, photon_energy, 0)
    }
}
