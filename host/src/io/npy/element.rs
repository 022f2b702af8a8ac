//! The element types a `.npy` array may hold (`uint16`, `uint32`, `float32`, `float64`) and
//! their `descr` codes.

mod sealed {
    /// Only the types of [`super::Element`]'s table.
    pub trait Sealed {}
}

/// An element type cluda reads and writes in `.npy` files: `u16`, `u32` (sub-pixel images),
/// `f32` or `f64`.
pub trait Element: bytemuck::Pod + sealed::Sealed {
    /// NumPy's kind letter (`u` unsigned, `f` float).
    const KIND: char;
    /// Bytes per element.
    const SIZE: usize = std::mem::size_of::<Self>();
    /// NumPy's name for the type, for messages.
    const NAME: &'static str;
    /// The value with its bytes reversed (for files of the other endianness).
    fn swap_bytes(mut self) -> Self {
        bytemuck::bytes_of_mut(&mut self).reverse();
        self
    }
    /// The little-endian descriptor written to files, e.g. `<u2`.
    fn descr() -> String {
        format!("<{}{}", Self::KIND, Self::SIZE)
    }
}

/// `Element` (and the seal) for each `type: (kind letter, NumPy name)` of the table.
macro_rules! elements {
    ($($t:ty: ($kind:literal, $name:literal)),+ $(,)?) => {
        $(
            impl sealed::Sealed for $t {}
            impl Element for $t {
                const KIND: char = $kind;
                const NAME: &'static str = $name;
            }
        )+
    };
}

elements! {
    u16: ('u', "uint16"),
    u32: ('u', "uint32"),
    f32: ('f', "float32"),
    f64: ('f', "float64"),
}

#[cfg(test)]
mod tests {
    use super::Element;

    /// Sizes and descriptors are NumPy's; swapping reverses the bytes of each type's value.
    #[test]
    fn descriptors_and_swaps() {
        assert_eq!(
            [u16::descr(), u32::descr(), f32::descr(), f64::descr()],
            ["<u2", "<u4", "<f4", "<f8"]
        );
        assert_eq!(Element::swap_bytes(0x1234u16), 0x3412);
        assert_eq!(Element::swap_bytes(0x1234_5678u32), 0x7856_3412);
        assert_eq!(
            Element::swap_bytes(1.5f32).to_bits(),
            1.5f32.to_bits().swap_bytes()
        );
        assert_eq!(
            Element::swap_bytes(1.5f64).to_bits(),
            1.5f64.to_bits().swap_bytes()
        );
    }
}
