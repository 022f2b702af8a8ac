//! Choosing the device a finder runs on: `--device auto|cpu|gpu` ([`DeviceChoice`]; the
//! engine opens the finder, `crate::engine::feeding::open_finder`).
//!
//! Without the `gpu` feature, `gpu` is an [`Error::NoGpu`](crate::error::Error::NoGpu) saying
//! so and `auto` picks the CPU.

use crate::named::named_choices;

/// Which device to find clusters on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DeviceChoice {
    /// The GPU when a CUDA driver and device are present, else the CPU (the default).
    #[default]
    Auto,
    /// The CPU reference finder.
    Cpu,
    /// The GPU finder; an error when no GPU is usable or cluda was built without the `gpu`
    /// feature.
    Gpu,
}

impl DeviceChoice {
    /// The default, as a constant (the Python package's default reads it).
    pub const DEFAULT: Self = Self::Auto;
}

named_choices!(DeviceChoice, "device", Auto => "auto", Cpu => "cpu", Gpu => "gpu");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        assert_eq!("gpu".parse::<DeviceChoice>().unwrap(), DeviceChoice::Gpu);
        assert_eq!(
            "auto".parse::<DeviceChoice>().unwrap(),
            DeviceChoice::DEFAULT
        );
        assert!("tpu".parse::<DeviceChoice>().is_err());
    }
}
