//! Choosing the device a finder runs on: `--device auto|cpu|gpu`.
//!
//! Without the `gpu` feature, `gpu` is an [`Error::NoGpu`] saying so and `auto` picks the CPU.

use std::str::FromStr;

use crate::config::FinderConfig;
#[cfg(feature = "gpu")]
use crate::cuda;
use crate::error::{Error, Result};
#[cfg(feature = "gpu")]
use crate::finder::gpu::GpuFinder;
use crate::finder::{ClusterFinder, CpuFinder};

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

/// Opens a finder for `config` on `device`, with `threads` CPU worker threads (all cores when
/// `None`; ignored on the GPU). Returns the finder and a sentence saying which device was
/// chosen and why. The finder is `Send`, so it can be moved to (or used from) another thread,
/// e.g. one that runs without Python's GIL.
///
/// # Errors
/// [`Error::NoGpu`] for [`DeviceChoice::Gpu`] without a usable GPU; the errors of
/// [`CpuFinder::new`] or [`GpuFinder::new`] (an invalid configuration or thread count,
/// CUDA errors).
pub fn open_finder(
    config: FinderConfig,
    device: DeviceChoice,
    threads: Option<usize>,
) -> Result<(Box<dyn ClusterFinder + Send>, String)> {
    let cpu =
        |config: FinderConfig, why: String| -> Result<(Box<dyn ClusterFinder + Send>, String)> {
            let f = match threads {
                Some(t) => CpuFinder::with_threads(config, t)?,
                None => CpuFinder::new(config)?,
            };
            let msg = format!("device: cpu ({} threads), {why}", f.threads());
            Ok((Box::new(f), msg))
        };
    match device {
        DeviceChoice::Cpu => cpu(config, "as requested".into()),
        #[cfg(not(feature = "gpu"))]
        DeviceChoice::Gpu => Err(Error::built_without_gpu("--device gpu")),
        #[cfg(not(feature = "gpu"))]
        DeviceChoice::Auto => cpu(config, "auto: built without the `gpu` feature".into()),
        #[cfg(feature = "gpu")]
        DeviceChoice::Gpu => {
            let f = GpuFinder::new(config)?;
            let msg = format!("device: gpu ({}), as requested", f.gpu().name());
            Ok((Box::new(f), msg))
        }
        #[cfg(feature = "gpu")]
        DeviceChoice::Auto => {
            if !cuda::driver_present() {
                return cpu(config, "auto: no CUDA driver found".into());
            }
            if !cuda::gpu_available() {
                return cpu(config, "auto: the CUDA driver reports no device".into());
            }
            match GpuFinder::new(config.clone()) {
                Ok(f) => {
                    let msg = format!(
                        "device: gpu ({}), auto: a CUDA driver and device are present",
                        f.gpu().name()
                    );
                    Ok((Box::new(f), msg))
                }
                Err(e @ Error::InvalidParameter { .. }) => Err(e),
                Err(e) => cpu(config, format!("auto: the GPU could not be used ({e})")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_cpu_choice() {
        assert_eq!("gpu".parse::<DeviceChoice>().unwrap(), DeviceChoice::Gpu);
        assert!("tpu".parse::<DeviceChoice>().is_err());
        let (f, why) = open_finder(FinderConfig::new(8, 8), DeviceChoice::Cpu, Some(1)).unwrap();
        assert_eq!(f.device(), "cpu");
        assert!(why.contains("cpu (1 threads)"), "{why}");
    }

    #[test]
    fn auto_says_which_device() {
        let (f, why) = open_finder(FinderConfig::new(8, 8), DeviceChoice::Auto, Some(1)).unwrap();
        assert!(why.starts_with("device: "), "{why}");
        assert!(why.contains(if f.device() == "cpu" { "cpu" } else { "gpu" }));
    }

    #[cfg(not(feature = "gpu"))]
    #[test]
    fn gpu_choice_without_the_feature_is_a_clear_error() {
        let e = open_finder(FinderConfig::new(8, 8), DeviceChoice::Gpu, Some(1))
            .err()
            .expect("no gpu feature");
        assert!(matches!(e, Error::NoGpu(_)), "{e}");
        assert!(e.to_string().contains("`gpu` feature"), "{e}");
        let (f, why) = open_finder(FinderConfig::new(8, 8), DeviceChoice::Auto, Some(1)).unwrap();
        assert_eq!(f.device(), "cpu");
        assert!(why.contains("`gpu` feature"), "{why}");
    }
}
