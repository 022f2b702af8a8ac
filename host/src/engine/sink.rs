//! Where a run's results go: the [`Sink`] trait, one set of named callbacks per input of a
//! [`super::run::Session`] (begin, each frame's clusters, end or abandon). The cluster file
//! and the plots are written by the session itself; eta cubes, photon lists and sub-pixel
//! images ([`super::imaging`]) and a caller's own visitor ([`FnSink`]) are sinks.

use crate::cluster::FrameClusters;
use crate::error::Result;
use crate::finder::ClusterFinder;

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

    /// One frame's clusters and the frame's number (a raw acquisition's header number, else
    /// its index in the input), in frame order.
    ///
    /// # Errors
    /// Whatever stops the input (it is then abandoned).
    fn frame(&mut self, input: usize, number: u64, clusters: &FrameClusters<'_>) -> Result<()>;

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
}

/// A closure `(input, frame number, clusters)` as a [`Sink`] that only looks at frames.
pub struct FnSink<F>(pub F);

impl<F: FnMut(usize, u64, &FrameClusters<'_>) -> Result<()>> Sink for FnSink<F> {
    fn frame(&mut self, input: usize, number: u64, clusters: &FrameClusters<'_>) -> Result<()> {
        (self.0)(input, number, clusters)
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

    fn frame(&mut self, input: usize, number: u64, clusters: &FrameClusters<'_>) -> Result<()> {
        let k = self.number(input);
        self.sink.frame(k, number, clusters)
    }

    fn end(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        let k = self.number(input);
        self.sink.end(k, finder)
    }

    fn abandon(&mut self, input: usize, finder: &mut dyn ClusterFinder) {
        let k = self.number(input);
        self.sink.abandon(k, finder)
    }
}

/// Several sinks as one, called in order.
pub struct Sinks<'a>(pub Vec<&'a mut dyn Sink>);

impl Sink for Sinks<'_> {
    fn begin(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        self.0.iter_mut().try_for_each(|s| s.begin(input, finder))
    }

    fn frame(&mut self, input: usize, number: u64, clusters: &FrameClusters<'_>) -> Result<()> {
        self.0
            .iter_mut()
            .try_for_each(|s| s.frame(input, number, clusters))
    }

    fn end(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        self.0.iter_mut().try_for_each(|s| s.end(input, finder))
    }

    fn abandon(&mut self, input: usize, finder: &mut dyn ClusterFinder) {
        for s in &mut self.0 {
            s.abandon(input, finder);
        }
    }
}
