//! Section `back-to-back`: many short acquisitions against one long one, then paced.

use crate::*;

/// Data frames per second over a run of acquisitions: from the first one's first frame's
/// arrival to the last one's last clusters written (the commits of all but the last, and every
/// set-up between them, inside).
pub(crate) fn span_fps(summaries: &[AcquisitionSummary]) -> f64 {
    let first = summaries
        .iter()
        .filter_map(|s| s.counts.first_arrival)
        .min();
    let last = summaries
        .iter()
        .filter_map(|s| {
            s.counts
                .first_arrival
                .map(|a| a + Duration::from_secs_f64(s.seconds))
        })
        .max();
    let frames: u64 = summaries.iter().map(|s| s.data_frames).sum();
    match (first, last) {
        (Some(a), Some(b)) if b > a => frames as f64 / (b - a).as_secs_f64(),
        _ => 0.0,
    }
}

/// `(median, worst)` of `values` in milliseconds (0 for none).
pub(crate) fn median_worst(mut values: Vec<f64>) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    values.sort_by(f64::total_cmp);
    (
        values[values.len() / 2] * 1e3,
        values[values.len() - 1] * 1e3,
    )
}

/// Section "acquisitions back to back": per cluster size, the same sender sends
/// `o.back_to_back` (acquisitions, frames) back to back, then one acquisition of all those
/// frames; a bare loop and `cluda stream` (pedestal given up front, `--on-full block`) take
/// each. The bare loops give the sender's own pace over the acquisition boundaries, so cluda's
/// per-acquisition set-up is told apart from it. Returns the section's markdown, its CSV rows
/// and its goal lines.
pub(crate) fn back_to_back(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    size: ClusterSize,
    side: usize,
) -> Result<(String, String, Vec<String>), String> {
    let (n, per) = o.back_to_back;
    let (mut md, mut csv, mut goals) = (String::new(), String::new(), Vec::new());
    let (mut long_fps, mut b2b_bare) = (0.0, 0.0);
    // The long acquisition first: the short ones are compared to it. Then the short ones as
    // fast as cluda takes them, and at `--fraction` of their bare loop's rate, where cluda
    // keeps up and an acquisition's first frames wait for nothing but its start.
    for (name, shape, paced) in [
        ("one-long", (1, n * per), false),
        ("back-to-back", (n, per), false),
        ("back-to-back-paced", (n, per), true),
    ] {
        let (bare_fps, rate, full) = if paced {
            (b2b_bare, Some(b2b_bare * o.fraction), FullQueue::Drop)
        } else {
            eprintln!(
                "size {side}: {name}: bare loop over {} x {} frames",
                shape.0, shape.1
            );
            (bare_acquisitions(o, frames, shape)?, None, FullQueue::Block)
        };
        if name == "back-to-back" {
            b2b_bare = bare_fps;
        }
        eprintln!("  bare: {bare_fps:.0} frames/s");
        eprintln!("size {side}: {name}: stream");
        let sums = stream_acquisitions(o, frames, pedestal, size, rate, full, shape)?;
        let fps = span_fps(&sums);
        if name == "one-long" {
            long_fps = fps;
        }
        let secs = |f: &dyn Fn(&AcquisitionSummary) -> Duration| {
            sums.iter().map(|s| f(s).as_secs_f64()).collect::<Vec<_>>()
        };
        let first = median_worst(secs(&|s| s.first_lag.unwrap_or_default()));
        let setup = median_worst(secs(&|s| s.timing.setup));
        let commit = median_worst(secs(&|s| s.timing.commit));
        let input_wait = median_worst(secs(&|s| s.timing.engine.waited_for_input));
        let write_wait = median_worst(secs(&|s| s.timing.write.waited));
        let lost: u64 = sums
            .iter()
            .map(|s| s.counts.dropped + s.counts.missing)
            .sum();
        let _ = writeln!(
            csv,
            "{side},{name},{},{},{bare_fps:.1},{fps:.1},{:.3},{:.3},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{lost}",
            shape.0,
            shape.1,
            fps / bare_fps,
            fps / long_fps.max(1e-9),
            first.0,
            first.1,
            setup.0,
            setup.1,
            commit.0,
            commit.1
        );
        let _ = writeln!(
            md,
            "| {side}x{side} | {name} | {} x {} | {bare_fps:.0} | {fps:.0} | {:.1} % | {:.1} % | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {:.0} / {:.0} | {:.0} / {:.0} | {lost} |",
            shape.0,
            shape.1,
            100.0 * fps / bare_fps,
            100.0 * fps / long_fps.max(1e-9),
            first.0,
            first.1,
            setup.0,
            setup.1,
            commit.0,
            commit.1,
            input_wait.0,
            input_wait.1,
            write_wait.0,
            write_wait.1,
        );
        if name == "back-to-back" {
            goals.push(format!(
                "- {side}x{side}: {n} acquisitions of {per} frames back to back at {fps:.0} frames/s = {:.1} % of one acquisition of {} at {long_fps:.0} (goal >= 90 %): {}",
                100.0 * fps / long_fps.max(1e-9),
                n * per,
                if fps >= 0.9 * long_fps { "met" } else { "NOT met" },
            ));
        } else if paced {
            goals.push(format!(
                "- {side}x{side}: sent at {:.0} % of the bare rate, an acquisition's first frame's clusters were written {:.1} ms after its arrival (median; worst {:.1}; goal: a few ms), {lost} frames lost",
                o.fraction * 100.0,
                first.0,
                first.1
            ));
        }
    }
    Ok((md, csv, goals))
}

/// The section's table head (markdown) and CSV header.
pub(crate) fn back_to_back_heads(o: &Opts) -> (String, String) {
    let (n, per) = o.back_to_back;
    (
        format!(
            "\n## Acquisitions back to back\n\n{n} acquisitions of {per} frames sent back to back by the same sender as one acquisition of {}, pedestal given up front, `--on-full block`; `back-to-back-paced`: the same sent at {:.0} % of their bare loop's rate, `cluda stream` with its defaults. `bare`: the bare loop over the same sends (the sender's own pace); frames/s from the first frame's arrival to the last clusters written; first lag: from an acquisition's first frame's arrival to its clusters written; set-up: from an acquisition's first frame taken off the queue to its first data frame asked of the engine; commit: the file's last writes, sync and rename; input wait: the finder waiting for frames; write wait: the finder waiting for the file's writer (median / worst over the acquisitions, ms).\n\n| size | run | acquisitions x frames | bare frames/s | frames/s | of bare | of one long | first lag (ms) | set-up (ms) | commit (ms) | input wait (ms) | write wait (ms) | lost |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            n * per,
            o.fraction * 100.0
        ),
        "size,run,acquisitions,frames_each,bare_fps,fps,ratio_to_bare,ratio_to_long,first_lag_median_ms,first_lag_worst_ms,setup_median_ms,setup_worst_ms,commit_median_ms,commit_worst_ms,lost\n".to_string(),
    )
}
