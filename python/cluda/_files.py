"""Files and one-call functions: ``.npy`` frame stacks, ``find_files`` over many inputs, aare's
cluster files, the generator and the descriptor matcher."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _cluda
from ._cluda import (
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
    PathLike,
    _whole,
    _finder_options,
    _paths,
    _summary,
)
from ._clusters import _size_of


def read_npy_frames(path: PathLike) -> np.ndarray:
    """Reads a whole uint16 ``.npy`` frame stack (as ``cluda find`` does): a 3-D array, a 2-D
    file being one frame. For files larger than memory use ``np.load(path, mmap_mode="r")``
    with ``ClusterFinder.find_iter``."""
    return _read_npy_frames(path)


def find_files(
    inputs: Sequence[PathLike],
    pedestal: PathLike,
    out_dir: PathLike,
    *,
    cluster_size: int = _CLUSTER_SIZE,
    n_sigma: float = _N_SIGMA,
    precision: str = _PRECISION,
    threshold: str = _THRESHOLD,
    device: str = _DEVICE,
    threads: Optional[int] = None,
    carry_pedestal: bool = False,
) -> List[Dict[str, Any]]:
    """Finds the clusters of many acquisitions, each into its own cluster file in ``out_dir``,
    as ``cluda find --pedestal P --data A B C --out-dir D`` does.

    ``inputs`` are ``.npy`` frame stacks or raw acquisitions (their master files
    ``<base>_master_<N>.json``); ``pedestal`` is the dark frames' file, every frame of which
    makes the pedestal (its window N is their count). The device is opened and the pedestal
    read once; each input starts from the pedestal as read (with ``carry_pedestal``, from
    where the input before it left it: the inputs are then one stream of frames), and the next
    input is read while the current one is found. The finder options are ``ClusterFinder``'s.

    Each input's cluster file is named after it (``d.npy`` -> ``d.clust``,
    ``run_master_0.json`` -> ``run_master_0.clust``; ``d_2.clust``, ``d_3.clust``, ... when the
    name exists or was given to an input before), never replaces a file and is byte-identical
    to ``cluda find --out``'s for that input alone. ``out_dir`` is created when missing.

    An input that cannot be opened (missing, unreadable, another frame shape) or fails while
    it is found (e.g. a file cut short) does not stop the others: its summary says why and its
    cluster file is not written. Returns one summary dict per input, in order: ``input`` and
    ``output`` (paths as str; ``output`` None when nothing was written), ``frames``,
    ``clusters``, ``seconds`` (finding and writing, as ``cluda find`` reports it),
    ``input_seconds`` (the input's reader threads, overlapped with finding), ``device``,
    ``warning`` (a raw acquisition's gap report when it lost frames, else None) and ``error``
    (None, or the message). Errors of the run as a whole (the pedestal, ``out_dir``, the
    device, bad options) raise as elsewhere in the package. Ctrl-C (SIGINT) stops the run at a
    frame boundary with ``KeyboardInterrupt``; the unfinished input's file is not left behind.

    ``cluda.dask.find_files`` spreads the inputs over a ``dask.distributed`` cluster.
    """
    rows = _cluda.find_files(
        _paths(inputs),
        os.fspath(pedestal),
        os.fspath(out_dir),
        **_finder_options(cluster_size, n_sigma, precision, threshold, device, threads),
        carry_pedestal=carry_pedestal,
    )
    return [_summary(r) for r in rows]


def read_cluster_file(
    path: PathLike, cluster_size: int = _CLUSTER_SIZE, with_frame_numbers: bool = False
):
    """Reads an aare cluster file of ``cluster_size`` clusters (the file does not say).

    Returns the structured array of cluster rows, ``frame`` being the file's frame number;
    with ``with_frame_numbers=True`` also the int32 array of every frame number in the file,
    in order, including frames without clusters: ``(clusters, frame_numbers)``.
    """
    clusters, numbers = _cluda._read_cluster_file(path, cluster_size)
    return (clusters, numbers) if with_frame_numbers else clusters


def write_cluster_file(
    path: PathLike,
    clusters: np.ndarray,
    frames: Optional[Union[int, Sequence[int], np.ndarray]] = None,
    append: bool = False,
    overwrite: bool = False,
) -> None:
    """Writes cluster rows as an aare cluster file (``cluda find --out``'s layout).

    The file has one entry per frame: ``frames`` lists their numbers in order (an int ``n``
    means ``range(n)``); frames without clusters get an entry with count 0, as ``cluda find``
    writes them. By default the frames are those that have clusters, in order of appearance.
    Rows must be grouped by frame in the order of ``frames`` (as ``find`` returns them).
    ``append=True`` adds to the end of an existing file (for writing a stream chunk by chunk).

    Every argument is checked before the file is touched, and the file is written under a
    temporary name and renamed into place when complete (as ``cluda find --out`` writes it), so
    an error or a full disk leaves an existing file as it was. An existing file is not replaced
    (``FileExistsError``, as ``cluda find --out`` refuses without ``--overwrite``) unless
    ``overwrite=True``; that holds for a file that appears while this one is written too (the
    final rename refuses an existing name). ``append=True`` needs an existing file to be a
    cluster file of this cluster size (anything else is a ``ValueError``).
    """
    side = _size_of(clusters)
    rows = np.ascontiguousarray(clusters)
    if frames is None:
        f = rows["frame"]
        if len(f):
            keep = np.ones(len(f), dtype=bool)
            keep[1:] = f[1:] != f[:-1]
            frames = f[keep]
            if len(np.unique(frames)) != len(frames):
                raise ValueError(
                    "clusters: the rows of a frame are not together (a frame number comes back "
                    "after another frame's rows); sort them by frame or pass `frames`"
                )
        else:
            frames = np.zeros(0, dtype=np.int32)
    elif isinstance(frames, (int, np.integer)):
        frames = np.arange(int(frames), dtype=np.int32)
    frames = np.asarray(frames)
    if frames.ndim != 1 or (frames.size and frames.dtype.kind not in "iu"):
        raise ValueError(f"frames must be a 1-D sequence of frame numbers, got {frames!r}")
    info = np.iinfo(np.int32)
    if frames.size and (frames.min() < info.min or frames.max() > info.max):
        raise ValueError("frames: frame numbers must fit in int32 (the file's field)")
    words = rows.view(np.uint32).reshape(-1)
    _cluda._write_cluster_file(
        path, words, np.ascontiguousarray(frames, dtype=np.int32), side, append, overwrite
    )


def generate(
    count: int,
    first: int = 0,
    photons: bool = True,
    shape: Tuple[int, int] = (400, 400),
    seed: int = 1,
) -> np.ndarray:
    """Frames ``first .. first + count`` of cluda's deterministic MOENCH-like generator, a
    uint16 ``(count, rows, cols)`` array: baseline near 4600 ADU, 35-55 ADU noise, and with
    ``photons`` about 2500 photons of about 400 ADU per 400x400 frame. Frame ``k`` depends only
    on ``shape``, ``seed`` and ``k``. ``cluda gen --seed S --pedestal-frames P`` writes
    ``generate(P, 0, False, seed=S)`` and ``generate(N, P, True, seed=S)``."""
    shape = tuple(shape)
    if len(shape) == 2:
        shape = (_whole("shape", shape[0]), _whole("shape", shape[1]))
    return _generate(
        _whole("count", count), _whole("first", first), photons, shape, _whole("seed", seed)
    )


def match_nearest(
    lhs: np.ndarray, rhs: np.ndarray, version: str = "cpu"
) -> Tuple[np.ndarray, np.ndarray]:
    """For each row of ``lhs`` (float32 ``n x 128`` descriptors), its nearest row of ``rhs`` in
    squared L2 distance: ``(index uint32 (n,), squared distance float32 (n,))``. ``version``
    is ``"cpu"`` or a GPU version ``"v1"``, ``"v2"``, ``"v3"``, ``"v4"`` (TF32 screen + exact
    rescoring, equal to ``"v2"`` bit for bit). The descriptors are copied once (into aligned
    memory)."""
    return _match_nearest(lhs, rhs, version)


# ---------------------------------------------------------------------------------------------
