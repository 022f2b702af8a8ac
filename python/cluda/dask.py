"""Many acquisitions on a ``dask.distributed`` cluster: one task per input.

``find_files(client, inputs, pedestal, out_dir, ...)`` does what ``cluda.find_files`` does,
with each input found by a task on one of the cluster's workers. Each worker process keeps
one finder (on its GPU when it sees one: give each worker one GPU, e.g. through
``CUDA_VISIBLE_DEVICES``) with the pedestal read once, for every task with the same pedestal
file and finder options; the outputs are named on the client, by the rule of
``cluda find --out-dir`` (so the workers write exactly the files, byte for byte, that the
command line writes). The client and the workers must see the files under the same paths (a
shared file system).

A worker killed mid-task (by its nanny, the OOM killer, SIGKILL) cannot remove the temporary
file it was writing, ``.<output>.<pid>@<host>.<random>.tmp`` beside the output (``<host>``:
eight hex digits hashed from the host name); the output itself is never left half-written.
When the task runs again, the writer of the same output removes such a file, but only when it
is provably stale: written on the same host, its process gone, and not locked (every writer
holds an advisory ``flock`` on its temporary file while it writes, so a live writer's file,
even one in another container's pid namespace or on another machine of a file system whose
locks are shared, is never touched). A temporary file left by a worker on another host is
not removed by this rule; it is safe to delete by hand once no task writes that output.

Needs the package's ``dask`` extra (``pip install 'cluda[dask]'``, i.e.
``dask[distributed]``); ``import cluda`` does not.
"""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple

try:
    import distributed
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "cluda.dask needs dask.distributed, which is not installed: install the package's "
        "'dask' extra (pip install 'cluda[dask]', or pip install 'dask[distributed]')"
    ) from e

from . import (
    _CLUSTER_SIZE,
    _DEVICE,
    _N_SIGMA,
    _PRECISION,
    _THRESHOLD,
    PathLike,
    _cluda,
    _finder_options,
    _paths,
    _summary,
)

__all__ = ["find_files"]

#: This worker process's finder: ``(key, FileSession)`` or None. One at a time, so a worker
#: holds one device's memory; a task with another pedestal or options replaces it.
_finder: Optional[Tuple[Tuple[Any, ...], Any]] = None
_finder_lock = threading.Lock()


def _pedestal_key(pedestal: str) -> Tuple[Any, ...]:
    """The pedestal file as the finder cache knows it: its path, size and modification time
    (a pedestal file written anew under the same path is read anew)."""
    st = os.stat(pedestal)
    return (os.path.abspath(pedestal), st.st_size, st.st_mtime_ns)


def _session(pedestal: str, options: Dict[str, Any]):
    """This worker process's finder for ``pedestal`` and ``options``, opened on first use
    (the caller holds ``_finder_lock``)."""
    global _finder
    key = (_pedestal_key(pedestal), tuple(sorted(options.items())))
    if _finder is not None and _finder[0] == key:
        return _finder[1]
    if _finder is not None:
        _finder[1].close()
        _finder = None
    session = _cluda.FileSession(pedestal, **options)
    _finder = (key, session)
    return session


def _find_one(input: str, output: str, pedestal: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """A worker's task: finds ``input`` into ``output`` with this process's finder. Tasks of
    one worker process run one at a time (a worker with several threads shares one finder,
    which finds one input at a time anyway), so none closes the finder another is using."""
    with _finder_lock:
        (row,) = _session(pedestal, options).find([input], [output])
    row = _summary(row)
    try:
        row["worker"] = distributed.get_worker().address
    except ValueError:  # not on a worker (called directly)
        row["worker"] = None
    return row


def _failed(input: str, error: str) -> Dict[str, Any]:
    """The summary of an input that ran no task, or whose task failed: nothing written."""
    return {
        "input": input,
        "output": None,
        "frames": 0,
        "clusters": 0,
        "seconds": 0.0,
        "input_seconds": 0.0,
        "device": None,
        "warning": None,
        "error": error,
        "worker": None,
    }


def find_files(
    client: "distributed.Client",
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
) -> List[Dict[str, Any]]:
    """Finds the clusters of many acquisitions on the cluster of ``client``, one task per
    input, each into its own cluster file in ``out_dir``.

    The arguments and the result are ``cluda.find_files``'s (each input starts from the
    pedestal as read: there is no ``carry_pedestal`` across workers), and each summary also
    says which ``worker`` found it. The client opens every input (headers only) to name the
    outputs as ``cluda find --out-dir`` names them; an input that cannot be opened is reported
    without a task. A task that fails (the input, the worker's device, a worker lost) is
    reported in its input's summary (``error``); the others still run. ``threads`` is the CPU
    finder's threads per worker (default every core of the worker's machine: give it the
    cores the worker was given).
    """
    paths = _paths(inputs)
    pedestal = os.path.abspath(os.fspath(pedestal))
    out_dir = os.path.abspath(os.fspath(out_dir))
    options = _finder_options(cluster_size, n_sigma, precision, threshold, device, threads)
    # Checked here, before any task, by the same code as the workers'.
    _cluda.check_options(**options)
    plan = _cluda.plan_outputs(paths, pedestal, out_dir)
    run = uuid.uuid4().hex[:8]
    results: List[Optional[Dict[str, Any]]] = [None] * len(paths)
    futures = {}
    for k, (path, (output, error)) in enumerate(zip(paths, plan)):
        if error is not None:
            results[k] = _failed(path, error)
            continue
        output = os.fspath(output)
        futures[k] = client.submit(
            _find_one,
            os.path.abspath(path),
            output,
            pedestal,
            options,
            key=f"cluda-find-{run}-{k}",
            pure=False,
        )
    for k, future in futures.items():
        try:
            row = future.result()
            row["input"] = paths[k]
            results[k] = row
        except Exception as e:  # a task's failure stays with its input
            results[k] = _failed(paths[k], f"{type(e).__name__}: {e}")
    return [r for r in results if r is not None]
