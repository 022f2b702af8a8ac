//! `cluda gen` (module `generate`, as `gen` is a reserved word): writes DIR/pedestal.npy (dark
//! frames) and DIR/data.npy (frames with photons), or the same as raw acquisitions. Every file
//! is written under a temporary name and renamed into place when complete.

use std::path::Path;

use cluda::generate::{GenConfig, Generator};
use cluda::io::raw::{DetectorType, RawWriter, RawWriterConfig};
use cluda::io::{NpyWriter, check_output};
use cluda::{Error, Result};

use super::args::GenArgs;
use super::find::{note_unwritten, print_line};
use super::inputs::{Generated, Input, check_dims, chunk_frames};
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

/// Hands `input` to `write` a chunk of frames (and their numbers) at a time.
fn stream(
    input: &mut Input<'_>,
    mut write: impl FnMut(&[u16], &[u64]) -> Result<()>,
) -> Result<()> {
    let (r, c) = (input.frames.rows(), input.frames.cols());
    let bar = frames_bar(input.len, "writing");
    let (mut buf, mut numbers) = (Vec::new(), Vec::new());
    loop {
        super::signals::check()?;
        buf.clear();
        numbers.clear();
        let k = input
            .frames
            .read_frames(chunk_frames(r, c), &mut buf, &mut numbers)?;
        if k == 0 {
            break;
        }
        write(&buf, &numbers)?;
        bar.inc(k as u64);
    }
    bar.finish_and_clear();
    Ok(())
}
