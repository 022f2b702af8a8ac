//! Tests of a pedestal cut down to a receiver ROI.

use super::Pedestal;
use crate::config::Precision;
use crate::io::raw::Roi;

/// A pedestal of whole frames cut down to an ROI is the pedestal of the frames cut down,
/// while filling and once ready, in every precision.
#[test]
fn cutting_the_state_is_the_state_of_the_cut_frames() {
    let (rows, cols, n) = (5usize, 7usize, 4u32);
    let roi = Roi {
        xmin: 2,
        xmax: 5,
        ymin: 1,
        ymax: 3,
    };
    let frame = |k: usize| -> Vec<u16> {
        (0..rows * cols)
            .map(|p| (4600 + (p * 37 + k * 101) % 91) as u16)
            .collect()
    };
    for precision in [Precision::F64, Precision::F32, Precision::F32Naive] {
        let mut whole = Pedestal::new(rows, cols, n, precision).unwrap();
        let mut cut = Pedestal::new(roi.rows(), roi.cols(), n, precision).unwrap();
        for k in 0..6 {
            let f = frame(k);
            let mut c = vec![0u16; roi.rows() * roi.cols()];
            roi.crop(&f, cols, &mut c).unwrap();
            whole.push_frame(&f).unwrap();
            cut.push_frame(&c).unwrap();
            assert_eq!(whole.cropped(&roi).unwrap(), cut, "{precision:?} frame {k}");
        }
    }
    let outside = Roi {
        xmin: 0,
        xmax: cols,
        ymin: 0,
        ymax: 0,
    };
    assert!(
        Pedestal::new(rows, cols, n, Precision::F64)
            .unwrap()
            .cropped(&outside)
            .is_err()
    );
}
