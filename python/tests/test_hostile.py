"""The second hostile round (issue 25) from Python: the cluster-file writer is atomic and
refuses to replace what is not a cluster file, huge requests are MemoryError (not an abort),
thread counts are capped, and bad numbers name their parameter."""

import hashlib
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import cluda


def digest(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


def clusters(n_frames=10, per_frame=3, size=3):
    rng = np.random.default_rng(5)
    rows = np.zeros(n_frames * per_frame, dtype=cluda.cluster_dtype(size))
    rows["frame"] = np.repeat(np.arange(n_frames, dtype=np.int32), per_frame)
    rows["x"] = rng.integers(0, 400, len(rows))
    rows["y"] = rng.integers(0, 400, len(rows))
    return rows


def test_a_rejected_write_leaves_the_old_file(tmp_path):
    keep = tmp_path / "keep.clust"
    c = clusters()
    cluda.write_cluster_file(keep, c)
    before = digest(keep)
    with pytest.raises(ValueError, match="not next in `frames`"):
        cluda.write_cluster_file(keep, c, frames=[0, 1, 2, 3, 4, 5, 6, 7, 9, 8])
    assert digest(keep) == before
    with pytest.raises(ValueError):
        cluda.write_cluster_file(keep, c, frames=[0, 1, 2, 3, 4, 5, 6, 7, 9, 8], append=True)
    assert digest(keep) == before
    assert sorted(os.listdir(tmp_path)) == ["keep.clust"]


def test_a_file_that_is_not_a_cluster_file_is_not_replaced(tmp_path):
    d = tmp_path / "d.npy"
    np.save(d, np.arange(10, dtype=np.uint16))
    before = digest(d)
    # Refused as any existing file is (issue 32: cluster files too, without overwrite=True).
    with pytest.raises(FileExistsError, match=r"d\.npy: exists.*overwrite=True"):
        cluda.write_cluster_file(d, clusters())
    with pytest.raises(ValueError, match="not a 3x3 cluster file"):
        cluda.write_cluster_file(d, clusters(), append=True)
    assert digest(d) == before
    cluda.write_cluster_file(d, clusters(), overwrite=True)
    numbers = cluda.read_cluster_file(d, 3)
    assert len(numbers) == 30
    assert sorted(os.listdir(tmp_path)) == ["d.npy"]


def test_append_keeps_the_old_frames(tmp_path):
    p = tmp_path / "s.clust"
    c = clusters(4)
    cluda.write_cluster_file(p, c[:6])
    cluda.write_cluster_file(p, c[6:], append=True)
    got = cluda.read_cluster_file(p, 3)
    np.testing.assert_array_equal(got["frame"], c["frame"])


def test_a_full_disk_leaves_the_old_file_and_no_partial_one(tmp_path):
    keep = tmp_path / "keep.clust"
    cluda.write_cluster_file(keep, clusters(2))
    before = digest(keep)
    # A 64 KiB file-size limit stands for a full disk: writing 50 000 clusters fails.
    code = (
        "import resource, signal, sys, numpy as np, cluda\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))\n"
        "rows = np.zeros(50000, dtype=cluda.cluster_dtype(3))\n"
        "rows['frame'] = np.arange(50000) // 10\n"
        "try:\n"
        "    cluda.write_cluster_file(sys.argv[1], rows)\n"
        "except OSError as e:\n"
        "    print('OSError', e)\n"
        "    sys.exit(3)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(keep)], capture_output=True, text=True)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "keep.clust" in r.stdout
    assert digest(keep) == before
    assert sorted(os.listdir(tmp_path)) == ["keep.clust"]


def test_huge_requests_are_memory_errors(tmp_path):
    # 200 000 frames of 400 x 400: 64 GB.
    with pytest.raises(MemoryError, match="generated frames"):
        cluda.generate(200000)
    with pytest.raises(MemoryError):
        cluda.generate(2**62, shape=(400, 400))
    # A sparse 320 GB .npy: its buffer is checked against host memory, not called a CUDA error.
    big = tmp_path / "big.npy"
    header = "{'descr': '<u2', 'fortran_order': False, 'shape': (1000000, 400, 400), }"
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    with open(big, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        f.truncate(f.tell() + 1000000 * 400 * 400 * 2)
    with pytest.raises(MemoryError, match="big.npy"):
        cluda.read_npy_frames(big)


def test_thread_counts_are_capped():
    t = time.monotonic()
    with pytest.raises(ValueError, match="threads"):
        cluda.ClusterFinder((8, 8), device="cpu", threads=10**6)
    assert time.monotonic() - t < 5


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: cluda.generate(-1), "count"),
        (lambda: cluda.generate(2, first=-5), "first"),
        (lambda: cluda.generate(2, seed=-1), "seed"),
        (lambda: cluda.ClusterFinder((-8, 8), device="cpu"), "shape"),
        (lambda: cluda.ClusterFinder((8, 8), device="cpu", threads=-2), "threads"),
        (lambda: cluda.ClusterFinder((8, 8), device="cpu", pedestal_frames=-1), "pedestal_frames"),
    ],
)
def test_negative_numbers_name_their_parameter(call, name):
    with pytest.raises((ValueError, OverflowError, TypeError)) as e:
        call()
    assert name in str(e.value), str(e.value)
