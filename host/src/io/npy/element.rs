//! The element types a `.npy` array may hold (`uint16`, `uint32`, `float32`, `float64`) and
//! their `descr` codes.

mod sealed {
    pub trait Sealed {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// An element type cluda reads and writes in `.npy` files: `u16`, `u32` (sub-pixel images),
/// `f32` or `f64`.
pub trait Element: bytemuck::Pod + sealed::Sealed {
    /// NumPy's kind letter (`u` unsigned, `f` float).
    const KIND: char;
    /// Bytes per element.
    const SIZE: usize;
    /// NumPy's name for the type, for messages.
    const NAME: &'static str;
    /// The value with its bytes reversed (for files of the other endianness).
    fn swap_bytes(self) -> Self;
    /// The little-endian descriptor written to files, e.g. `<u2`.
    fn descr() -> String {
        format!("<{}{}", Self::KIND, Self::SIZE)
    }
}

impl Element for u16 {
    const KIND: char = 'u';
    const SIZE: usize = 2;
    const NAME: &'static str = "uint16";
    fn swap_bytes(self) -> Self {
        u16::swap_bytes(self)
    }
}

impl Element for u32 {
    const KIND: char = 'u';
    const SIZE: usize = 4;
    const NAME: &'static str = "uint32";
    fn swap_bytes(self) -> Self {
        u32::swap_bytes(self)
    }
}

impl Element for f32 {
    const KIND: char = 'f';
    const SIZE: usize = 4;
    const NAME: &'static str = "float32";
    fn swap_bytes(self) -> Self {
        f32::from_bits(self.to_bits().swap_bytes())
    }
}

impl Element for f64 {
    const KIND: char = 'f';
    const SIZE: usize = 8;
    const NAME: &'static str = "float64";
    fn swap_bytes(self) -> Self {
        f64::from_bits(self.to_bits().swap_bytes())
    }
}
