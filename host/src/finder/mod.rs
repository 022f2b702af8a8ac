//! Cluster finders: the trait every device implements, the feed that lends them frames, and
//! the CPU reference finder.

mod cluster_finder;
pub mod cpu;
pub mod feed;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod select;

pub(crate) use cluster_finder::each_chunk;
pub use cluster_finder::{ClusterFinder, HOST_FINDER_READ_THREADS, HostPinner};
pub use cpu::CpuFinder;
