//! How the engine feeds a finder: the engine's side of a [`ClusterFinder`], apart from the
//! algorithm ([`FedFinder`]), and opening a finder to feed ([`open_finder`]).
//!
//! A finder finds clusters in the frames it is handed; how those frames reach it is the
//! engine's business: the memory its ring slots are ([`FedFinder::frame_store`]), whether a
//! mapped file's chunks are page-locked in place ([`FedFinder::host_pinner`]), whether a file
//! is mapped or read ([`FedFinder::prefers_mapped_input`]), how many threads read it
//! ([`FedFinder::read_threads`]), what is allocated before the first chunk
//! ([`FedFinder::reserve`]), and how the ring's chunks are pulled
//! ([`FedFinder::find_feed`]). The answers differ between a finder that computes on the
//! host's cores (the CPU finder: plain memory, mapped files, few readers) and one that
//! computes elsewhere (the GPU finder: page-locked slots, read files, every core reading).

use std::sync::Arc;

use crate::cluster::FrameClusters;
use crate::config::FinderConfig;
use crate::error::{Error, Result};
use crate::finder::feed::{FrameFeed, FrameStore, each_chunk};
#[cfg(feature = "gpu")]
use crate::finder::gpu::{GpuFinder, PinnedFrames};
use crate::finder::select::DeviceChoice;
use crate::finder::{ClusterFinder, CpuFinder};
use crate::io::readahead::read_threads;

/// Read threads for a finder that computes on the host's own cores (the CPU finder): 2. It
/// is about 20 times slower than reading, so two threads keep it fed, and every further one
/// takes a core its band threads need (on the H200's 16 cores, 16 read threads slowed the
/// 3x3 CPU run from 99 to 145 us/frame).
pub const HOST_FINDER_READ_THREADS: usize = 2;

/// Page-locks `bytes` bytes at a pointer until the returned guard is dropped; `None` when the
/// driver refuses (e.g. a page of them is locked already: a GPU finder then stages that
/// memory). The memory must stay mapped while the guard lives.
pub type HostPinner = Arc<dyn Fn(*const u8, usize) -> Option<Box<dyn Send>> + Send + Sync>;

/// A [`ClusterFinder`] as the streaming engine feeds it (see the module docs). Every
/// method has the default of a finder that computes on the host; a finder whose device
/// reads host memory on its own (a GPU) says otherwise.
pub trait FedFinder: ClusterFinder {
    /// Finds the clusters of every frame `feed` lends, chunk after chunk, and hands each
    /// frame's clusters to `visit` in order, each named by its chunk's number for it
    /// ([`FrameClusters::frame`] is from [`crate::finder::feed::FedChunk::numbers`]). Every
    /// chunk taken is given back once the finder no longer reads it; the chunks the finder
    /// holds at once are few (a GPU finder: those its pipeline has in flight, at most its
    /// depth).
    ///
    /// The same results as one [`ClusterFinder::find_each`] over all the frames, whatever
    /// the chunk sizes. The default calls [`ClusterFinder::find_each`] per chunk (right for
    /// a finder whose calls end when their work does); the GPU finder's pipeline runs on
    /// from one chunk into the next instead ([`GpuFinder::find_feed`]), uploading the next
    /// chunk while it collects the previous one, with no wait for the GPU in between.
    ///
    /// What a failure leaves: the frames before it stay consumed (their pedestal updates
    /// are kept), and
    /// * an error of the feed: every frame lent before it was found and visited, then the
    ///   error is returned (a GPU finder finishes the chunks it holds first);
    /// * a visitor error at a frame: that frame and those before it stay consumed, as with
    ///   [`ClusterFinder::find_each`];
    /// * [`Error::ClusterLimit`] (a GPU finder with `Overflow::Fail`): the pedestal is as it
    ///   was before the *chunk* that holds the overflowing frame (its `frame` is the
    ///   frame's number, as above); the visitor may have seen that chunk's earlier frames.
    ///
    /// # Errors
    /// As [`ClusterFinder::find_each`] (for each chunk), and the feed's errors.
    fn find_feed(
        &mut self,
        feed: &mut dyn FrameFeed,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        let (rows, cols) = (self.config().rows, self.config().cols);
        each_chunk(feed, rows, cols, visit, &mut |frames, visit| {
            self.find_each(frames, visit)
        })
    }

    /// Memory for `samples` frame samples that this finder reads fastest: page-locked for a
    /// GPU finder (uploads run at DMA speed), plain memory otherwise. The engine reads frames
    /// straight into it.
    ///
    /// # Errors
    /// [`Error::TooLarge`] when the memory is not available.
    fn frame_store(&self, samples: usize) -> Result<Box<dyn FrameStore>> {
        // Zeroed by the allocator: pages are touched only when frames are read into them; an
        // error, not an abort, when the memory (or the address space) is not there.
        let store: Vec<u16> = crate::memory::zeroed_vec(
            || format!("a ring slot of {samples} frame samples"),
            samples,
        )?;
        Ok(Box::new(store))
    }

    /// A function that page-locks host memory for this finder, when it reads page-locked
    /// memory faster (a GPU finder: its uploads then read that memory directly); `None` when
    /// it does not need it. The engine's zero-copy input locks each chunk of a mapped file
    /// with it, on its reader thread, and drops the guard (unlocking) before the memory goes.
    fn host_pinner(&self) -> Option<HostPinner> {
        None
    }

    /// Whether this finder reads a file's frames fastest from a memory map of the file (the
    /// engine's zero-copy input, [`super::EngineConfig::map`]) rather than copied into its
    /// ring by reader threads. True by default: a finder that computes on the host reads
    /// the mapped page cache as fast as its own memory, and no reader thread takes a core
    /// from its band threads (which run in step frame by frame, so one of them sharing its
    /// core with a reader holds back every band). The GPU finder says false: its uploads
    /// from page-locked ring slots are faster than from registered page-cache pages.
    fn prefers_mapped_input(&self) -> bool {
        true
    }

    /// Threads a source should read frames with for this finder (see
    /// [`crate::io::FrameSource::set_read_threads`]): few for a finder that computes on the
    /// host's cores ([`HOST_FINDER_READ_THREADS`], the default), every core up to 16
    /// ([`crate::io::readahead::read_threads`]) for one that computes elsewhere (a GPU).
    fn read_threads(&self) -> usize {
        HOST_FINDER_READ_THREADS.min(read_threads())
    }

    /// Allocates ahead what calls of up to `frames` frames need, so that the first call
    /// allocates nothing (a GPU finder: device buffers and page-locked result memory; `cluda
    /// find` does it on the thread that opens the device, while the pedestal is read).
    /// Processes no frame; the default does nothing.
    ///
    /// # Errors
    /// A GPU finder returns CUDA errors ([`Error::Cuda`], [`Error::OutOfDeviceMemory`]).
    fn reserve(&mut self, _frames: usize) -> Result<()> {
        Ok(())
    }
}

/// The host's defaults, with one band thread fewer per thread the feed keeps busy
/// ([`CpuFinder::find_feed`]).
impl FedFinder for CpuFinder {
    fn find_feed(
        &mut self,
        feed: &mut dyn FrameFeed,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        CpuFinder::find_feed(self, feed, visit)
    }
}

#[cfg(feature = "gpu")]
impl FedFinder for GpuFinder {
    /// One pipeline through every chunk ([`GpuFinder::find_feed`]).
    fn find_feed(
        &mut self,
        feed: &mut dyn FrameFeed,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        GpuFinder::find_feed(self, feed, visit)
    }

    /// Page-locked memory, so that uploads from it run at DMA speed with no registration.
    fn frame_store(&self, samples: usize) -> Result<Box<dyn FrameStore>> {
        let cols = self.config().cols.max(1);
        let rows = samples.div_ceil(cols);
        Ok(Box::new(PinnedFrames::new(self.gpu(), 1, rows, cols)?))
    }

    /// Registration with the finder's context ([`GpuFinder::page_locker`]).
    fn host_pinner(&self) -> Option<HostPinner> {
        Some(Arc::new(self.page_locker()))
    }

    /// No: uploads from the engine's page-locked slots ran at DMA speed, from registered
    /// page-cache pages at about 7 GB/s.
    fn prefers_mapped_input(&self) -> bool {
        false
    }

    /// Every core up to 16: the GPU finds faster than one core copies frames, and the host's
    /// cores have nothing else to do.
    fn read_threads(&self) -> usize {
        read_threads()
    }

    fn reserve(&mut self, frames: usize) -> Result<()> {
        GpuFinder::reserve(self, frames)
    }
}

/// Opens a finder for `config` on `device`, with `threads` CPU worker threads (all cores when
/// `None`; ignored on the GPU), to find frames directly or to feed through the engine.
/// Returns the finder and a sentence saying which device was chosen and why. The finder is
/// `Send`, so it can be moved to (or used from) another thread, e.g. one that runs without
/// Python's GIL.
///
/// # Errors
/// [`Error::NoGpu`] for [`DeviceChoice::Gpu`] without a usable GPU; the errors of
/// [`CpuFinder::new`] or `GpuFinder::new` (an invalid configuration or thread count, CUDA
/// errors).
pub fn open_finder(
    config: FinderConfig,
    device: DeviceChoice,
    threads: Option<usize>,
) -> Result<(Box<dyn FedFinder + Send>, String)> {
    let cpu = |config: FinderConfig, why: String| -> Result<(Box<dyn FedFinder + Send>, String)> {
        let f = match threads {
            Some(t) => CpuFinder::with_threads(config, t)?,
            None => CpuFinder::new(config)?,
        };
        let msg = format!("device: cpu ({} threads), {why}", f.threads());
        Ok((Box::new(f), msg))
    };
    match device {
        DeviceChoice::Cpu => cpu(config, "as requested".into()),
        #[cfg(not(feature = "gpu"))]
        DeviceChoice::Gpu => Err(Error::built_without_gpu("--device gpu")),
        #[cfg(not(feature = "gpu"))]
        DeviceChoice::Auto => cpu(config, "auto: built without the `gpu` feature".into()),
        #[cfg(feature = "gpu")]
        DeviceChoice::Gpu => {
            let f = GpuFinder::new(config)?;
            let msg = format!("device: gpu ({}), as requested", f.gpu().name());
            Ok((Box::new(f), msg))
        }
        #[cfg(feature = "gpu")]
        DeviceChoice::Auto => {
            if !crate::cuda::driver_present() {
                return cpu(config, "auto: no CUDA driver found".into());
            }
            if !crate::cuda::gpu_available() {
                return cpu(config, "auto: the CUDA driver reports no device".into());
            }
            match GpuFinder::new(config.clone()) {
                Ok(f) => {
                    let msg = format!(
                        "device: gpu ({}), auto: a CUDA driver and device are present",
                        f.gpu().name()
                    );
                    Ok((Box::new(f), msg))
                }
                Err(e @ Error::InvalidParameter { .. }) => Err(e),
                Err(e) => cpu(config, format!("auto: the GPU could not be used ({e})")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_as_asked() {
        let (f, why) = open_finder(FinderConfig::new(8, 8), DeviceChoice::Cpu, Some(1)).unwrap();
        assert_eq!(f.device(), "cpu");
        assert!(why.contains("cpu (1 threads)"), "{why}");
    }

    #[test]
    fn auto_says_which_device() {
        let (f, why) = open_finder(FinderConfig::new(8, 8), DeviceChoice::Auto, Some(1)).unwrap();
        assert!(why.starts_with("device: "), "{why}");
        assert!(why.contains(if f.device() == "cpu" { "cpu" } else { "gpu" }));
    }

    /// The CPU finder is fed as a host finder: plain slots, a mapped file, few readers.
    #[test]
    fn the_cpu_finder_is_fed_as_a_host_finder() {
        let (f, _) = open_finder(FinderConfig::new(8, 8), DeviceChoice::Cpu, Some(1)).unwrap();
        assert!(f.prefers_mapped_input() && f.host_pinner().is_none());
        assert!((1..=HOST_FINDER_READ_THREADS).contains(&f.read_threads()));
        assert_eq!(f.frame_store(5).unwrap().samples(), [0; 5]);
    }

    #[cfg(not(feature = "gpu"))]
    #[test]
    fn gpu_choice_without_the_feature_is_a_clear_error() {
        let e = open_finder(FinderConfig::new(8, 8), DeviceChoice::Gpu, Some(1))
            .err()
            .expect("no gpu feature");
        assert!(matches!(e, Error::NoGpu(_)), "{e}");
        assert!(e.to_string().contains("`gpu` feature"), "{e}");
        let (f, why) = open_finder(FinderConfig::new(8, 8), DeviceChoice::Auto, Some(1)).unwrap();
        assert_eq!(f.device(), "cpu");
        assert!(why.contains("`gpu` feature"), "{why}");
    }
}
