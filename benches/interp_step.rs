//! The eta + map lookup + image step per photon: cluda's GPU kernel (`cluda_eta_image`) on
//! clusters already on the device, timed alone with CUDA events, against aare's wheel
//! (`aare.Interpolator.interpolate`, `aare==2025.11.21`) on one thread of the same host, on
//! the same clusters and the same eta cube, in one run; and what the step adds to a whole
//! `cluda image` over `cluda find` on the same file (the extra end-to-end cost per photon).
//!
//! ```text
//! cargo bench --bench interp_step -- [--frames 3000] [--dir target/interp-step] [--reps 20]
//!     [--python python3] [--script benches/interp_step_aare.py] [--site DIR] [--wheels DIR]
//!     [--aare-repeats 5] [--cluda PATH [--device gpu|cpu] [--rounds 5]] [--md FILE]
//! ```
//!
//! 400 x 400 frames from [`cluda::generate`] (1000 pedestal frames), 3x3 clusters found by
//! the CPU finder (about 870 a frame: 3000 frames give about 2.6 million). The eta cube
//! (default `eta2` axes) is filled from every cluster; the timed photons are the clusters
//! whose eta and energy lie strictly inside the cube's edges (aare reads past its tables
//! otherwise), all of them placed. Maps: cumulative (the default) and Rosenblatt; N = 4.
//!
//! GPU: `DeviceClusters` in the compact-results layout, `DeviceAccum::count` launched
//! `--reps` times between CUDA events, median ns/photon; the device image must equal the
//! host's ([`SubpixelImage`] of [`Placer`]'s photons) first. Without a GPU its rows say so and
//! the rest runs. aare: `benches/interp_step_aare.py` reads the same clusters (an aare cluster
//! file) and cube (`eta.npz`) and times `interpolate` alone, pinned to one core, one thread
//! (it installs aare from `--wheels` into `--site` when it is not importable; see
//! `tools/aare-wheels`). End to end (with `--cluda`): `cluda image --subpixels 4` minus
//! `cluda find` on the same `.npy` files, median of `--rounds` interleaved runs each, divided
//! by the clusters found.
//!
//! On a GPU machine without Rust or a package index (from the repository root, after
//! `tools/gpu-pack benches/interp_step_aare.py` and then `tools/aare-wheels` here):
//!
//! ```text
//! .gpu/bin/interp_step --wheels .gpu/wheels --site /tmp/aare --cluda .gpu/bin/cluda \
//!     --md interp_step.md
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use cluda::generate::{GenConfig, Generator};
use cluda::interpolation::files::write_cube;
use cluda::interpolation::{
    AccumulatedCounts, CubeAxes, EtaCube, EtaKind, Interpolator, MapKind, Placer, SubpixelImage,
    Tally,
};
use cluda::io::{Claim, write_cluster_file, write_u16_3d};
use cluda::{ClusterBatch, ClusterFinder, ClusterSize, CpuFinder, FinderConfig, Frames};

const ROWS: usize = 400;
const COLS: usize = 400;
const PEDESTAL_FRAMES: usize = 1000;
const SUBPIXELS: u32 = 4;
const MAPS: [MapKind; 2] = [MapKind::Cumulative, MapKind::Rosenblatt];

struct Opts {
    frames: usize,
    dir: PathBuf,
    reps: usize,
    python: String,
    script: Option<PathBuf>,
    site: PathBuf,
    wheels: Option<PathBuf>,
    aare_repeats: usize,
    cluda: Option<PathBuf>,
    device: Option<String>,
    rounds: usize,
    md: Option<PathBuf>,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        frames: 3000,
        dir: PathBuf::from("target/interp-step"),
        reps: 20,
        python: "python3".into(),
        script: None,
        site: std::env::temp_dir().join("cluda-aare-site"),
        wheels: None,
        aare_repeats: 5,
        cluda: None,
        device: None,
        rounds: 5,
        md: None,
    };
    let num = |v: String, name: &str| v.parse().map_err(|_| format!("{name}: a number"));
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--frames" => o.frames = num(val()?, "--frames")?,
            "--dir" => o.dir = val()?.into(),
            "--reps" => o.reps = num(val()?, "--reps")?,
            "--python" => o.python = val()?,
            "--script" => o.script = Some(val()?.into()),
            "--site" => o.site = val()?.into(),
            "--wheels" => o.wheels = Some(val()?.into()),
            "--aare-repeats" => o.aare_repeats = num(val()?, "--aare-repeats")?,
            "--cluda" => o.cluda = Some(val()?.into()),
            "--device" => o.device = Some(val()?),
            "--rounds" => o.rounds = num(val()?, "--rounds")?,
            "--md" => o.md = Some(val()?.into()),
            "--bench" => {}
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.frames == 0 || o.reps == 0 || o.aare_repeats == 0 || o.rounds == 0 {
        return Err("--frames, --reps, --aare-repeats and --rounds must be at least 1".into());
    }
    Ok(o)
}

fn main() {
    support::bench::main("interp_step bench", run);
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Generated frames: the pedestal's dark frames and the data.
fn frames(o: &Opts) -> Result<(Vec<u16>, Vec<u16>), String> {
    let g = Generator::new(GenConfig::new(ROWS, COLS, 7)).map_err(err)?;
    let dark = g.frames(0, PEDESTAL_FRAMES, false);
    Ok((dark, g.frames(PEDESTAL_FRAMES as u64, o.frames, true)))
}

/// The frames as `pedestal.npy` and `data.npy` in `dir`, for the end-to-end runs.
fn write_frames(o: &Opts, dark: &[u16], data: &[u16]) -> Result<(), String> {
    let (p, d) = (o.dir.join("pedestal.npy"), o.dir.join("data.npy"));
    write_u16_3d(&p, PEDESTAL_FRAMES, ROWS, COLS, dark).map_err(err)?;
    write_u16_3d(&d, o.frames, ROWS, COLS, data).map_err(err)
}

/// The 3x3 clusters of `data` found by the CPU finder after the pedestal `dark`.
fn find(dark: &[u16], data: &[u16], n: usize) -> Result<ClusterBatch, String> {
    let config = FinderConfig::new(ROWS, COLS)
        .size(ClusterSize::S3)
        .pedestal_frames(PEDESTAL_FRAMES as u32);
    let mut finder = CpuFinder::new(config).map_err(err)?;
    let frames = |v, n| Frames::new(v, n, ROWS, COLS).map_err(err);
    finder
        .push_pedestal(frames(dark, PEDESTAL_FRAMES)?)
        .map_err(err)?;
    finder.find(frames(data, n)?).map_err(err)
}

/// The eta cube of every cluster of `batch` (default eta2 axes).
fn cube(batch: &ClusterBatch) -> Result<EtaCube, String> {
    let mut cube = EtaCube::new(CubeAxes::default_for(EtaKind::Eta2)).map_err(err)?;
    for fc in batch.iter_frames() {
        cube.add_frame(&fc).map_err(err)?;
    }
    Ok(cube)
}

/// The clusters of `batch` whose eta and energy lie strictly inside `axes`' edges (the
/// photons both sides can place), frame by frame.
fn photons(batch: &ClusterBatch, axes: &CubeAxes) -> ClusterBatch {
    let open = |e: &[f64], v: f64| e[0] < v && v < e[e.len() - 1];
    let side = batch.size().side();
    let mut out = ClusterBatch::new(batch.size());
    let mut words = Vec::new();
    for fc in batch.iter_frames() {
        words.clear();
        for (c, w) in fc.iter().zip(fc.words().chunks_exact(1 + side * side)) {
            let at = axes.locate(c.data, side);
            if open(axes.x.as_slice(), at.x)
                && open(axes.y.as_slice(), at.y)
                && open(axes.e.as_slice(), at.energy)
            {
                words.extend_from_slice(w);
            }
        }
        out.push_frame(&words);
    }
    out
}

/// One kind of maps, with the host's image of the photons placed through them.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))] // the image and tally check the GPU's
struct Map {
    maps: Arc<Interpolator>,
    image: SubpixelImage,
    tally: Tally,
    /// ns per photon the host took to place and count them (one thread).
    host_ns: f64,
}

/// The host's image of `batch` through `maps`: every photon placed by [`Placer`], counted
/// into a [`SubpixelImage`].
fn host_image(batch: &ClusterBatch, maps: Interpolator) -> Result<Map, String> {
    let placer = Placer {
        maps: &maps,
        window: None,
        mask: None,
        gain: None,
    };
    let mut image = SubpixelImage::new(ROWS, COLS, SUBPIXELS).map_err(err)?;
    let (mut tally, mut photons) = (Tally::default(), Vec::new());
    let t = Instant::now();
    for (i, fc) in batch.iter_frames().enumerate() {
        photons.clear();
        placer.place_frame(i as i64, &fc, &mut tally, &mut photons);
        for p in photons.iter().filter(|p| p.flags == 0) {
            image.add(p.x, p.y);
        }
    }
    let host_ns = t.elapsed().as_secs_f64() * 1e9 / batch.total().max(1) as f64;
    Ok(Map {
        maps: Arc::new(maps),
        image,
        tally,
        host_ns,
    })
}

/// The cluster file and `eta.npz` the aare script reads.
fn write_inputs(dir: &Path, batch: &ClusterBatch, cube: &EtaCube) -> Result<(), String> {
    write_cluster_file(&dir.join("photons.clust"), 0, batch).map_err(err)?;
    write_cube(&dir.join("eta.npz"), cube, "ADU", Claim::Replace).map_err(err)
}

#[cfg(feature = "gpu")]
mod gpu {
    //! The kernel alone on device-resident clusters, checked against the host's image.

    use super::*;
    use cluda::cuda::Device;
    use cluda::finder::gpu::{DeviceAccum, DeviceClusters};
    use cluda::interpolation::Accumulate;
    use cudarc::driver::CudaStream;
    use cudarc::driver::sys::CUevent_flags;

    /// What one map's kernel gave: median ns per photon over the repetitions.
    pub struct Timed {
        pub ns: f64,
        pub device: String,
    }

    /// The accumulation of an N = 4 image through `maps` on `device`.
    fn accum(
        device: &Device,
        stream: &Arc<CudaStream>,
        maps: &Arc<Interpolator>,
    ) -> Result<DeviceAccum, String> {
        let what = Accumulate::Image {
            maps: maps.clone(),
            subpixels: SUBPIXELS,
            window: None,
            mask: None,
        };
        DeviceAccum::new(device, stream, &what, ClusterSize::S3, ROWS, COLS).map_err(err)
    }

    /// One launch over `clusters` must give the host's image and tally.
    fn check(
        device: &Device,
        stream: &Arc<CudaStream>,
        clusters: &DeviceClusters,
        map: &Map,
    ) -> Result<(), String> {
        let acc = accum(device, stream, &map.maps)?;
        acc.count(stream, clusters).map_err(err)?;
        let got = acc.take(stream).map_err(err)?;
        let mut img = SubpixelImage::new(ROWS, COLS, SUBPIXELS).map_err(err)?;
        let AccumulatedCounts::Image(counts) = got.counts else {
            return Err("the device accumulated no image".into());
        };
        img.add_counts(counts).map_err(err)?;
        if got.tally != map.tally || img != map.image {
            return Err(format!(
                "{:?} maps: the device image differs from the host's (device {}, host {})",
                map.maps.map_kind(),
                got.tally.summary(),
                map.tally.summary()
            ));
        }
        Ok(())
    }

    /// Median ns per photon of `reps` launches over `clusters`, each between two events.
    fn time(
        device: &Device,
        stream: &Arc<CudaStream>,
        clusters: &DeviceClusters,
        maps: &Arc<Interpolator>,
        reps: usize,
    ) -> Result<f64, String> {
        let acc = accum(device, stream, maps)?;
        acc.count(stream, clusters).map_err(err)?; // warm-up
        let event = || {
            stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(err)
        };
        let mut ns = Vec::with_capacity(reps);
        for _ in 0..reps {
            let start = event()?;
            acc.count(stream, clusters).map_err(err)?;
            let end = event()?;
            end.synchronize().map_err(err)?;
            let ms = start.elapsed_ms(&end).map_err(err)?;
            ns.push(f64::from(ms) * 1e6 / clusters.len().max(1) as f64);
        }
        acc.take(stream).map_err(err)?;
        Ok(median(&mut ns))
    }

    /// Each map's median kernel ns per photon, after its check; `None` without a GPU.
    pub fn kernel(
        batch: &ClusterBatch,
        maps: &[Map],
        reps: usize,
    ) -> Result<Option<Vec<Timed>>, String> {
        if !cluda::cuda::gpu_available() {
            eprintln!("interp_step: no CUDA GPU here: the GPU kernel rows are skipped");
            return Ok(None);
        }
        let device = Device::open(0).map_err(err)?;
        let stream = device.context().new_stream().map_err(err)?;
        let clusters = DeviceClusters::upload(&stream, batch).map_err(err)?;
        let mut out = Vec::new();
        for m in maps {
            check(&device, &stream, &clusters, m)?;
            out.push(Timed {
                ns: time(&device, &stream, &clusters, &m.maps, reps)?,
                device: device.name(),
            });
        }
        Ok(Some(out))
    }
}

#[cfg(not(feature = "gpu"))]
mod gpu {
    //! Built without the `gpu` feature: no kernel rows.

    use super::*;

    pub struct Timed {
        pub ns: f64,
        pub device: String,
    }

    pub fn kernel(_: &ClusterBatch, _: &[Map], _: usize) -> Result<Option<Vec<Timed>>, String> {
        eprintln!("interp_step: built without the gpu feature: the GPU kernel rows are skipped");
        Ok(None)
    }
}

/// The aare script's path: `--script`, else beside this source or under `.gpu/`.
fn script(o: &Opts) -> Result<PathBuf, String> {
    if let Some(s) = &o.script {
        return Ok(s.clone());
    }
    [
        "benches/interp_step_aare.py",
        ".gpu/benches/interp_step_aare.py",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
    .ok_or_else(|| "benches/interp_step_aare.py not found: pass --script".into())
}

/// Runs the aare script on the files in `dir`; its JSON answer.
fn aare(o: &Opts, photons: usize) -> Result<serde_json::Value, String> {
    let mut cmd = Command::new(&o.python);
    cmd.arg(script(o)?)
        .arg("--clusters")
        .arg(o.dir.join("photons.clust"))
        .arg("--count")
        .arg(photons.to_string())
        .arg("--cube")
        .arg(o.dir.join("eta.npz"))
        .arg("--repeats")
        .arg(o.aare_repeats.to_string())
        .arg("--site")
        .arg(&o.site);
    if let Some(w) = &o.wheels {
        cmd.arg("--wheels").arg(w);
    }
    for v in [
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
    ] {
        cmd.env(v, "1");
    }
    let path = std::env::var_os("PYTHONPATH").unwrap_or_default();
    let mut paths = vec![o.site.clone()];
    paths.extend(std::env::split_paths(&path));
    cmd.env("PYTHONPATH", std::env::join_paths(paths).map_err(err)?);
    let out = cmd.output().map_err(|e| format!("{}: {e}", o.python))?;
    if !out.status.success() {
        return Err(format!(
            "the aare script failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|e| format!("the aare script's answer {line:?}: {e}"))
}

/// Wall seconds of `cluda ARGS`, and its stdout.
fn wall(cluda: &Path, args: &[String]) -> Result<(f64, String), String> {
    let t = Instant::now();
    let out = Command::new(cluda)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", cluda.display()))?;
    if !out.status.success() {
        return Err(format!(
            "cluda {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok((t.elapsed().as_secs_f64(), stdout))
}

/// The end-to-end measurement: median wall seconds of `cluda find` and of `cluda image`
/// (N = 4) over interleaved rounds on the bench's files, and the clusters `find` reported.
struct EndToEnd {
    find: f64,
    image: f64,
    clusters: u64,
}

fn end_to_end(o: &Opts, cluda: &Path) -> Result<EndToEnd, String> {
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    let mut find: Vec<String> = ["find", "--cluster", "3", "--pedestal"]
        .map(String::from)
        .into();
    find.extend([s(o.dir.join("pedestal.npy")), "--data".into()]);
    find.push(s(o.dir.join("data.npy")));
    if let Some(d) = &o.device {
        find.extend(["--device".into(), d.clone()]);
    }
    let mut image = find.clone();
    image[0] = "image".into();
    image.extend(["--eta".into(), s(o.dir.join("eta.npz"))]);
    image.extend(["--subpixels".into(), SUBPIXELS.to_string()]);
    image.extend([
        "--out".into(),
        s(o.dir.join("image4.npy")),
        "--overwrite".into(),
    ]);
    let (mut f, mut i, mut line) = (Vec::new(), Vec::new(), String::new());
    for _ in 0..o.rounds {
        let (t, out) = wall(cluda, &find)?;
        f.push(t);
        line = out;
        i.push(wall(cluda, &image)?.0);
    }
    let clusters = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("clusters=")?.parse().ok())
        .ok_or_else(|| format!("no clusters= in cluda find's output {line:?}"))?;
    Ok(EndToEnd {
        find: median(&mut f),
        image: median(&mut i),
        clusters,
    })
}

fn run() -> Result<(), String> {
    let o = parse()?;
    std::fs::create_dir_all(&o.dir).map_err(|e| format!("{}: {e}", o.dir.display()))?;
    let (dark, data) = frames(&o)?;
    if o.cluda.is_some() {
        write_frames(&o, &dark, &data)?;
    }
    let found = find(&dark, &data, o.frames)?;
    drop((dark, data));
    let cube = cube(&found)?;
    let batch = photons(&found, cube.axes());
    write_inputs(&o.dir, &batch, &cube)?;
    let n = batch.total();
    println!(
        "interp_step: {} frames, {} clusters, {n} photons strictly inside the cube's edges",
        o.frames,
        found.total()
    );
    let mut maps = Vec::new();
    for kind in MAPS {
        let m = Interpolator::new(cube.axes().clone(), &cube.to_f64(), kind).map_err(err)?;
        maps.push(host_image(&batch, m)?);
    }
    let kernel = gpu::kernel(&batch, &maps, o.reps)?;
    let theirs = aare(&o, n)?;
    let e2e = match &o.cluda {
        Some(c) => Some(end_to_end(&o, c)?),
        None => None,
    };
    let md = table(&o, &found, n, &maps, kernel.as_deref(), &theirs, e2e);
    print!("{md}");
    if let Some(path) = &o.md {
        std::fs::write(path, &md).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// The Markdown report.
fn table(
    o: &Opts,
    found: &ClusterBatch,
    n: usize,
    maps: &[Map],
    kernel: Option<&[gpu::Timed]>,
    theirs: &serde_json::Value,
    e2e: Option<EndToEnd>,
) -> String {
    let device = kernel
        .and_then(|k| k.first())
        .map_or("no GPU".to_string(), |t| t.device.clone());
    let mut md = format!(
        "# Eta + lookup + image per photon: cluda's GPU kernel vs aare's `interpolate`\n\n\
         `interp_step --frames {} --reps {} --aare-repeats {}`; GPU: {device}; aare {} ({}) on \
         Python {}, one thread (pinned to CPU {}).\n\n\
         {n} photons (3x3 clusters strictly inside the eta2 cube's edges, of {} found in {} \
         frames of {ROWS} x {COLS}); N = {SUBPIXELS}. GPU: `cluda_eta_image` alone on \
         device-resident clusters, CUDA events, median of {} launches, its image equal to the \
         host's. aare: `Interpolator.interpolate` alone, median of {} calls over one \
         ClusterVector.\n\n\
         | maps | GPU kernel ns/photon | aare ns/photon (1 thread) | aare / GPU (goal >= 100) \
         | cluda host ns/photon (1 thread, place + count) |\n|---|---|---|---|---|\n",
        o.frames,
        o.reps,
        o.aare_repeats,
        theirs["aare"].as_str().unwrap_or("?"),
        theirs["aare_from"].as_str().unwrap_or("?"),
        theirs["python"].as_str().unwrap_or("?"),
        theirs["cpu"],
        found.total(),
        o.frames,
        o.reps,
        o.aare_repeats,
    );
    for (i, m) in maps.iter().enumerate() {
        let name = m.maps.map_kind().name();
        let a = theirs["maps"][name]["ns_per_photon"].as_f64();
        let g = kernel.and_then(|k| k.get(i)).map(|t| t.ns);
        let cell = |v: Option<f64>, digits: usize| {
            v.map_or("skipped".to_string(), |v| format!("{v:.digits$}"))
        };
        let ratio = a.zip(g).map(|(a, g)| a / g);
        md.push_str(&format!(
            "| {name} | {} | {} | {} | {:.1} |\n",
            cell(g, 3),
            cell(a, 1),
            cell(ratio, 0),
            m.host_ns
        ));
    }
    md.push_str(&match e2e {
        Some(e) => format!(
            "\nEnd to end (`{}`, the same `.npy` files, median of {} interleaved rounds): \
             `find` {:.3} s, `image --subpixels {SUBPIXELS}` {:.3} s: **{:.1} ns extra per \
             cluster** ({} clusters found).\n",
            o.device
                .as_deref()
                .map_or("default device".to_string(), |d| format!("--device {d}")),
            o.rounds,
            e.find,
            e.image,
            (e.image - e.find) * 1e9 / e.clusters.max(1) as f64,
            e.clusters
        ),
        None => "\nEnd to end: not measured (no `--cluda`).\n".to_string(),
    });
    md
}
