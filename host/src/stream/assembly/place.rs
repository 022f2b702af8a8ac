//! Where one endpoint's part goes in the whole frame, from its header, and placing it there.

use crate::stream::header::ZmqHeader;

/// Where one endpoint's part goes in the whole frame, from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// `row` of the header: the part's row in the grid of parts.
    pub row: u32,
    /// `column` of the header.
    pub column: u32,
    /// `shape` of the header, `[columns, rows]` of the part.
    pub shape: [u32; 2],
    /// `detshape` of the header, `[x, y]` parts of the whole frame.
    pub detshape: [u32; 2],
    /// `flipRows` of the header.
    pub flip: bool,
}

impl Place {
    /// The place a part header announces.
    pub fn of(h: &ZmqHeader) -> Self {
        Self {
            row: h.row,
            column: h.column,
            shape: h.shape,
            detshape: h.detshape,
            flip: h.flip_rows != 0,
        }
    }

    /// Rows and columns of the whole frame this part belongs to (`detshape` of 0 counts as 1).
    pub fn whole(&self) -> (usize, usize) {
        let (dx, dy) = (self.detshape[0].max(1), self.detshape[1].max(1));
        (
            dy as usize * self.shape[1] as usize,
            dx as usize * self.shape[0] as usize,
        )
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "row {} column {} shape [{}, {}] detshape [{}, {}] flipRows {}",
            self.row,
            self.column,
            self.shape[0],
            self.shape[1],
            self.detshape[0],
            self.detshape[1],
            u8::from(self.flip)
        )
    }
}

/// One part of a frame and where its pixels go.
#[derive(Debug)]
pub struct Piece<D> {
    /// The part's little-endian 16-bit pixels, row by row.
    pub data: D,
    /// First row of the whole frame it covers.
    pub row0: usize,
    /// First column of the whole frame it covers.
    pub col0: usize,
    /// Its rows.
    pub rows: usize,
    /// Its columns.
    pub cols: usize,
    /// Its rows go in reverse order.
    pub flip: bool,
}

/// Copies a piece into a whole frame of `cols` columns: each of its rows (the last first when
/// flipped) into its place, converting from little-endian bytes.
pub fn place<D: std::ops::Deref<Target = [u8]>>(dst: &mut [u16], cols: usize, piece: &Piece<D>) {
    let src: &[u8] = &piece.data;
    let width = piece.cols * 2;
    for (i, row) in src.chunks_exact(width).take(piece.rows).enumerate() {
        let r = piece.row0 + if piece.flip { piece.rows - 1 - i } else { i };
        let at = r * cols + piece.col0;
        let d = &mut dst[at..at + piece.cols];
        if cfg!(target_endian = "little") {
            bytemuck::cast_slice_mut::<u16, u8>(d).copy_from_slice(row);
        } else {
            for (v, b) in d.iter_mut().zip(row.chunks_exact(2)) {
                *v = u16::from_le_bytes([b[0], b[1]]);
            }
        }
    }
}
