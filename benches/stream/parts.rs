//! Section `parts`: every frame sent as N parts on N endpoints.

use crate::*;

/// One endpoint's frames counted, its first part's arrival and its end.
pub(crate) type Counted = (u64, Option<Instant>, Instant);

/// The bare loop on `parts` endpoints: a SUB socket and a thread each, receiving both message
/// parts and counting until the end message; frames/s of the slowest endpoint from the first
/// part's arrival anywhere to the last end.
pub(crate) fn bare_parts(o: &Opts, frames: &Arc<Vec<u16>>, parts: usize) -> Result<f64, String> {
    let port = free_ports(parts);
    let ctx = zmq::Context::new();
    let subs = (0..parts as u16)
        .map(|i| subscriber(&ctx, port + i))
        .collect::<Result<Vec<_>, String>>()?;
    let publisher = publish(o, frames, (port, parts), None, true, (1, o.frames))?;
    let counted: Vec<Result<Counted, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = subs
            .into_iter()
            .map(|sub| {
                s.spawn(move || {
                    let (count, first) = count_frames(&sub, 1)?;
                    Ok((count, first, Instant::now()))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a bare thread panicked".into()))
            })
            .collect()
    });
    publisher
        .join()
        .map_err(|_| "publisher panicked".to_string())??;
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    let mut least = u64::MAX;
    for c in counted {
        let (count, f, l) = c?;
        least = least.min(count);
        if let Some(f) = f {
            first = Some(first.map_or(f, |x| x.min(f)));
        }
        last = Some(last.map_or(l, |x| x.max(l)));
    }
    if least != o.frames {
        return Err(format!(
            "bare {parts}-endpoint loop got {least} of {} frames",
            o.frames
        ));
    }
    let secs = match (first, last) {
        (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    Ok(least as f64 / secs.max(1e-9))
}

/// The rows of frames in `o.parts` parts for one cluster size: the bare loop on that many
/// endpoints, the stream as fast as it takes frames and at `--fraction` of the bare rate;
/// ratios against the one-endpoint bare loop `bare_fps`.
pub(crate) fn parts_rows(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    size: ClusterSize,
    bare_fps: f64,
    out: Tables<'_>,
) -> Result<(), String> {
    let (side, n) = (size.side(), o.parts);
    eprintln!("size {side}: bare loop on {n} endpoints");
    let bare_n = bare_parts(o, frames, n)?;
    eprintln!("  bare-{n}ep: {bare_n:.0} frames/s");
    let _ = writeln!(
        out.csv,
        "{side},bare-{n}ep,{},{bare_n:.1},{:.3},0,0,0,-",
        o.frames,
        bare_n / bare_fps
    );
    let _ = writeln!(
        out.md,
        "| {side}x{side} | bare-{n}ep | {bare_n:.0} | {:.1} % | 0 | 0 | - | - |",
        100.0 * bare_n / bare_fps
    );
    out.goals.push(format!(
        "- {side}x{side}: {n} endpoints / 1 endpoint, bare loops: {bare_n:.0} / {bare_fps:.0} = {:.2}x",
        bare_n / bare_fps
    ));
    for (name, rate, full) in [
        (format!("stream-{n}ep-max"), None, FullQueue::Block),
        (
            format!("stream-{n}ep-rate"),
            Some(bare_n * o.fraction),
            FullQueue::Drop,
        ),
    ] {
        eprintln!("size {side}: {name}");
        let sampler = ThreadSampler::start();
        let s = stream(o, frames, pedestal, (size, n), rate, full)?;
        out.timings
            .push(timing_row(side, &name, &s, &sampler.stop()));
        let (fps, c) = (s.fps(), &s.counts);
        let dropped = c.dropped + c.incomplete;
        stream_row(
            (&mut *out.csv, &mut *out.md),
            (side, &name),
            &s,
            bare_fps,
            dropped,
        );
        if rate.is_none() {
            out.goals.push(format!(
                "- {side}x{side}: {n}-endpoint stream sustains {fps:.0} frames/s = {:.2}x the one-endpoint bare loop's {bare_fps:.0} (goal >= 1.8x): {}",
                fps / bare_fps,
                if fps >= 1.8 * bare_fps { "met" } else { "NOT met" }
            ));
        } else {
            let sent = rate.unwrap_or(0.0);
            let lost = c.dropped + c.missing + c.incomplete;
            let kept_up = lost == 0 && fps >= 0.95 * sent;
            out.goals.push(format!(
                "- {side}x{side}: {n} endpoints sent at {sent:.0} frames/s ({:.0} % of bare-{n}ep), stream processed {fps:.0} frames/s, dropped {}, incomplete {}, missed {} frames, {} late parts (goal: 0 lost, keeping up): {}",
                o.fraction * 100.0,
                c.dropped,
                c.incomplete,
                c.missing,
                c.late,
                if kept_up { "met" } else { "NOT met" }
            ));
        }
    }
    Ok(())
}
