//! The user's path, measured: `cluda find` on the inputs users have (`.npy` and slsDetector raw
//! acquisitions, page-cached and cold) to a cluster file, on the GPU and the CPU, against floors
//! measured in the same run.
//!
//! `cargo bench --bench user_path -- [--frames 20000] [--pedestal-frames 1000] [--sizes 3,9]
//!  [--devices gpu,cpu] [--inputs npy,raw] [--caches warm,cold] [--data-dir DIR] [--tmpfs DIR]
//!  [--disk DIR] [--cluda PATH] [--out DIR] [--campaign 20]`
//!
//! 1. Makes the input once with `cluda gen` (`DIR/pedestal.npy`, `DIR/data.npy`, and with
//!    `--raw` the same frames as raw acquisitions in `DIR/raw/`) and reads it once, so it is in
//!    the page cache. `DIR` must be on a disk (not tmpfs) for the cold runs to mean anything.
//! 2. Floors: reading the data file into the memory the finder reads (page-locked on a GPU)
//!    with the reader's threads (on a GPU also into write-combined page-locked memory);
//!    reading it the same way into a ring of page-locked slots (both kinds) while one stream
//!    uploads each filled slot to the GPU (no kernel: the file path's floor when reads and
//!    uploads share the memory bus); opt10 in memory (one `find_each`
//!    over every frame, already in page-locked memory); writing the bytes of each size's
//!    cluster file to the output directory in 8 MiB writes, on one thread and in positioned
//!    writes on 4 threads (as the cluster-file writer's threads write).
//! 3. The library path (GPU): `GpuFinder::find_each` over every frame, in one call, from a
//!    plain (pageable) `Vec<u16>` already in memory (the default input mode, which stages it:
//!    copied into pinned buffers on every core; and `InputMode::Registered`, which locks it
//!    for the call),
//!    from the same memory page-locked in place beforehand (`GpuFinder::lock_frames`, lock
//!    time reported apart), and from `PinnedFrames`; a fresh finder each, no `reserve`: what
//!    a library caller gets.
//! 4. Disk floor (`device=disk-read`): each cold data file read sequentially in 8 MiB reads on
//!    one thread, after evicting it from the page cache. CPU floor (`device=cpu:bench`,
//!    `cpu:bench-frozen`): the CPU finder on all cores over frames already in memory.
//! 5. Every run is the real command in a fresh process, once to warm up (first run) and once
//!    measured: `us_per_frame` is the data phase from its summary line, `wall_s` the whole
//!    command; cold runs evict every input file before each run. Every cluster file of a size
//!    (GPU and CPU, `.npy` and raw) is compared byte for byte.
//! 6. A campaign (`--campaign K`, default 20): the data cut into K `.npy` acquisitions found
//!    by one `cluda find --data ... --out-dir`, against one run over the same frames as one
//!    file (rows `<device>:campaign` and `<device>:whole`, wall time of the command).
//! 7. Start-up: the whole command on 10 frames, with the driver's JIT cache disabled
//!    (`CUDA_CACHE_DISABLE=1`, as on a fresh machine) and enabled.
//!
//! Results: `user-path.csv` (one row per measured run: `size,device,input,cache,output,frames,
//! us_per_frame,wall_s`; `input` npy|raw, `cache` warm|cold, `output` none|tmpfs|disk) and
//! `user-path.md` under `--out`.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use cluda::io::NpyFrames;

struct Opts {
    frames: usize,
    pedestal_frames: usize,
    sizes: Vec<usize>,
    devices: Vec<String>,
    inputs: Vec<String>,
    caches: Vec<String>,
    data_dir: PathBuf,
    tmpfs: PathBuf,
    disk: Option<PathBuf>,
    cluda: PathBuf,
    out: PathBuf,
    /// Acquisitions the data file is cut into for the campaign rows (1: none).
    campaign: usize,
}

fn parse() -> Result<Opts, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let sibling = exe.with_file_name("cluda");
    let mut o = Opts {
        frames: 20_000,
        pedestal_frames: 1000,
        sizes: vec![3, 9],
        devices: vec!["gpu".into(), "cpu".into()],
        inputs: vec!["npy".into(), "raw".into()],
        caches: vec!["warm".into(), "cold".into()],
        data_dir: std::env::temp_dir().join("cluda-user-path"),
        tmpfs: PathBuf::from("/dev/shm"),
        disk: None,
        cluda: if sibling.exists() {
            sibling
        } else {
            PathBuf::from(env!("CARGO_BIN_EXE_cluda"))
        },
        out: PathBuf::from("bench-results/user-path"),
        campaign: 20,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{v}: {e}"));
        match a.as_str() {
            "--bench" => {}
            "--frames" => o.frames = num(val()?)?,
            "--pedestal-frames" => o.pedestal_frames = num(val()?)?,
            "--sizes" => {
                o.sizes = val()?
                    .split(',')
                    .map(|s| s.parse().map_err(|e| format!("{s}: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--devices" => o.devices = val()?.split(',').map(String::from).collect(),
            "--inputs" => o.inputs = val()?.split(',').map(String::from).collect(),
            "--caches" => o.caches = val()?.split(',').map(String::from).collect(),
            "--data-dir" => o.data_dir = val()?.into(),
            "--tmpfs" => o.tmpfs = val()?.into(),
            "--disk" => o.disk = Some(val()?.into()),
            "--cluda" => o.cluda = val()?.into(),
            "--out" => o.out = val()?.into(),
            "--campaign" => o.campaign = num(val()?)?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

/// One run of the command: its data-phase us/frame (`--timing`'s data phase, waits for input
/// included) and wall seconds.
struct Run {
    us_per_frame: f64,
    wall_s: f64,
    stderr: String,
}

fn cluda(o: &Opts, args: &[&str], env: &[(&str, &str)]) -> Result<Run, String> {
    let t = Instant::now();
    let out = Command::new(&o.cluda)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("{}: {e}", o.cluda.display()))?;
    let wall_s = t.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(format!("cluda {args:?} failed: {stderr}"));
    }
    // The data phase as a whole (`--timing`'s line: waits for input included, which the
    // summary's `us_per_frame` leaves out); the summary's figure when there is no such line.
    let phase = stderr.lines().find_map(|l| {
        l.strip_prefix("timing: data phase ")
            .and_then(|r| r.split_once("s (").map(|(_, r)| r))
            .and_then(|r| r.split_once(" us/frame"))
            .and_then(|(v, _)| v.trim().parse::<f64>().ok())
    });
    let us_per_frame = phase.unwrap_or_else(|| {
        stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("us_per_frame="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    });
    Ok(Run {
        us_per_frame,
        wall_s,
        stderr,
    })
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap_or("")
}

/// Reads `path` once (into the page cache) and returns its size.
fn warm(path: &Path) -> Result<u64, String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut buf = vec![0u8; 8 << 20];
    let mut n = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(n),
            Ok(k) => n += k as u64,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
}

/// The read floor: the data file into the finder's kind of memory, chunk by chunk, with the
/// threads the CLI reads with for that device; us/frame.
fn read_floor(data: &Path, device: &str) -> Result<f64, String> {
    let mut frames = NpyFrames::open(data).map_err(|e| e.to_string())?;
    let (rows, cols, n) = (frames.rows(), frames.cols(), frames.len());
    let cfg = cluda::engine::EngineConfig::for_frames(rows, cols);
    let finder = floor_finder(device, rows, cols)?;
    let mut store = finder
        .frame_store(cfg.chunk * rows * cols)
        .map_err(|e| e.to_string())?;
    // As many threads as `cluda find` reads with for this device.
    let threads = finder.read_threads();
    let t = Instant::now();
    while frames
        .fill(store.samples_mut(), threads)
        .map_err(|e| e.to_string())?
        > 0
    {}
    Ok(t.elapsed().as_secs_f64() * 1e6 / n as f64)
}

/// The file path's floor with the memory bus shared: the reader's threads fill a ring of
/// page-locked slots of the engine's size (the finder's frame stores, or write-combined)
/// while the calling thread uploads each filled slot to the GPU on one stream (no kernel)
/// and gives it back; us/frame.
fn read_upload_floor(data: &Path, write_combined: bool) -> Result<f64, String> {
    use cudarc::driver::{result, sys};
    use std::sync::mpsc::sync_channel;
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut frames = NpyFrames::open(data).map_err(|x| e(&x))?;
    let (rows, cols, n) = (frames.rows(), frames.cols(), frames.len());
    let px = rows * cols;
    let cfg = cluda::engine::EngineConfig::for_frames(rows, cols);
    let finder = cluda::GpuFinder::new(cluda::FinderConfig::new(rows, cols)).map_err(|x| e(&x))?;
    let ctx = finder.gpu().context().clone();
    ctx.bind_to_thread().map_err(|x| e(&x))?;
    let stream = ctx.new_stream().map_err(|x| e(&x))?;
    let slot_len = cfg.chunk * px;
    // SAFETY: a plain device allocation, freed below after the stream is idle.
    let dev = unsafe { result::malloc_sync(slot_len * 2) }.map_err(|x| e(&x))?;
    let (free_tx, free_rx) = sync_channel::<Box<dyn cluda::finder::feed::FrameStore>>(cfg.slots);
    let (full_tx, full_rx) =
        sync_channel::<(Box<dyn cluda::finder::feed::FrameStore>, usize)>(cfg.slots);
    for _ in 0..cfg.slots {
        let store = pinned_store(&finder, slot_len, cols, write_combined)?;
        free_tx.send(store).map_err(|x| e(&x))?;
    }
    let threads = cluda::io::readahead::read_threads();
    let t = Instant::now();
    let uploaded = std::thread::scope(|scope| -> Result<usize, String> {
        let reader = scope.spawn(move || -> Result<(), String> {
            while let Ok(mut store) = free_rx.recv() {
                let k = frames
                    .fill(&mut store.samples_mut()[..slot_len], threads)
                    .map_err(|x| x.to_string())?;
                if k == 0 || full_tx.send((store, k)).is_err() {
                    break;
                }
            }
            Ok(())
        });
        let mut total = 0;
        while let Ok((store, k)) = full_rx.recv() {
            // SAFETY: `k` frames of the page-locked slot into the device buffer; the slot
            // stays here until the stream has finished the copy.
            unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    dev,
                    store.samples().as_ptr() as *const std::ffi::c_void,
                    k * px * 2,
                    stream.cu_stream(),
                )
            }
            .result()
            .map_err(|x| e(&x))?;
            stream.synchronize().map_err(|x| e(&x))?;
            total += k;
            // The reader stops at the end of the file: the slot is dropped then.
            let _ = free_tx.send(store);
        }
        drop(free_tx);
        reader
            .join()
            .map_err(|_| "the reader thread panicked".to_string())??;
        Ok(total)
    })?;
    let us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    // SAFETY: allocated above; the stream is idle.
    unsafe { result::free_sync(dev) }.map_err(|x| e(&x))?;
    if uploaded != n {
        return Err(format!("read and uploaded {uploaded} of {n} frames"));
    }
    Ok(us)
}

/// One library-path measurement: which memory, us/frame, seconds of the call.
type LibRow = (&'static str, f64, f64);

/// Page-locked memory for `samples` samples of `cols`-sample rows: the finder's frame store,
/// or write-combined.
fn pinned_store(
    finder: &cluda::GpuFinder,
    samples: usize,
    cols: usize,
    write_combined: bool,
) -> Result<Box<dyn cluda::finder::feed::FrameStore>, String> {
    use cluda::engine::FedFinder;
    if write_combined {
        let rows = samples.div_ceil(cols.max(1));
        cluda::finder::gpu::PinnedFrames::write_combined(finder.gpu(), 1, rows, cols)
            .map(|p| Box::new(p) as Box<dyn cluda::finder::feed::FrameStore>)
            .map_err(|e| e.to_string())
    } else {
        finder.frame_store(samples).map_err(|e| e.to_string())
    }
}

/// The read floor into write-combined page-locked memory (see [`read_floor`]); us/frame.
fn read_floor_write_combined(data: &Path) -> Result<f64, String> {
    let mut frames = NpyFrames::open(data).map_err(|e| e.to_string())?;
    let (rows, cols, n) = (frames.rows(), frames.cols(), frames.len());
    let cfg = cluda::engine::EngineConfig::for_frames(rows, cols);
    let finder =
        cluda::GpuFinder::new(cluda::FinderConfig::new(rows, cols)).map_err(|e| e.to_string())?;
    let mut store = pinned_store(&finder, cfg.chunk * rows * cols, cols, true)?;
    let threads = cluda::io::readahead::read_threads();
    let t = Instant::now();
    while frames
        .fill(store.samples_mut(), threads)
        .map_err(|e| e.to_string())?
        > 0
    {}
    Ok(t.elapsed().as_secs_f64() * 1e6 / n as f64)
}

/// The library path: `find_each` over every frame in one call on a fresh finder (no
/// `reserve`), from a pageable `Vec`, from the same memory locked in place first, and from
/// `PinnedFrames`: (name, us/frame of the call, wall seconds of the call) per row, plus the
/// lock's seconds.
fn library_path(pedestal: &Path, data: &Path, size: usize) -> Result<(Vec<LibRow>, f64), String> {
    use cluda::ClusterFinder;
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let ped = cluda::io::read_u16_frames(pedestal).map_err(|x| e(&x))?;
    let mut frames = NpyFrames::open(data).map_err(|x| e(&x))?;
    let (rows, cols, n) = (frames.rows(), frames.cols(), frames.len());
    let size = cluda::ClusterSize::from_side(size).map_err(|x| e(&x))?;
    let config = cluda::FinderConfig::new(rows, cols)
        .size(size)
        .pedestal_frames(ped.shape[0] as u32);
    let fresh_with = |pipe| -> Result<cluda::GpuFinder, String> {
        let mut f = cluda::GpuFinder::with_pipeline(config.clone(), pipe).map_err(|x| e(&x))?;
        f.push_pedestal(ped.as_frames().map_err(|x| e(&x))?)
            .map_err(|x| e(&x))?;
        Ok(f)
    };
    let fresh = || fresh_with(cluda::finder::gpu::PipelineConfig::default());
    let mut plain = vec![0u16; n * rows * cols];
    frames
        .fill(&mut plain, cluda::io::readahead::read_threads())
        .map_err(|x| e(&x))?;
    let call = |f: &mut cluda::GpuFinder, fr: cluda::Frames<'_>| -> Result<(f64, u64), String> {
        let mut count = 0u64;
        let t = Instant::now();
        f.find_each(fr, &mut |fc| {
            count += fc.len() as u64;
            Ok(())
        })
        .map_err(|x| e(&x))?;
        Ok((t.elapsed().as_secs_f64(), count))
    };
    fn frames_of(
        s: &[u16],
        n: usize,
        rows: usize,
        cols: usize,
    ) -> Result<cluda::Frames<'_>, String> {
        cluda::Frames::new(s, n, rows, cols).map_err(|x| x.to_string())
    }
    let mut rows_out = Vec::new();
    let mut f = fresh()?;
    let (s, want) = call(&mut f, frames_of(&plain, n, rows, cols)?)?;
    rows_out.push(("gpu:lib-pageable", s * 1e6 / n as f64, s));
    let mut f = fresh_with(cluda::finder::gpu::PipelineConfig {
        input: cluda::finder::gpu::InputMode::Registered,
        ..cluda::finder::gpu::PipelineConfig::default()
    })?;
    let (s, count) = call(&mut f, frames_of(&plain, n, rows, cols)?)?;
    rows_out.push(("gpu:lib-pageable-registered", s * 1e6 / n as f64, s));
    let same_registered = count == want;
    let mut f = fresh()?;
    let t = Instant::now();
    // A driver that refuses to lock 6 GB is a finding, not a failed bench.
    let (lock_s, same_locked) = match f.lock_frames(&plain) {
        Ok(locked) => {
            let lock_s = t.elapsed().as_secs_f64();
            let (s, count) = call(&mut f, frames_of(locked.samples(), n, rows, cols)?)?;
            drop(locked);
            rows_out.push(("gpu:lib-locked", s * 1e6 / n as f64, s));
            (lock_s, count == want)
        }
        Err(x) => {
            eprintln!("library path: locking the frames in place failed: {x}");
            (f64::NAN, true)
        }
    };
    let mut f = fresh()?;
    let device = f.gpu().clone();
    let mut pinned =
        cluda::finder::gpu::PinnedFrames::new(&device, n, rows, cols).map_err(|x| e(&x))?;
    pinned.as_mut_slice().copy_from_slice(&plain);
    drop(plain);
    let (s, count) = call(&mut f, pinned.frames().map_err(|x| e(&x))?)?;
    rows_out.push(("gpu:lib-pinned", s * 1e6 / n as f64, s));
    if !same_locked || !same_registered || count != want {
        return Err(format!(
            "the library paths found different cluster counts ({want} pageable)"
        ));
    }
    eprintln!("library path {size:?}: {rows_out:?}, lock {lock_s:.3} s, {want} clusters");
    Ok((rows_out, lock_s))
}

/// A finder of the device's kind, only to ask it for frame memory.
fn floor_finder(
    device: &str,
    rows: usize,
    cols: usize,
) -> Result<Box<dyn cluda::engine::FedFinder + Send>, String> {
    let config = cluda::FinderConfig::new(rows, cols);
    let dev: cluda::finder::select::DeviceChoice =
        device.parse().map_err(|e: cluda::Error| e.to_string())?;
    cluda::engine::open_finder(config, dev, None)
        .map(|(f, _)| f)
        .map_err(|e| e.to_string())
}

/// opt10 in memory: one call over every frame, already page-locked; us/frame.
fn opt10_floor(pedestal: &Path, data: &Path, size: usize) -> Result<f64, String> {
    use cluda::ClusterFinder;
    let ped = cluda::io::read_u16_frames(pedestal).map_err(|e| e.to_string())?;
    let mut frames = NpyFrames::open(data).map_err(|e| e.to_string())?;
    let (rows, cols, n) = (frames.rows(), frames.cols(), frames.len());
    let size = cluda::ClusterSize::from_side(size).map_err(|e| e.to_string())?;
    let config = cluda::FinderConfig::new(rows, cols)
        .size(size)
        .pedestal_frames(ped.shape[0] as u32);
    let mut finder = cluda::GpuFinder::new(config).map_err(|e| e.to_string())?;
    finder
        .push_pedestal(ped.as_frames().map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let device = finder.gpu().clone();
    let mut pinned =
        cluda::finder::gpu::PinnedFrames::new(&device, n, rows, cols).map_err(|e| e.to_string())?;
    frames
        .fill(pinned.as_mut_slice(), cluda::io::readahead::read_threads())
        .map_err(|e| e.to_string())?;
    finder.reserve(n).map_err(|e| e.to_string())?;
    let mut count = 0u64;
    let t = Instant::now();
    finder
        .find_each(pinned.frames().map_err(|e| e.to_string())?, &mut |fc| {
            count += fc.len() as u64;
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    let us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    eprintln!("opt10 in memory {size:?}: {us:.2} us/frame, {count} clusters");
    Ok(us)
}

/// The write floor: `bytes` written to a new file in `dir` in 8 MiB writes; us/frame.
fn write_floor(dir: &Path, bytes: u64, frames: usize) -> Result<f64, String> {
    let path = dir.join("cluda-write-floor.bin");
    let block = vec![0x5au8; 8 << 20];
    let t = Instant::now();
    let mut f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut left = bytes;
    while left > 0 {
        let k = left.min(block.len() as u64) as usize;
        f.write_all(&block[..k]).map_err(|e| e.to_string())?;
        left -= k as u64;
    }
    drop(f);
    let us = t.elapsed().as_secs_f64() * 1e6 / frames as f64;
    let _ = std::fs::remove_file(&path);
    Ok(us)
}

/// Writer threads of the threaded write floor (as many as the writer accepts is pointless:
/// where one file is written in parallel at all, a few threads reach it).
const FLOOR_WRITE_THREADS: usize = 4;

/// The threaded write floor: `bytes` written to a new file in `dir` in 8 MiB positioned writes
/// (`write_all_at`) by `threads` threads, buffer `i` by thread `i % threads`; us/frame.
fn write_floor_threaded(
    dir: &Path,
    bytes: u64,
    frames: usize,
    threads: usize,
) -> Result<f64, String> {
    use std::os::unix::fs::FileExt;
    let path = dir.join("cluda-write-floor-threaded.bin");
    let block = vec![0x5au8; 8 << 20];
    let t = Instant::now();
    let f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let blocks = bytes.div_ceil(block.len() as u64);
    std::thread::scope(|s| -> Result<(), String> {
        let jobs: Vec<_> = (0..threads as u64)
            .map(|first| {
                let (f, block) = (&f, &block);
                s.spawn(move || -> Result<(), String> {
                    let mut i = first;
                    while i < blocks {
                        let at = i * block.len() as u64;
                        let k = (bytes - at).min(block.len() as u64) as usize;
                        f.write_all_at(&block[..k], at).map_err(|e| e.to_string())?;
                        i += threads as u64;
                    }
                    Ok(())
                })
            })
            .collect();
        for j in jobs {
            j.join()
                .map_err(|_| "a floor thread panicked".to_string())??;
        }
        Ok(())
    })?;
    drop(f);
    let us = t.elapsed().as_secs_f64() * 1e6 / frames as f64;
    let _ = std::fs::remove_file(&path);
    Ok(us)
}

/// Frames of the in-memory CPU finder row (`cpu:bench`): enough for a steady rate, few
/// enough that the row does not dominate the run.
const CPU_BENCH_FRAMES: usize = 5000;

/// The CPU finder on all cores over frames already in memory, one `find_each` call (what
/// `cargo bench --bench cpu` measures, on this run's file); us/frame and seconds of the call.
fn cpu_in_memory(
    pedestal: &Path,
    data: &Path,
    size: usize,
    mode: cluda::ThresholdMode,
) -> Result<(f64, f64), String> {
    use cluda::ClusterFinder;
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let ped = cluda::io::read_u16_frames(pedestal).map_err(|x| e(&x))?;
    let mut frames = NpyFrames::open(data).map_err(|x| e(&x))?;
    let (rows, cols) = (frames.rows(), frames.cols());
    let n = frames.len().min(CPU_BENCH_FRAMES);
    let config = cluda::FinderConfig::new(rows, cols)
        .size(cluda::ClusterSize::from_side(size).map_err(|x| e(&x))?)
        .threshold(mode)
        .pedestal_frames(ped.shape[0] as u32);
    let mut finder = cluda::CpuFinder::new(config).map_err(|x| e(&x))?;
    finder
        .push_pedestal(ped.as_frames().map_err(|x| e(&x))?)
        .map_err(|x| e(&x))?;
    let mut plain = vec![0u16; n * rows * cols];
    frames
        .fill(&mut plain, cluda::io::readahead::read_threads())
        .map_err(|x| e(&x))?;
    let mut count = 0u64;
    let t = Instant::now();
    finder
        .find_each(
            cluda::Frames::new(&plain, n, rows, cols).map_err(|x| e(&x))?,
            &mut |fc| {
                count += fc.len() as u64;
                Ok(())
            },
        )
        .map_err(|x| e(&x))?;
    let secs = t.elapsed().as_secs_f64();
    let us = secs * 1e6 / n as f64;
    eprintln!("cpu in memory {size}x{size} {mode:?}: {us:.2} us/frame, {count} clusters");
    Ok((us, secs))
}

/// Drops `files` from the page cache (`posix_fadvise(DONTNEED)` after an `fdatasync`), so
/// the next read comes from the disk.
fn evict(files: &[PathBuf]) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    for f in files {
        let file = std::fs::File::open(f).map_err(|e| format!("{}: {e}", f.display()))?;
        file.sync_data()
            .map_err(|e| format!("{}: {e}", f.display()))?;
        // SAFETY: a valid open descriptor; the advice changes no memory of this process.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(format!("{}: posix_fadvise failed ({rc})", f.display()));
        }
    }
    Ok(())
}

/// Every file of the raw acquisitions in `dir` (masters and data files).
fn acquisition_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "raw" || x == "json"))
        .collect();
    v.sort();
    Ok(v)
}

/// Whether the raw data acquisition of master `master` holds `frames` frames.
fn raw_complete(master: &Path, frames: usize) -> bool {
    cluda::io::raw::RawReader::open(master).is_ok_and(|r| r.frames_on_disk() == frames as u64)
}

/// A cluster file's frames as (frame number, the frame's record bytes after its number), for
/// `size`x`size` clusters; `None` when the bytes are not such a file.
fn cluster_frames(bytes: &[u8], size: usize) -> Option<Vec<(i32, &[u8])>> {
    let cluster = 4 + 4 * size * size;
    let mut v = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let number = i32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
        let n = u32::from_le_bytes(bytes.get(at + 4..at + 8)?.try_into().ok()?) as usize;
        let end = at + 8 + n * cluster;
        v.push((number, bytes.get(at + 4..end)?));
        at = end;
    }
    Some(v)
}

/// Whether two cluster files hold the same clusters frame by frame, their frame numbers
/// differing by one constant.
fn same_up_to_numbering(a: &[(i32, &[u8])], b: &[(i32, &[u8])]) -> bool {
    let offset = match (a.first(), b.first()) {
        (Some(x), Some(y)) => i64::from(y.0) - i64::from(x.0),
        _ => 0,
    };
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.1 == y.1 && i64::from(y.0) - i64::from(x.0) == offset)
}

/// A campaign: the data file cut into `o.campaign` acquisitions of equal length (`.npy` files on
/// the data directory's disk, page-cached), found by one `cluda find --data ... --out-dir` on
/// the tmpfs against one run over the whole file to a cluster file on the tmpfs, on each GPU
/// or CPU device of the run, 3x3. Rows `device=<dev>:campaign` (wall of the command) beside
/// `<dev>:whole`; every acquisition's file is compared with the whole run's frames.
fn campaign(
    o: &Opts,
    ped: &Path,
    data: &Path,
    md: &mut String,
    csv: &mut String,
) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let mut frames = NpyFrames::open(data).map_err(|x| e(&x))?;
    let (rows, cols, n) = (frames.rows(), frames.cols(), frames.len());
    let each = n / o.campaign;
    if each == 0 {
        return Err(format!(
            "{n} frames cannot be cut into {} acquisitions",
            o.campaign
        ));
    }
    let dir = o.data_dir.join(format!("campaign-{}", o.campaign));
    let _ = std::fs::create_dir_all(&dir);
    let mut inputs = Vec::new();
    let mut buf = vec![0u16; each * rows * cols];
    for k in 0..o.campaign {
        let p = dir.join(format!("acq{k:03}.npy"));
        frames
            .fill(&mut buf, cluda::io::readahead::read_threads())
            .map_err(|x| e(&x))?;
        if NpyFrames::open(&p).map(|f| f.len()).ok() != Some(each) {
            cluda::io::write_u16_3d(&p, each, rows, cols, &buf).map_err(|x| e(&x))?;
        }
        warm(&p)?;
        inputs.push(p);
    }
    let _ = writeln!(
        md,
        "\n## A campaign: {} acquisitions of {each} frames in one command, against one of {}\n\n`cluda find --data acq000.npy ... --out-dir <tmpfs>` (one device open, one pedestal applied afresh to each input) against `cluda find --data <the first {} frames as one file> --out <tmpfs>`, 3x3, page-cached. `us/frame`: the command's wall time per frame.\n\n| device | whole: wall s | campaign: wall s | campaign / whole |\n|---|---:|---:|---:|",
        o.campaign,
        each * o.campaign,
        each * o.campaign
    );
    let whole = dir.join("whole.npy");
    if NpyFrames::open(&whole).map(|f| f.len()).ok() != Some(each * o.campaign) {
        let mut all = NpyFrames::open(data).map_err(|x| e(&x))?;
        let mut v = vec![0u16; each * o.campaign * rows * cols];
        all.fill(&mut v, cluda::io::readahead::read_threads())
            .map_err(|x| e(&x))?;
        cluda::io::write_u16_3d(&whole, each * o.campaign, rows, cols, &v).map_err(|x| e(&x))?;
    }
    warm(&whole)?;
    for dev in o.devices.iter().filter(|d| !d.contains(':')) {
        let out_dir = o.tmpfs.join(format!("cluda-campaign-{dev}"));
        let whole_out = o.tmpfs.join(format!("cluda-campaign-whole-{dev}.clust"));
        let whole_args = [
            "find",
            "--pedestal",
            s(ped),
            "--data",
            s(&whole),
            "--device",
            dev,
            "--out",
            s(&whole_out),
        ];
        let mut many_args: Vec<&str> = vec!["find", "--pedestal", s(ped), "--data"];
        many_args.extend(inputs.iter().map(|p| s(p)));
        many_args.extend(["--device", dev, "--out-dir", s(&out_dir)]);
        let mut best = (f64::MAX, f64::MAX);
        for _ in 0..2 {
            let _ = std::fs::remove_file(&whole_out);
            let _ = std::fs::remove_dir_all(&out_dir);
            best.0 = best.0.min(cluda(o, &whole_args, &[])?.wall_s);
            best.1 = best.1.min(cluda(o, &many_args, &[])?.wall_s);
        }
        // Each acquisition's file against its part of the whole run (its frames numbered
        // from 0 in its own file).
        let whole_frames = std::fs::read(&whole_out).ok().and_then(|b| {
            cluster_frames(&b, 3).map(|v| v.iter().map(|(_, r)| r.to_vec()).collect::<Vec<_>>())
        });
        let mut same = whole_frames.is_some();
        for (k, p) in inputs.iter().enumerate() {
            let name = p.file_stem().and_then(|x| x.to_str()).unwrap_or("");
            let got = std::fs::read(out_dir.join(format!("{name}.clust"))).ok();
            let alone = got.as_deref().and_then(|b| cluster_frames(b, 3));
            same &= match (&whole_frames, alone) {
                (Some(w), Some(a)) => {
                    k == 0 && a.len() == each && a.iter().zip(w).all(|(x, y)| x.1 == y.as_slice())
                        || k > 0 && a.len() == each
                }
                _ => false,
            };
        }
        let _ = writeln!(
            md,
            "| {dev} | {:.3} | {:.3} | {:.2} |",
            best.0,
            best.1,
            best.1 / best.0
        );
        let _ = writeln!(
            md,
            "\n{dev}: {} cluster files written, the first identical to the whole run's first {each} frames: **{}**\n",
            inputs.len(),
            if same { "yes" } else { "NO" }
        );
        let total = each * o.campaign;
        for (what, wall) in [("whole", best.0), ("campaign", best.1)] {
            let _ = writeln!(
                csv,
                "3,{dev}:{what},npy,warm,tmpfs,{total},{:.3},{wall:.3}",
                wall * 1e6 / total as f64
            );
        }
        let _ = std::fs::remove_file(&whole_out);
        let _ = std::fs::remove_dir_all(&out_dir);
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("user_path: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let o = parse()?;
    std::fs::create_dir_all(&o.data_dir).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&o.out).map_err(|e| e.to_string())?;
    let (ped, data) = (o.data_dir.join("pedestal.npy"), o.data_dir.join("data.npy"));
    let want = NpyFrames::open(&data).map(|f| f.len()).unwrap_or(0);
    if want != o.frames {
        let t = Instant::now();
        cluda(
            &o,
            &[
                "gen",
                "--overwrite",
                "--out",
                s(&o.data_dir),
                "--frames",
                &o.frames.to_string(),
                "--pedestal-frames",
                &o.pedestal_frames.to_string(),
            ],
            &[],
        )?;
        eprintln!("generated the input in {:.1} s", t.elapsed().as_secs_f64());
    }
    let bytes = warm(&data)? + warm(&ped)?;
    eprintln!("input: {bytes} bytes, in the page cache");
    let gpu = o.devices.iter().any(|d| d.starts_with("gpu"));

    let mut md = String::new();
    let mut csv = String::from("size,device,input,cache,output,frames,us_per_frame,wall_s\n");
    let _ = writeln!(
        md,
        "# The user's path\n\ncommand: `cargo bench --bench user_path -- --frames {} --sizes {} --devices {} --inputs {} --caches {}`\n\n{} frames of 400x400, as a `.npy` and as a raw acquisition, 1000 pedestal frames, n_sigma 5, F64. `us/frame` is the data phase of the command's summary line, `wall` the whole command (second run of each; the first warms the page cache and the driver's JIT cache).\n",
        o.frames,
        o.sizes
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(","),
        o.devices.join(","),
        o.inputs.join(","),
        o.caches.join(","),
        o.frames
    );
    let _ = writeln!(
        md,
        "## Floors (same run)\n\n| floor | us/frame |\n|---|---:|"
    );
    for dev in o.devices.iter().filter(|d| !d.contains(':')) {
        let us = read_floor(&data, dev)?;
        let _ = writeln!(md, "| read into {dev} memory | {us:.2} |");
    }
    if gpu {
        let us = read_floor_write_combined(&data)?;
        let _ = writeln!(md, "| read into write-combined gpu memory | {us:.2} |");
        for (wc, what) in [(false, "gpu memory"), (true, "write-combined gpu memory")] {
            let us = read_upload_floor(&data, wc)?;
            let _ = writeln!(
                md,
                "| read into {what} while each slot is uploaded (no kernel) | {us:.2} |"
            );
        }
    }
    let mut opt10 = Vec::new();
    if gpu {
        for &size in &o.sizes {
            let us = opt10_floor(&ped, &data, size)?;
            let _ = writeln!(md, "| opt10 in memory, {size}x{size} | {us:.2} |");
            opt10.push((size, us));
        }
    }
    if gpu {
        let _ = writeln!(
            md,
            "\n## Library path: `GpuFinder::find_each` on {} frames in memory, one call\n\n| size | memory | us/frame | call s | vs opt10 |\n|---|---|---:|---:|---:|",
            o.frames
        );
        for &size in &o.sizes {
            let (rows, lock_s) = library_path(&ped, &data, size)?;
            let opt = opt10
                .iter()
                .find(|(s, _)| *s == size)
                .map_or(f64::NAN, |(_, us)| *us);
            for (what, us, wall) in rows {
                let _ = writeln!(
                    md,
                    "| {size}x{size} | {what} | {us:.2} | {wall:.3} | {:.0}% |",
                    100.0 * opt / us
                );
                let _ = writeln!(
                    csv,
                    "{size},{what},npy,warm,none,{},{us:.3},{wall:.3}",
                    o.frames
                );
            }
            let _ = writeln!(
                md,
                "| {size}x{size} | (locking the Vec in place, once) | {:.2} | {lock_s:.3} | |",
                lock_s * 1e6 / o.frames as f64
            );
        }
    }
    // The same frames as a raw acquisition (what slsReceiver writes), made once.
    let raw_dir = o.data_dir.join("raw");
    let (raw_ped, raw_data) = (
        raw_dir.join("pedestal_master_0.json"),
        raw_dir.join("data_master_0.json"),
    );
    if o.inputs.iter().any(|i| i == "raw") && !raw_complete(&raw_data, o.frames) {
        let t = Instant::now();
        let _ = std::fs::remove_dir_all(&raw_dir);
        cluda(
            &o,
            &[
                "gen",
                "--overwrite",
                "--raw",
                "--out",
                s(&raw_dir),
                "--frames",
                &o.frames.to_string(),
                "--pedestal-frames",
                &o.pedestal_frames.to_string(),
            ],
            &[],
        )?;
        eprintln!(
            "generated the raw input in {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    let input_files = |input: &str| -> Result<(PathBuf, PathBuf, Vec<PathBuf>), String> {
        Ok(match input {
            "npy" => (ped.clone(), data.clone(), vec![ped.clone(), data.clone()]),
            "raw" => (
                raw_ped.clone(),
                raw_data.clone(),
                acquisition_files(&raw_dir)?,
            ),
            other => return Err(format!("unknown input {other} (npy|raw)")),
        })
    };
    let _ = writeln!(
        md,
        "\n## Disk: a plain sequential read of the cold data file (8 MiB reads, one thread)\n\n| input | bytes | us/frame | GB/s |\n|---|---:|---:|---:|"
    );
    let mut disk_us = Vec::new();
    for input in &o.inputs {
        let (_, d, files) = input_files(input)?;
        let data_files: Vec<PathBuf> = if input == "raw" {
            files
                .iter()
                .filter(|f| {
                    f.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("data_") && n.ends_with(".raw"))
                })
                .cloned()
                .collect()
        } else {
            vec![d.clone()]
        };
        evict(&data_files)?;
        let t = Instant::now();
        let mut bytes = 0;
        for f in &data_files {
            bytes += warm(f)?;
        }
        let secs = t.elapsed().as_secs_f64();
        let us = secs * 1e6 / o.frames as f64;
        let _ = writeln!(
            md,
            "| {input} | {bytes} | {us:.2} | {:.2} |",
            bytes as f64 / secs / 1e9
        );
        for &size in &o.sizes {
            let _ = writeln!(
                csv,
                "{size},disk-read,{input},cold,none,{},{us:.3},{secs:.3}",
                o.frames
            );
        }
        disk_us.push((input.clone(), us));
    }
    if o.devices.iter().any(|d| d.starts_with("cpu")) {
        let _ = writeln!(
            md,
            "\n## The CPU finder in memory: one `find_each` over {} frames already in memory, all cores\n\n| size | threshold | us/frame |\n|---|---|---:|",
            CPU_BENCH_FRAMES.min(o.frames)
        );
        for &size in &o.sizes {
            for (mode, name) in [
                (cluda::ThresholdMode::Live, "cpu:bench"),
                (cluda::ThresholdMode::Frozen, "cpu:bench-frozen"),
            ] {
                let (us, secs) = cpu_in_memory(&ped, &data, size, mode)?;
                let _ = writeln!(md, "| {size}x{size} | {mode:?} | {us:.2} |");
                let _ = writeln!(
                    csv,
                    "{size},{name},npy,warm,none,{},{us:.3},{secs:.3}",
                    CPU_BENCH_FRAMES.min(o.frames)
                );
            }
        }
    }
    let _ = writeln!(
        md,
        "\n## Runs\n\n`cold`: every input file evicted from the page cache (`posix_fadvise(DONTNEED)`) before each run; `vs disk`: the disk read's us/frame over the run's.\n\n| size | device | input | cache | output | us/frame | wall s | first run wall s | bound |\n|---|---|---|---|---|---:|---:|---:|---|"
    );
    let mut outputs: Vec<(&str, Option<PathBuf>)> =
        vec![("none", None), ("tmpfs", Some(o.tmpfs.clone()))];
    if let Some(d) = &o.disk {
        outputs.push(("disk", Some(d.clone())));
    }
    for &size in &o.sizes {
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        for input in &o.inputs {
            let (pedestal_in, data_in, all_files) = input_files(input)?;
            for cache in &o.caches {
                let cold = cache == "cold";
                // Cold runs measure the read: no output.
                let outs: Vec<&(&str, Option<PathBuf>)> = outputs
                    .iter()
                    .filter(|(k, _)| !cold || *k == "none")
                    .collect();
                for (kind, dir) in outs {
                    let (mut write_us, mut write_threaded_us) = (None, None);
                    let mut devices = o.devices.clone();
                    // Frozen thresholds for the CPU on the plain case (the CPU goal is
                    // live and frozen).
                    if input == "npy"
                        && !cold
                        && *kind == "none"
                        && devices.iter().any(|d| d == "cpu")
                    {
                        devices.push("cpu:frozen".into());
                    }
                    for dev in &devices {
                        let out = dir.as_ref().map(|d| {
                            d.join(format!(
                                "cluda-user-path-{size}-{input}-{}.clust",
                                dev.replace(':', "-")
                            ))
                        });
                        // `gpu:map`: the zero-copy (mapped) input; `cpu:frozen`: frozen thresholds.
                        let (device, variant) = dev.split_once(':').unwrap_or((dev.as_str(), ""));
                        let mut args = vec![
                            "find".to_string(),
                            "--pedestal".into(),
                            s(&pedestal_in).into(),
                            "--data".into(),
                            s(&data_in).into(),
                            "--cluster".into(),
                            size.to_string(),
                            "--device".into(),
                            device.into(),
                            "--timing".into(),
                        ];
                        match variant {
                            "map" => args.extend(["--input".into(), "map".into()]),
                            "frozen" => args.extend(["--threshold".into(), "frozen".into()]),
                            _ => {}
                        }
                        if let Some(p) = &out {
                            args.push("--out".into());
                            args.push(s(p).into());
                        }
                        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                        let once = || -> Result<Run, String> {
                            if let Some(p) = &out {
                                let _ = std::fs::remove_file(p);
                            }
                            if cold {
                                evict(&all_files)?;
                            }
                            cluda(&o, &argv, &[])
                        };
                        let first = once()?;
                        let run = once()?;
                        eprintln!(
                            "{size}x{size} {dev} {input} {cache} {kind}: {:.2} us/frame, {:.2} s\n{}",
                            run.us_per_frame,
                            run.wall_s,
                            run.stderr.trim_end()
                        );
                        if let (Some(p), Some(d)) = (&out, dir) {
                            let len = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
                            if write_us.is_none() {
                                write_us = Some(write_floor(d, len, o.frames)?);
                                write_threaded_us = Some(write_floor_threaded(
                                    d,
                                    len,
                                    o.frames,
                                    FLOOR_WRITE_THREADS,
                                )?);
                            }
                            files.push((format!("{dev} {input} {kind}"), p.clone()));
                        }
                        let bound = if cold {
                            disk_us.iter().find(|(i, _)| i == input).map_or(
                                "-".to_string(),
                                |(_, d)| {
                                    format!("{:.0}% of the disk", 100.0 * d / run.us_per_frame)
                                },
                            )
                        } else {
                            let floor = opt10
                                .iter()
                                .find(|(s, _)| *s == size)
                                .map(|(_, us)| *us)
                                .unwrap_or(0.0)
                                .max(write_us.unwrap_or(0.0));
                            if floor > 0.0 && device == "gpu" {
                                format!(
                                    "{:.0}% of max(opt10, write)",
                                    100.0 * run.us_per_frame / floor
                                )
                            } else {
                                "-".into()
                            }
                        };
                        let _ = writeln!(
                            md,
                            "| {size}x{size} | {dev} | {input} | {cache} | {kind} | {:.2} | {:.3} | {:.3} | {bound} |",
                            run.us_per_frame, run.wall_s, first.wall_s,
                        );
                        let _ = writeln!(
                            csv,
                            "{size},{dev},{input},{cache},{kind},{},{:.3},{:.3}",
                            o.frames, run.us_per_frame, run.wall_s
                        );
                    }
                    if let Some(w) = write_us {
                        let _ = writeln!(
                            md,
                            "| {size}x{size} | write floor | | | {kind} | {w:.2} | | | |"
                        );
                    }
                    if let Some(w) = write_threaded_us {
                        let _ = writeln!(
                            md,
                            "| {size}x{size} | write floor, {FLOOR_WRITE_THREADS} threads | | | {kind} | {w:.2} | | | |"
                        );
                    }
                }
            }
        }
        // Every cluster file of the same size (each device, input and output): the same
        // clusters; byte-identical within an input, and across inputs up to the frame numbers
        // (a raw acquisition numbers its frames from its headers, from 1; a `.npy` from 0).
        if let Some((a, pa)) = files.first() {
            let first = std::fs::read(pa).ok();
            let first_frames = first.as_deref().and_then(|b| cluster_frames(b, size));
            let mut differ = Vec::new();
            for (b, pb) in &files[1..] {
                let bytes = std::fs::read(pb).ok();
                let same_input = a.split(' ').nth(1) == b.split(' ').nth(1);
                let same = if same_input {
                    first.is_some() && bytes == first
                } else {
                    let other = bytes.as_deref().and_then(|x| cluster_frames(x, size));
                    match (&first_frames, &other) {
                        (Some(x), Some(y)) => same_up_to_numbering(x, y),
                        _ => false,
                    }
                };
                if !same {
                    differ.push(b.clone());
                }
            }
            let _ = writeln!(
                md,
                "\n{size}x{size}: {} cluster files (`{}`) identical to `{a}` (other inputs: up to the frame numbers' offset): **{}**",
                files.len() - 1,
                files[1..]
                    .iter()
                    .map(|(b, _)| b.as_str())
                    .collect::<Vec<_>>()
                    .join("`, `"),
                if differ.is_empty() {
                    "yes".to_string()
                } else {
                    format!("NO ({})", differ.join(", "))
                }
            );
        }
        for (_, p) in files {
            let _ = std::fs::remove_file(p);
        }
        let _ = writeln!(md);
        // What is measured so far, in case a later part does not finish.
        let _ = std::fs::write(o.out.join("user-path.csv"), &csv);
        let _ = std::fs::write(o.out.join("user-path.md"), &md);
    }
    if o.campaign > 1 {
        campaign(&o, &ped, &data, &mut md, &mut csv)?;
    }
    if gpu {
        // Start-up: 10 frames, JIT cache off (a fresh machine) and on.
        let small = o.data_dir.join("small");
        cluda(
            &o,
            &[
                "gen",
                "--overwrite",
                "--out",
                s(&small),
                "--frames",
                "10",
                "--pedestal-frames",
                "1000",
            ],
            &[],
        )?;
        let argv = [
            "find",
            "--pedestal",
            &format!("{}/pedestal.npy", s(&small)),
            "--data",
            &format!("{}/data.npy", s(&small)),
            "--device",
            "gpu",
        ];
        let argv: Vec<&str> = argv.iter().map(|a| a.as_ref()).collect();
        let _ = writeln!(
            md,
            "## Start-up: `cluda find --device gpu` on 10 frames\n\n| JIT cache | wall s |\n|---|---:|"
        );
        for (what, env) in [("disabled (fresh machine)", "1"), ("enabled, warm", "0")] {
            cluda(&o, &argv, &[("CUDA_CACHE_DISABLE", env)])?;
            let r = cluda(&o, &argv, &[("CUDA_CACHE_DISABLE", env)])?;
            let _ = writeln!(md, "| {what} | {:.3} |", r.wall_s);
        }
        let r = cluda(
            &o,
            &argv[..argv.len() - 1]
                .iter()
                .copied()
                .chain(["cpu"])
                .collect::<Vec<_>>(),
            &[],
        )?;
        let _ = writeln!(md, "| (CPU, for scale) | {:.3} |", r.wall_s);
        // Where a fresh machine's start-up goes: the same run with `--timing`.
        let timed: Vec<&str> = argv.iter().copied().chain(["--timing"]).collect();
        let r = cluda(&o, &timed, &[("CUDA_CACHE_DISABLE", "1")])?;
        let lines: Vec<&str> = r
            .stderr
            .lines()
            .filter(|l| l.starts_with("timing:"))
            .collect();
        let _ = writeln!(
            md,
            "\n`--timing` of the same run, JIT cache disabled ({:.3} s wall):\n\n```text\n{}\n```",
            r.wall_s,
            lines.join("\n")
        );
    }
    std::fs::write(o.out.join("user-path.csv"), &csv).map_err(|e| e.to_string())?;
    std::fs::write(o.out.join("user-path.md"), &md).map_err(|e| e.to_string())?;
    print!("{md}");
    Ok(())
}
