"""Shared helpers: the `cluda` command line (for differential tests) and small random frames."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cli_path():
    """The built `cluda` binary: $CLUDA_BIN, else target/release/cluda of this repository."""
    p = pathlib.Path(os.environ.get("CLUDA_BIN", ROOT / "target" / "release" / "cluda"))
    return p if p.exists() else None


@pytest.fixture(scope="session")
def cli():
    """Runs the `cluda` CLI with arguments; returns its stdout. Skips when it is not built."""
    exe = cli_path()
    if exe is None:
        pytest.skip("target/release/cluda is not built (cargo build --release)")

    def run(*args):
        res = subprocess.run(
            [str(exe), *map(str, args)], capture_output=True, text=True, check=False
        )
        assert res.returncode == 0, f"cluda {' '.join(map(str, args))}: {res.stderr}"
        return res.stdout

    return run


def random_frames(rng, frames, rows, cols, baseline=1000, noise=5.0, photons=0.05):
    """Dark-ish uint16 frames: a per-pixel baseline, Gaussian noise, and sparse bright hits
    (some spread over neighbours) so that every classification case occurs."""
    base = baseline + rng.integers(-20, 20, size=(rows, cols))
    sigma = rng.uniform(0.5, noise, size=(rows, cols))
    x = base + sigma * rng.standard_normal((frames, rows, cols))
    hits = rng.random((frames, rows, cols)) < photons
    x += hits * rng.uniform(10, 400, size=(frames, rows, cols))
    # Neighbour charge: shift a fraction of each hit to the right and downwards.
    x[:, :, 1:] += 0.3 * (hits * 200)[:, :, :-1]
    x[:, 1:, :] += 0.2 * (hits * 200)[:, :-1, :]
    return np.clip(np.rint(x), 0, 65535).astype(np.uint16)
