//! The GPU finder configured as each ladder step, with its input where the step wants it.

use cluda::finder::gpu::{GpuFinder, InputMode, PinnedFrames};
use cluda::{ClusterFinder, ClusterSize, FinderConfig, Frames};
use serde_json::{Value, json};

use support::ladder::LadderStep;

/// The pipeline of step `step` ("opt1" .. "opt10"; "kernel" is opt10 with event timing
/// around every launch, the untimed pass that measures the kernel's own time per frame). The 3x3 runs use a cap of
/// 3000 clusters per frame (the reference's setting); other sizes grow their cap as needed
/// (lossless either way).
/// Returns the finder, and the pinned copy of the input when the step reads from the caller's
/// pinned memory (opt4 on); everything is allocated and filled before timing.
pub fn setup(
    step: &str,
    config: FinderConfig,
    data: Frames<'_>,
) -> Result<(GpuFinder, Option<PinnedFrames>), String> {
    let e = |x: cluda::Error| x.to_string();
    let (ladder, timing) = match step {
        // Opt10 with event timing: events around every launch of an upload group, so this is
        // the device time of the run kernel per frame (per-frame steps would time the
        // two-kernel path instead).
        "kernel" => (LadderStep::Opt10, true),
        s => (s.parse::<LadderStep>()?, false),
    };
    let mut pipeline = ladder.config();
    pipeline.timing = timing;
    if config.size == ClusterSize::S3 {
        pipeline.cap = 3000;
    }
    tune(&mut pipeline)?;
    let pinned_input = matches!(pipeline.input, InputMode::Registered | InputMode::Auto);
    let mut finder = GpuFinder::with_pipeline(config, pipeline).map_err(e)?;
    finder.reserve(data.len()).map_err(e)?;
    let pinned = if pinned_input {
        let mut p =
            PinnedFrames::new(finder.gpu(), data.len(), data.rows(), data.cols()).map_err(e)?;
        p.as_mut_slice().copy_from_slice(data.as_slice());
        Some(p)
    } else {
        None
    };
    Ok((finder, pinned))
}

/// Diagnosis only: `CLUDA_LADDER_TUNE="chunk=256,upload-frames=64"` overrides pipeline
/// settings of every GPU step (keys: streams, chunk, depth, upload-frames), so that a
/// device run can compare settings without a rebuild. Results record the settings used.
fn tune(p: &mut cluda::finder::gpu::PipelineConfig) -> Result<(), String> {
    let Ok(spec) = std::env::var("CLUDA_LADDER_TUNE") else {
        return Ok(());
    };
    for kv in spec.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("CLUDA_LADDER_TUNE: `{kv}` is not key=value"))?;
        let v: usize = v
            .parse()
            .map_err(|e| format!("CLUDA_LADDER_TUNE: `{kv}`: {e}"))?;
        match k {
            "streams" => p.streams = v,
            "chunk" => p.chunk = v,
            "depth" => p.depth = v,
            "upload-frames" => p.upload_frames = v,
            _ => return Err(format!("CLUDA_LADDER_TUNE: unknown key `{k}`")),
        }
    }
    eprintln!("    tuned: {spec}");
    Ok(())
}

/// Step-specific figures for the result record: the device, the cap in the end, and for the
/// kernel pass the median per-frame kernel time.
pub fn extra(step: &str, finder: &GpuFinder) -> Value {
    let mut v = json!({"device": finder.device(), "cap": finder.cap()});
    if step == "kernel" {
        let mut t: Vec<f64> = finder
            .kernel_times()
            .iter()
            .map(|k| k.total_us() as f64)
            .collect();
        let mut p: Vec<f64> = finder
            .kernel_times()
            .iter()
            .map(|k| k.prepare_us as f64)
            .collect();
        t.sort_by(f64::total_cmp);
        p.sort_by(f64::total_cmp);
        if !t.is_empty() {
            v["kernel_us"] = json!(t[t.len() / 2]);
            v["prepare_us"] = json!(p[p.len() / 2]);
            v["kernel_frames"] = json!(t.len());
        }
    }
    v
}
