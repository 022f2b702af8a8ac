//! Choosing the device a finder runs on: `--device auto|cpu|gpu` ([`DeviceChoice`]; the
//! engine opens the finder, `crate::engine::feeding::open_finder`).
//!
//! Without the `gpu` feature, `gpu` is an [`Error::NoGpu`] saying so and `auto` picks the CPU.

use std::str::FromStr;

use crate::error::{Error, Result};

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

    /// The name used on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Cpu => "cpu",
            Self::Gpu => "gpu",
        }
    }
}

impl FromStr for DeviceChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            _ => Err(Error::param(
                "device",
                format!("`{s}` is not one of auto, cpu, gpu"),
            )),
        }
    }
}

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
