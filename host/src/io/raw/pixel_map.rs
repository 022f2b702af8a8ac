//! The MOENCH 03 pixel order: from the order the 32 ADCs deliver samples to the 400x400 image.
//!
//! Facts (aare 2026.9.30 `src/PixelMap.cpp`, `GenerateMoench03PixelMap`; applied by
//! `src/RawSubFile.cpp` as `image[i] = raw[map[i]]` for detector type `Moench03_old` only):
//! the chip is read by 32 ADCs, each covering a super-column 25 pixels wide and 200 rows high;
//! a frame is 5000 rounds of 32 samples (one per ADC). Sample `pixel = i * 32 + adc` (round `i`,
//! ADC `adc`) is the image pixel at
//! `col = ADC_COL[adc] + i % 25` and `row = 199 - i / 25` when `(adc / 4) % 2 == 0` (ADCs
//! reading the lower half upwards from the middle), else `row = 200 + i / 25`, with
//! `ADC_COL = [300, 325, 350, 375, 300, 325, 350, 375, 200, 225, 250, 275, 200, 225, 250, 275,
//! 100, 125, 150, 175, 100, 125, 150, 175, 0, 25, 50, 75, 0, 25, 50, 75]`.
//! Data written by slsDetector software 8 and later for MOENCH (master without "Analog
//! Samples") is already in image order and needs no map.

/// Rows and columns of a MOENCH 03 frame.
pub const MOENCH03_SIDE: usize = 400;
/// Pixels of a MOENCH 03 frame.
pub const MOENCH03_PIXELS: usize = MOENCH03_SIDE * MOENCH03_SIDE;

const ADC_COL: [usize; 32] = [
    300, 325, 350, 375, 300, 325, 350, 375, 200, 225, 250, 275, 200, 225, 250, 275, 100, 125, 150,
    175, 100, 125, 150, 175, 0, 25, 50, 75, 0, 25, 50, 75,
];
const SC_WIDTH: usize = 25;
const N_ADC: usize = 32;
const PIXELS_PER_SC: usize = 5000;

/// The image position `(row, col)` of raw sample `pixel` (0 .. 160000) of a MOENCH 03 frame.
pub fn moench03_position(pixel: usize) -> (usize, usize) {
    let (i, adc) = (pixel / N_ADC, pixel % N_ADC);
    let col = ADC_COL[adc] + i % SC_WIDTH;
    let row = if (adc / 4) % 2 == 0 {
        199 - i / SC_WIDTH
    } else {
        200 + i / SC_WIDTH
    };
    (row, col)
}

/// A pixel map: `image[i] = raw[map[i]]` for every image pixel `i` (row-major).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PixelMap {
    rows: usize,
    cols: usize,
    /// For each image pixel, the index of its sample in the raw frame.
    source: Vec<u32>,
    /// Whether this is the MOENCH 03 map, which [`PixelMap::to_image`] applies by its
    /// formula instead of the table.
    moench03: bool,
}

impl PixelMap {
    /// The MOENCH 03 map (400 x 400).
    pub fn moench03() -> Self {
        let mut source = vec![0u32; MOENCH03_PIXELS];
        for pixel in 0..N_ADC * PIXELS_PER_SC {
            let (row, col) = moench03_position(pixel);
            source[row * MOENCH03_SIDE + col] = pixel as u32;
        }
        Self {
            rows: MOENCH03_SIDE,
            cols: MOENCH03_SIDE,
            source,
            moench03: true,
        }
    }

    /// Rows of the image.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the image.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// For each image pixel (row-major), the index of its sample in the raw frame.
    pub fn source(&self) -> &[u32] {
        &self.source
    }

    /// Reorders one raw frame (`raw`, detector order) into `image` (row-major). Both slices
    /// must hold `rows * cols` samples. The MOENCH 03 map is applied by its formula, a block
    /// of 25 rounds (1600 bytes of samples) at a time, each ADC's 25 samples to one run of 25
    /// pixels, with no 640 kB index table to read per frame: 82-114 against 153-163 us per
    /// frame on one core of a loaded 2-core VM.
    pub fn to_image(&self, raw: &[u16], image: &mut [u16]) {
        debug_assert_eq!(raw.len(), self.source.len());
        debug_assert_eq!(image.len(), self.source.len());
        if self.moench03 && raw.len() == MOENCH03_PIXELS && image.len() == MOENCH03_PIXELS {
            moench03_to_image(raw, image);
        } else {
            self.to_image_by_table(raw, image);
        }
    }

    /// [`PixelMap::to_image`] through the table (`image[i] = raw[source[i]]`), for any map;
    /// the reference the MOENCH 03 formula is tested against.
    pub fn to_image_by_table(&self, raw: &[u16], image: &mut [u16]) {
        for (o, &s) in image.iter_mut().zip(&self.source) {
            *o = raw[s as usize];
        }
    }

    /// The inverse of [`PixelMap::to_image`]: puts an image into detector order (used by the
    /// writer to make files as the detector would).
    pub fn to_raw(&self, image: &[u16], raw: &mut [u16]) {
        debug_assert_eq!(raw.len(), self.source.len());
        debug_assert_eq!(image.len(), self.source.len());
        for (&v, &s) in image.iter().zip(&self.source) {
            raw[s as usize] = v;
        }
    }
}

/// The MOENCH 03 map by its formula (see the module docs): rounds `25 b .. 25 b + 25` of ADC
/// `adc` are row `199 - b` (or `200 + b`), columns `ADC_COL[adc] ..+ 25`.
fn moench03_to_image(raw: &[u16], image: &mut [u16]) {
    const BLOCK: usize = SC_WIDTH * N_ADC;
    for (b, block) in raw.chunks_exact(BLOCK).enumerate() {
        for (adc, &col) in ADC_COL.iter().enumerate() {
            let row = if (adc / 4) % 2 == 0 { 199 - b } else { 200 + b };
            let start = row * MOENCH03_SIDE + col;
            for (j, o) in image[start..start + SC_WIDTH].iter_mut().enumerate() {
                *o = block[j * N_ADC + adc];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moench03_is_a_permutation() {
        let m = PixelMap::moench03();
        let mut seen = vec![false; MOENCH03_PIXELS];
        for &s in m.source() {
            assert!(!seen[s as usize], "sample {s} used twice");
            seen[s as usize] = true;
        }
        assert!(seen.iter().all(|&b| b));
    }

    #[test]
    fn moench03_known_positions() {
        // Round 0: ADC 0 reads (199, 300), ADC 1 (199, 325), ADC 4 the upper half (200, 300),
        // ADC 24 the left-most super-column (199, 0).
        assert_eq!(moench03_position(0), (199, 300));
        assert_eq!(moench03_position(1), (199, 325));
        assert_eq!(moench03_position(4), (200, 300));
        assert_eq!(moench03_position(24), (199, 0));
        // Round 1 moves one column right; round 25 one row away from the middle.
        assert_eq!(moench03_position(32), (199, 301));
        assert_eq!(moench03_position(25 * 32), (198, 300));
        assert_eq!(moench03_position(25 * 32 + 4), (201, 300));
        // The last sample: round 4999, ADC 31: col 75 + 24, row 200 + 199.
        assert_eq!(moench03_position(159_999), (399, 99));
        let m = PixelMap::moench03();
        assert_eq!(m.source()[199 * 400 + 300], 0);
        assert_eq!(m.source()[399 * 400 + 99], 159_999);
    }

    #[test]
    fn round_trip() {
        let m = PixelMap::moench03();
        let image: Vec<u16> = (0..MOENCH03_PIXELS)
            .map(|i| (i * 7 % 65521) as u16)
            .collect();
        let mut raw = vec![0u16; MOENCH03_PIXELS];
        let mut back = vec![0u16; MOENCH03_PIXELS];
        m.to_raw(&image, &mut raw);
        m.to_image(&raw, &mut back);
        assert_eq!(image, back);
    }

    #[test]
    fn moench03_formula_equals_the_table() {
        let m = PixelMap::moench03();
        let raw: Vec<u16> = (0..MOENCH03_PIXELS)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u16)
            .collect();
        let (mut fast, mut table) = (vec![0u16; MOENCH03_PIXELS], vec![1u16; MOENCH03_PIXELS]);
        m.to_image(&raw, &mut fast);
        m.to_image_by_table(&raw, &mut table);
        assert_eq!(fast, table);
    }
}
