"""The find paths of `gpu_check.py` run on the CPU finder: the engine with the CPU finder
(`via="engine"`), memory maps read from their file, `find_file`, `find_iter` on its own
thread, raw acquisitions, result memory that grows, iterations stopped early; each against
the CPU finder's plain `find` on the same frames (and the CLI's cluster file)."""

import numpy as np
import pytest

import cluda
import gpu_check


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return gpu_check.Data(tmp_path_factory.mktemp("engine"), 50, shape=(100, 120), pedestal=40)


@pytest.mark.parametrize("size", [3, 9])
def test_every_path_equals_find(data, size):
    gpu_check.check_paths(data, "cpu", size)


def test_every_path_f32_frozen(data):
    gpu_check.check_paths(data, "cpu", 5, precision="f32", threshold="frozen")


def test_small_frames(tmp_path):
    gpu_check.check_paths(gpu_check.Data(tmp_path, 23, shape=(7, 11), pedestal=9), "cpu", 3)


def test_same_as_cli(data, cli):
    exe = str(__import__("conftest").cli_path())
    gpu_check.check_cli(data, "cpu", 3, exe)
    gpu_check.check_raw(data.tmp, "cpu", exe)


def test_large_results_grow_the_result_memory(tmp_path):
    gpu_check.check_growth(tmp_path, "cpu")


def test_an_iteration_stopped_early(data):
    gpu_check.check_early_stop(data, "cpu")


def test_find_iter_details(data):
    f = gpu_check._finder(data, "cpu")
    it = f.find_iter(data.data, chunk=20)
    assert f.frames_found == 0, "nothing runs before the first next()"
    f.find(data.data[:2], first_frame=0)  # not started yet: the finder is free
    chunks = list(it)
    assert len(chunks) == 3 and f.frames_found == 52
    assert list(it) == [], "an exhausted iterator stays exhausted"
    assert len(list(f.find_iter(data.data[:0], chunk=5))) == 0
    # Errors surface at next(): a finder without a pedestal.
    g = cluda.ClusterFinder(data.shape, pedestal_frames=5, device="cpu")
    with pytest.raises(cluda.PedestalNotReadyError):
        next(g.find_iter(data.data, chunk=4))
    with pytest.raises(cluda.PedestalNotReadyError):
        g.find(data.data, first_frame=100)
    assert g.frames_found == 0, "calls that consumed nothing leave the count alone"
    g.push_pedestal(data.ped[:5])  # usable after the failed iteration
    with pytest.raises(ValueError, match="shape mismatch"):
        next(gpu_check._finder(data, "cpu").find_iter(np.zeros((3, 4, 5), np.uint16)))
    # A closed iterator ends, and frees the finder.
    f = gpu_check._finder(data, "cpu")
    it = f.find_iter(data.data, chunk=10)
    next(it)
    it.close()
    assert list(it) == []
    f.find(data.data[:1])


def test_raw_first_frame_is_refused(data, cli):
    exe = str(__import__("conftest").cli_path())
    gpu_check.check_raw(data.tmp, "cpu", exe)  # writes data.tmp / "raw"
    f = gpu_check._finder(data, "cpu")
    with pytest.raises(ValueError, match="header frame numbers"):
        f.find(cluda.RawFile(data.tmp / "raw" / "data_master_0.json"), first_frame=0)


def test_count_only_and_bad_via(data):
    f = gpu_check._finder(data, "cpu")
    n = cluda._cluda.ClusterFinder.find(f, data.data, None, None, "engine", False)
    assert n == len(gpu_check._finder(data, "cpu").find(data.data)) > 0
    with pytest.raises(ValueError, match="not one of auto, engine, direct"):
        cluda._cluda.ClusterFinder.find(f, data.data, None, None, "fast")


def test_memmap_that_is_not_the_whole_file_is_read_as_memory(data):
    mm = np.load(data.data_path, mmap_mode="r")
    want = gpu_check._finder(data, "cpu").find(data.data[10:30], first_frame=0)
    got = gpu_check._finder(data, "cpu").find(mm[10:30], first_frame=0)
    np.testing.assert_array_equal(got, want)
    cow = np.load(data.data_path, mmap_mode="c")
    cow[0] = 0  # a copy-on-write map differs from its file: its memory is what counts
    changed = data.data.copy()
    changed[0] = 0
    np.testing.assert_array_equal(gpu_check._finder(data, "cpu").find(cow),
                                  gpu_check._finder(data, "cpu").find(changed))


def test_find_iter_chunks_a_raw_acquisition_by_position(tmp_path, cli):
    """`find_iter` over a raw acquisition (header frame numbers from 1, not 0): chunk `k`
    holds the frames at positions `k * chunk ..`, each under its header number, whatever the
    numbers are (the engine reports frames by their numbers; the position is counted apart)."""
    cli("gen", "--out", tmp_path, "--raw", "--frames", 45, "--pedestal-frames", 20,
        "--rows", 24, "--cols", 32, "--seed", 3)
    ped = cluda.RawFile(tmp_path / "pedestal_master_0.json").read()[1]
    numbers = cluda.RawFile(tmp_path / "data_master_0.json").read()[0]
    assert numbers[0] != 0, "the test needs numbers that are not positions"
    f = cluda.ClusterFinder((24, 32), pedestal_frames=20, device="cpu", n_sigma=3.0)
    f.push_pedestal(ped)
    chunk = 10
    chunks = list(f.find_iter(cluda.RawFile(tmp_path / "data_master_0.json"), chunk=chunk))
    assert len(chunks) == 5
    for k, c in enumerate(chunks):
        mine = set(int(n) for n in numbers[k * chunk:(k + 1) * chunk])
        assert set(int(n) for n in c["frame"]) <= mine, (k, sorted(set(c["frame"])), mine)
    g = cluda.ClusterFinder((24, 32), pedestal_frames=20, device="cpu", n_sigma=3.0)
    g.push_pedestal(ped)
    whole = g.find(cluda.RawFile(tmp_path / "data_master_0.json"))
    assert np.array_equal(np.concatenate(chunks), whole)
    assert len(whole) > 0
