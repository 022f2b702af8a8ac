//! Live plots of a stream: the current acquisition's spectrum and hit map, refreshed every
//! period and when it ends, and with `--eta` its sub-pixel image, drawn on a thread of their
//! own into a plot directory (`cluda stream --plot`), each PNG renamed into place so a viewer
//! never sees half a file. Warnings (a plot not drawn) go to the caller's reporter: the stream
//! goes on.

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::SyncSender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::acquisition::ImageUpdate;
use crate::error::{Error, Result};
use crate::plot::{Histogram, PlotAccumulator, map_png, spectrum_png};

/// Where the live plots' warnings go (e.g. stderr), from the drawer's thread too.
pub type Warn = Arc<dyn Fn(&str) + Send + Sync>;

/// What one refresh of the plots draws: a snapshot of the accumulator.
struct Snapshot {
    spectrum: Histogram,
    hits: Vec<f64>,
    rows: usize,
    cols: usize,
    frames: u64,
}

/// What the drawer thread draws.
enum Drawing {
    /// `spectrum.png` and `hitmap.png`.
    Plots(Snapshot),
    /// `image.png`: a copy of the acquisition's sub-pixel image (`--eta`).
    Image(crate::interpolation::SubpixelImage),
}

/// Spectrum and hit map of the current acquisition, refreshed every `every` seconds and when
/// it ends, and with `--eta` its sub-pixel image, copied as often by the library
/// ([`super::LiveImage`]) and drawn as it comes. Drawing happens on a thread of its
/// own from a snapshot, so the finder is never held up by it (a refresh is skipped while the
/// drawer is still busy with the last ones); each PNG is written under a temporary name and
/// renamed, so a viewer never sees half a file.
pub struct LivePlots {
    every: Duration,
    acc: Option<PlotAccumulator>,
    shape: (usize, usize),
    last: Instant,
    tx: Option<SyncSender<Drawing>>,
    drawer: Option<JoinHandle<()>>,
}

impl LivePlots {
    /// Starts the drawer thread for `dir`, refreshing every `every`; `overwrite`: plot files
    /// there that this run did not write may be replaced; `warn` receives what could not be
    /// drawn (without a thread, plots are off and `warn` says so).
    pub fn new(dir: &Path, every: Duration, overwrite: bool, warn: Warn) -> Self {
        // Room for one of each: a refresh of the plots and an image copy that come close
        // together are both drawn.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Drawing>(2);
        let dir = dir.to_path_buf();
        let w = Arc::clone(&warn);
        let drawer = std::thread::Builder::new()
            .name("cluda-plots".into())
            .spawn(move || {
                let mut owned = Owned::new();
                while let Ok(d) = rx.recv() {
                    match d {
                        Drawing::Plots(s) => draw(&dir, &s, overwrite, &mut owned, &*w),
                        Drawing::Image(img) => draw_image(&dir, &img, overwrite, &mut owned, &*w),
                    }
                }
            })
            .map_err(|e| warn(&format!("no plot thread ({e}); plots are off")))
            .ok();
        Self {
            every,
            acc: None,
            shape: (0, 0),
            last: Instant::now(),
            tx: drawer.as_ref().map(|_| tx),
            drawer,
        }
    }

    /// One frame of `shape` (a new shape starts a new accumulation): counted, and the plots
    /// refreshed when the period is up (skipped while the drawer is busy).
    pub fn add(&mut self, shape: (usize, usize), fc: &crate::FrameClusters<'_>) {
        if self.acc.is_none() || self.shape != shape {
            self.acc = Some(PlotAccumulator::new(shape.0, shape.1));
            self.shape = shape;
            self.last = Instant::now();
        }
        if let Some(a) = self.acc.as_mut() {
            a.add(fc);
        }
        if self.last.elapsed() >= self.every {
            self.last = Instant::now();
            if let (Some(tx), Some(s)) = (&self.tx, self.snapshot()) {
                // Busy drawing the last ones: this refresh is skipped.
                let _ = tx.try_send(Drawing::Plots(s));
            }
        }
    }

    /// A copy of the acquisition's sub-pixel image: drawn unless the drawer is busy; the
    /// final one always (waiting for the drawer), before the acquisition's final plots.
    pub fn image(&mut self, u: ImageUpdate) {
        if let Some(tx) = &self.tx {
            if u.done {
                let _ = tx.send(Drawing::Image(u.image));
            } else {
                let _ = tx.try_send(Drawing::Image(u.image));
            }
        }
    }

    /// The acquisition ended: its final plots are drawn (waiting for the drawer).
    pub fn finish(&mut self) {
        if let (Some(tx), Some(s)) = (&self.tx, self.snapshot()) {
            let _ = tx.send(Drawing::Plots(s));
        }
        self.acc = None;
    }

    fn snapshot(&self) -> Option<Snapshot> {
        let acc = self.acc.as_ref()?;
        Some(Snapshot {
            spectrum: acc.spectrum(),
            hits: acc.hits().iter().map(|&h| h as f64).collect(),
            rows: self.shape.0,
            cols: self.shape.1,
            frames: acc.frames(),
        })
    }
}

impl Drop for LivePlots {
    fn drop(&mut self) {
        // Closing the channel ends the drawer once it has drawn what it holds.
        self.tx = None;
        if let Some(d) = self.drawer.take() {
            let _ = d.join();
        }
    }
}

/// Draws one PNG at a path.
type Draw<'a> = dyn Fn(&Path) -> Result<()> + 'a;

/// The files the live plots write into the plot directory.
pub const LIVE_PLOTS: [&str; 2] = ["spectrum.png", "hitmap.png"];

/// The live sub-pixel image's file in the plot directory (`--eta`).
pub const LIVE_IMAGE: &str = "image.png";

/// The plot files this run put in place, by name, with the (device, inode) each got: a
/// refresh replaces its own file of this run, never one another program put there.
type Owned = std::collections::HashMap<&'static str, (u64, u64)>;

/// Draws `spectrum.png` and `hitmap.png` of a snapshot into `dir`, each under a temporary name
/// renamed into place ([`place`]); a failure is a warning (the stream goes on).
fn draw(dir: &Path, s: &Snapshot, overwrite: bool, owned: &mut Owned, warn: &dyn Fn(&str)) {
    let title = format!("Cluster sums: {} frames so far", s.frames);
    let draws: [(&str, Box<Draw<'_>>); 2] = [
        (
            "spectrum.png",
            Box::new(|p: &Path| spectrum_png(p, &s.spectrum, &title, false)),
        ),
        (
            "hitmap.png",
            Box::new(|p: &Path| {
                map_png(
                    p,
                    s.rows,
                    s.cols,
                    &s.hits,
                    "Hit map (cluster centres per pixel)",
                    "clusters",
                )
            }),
        ),
    ];
    for (name, draw) in draws {
        let done = dir.join(name);
        if let Err(e) = place(dir, name, &*draw, overwrite, owned) {
            warn(&format!("plot {} not drawn: {e}", done.display()));
        }
    }
}

/// Draws `image.png` of a copy of the sub-pixel image into `dir` as `cluda image --plot` draws
/// it ([`crate::plot::subpixel_png`]: binned to at most 2048 bins a side), renamed into place
/// ([`place`]); a failure is a warning (the stream goes on).
fn draw_image(
    dir: &Path,
    image: &crate::interpolation::SubpixelImage,
    overwrite: bool,
    owned: &mut Owned,
    warn: &dyn Fn(&str),
) {
    // subpixel_png puts its own temporary file over `place`'s, which is then renamed into
    // place by `place`'s rules.
    let draw = |p: &Path| crate::plot::subpixel_png(p, image, true);
    if let Err(e) = place(dir, LIVE_IMAGE, &draw, overwrite, owned) {
        warn(&format!(
            "plot {} not drawn: {e}",
            dir.join(LIVE_IMAGE).display()
        ));
    }
}

/// Draws `dir/name` under a fresh temporary name (removed on an error) and renames it into
/// place: over the file there only with `overwrite` or when it is this run's own (`owned`),
/// else by a rename that refuses an existing name, so a file another program put there is
/// never replaced.
fn place(
    dir: &Path,
    name: &'static str,
    draw: &Draw<'_>,
    overwrite: bool,
    owned: &mut Owned,
) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let done = dir.join(name);
    let prefix = format!(".{name}.{}.", std::process::id());
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp.png");
    // A plot gets the mode any new file gets (0o666 less the umask), not a temporary file's.
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let tmp = builder.tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
    draw(tmp.path())?;
    let m = std::fs::symlink_metadata(tmp.path()).map_err(|e| Error::io(tmp.path(), e))?;
    let id = (m.dev(), m.ino());
    let ours = owned
        .get(name)
        .is_some_and(|&o| std::fs::symlink_metadata(&done).is_ok_and(|m| (m.dev(), m.ino()) == o));
    if overwrite || ours {
        tmp.persist(&done).map_err(|e| Error::io(&done, e.error))?;
    } else {
        tmp.persist_noclobber(&done).map_err(|e| match e.error.kind() {
            std::io::ErrorKind::AlreadyExists => Error::param(
                "plot",
                format!(
                    "{} exists and was not written by this run; it is not replaced unless you allow it (--overwrite)",
                    done.display()
                ),
            ),
            _ => Error::io(&done, e.error),
        })?;
    }
    owned.insert(name, id);
    Ok(())
}
