//! Choosing the device a finder runs on (`--device auto|cpu|gpu`).
//!
//! This version knows only the CPU finder: `auto` picks the CPU and `gpu` is an error until the
//! GPU finder is built.

use std::str::FromStr;

use crate::config::FinderConfig;
use crate::error::{Error, Result};
use crate::finder::{ClusterFinder, CpuFinder};

/// Which device to find clusters on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DeviceChoice {
    /// The GPU when one is usable, else the CPU.
    #[default]
    Auto,
    /// The CPU reference finder.
    Cpu,
    /// The GPU finder (an error when there is none).
    Gpu,
}

impl DeviceChoice {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
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

/// Opens a finder for `config` on `device`; `threads` sets the CPU finder's worker threads
/// (default: every core). Returns the finder and a note saying what was chosen and why.
pub fn open_finder(
    config: FinderConfig,
    device: DeviceChoice,
    threads: Option<usize>,
) -> Result<(Box<dyn ClusterFinder>, String)> {
    let cpu = |config| -> Result<CpuFinder> {
        match threads {
            Some(t) => CpuFinder::with_threads(config, t),
            None => CpuFinder::new(config),
        }
    };
    match device {
        DeviceChoice::Cpu => {
            let f = cpu(config)?;
            let note = format!("device=cpu threads={}", f.threads());
            Ok((Box::new(f), note))
        }
        DeviceChoice::Auto => {
            let f = cpu(config)?;
            let note = format!(
                "device=cpu threads={} (no GPU finder built yet)",
                f.threads()
            );
            Ok((Box::new(f), note))
        }
        DeviceChoice::Gpu => Err(Error::NoGpu("the GPU finder is not built yet".into())),
    }
}
