//! The crate's one error type.
//!
//! Every failure a user can cause (bad parameters, shapes, files, a missing GPU, a frame with
//! more clusters than a fixed cap) is an [`Error`] whose message names the file, frame or
//! parameter at fault. Library code never panics on user input.

use std::path::PathBuf;

/// Result alias used throughout cluda.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A lower-level error kept as the [`std::error::Error::source`] of a cluda error (the CUDA
/// driver's or cuBLAS's own error). Boxed so that cluda's public API does not depend on the
/// version of the CUDA bindings it is built with.
pub type BoxedSource = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in cluda.
///
/// New variants may be added in minor releases, so a `match` on it needs a wildcard arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter is outside its allowed range (cluster size, n_sigma, thread count, ...).
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParameter {
        /// The parameter's name as the user wrote it.
        name: &'static str,
        /// What is wrong with its value.
        reason: String,
    },
    /// Frames or maps whose shape does not fit the finder or the pedestal.
    #[error("shape mismatch in {context}: expected {expected}, got {got}")]
    Shape {
        /// Which input had the wrong shape.
        context: String,
        /// The shape that was expected, in words.
        expected: String,
        /// The shape that was given.
        got: String,
    },
    /// Cluster finding was asked for before every pixel's pedestal held N samples.
    #[error(
        "pedestal not ready: it holds {have} of the {need} frames it needs; push more pedestal frames first"
    )]
    PedestalNotReady {
        /// Frames pushed so far.
        have: u32,
        /// Frames needed (the pedestal window N).
        need: u32,
    },
    /// A frame held more clusters than a fixed-size result slot could take. The pedestal is
    /// as it was before the call (when streaming, [`crate::engine::FedFinder::find_feed`]: before
    /// the chunk that holds the frame); the visitor may have seen earlier frames of it.
    #[error(
        "frame {frame} holds {found} clusters, more than the limit of {limit} per frame; raise the cap (or let the finder grow it): the pedestal was put back to before the call (or the chunk, when streaming)"
    )]
    ClusterLimit {
        /// The frame that overflowed, by its number ([`crate::Frames::number`]: its index
        /// within the call unless numbered; from a `find_feed`, its chunk's number for it,
        /// the source's frame number from the engine).
        frame: crate::frame_number::FrameNumber,
        /// Clusters that frame holds.
        found: usize,
        /// The per-frame limit that was hit.
        limit: usize,
    },
    /// An operating-system I/O failure on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A file whose contents are not what cluda can read.
    #[error("{path}: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// No usable CUDA driver or device.
    #[error("no CUDA GPU available: {0}")]
    NoGpu(String),
    /// A CUDA driver call failed (only with the `gpu` feature).
    #[cfg(feature = "gpu")]
    #[error("CUDA error while {context}: {source}")]
    Cuda {
        /// What cluda was doing.
        context: String,
        /// The driver's error (its message names the CUDA error code).
        source: BoxedSource,
    },
    /// The device (or the driver's page-locked host memory) could not hold an allocation.
    #[error(
        "out of GPU memory: {what} needs {bytes} bytes more than the device (or pinned host memory) can give; use a smaller chunk or cap"
    )]
    OutOfDeviceMemory {
        /// What the allocation was for (names pinned host memory when it is that).
        what: String,
        /// Bytes requested.
        bytes: usize,
    },
    /// The driver rejected cluda's PTX module or a kernel in it (only with the `gpu` feature).
    #[cfg(feature = "gpu")]
    #[error("loading the GPU kernels failed ({what}): {source}")]
    PtxLoad {
        /// What was being loaded (the module or a named kernel).
        what: String,
        /// The driver's error (its message names the CUDA error code).
        source: BoxedSource,
    },
    /// A cuBLAS call failed (only with the `gpu` feature).
    #[cfg(feature = "gpu")]
    #[error("cuBLAS error while {context}: {source}")]
    Cublas {
        /// What cluda was doing.
        context: String,
        /// cuBLAS's error (its message names the cuBLAS status).
        source: BoxedSource,
    },
    /// A buffer or state larger than the memory this machine has available (or than a
    /// `Vec` can address): refused up front instead of aborting on a failed allocation.
    #[error(
        "{what} needs {bytes} bytes of memory, more than the {available} bytes available on this machine"
    )]
    TooLarge {
        /// What the memory is for (names the file or the frame shape).
        what: String,
        /// Bytes needed.
        bytes: u64,
        /// Bytes available (MemAvailable of /proc/meminfo, or what the allocator gave).
        available: u64,
    },
    /// Work stopped at a frame boundary because the process was sent a termination signal;
    /// unfinished outputs were removed.
    #[error(
        "interrupted by {signal}: stopped at a frame boundary; unfinished outputs were removed"
    )]
    Interrupted {
        /// The signal's name, e.g. `SIGINT`.
        signal: &'static str,
        /// Its number (the command line exits with 128 + it).
        number: i32,
    },
    /// An internal invariant of cluda does not hold: a bug in cluda, not in the caller's input.
    /// Please report it with the message.
    #[error("internal error in cluda (please report): {0}")]
    Internal(String),
    /// The caller's visitor returned an error; frames before it were delivered and consumed.
    #[error("result visitor failed: {0}")]
    Visitor(Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// Shorthand for [`Error::InvalidParameter`].
    pub fn param(name: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidParameter {
            name,
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::Shape`].
    pub fn shape(
        context: impl Into<String>,
        expected: impl Into<String>,
        got: impl Into<String>,
    ) -> Self {
        Error::Shape {
            context: context.into(),
            expected: expected.into(),
            got: got.into(),
        }
    }

    /// Shorthand for [`Error::Format`].
    pub fn format(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// The [`Error::NoGpu`] of a cluda built without the `gpu` feature, for `what` (a device
    /// choice or a GPU matcher version the caller asked for).
    pub fn built_without_gpu(what: &str) -> Self {
        Error::NoGpu(format!(
            "{what} needs the GPU, but this cluda was built without the `gpu` feature (enable it: it is on by default)"
        ))
    }

    /// Shorthand for [`Error::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// Attaches what cluda was doing to a CUDA driver error.
#[cfg(feature = "gpu")]
pub(crate) trait CudaContextExt<T> {
    /// Converts a driver error into [`Error::Cuda`] with `context`.
    fn cuda(self, context: &str) -> Result<T>;
}

#[cfg(feature = "gpu")]
impl<T> CudaContextExt<T> for std::result::Result<T, cudarc::driver::DriverError> {
    fn cuda(self, context: &str) -> Result<T> {
        self.map_err(|source| Error::Cuda {
            context: context.to_string(),
            source: Box::new(source),
        })
    }
}
