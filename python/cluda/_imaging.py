"""Eta cubes and sub-pixel images from files (``eta_cube``, ``image``), as ``cluda eta`` and
``cluda image`` make them."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _cluda
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
)


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
        **_finder_options(cluster_size, n_sigma, precision, threshold, device, threads),
        carry_pedestal=carry_pedestal,
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
        **_finder_options(cluster_size, n_sigma, precision, threshold, device, threads),
        carry_pedestal=carry_pedestal,
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
