//! The floors a run is held against: reading the file into the finder's memory (with the
//! upload, and with writing), finding on the GPU (opt10) or the CPU in memory, writing.

use crate::*;

/// Reads every frame of `frames` into `buf`, a chunk at a time, with `threads` threads;
/// us/frame.
fn fill_time(frames: &mut NpyFrames, buf: &mut [u16], threads: usize) -> Result<f64, String> {
    let n = frames.len();
    let t = Instant::now();
    while frames.fill(buf, threads).map_err(|e| e.to_string())? > 0 {}
    Ok(t.elapsed().as_secs_f64() * 1e6 / n as f64)
}

/// The read floor: the data file into the finder's kind of memory, chunk by chunk, with the
/// threads the CLI reads with for that device; us/frame.
pub(crate) fn read_floor(data: &Path, device: &str) -> Result<f64, String> {
    let mut frames = NpyFrames::open(data).map_err(|e| e.to_string())?;
    let (rows, cols) = (frames.rows(), frames.cols());
    let cfg = cluda::engine::EngineConfig::for_frames(rows, cols);
    let finder = floor_finder(device, rows, cols)?;
    let mut store = finder
        .frame_store(cfg.chunk * rows * cols)
        .map_err(|e| e.to_string())?;
    // As many threads as `cluda find` reads with for this device.
    let threads = finder.read_threads();
    fill_time(&mut frames, store.samples_mut(), threads)
}

/// The file path's floor with the memory bus shared: the reader's threads fill a ring of
/// page-locked slots of the engine's size (the finder's frame stores, or write-combined)
/// while the calling thread uploads each filled slot to the GPU on one stream (no kernel)
/// and gives it back; us/frame.
pub(crate) fn read_upload_floor(data: &Path, write_combined: bool) -> Result<f64, String> {
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
pub(crate) type LibRow = (&'static str, f64, f64);

/// Page-locked memory for `samples` samples of `cols`-sample rows: the finder's frame store,
/// or write-combined.
pub(crate) fn pinned_store(
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
pub(crate) fn read_floor_write_combined(data: &Path) -> Result<f64, String> {
    let mut frames = NpyFrames::open(data).map_err(|e| e.to_string())?;
    let (rows, cols) = (frames.rows(), frames.cols());
    let cfg = cluda::engine::EngineConfig::for_frames(rows, cols);
    let finder =
        cluda::GpuFinder::new(cluda::FinderConfig::new(rows, cols)).map_err(|e| e.to_string())?;
    let mut store = pinned_store(&finder, cfg.chunk * rows * cols, cols, true)?;
    let threads = cluda::io::readahead::read_threads();
    fill_time(&mut frames, store.samples_mut(), threads)
}

/// The library path: `find_each` over every frame in one call on a fresh finder (no
/// `reserve`), from a pageable `Vec`, from the same memory locked in place first, and from
/// `PinnedFrames`: (name, us/frame of the call, wall seconds of the call) per row, plus the
/// lock's seconds.
pub(crate) fn library_path(
    pedestal: &Path,
    data: &Path,
    size: usize,
) -> Result<(Vec<LibRow>, f64), String> {
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
pub(crate) fn floor_finder(
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
pub(crate) fn opt10_floor(pedestal: &Path, data: &Path, size: usize) -> Result<f64, String> {
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

/// Times `write` of a new file `dir/name` (given the file and an 8 MiB block to write),
/// closing it; removes the file; us/frame over `frames`.
fn timed_write(
    (dir, name): (&Path, &str),
    frames: usize,
    write: impl FnOnce(&mut std::fs::File, &[u8]) -> Result<(), String>,
) -> Result<f64, String> {
    let path = dir.join(name);
    let block = vec![0x5au8; 8 << 20];
    let t = Instant::now();
    let mut f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    write(&mut f, &block)?;
    drop(f);
    let us = t.elapsed().as_secs_f64() * 1e6 / frames as f64;
    let _ = std::fs::remove_file(&path);
    Ok(us)
}

/// The write floor: `bytes` written to a new file in `dir` in 8 MiB writes; us/frame.
pub(crate) fn write_floor(dir: &Path, bytes: u64, frames: usize) -> Result<f64, String> {
    timed_write((dir, "cluda-write-floor.bin"), frames, |f, block| {
        let mut left = bytes;
        while left > 0 {
            let k = left.min(block.len() as u64) as usize;
            f.write_all(&block[..k]).map_err(|e| e.to_string())?;
            left -= k as u64;
        }
        Ok(())
    })
}

/// Writer threads of the threaded write floor (as many as the writer accepts is pointless:
/// where one file is written in parallel at all, a few threads reach it).
pub(crate) const FLOOR_WRITE_THREADS: usize = 4;

/// The threaded write floor: `bytes` written to a new file in `dir` in 8 MiB positioned writes
/// (`write_all_at`) by `threads` threads, buffer `i` by thread `i % threads`; us/frame.
pub(crate) fn write_floor_threaded(
    dir: &Path,
    bytes: u64,
    frames: usize,
    threads: usize,
) -> Result<f64, String> {
    use std::os::unix::fs::FileExt;
    let name = "cluda-write-floor-threaded.bin";
    timed_write((dir, name), frames, |f, block| {
        let f = &*f;
        let blocks = bytes.div_ceil(block.len() as u64);
        std::thread::scope(|s| -> Result<(), String> {
            let jobs: Vec<_> = (0..threads as u64)
                .map(|first| {
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
        })
    })
}

/// Frames of the in-memory CPU finder row (`cpu:bench`): enough for a steady rate, few
/// enough that the row does not dominate the run.
pub(crate) const CPU_BENCH_FRAMES: usize = 5000;

/// The CPU finder on all cores over frames already in memory, one `find_each` call (what
/// `cargo bench --bench cpu` measures, on this run's file); us/frame and seconds of the call.
pub(crate) fn cpu_in_memory(
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
