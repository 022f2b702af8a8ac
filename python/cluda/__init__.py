"""cluda: photon cluster finding for hybrid pixel detectors (MOENCH), from Python.

The finder runs on the GPU when there is one (kernels written in Rust) and on the CPU
otherwise; both give the same clusters, bit for bit (``docs/semantics.md`` in the repository
defines them operation by operation). Arrays go in and come out as numpy arrays.

Input arrays
    Frames are ``uint16`` arrays, 2-D (``rows x cols``, one frame) or 3-D
    (``frames x rows x cols``). Any other dtype raises ``ValueError`` (a cast could change
    the values: convert explicitly). A C-contiguous array is read in place, never copied
    as a whole (a GPU finder copies it a chunk at a time, on several threads, into
    page-locked memory it uploads from); any other layout (a strided slice, Fortran order)
    is copied once into C order. On a GPU a memory map of a whole ``.npy`` file is read
    from the file. The GIL is released while the frames are processed: do not write to an array from
    another thread while a call (or a ``find_iter`` iteration) reads it.

Results
    Clusters come back as a numpy structured array, one row per cluster, with fields
    ``frame`` (int32), ``x``, ``y`` (uint16: column and row of the centre) and ``data``
    (int32, shape ``(N*N,)``: the pedestal-corrected values of the window, row-major from its
    top-left, 0 outside the frame), rows in frame order and, within a frame, in row-major
    order of the centres. ``cluster_dtype(n)`` is that dtype. The rows are written once, by
    Rust, into memory the array then owns (no concatenation or copy afterwards).

Errors
    ``ValueError`` for bad parameters and shapes, ``OSError`` (``FileNotFoundError``, ...)
    for files, ``FileFormatError`` (an ``OSError``) for files cluda cannot read,
    ``PedestalNotReadyError`` and ``ClusterLimitError`` (``RuntimeError``), ``NoGpuError``
    and ``CudaError`` (``RuntimeError``), ``GpuMemoryError`` (``MemoryError``). Messages are
    the Rust library's, unchanged.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _cluda
from ._cluda import (
    ClusterLimitError,
    CudaError,
    FileFormatError,
    GpuMemoryError,
    NoGpuError,
    PedestalNotReadyError,
    RawFile as _RawFile,
    generate as _generate,
    match_nearest as _match_nearest,
    read_npy_frames as _read_npy_frames,
)

from ._common import (
    _CLUSTER_SIZE,
    _N_SIGMA,
    _PRECISION,
    _THRESHOLD,
    _DEVICE,
    _PEDESTAL_FRAMES,
    PathLike,
    _whole,
    _file_of,
    _finder_options,
    _paths,
    _summary,
)
from ._clusters import (
    cluster_dtype,
    _size_of,
    cluster_sums,
    spectrum,
)
from ._finder import (
    ClusterFinder,
    RawFile,
)
from ._files import (
    read_npy_frames,
    find_files,
    read_cluster_file,
    write_cluster_file,
    generate,
    match_nearest,
)
from ._imaging import (
    eta_cube,
    image,
    PHOTON_LIST_DTYPE,
    _pixel_map,
    _mask_arg,
    _gain_arg,
    _window_arg,
)
from ._interp import (
    PHOTON_DTYPE,
    ETA_DTYPE,
    _U2,
    _I4,
    _clusters_arg,
    _real_array,
    Interpolator,
    _etas,
    eta2,
    full_eta2,
    eta3,
    cross_eta3,
)

__all__ = [
    "ClusterFinder",
    "RawFile",
    "cluster_dtype",
    "cluster_sums",
    "spectrum",
    "read_npy_frames",
    "find_files",
    "eta_cube",
    "image",
    "read_cluster_file",
    "write_cluster_file",
    "generate",
    "match_nearest",
    "Interpolator",
    "eta2",
    "full_eta2",
    "eta3",
    "cross_eta3",
    "PHOTON_DTYPE",
    "PHOTON_LIST_DTYPE",
    "ETA_DTYPE",
    "PedestalNotReadyError",
    "ClusterLimitError",
    "NoGpuError",
    "CudaError",
    "GpuMemoryError",
    "FileFormatError",
]

__version__ = "0.1.0"


# The package's functions and classes are written in the modules above but belong to
# ``cluda``, as they did when they were all written here: their ``__module__`` says so (for
# ``help()``, reprs and pickling by reference).
for _obj in list(globals().values()):
    if getattr(_obj, "__module__", "").startswith(__name__ + "._") and not getattr(
        _obj, "__module__", ""
    ).startswith(__name__ + "._cluda"):
        _obj.__module__ = __name__
del _obj
