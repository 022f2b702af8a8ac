"""Every error path: the right Python exception, with the Rust library's message."""

import json

import numpy as np
import pytest

import cluda

SHAPE = (20, 24)


def ready_finder(**kw):
    f = cluda.ClusterFinder(SHAPE, pedestal_frames=5, device="cpu", **kw)
    f.push_pedestal(cluda.generate(5, 0, False, shape=SHAPE))
    return f


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(shape=(0, 24)), "invalid parameter `rows/cols`"),
        (dict(shape=(70000, 2)), "at most 65536 rows and columns"),
        (dict(cluster_size=4), "cluster size 4 is not supported; use 3, 5, 7 or 9"),
        (dict(n_sigma=-1.0), "invalid parameter `nsigma`: must be finite and >= 0, got -1"),
        (dict(n_sigma=float("nan")), "invalid parameter `nsigma`"),
        (dict(precision="f16"), "`f16` is not one of f64, f32, f32-naive"),
        (dict(threshold="median"), "`median` is not one of live, frozen"),
        (dict(device="tpu"), "`tpu` is not one of auto, cpu, gpu"),
        (dict(pedestal_frames=0), "the pedestal window needs at least one frame"),
        (dict(threads=0), "invalid parameter `threads`: must be between 1 and"),
    ],
)
def test_bad_finder_parameters(kw, message):
    args = dict(shape=SHAPE, device="cpu")
    args.update(kw)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cluda.ClusterFinder(**args)


def test_negative_parameters_are_value_errors_not_overflow():
    with pytest.raises((ValueError, OverflowError)):
        cluda.ClusterFinder(SHAPE, pedestal_frames=-1)


def test_gpu_without_gpu():
    """On a machine without a GPU, device="gpu" is a NoGpuError; skipped where there is one
    (test_gpu.py covers that case)."""
    import gpu_check

    if gpu_check.gpu_available():
        pytest.skip("a GPU is present: nothing to refuse")
    with pytest.raises(cluda.NoGpuError, match="^no CUDA GPU available") as e:
        cluda.ClusterFinder(SHAPE, device="gpu")
    assert isinstance(e.value, RuntimeError)


def test_exception_hierarchy():
    assert issubclass(cluda.PedestalNotReadyError, RuntimeError)
    assert issubclass(cluda.ClusterLimitError, RuntimeError)
    assert issubclass(cluda.NoGpuError, RuntimeError)
    assert issubclass(cluda.CudaError, RuntimeError)
    assert issubclass(cluda.GpuMemoryError, MemoryError)
    assert issubclass(cluda.FileFormatError, OSError)


def test_pedestal_not_ready():
    f = cluda.ClusterFinder(SHAPE, pedestal_frames=5, device="cpu")
    f.push_pedestal(cluda.generate(3, 0, False, shape=SHAPE))
    assert not f.is_ready
    msg = "pedestal not ready: it holds 3 of the 5 frames it needs; push more pedestal frames first"
    with pytest.raises(cluda.PedestalNotReadyError, match=msg):
        f.find(cluda.generate(1, 5, True, shape=SHAPE))
    with pytest.raises(cluda.PedestalNotReadyError):
        f.pedestal_mean()
    with pytest.raises(cluda.PedestalNotReadyError):
        f.pedestal_std()


def test_bad_frames():
    f = ready_finder()
    good = cluda.generate(2, 5, True, shape=SHAPE)
    with pytest.raises(ValueError, match="frames must have dtype uint16.*got int32"):
        f.find(good.astype(np.int32))
    with pytest.raises(ValueError, match="dtype uint16"):
        f.push_pedestal(good.astype(">u2"))  # big-endian: not used silently
    with pytest.raises(ValueError, match="2-D .* or 3-D .* got 1 dimensions"):
        f.find(good.ravel())
    with pytest.raises(ValueError, match="got 4 dimensions"):
        f.find(good[None])
    with pytest.raises(ValueError, match=r"shape mismatch in data frames: expected 20 x 24 frames, got 20 x 23 frames"):
        f.find(np.ascontiguousarray(good[:, :, :23]))
    with pytest.raises(ValueError, match="shape mismatch"):
        f.push_pedestal(np.zeros((1, 24, 20), np.uint16))
    with pytest.raises(TypeError, match="numpy array of uint16, got list"):
        f.find([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="does not fit in the result's int32"):
        f.find(good, first_frame=2**31 - 1)
    assert f.frames_found == 0  # nothing was consumed by the failed calls
    with pytest.raises(ValueError, match="chunk must be at least 1"):
        list(f.find_iter(good, chunk=0))


def test_npy_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        cluda.read_npy_frames(tmp_path / "missing.npy")
    np.save(tmp_path / "f.npy", np.zeros((2, 3, 4), np.float32))
    with pytest.raises(cluda.FileFormatError, match="f.npy"):
        cluda.read_npy_frames(tmp_path / "f.npy")
    (tmp_path / "junk.npy").write_bytes(b"not a numpy file")
    with pytest.raises(cluda.FileFormatError):
        cluda.read_npy_frames(tmp_path / "junk.npy")
    with pytest.raises(OSError):
        cluda.read_npy_frames(tmp_path)


def test_cluster_file_errors(tmp_path):
    f = ready_finder(n_sigma=2.0)
    c = f.find(cluda.generate(3, 5, True, shape=SHAPE))
    assert len(c) > 3
    with pytest.raises(FileNotFoundError):
        cluda.read_cluster_file(tmp_path / "none.clust")
    with pytest.raises(FileNotFoundError):
        cluda.write_cluster_file(tmp_path / "no" / "dir.clust", c)
    path = tmp_path / "c.clust"
    cluda.write_cluster_file(path, c)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(cluda.FileFormatError, match="truncated cluster file"):
        cluda.read_cluster_file(path)
    with pytest.raises(ValueError, match="cluster size 4 is not supported"):
        cluda.read_cluster_file(path, cluster_size=4)
    with pytest.raises(ValueError, match="cluda.cluster_dtype"):
        cluda.write_cluster_file(path, np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="not next in `frames`"):
        cluda.write_cluster_file(path, np.concatenate([c, c]), frames=[0, 1, 2])
    with pytest.raises(ValueError, match="not next in `frames`"):
        cluda.write_cluster_file(path, c, frames=[0, 1])
    with pytest.raises(ValueError, match="cluda.cluster_dtype"):
        cluda.cluster_sums(np.zeros(3))
    with pytest.raises(ValueError, match="cluda.cluster_dtype"):
        cluda.spectrum(c[["x", "y"]])


def test_raw_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        cluda.RawFile(tmp_path / "run_master_0.json")
    (tmp_path / "bad_master_0.json").write_text("{ not json")
    with pytest.raises(cluda.FileFormatError, match="bad_master_0.json"):
        cluda.RawFile(tmp_path / "bad_master_0.json")
    (tmp_path / "empty_master_0.json").write_text(json.dumps({"Version": 7.2}))
    with pytest.raises(cluda.FileFormatError):
        cluda.RawFile(tmp_path / "empty_master_0.json")


def test_generate_errors():
    with pytest.raises(ValueError):
        cluda.generate(1, shape=(0, 10))
    with pytest.raises(MemoryError, match="do not fit in memory"):
        cluda.generate(2**62, shape=(400, 400))


def test_match_errors():
    a = np.zeros((3, 128), np.float32)
    with pytest.raises(ValueError, match="`gpu9` is not one of v1, v2, v3, v4, cpu"):
        cluda.match_nearest(a, a, version="gpu9")
    with pytest.raises(ValueError, match=r"rhs must be a 2-D \(n, 128\) array"):
        cluda.match_nearest(a, np.zeros((3, 64), np.float32))
    with pytest.raises(ValueError, match="lhs must have dtype float32"):
        cluda.match_nearest(a.astype(np.float64), a)
    with pytest.raises(ValueError, match="at least one right descriptor"):
        cluda.match_nearest(a, np.zeros((0, 128), np.float32))
    bad = a.copy()
    bad[1, 5] = np.nan
    with pytest.raises(ValueError, match="lhs"):
        cluda.match_nearest(bad, a)
    try:
        cluda.match_nearest(a, a, version="v2")
    except cluda.NoGpuError as e:
        assert str(e).startswith("no CUDA GPU available")


def test_unsorted_rows_without_frames(tmp_path):
    f = ready_finder(n_sigma=2.0)
    c = f.find(cluda.generate(3, 5, True, shape=SHAPE))
    with pytest.raises(ValueError, match="rows of a frame are not together"):
        cluda.write_cluster_file(tmp_path / "c.clust", np.concatenate([c, c]))
