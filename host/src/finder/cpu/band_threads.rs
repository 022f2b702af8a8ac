//! Several threads over one call: one band of rows per thread for the whole call, in step
//! frame by frame through a few atomic counters, instead of a fork-join per frame.
//!
//! The last band runs on the calling thread, which also calls the visitor (it need not be
//! `Send`); the other bands run on the pool's workers, each a loop over all frames. Per frame
//! `g`:
//! - a band copies its halo rows (the `r` rows above and below it, owned by its neighbours)
//!   from the neighbours' *edge snapshots* of frame `g`: the neighbours' edge rows as they were
//!   after frame `g - 1`, written by them at the end of that frame (before the call: from the
//!   maps). So every band updates its own rows in place without waiting for a neighbour.
//! - a worker band starts frame `g` only once the caller has visited frame `g - 1`
//!   (`visited >= g`), and signals the end of it with `done = g + 1` after handing over its
//!   records. The caller runs the last band of frame `g`, waits for every `done >= g + 1`,
//!   appends the other workers' records and then its own to the first band's records (band
//!   order = row order), visits, and sets `visited = g + 1`. Appending its own records (in its
//!   cache) instead of copying a worker's (in the other core's cache) keeps the part of a frame
//!   that no band overlaps short: the cross-core copy cost ~10 us per 3x3 frame.
//!
//! Hence no band is ever more than one frame ahead of another, the snapshots need two slots
//! (frame `g` reads slot `g % 2`, its end writes slot `(g + 1) % 2`, which nobody reads until
//! every band has finished frame `g`), and when the visitor fails after frame `g` no band has
//! started frame `g + 1`: the pedestal holds exactly the frames up to `g`, as with one thread.
//! The slots and record buffers sit behind mutexes that the protocol keeps uncontended.
//!
//! Waiting spins briefly, then yields; a band that panics (or a visitor that fails or panics)
//! raises `abort`, which ends every wait, so the scope always ends and a panic propagates.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::Job;
use super::band::{Band, BandMaps};
use super::dispatch::band_pass_split;
use super::lanes::Unit;
use crate::cluster::FrameClusters;
use crate::error::Result;
use crate::pedestal::PixelMaps;

/// Spins before a waiting band starts yielding its core (a band pass takes far longer).
const SPINS: u32 = 1 << 12;

/// Everything the bands share while a call runs.
struct Shared<R> {
    /// Frames the caller has visited (worker bands may start frame `visited`).
    visited: AtomicUsize,
    /// Per band: frames finished (records handed over, edge snapshots written).
    done: Vec<AtomicUsize>,
    /// Set when a band panics or the visitor fails: every wait gives up.
    abort: AtomicBool,
    /// Per band, two slots: its first `r` rows of `a` (the halo below its upper neighbour).
    top: Vec<[Mutex<Vec<R>>; 2]>,
    /// Per band, two slots: its last `r` rows of `a` (the halo above its lower neighbour).
    bottom: Vec<[Mutex<Vec<R>>; 2]>,
    /// Per worker band: the records of its last finished frame (the first band's buffer comes
    /// back holding the whole frame's records, once visited).
    out: Vec<Mutex<Vec<u32>>>,
}

/// Waits until `counter >= target`; `false` if the call was aborted meanwhile.
fn wait(counter: &AtomicUsize, target: usize, abort: &AtomicBool) -> bool {
    let mut spins = 0;
    loop {
        if counter.load(Ordering::Acquire) >= target {
            return true;
        }
        if abort.load(Ordering::Acquire) {
            return false;
        }
        if spins < SPINS {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Raises `abort` when dropped unless disarmed: covers panics and early returns.
struct AbortOnDrop<'a>(&'a AtomicBool, bool);

impl Drop for AbortOnDrop<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.store(true, Ordering::Release);
        }
    }
}

/// Locks a slot; a poisoned one (a band panicked holding it) still holds plain numbers, and
/// the panic ends the call anyway.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs every frame of `job` over `n` bands of `band_rows` rows (the last one possibly fewer;
/// `n >= 2`, `band_rows >= r`), the last band on the calling thread and one worker of `pool`
/// per other band.
pub(super) fn run_bands<R: Unit, const S: usize>(
    pool: &rayon::ThreadPool,
    job: &Job<'_, R>,
    n: usize,
    band_rows: usize,
    maps: &mut PixelMaps<R>,
    visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
) -> Result<()> {
    let r = S / 2;
    let (rows, cols) = (job.setup.rows, job.setup.cols);
    let span = |k: usize| (k * band_rows, ((k + 1) * band_rows).min(rows));
    let bands: Vec<(usize, usize)> = (0..n).map(span).collect();
    let edge = |m: &PixelMaps<R>, y: usize| m.a[y * cols..(y + r) * cols].to_vec();
    let shared = Shared {
        visited: AtomicUsize::new(0),
        done: (0..n).map(|_| AtomicUsize::new(0)).collect(),
        abort: AtomicBool::new(false),
        top: bands
            .iter()
            .map(|&(y0, y1)| {
                let v = maps.a[y0 * cols..(y0 + r.min(y1 - y0)) * cols].to_vec();
                [Mutex::new(v.clone()), Mutex::new(v)]
            })
            .collect(),
        bottom: bands
            .iter()
            .map(|&(y0, y1)| {
                // Only read for bands with a lower neighbour (at least `r` rows).
                let v = if y1 - y0 >= r {
                    edge(maps, y1 - r)
                } else {
                    Vec::new()
                };
                [Mutex::new(v.clone()), Mutex::new(v)]
            })
            .collect(),
        out: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
    };
    let (base, inv) = (&maps.base[..], maps.inv);
    // Each band's own rows of `a` and `b`.
    let mut own: Vec<BandMaps<'_, R>> = Vec::with_capacity(n);
    let (mut a, mut b) = (&mut maps.a[..], &mut maps.b[..]);
    for &(y0, y1) in &bands {
        let len = (y1 - y0) * cols;
        let (a0, a1) = std::mem::take(&mut a).split_at_mut(len);
        let (b0, b1) = std::mem::take(&mut b).split_at_mut(len);
        (a, b) = (a1, b1);
        own.push(BandMaps {
            a: a0,
            b: b0,
            base,
            inv,
        });
    }
    let own_last = own.pop().expect("one map per band");
    let shared = &shared;
    pool.in_place_scope(|scope| {
        for (k, maps) in own.into_iter().enumerate() {
            let (y0, y1) = bands[k];
            scope.spawn(move |_| {
                let mut band = Band::new::<S>(y0, y1, job.setup);
                worker::<R, S>(k, job, &mut band, maps, shared)
            });
        }
        let (y0, y1) = bands[n - 1];
        let mut band = Band::new::<S>(y0, y1, job.setup);
        caller::<R, S>(job, &mut band, own_last, shared, visit)
    })
}

/// Copies band `k`'s halo for frame `g` from its neighbours' snapshots.
fn take_halo<R: Unit>(k: usize, g: usize, band: &mut Band<R>, shared: &Shared<R>) {
    band.halo_top.clear();
    if k > 0 {
        band.halo_top
            .extend_from_slice(&lock(&shared.bottom[k - 1][g % 2]));
    }
    band.halo_bottom.clear();
    if k + 1 < shared.done.len() {
        band.halo_bottom
            .extend_from_slice(&lock(&shared.top[k + 1][g % 2]));
    }
}

/// Writes band `k`'s edge rows after frame `g` into the snapshot slots of frame `g + 1`.
fn put_edges<R: Unit, const S: usize>(
    k: usize,
    g: usize,
    band: &Band<R>,
    maps: &BandMaps<'_, R>,
    cols: usize,
    shared: &Shared<R>,
) {
    let r = S / 2;
    let rows = band.y1 - band.y0;
    if k > 0 {
        let mut slot = lock(&shared.top[k][(g + 1) % 2]);
        slot.clear();
        slot.extend_from_slice(&maps.a[..r.min(rows) * cols]);
    }
    if k + 1 < shared.done.len() {
        let mut slot = lock(&shared.bottom[k][(g + 1) % 2]);
        slot.clear();
        slot.extend_from_slice(&maps.a[(rows - r) * cols..rows * cols]);
    }
}

/// Band `k < n - 1`: every frame, in step with the caller.
fn worker<R: Unit, const S: usize>(
    k: usize,
    job: &Job<'_, R>,
    band: &mut Band<R>,
    mut maps: BandMaps<'_, R>,
    shared: &Shared<R>,
) {
    let mut guard = AbortOnDrop(&shared.abort, true);
    for g in 0..job.frames.len() {
        if !wait(&shared.visited, g, &shared.abort) {
            break;
        }
        take_halo(k, g, band, shared);
        let frame = job.frames.frame(g);
        band_pass_split::<R, S>(job.isa, job.setup, band, job.frozen_t, frame, &mut maps);
        put_edges::<R, S>(k, g, band, &maps, job.setup.cols, shared);
        std::mem::swap(&mut *lock(&shared.out[k]), &mut band.out);
        shared.done[k].store(g + 1, Ordering::Release);
    }
    guard.1 = false;
}

/// The last band and the visitor, on the calling thread.
fn caller<R: Unit, const S: usize>(
    job: &Job<'_, R>,
    band: &mut Band<R>,
    mut maps: BandMaps<'_, R>,
    shared: &Shared<R>,
    visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
) -> Result<()> {
    let mut guard = AbortOnDrop(&shared.abort, true);
    let last = shared.done.len() - 1;
    for g in 0..job.frames.len() {
        take_halo(last, g, band, shared);
        let frame = job.frames.frame(g);
        band_pass_split::<R, S>(job.isa, job.setup, band, job.frozen_t, frame, &mut maps);
        put_edges::<R, S>(last, g, band, &maps, job.setup.cols, shared);
        for k in 0..last {
            if !wait(&shared.done[k], g + 1, &shared.abort) {
                // A worker panicked: the scope propagates its panic.
                return Ok(());
            }
        }
        let mut words = std::mem::take(&mut *lock(&shared.out[0]));
        for k in 1..last {
            words.extend_from_slice(&lock(&shared.out[k]));
        }
        words.extend_from_slice(&band.out);
        let visited = visit(FrameClusters::new(job.frames.number(g), job.size, &words));
        // The buffer goes back to the first band (its next frame's records).
        *lock(&shared.out[0]) = words;
        visited?;
        shared.visited.store(g + 1, Ordering::Release);
    }
    guard.1 = false;
    Ok(())
}

#[cfg(test)]
mod tests {

    use crate::{ClusterFinder, ClusterSize, CpuFinder, Error, FinderConfig, Frames, Precision};

    fn finder(
        threads: usize,
        size: ClusterSize,
        dark: &[u16],
        rows: usize,
        cols: usize,
    ) -> CpuFinder {
        let config = FinderConfig::new(rows, cols)
            .size(size)
            .pedestal_frames(8)
            .precision(Precision::F64);
        let mut f = CpuFinder::with_threads(config, threads).expect("finder");
        f.push_pedestal(Frames::new(dark, 8, rows, cols).expect("frames"))
            .expect("pedestal");
        f
    }

    /// A visitor failing at frame `k` leaves the pedestal of exactly frames `0..=k`, whatever
    /// the thread count (no band runs ahead into frame `k + 1`).
    #[test]
    fn failing_visitor_leaves_exactly_the_visited_frames() {
        let (rows, cols) = (41, 37);
        let (dark, data) = crate::testing::generated(rows, cols, 5, 8, 6);
        for size in [ClusterSize::S3, ClusterSize::S9] {
            for threads in [2, 3, 4] {
                for k in [0, 3, 5] {
                    let mut a = finder(threads, size, &dark, rows, cols);
                    let mut seen = Vec::new();
                    let e = a.find_each(
                        Frames::new(&data, 6, rows, cols).expect("frames"),
                        &mut |fc| {
                            let frame = fc.frame.get() as usize;
                            seen.push(frame);
                            if frame == k {
                                Err(Error::param("visitor", "stop"))
                            } else {
                                Ok(())
                            }
                        },
                    );
                    assert!(e.is_err());
                    assert_eq!(seen, (0..=k).collect::<Vec<_>>());
                    let mut b = finder(1, size, &dark, rows, cols);
                    b.find(
                        Frames::new(&data[..(k + 1) * rows * cols], k + 1, rows, cols)
                            .expect("frames"),
                    )
                    .expect("find");
                    assert!(
                        a.pedestal().expect("pedestal") == b.pedestal().expect("pedestal"),
                        "{size} {threads} threads, stop at {k}"
                    );
                }
            }
        }
    }

    /// A panicking visitor ends the call with its panic (the bands stop instead of waiting).
    #[test]
    fn panicking_visitor_does_not_hang() {
        let (rows, cols) = (20, 16);
        let (dark, data) = crate::testing::generated(rows, cols, 6, 8, 4);
        let mut f = finder(2, ClusterSize::S3, &dark, rows, cols);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f.find_each(
                Frames::new(&data, 4, rows, cols).expect("frames"),
                &mut |fc| {
                    assert!(fc.frame.get() < 2, "visitor panics at frame 2");
                    Ok(())
                },
            )
        }));
        assert!(r.is_err());
    }
}
