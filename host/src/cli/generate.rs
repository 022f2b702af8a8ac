//! `cluda gen` (module `generate`, as `gen` is a reserved word): writes DIR/pedestal.npy (dark frames) and DIR/data.npy (frames with photons).

use std::path::Path;

use cluda::generate::{GenConfig, Generator};
use cluda::io::NpyWriter;
use cluda::{Error, Result};

use super::args::GenArgs;
use super::find::print_line;
use super::progress::frames_bar;
use super::source::{FrameSource, Generated, check_dims, chunk_frames};

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
    let generator = Generator::new(GenConfig::new(args.rows, args.cols, args.seed))?;
    let p = args.pedestal_frames;
    let mut dark = Generated::new("pedestal", &generator, 0, p, false);
    write_source(&args.out.join("pedestal.npy"), &mut dark)?;
    let mut data = Generated::new("data", &generator, p as u64, args.frames, true);
    write_source(&args.out.join("data.npy"), &mut data)?;
    Ok(())
}

/// Streams `source` into a 3-D uint16 `.npy` file and reports it on stdout.
fn write_source(path: &Path, source: &mut dyn FrameSource) -> Result<()> {
    let (f, r, c) = (source.len(), source.rows(), source.cols());
    let mut w = NpyWriter::<u16>::create(path, &[f, r, c])?;
    let bar = frames_bar(f as u64, "writing");
    let mut buf = Vec::new();
    loop {
        let k = source.read_into(chunk_frames(r, c), &mut buf)?;
        if k == 0 {
            break;
        }
        w.write(&buf)?;
        bar.inc(k as u64);
    }
    w.finish()?;
    bar.finish_and_clear();
    print_line(&format!(
        "wrote {} ({f} x {r} x {c} uint16)",
        path.display()
    ))
}
