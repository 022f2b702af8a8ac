//! Cluster finders: the trait every device implements, the feed that lends them frames, the
//! CPU reference finder and the GPU finder. How the streaming engine feeds them is the
//! engine's (`crate::engine::feeding`).

mod cluster_finder;
pub mod cpu;
pub mod feed;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod select;

pub use cluster_finder::ClusterFinder;
pub use cpu::CpuFinder;
