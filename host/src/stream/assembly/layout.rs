//! The acquisition's first parts checked to tile one frame.

use super::Assembler;
use super::messages::LayoutError;
use super::place::Place;

impl<D: std::ops::Deref<Target = [u8]>> Assembler<D> {
    /// Checks that the acquisition's first parts tile one frame: the same `detshape` and
    /// `shape` everywhere, `detshape` cells as many as endpoints, each cell once, and the whole
    /// frame the expected one.
    pub(super) fn check_layout(&self) -> Result<(), LayoutError> {
        let places: Vec<Place> = self.places.iter().flatten().copied().collect();
        let Some(first) = places.first() else {
            return Ok(());
        };
        let n = places.len();
        let err = |i: usize, why: String| {
            LayoutError(format!(
                "the parts do not tile one frame: {} (header: {}): {why}",
                self.names[i],
                places[i].describe()
            ))
        };
        for (i, p) in places.iter().enumerate() {
            if p.detshape != first.detshape {
                return Err(err(
                    i,
                    format!(
                        "detshape differs from {}'s [{}, {}]",
                        self.names[0], first.detshape[0], first.detshape[1]
                    ),
                ));
            }
            if p.shape != first.shape {
                return Err(err(
                    i,
                    format!(
                        "shape differs from {}'s [{}, {}] (parts of one frame must be alike)",
                        self.names[0], first.shape[0], first.shape[1]
                    ),
                ));
            }
            if p.shape[0] == 0 || p.shape[1] == 0 {
                return Err(err(i, "an empty part".into()));
            }
        }
        let (dx, dy) = (first.detshape[0].max(1), first.detshape[1].max(1));
        if (dx as usize) * (dy as usize) != n {
            return Err(err(
                0,
                format!(
                    "detshape [{dx}, {dy}] has {} parts, but {n} endpoints were given",
                    dx * dy
                ),
            ));
        }
        for (i, p) in places.iter().enumerate() {
            if p.column >= dx || p.row >= dy {
                return Err(err(i, format!("row/column outside detshape [{dx}, {dy}]")));
            }
            if let Some(j) = places[..i]
                .iter()
                .position(|q| (q.row, q.column) == (p.row, p.column))
            {
                return Err(err(
                    i,
                    format!("the same place as {}'s part (they overlap)", self.names[j]),
                ));
            }
        }
        let whole = first.whole();
        if let Some(x) = self.expected
            && x != whole
        {
            return Err(err(
                0,
                format!(
                    "the parts make {} x {} frames, the pedestal's are {} x {}",
                    whole.0, whole.1, x.0, x.1
                ),
            ));
        }
        Ok(())
    }
}
