"""The Python finder against a pure-numpy oracle (F64) and against the `cluda` CLI (every size,
precision and threshold), frame by frame."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cluda
from conftest import random_frames
from oracle import OracleF64, as_tuples, assert_same

SIZES = [3, 5, 7, 9]
PRECISIONS = ["f64", "f32", "f32naive"]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("threshold", ["live", "frozen"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    rows=st.integers(1, 14),
    cols=st.integers(1, 14),
    n=st.integers(1, 6),
    extra=st.integers(0, 3),
    frames=st.integers(1, 8),
    n_sigma=st.sampled_from([0.0, 1.0, 2.5, 5.0]),
)
def test_f64_matches_oracle(size, threshold, seed, rows, cols, n, extra, frames, n_sigma):
    rng = np.random.default_rng(seed)
    ped = random_frames(rng, n + extra, rows, cols, photons=0.0)
    data = random_frames(rng, frames, rows, cols)
    finder = cluda.ClusterFinder(
        (rows, cols), cluster_size=size, n_sigma=n_sigma, pedestal_frames=n,
        threshold=threshold, device="cpu", threads=1,
    )
    oracle = OracleF64(rows, cols, size, n_sigma, n, threshold)
    finder.push_pedestal(ped)
    oracle.push_pedestal(ped)
    np.testing.assert_array_equal(finder.pedestal_mean(), oracle.mean())
    # Frame by frame, then the rest in one call: the same clusters either way.
    half = frames // 2
    got = [finder.find(f) for f in data[:half]]
    got.append(finder.find(data[half:]))
    assert_same(np.concatenate(got), oracle.find(data))


@pytest.mark.parametrize("size", SIZES)
def test_oracle_finds_clusters_at_all(size):
    """Guards the oracle test against passing vacuously on empty results."""
    rng = np.random.default_rng(size)
    ped = random_frames(rng, 8, 12, 13, photons=0.0)
    data = random_frames(rng, 6, 12, 13)
    oracle = OracleF64(12, 13, size, 3.0, 8)
    oracle.push_pedestal(ped)
    expected = oracle.find(data)
    assert len(expected) > 5
    f = cluda.ClusterFinder((12, 13), cluster_size=size, n_sigma=3.0, pedestal_frames=8, device="cpu")
    f.push_pedestal(ped)
    assert_same(f.find(data), expected)


def _write(path, arr):
    np.save(path, arr)
    return path


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("threshold", ["live", "frozen"])
def test_same_as_cli(tmp_path, cli, size, precision, threshold):
    rng = np.random.default_rng(1000 * size + len(precision) + len(threshold))
    rows, cols = 23, 31
    ped = random_frames(rng, 20, rows, cols, photons=0.0)
    data = random_frames(rng, 12, rows, cols)
    p, d = _write(tmp_path / "p.npy", ped), _write(tmp_path / "d.npy", data)
    out = tmp_path / "cli.clust"
    cli("find", "--pedestal", p, "--data", d, "--cluster", size, "--precision",
        "f32-naive" if precision == "f32naive" else precision, "--threshold", threshold,
        "--nsigma", 3, "--device", "cpu", "--out", out)
    expected, numbers = cluda.read_cluster_file(out, size, with_frame_numbers=True)
    assert list(numbers) == list(range(len(data)))
    f = cluda.ClusterFinder((rows, cols), cluster_size=size, n_sigma=3, precision=precision,
                            threshold=threshold, device="cpu", pedestal_frames=len(ped))
    f.push_pedestal(ped)
    got = np.concatenate([f.find(data[i : i + 1]) for i in range(len(data))])
    assert len(got) > 0
    np.testing.assert_array_equal(got, expected)
    # And the file Python writes is the CLI's, byte for byte.
    mine = tmp_path / "py.clust"
    cluda.write_cluster_file(mine, got, frames=len(data))
    assert mine.read_bytes() == out.read_bytes()


def test_moench_data_same_as_cli(tmp_path, cli):
    """Generated MOENCH-like frames (as `cluda gen` writes them), found through the CLI and
    through Python (whole, chunked and from a memory map)."""
    cli("gen", "--out", tmp_path, "--frames", 30, "--pedestal-frames", 50, "--rows", 100,
        "--cols", 120, "--seed", 7)
    ped = cluda.read_npy_frames(tmp_path / "pedestal.npy")
    data = cluda.read_npy_frames(tmp_path / "data.npy")
    np.testing.assert_array_equal(ped, cluda.generate(50, 0, False, shape=(100, 120), seed=7))
    np.testing.assert_array_equal(data, cluda.generate(30, 50, True, shape=(100, 120), seed=7))
    out = tmp_path / "c.clust"
    cli("find", "--pedestal", tmp_path / "pedestal.npy", "--data", tmp_path / "data.npy",
        "--device", "cpu", "--out", out)
    expected = cluda.read_cluster_file(out)
    assert len(expected) > 1000

    def finder():
        f = cluda.ClusterFinder((100, 120), pedestal_frames=50, device="cpu")
        f.push_pedestal(ped)
        return f

    np.testing.assert_array_equal(finder().find(data), expected)
    chunks = list(finder().find_iter(data, chunk=7))
    assert len(chunks) == 5
    np.testing.assert_array_equal(np.concatenate(chunks), expected)
    mm = np.load(tmp_path / "data.npy", mmap_mode="r")
    np.testing.assert_array_equal(np.concatenate(list(finder().find_iter(mm, chunk=8))), expected)
    f = finder()
    np.testing.assert_array_equal(
        np.concatenate(list(f.find_iter((data[i : i + 4] for i in range(0, 30, 4))))), expected
    )
    assert f.frames_found == 30


def test_frame_numbering_and_helpers():
    ped = cluda.generate(20, 0, False, shape=(40, 50))
    data = cluda.generate(6, 20, True, shape=(40, 50))
    f = cluda.ClusterFinder((40, 50), pedestal_frames=20, device="cpu")
    f.push_pedestal(ped)
    a = f.find(data[:3])
    b = f.find(data[3])
    c = f.find(data[4:], first_frame=100)
    assert set(a["frame"]) <= {0, 1, 2} and set(b["frame"]) == {3}
    assert set(c["frame"]) <= {100, 101} and f.frames_found == 102
    assert a.dtype == cluda.cluster_dtype(3)
    # Rows in frame order, then row-major order of the centres.
    key = a["frame"].astype(np.int64) << 32 | a["y"].astype(np.int64) << 16 | a["x"]
    assert np.all(np.diff(key) > 0)
    sums = cluda.cluster_sums(a)
    np.testing.assert_array_equal(sums, a["data"].astype(np.int64).sum(axis=1))
    counts, edges = cluda.spectrum(a, bins=10, range=(0, 1000))
    assert counts.sum() == np.count_nonzero((sums >= 0) & (sums <= 1000)) and len(edges) == 11
    assert f.shape == (40, 50) and f.cluster_size == 3 and f.precision == "f64"
    assert f.threshold == "live" and f.n_sigma == 5.0 and f.pedestal_frames == 20
    assert f.device == "cpu" and "cpu" in f.device_note and f.is_ready
    np.testing.assert_array_equal(f.pedestal, f.pedestal_mean())
    np.testing.assert_array_equal(f.noise, f.pedestal_std())
    assert "cluda.ClusterFinder(" in repr(f)
    assert 0 < f.last_find_seconds < 60


def test_strided_input_is_copied_and_gives_the_same_result():
    ped = cluda.generate(10, 0, False, shape=(30, 40))
    data = cluda.generate(4, 10, True, shape=(30, 80))[:, :, ::2]  # strided view
    assert not data.flags.c_contiguous
    results = []
    for frames in (data, np.ascontiguousarray(data), np.asfortranarray(data)):
        f = cluda.ClusterFinder((30, 40), pedestal_frames=10, device="cpu")
        f.push_pedestal(ped)
        results.append(f.find(frames))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[2], results[1])


def test_defaults_are_the_cli_defaults(cli):
    """The package's finder defaults (read from the Rust library) are `cluda find`'s, as its
    help prints them, in every signature that takes them."""
    import inspect
    import re

    import cluda.dask

    help_text = cli("find", "--help")
    cli_default = {
        opt: re.search(rf"--{opt} .*?\[default: ([^\]]+)\]", help_text, re.S).group(1)
        for opt in ("cluster", "nsigma", "threshold", "precision", "device")
    }
    names = {
        "cluster_size": "cluster",
        "n_sigma": "nsigma",
        "threshold": "threshold",
        "precision": "precision",
        "device": "device",
    }
    for fn in (cluda.ClusterFinder.__new__, cluda.find_files, cluda.dask.find_files):
        params = inspect.signature(fn).parameters
        for name, opt in names.items():
            got = params[name].default
            want = cli_default[opt]
            assert str(got) == want or (isinstance(got, float) and got == float(want)), (
                fn.__qualname__, name, got, want)
