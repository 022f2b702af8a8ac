"""Cluster arrays: their dtype, their sums, their spectrum."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import _cluda
from ._common import _CLUSTER_SIZE


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
