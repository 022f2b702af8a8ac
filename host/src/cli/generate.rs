//! `cluda gen` (module `generate`, as `gen` is a reserved word): writes DIR/pedestal.npy (dark
//! frames) and DIR/data.npy (frames with photons), or the same as raw acquisitions. Every file
//! is written under a temporary name and renamed into place when complete.

use std::path::Path;
use std::sync::mpsc::sync_channel;

use cluda::generate::{GenConfig, Generator};
use cluda::io::raw::{DetectorType, RawWriter, RawWriterConfig};
use cluda::io::{NpyWriter, check_output};
use cluda::{Error, Result};

use super::args::GenArgs;
use cluda::engine::EngineConfig;
use cluda::engine::input::Input;

use super::inputs::{Generated, check_dims};
use super::output::{note_unwritten, print_line};
use super::progress::frames_bar;

/// Runs `cluda gen`.
pub fn run(args: &GenArgs) -> Result<()> {
    check_dims(args.rows, args.cols, args.frames.max(args.pedestal_frames))?;
    if args.pedestal_frames == 0 {
        return Err(Error::param(
            "pedestal-frames",
            "must be at least 1 (the pedestal needs dark frames)",
        ));
    }
    std::fs::create_dir_all(&args.out).map_err(|e| Error::io(&args.out, e))?;
    for name in ["pedestal", "data"] {
        let file = if args.raw {
            format!("{name}_master_0.json")
        } else {
            format!("{name}.npy")
        };
        check_output(&args.out.join(file), "out", &[])?;
    }
    let generator = Generator::new(GenConfig::new(args.rows, args.cols, args.seed))?;
    let p = args.pedestal_frames;
    let dark = Generated::new(&generator, 0, p, false).input("pedestal");
    let data = Generated::new(&generator, p as u64, args.frames, true).input("data");
    for (name, mut input) in [("pedestal", dark), ("data", data)] {
        if args.raw {
            let master = args.out.join(format!("{name}_master_0.json"));
            note_unwritten(&master, write_raw(&args.out, name, &mut input))?;
        } else {
            let path = args.out.join(format!("{name}.npy"));
            note_unwritten(&path, write_npy(&path, &mut input))?;
        }
    }
    Ok(())
}

/// Streams `input` into a 3-D uint16 `.npy` file and reports it on stdout.
fn write_npy(path: &Path, input: &mut Input<'_>) -> Result<()> {
    let (f, r, c) = (input.len as usize, input.frames.rows(), input.frames.cols());
    let mut w = NpyWriter::<u16>::create(path, &[f, r, c])?;
    stream(input, |buf, _| w.write(buf))?;
    w.finish()?;
    print_line(&format!(
        "wrote {} ({f} x {r} x {c} uint16)",
        path.display()
    ))
}

/// Streams `input` into the raw acquisition `DIR/<base>_master_<0>.json` (image-ordered
/// frames, frame numbers from 1, 10000 frames per data file) and reports it on stdout. Frames
/// of 400 rows are written as MOENCH 03; other shapes, which no MOENCH has, as a generic
/// detector type (the master file's "Detector Type" selects the pixel order).
fn write_raw(dir: &Path, base: &str, input: &mut Input<'_>) -> Result<()> {
    let (f, r, c) = (input.len, input.frames.rows(), input.frames.cols());
    let config = RawWriterConfig {
        rows: r,
        cols: c,
        detector: if r == 400 {
            DetectorType::Moench03
        } else {
            DetectorType::Generic16
        },
        ..RawWriterConfig::moench03()
    };
    let mut w = RawWriter::create(dir, base, 0, config)?;
    let px = r * c;
    stream(input, |buf, numbers| {
        for (frame, &n) in buf.chunks_exact(px).zip(numbers) {
            w.write_frame(n + 1, frame)?;
        }
        Ok(())
    })?;
    let master = w.finish(None)?;
    print_line(&format!(
        "wrote {} ({f} frames of {r} x {c} uint16, raw)",
        master.display()
    ))
}

/// Hands `input` to `write` a chunk of frames (and their numbers) at a time, in order. The
/// next chunk is made (in parallel, on rayon's threads) on a thread of its own while this one
/// is written, so generating and writing overlap; two chunks exist at most.
fn stream(
    input: &mut Input<'_>,
    mut write: impl FnMut(&[u16], &[u64]) -> Result<()>,
) -> Result<()> {
    let (r, c) = (input.frames.rows(), input.frames.cols());
    let chunk = EngineConfig::for_frames(r, c).chunk;
    let bar = frames_bar(input.len, "writing");
    let frames = &mut input.frames;
    std::thread::scope(|s| -> Result<()> {
        // Declared in the scope's closure: dropped when it returns (also early, on an error),
        // which stops the maker thread before the scope waits for it.
        type Chunk = (Vec<u16>, Vec<u64>);
        let (full_tx, full_rx) = sync_channel::<Result<Chunk>>(1);
        let (free_tx, free_rx) = sync_channel::<Chunk>(2);
        for _ in 0..2 {
            // Room for both: cannot block or fail.
            let _ = free_tx.send((Vec::new(), Vec::new()));
        }
        std::thread::Builder::new()
            .name("cluda-gen".into())
            .spawn_scoped(s, move || {
                while let Ok((mut buf, mut numbers)) = free_rx.recv() {
                    buf.clear();
                    numbers.clear();
                    let msg = match frames.read_frames(chunk, &mut buf, &mut numbers) {
                        Ok(0) => break,
                        Ok(_) => Ok((buf, numbers)),
                        Err(e) => Err(e),
                    };
                    let failed = msg.is_err();
                    if full_tx.send(msg).is_err() || failed {
                        break;
                    }
                }
            })
            .map_err(|e| Error::io("<generator thread>", e))?;
        while let Ok(msg) = full_rx.recv() {
            super::signals::check()?;
            let (buf, numbers) = msg?;
            write(&buf, &numbers)?;
            bar.inc(numbers.len() as u64);
            // The maker may have stopped (end of input): the buffers are simply dropped then.
            let _ = free_tx.send((buf, numbers));
        }
        super::signals::check()
    })?;
    bar.finish_and_clear();
    Ok(())
}
