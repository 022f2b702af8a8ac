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
    /// must hold `rows * cols` samples.
    pub fn to_image(&self, raw: &[u16], image: &mut [u16]) {
        debug_assert_eq!(raw.len(), self.source.len());
        debug_assert_eq!(image.len(), self.source.len());
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
}
