//! The GPU finder configured as each ladder step.

use cluda::{ClusterFinder, FinderConfig};
use serde_json::{Value, json};

/// A GPU finder configured as ladder step `step` ("opt1" .. "opt9", or "kernel" for the
/// untimed kernel-floor pass with per-frame event timing on).
pub fn finder(step: &str, _config: FinderConfig) -> Result<Box<dyn ClusterFinder>, String> {
    Err(format!(
        "GPU ladder step {step}: the GPU finder is not merged yet"
    ))
}

/// Step-specific figures for the result record (e.g. the kernel time per frame).
pub fn extra(_step: &str, _f: &dyn ClusterFinder) -> Value {
    json!({})
}
