//! The records of centres: a centre's window values, rounded half away from zero and packed
//! after its position.

use super::lanes::{LANES, Unit};
use crate::cluster::pack_xy;

/// Appends the packed record of the centre at column `x` of row `y`: the window's values,
/// rounded half away from zero, gathered first so that the rounding runs over all of them at
/// once (it vectorises; the rounding of each value is the shared scalar definition).
#[inline(always)]
pub(super) fn write_record<R: Unit, const S: usize>(
    out: &mut Vec<u32>,
    rows: &[&[R]; S],
    x: usize,
    y: usize,
) {
    // The gathered values padded to whole chunks of LANES: a scratch array sized for the
    // window (zeroing one sized for 9x9 cost more than the rest of a 3x3 record).
    match S {
        0..=4 => record_n::<R, S, LANES>(out, rows, x, y),
        5 => record_n::<R, S, { 2 * LANES }>(out, rows, x, y),
        6..=8 => record_n::<R, S, { 4 * LANES }>(out, rows, x, y),
        _ => record_n::<R, S, { 6 * LANES }>(out, rows, x, y),
    }
}

/// [`write_record`] with `N >= S * S` values of scratch (a multiple of [`LANES`]).
#[inline(always)]
fn record_n<R: Unit, const S: usize, const N: usize>(
    out: &mut Vec<u32>,
    rows: &[&[R]; S],
    x: usize,
    y: usize,
) {
    let mut vals = [R::ZERO; N];
    for (dy, row) in rows.iter().enumerate() {
        vals[dy * S..dy * S + S].copy_from_slice(&row[x..x + S]);
    }
    out.reserve(1 + S * S);
    out.push(pack_xy(x as u16, y as u16));
    for (i, chunk) in vals.chunks_exact(LANES).enumerate() {
        let n = (S * S - i * LANES).min(LANES);
        let r = R::round_lanes(chunk.try_into().expect("LANES"));
        out.extend(r[..n].iter().map(|&v| v as u32));
    }
}
