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


def test_match_v4_equals_v2_bit_for_bit(gpu):
    import numpy as np

    import cluda

    rng = np.random.default_rng(27)
    lhs = rng.random((300, 128), dtype=np.float32)
    rhs = rng.random((1000, 128), dtype=np.float32)
    copies = len(rhs[::7])  # 143 exact copies of left rows: zero distances
    rhs[::7] = lhs[:copies]
    i2, d2 = cluda.match_nearest(lhs, rhs, version="v2")
    i4, d4 = cluda.match_nearest(lhs, rhs, version="v4")
    np.testing.assert_array_equal(i4, i2)
    np.testing.assert_array_equal(d4.view(np.uint32), d2.view(np.uint32))
