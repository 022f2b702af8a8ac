"""``ClusterFinder`` and ``RawFile``: the finder kept between calls, and a raw acquisition read
frame by frame."""

from __future__ import annotations

import os
from typing import Iterable, Iterator, Optional, Tuple, Union

import numpy as np

from . import _cluda
from ._cluda import RawFile as _RawFile
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
)


class ClusterFinder(_cluda.ClusterFinder):
    """Finds photon clusters in MOENCH-like frames, frame after frame.

    ``ClusterFinder(shape, cluster_size=3, n_sigma=5.0, precision="f64", threshold="live",
    device="auto", pedestal_frames=1000, threads=None)``

    - ``shape``: ``(rows, cols)`` of every frame;
    - ``cluster_size``: the window side, 3, 5, 7 or 9;
    - ``n_sigma``: threshold in standard deviations (finite, >= 0);
    - ``precision``: ``"f64"`` (aare's arithmetic), ``"f32"`` (the centred f32 rewrite) or
      ``"f32-naive"`` (``"f32naive"``; only to show that it fails on real data);
    - ``threshold``: ``"live"`` (std of the current pedestal) or ``"frozen"`` (std when the
      pedestal became ready, as aare >= 2026.9);
    - ``device``: ``"auto"`` (the GPU when one is usable, else the CPU), ``"cpu"`` or ``"gpu"``;
    - ``pedestal_frames``: the pedestal window N; ``find`` needs N pedestal frames first;
    - ``threads``: CPU worker threads (default every core; ignored on the GPU).

    ``device`` says where it runs (``"cpu"`` or ``"gpu"``), ``device_note`` why. Calls on one
    finder from several threads are serialised; different finders run in parallel (the GIL
    is released while they work).
    """

    def __new__(
        cls,
        shape,
        cluster_size=_CLUSTER_SIZE,
        n_sigma=_N_SIGMA,
        precision=_PRECISION,
        threshold=_THRESHOLD,
        device=_DEVICE,
        pedestal_frames=_PEDESTAL_FRAMES,
        threads=None,
    ):
        if isinstance(shape, (tuple, list)) and len(shape) == 2:
            shape = (_whole("shape", shape[0]), _whole("shape", shape[1]))
        return super().__new__(
            cls,
            shape,
            _whole("cluster_size", cluster_size),
            n_sigma,
            precision,
            threshold,
            device,
            _whole("pedestal_frames", pedestal_frames, 32),
            None if threads is None else _whole("threads", threads),
        )

    def push_pedestal(self, frames: np.ndarray) -> None:
        """Pushes dark frames (2-D or 3-D uint16) into every pixel's pedestal."""
        super().push_pedestal(frames)

    def push_pedestal_frame(self, frame: np.ndarray) -> None:
        """aare's name: pushes one dark frame (any frames, in fact) into the pedestal."""
        super().push_pedestal(frame)

    def find(
        self, frames: Union[np.ndarray, "RawFile"], first_frame: Optional[int] = None
    ) -> np.ndarray:
        """Finds the clusters of every frame (2-D or 3-D uint16), in order.

        Returns the structured array of cluster rows (see the module docs). Frame ``i`` of
        this call is numbered ``first_frame + i``; by default numbering continues from the
        frames this finder has already searched (``frames_found``), so a stream of calls
        numbers frames 0, 1, 2, ... as ``cluda find`` does in its cluster file. Each frame uses
        the pedestal left by the previous one, and quiet pixels update it.

        ``frames`` may also be a memory map of a whole ``.npy`` file
        (``np.load(path, mmap_mode="r")``), which a GPU finder then reads from the file as
        ``cluda find`` reads it (a CPU finder reads the map in place), or a ``RawFile`` (every frame from where it stands; its frames keep
        their header frame numbers, as in ``cluda find``'s cluster file, and ``first_frame``
        must be left out). On a GPU the frames go through the same engine as ``cluda
        find``: reader threads copy them into page-locked memory while the GPU finds the
        previous ones. The rows are written once, by Rust, into the returned array's memory.
        """
        return super().find(frames, first_frame, _file_of(frames))

    def find_file(self, path: PathLike, first_frame: Optional[int] = None) -> np.ndarray:
        """Finds the clusters of every frame of a ``.npy`` file or a raw acquisition (its
        master file ``<base>_master_<N>.json``, whose frames keep their header frame
        numbers), read as ``cluda find`` reads it, and returns them as one array (as
        ``find``). The fastest way to search a whole file: frames are
        read by several threads straight into the finder's (page-locked) memory, and no
        frame array is made in Python."""
        return super().find_file(os.fspath(path), first_frame)

    def find_iter(
        self,
        frames: Union[np.ndarray, "RawFile", Iterable[np.ndarray]],
        chunk: int = 1000,
    ) -> Iterator[np.ndarray]:
        """Finds clusters a chunk at a time, yielding one result array per chunk.

        ``frames`` is a 3-D uint16 array (e.g. ``np.load(path, mmap_mode="r")`` for a file
        larger than memory: a GPU finder reads it from the file a chunk at a time, as
        ``cluda find`` reads it), a ``RawFile`` (its frames from where it stands, numbered by their
        headers), or an iterable of 2-D or 3-D arrays, each searched as it comes and
        yielding its own array. Frames are numbered as by ``find``; chunk ``k`` holds the
        input's frames ``k * chunk`` to ``(k + 1) * chunk - 1`` (an empty array when none of
        them has a cluster). ``find_file`` is faster for a whole file kept in one array.

        For an array or a ``RawFile`` the search runs ahead on a thread of its own, through
        the same engine as ``find``, while the previous chunk is used: one finished chunk
        waits, the next is being found. An array is never copied whole: each chunk is copied
        (taken from the array as it is then) just before it is handed to that thread, so the
        array may be changed, resized or freed between chunks without harm (a resized array
        ends the iteration where its frames end; another frame shape is a ``ValueError``). A
        memory map of a whole ``.npy`` file is read from the file instead, so a file that
        shrinks meanwhile is an ``OSError`` naming it. Until the iteration ends (or the iterator is closed
        or deleted) other calls on this finder raise ``RuntimeError``. Stopping early leaves
        the finder after the frames it searched ahead; ``frames_found`` says how many.
        """
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1, got {chunk}")
        if isinstance(frames, _RawFile) or (isinstance(frames, np.ndarray) and frames.ndim == 3):
            return super().find_chunks(frames, chunk, _file_of(frames))
        if isinstance(frames, np.ndarray):
            # One frame (or a shape find() refuses, with its error).
            return iter([self.find(frames)])
        return (self.find(block) for block in frames)

    def pedestal_mean(self) -> np.ndarray:
        """Every pixel's dark level (pedestal mean), ADU, float64 ``rows x cols``."""
        return super().pedestal_mean()

    def pedestal_std(self) -> np.ndarray:
        """Every pixel's noise (std of its pedestal window), ADU, float64 ``rows x cols``."""
        return super().pedestal_std()

    @property
    def pedestal(self) -> np.ndarray:
        """aare's name for ``pedestal_mean()``."""
        return self.pedestal_mean()

    @property
    def noise(self) -> np.ndarray:
        """aare's name for ``pedestal_std()``."""
        return self.pedestal_std()



class RawFile(_RawFile):
    """An slsDetector raw acquisition (MOENCH 03), opened by its master file
    ``<base>_master_<N>.json``.

    ``read_n(n)`` returns ``(frame_numbers, frames)``: uint64 header frame numbers and a
    uint16 ``(k, rows, cols)`` array of the next ``k <= n`` frames (``k == 0`` at the end).
    Frames with lost packets are skipped; ``report()`` is the gap report (missing frame
    numbers, partial frames, truncated files) as a dict, its ``"summary"`` a sentence.
    Iterating yields ``(frame_numbers, frames)`` chunks of up to ``chunk_size`` frames.
    """

    chunk_size = 1000

    def read(self) -> Tuple[np.ndarray, np.ndarray]:
        """Every remaining frame: ``(frame_numbers, frames)``."""
        numbers, frames = [], []
        while True:
            n, f = self.read_n(self.chunk_size)
            if len(n) == 0:
                break
            numbers.append(n)
            frames.append(f)
        if not numbers:
            return self.read_n(0)
        return np.concatenate(numbers), np.concatenate(frames)

    def read_frame(self) -> Tuple[int, np.ndarray]:
        """The next frame: ``(frame_number, frame)`` (``rows x cols``); ``EOFError`` at the end."""
        n, f = self.read_n(1)
        if len(n) == 0:
            raise EOFError(f"{self.path}: no frames left")
        return int(n[0]), f[0]

    def __iter__(self) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        while True:
            n, f = self.read_n(self.chunk_size)
            if len(n) == 0:
                return
            yield n, f

    def __enter__(self) -> "RawFile":
        return self

    def __exit__(self, *exc) -> None:
        return None
