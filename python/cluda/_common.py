"""Shared by the package's modules: the finder's defaults (from the Rust library), path
arguments, whole numbers, the file behind a memory map, summaries."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _cluda


# The finder's defaults, from the Rust library (``FindOptions::DEFAULT``) through the
# extension module, so that the Python signatures cannot drift from ``cluda find``'s.
_CLUSTER_SIZE: int = _cluda.DEFAULT_CLUSTER_SIZE
_N_SIGMA: float = _cluda.DEFAULT_N_SIGMA
_PRECISION: str = _cluda.DEFAULT_PRECISION
_THRESHOLD: str = _cluda.DEFAULT_THRESHOLD
_DEVICE: str = _cluda.DEFAULT_DEVICE
_PEDESTAL_FRAMES: int = _cluda.DEFAULT_PEDESTAL_FRAMES

PathLike = Union[str, "os.PathLike[str]"]


def _whole(name: str, value, bits: int = 64, minimum: int = 0):
    """``value`` as an int for parameter ``name``: a ``ValueError`` naming the parameter for a
    number below ``minimum`` or not below ``2**bits`` (the Rust side would only say "can't
    convert negative int to unsigned", without the name). Other types pass unchanged (the Rust
    side names the parameter in its ``TypeError``)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        v = int(value)
        if v < minimum or v >= 2**bits:
            raise ValueError(
                f"{name} must be a whole number from {minimum} to 2**{bits} - 1, got {v}"
            )
        return v
    return value


def _finder_options(
    cluster_size, n_sigma, precision, threshold, device, threads
) -> Dict[str, Any]:
    """The finder's options of ``find_files``, ``eta_cube``, ``image`` and ``cluda.dask``, as
    keyword arguments of the extension module's functions (which check them further), the
    whole numbers checked by ``_whole`` first."""
    return dict(
        cluster_size=_whole("cluster_size", cluster_size),
        n_sigma=n_sigma,
        precision=precision,
        threshold=threshold,
        device=device,
        threads=None if threads is None else _whole("threads", threads),
    )


def _file_of(frames) -> Optional[Tuple[str, int]]:
    """``(path, data offset)`` of the ``.npy`` file that a memory-mapped array may show in
    full (``np.load(path, mmap_mode="r")`` or ``"r+"``), for the finder to read the file
    instead (it checks that the file's header matches the array, else reads the memory).
    Copy-on-write maps (``"c"``) can differ from their file and are read as memory."""
    if (
        isinstance(frames, np.memmap)
        and getattr(frames, "filename", None)
        and getattr(frames, "mode", None) in ("r", "r+")
        and frames.flags.c_contiguous
    ):
        return os.fspath(frames.filename), int(frames.offset)
    return None


def _paths(inputs) -> List[str]:
    """The input paths of ``find_files``: a sequence of paths, not one path (whose characters
    would be taken for paths)."""
    if isinstance(inputs, (str, bytes, os.PathLike)):
        raise TypeError(
            f"inputs must be a list of paths, got the single path {inputs!r}: pass [path]"
        )
    return [os.fspath(p) for p in inputs]


def _summary(row: Dict[str, Any]) -> Dict[str, Any]:
    """A summary with its paths as str."""
    for key in ("input", "output"):
        if row[key] is not None:
            row[key] = os.fspath(row[key])
    return row
