//! File formats: NumPy `.npy` frame stacks and matrices, aare's cluster file, and
//! slsDetector raw acquisitions (MOENCH).

pub mod atomic;
pub mod checks;
pub mod cluster_file;
pub mod crop;
pub mod guarded_map;
pub mod memory_source;
pub mod npy;
pub mod npz;
pub mod raw;
pub mod readahead;
pub mod source;
pub mod staged;
pub mod tiff;
pub mod write_behind;

pub use atomic::{AtomicFile, Claim, rename_noreplace};
pub use checks::{check_output, check_overwrite, check_regular, same_file};
pub use cluster_file::{
    ClusterFileReader, ClusterFileWriter, Existing, is_cluster_file, read_cluster_file,
    write_cluster_file, write_cluster_frames,
};
pub use crop::Cropped;
pub use guarded_map::GuardedMap;
pub use memory_source::MemorySource;
pub use npy::{
    MappedFrames, NpyArray, NpyFrames, NpyWriter, read_f32_2d, read_u16_frames, write_u16_3d,
};
pub use source::{FrameSource, input_files, is_raw_master, open_frames, open_frames_or};
pub use staged::StagedSet;
