//! The live eta-interpolation rows: `stream-max` with `--eta`, a live view, `--eta-out`.

use crate::*;

/// The eta interpolation a `stream-max` row runs live (`StreamSettings::imaging`).
pub(crate) enum Live {
    /// `cluda stream --eta CUBE --subpixels N` (default maps): a sub-pixel image of each
    /// acquisition beside its cluster file.
    Image(Arc<Interpolator>, u32),
    /// The same with a live view asking for a copy of the image every [`VIEW_EVERY`]
    /// (`--plot --plot-every 1`; the copies are counted, not drawn).
    ImageView(Arc<Interpolator>, u32),
    /// `cluda stream --eta-out FILE`: one eta cube (default axes) of every data acquisition.
    Cube,
}

impl Live {
    /// The row's name in the tables.
    fn name(&self) -> &'static str {
        match self {
            Self::Image(..) => "stream-max --eta",
            Self::ImageView(..) => "stream-max --eta --plot",
            Self::Cube => "stream-max --eta-out",
        }
    }
}

/// How often the `stream-max --eta --plot` row's live view asks for a copy of the image.
pub(crate) const VIEW_EVERY: Duration = Duration::from_secs(1);

/// The file name of the `--eta-out` cube in a run's directory.
pub(crate) const ETA_OUT: &str = "eta-out.npz";

/// What a live-imaging run wrote, read back from its directory before it is removed: the
/// photons counted into its images (`--eta`: every `*.image.npy`, one per acquisition) or the
/// clusters counted into its cube (`--eta-out`). An error when a file is missing or counts
/// nothing, so that a row cannot measure a stream that made no image.
pub(crate) fn live_output(
    dir: &std::path::Path,
    live: &Live,
    acquisitions: u64,
) -> Result<u64, String> {
    match live {
        Live::Image(..) | Live::ImageView(..) => {
            let mut images = 0u64;
            let mut photons = 0u64;
            for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
                let path = entry.map_err(|e| e.to_string())?.path();
                if !path.to_string_lossy().ends_with(".image.npy") {
                    continue;
                }
                let image = cluda::io::npy::read_array::<u32>(&path).map_err(|e| e.to_string())?;
                photons += image.data.iter().map(|&c| u64::from(c)).sum::<u64>();
                images += 1;
            }
            if images != acquisitions || photons == 0 {
                return Err(format!(
                    "--eta: {images} sub-pixel images ({acquisitions} acquisitions) with {photons} photons in {}",
                    dir.display()
                ));
            }
            Ok(photons)
        }
        Live::Cube => {
            let path = dir.join(ETA_OUT);
            let (_, cube, _) = cluda::interpolation::files::read_cube(&path, None)
                .map_err(|e| format!("--eta-out: {e}"))?;
            let clusters = cube.iter().sum::<f64>() as u64;
            if clusters == 0 {
                return Err(format!("--eta-out: {} counts nothing", path.display()));
            }
            Ok(clusters)
        }
    }
}

/// The maps `cluda stream --eta CUBE` makes (default maps), of the cube `cluda eta` makes of
/// the generated flat field `frames` with clusters of `size` (default axes; the stream's
/// finder options, its pedestal): a [`CubeSink`] on a CPU finder, as `cluda eta --device cpu`
/// runs it. Also the clusters counted into the cube.
pub(crate) fn eta_maps(
    o: &Opts,
    frames: &[u16],
    pedestal: &Pedestal,
    size: ClusterSize,
) -> Result<(Arc<Interpolator>, u64), String> {
    let e = |e: cluda::Error| e.to_string();
    let options = cluda::FindOptions {
        size,
        n_sigma: 5.0,
        precision: Precision::F64,
        ..cluda::FindOptions::default()
    };
    let mut finder =
        cluda::CpuFinder::new(options.config(o.rows, o.cols, pedestal.window())).map_err(e)?;
    finder.set_pedestal(pedestal.clone()).map_err(e)?;
    let mut sink = CubeSink::new(CubeAxes::default_for(EtaKind::Eta2), true).map_err(e)?;
    let n = frames.len() / (o.rows * o.cols).max(1);
    let frames = Frames::new(frames, n, o.rows, o.cols).map_err(e)?;
    sink.begin(0, &mut finder).map_err(e)?;
    finder
        .find_each(frames, &mut |fc| sink.frame(0, &fc))
        .map_err(e)?;
    sink.end(0, &mut finder).map_err(e)?;
    let cube = sink.into_cube();
    let clusters = cube.counts().iter().sum::<u64>();
    if clusters == 0 {
        return Err(format!(
            "the flat field's eta cube ({side}x{side}) counts nothing",
            side = size.side()
        ));
    }
    let maps =
        Interpolator::new(cube.axes().clone(), &cube.to_f64(), MapKind::default()).map_err(e)?;
    Ok((Arc::new(maps), clusters))
}

/// The head of the live eta-interpolation table.
pub(crate) fn live_head() -> String {
    format!(
        "\n## Live eta interpolation (one endpoint)\n\n`stream-max --eta`: `stream-max` with `cluda stream --eta CUBE --subpixels {SUBPIXELS}` (default maps; the cube made once up front per size, as `cluda eta` makes it, from the generated flat field's clusters on the CPU finder): a sub-pixel image per acquisition beside its cluster file; `counted`: the photons in it. `stream-max --eta --plot`: the same with a live view of the image (`Callbacks::image`: a copy every {} s, as `cluda stream --plot --plot-every 1` asks, counted and dropped, not drawn: the placement worker copies the host's image, a GPU finder downloads its counts between two chunks). `stream-max --eta-out`: with `--eta-out FILE` (default axes): one eta cube of the stream; `counted`: the clusters in it. A GPU finder counts either on the device (`ClusterFinder::accumulate`, in its output stage); the CPU finder's clusters are placed or counted on the host, on the engine's thread, frame by frame. frames/s ends at the last cluster written, as `stream-max`'s (the image's or cube's download and write follow). \"of stream-max\": against the plain `stream-max` row of the same size just before (goal >= 95 %).\n\n| size | run | frames/s | of stream-max | of bare | counted | dropped | missing | worst lag (ms) | device |\n|---|---|---|---|---|---|---|---|---|---|\n",
        VIEW_EVERY.as_secs()
    )
}

/// The live eta-interpolation rows (`o.live`) of one cluster size: `stream-max` with `--eta`
/// and/or `--eta-out`, against the plain `stream-max` row's `plain_fps` and the bare loop's
/// `bare_fps`.
pub(crate) fn live_rows(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    size: ClusterSize,
    (bare_fps, plain_fps): (f64, f64),
    out: Tables<'_>,
) -> Result<(), String> {
    let side = size.side();
    let maps = if o.live.contains(&LiveRow::Eta) || o.live.contains(&LiveRow::EtaView) {
        let t = Instant::now();
        let (maps, clusters) = eta_maps(o, frames, pedestal, size)?;
        eprintln!(
            "size {side}: eta cube of the flat field ({} frames): {clusters} clusters, {:.1} s",
            o.distinct,
            t.elapsed().as_secs_f64()
        );
        Some(maps)
    } else {
        None
    };
    for row in &o.live {
        let live = match (row, &maps) {
            (LiveRow::Eta, Some(m)) => Live::Image(Arc::clone(m), SUBPIXELS),
            (LiveRow::EtaView, Some(m)) => Live::ImageView(Arc::clone(m), SUBPIXELS),
            (LiveRow::Eta | LiveRow::EtaView, None) => {
                return Err("no maps for the --eta row".into());
            }
            (LiveRow::EtaOut, _) => Live::Cube,
        };
        let name = live.name();
        eprintln!("size {side}: {name}");
        let run = Run {
            size,
            rate: None,
            full: FullQueue::Block,
            shape: (1, o.frames),
            parts: 1,
        };
        let sampler = ThreadSampler::start();
        let (mut sums, counted) = stream_run(o, frames, pedestal, &run, Some(&live))?;
        let s = sums.pop().ok_or("no summary from the stream")?;
        out.timings
            .push(timing_row(side, name, &s, &sampler.stop()));
        let fps = s.fps();
        let ratio = fps / plain_fps.max(1e-9);
        let c = &s.counts;
        eprintln!("  {name}: {fps:.0} frames/s = {ratio:.3} of stream-max, counted {counted}");
        let _ = writeln!(
            out.csv,
            "{side},{name},{},{fps:.1},{ratio:.3},{:.3},{counted},{},{},{:.1},{}",
            s.data_frames,
            fps / bare_fps,
            c.dropped,
            c.missing,
            s.worst_lag.as_secs_f64() * 1e3,
            s.device
        );
        let _ = writeln!(
            out.md,
            "| {side}x{side} | {name} | {fps:.0} | {:.1} % | {:.1} % | {counted} | {} | {} | {:.1} | {} |",
            100.0 * ratio,
            100.0 * fps / bare_fps,
            c.dropped,
            c.missing,
            s.worst_lag.as_secs_f64() * 1e3,
            s.device
        );
        out.goals.push(format!(
            "- {side}x{side}: `{name}` sustains {fps:.0} frames/s = {:.1} % of `stream-max`'s {plain_fps:.0} (goal >= 95 %): {}",
            100.0 * ratio,
            if ratio >= 0.95 { "met" } else { "NOT met" }
        ));
    }
    Ok(())
}
