"""`cluda.dask.find_files` on a real `dask.distributed.LocalCluster` (2 worker processes on
loopback): one task per input, each worker keeping one finder, outputs byte-identical to
`cluda find`'s and named as `cluda find --out-dir` names them, failing inputs reported in
their summaries. Skipped without dask.distributed, unless CLUDA_REQUIRE_DASK is set
(tools/test-python installs it and sets it)."""

import os

import pytest

import gpu_check
from conftest import cli_path

if os.environ.get("CLUDA_REQUIRE_DASK"):
    import distributed  # noqa: F401 - must be there
distributed = pytest.importorskip("distributed")

import cluda  # noqa: E402
import cluda.dask  # noqa: E402


def _opened():
    import cluda.dask as cd

    return cd._finder is not None


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster, distributed.Client(cluster) as c:
        yield c


def test_dask_find_files_writes_what_the_cli_writes(client, cli, tmp_path):
    exe = str(cli_path())
    pedestal, inputs, good = gpu_check.many_inputs(tmp_path, exe)
    out_dir = tmp_path / "dask-out"
    rows = cluda.dask.find_files(client, inputs, pedestal, out_dir, device="cpu", threads=1)
    gpu_check.check_many_outputs(tmp_path, exe, pedestal, inputs, good, out_dir, rows)
    workers = set(client.scheduler_info()["workers"])
    ran = [r for r in rows if r["error"] is None]
    assert ran and all(r["worker"] in workers for r in ran), rows
    # A second campaign with the same pedestal and options reuses each worker's finder: no
    # worker opens more than one, and both of them report one only where they ran a task.
    again = cluda.dask.find_files(client, good, pedestal, out_dir, device="cpu", threads=1)
    assert [os.path.basename(r["output"]) for r in again] == [
        "data_3.clust", "data_master_0_2.clust", "data_4.clust"
    ]
    for r, first in zip(again, [rows[0], rows[2], rows[5]]):
        assert r["error"] is None
        assert open(r["output"], "rb").read() == open(first["output"], "rb").read()
    opened = client.run(_opened)
    assert set(r["worker"] for r in ran + again) == {w for w, o in opened.items() if o}


def test_a_failing_task_is_reported_and_bad_options_raise_at_once(client, cli, tmp_path):
    exe = str(cli_path())
    pedestal, inputs, good = gpu_check.many_inputs(tmp_path, exe)
    with pytest.raises(ValueError, match="cluster"):
        cluda.dask.find_files(client, good, pedestal, tmp_path / "o", cluster_size=4)
    # Removed before the client names the outputs: reported without a task.
    victim = tmp_path / "victim.npy"
    rows = cluda.dask.find_files(client, [victim, good[2]], pedestal, tmp_path / "o", device="cpu")
    assert rows[0]["error"] and "victim.npy" in rows[0]["error"] and rows[0]["worker"] is None
    assert rows[1]["error"] is None and rows[1]["worker"] is not None
    assert rows[0].keys() == rows[1].keys(), "a failure's summary has every key"
    local = cluda.find_files([good[2]], pedestal, tmp_path / "local", device="cpu")
    assert set(rows[1]) == set(local[0]) | {"worker"}
    # A failure on the workers (no GPU there for device="gpu"): in every input's summary.
    if gpu_check.gpu_available():
        pytest.skip("a GPU is here: device='gpu' does not fail")
    rows = cluda.dask.find_files(client, good, pedestal, tmp_path / "gpu", device="gpu")
    assert len(rows) == 3
    for r in rows:
        assert r["error"] and "NoGpuError" in r["error"] and r["output"] is None, r
    assert not any((tmp_path / "gpu").iterdir()), "nothing written"
