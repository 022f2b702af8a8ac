//! A kernel tied to its argument struct: [`Kernel<A>`], loaded from cluda's PTX by the struct's
//! entry name (or, for the finder's families, by a name from `cluda_gpu::args::names`), and
//! launched with the struct itself. The one launch path of the finder's, the matcher's and the
//! accumulation's kernels.
//!
//! The argument structs (`cluda_gpu::args`) are `#[repr(C)]` and declared from the same field
//! lists as the kernels' parameter lists, so handing the driver the address of every field
//! ([`KernelArgs::params`]) is the launch's parameter array. Tying the handle to the struct's
//! type means a kernel cannot be launched with another kernel's parameters; tying the struct's
//! pointers to their element types ([`cluda_gpu::args::DevicePtr`], filled from
//! [`crate::device_memory::DeviceBuf`]) means a field cannot take a buffer of the wrong type.
//! As in cudarc's launch builder, errors are values; what no type can check (buffer sizes
//! against the grid, the stream's order) stays the caller's promise, so launches are `unsafe`.

use std::marker::PhantomData;

use cluda_gpu::args::{EntryArgs, KernelArgs};
use cudarc::driver::{CudaFunction, CudaStream, DriverError};

use crate::cuda::Device;
use crate::error::Result;

/// A loaded kernel whose parameters are the fields of `A`.
#[derive(Debug)]
pub(crate) struct Kernel<A> {
    function: CudaFunction,
    _args: PhantomData<fn(A)>,
}

/// The shape of a launch: `blocks` (x, y) of `block` threads, with no dynamic shared
/// memory; cooperative or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grid {
    /// Blocks along x and y.
    pub blocks: (u32, u32),
    /// Threads per block (along x).
    pub block: u32,
    /// A cooperative launch: every block resident at once (the driver refuses a grid that
    /// does not fit), as kernels that wait for other blocks need.
    pub cooperative: bool,
}

impl Grid {
    /// `blocks` (x, y) of `block` threads, not cooperative.
    pub fn new(blocks: (u32, u32), block: u32) -> Self {
        Self {
            blocks,
            block,
            cooperative: false,
        }
    }

    /// `blocks` blocks along x of `block` threads, not cooperative.
    pub fn x(blocks: u32, block: u32) -> Self {
        Self::new((blocks, 1), block)
    }

    /// The same grid, launched cooperatively.
    pub fn cooperative(self) -> Self {
        Self {
            cooperative: true,
            ..self
        }
    }
}

impl<A: EntryArgs> Kernel<A> {
    /// The kernel `A` names ([`EntryArgs::ENTRY`]), its module loaded on first use.
    ///
    /// # Errors
    /// [`crate::Error::PtxLoad`] when the driver rejects the kernel's module or has no such
    /// kernel.
    pub fn load(device: &Device) -> Result<Self> {
        Self::load_named(device, A::ENTRY)
    }
}

impl<A: KernelArgs> Kernel<A> {
    /// The kernel `name`, whose parameters must be the fields of `A`: for struct families
    /// with a kernel per real type and window side (the finder's), named by
    /// `cluda_gpu::args::names` from the same lists the kernels are declared from.
    ///
    /// # Errors
    /// As [`Kernel::load`].
    pub fn load_named(device: &Device, name: &str) -> Result<Self> {
        Ok(Self {
            function: device.function(name)?,
            _args: PhantomData,
        })
    }

    /// The driver's handle (for occupancy queries).
    pub fn function(&self) -> &CudaFunction {
        &self.function
    }

    /// Queues the kernel on `stream` in the shape `grid` (cooperatively, if it says so),
    /// with `args` as its parameters.
    ///
    /// # Safety
    ///
    /// Every pointer in `args` must be a live device buffer of at least the size the kernel
    /// reads and writes for this grid, usable on `stream` (allocated on it, or ordered after
    /// it); the context of `stream` must be current on this thread.
    pub unsafe fn launch(
        &self,
        stream: &CudaStream,
        grid: Grid,
        mut args: A,
    ) -> std::result::Result<(), DriverError> {
        let (blocks, block) = ((grid.blocks.0, grid.blocks.1, 1), (grid.block, 1, 1));
        let f = self.function.cu_function();
        let s = stream.cu_stream();
        // The driver reads the values behind these addresses before the call returns; `args`
        // lives (and stays put) until then.
        let mut params = args.params();
        let params = params.as_mut();
        // SAFETY: `params` are the fields of `A`, the kernel's parameters (the kernel was
        // loaded for `A`); the buffers and the context are as the caller promises.
        unsafe {
            if grid.cooperative {
                cudarc::driver::result::launch_cooperative_kernel(f, blocks, block, 0, s, params)
            } else {
                cudarc::driver::result::launch_kernel(f, blocks, block, 0, s, params)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use cluda_gpu::args::{
        EntryArgs, EtaCubeArgs, EtaImageArgs, MatchV1DistancesArgs, MatchV4RescoreArgs, NarrowArgs,
    };

    use super::Grid;

    fn entry<A: EntryArgs>() -> &'static str {
        A::ENTRY
    }

    /// A struct of one kernel loads that kernel: the trait's name is the struct's.
    #[test]
    fn a_struct_names_its_kernel() {
        assert_eq!(entry::<MatchV1DistancesArgs>(), "cluda_match_v1_distances");
        assert_eq!(entry::<MatchV4RescoreArgs>(), MatchV4RescoreArgs::ENTRY);
        assert_eq!(entry::<EtaCubeArgs>(), "cluda_eta_cube");
        assert_eq!(entry::<EtaImageArgs>(), EtaImageArgs::ENTRY);
        assert_eq!(entry::<NarrowArgs>(), "cluda_counts_to_u32");
    }

    #[test]
    fn grids() {
        let g = Grid::x(7, 256);
        assert_eq!((g.blocks, g.block, g.cooperative), ((7, 1), 256, false));
        assert!(g.cooperative().cooperative);
        assert_eq!(Grid::new((3, 4), 128).blocks, (3, 4));
    }
}
