"""The GPU checks of `gpu_check.py` under pytest (marker `gpu`): every find path on the GPU
against the CPU finder, and against the `cluda` command when it is built. Skipped, not
failed, where there is no GPU."""

import pytest

import gpu_check
from conftest import cli_path

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu():
    if not gpu_check.gpu_available():
        pytest.skip("no CUDA GPU here")


def test_every_path_on_the_gpu_equals_the_cpu(tmp_path, gpu):
    cli = cli_path()
    ran, failures = gpu_check.run_all(tmp_path, "gpu", str(cli) if cli else None, frames=300)
    assert ran >= 8
    assert not failures, "\n".join(f"{n}: {m}" for n, m in failures)
