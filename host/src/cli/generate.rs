//! `cluda gen` (module `generate`, as `gen` is a reserved word): writes DIR/pedestal.npy (dark
//! frames) and DIR/data.npy (frames with photons), or the same as raw acquisitions. The whole
//! set is written into a staging directory inside DIR and moved into place when complete
//! ([`StagedSet`]), so an interrupted run leaves nothing and two runs never mix their files.

use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;

use cluda::generate::{GenConfig, Generator, TruePhoton};
use cluda::io::npy::RecordWriter;
use cluda::io::raw::{DetectorType, RawWriter, RawWriterConfig, Roi};
use cluda::io::staged::refuse_older;
use cluda::io::{NpyWriter, StagedSet, check_output};
use cluda::{Error, Result};

use super::args::GenArgs;
use cluda::engine::EngineConfig;
use cluda::engine::input::Input;

use super::inputs::check_dims;
use super::output::{note_unwritten, print_line};
use super::progress::frames_bar;
use cluda::generate::Generated;

/// Runs `cluda gen`: the whole set (pedestal and data) is written into a staging directory
/// inside DIR and moved into place when complete ([`StagedSet`]); an older set of the same
/// names is refused unless `--overwrite`, and then replaced whole (a raw acquisition's extra
/// data files removed).
pub fn run(args: &GenArgs) -> Result<()> {
    check_dims(args.rows, args.cols, args.frames.max(args.pedestal_frames))?;
    if let Some(r) = args.roi
        && !r.fits(args.rows, args.cols)
    {
        return Err(Error::param(
            "roi",
            format!(
                "{r} (XMIN, XMAX, YMIN, YMAX) does not lie inside the {} x {} frames (columns \
                 0..={}, rows 0..={})",
                args.rows,
                args.cols,
                args.cols - 1,
                args.rows - 1
            ),
        ));
    }
    if args.pedestal_frames == 0 {
        return Err(Error::param(
            "pedestal-frames",
            "must be at least 1 (the pedestal needs dark frames)",
        ));
    }
    if let Ok(m) = std::fs::metadata(&args.out)
        && !m.is_dir()
    {
        return Err(Error::param(
            "out",
            format!("{} exists and is not a directory", args.out.display()),
        ));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Error::param("out", format!("cannot create {}: {e}", args.out.display())))?;
    for name in NAMES {
        let file = if args.raw {
            format!("{name}_master_0.json")
        } else {
            format!("{name}.npy")
        };
        check_output(&args.out.join(file), "out", &[])?;
    }
    if args.truth {
        check_output(&args.out.join(TRUTH), "out", &[])?;
    }
    let raw = args.raw;
    let older = move |dir: &Path| older_set(dir, raw);
    // Refused before any work; checked again when the set is moved into place.
    refuse_older(&older(&args.out)?, "out", args.overwrite)?;
    let stage = StagedSet::create(&args.out)?;
    let mut config = GenConfig::new(args.rows, args.cols, args.seed);
    config.illumination = args.illumination;
    if let Some(adu) = args.photon_adu {
        config.photon_adu = adu;
    }
    if let Some(n) = args.photons {
        config.photons_per_frame = n;
    }
    let generator = Generator::with_cancel(config, &super::signals::check)?;
    let p = args.pedestal_frames;
    let dark = Generated::new(&generator, 0, p, false)
        .with_cancel(&super::signals::check)
        .input("pedestal");
    let data = Generated::new(&generator, p as u64, args.frames, true)
        .with_cancel(&super::signals::check)
        .input("data");
    let mut lines = Vec::new();
    for (name, mut input) in [(NAMES[0], dark), (NAMES[1], data)] {
        if args.raw {
            let master = args.out.join(format!("{name}_master_0.json"));
            let how = RawHow {
                roi: args.roi,
                version: args.raw_version.unwrap_or(7.2),
                ports: args.interfaces.unwrap_or(1) as usize,
            };
            lines.push(note_unwritten(
                &master,
                write_raw(stage.path(), name, &mut input, how),
            )?);
        } else {
            let file = format!("{name}.npy");
            lines.push(note_unwritten(
                &args.out.join(&file),
                write_npy(&stage.path().join(&file), &mut input),
            )?);
        }
    }
    if args.truth {
        // Frame numbers as `find` gives them: the index in data.npy, the raw frame number
        // (written from 1) in a raw acquisition.
        let number_from = i64::from(args.raw);
        lines.push(note_unwritten(
            &args.out.join(TRUTH),
            write_truth(
                &stage.path().join(TRUTH),
                &generator,
                p as u64,
                args.frames,
                number_from,
            ),
        )?);
    }
    stage.commit("out", args.overwrite, &older)?;
    for (file, what) in lines {
        print_line(&format!("wrote {} ({what})", args.out.join(file).display()))?;
    }
    Ok(())
}

/// The two parts of a generated set.
const NAMES: [&str; 2] = ["pedestal", "data"];

/// The photons of the data frames (`--truth`).
const TRUTH: &str = "truth.npy";

/// The files of a set `gen` writes that are in `dir` now: `pedestal.npy` and `data.npy`, or
/// (raw) the master files and every data file `<name>_d<M>_f<K>_0.raw` of the two
/// acquisitions, including files of an older, longer acquisition the new one does not
/// replace (they would be read as its continuation).
fn older_set(dir: &Path, raw: bool) -> Result<Vec<PathBuf>> {
    let truth = Some(dir.join(TRUTH)).filter(|p| std::fs::symlink_metadata(p).is_ok());
    if !raw {
        return Ok(NAMES
            .iter()
            .map(|n| dir.join(format!("{n}.npy")))
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .chain(truth)
            .collect());
    }
    let mut found: Vec<PathBuf> = truth.into_iter().collect();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if NAMES
            .iter()
            .any(|n| cluda::io::raw::naming::is_file_of(name, n, 0))
        {
            found.push(entry.path());
        }
    }
    // Master files first: the error names them.
    found.sort_by_key(|p| (p.extension().is_none_or(|x| x != "json"), p.clone()));
    Ok(found)
}

/// Streams `input` into a 3-D uint16 `.npy` file; returns its name and what it holds, for
/// the report.
fn write_npy(path: &Path, input: &mut Input<'_>) -> Result<(String, String)> {
    let (f, r, c) = (input.len as usize, input.frames.rows(), input.frames.cols());
    let mut w = NpyWriter::<u16>::create(path, &[f, r, c])?;
    stream(input, |buf, _| w.write(buf))?;
    w.finish()?;
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    Ok((name, format!("{f} x {r} x {c} uint16")))
}

/// Writes the photons of generator frames `first .. first + count` to `path` (`truth.npy`),
/// numbered from `number_from`: the frames are made again, a chunk at a time in parallel,
/// since only a frame's making knows its photons (so `--truth` about doubles the time `gen`
/// takes). Returns the file's name and what it holds, for the report.
fn write_truth(
    path: &Path,
    generator: &Generator,
    first: u64,
    count: usize,
    number_from: i64,
) -> Result<(String, String)> {
    use rayon::prelude::*;
    let c = generator.config();
    let chunk = EngineConfig::for_frames(c.rows, c.cols).chunk.max(1);
    let mut w = RecordWriter::<TruePhoton>::create(path, cluda::io::atomic::Claim::Refuse)?;
    let bar = frames_bar(count as u64, "truth");
    let mut done = 0usize;
    while done < count {
        super::signals::check()?;
        let n = chunk.min(count - done);
        let frames: Vec<Vec<TruePhoton>> = (done..done + n)
            .into_par_iter()
            .map(|i| {
                let mut scratch = vec![0u16; c.rows * c.cols];
                let mut truth = Vec::new();
                generator.frame_with_truth(first + i as u64, true, &mut scratch, &mut truth);
                for p in &mut truth {
                    p.frame = i as i64 + number_from;
                }
                truth
            })
            .collect();
        for f in &frames {
            w.write_pod(f)?;
        }
        done += n;
        bar.inc(n as u64);
    }
    bar.finish_and_clear();
    let rows = w.rows();
    let written = w.finish()?;
    let name = written
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    Ok((name, format!("{rows} photons: frame, x, y, energy")))
}

/// How `gen --raw` writes an acquisition: the receiver ROI, the master format version and
/// the UDP ports (`--interfaces`) each frame is split over.
#[derive(Clone, Copy, Debug)]
struct RawHow {
    roi: Option<Roi>,
    version: f64,
    ports: usize,
}

/// Streams `input` into the raw acquisition `DIR/<base>_master_<0>.json` (image-ordered
/// frames, frame numbers from 1, 10000 frames per data file); returns the master's name and
/// what it holds, for the report. Frames
/// of 400 rows are written as MOENCH 03; other shapes, which no MOENCH has, as a generic
/// detector type (the master file's "Detector Type" selects the pixel order). With an ROI,
/// each frame is cropped to it as the receiver crops it; with several ports, each frame is
/// split into bands of rows, one set of data files per port.
fn write_raw(
    dir: &Path,
    base: &str,
    input: &mut Input<'_>,
    how: RawHow,
) -> Result<(String, String)> {
    let (f, r, c) = (input.len, input.frames.rows(), input.frames.cols());
    let config = RawWriterConfig {
        rows: r,
        cols: c,
        detector: if r == 400 {
            DetectorType::Moench03
        } else {
            DetectorType::Generic16
        },
        version: how.version,
        ..RawWriterConfig::moench03()
    };
    let mut w = RawWriter::create(dir, base, 0, config)?
        .ports(how.ports)?
        .roi(how.roi)?;
    let px = r * c;
    let mut cropped = how
        .roi
        .map(|roi| (roi, vec![0u16; roi.rows() * roi.cols()]));
    stream(input, |buf, numbers| {
        for (frame, &n) in buf.chunks_exact(px).zip(numbers) {
            match &mut cropped {
                Some((roi, out)) => {
                    roi.crop(frame, c, out)?;
                    w.write_frame(n + 1, out)?;
                }
                None => w.write_frame(n + 1, frame)?,
            }
        }
        Ok(())
    })?;
    let master = w.finish(None)?;
    let name = master
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let roi = how.roi.map_or_else(String::new, |roi| {
        format!(
            ", receiver ROI {roi}: {} x {} stored",
            roi.rows(),
            roi.cols()
        )
    });
    let ports = if how.ports > 1 {
        format!(
            ", {} ports of {} x {c} (_d0_ .. _d{}_)",
            how.ports,
            r / how.ports,
            how.ports - 1
        )
    } else {
        String::new()
    };
    Ok((
        name,
        format!("{f} frames of {r} x {c} uint16, raw{roi}{ports}"),
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
