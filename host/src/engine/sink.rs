//! Where a run's results go: the [`Sink`] trait, one set of named callbacks per input of a
//! run (begin, each frame's clusters, end or abandon), and [`InputEvents`], what the engine
//! itself tells the one who drives it (the engine's loop under a [`super::session::Session`]):
//! the same callbacks, with each input's statistics or the error that stopped it. The cluster
//! file and the plots are written by the session itself; eta cubes, photon lists and sub-pixel images
//! ([`super::imaging`]), the stream's outputs and a caller's own visitor ([`FnSink`]) are
//! sinks, and [`SinkEvents`] drives any sink the one way every run does.

use super::stats::EngineStats;
use crate::cluster::FrameClusters;
use crate::error::Result;
use crate::finder::ClusterFinder;

/// What the engine tells its driver about a run of several inputs (the loop under
/// [`super::session::Session::find_all`]),
/// input by input, in order: `begin`, then `frame` for each of the input's frames, then
/// `end` with the input's statistics or the error that stopped it (its reading, the finder's,
/// or one of these callbacks').
pub trait InputEvents {
    /// Input `input` begins, before its first frame is asked for (e.g. to reset the
    /// pedestal). An error skips the input: `end` receives it.
    ///
    /// # Errors
    /// Whatever the input cannot start with.
    fn begin(&mut self, finder: &mut dyn ClusterFinder, input: usize) -> Result<()>;

    /// One frame's clusters, named by the frame's number (the source's,
    /// [`FrameClusters::frame`]), in frame order.
    ///
    /// # Errors
    /// Whatever stops the input (`end` then receives it).
    fn frame(&mut self, input: usize, clusters: FrameClusters<'_>) -> Result<()>;

    /// Input `input` ended: its statistics, or the error that stopped it. One input's error
    /// does not stop the run; an error returned here does.
    ///
    /// # Errors
    /// Whatever must stop the whole run.
    fn end(
        &mut self,
        finder: &mut dyn ClusterFinder,
        input: usize,
        result: Result<EngineStats>,
    ) -> Result<()>;
}

/// A [`Sink`] driven the way every run drives one: [`Sink::begin`], [`Sink::frame`] for each
/// frame, then [`Sink::end`] when the input was found whole, else (its reading, the finder,
/// `begin` or `end` failed) [`Sink::abandon`]; each input's outcome (its statistics, or that
/// error) then goes to `done`, whose error stops the run.
pub struct SinkEvents<'a, D> {
    /// The sink.
    pub sink: &'a mut dyn Sink,
    /// Receives `(input, outcome)` once per input.
    pub done: D,
}

impl<D: FnMut(usize, Result<EngineStats>) -> Result<()>> InputEvents for SinkEvents<'_, D> {
    fn begin(&mut self, finder: &mut dyn ClusterFinder, input: usize) -> Result<()> {
        self.sink.begin(input, finder)
    }

    fn frame(&mut self, input: usize, clusters: FrameClusters<'_>) -> Result<()> {
        self.sink.frame(input, &clusters)
    }

    fn end(
        &mut self,
        finder: &mut dyn ClusterFinder,
        input: usize,
        result: Result<EngineStats>,
    ) -> Result<()> {
        let result = result.and_then(|stats| self.sink.end(input, finder).map(|()| stats));
        if result.is_err() {
            self.sink.abandon(input, finder);
        }
        (self.done)(input, result)
    }
}

/// Receives the results of a run, input by input, in order: `begin(k)`, then `frame(k, ..)`
/// for each of input `k`'s frames, then `end(k)` when the input was found whole or
/// `abandon(k)` when it failed.
pub trait Sink {
    /// Input `input` begins, before its first frame is found; `finder` is the run's (a sink
    /// may ask it to accumulate on its device, [`ClusterFinder::accumulate`]).
    ///
    /// # Errors
    /// Whatever the sink cannot start with (the input is then skipped and reported failed).
    fn begin(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        let _ = (input, finder);
        Ok(())
    }

    /// One frame's clusters, named by the frame's number ([`FrameClusters::frame`]: a raw
    /// acquisition's header number, else its index in the input), in frame order. The
    /// clusters are in the frames' own coordinates, those of the pedestal and of per-pixel
    /// maps: for a raw acquisition with a receiver ROI, relative to the ROI's corner
    /// ([`crate::io::FrameSource::origin`]; the session's cluster file and
    /// [`super::run::Session::find`]'s visitor get them in detector coordinates).
    ///
    /// # Errors
    /// Whatever stops the input (it is then abandoned).
    fn frame(&mut self, input: usize, clusters: &FrameClusters<'_>) -> Result<()>;

    /// Input `input` was found whole; `finder` as it is after its last frame.
    ///
    /// # Errors
    /// Whatever the sink cannot finish with (the input is then reported failed).
    fn end(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        let _ = (input, finder);
        Ok(())
    }

    /// Input `input` failed (its reading, the finder, or a sink): drop what it began.
    fn abandon(&mut self, input: usize, finder: &mut dyn ClusterFinder) {
        let _ = (input, finder);
    }

    /// Cores this sink keeps busy beside a CPU finder (e.g. placing photons on the host), on
    /// a machine with `cores` cores: a run that leaves the CPU finder's thread count to the
    /// engine opens it with that many fewer threads (see [`reserve_cores`]). Default: none.
    fn cores_beside_cpu_finder(&self, cores: usize) -> usize {
        let _ = cores;
        0
    }
}

/// The CPU finder's threads when `sink` keeps some cores busy beside it
/// ([`Sink::cores_beside_cpu_finder`]) and the caller gave no count (`threads` is `None`):
/// every core but those, at least one. A count the caller gave is kept as it is.
///
/// Why not simply more threads than cores: the CPU finder's band threads step through the
/// frames together, so one band thread that loses its core to another thread stalls every
/// band at the next frame; on 16 cores, placing photons on 16 more threads made a CPU image
/// take 1.4 to 1.8 times as long as finding alone, for work under a tenth of finding's.
pub fn reserve_cores(threads: Option<usize>, sink: &dyn Sink) -> Option<usize> {
    if threads.is_some() {
        return threads;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match sink.cores_beside_cpu_finder(cores) {
        0 => None,
        k => Some(cores.saturating_sub(k).max(1)),
    }
}

/// A closure `(input, clusters)` as a [`Sink`] that only looks at frames.
pub struct FnSink<F>(pub F);

impl<F: FnMut(usize, &FrameClusters<'_>) -> Result<()>> Sink for FnSink<F> {
    fn frame(&mut self, input: usize, clusters: &FrameClusters<'_>) -> Result<()> {
        (self.0)(input, clusters)
    }
}

/// A sink seen under other input numbers: input `k` of the run is input `numbers[k]` of
/// `sink` (e.g. its index among every input asked for, when some could not be opened and the
/// run has only the others).
pub struct Renumbered<'a> {
    /// The sink.
    pub sink: &'a mut dyn Sink,
    /// Its number of each input of the run.
    pub numbers: Vec<usize>,
}

impl Renumbered<'_> {
    fn number(&self, k: usize) -> usize {
        self.numbers.get(k).copied().unwrap_or(k)
    }
}

impl Sink for Renumbered<'_> {
    fn begin(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        let k = self.number(input);
        self.sink.begin(k, finder)
    }

    fn frame(&mut self, input: usize, clusters: &FrameClusters<'_>) -> Result<()> {
        let k = self.number(input);
        self.sink.frame(k, clusters)
    }

    fn end(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        let k = self.number(input);
        self.sink.end(k, finder)
    }

    fn abandon(&mut self, input: usize, finder: &mut dyn ClusterFinder) {
        let k = self.number(input);
        self.sink.abandon(k, finder)
    }

    fn cores_beside_cpu_finder(&self, cores: usize) -> usize {
        self.sink.cores_beside_cpu_finder(cores)
    }
}

/// Several sinks as one, called in order.
pub struct Sinks<'a>(pub Vec<&'a mut dyn Sink>);

impl Sink for Sinks<'_> {
    fn begin(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        self.0.iter_mut().try_for_each(|s| s.begin(input, finder))
    }

    fn frame(&mut self, input: usize, clusters: &FrameClusters<'_>) -> Result<()> {
        self.0.iter_mut().try_for_each(|s| s.frame(input, clusters))
    }

    fn end(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        self.0.iter_mut().try_for_each(|s| s.end(input, finder))
    }

    fn abandon(&mut self, input: usize, finder: &mut dyn ClusterFinder) {
        for s in &mut self.0 {
            s.abandon(input, finder);
        }
    }

    fn cores_beside_cpu_finder(&self, cores: usize) -> usize {
        self.0
            .iter()
            .map(|s| s.cores_beside_cpu_finder(cores))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that keeps `k` cores busy beside a CPU finder.
    struct Busy(usize);

    impl Sink for Busy {
        fn frame(&mut self, _: usize, _: &FrameClusters<'_>) -> Result<()> {
            Ok(())
        }

        fn cores_beside_cpu_finder(&self, _cores: usize) -> usize {
            self.0
        }
    }

    #[test]
    fn reserved_cores_come_off_a_count_the_engine_chooses_only() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(reserve_cores(None, &Busy(0)), None);
        assert_eq!(
            reserve_cores(None, &Busy(1)),
            Some(cores.saturating_sub(1).max(1))
        );
        // More than every core still leaves the finder one thread.
        assert_eq!(reserve_cores(None, &Busy(cores + 5)), Some(1));
        // A count the caller gave is kept.
        assert_eq!(reserve_cores(Some(3), &Busy(2)), Some(3));
        // Several sinks add up; a renumbered sink says what its sink says.
        let (mut a, mut b) = (Busy(1), Busy(2));
        let both = Sinks(vec![&mut a, &mut b]);
        assert_eq!(both.cores_beside_cpu_finder(cores), 3);
        let mut c = Busy(2);
        let renumbered = Renumbered {
            sink: &mut c,
            numbers: vec![4],
        };
        assert_eq!(renumbered.cores_beside_cpu_finder(cores), 2);
    }
}
