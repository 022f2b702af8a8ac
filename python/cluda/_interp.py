"""Eta interpolation, shaped like aare's (``aare.Interpolator``, ``aare.calculate_eta2``, ...)."""

from __future__ import annotations

import numpy as np

from . import _cluda


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
