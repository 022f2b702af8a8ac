"""`cluda.find_files`: many acquisitions, each to its own cluster file, as `cluda find --data A
B C --out-dir D` writes them (byte for byte, same names), a failing input in the middle
reported in its summary while the others run; and the per-worker finder of `cluda.dask`
(`FileSession`) used directly."""

import os
import subprocess
import sys

import pytest

import cluda
from cluda import _cluda
import gpu_check
from conftest import cli_path


@pytest.fixture(scope="module")
def many(tmp_path_factory, cli):
    tmp = tmp_path_factory.mktemp("many")
    return (tmp, str(cli_path()), *gpu_check.many_inputs(tmp, str(cli_path())))


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_find_files_writes_what_the_cli_writes(many, device):
    tmp, exe = many[0], many[1]
    gpu_check.check_find_files(tmp, device, exe)


def test_summaries_and_names_never_replace(many):
    tmp, exe, pedestal, inputs, good = many
    out = tmp / "twice"
    first = cluda.find_files(good, pedestal, out, device="cpu", threads=1)
    assert [os.path.basename(r["output"]) for r in first] == [
        "data.clust", "data_master_0.clust", "data_2.clust"
    ]
    assert all(r["error"] is None and r["warning"] is None for r in first)
    assert [r["frames"] for r in first] == [30, 25, 20]
    assert all(r["seconds"] > 0 and r["device"].startswith("cpu") for r in first)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = cluda.find_files(good[:1], pedestal, out, device="cpu")
    assert os.path.basename(again[0]["output"]) == "data_3.clust"
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name in before} == before
    assert (out / "data_3.clust").read_bytes() == before["data.clust"]


def test_carry_pedestal_is_the_clis(many):
    tmp, exe, pedestal, inputs, good = many
    npys = [good[0], good[2]]
    rows = cluda.find_files(npys, pedestal, tmp / "carry", device="cpu", carry_pedestal=True)
    subprocess.run([exe, "find", "--pedestal", str(pedestal), "--data", *map(str, npys),
                    "--out-dir", str(tmp / "carry-cli"), "--device", "cpu", "--carry-pedestal"],
                   check=True, capture_output=True)
    fresh = cluda.find_files(npys[1:], pedestal, tmp / "fresh", device="cpu")
    for r in rows:
        name = os.path.basename(r["output"])
        assert (tmp / "carry" / name).read_bytes() == (tmp / "carry-cli" / name).read_bytes()
    # The second input carried the first one's pedestal: not what it gives from the pedestal.
    assert (tmp / "carry" / "data_2.clust").read_bytes() != (tmp / "fresh" / "data.clust").read_bytes()


def test_errors_of_the_whole_run_raise(many, tmp_path):
    _, _, pedestal, inputs, good = many
    with pytest.raises(FileNotFoundError, match="nothing.npy"):
        cluda.find_files(good, tmp_path / "nothing.npy", tmp_path / "o")
    with pytest.raises(ValueError, match="cluster"):
        cluda.find_files(good, pedestal, tmp_path / "o", cluster_size=4)
    with pytest.raises(ValueError, match="threads"):
        cluda.find_files(good, pedestal, tmp_path / "o", threads=0)
    with pytest.raises(ValueError, match="cluster_size"):
        cluda.find_files(good, pedestal, tmp_path / "o", cluster_size=-3)
    with pytest.raises(ValueError, match="nsigma"):
        cluda.find_files(good, pedestal, tmp_path / "o", n_sigma=-1.0)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(ValueError, match="out_dir"):
        cluda.find_files(good, pedestal, tmp_path / "file")
    # No output may be an input: out_dir beside `data.npy` would name its output... itself
    # only with extension .clust, so an input called `x.clust` is the case.
    clash = tmp_path / "clash"
    clash.mkdir()
    (clash / "data.clust").write_bytes((good[0]).read_bytes())
    rows = cluda.find_files([clash / "data.clust"], pedestal, clash, device="cpu")
    assert os.path.basename(rows[0]["output"]) == "data_2.clust", "an existing file is not replaced"
    assert cluda.find_files([], pedestal, tmp_path / "none") == []
    with pytest.raises(TypeError, match="list of paths"):
        cluda.find_files(str(good[0]), pedestal, tmp_path / "o")


def test_file_session_is_reused_and_closed(many, tmp_path):
    tmp, exe, pedestal, inputs, good = many
    s = _cluda.FileSession(str(pedestal), device="cpu", threads=1)
    assert s.shape == (40, 48) and s.device.startswith("cpu")
    plan = _cluda.plan_outputs([str(p) for p in inputs], str(pedestal), str(tmp_path))
    # Missing, another shape, cut short: refused when opened.
    assert [o is None for o, _ in plan] == [False, True, False, True, True, False]
    for output, error in plan:
        assert (output is None) != (error is None)
    # Inputs one call at a time through one session, in another order: the same files.
    want = {}
    for k in (2, 0, 5):
        (row,) = s.find([str(inputs[k])], [str(tmp_path / f"{k}.clust")])
        assert row["error"] is None, row
        single = tmp_path / "single.clust"
        single.unlink(missing_ok=True)  # the CLI replaces no file
        subprocess.run([exe, "find", "--pedestal", str(pedestal), "--data", str(inputs[k]),
                        "--out", str(single), "--device", "cpu"], check=True, capture_output=True)
        assert (tmp_path / f"{k}.clust").read_bytes() == single.read_bytes()
        want[k] = single.read_bytes()
    (row,) = s.find([str(inputs[1])], [str(tmp_path / "missing.clust")])
    assert row["error"] and "missing.npy" in row["error"] and row["output"] is None
    rows = s.find([str(inputs[0])], [None])
    assert rows[0]["output"] is None and rows[0]["frames"] == 30
    with pytest.raises(ValueError, match="outputs"):
        s.find([str(inputs[0])], [])
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        s.find([str(inputs[0])], [None])


def test_import_cluda_without_dask():
    """`import cluda` needs no dask; `import cluda.dask` names the extra when it is missing."""
    code = (
        "import sys; sys.modules['distributed'] = None; sys.modules['dask'] = None\n"
        "import cluda; assert hasattr(cluda, 'find_files')\n"
        "try:\n    import cluda.dask\nexcept ImportError as e:\n    print(e)\n"
        "else:\n    raise SystemExit('cluda.dask imported without dask')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "cluda[dask]" in res.stdout and "dask[distributed]" in res.stdout


def test_ctrl_c_stops_a_campaign_at_a_frame_boundary(cli, tmp_path):
    """SIGINT during a long `find_files` (the GIL released): KeyboardInterrupt within a moment,
    the unfinished input's temporary file removed, the finished inputs' files whole."""
    import signal
    import threading
    import time

    exe = str(cli_path())
    subprocess.run([exe, "gen", "--out", str(tmp_path), "--frames", "100", "--pedestal-frames",
                    "100", "--seed", "5"], check=True, capture_output=True)
    data = tmp_path / "data.npy"
    inputs = [data] * 80  # 8000 frames of 400 x 400 on one CPU thread: seconds
    out = tmp_path / "out"
    timer = threading.Timer(0.5, signal.raise_signal, (signal.SIGINT,))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        cluda.find_files(inputs, tmp_path / "pedestal.npy", out, device="cpu", threads=1)
    took = time.monotonic() - start
    timer.join()
    names = sorted(p.name for p in out.iterdir())
    assert all(not n.startswith(".") for n in names), f"a temporary file was left: {names}"
    assert len(names) < len(inputs), f"the run went on to its end ({took:.1f} s)"
    single = tmp_path / "single.clust"
    subprocess.run([exe, "find", "--pedestal", str(tmp_path / "pedestal.npy"), "--data", str(data),
                    "--out", str(single), "--device", "cpu"], check=True, capture_output=True)
    for n in names:
        assert (out / n).read_bytes() == single.read_bytes()
