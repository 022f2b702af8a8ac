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

# The finder's defaults, from the Rust library (``FindOptions::DEFAULT``) through the
# extension module, so that the Python signatures cannot drift from ``cluda find``'s.
_CLUSTER_SIZE: int = _cluda.DEFAULT_CLUSTER_SIZE
_N_SIGMA: float = _cluda.DEFAULT_N_SIGMA
_PRECISION: str = _cluda.DEFAULT_PRECISION
_THRESHOLD: str = _cluda.DEFAULT_THRESHOLD
_DEVICE: str = _cluda.DEFAULT_DEVICE
_PEDESTAL_FRAMES: int = _cluda.DEFAULT_PEDESTAL_FRAMES

PathLike = Union[str, "os.PathLike[str]"]


def cluster_dtype(cluster_size: int = _CLUSTER_SIZE) -> np.dtype:
    """The structured dtype of result rows for ``cluster_size`` x ``cluster_size`` clusters:
    ``frame`` int32, ``x``, ``y`` uint16, ``data`` int32 of shape ``(cluster_size**2,)``.
    Its bytes after ``frame`` are aare's packed cluster record."""
    return _cluda._cluster_dtype(cluster_size)


def _size_of(clusters: np.ndarray) -> int:
    """The cluster side of a result array, checking that it is one."""
    if not isinstance(clusters, np.ndarray) or clusters.dtype.names is None:
        raise ValueError(
            "clusters must be a structured array of cluster rows (cluda.cluster_dtype(n)), "
            f"got {type(clusters).__name__}"
            + (f" of dtype {clusters.dtype}" if isinstance(clusters, np.ndarray) else "")
        )
    try:
        cells = clusters.dtype["data"].shape[0]
    except (KeyError, IndexError):
        cells = -1
    side = int(round(cells**0.5)) if cells > 0 else 0
    if side not in (3, 5, 7, 9) or clusters.dtype != cluster_dtype(side):
        raise ValueError(
            f"clusters must have dtype cluda.cluster_dtype(n) for n in 3, 5, 7, 9, got {clusters.dtype}"
        )
    if clusters.ndim != 1:
        raise ValueError(f"clusters must be 1-D, got shape {clusters.shape}")
    return side


def cluster_sums(clusters: np.ndarray) -> np.ndarray:
    """The sum of each cluster's values (the photon's energy estimate, ADU), int64."""
    _size_of(clusters)
    return clusters["data"].sum(axis=1, dtype=np.int64)


def spectrum(
    clusters: np.ndarray,
    bins: Union[int, Sequence[float]] = 200,
    range: Optional[Tuple[float, float]] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """Histogram of the cluster sums: ``(counts, bin_edges)`` as from ``numpy.histogram``."""
    return np.histogram(cluster_sums(clusters), bins=bins, range=range)


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
        _whole("cluster_size", cluster_size),
        n_sigma,
        precision,
        threshold,
        device,
        None if threads is None else _whole("threads", threads),
        carry_pedestal,
    )
    return [_summary(r) for r in rows]


def eta_cube(
    inputs: Sequence[PathLike],
    pedestal: PathLike,
    *,
    eta: str = "eta2",
    eta_bins: int = 201,
    eta_range: Tuple[float, float] = (-0.1, 1.1),
    energy_edges: Sequence[float] = (0.0, float("inf")),
    cluster_size: int = _CLUSTER_SIZE,
    n_sigma: float = _N_SIGMA,
    precision: str = _PRECISION,
    threshold: str = _THRESHOLD,
    device: str = _DEVICE,
    threads: Optional[int] = None,
    carry_pedestal: bool = False,
    mask: Optional[Union[PathLike, np.ndarray]] = None,
    gain: Optional[Union[PathLike, np.ndarray]] = None,
) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
    """The eta cube of a flat field, as ``cluda eta --pedestal P --data A B ...`` makes it:
    every input's clusters (exactly those ``find`` writes) counted by (eta_x, eta_y, energy),
    on a GPU in the finder's output stage.

    Returns ``(cube, summary)``: ``cube`` holds exactly ``etacube``, ``xbins``, ``ybins`` and
    ``ebins`` (float64), so that ``Interpolator(**cube)`` (cluda's or aare's) takes it and
    ``np.savez("eta.npz", **cube)`` writes what ``cluda eta`` writes; ``summary`` says the
    frames, clusters, what was counted (``inside``) and left out (``eta_outside``,
    ``energy_outside``), ``seconds``, ``device``, ``counted_on`` and the inputs that
    ``failed``. ``eta`` is ``eta2``, ``full-eta2``, ``eta3`` or ``cross-eta3``; the eta axes
    are ``numpy.linspace(*eta_range, eta_bins + 1)``.

    ``mask`` and ``gain`` are those of ``image`` (``cluda eta --mask/--gain``): clusters
    centred on a bad pixel are left out (counted as ``masked``), and with a gain map every
    pixel value is divided by its pixel's gain first, so the energy axis (``energy_edges``)
    is in keV. Either makes the cube count on the host (the device's cube kernel has
    neither)."""
    etacube, xbins, ybins, ebins, summary = _cluda.eta_cube(
        _paths(inputs),
        os.fspath(pedestal),
        eta,
        _whole("eta_bins", eta_bins),
        (float(eta_range[0]), float(eta_range[1])),
        [float(e) for e in energy_edges],
        _whole("cluster_size", cluster_size),
        n_sigma,
        precision,
        threshold,
        device,
        None if threads is None else _whole("threads", threads),
        carry_pedestal,
        mask=_mask_arg(mask),
        gain=_gain_arg(gain),
    )
    return {"etacube": etacube, "xbins": xbins, "ybins": ybins, "ebins": ebins}, summary


def image(
    inputs: Sequence[PathLike],
    pedestal: PathLike,
    eta: PathLike,
    *,
    subpixels: Optional[int] = 4,
    maps: str = "cumulative",
    mask: Optional[Union[PathLike, np.ndarray]] = None,
    gain: Optional[Union[PathLike, np.ndarray]] = None,
    energy_window: Optional[Tuple[float, float]] = None,
    photons: bool = False,
    cluster_size: int = _CLUSTER_SIZE,
    n_sigma: float = _N_SIGMA,
    precision: str = _PRECISION,
    threshold: str = _THRESHOLD,
    device: str = _DEVICE,
    threads: Optional[int] = None,
    carry_pedestal: bool = False,
):
    """The sub-pixel image and/or the photon lists of every input, as ``cluda image --pedestal
    P --data A B ... --eta eta.npz --subpixels N --out image.npy [--out-dir D]`` makes them:
    each cluster (exactly those ``find`` writes) placed through the maps of the cube at
    ``eta`` (``maps``: ``cumulative``, aare's default constructor, or ``rosenblatt``) and
    counted at ``image[floor(y*N), floor(x*N)]``; on a GPU the image is counted in the
    finder's output stage.

    Returns ``(image, summary)``, or with ``photons=True`` ``(image, photons, summary)``:

    - ``image``: a ``(rows*N, cols*N)`` uint32 array of every input that ended whole, or
      None with ``subpixels=None`` (photon lists only; ``subpixels=None`` with
      ``photons=False`` is a ``ValueError``: nothing to make).
    - ``photons``: a list with one entry per input, in order: a structured array of
      ``PHOTON_LIST_DTYPE`` (``frame`` int64, ``x``, ``y``, ``energy`` float64, ``flags``
      uint8; one row per cluster, in ``find --out`` order), the rows ``cluda image
      --photons`` writes for that input byte for byte, or None for an input that failed (or
      could not be opened; ``summary["failed"]`` says why). Flagged photons (``flags`` not
      0: eta or energy outside the cube, masked, outside the window) are rows too, at their
      pixel's centre, and are not counted into the image. The rows are placed on host
      threads while the frames are found (on a GPU too, where the image is still counted
      on the device) and are kept in memory, about 33 bytes a cluster: a list larger than
      the memory available is a ``MemoryError``, not a crash.
    - ``summary``: the dict of ``eta_cube`` (``inside`` photons counted, ``eta_outside``,
      ``energy_outside``, ``masked``, ``outside_window``, ..., ``failed``).

    ``mask`` (``--mask``): bad pixels, a bool array ``rows x cols`` (True: bad; an unsigned
    integer array counts non-zero as bad) or the path of such a ``.npy``; photons centred on a bad pixel
    are flagged and not counted. ``gain`` (``--gain``): ADU per keV, a float array ``rows x
    cols`` or the path of a float64/float32 ``.npy``, every gain finite and above 0; each
    pixel value is divided by its pixel's gain before eta and energy are computed (energies
    then in keV: use a cube made with the same gain), and the image is counted on the host.
    ``energy_window`` (``--energy-window``): ``(lo, hi)``, photons whose energy is outside
    ``[lo, hi]`` are flagged and not counted (ADU, keV with a gain). A mask or gain map of
    another shape than the pedestal's frames, a bad gain or window, raises ``ValueError``
    naming the parameter."""
    if subpixels is not None:
        subpixels = _whole("subpixels", subpixels, bits=32)
    img, lists, summary = _cluda.image(
        _paths(inputs),
        os.fspath(pedestal),
        os.fspath(eta),
        subpixels,
        maps,
        _whole("cluster_size", cluster_size),
        n_sigma,
        precision,
        threshold,
        device,
        None if threads is None else _whole("threads", threads),
        carry_pedestal,
        mask=_mask_arg(mask),
        gain=_gain_arg(gain),
        energy_window=_window_arg(energy_window),
        photons=bool(photons),
    )
    if not photons:
        return img, summary
    return img, [None if b is None else b.view(PHOTON_LIST_DTYPE) for b in lists], summary


#: The rows of a photon list (``cluda image --photons`` files, ``image(..., photons=True)``;
#: packed, little-endian, 33 bytes): ``frame`` (the cluster's frame number), ``x``, ``y``
#: (sub-pixel position; pixel ``c`` spans ``[c, c + 1)``), ``energy`` (the eta's sum, ADU or
#: keV with a gain) and ``flags`` (0: placed and counted).
PHOTON_LIST_DTYPE = np.dtype(
    [("frame", "<i8"), ("x", "<f8"), ("y", "<f8"), ("energy", "<f8"), ("flags", "u1")]
)


def _pixel_map(name: str, value, kinds: str, dtype, what: str):
    """A per-pixel map argument for the Rust side: a path as str, or a 2-D C-contiguous array
    of ``dtype`` (cast from one of the dtype ``kinds``); anything else is a ``ValueError``
    naming the parameter (the Rust side checks the shape against the frames)."""
    if value is None or isinstance(value, (str, os.PathLike)):
        return None if value is None else os.fspath(value)
    a = np.asarray(value)
    if a.dtype.kind not in kinds:
        raise ValueError(f"{name}: dtype {a.dtype} is not {what}")
    if a.ndim != 2:
        raise ValueError(f"{name}: a rows x cols array, got shape {a.shape}")
    return np.ascontiguousarray(a != 0 if dtype is bool and a.dtype != bool else a, dtype)


def _mask_arg(mask):
    return _pixel_map("mask", mask, "bu", bool, "a mask's (bool, True: bad; or uint8)")


def _gain_arg(gain):
    return _pixel_map("gain", gain, "fiu", np.float64, "a gain map's (float, ADU per keV)")


def _window_arg(window) -> Optional[Tuple[float, float]]:
    """``energy_window`` as ``(lo, hi)`` floats; a ``ValueError`` naming it otherwise (the
    Rust side checks ``lo <= hi``)."""
    if window is None:
        return None
    if isinstance(window, (str, bytes)):
        raise ValueError(f"energy_window must be (lo, hi), two numbers, got {window!r}")
    try:
        lo, hi = window
        return float(lo), float(hi)
    except (TypeError, ValueError) as e:
        raise ValueError(f"energy_window must be (lo, hi), two numbers: {e}") from None


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
# Eta interpolation, shaped like aare's (``aare.Interpolator``, ``aare.calculate_eta2``, ...).

#: The rows ``Interpolator.interpolate*`` return (packed, little-endian): aare's photon fields
#: ``x``, ``y``, ``energy`` and cluda's ``flags``.
PHOTON_DTYPE = np.dtype([("x", "<f8"), ("y", "<f8"), ("energy", "<f8"), ("flags", "u1")])

#: The rows ``eta2``, ``full_eta2``, ``eta3`` and ``cross_eta3`` return (packed,
#: little-endian): aare's fields ``x``, ``y``, ``c`` (the corner) and ``sum`` (float64 here).
ETA_DTYPE = np.dtype([("x", "<f8"), ("y", "<f8"), ("c", "<i4"), ("sum", "<f8")])

_U2 = np.dtype("<u2")
_I4 = np.dtype("<i4")


def _clusters_arg(clusters, name: str = "clusters"):
    """The bytes and field layout of a cluster array, checked: ``(uint8 view, (itemsize,
    offset of x, offset of y, offset of data, side))``. A C-contiguous array is read in place;
    any other layout is copied once."""
    arr = clusters
    if not isinstance(arr, np.ndarray):
        try:
            # e.g. aare's ClusterVector (buffer protocol, aare's (x, y, data) rows).
            arr = np.asarray(clusters)
        except Exception as e:  # noqa: BLE001 - any failure means "not an array of clusters"
            raise TypeError(
                f"{name} must be a structured numpy array of clusters (fields x, y, data), got "
                f"{type(clusters).__name__}"
            ) from e
    fields = arr.dtype.fields
    if fields is None:
        raise TypeError(
            f"{name} must be a structured numpy array of clusters with fields x (uint16), "
            f"y (uint16) and data (int32, (N*N,) or (N, N) per row), got dtype {arr.dtype}"
        )
    for f in ("x", "y", "data"):
        if f not in fields:
            raise ValueError(
                f"{name} has no field {f!r} (fields: {', '.join(arr.dtype.names)}); cluster "
                f"arrays need x (uint16), y (uint16) and data (int32, (N*N,) or (N, N) per row)"
            )
    for f in ("x", "y"):
        if fields[f][0] != _U2:
            raise ValueError(
                f"{name}[{f!r}] must be uint16 (little-endian, one per row), got "
                f"{fields[f][0]}"
            )
    dt = fields["data"][0]
    base, shape = (dt.subdtype if dt.subdtype is not None else (dt, ()))
    if base != _I4:
        raise ValueError(
            f"{name}['data'] must be int32 (little-endian), got {base}; cluster files hold "
            f"int32 values (convert explicitly if yours fit)"
        )
    cells = int(np.prod(shape)) if shape else 1
    side = int(round(cells**0.5))
    if (len(shape) not in (1, 2) or side * side != cells or side not in (3, 5, 7, 9)
            or (len(shape) == 2 and shape[0] != shape[1])):
        raise ValueError(
            f"{name}['data'] must hold N*N values per row, shape (N*N,) or (N, N) for N in 3, 5, "
            f"7, 9, got {shape}"
        )
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one row per cluster), got shape {arr.shape}")
    arr = np.ascontiguousarray(arr)
    layout = (arr.dtype.itemsize, fields["x"][1], fields["y"][1], fields["data"][1], side)
    return arr.view(np.uint8).reshape(-1), layout


def _real_array(name: str, value, ndim: int) -> np.ndarray:
    """``value`` as a C-contiguous float64 array of ``ndim`` dimensions for parameter ``name``:
    integer and floating arrays (and sequences of them) are converted (exactly, for counts and
    edges below 2**53); anything else is a ``TypeError``, another number of dimensions a
    ``ValueError``."""
    try:
        arr = np.asarray(value)
    except Exception as e:  # noqa: BLE001
        raise TypeError(f"{name} must be a float64 array, got {type(value).__name__}") from e
    if arr.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must be an array of real numbers (float64), got dtype {arr.dtype}"
        )
    if arr.ndim != ndim:
        what = "1-D array of bin edges" if ndim == 1 else "3-D array (eta_x, eta_y, energy)"
        raise ValueError(f"{name} must be a {what}, got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.float64)


class Interpolator(_cluda.Interpolator):
    """Eta interpolation as aare's ``Interpolator``: maps from an eta cube that place each
    photon at its sub-pixel position. ``docs/interpolation.md`` defines every step.

    Two constructors, as aare's:

    - ``Interpolator(etacube, xbins, ybins, ebins)``: aare's default (cumulative) maps of the
      cube; ``Interpolator(**np.load("eta.npz"))`` takes ``cluda eta``'s file as it is;
    - ``Interpolator(xbins, ybins, ebins)``, then ``rosenblatttransform(etacube)``: the
      Rosenblatt-transform maps (marginal CDF of eta_x, conditional CDF of eta_y).

    ``etacube`` has shape ``(len(xbins) - 1, len(ybins) - 1, len(ebins) - 1)`` (axis 0 eta_x,
    axis 1 eta_y, axis 2 energy in ADU); the edges strictly increase (the last may be
    ``inf``). Integer arrays are converted to float64; a wrong shape, NaN, or edges that do not
    increase raise ``ValueError`` naming the parameter, a non-numeric array ``TypeError``.

    ``interpolate(clusters)`` (eta2), ``interpolate_full_eta2``, ``interpolate_eta3`` and
    ``interpolate_cross_eta3`` return one row per cluster, in order, of ``PHOTON_DTYPE``:
    ``x``, ``y``, ``energy`` (float64) and ``flags`` (uint8): 0 placed; 1 the eta is outside
    the edges; 2 the energy is; a flagged row holds its pixel's centre (``x + 0.5``,
    ``y + 0.5``). aare has no flags: above the last edge it reads past its tables, below the
    first it uses bin 0; for clusters strictly inside the edges the positions are aare's bit
    for bit, and ``cluda image --photons``'s for every cluster. Interpolating before there are
    maps (the edges-only constructor without ``rosenblatttransform``) raises ``RuntimeError``
    (aare crashes there).

    ``clusters``: a 1-D structured array with fields ``x``, ``y`` (uint16: the centre's column
    and row) and ``data`` (int32, ``(N*N,)`` or ``(N, N)`` per row, row-major, N = 3, 5, 7 or
    9): what ``ClusterFinder.find`` and ``read_cluster_file`` return, ``np.array`` of aare's
    ``ClusterVector`` (int32), or an aare ``ClusterVector`` itself. Other fields are ignored.
    A C-contiguous array is read in place; the GIL is released while the photons are placed.
    """

    def __new__(cls, *args, **kwargs):
        names4 = ("etacube", "xbins", "ybins", "ebins")
        names3 = ("xbins", "ybins", "ebins")
        n = len(args) + len(kwargs)
        names = names4 if n == 4 else names3 if n == 3 else None
        if names is None or len(args) > len(names):
            raise TypeError(
                "Interpolator takes (etacube, xbins, ybins, ebins) or (xbins, ybins, ebins), "
                f"got {len(args)} positional and {len(kwargs)} keyword argument(s)"
            )
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in given:
                raise TypeError(
                    f"Interpolator got an unexpected or repeated argument {k!r}; it takes "
                    f"({', '.join(names)})"
                )
            given[k] = v
        edges = [_real_array(k, given[k], 1) for k in names3]
        cube = _real_array("etacube", given["etacube"], 3) if n == 4 else None
        return super().__new__(cls, *edges, cube)

    def rosenblatttransform(self, etacube: np.ndarray) -> None:
        """Builds the Rosenblatt-transform maps of ``etacube`` (as aare's; replaces any
        maps): the marginal CDF of eta_x per energy bin and the conditional CDF of eta_y
        given eta_x."""
        super().rosenblatttransform(_real_array("etacube", etacube, 3))

    def get_ietax(self) -> np.ndarray:
        """The x map: float64, the cube's shape; a photon of bin ``(ix, iy, ie)`` goes to
        ``ietax[ix, iy, ie]`` within its pixel (eta2 kinds from the quadrant's corner)."""
        return super().get_ietax()

    def get_ietay(self) -> np.ndarray:
        """The y map: float64, the cube's shape."""
        return super().get_ietay()

    def _place(self, kind: str, clusters) -> np.ndarray:
        rows, layout = _clusters_arg(clusters)
        return super()._interpolate(kind, rows, layout).view(PHOTON_DTYPE)

    def interpolate(self, clusters) -> np.ndarray:
        """The photons of ``clusters`` by eta2 (aare's ``interpolate``): ``x = cluster.x +
        0.5 + ietax + dX`` (``dX = -1`` for the left quadrants), likewise ``y``."""
        return self._place("eta2", clusters)

    def interpolate_full_eta2(self, clusters) -> np.ndarray:
        """The photons of ``clusters`` by full eta2 (placed as ``interpolate``)."""
        return self._place("full-eta2", clusters)

    def interpolate_eta3(self, clusters) -> np.ndarray:
        """The photons of ``clusters`` by eta3 on the central 3x3: ``x = cluster.x + ietax``,
        likewise ``y`` (the cube's eta edges should span [-1, 1])."""
        return self._place("eta3", clusters)

    def interpolate_cross_eta3(self, clusters) -> np.ndarray:
        """The photons of ``clusters`` by cross eta3 (placed as ``interpolate_eta3``)."""
        return self._place("cross-eta3", clusters)


def _etas(kind: str, clusters) -> np.ndarray:
    rows, layout = _clusters_arg(clusters)
    return _cluda._etas(kind, rows, layout).view(ETA_DTYPE)


def eta2(clusters) -> np.ndarray:
    """aare's ``calculate_eta2`` of every cluster (``clusters`` as for ``Interpolator``): rows
    of ``ETA_DTYPE``, ``x``, ``y`` (float64), ``c`` (int32: the quadrant, 0 top-left, 1
    top-right, 2 bottom-left, 3 bottom-right, the first largest in that order) and ``sum``
    (the quadrant's sum). ``sum`` is float64 here (an exact integer sum); aare's has the
    cluster's value type (int32 for cluster files)."""
    return _etas("eta2", clusters)


def full_eta2(clusters) -> np.ndarray:
    """aare's ``calculate_full_eta2``: the eta2 quadrant, ``x`` = its higher column's sum over
    its sum, likewise ``y``; fields as ``eta2`` (``sum`` float64; aare's is the cluster's value
    type)."""
    return _etas("full-eta2", clusters)


def eta3(clusters) -> np.ndarray:
    """aare's ``calculate_eta3`` on the central 3x3: ``x = (right column - left column) /
    sum``, likewise ``y``; ``c`` is 0; ``sum`` the 3x3 sum as float64 (aare's is the cluster's
    value type)."""
    return _etas("eta3", clusters)


def cross_eta3(clusters) -> np.ndarray:
    """aare's ``calculate_cross_eta3`` on the central 3x3: ``x = (right - left) / (left +
    centre + right)`` of the centre's row, likewise its column; ``c`` is 0; ``sum`` the 3x3 sum
    as float64 (aare's is the cluster's value type)."""
    return _etas("cross-eta3", clusters)
